"""Drone dispatch messages with 2-8 typed tasks, as radio-style text or a numbered list.

Each task is drawn as gold values first and then phrased; strings in the gold (ids,
destinations, reasons, sender) are exactly what the text shows. Knows nothing of models.
"""

from __future__ import annotations

import random
from datetime import time

from clover_struct.schemas.dispatch import DispatchMessage

from . import draw
from .draw import decimal, place

MISSION_WORDS = {
    "survey": ["survey", "site survey"], "medical": ["medical", "medical supply"],
    "delivery": ["delivery", "parcel delivery"], "inspection": ["inspection", "infrastructure inspection"],
    "search_rescue": ["search and rescue", "SAR"], "mapping": ["mapping", "photogrammetry mapping"],
}
SITES = ("Clinic", "Depot", "Substation", "Quarry", "Farm", "Bridge", "Hospital", "Pier", "Pumping Station", "")
TASK_WEIGHTS = {"zone_lifted": 2, "waypoint_changed": 3, "mission_assigned": 3, "altitude_changed": 2, "flight_hold": 2}
HOLD_REASONS = ("high winds", "low visibility", "bird activity", "battery check", "police request", "traffic conflict",
                "thunderstorm", "GNSS outage")


def drone_id(rng: random.Random) -> str:
    form = rng.randrange(3)
    if form == 0:
        return f"{draw.letters(rng, rng.randint(2, 4))}-{rng.randint(1, 999)}"
    if form == 1:
        return f"{draw.letters(rng, 2)}{rng.randint(0, 999):03d}"
    return f"{draw.letters(rng, rng.randint(3, 5))}-{rng.randint(1, 99)}{draw.letters(rng, 1)}"


def zone_id(rng: random.Random) -> str:
    return rng.choice([
        f"R-{rng.randint(1, 999)}", f"{draw.letters(rng, 1)}{rng.randint(1, 9999):04d}/{rng.randint(0, 49):02d}",
        f"TRA{rng.randint(1, 99)}", f"D{rng.randint(1, 999):03d}", f"{draw.letters(rng, 2)}-R{rng.randint(1, 99)}",
    ])


def _clock(t: time, radio: bool) -> str:
    return f"{t:%H%M}Z" if radio else f"{t:%H:%M} UTC"


