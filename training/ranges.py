"""Rocket-range and space-debris danger areas: NOTAMs whose item E lists a polygon.

The shapes of the Asia-Pacific services' notices (family `zone_range`): 3 to 31 vertices,
most often 4 or 6, tens to hundreds of kilometres across, written as joined prefix pairs
(N2609E11430-N2615E11400-...) cut into fixed-width lines wherever the width falls, one
vertex a line with suffix letters (194300N 1183800E -), spaced groups (S40 53 00 E 094 23
00), minutes only (2232S 08521E), closed by a repeat of the first vertex, by BACK TO START,
or not at all; SFC to UNL mostly, windows of minutes to hours. The wording is this
module's own. Returns the text, the gold NoFlyZone (every value a piece of the text) and
its meaning. Knows nothing of models; the real notices are never read here.
"""

from __future__ import annotations

import math
import random
from datetime import timedelta

from clover_struct.schemas.airspace import MAX_VERTICES, NoFlyZone

from . import draw
from . import notation as N
from .draw import place
from .notams import _notam_id, _pick, _signed_minutes

VERTEX_COUNTS = {4: 50, 6: 17, 5: 6, 8: 6, 3: 4, 7: 3, **{n: 1 for n in range(9, 15)},
                 **{n: 0.3 for n in range(15, MAX_VERTICES)}}   # 15-31: real boundaries reach 31
NOTATIONS = {"dms_prefix_joined": 35, "dm_prefix_joined": 15, "dms_lines": 25, "dm_suffix": 8, "spaced_lines": 7,
             "dms_suffix_dashes": 10, "dm_prefix_lines": 6}
AUTHORITIES = ("THE STATE AVIATION AUTHORITY", "THE CIVIL AVIATION AUTHORITY", "THE LAUNCH SITE", "THE RANGE OFFICE",
               "THE AIR NAVIGATION SERVICE PROVIDER")
OPERATORS = ("CHINA", "JAPAN", "INDIA", "KOREA", "THE LAUNCH PROVIDER", "THE SPACE AGENCY")
ACTIVITIES = ("AEROSPACE FLIGHT ACTIVITY", "AEROSPACE FLT ACT", "ROCKET LAUNCH", "ROCKET LAUNCHING ACTIVITIES",
              "SPACE DEBRIS FALL", "SATELLITE LAUNCH", "MISSILE FIRING", "LAUNCH VEHICLE RECOVERY")


def _polygon(rng: random.Random, n: int) -> list[tuple[float, float]]:
    """n vertices around a centre, in order round it (a simple polygon), or a long strip;
    kept off the poles and the antimeridian."""
    while True:
        points = _around(rng, n)
        if all(abs(a) < 85 and abs(b) < 179.9 for a, b in points):
            return points


def _around(rng: random.Random, n: int) -> list[tuple[float, float]]:
    lat = rng.uniform(-45, 50) if rng.random() < 0.85 else rng.uniform(-70, 70)
    lon = rng.uniform(75, 178) if rng.random() < 0.7 else rng.uniform(-178, 178)
    size = math.exp(rng.uniform(math.log(20_000), math.log(400_000))) * (2.5 if n > 12 else 1)
    shrink = math.cos(math.radians(lat))
    if n == 4 and rng.random() < 0.5:   # a fall strip: a rotated rectangle, long and narrow
        bearing, w = rng.uniform(0, math.pi), size * rng.uniform(0.1, 0.4)
        corners = [(-size, -w), (size, -w), (size, w), (-size, w)]
        return [(lat + (x * math.cos(bearing) - y * math.sin(bearing)) / 111_320,
                 lon + (x * math.sin(bearing) + y * math.cos(bearing)) / 111_320 / shrink) for x, y in corners]
    step = 2 * math.pi / n
    angles = [k * step + rng.uniform(-0.3, 0.3) * step for k in range(n)]
    if rng.random() < 0.5:
        angles.reverse()
    return [(lat + size * rng.uniform(0.6, 1.0) * math.cos(a) / 111_320,
             lon + size * rng.uniform(0.6, 1.0) * math.sin(a) / 111_320 / shrink) for a in angles]


