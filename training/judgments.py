"""Linked judgments: a drone flight request beside 1-3 zone notices, and answers that follow.

The answers are computed, never drawn: the route (as written) is intersected with each
notice's gold footprint (shapely), the planned height compared with its limits (all
heights here are above ground) and the flight window with its validity. Schedules are
left out of these notices so that validity alone decides whether a zone is in force.
Knows nothing of models; notice wording comes from the notice renderers.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from shapely.geometry import LineString

from clover_struct.schemas.airspace import NoFlyZone
from clover_struct.airspace.flight import ends_soon, judgment_text
from clover_struct.schemas.dispatch import Action, DispatchJudgments
from clover_struct.schemas.units import destination_point

from . import draw
from .dispatches import drone_id
from .drone import en_notice, zh_notice
from .families import NOTAM_LAYOUTS
from .zone_notams import zone_notice


def _render_notice(rng: random.Random, family: str, spec: draw.ZoneSpec) -> tuple[str, NoFlyZone]:
    if family in NOTAM_LAYOUTS:
        return zone_notice(rng, family, spec)[:2]
    if family == "drone_zh":
        return zh_notice(rng, spec)[:2]
    return en_notice(rng, spec, family)[:2]


def answers(
    route: list[tuple[float, float]], height_m: float, start: datetime, end: datetime,
    zones: list[NoFlyZone], authorisable: list[bool],
) -> DispatchJudgments:
    """The judgments for a route of (lat, lon) points flown at height_m AGL over [start, end]."""
    line = LineString([(lon, lat) for lat, lon in route])
    cross = vert = when = False
    conflicts: list[tuple[NoFlyZone, bool]] = []
    for zone, auth in zip(zones, authorisable):
        if not zone.footprint().intersects(line):
            continue
        v = zone.floor_m <= height_m and (zone.ceiling_m is None or height_m <= zone.ceiling_m)
        t = (zone.valid_from is None or zone.valid_from <= end) and (zone.valid_to is None or zone.valid_to >= start)
        cross, vert, when = True, vert or v, when or t
        if v and t:
            conflicts.append((zone, auth))
    blocking = [z for z, auth in conflicts if not auth]
    must_change = bool(blocking)
    needs_auth = bool(conflicts) and not must_change
    if not conflicts:
        action = Action.PROCEED
    elif needs_auth:
        action = Action.REQUEST_AUTHORISATION
    elif all(ends_soon(z.valid_to, start) for z in blocking):
        action = Action.DELAY
    else:
        action = Action.REROUTE
    return DispatchJudgments(
        crosses_zone=cross, vertical_overlap=vert, time_overlap=when, conflict=bool(conflicts),
        authorisation_needed=needs_auth, route_must_change=must_change, can_start_now=not conflicts, action=action,
    )


@dataclass
class JudgmentCase:
    """One example and what it was built from: the flight request as data (as a dispatch
    system would hold it) and each notice's text and gold zone."""

    text: str
    request: str                         # the flight request, the text's first part
    gold: DispatchJudgments
    route: list[tuple[float, float]]     # (lat, lon) as written
    height_m: float                      # above ground
    start: datetime
    end: datetime
    notices: list[str]
    zones: list[NoFlyZone]


def judgment_case(rng: random.Random, notice_families: tuple[str, ...]) -> JudgmentCase:
    lat, lon = draw.world_point(rng, 70.0)
    lon = max(-175.0, min(175.0, lon))
    points = [(lat, lon)]
    for _ in range(rng.randint(1, 3)):
        points.append(destination_point(*points[-1], rng.uniform(0, 360), rng.uniform(500, 8000)))
    k = rng.choice([4, 5])
    written = [(draw.decimal(a, k), draw.decimal(b, k)) for a, b in points]
    route = [(float(a), float(b)) for a, b in written]
    start = draw.instant(rng, 5)
    end = start + timedelta(minutes=rng.randrange(10, 240, 5))
    if rng.random() < 0.5:
        height_text, height_m = f"{(h := rng.randrange(20, 400, 5))} m AGL", float(h)
    else:
        height_text, height_m = f"{(h := rng.randrange(50, 1300, 10))} ft AGL", h * 0.3048

    notices, zones, auth = [], [], []
    for _ in range(rng.randint(1, 3)):
        anchor = rng.choice(route)
        near = rng.random() < 0.75
        offset = rng.uniform(0, 3000) if near else rng.uniform(15_000, 60_000)
        center = destination_point(*anchor, rng.uniform(0, 360), offset)
        overlap = rng.random() < 0.7
        z_start = (start - timedelta(minutes=rng.randrange(0, 3 * 24 * 60)) if overlap
                   else end + timedelta(minutes=rng.randrange(30, 20 * 24 * 60)))
        spec = draw.zone_spec(rng, center=center, agl_only=True, start=z_start)
        spec.windows = []
        if overlap and (rng.random() < 0.3 or spec.end is not None and spec.end < start and rng.random() < 0.5):
            # Short or about-to-end restrictions, so that "delay" answers are not rare.
            spec.end = start + timedelta(minutes=rng.randrange(5, 30 * 60))
        text, zone = _render_notice(rng, rng.choice(notice_families), spec)
        notices.append(text)
        zones.append(zone)
        auth.append(spec.authorisable)

    arrow = rng.choice([" -> ", " to ", "; "])
    request = "\n".join([
        f"FLIGHT REQUEST {draw.letters(rng, 2)}-{rng.randint(100, 9999)}",
        f"Aircraft: {drone_id(rng)} (unmanned)",
        "Route: " + arrow.join(f"{a}, {b}" for a, b in written),
        f"Height: {height_text}",
        f"Window: {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC",
    ])
    return JudgmentCase(judgment_text(request, notices), request, answers(route, height_m, start, end, zones, auth), route, height_m, start, end,
                        notices, zones)