def _task(rng: random.Random, drones: list[str], radio: bool, area: tuple[float, float],
          weights: dict[str, float]) -> tuple[str, dict]:
    kind = rng.choices(list(weights), weights=list(weights.values()))[0]
    up = str.upper if radio else (lambda s: s)
    d = rng.choice(drones)
    if kind == "zone_lifted":
        z = zone_id(rng)
        at = time(rng.randrange(24), rng.choice([0, 15, 30, 45, rng.randrange(60)])) if rng.random() < 0.6 else None
        when = "" if at is None else (f" EFFECTIVE {_clock(at, radio)}" if radio else f" from {_clock(at, radio)}")
        prose = [f"Zone {z} is lifted{when}", f"Restriction {z} lifted{when}"]
        text = f"ZONE {z} LIFTED{when}" if radio else rng.choice(prose)
        return text, {"kind": kind, "zone_id": z, "effective_utc": at}
    if kind == "waypoint_changed":
        lat = max(-89.9, min(89.9, area[0] + rng.uniform(-0.4, 0.4)))
        lon = max(-179.9, min(179.9, area[1] + rng.uniform(-0.4, 0.4)))
        k = rng.choice([4, 5, 6])
        a, b, n = decimal(lat, k), decimal(lon, k), rng.randint(1, 20)
        text = f"{d} WP{n} MOVED TO {a} {b}" if radio else rng.choice(
            [f"Move waypoint {n} of {d} to {a}, {b}", f"{d}: waypoint {n} changed to ({a}, {b})"])
        return text, {"kind": kind, "drone_id": d, "waypoint": n, "lat": float(a), "lon": float(b)}
    if kind == "mission_assigned":
        mtype = rng.choice(list(MISSION_WORDS))
        dest = f"{place(rng, title=True)} {rng.choice(SITES)}".strip()
        priority = rng.choice(["routine", "routine", "priority", "urgent"])
        if priority == "routine" and rng.random() < 0.5:
            pri_text = ""
        elif radio:
            forms = [priority.upper(), f"PRIORITY {priority.upper()}"] if priority != "priority" else ["PRIORITY"]
            pri_text = " " + rng.choice(forms)
        else:
            pri_text = f" ({priority})"
        words = rng.choice(MISSION_WORDS[mtype])
        text = f"{d} ASSIGNED {up(words)} MISSION TO {up(dest)}{pri_text}" if radio else rng.choice(
            [f"Assign {d} a {words} mission to {dest}{pri_text}", f"{d}: {words} mission, destination {dest}{pri_text}"])
        return text, {"kind": kind, "drone_id": d, "mission_type": mtype, "priority": priority, "destination": up(dest)}
    if kind == "altitude_changed":
        unit = rng.choice(["M", "FT"])
        value = rng.randrange(20, 500, 5) if unit == "M" else rng.randrange(100, 1600, 50)
        verb = rng.choice(["CLIMB", "DESCEND", "CHANGE ALTITUDE"])
        unit_text = "m" if unit == "M" else "ft"
        text = f"{d} {verb} TO {value}{unit}" if radio else f"Set {d} cruise altitude to {value} {unit_text}"
        return text, {"kind": kind, "drone_id": d, "value": float(value), "unit": unit}
    until = time(rng.randrange(24), rng.choice([0, 30, rng.randrange(60)])) if rng.random() < 0.6 else None
    reason = up(rng.choice(HOLD_REASONS)) if rng.random() < 0.7 else None
    tail = ("" if until is None else f" UNTIL {_clock(until, radio)}" if radio else f" until {_clock(until, radio)}")
    tail += "" if reason is None else (f" DUE {reason}" if radio else f" due to {reason}")
    text = f"{d} HOLD{tail}" if radio else f"{d} to hold{tail or ' until further notice'}"
    return text, {"kind": "flight_hold", "drone_id": d, "until_utc": until, "reason": reason}


def dispatch_example(rng: random.Random, family: str,
                     weights: dict[str, float] = TASK_WEIGHTS) -> tuple[str, DispatchMessage]:
    """One message of `family` and its gold; `weights`: how often each kind of task is drawn."""
    radio = family == "dispatch_radio"
    drones = [drone_id(rng) for _ in range(rng.randint(1, 4))]
    area = draw.world_point(rng)  # one operating area per message
    tasks = [_task(rng, drones, radio, area, weights) for _ in range(rng.randint(2, 8))]
    sender = f"{rng.choice(['OPS', 'DISPATCH', 'CONTROL', 'HUB'])}-{place(rng)[:14].strip()}" if rng.random() < 0.8 else None
    issued = time(rng.randrange(24), rng.randrange(60)) if rng.random() < 0.8 else None
    if radio:
        head = "DISPATCH" + ("" if issued is None else f" {issued:%H%M}Z") + ("" if sender is None else f" FROM {sender}")
        text = head + ". " + ". ".join(t for t, _ in tasks) + ". END"
    else:
        sender = None if sender is None else sender.title()
        head = [] if sender is None else [f"From: {sender}"]
        head += [] if issued is None else [f"Time: {issued:%H:%M} UTC"]
        bullet = rng.choice(["{i}. ", "- ", "({i}) "])
        text = "\n".join(head + ["Tasks:"] + [bullet.format(i=i + 1) + t for i, (t, _) in enumerate(tasks)])
    gold = DispatchMessage(sender=sender, issued_utc=issued, tasks=[g for _, g in tasks])
    return text, gold