def _points(rng, vertices, notation):
    """[(lat piece, lon piece, exact (lat, lon))] in the notation's coordinate form."""
    form = {"dms_prefix_joined": "dms_prefix", "dm_prefix_joined": "dm_prefix", "dms_lines": "dms",
            "dm_suffix": "dm", "spaced_lines": "spaced_prefix", "dms_suffix_dashes": "dms",
            "dm_prefix_lines": "dm_prefix"}[notation]
    out, gap = [], rng.choice(["", " "])   # one spacing per notice: 'E 094 23 00' or 'E094 23 00'
    for lat, lon in vertices:
        a, x = N.coordinate(lat, "lat", form)
        b, y = N.coordinate(lon, "lon", form)
        if form == "spaced_prefix":
            a, b = a[0] + gap + a[1:], b[0] + gap + b[1:]
        out.append((a, b, (x, y)))
    return out


def _listed(rng, points, notation, close: str) -> str:
    joined = notation.endswith("joined") or (notation == "dm_suffix" and rng.random() < 0.5)
    pairs = [a + b if joined else f"{a} {b}" for a, b, _ in points]
    back = rng.choice([" BACK TO START", ",BACK TO START", " BACK TO START."]) if close == "back" else ""
    if notation.endswith("joined"):
        return N.hard_wrap("-".join(pairs) + back, rng.randint(58, 70))
    if notation == "dm_suffix":   # by dashes or commas, each pair joined ('1530S15012E') or not, one way a notice
        return rng.choice([" - ", ", ", ",\n"]).join(pairs) + back
    if notation == "dms_suffix_dashes":
        return " - ".join(pairs) + back
    indent = rng.choice(["", "", "  "])
    dash = " -" if notation == "dms_lines" and rng.random() < 0.6 else ""
    return "\n".join(indent + p + (dash if i < len(pairs) - 1 else "") for i, p in enumerate(pairs)) + back


