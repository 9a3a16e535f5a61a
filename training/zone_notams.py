"""Zone notices in ICAO layouts: item E gives a precise circle or polygon.

``zone_notice`` writes a ``ZoneSpec`` in one of the four NOTAM layouts of notams.py (the
general templates: displays, filming, exercises, UAS restrictions; circles and polygons
in compact, spaced or joined notations); ``uk_circle`` writes one as a UK pre-flight
bulletin does (WI 0.2NM RADIUS OF 545835N 0013731W, a MAX HGT in item E or items F/G,
item D schedules). Each returns the text, the NoFlyZone that copies its pieces and what
they mean (notation.Meant). Knows nothing of models; the real notices are never read here.
"""

from __future__ import annotations

import math
import random
from clover_struct.schemas.airspace import NoFlyZone

from . import draw
from . import notation as N
from .draw import ZoneSpec, place
from .notams import FIRST, LAST, NotamValues, _fl_of, _notam_id, _pick, _signed_minutes, draw_values, item_c, render

ZONE_REASONS = (
    "FIREWORK DISPLAY", "LASER DISPLAY", "SEARCHLIGHT DISPLAY", "AERIAL SURVEY", "FILMING", "PARACHUTE DROPPING",
    "UAS OPR", "BVLOS UAS OPS", "MODEL ACFT FLYING", "BALLOON RELEASE", "MILITARY EXERCISE", "GUN FIRING",
    "SEARCH AND RESCUE OPS", "AIR DISPLAY", "CROP SPRAYING", "POWERLINE INSPECTION", "SECURITY OPS",
    "VIP MOVEMENT", "WILDFIRE FIGHTING", "SPORTING EVENT", "ROCKET LAUNCH", "PIPELINE SURVEY",
)
UK_ACTIVITIES = ("FLYING OF LARGE MODEL ACFT", "UAS OPR", "FIREWORK DISPLAY", "LASER DISPLAY", "SEARCHLIGHT DISPLAY",
                 "FILMING", "BALLOON RELEASE", "PYROTECHNIC DISPLAY", "KITE FLYING", "TETHERED BALLOON")


def extent_m(spec: ZoneSpec) -> float:
    if spec.radius_m is not None:
        return spec.radius_m
    lat0, lon0 = spec.center
    shrink = math.cos(math.radians(lat0))
    return max(math.hypot((a - lat0) * 111_320, (b - lon0) * 111_320 * shrink) for a, b in spec.vertices)


def _position(lat: float, lon: float, notation: str, joined: bool, places: int = 0) -> tuple[str, str, str, tuple]:
    """(text, lat piece, lon piece, exact (lat, lon)) of one point."""
    a, x = N.coordinate(lat, "lat", notation, places)
    b, y = N.coordinate(lon, "lon", notation, places)
    return a + ("" if joined else " ") + b, a, b, (x, y)


def _limits(rng, spec: ZoneSpec, meant: N.Meant) -> tuple[str, str]:
    """Items F and G as written, with the meaning stored in `meant`."""
    lower, meant.floor_m, meant.floor_ref = N.icao_limit(rng, spec.floor_m, spec.floor_ref, True)
    upper, value, ref = N.icao_limit(rng, spec.ceiling_m, spec.ceiling_ref, False)
    if upper is not None:
        meant.ceiling_m, meant.ceiling_ref = value, ref
    return lower, upper or "UNL"