def range_notice(rng: random.Random) -> tuple[str, NoFlyZone, N.Meant]:
    n = _pick(rng, VERTEX_COUNTS)
    vertices = _polygon(rng, n)
    notation = _pick(rng, NOTATIONS)
    points = _points(rng, vertices, notation)
    while len({p[2] for p in points}) < 3:   # a polygon too small for its notation: draw again
        vertices = _polygon(rng, n)
        points = _points(rng, vertices, notation)
    close = _pick(rng, {"repeat": 40, "back": 30, "open": 30} if notation.endswith("joined")
                  else {"repeat": 60, "back": 10, "open": 30})
    if close == "repeat" and n < MAX_VERTICES:
        points.append(points[0])
    meant = N.Meant(kind="polygon", vertices=[p[2] for p in points[:n]])

    activity = rng.choice(ACTIVITIES)
    P = place(rng)
    intro = rng.choice([
        ("A TEMPORARY DANGER AREA ESTABLISHED BOUNDED BY:", None),
        ("A TEMPORARY RESTRICTED AREA ESTABLISHED BOUNDED BY:", None),
        (f"{activity} WILL TAKE PLACE WI THE AREA BOUNDED BY:", activity),
        (f"DUE TO {activity}, FLIGHT SAFETY MAY BE AFFECTED IN THE FLW AREA:", activity),
        (f"{activity}. EST FALL AREA OF DEBRIS WI:", activity),
        (f"AIRSPACE CLOSED DUE TO {activity}.\nAREA AS FLW:\nGEO:", activity),
        (f"DANGER AREA ACTIVATED FOR {activity} BOUNDED BY", activity),
        (f"SPECIAL OPS ({activity}) WILL TAKE PLACE WI:", activity),
        (f"{rng.choice([activity, f'SPECIAL OPS ({activity})'])} WILL BE CONDUCTED"
         f"{rng.choice(['', '', f' BY {rng.choice(OPERATORS)}'])}.\nEST FALL AREA {rng.choice(['OF', 'FOR'])} "
         f"{rng.choice(['DEBRIS', 'UNBURNED DEBRIS', 'ROCKET STAGE'])} WI:", activity),
        (f"{activity} AS ADVISED BY {rng.choice(AUTHORITIES)}:\nDUE TO {activity}, THE SAFETY OF AIRCRAFT IN THE AREA "
         "BELOW MAY BE AFFECTED:", activity),
        (f"{rng.choice(['NATIONAL ', 'FOREIGN ', ''])}{activity} WILL TAKE PLACE, INFO RECEIVED FROM "
         f"{rng.choice(AUTHORITIES)}. AIRCRAFT SAFETY MAY BE AFFECTED WI THE FLW AREA:", activity),
    ])
    if rng.random() < 0.15:
        head = rng.choice(["TEMPO DANGER AREA ACT", "TEMPO RESTRICTED AREA ACT", "DANGER AREA ACT"])
        intro = (f"{head}\n{intro[0]}", intro[1])
    ending = rng.choice(["", "", f"\n({rng.randint(20, 400)}NM {rng.choice(['N', 'NE', 'SE', 'WEST', 'NORTHWEST'])} OF "
                                  f"{P} AP).", "\nAIRCRAFT ARE FORBIDDEN TO FLY INTO THE AREA.",
                         "\nFOUR POINT CONNECTION RANGE." if n == 4 and close == "open" else ""])
    vertical = rng.random() < 0.4   # 'VERTICAL LIMITS:SFC-UNL.' in item E
    fir = rng.choice(["ZXXX", draw.letters(rng, 4)])
    start = draw.instant(rng, rng.choice([1, 1, 5]))
    end = start + timedelta(minutes=rng.randint(10, 120) if rng.random() < 0.8 else rng.randint(120, 60 * 24 * 4))
    meant.valid_from, meant.valid_to = start, end
    schedule = f"{draw.hhmm(rng)}-{draw.hhmm(rng)}" if end - start > timedelta(days=1) and rng.random() < 0.6 else None
    ceiling_fl = None if rng.random() < 0.85 else rng.choice([180, 245, 300, 450, 600, 660])
    upper = "UNL" if ceiling_fl is None else f"FL{ceiling_fl:03d}"
    if ceiling_fl is not None:
        meant.ceiling_m, meant.ceiling_ref = ceiling_fl * 100 * N.FT, "STD"
    body = f"{intro[0]}\n{_listed(rng, points, notation, close)}"
    if vertical:
        body += f"\nVERTICAL LIMITS:SFC-{upper}."
    body += ending
    items_fg = not vertical or rng.random() < 0.7

    lat_c = sum(p[2][0] for p in points[:n]) / n
    lon_c = sum(p[2][1] for p in points[:n]) / n
    nid = _notam_id(rng, "notam_icao", start.year)
    q = (f"Q) {fir}/Q{rng.choice(['RD', 'RT', 'WM', 'RR', 'XX'])}{rng.choice(['CA', 'LW', 'XX'])}/IV/"
         f"{rng.choice(['BO', 'BO ', 'NBO'])}/{rng.choice(['W', 'W ', 'AW', 'E'])}/000/"
         f"{999 if ceiling_fl is None else ceiling_fl:03d}/"
         f"{draw.q_coordinates(_signed_minutes(lat_c) / 60, _signed_minutes(lon_c) / 60)}{rng.randint(5, 600):03d}")
    locations = " ".join(draw.location(rng) for _ in range(rng.choice([1, 1, 1, 2, 4])))
    b, c = N.icao_time(start), N.icao_time(end)
    eol = rng.choice([" \n", "\n", "\n", "\r\n"])
    abc = [f"A) {locations} B) {b} C) {c}"] if rng.random() < 0.7 else [f"A) {locations}", f"B) {b} C) {c}"]
    lines = [f"{nid} NOTAMN", q] + abc + ([f"D) {schedule}"] if schedule else []) + [f"E) {body}"]
    if items_fg:
        lines.append("F) SFC G) " + upper)
    text = eol.join(line for part in lines for line in part.split("\n"))

    # The gold copies each piece as it stands in the text: a line cut inside a coordinate
    # shows there as a space ('N35 0047'), as verbatim slots read it.
    pairs = N.located(text, [(a, b_) for a, b_, _ in points], "E) ")
    gold = NoFlyZone(notam_id=nid, floor="SFC", ceiling=None if ceiling_fl is None else upper,
                     valid_from_raw=b, valid_to_raw=c, schedule=schedule, uas_only=False, reason=intro[1],
                     area=N.polygon_area(pairs))
    return text, gold, meant