def zone_notice(rng: random.Random, layout: str, spec: ZoneSpec) -> tuple[str, NoFlyZone, N.Meant]:
    """A NOTAM whose item E gives the precise zone of `spec`, its gold and meaning."""
    reason, P = rng.choice(ZONE_REASONS), place(rng)
    meant = N.Meant()
    notation = _pick(rng, {"dms": 70, "dm": 10, "spaced_suffix": 5, "dms_prefix": 10, "dm_prefix": 5})
    if notation.startswith("dm_") or notation == "dm":   # whole minutes (1.85 km) only for large areas
        notation = notation if extent_m(spec) > 15_000 else notation.replace("dm", "dms")
    joined = notation in ("dms_prefix", "dm_prefix") or notation in ("dms", "dm") and rng.random() < 0.15
    places = rng.choice([0, 0, 0, 1, 2]) if notation == "dms" else 0
    if spec.radius_m is not None:
        unit = _pick(rng, {"NM": 80, "M": 10, "KM": 7, "FT": 3})
        unit = "KM" if unit in ("M", "FT") and spec.radius_m >= 3000 else unit
        r, meant.radius_m = N.radius(rng, spec.radius_m, unit, [unit])
        text, lat, lon, meant.center = _position(*spec.center, notation, joined, places)
        area_text = f"WI {r} RADIUS{rng.choice([' OF', ' OF', ':', '', ' OF PSN'])} {text}"
        area, meant.kind = N.circle_area(lat, lon, r), "circle"
    else:
        pts = [_position(a, b, notation, joined, places) for a, b in spec.vertices]
        meant.kind, meant.vertices = "polygon", [p[3] for p in pts]
        close = _pick(rng, {"repeat": 60, "back": 15, "open": 25})
        if close == "repeat":
            pts.append(pts[0])  # notices usually close the ring by repeating the first vertex
        listed = rng.choice([" - ", "-", " -\n"]).join(p[0] for p in pts) + " BACK TO START" * (close == "back")
        area_text = f"WI {rng.choice(['', 'AN '])}AREA BOUNDED BY{rng.choice(['', ':'])} {listed}"
        area = [(p[1], p[2]) for p in pts]   # located in the laid-out text below
    if spec.uas_only:
        head = rng.choice([f"UAS RESTRICTION DUE TO {reason}", f"RESTRICTED AREA (TEMPORARY) FOR UAS ONLY DUE TO {reason}",
                           f"{reason}. UAS FLIGHTS PROHIBITED", f"{reason}. UNMANNED ACFT PROHIBITED",
                           f"UAS FLIGHTS PROHIBITED DUE TO {reason}", f"UNMANNED ACFT FLIGHTS PROHIBITED DUE TO {reason}"])
    else:
        head = rng.choice([reason, f"RESTRICTED AREA (TEMPORARY) ESTABLISHED DUE TO {reason}",
                           f"{reason}. ALL ACFT PROHIBITED", f"PILOTS ARE REQUESTED NOT TO OVERFLY {reason}",
                           f"ALL FLIGHTS PROHIBITED DUE TO {reason}"])
    body = f"{head} {area_text} ({P})."
    if spec.authorisable:
        body += f" FLIGHTS WI THE AREA REQUIRE PRIOR PERMISSION FROM {place(rng)} ATC ON {draw.phone(rng)}."
    elif rng.random() < 0.3:
        body += rng.choice([" NO EXEMPTIONS.", " ENTRY PROHIBITED."])
    if rng.random() < 0.4:
        body += f" FOR INFO {draw.phone(rng)}. AR-{(spec.start or draw.instant(rng)).year}-{rng.randint(1, 9999):04d}/01."

    v = draw_values(rng, layout)
    start = spec.start
    if start is None:  # item B is mandatory: put one before the stated end
        start = draw.instant(rng) if spec.end is None else max(spec.end - draw.duration(rng), FIRST)
    meant.valid_from, meant.valid_to = start, spec.end
    lower, upper = _limits(rng, spec, meant)
    schedule = None
    if spec.windows:
        schedule = rng.choice(["DLY ", ""]) + " ".join(f"{a}-{b}" for a, b in spec.windows)
    nid = None if v.notam_id is None else _notam_id(rng, layout, start.year)
    zone_code = "Q" + rng.choice(draw.ZONE_SUBJECTS) + rng.choice(["LW", "CA", "LW", "AW", "CS"])
    v = NotamValues(
        notam_id=nid, notam_type=None if nid is None else "NOTAMN", replaces=None, fir=v.fir,
        qcode=zone_code if rng.random() < 0.8 else v.qcode, traffic=rng.choice(["IV", "IV", "V"]),
        purpose=rng.choice(["BO", "NBO", "M"]), scope=rng.choice(["W", "AW", "W", "E"]),
        lower_fl=_fl_of(lower, False), upper_fl=_fl_of(upper, True),
        q_minutes=(_signed_minutes(spec.center[0]), _signed_minutes(spec.center[1])),
        radius_nm=max(1, math.ceil(extent_m(spec) / 1852)), location=v.location, valid_from=start,
        valid_to=spec.end, permanent=spec.end is None, estimated=False, schedule=schedule,
        lower=lower, upper=upper, body=body,
    )
    text = render(v, item_c(v, rng), layout, rng)
    if isinstance(area, list):   # a wrapped line may cut a long run of joined vertices inside one
        area = N.polygon_area(N.located(text, area, "E) "))
    gold = NoFlyZone(
        notam_id=v.notam_id, floor=lower, ceiling=None if upper == "UNL" else upper,
        valid_from_raw=N.icao_time(start), valid_to_raw=None if spec.end is None else N.icao_time(spec.end),
        utc_offset_hours=0, schedule=schedule, uas_only=spec.uas_only, reason=reason, area=area,
    )
    return text, gold, meant


def window(rng: random.Random, spec: ZoneSpec) -> tuple:
    """A start and an end for a notice that states both: the spec's, a missing one drawn."""
    start, end = spec.start, spec.end
    if start is None:
        start = draw.instant(rng) if end is None else max(end - draw.duration(rng), FIRST)
    if end is None:
        end = min(start + draw.duration(rng), LAST)
    return start, end


def uk_circle(rng: random.Random, spec: ZoneSpec) -> tuple[str, NoFlyZone, N.Meant]:
    """A UK pre-flight-bulletin NOTAM: a small circle, its ceiling in items F/G or as a MAX HGT in E."""
    start, end = window(rng, spec)
    meant = N.Meant(kind="circle", valid_from=start, valid_to=end)
    metres = min(max(spec.radius_m or 1852.0, 185.2), 9260.0)
    r, meant.radius_m = N.radius(rng, metres, "NM", ["NM"])
    text, lat, lon, meant.center = _position(*spec.center, "dms", rng.random() < 0.1)
    activity, P = rng.choice(UK_ACTIVITIES), place(rng)
    ceiling_m = spec.ceiling_m or rng.uniform(30, 900)
    in_e = rng.random() < 0.3   # 'MAX HGT 500FT AGL' in item E, no items F/G
    if in_e:
        feet = max(50, round(ceiling_m / N.FT / 50) * 50)
        ceiling, meant.ceiling_m, meant.ceiling_ref = f"{feet}FT AGL", feet * N.FT, "AGL"
        lower = upper = None
        tail = f" MAX HGT {ceiling}."
    else:
        ref = rng.choice(["AMSL", "AMSL", "AMSL", "AGL"])
        lower, meant.floor_m, meant.floor_ref = "SFC", 0.0, "AGL"
        upper, value, _ = N.icao_limit(rng, ceiling_m, ref, False) if rng.random() < 0.85 else ("UNL", 0.0, None)
        if upper != "UNL":
            meant.ceiling_m, meant.ceiling_ref = value, ref
        ceiling = None if upper == "UNL" else upper
        tail = ""
        if ceiling and ref == "AMSL" and rng.random() < 0.3:
            tail = f" MAX HGT {max(10, round(ceiling_m / N.FT / 10) * 10 - rng.randint(1, 9) * 10)}FT AGL, {ceiling}."
    sep = rng.choice([" OF", " OF", ":", ""])
    body = f"{activity} WI {r} RADIUS{sep} {text} ({P}).{tail}"
    if rng.random() < 0.7:
        body += f" FOR INFO {draw.phone(rng)}. AR-{start.year}-{rng.randint(1, 9999)}/01."
    schedule = None
    if rng.random() < 0.4:
        schedule = rng.choice([f"{draw.hhmm(rng)}-{draw.hhmm(rng)}", "SR-SS", draw.icao_schedule(rng)])
    fir, loc = draw.letters(rng, 4), draw.letters(rng, 4)
    v = NotamValues(
        notam_id=_notam_id(rng, "notam_icao", start.year), notam_type="NOTAMN", replaces=None, fir=fir,
        qcode="Q" + rng.choice(["WU", "WE", "WM", "WP", "WL"]) + "LW", traffic="IV", purpose="BO",
        scope=rng.choice(["W", "AW"]), lower_fl=0, upper_fl=_fl_of(upper, True) if upper else
        math.ceil((meant.ceiling_m or 0) / N.FT / 100),
        q_minutes=(_signed_minutes(meant.center[0]), _signed_minutes(meant.center[1])),
        radius_nm=max(1, math.ceil(meant.radius_m / 1852)), location=loc, valid_from=start, valid_to=end,
        permanent=False, estimated=False, schedule=schedule, lower=lower, upper=upper, body=body,
    )
    gold = NoFlyZone(notam_id=v.notam_id, floor=lower, ceiling=ceiling, valid_from_raw=N.icao_time(start),
                     valid_to_raw=N.icao_time(end), schedule=schedule, uas_only=False, reason=activity,
                     area=N.circle_area(lat, lon, r))
    return render(v, item_c(v, rng), "notam_icao", rng), gold, meant

