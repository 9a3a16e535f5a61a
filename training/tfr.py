"""FAA temporary flight restrictions: domestic FDC NOTAM text and the plain TFR listing.

Family `zone_faa_tfr`. The FDC form runs on one line (`!FDC 6/4321 ZLA CA..AIRSPACE ...
WI AN AREA DEFINED AS 3NM RADIUS OF 340356N1181459W ... SFC-3000FT AGL EFFECTIVE
2612051200 UTC UNTIL 2612052000 UTC`), polygons as `... TO ... TO ...`; the listing
gives one field a line, its fields in any order and a circle perhaps split into `Center:`,
`Radius:` and `Altitude:` lines, with times such as `1200 UTC December 5, 2026` or `December
05, 2026 at 1200 UTC` and positions in symbols or decimals. The wording is this module's own.
Returns the text, the gold NoFlyZone and its meaning. Knows nothing of models; the real
notices are never read here.
"""

from __future__ import annotations

import random

from clover_struct.schemas.airspace import NoFlyZone

from . import draw
from . import notation as N
from .draw import ZoneSpec, place
from .zone_notams import window

STATES = "AL AK AZ AR CA CO CT DE FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ NM NY NC ND OH " \
         "OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY".split()
KINDS = ("SECURITY", "HAZARDS", "VIP", "SPACE OPERATIONS", "SPECIAL", "AIR SHOWS/SPORTS")
REASONS = ("FIRE FIGHTING OPERATIONS", "VIP MOVEMENT", "SPACE LAUNCH OPERATIONS", "STADIUM EVENT",
           "LAW ENFORCEMENT OPERATIONS", "HAZARDOUS MATERIALS SPILL", "DISASTER RELIEF", "AIR SHOW")


def _position(rng, lat, lon, notation, places=0):
    a, x = N.coordinate(lat, "lat", notation, places)
    b, y = N.coordinate(lon, "lon", notation, places)
    return a, b, (x, y)


def tfr_notice(rng: random.Random, spec: ZoneSpec) -> tuple[str, NoFlyZone, N.Meant]:
    """An FAA TFR in FDC NOTAM text (two thirds) or as the plain listing."""
    start, end = window(rng, spec)
    meant = N.Meant(valid_from=start, valid_to=end)
    reason, uas = rng.choice(REASONS), spec.uas_only and rng.random() < 0.3
    if rng.random() < 2 / 3:
        return _fdc(rng, spec, meant, start, end, reason, uas)
    return _listing(rng, spec, meant, start, end, reason, uas)


def _vertical(rng, spec: ZoneSpec, meant: N.Meant, fdc: bool) -> tuple[str, str, str]:
    """(phrase, floor piece, ceiling piece): the surface up to a height, MSL or AGL."""
    ref = "AGL" if spec.ceiling_ref == "AGL" or rng.random() < 0.4 else "AMSL"
    metres = spec.ceiling_m or rng.uniform(300, 5000)
    feet = max(100, round(metres / N.FT / 100) * 100)
    if fdc and feet > 1000 and rng.random() < 0.25:
        feet -= 1   # SFC-2999FT AGL, SFC-17999FT MSL: just below the next altitude
    meant.ceiling_m, meant.ceiling_ref = feet * N.FT, ref
    if fdc:
        floor = rng.choice(["SFC", "SURFACE"])
        ceiling = f"{feet}FT {'AGL' if ref == 'AGL' else 'MSL'}"
        phrase = f"{floor}-{ceiling}" if floor == "SFC" else f"{floor} UP TO AND INCLUDING {ceiling}"
        return phrase, floor, ceiling
    number = f"{feet:,}" if rng.random() < 0.5 else str(feet)
    ceiling = f"{number} feet {'AGL' if ref == 'AGL' else 'MSL'}"
    return f"from the surface up to and including {ceiling}", "surface", ceiling


def _fdc(rng, spec, meant, start, end, reason, uas):
    state, artcc = rng.choice(STATES), "Z" + draw.letters(rng, 2)
    nid = f"{start.year % 10}/{rng.randint(1000, 9999)}"
    if spec.radius_m is not None:
        r, meant.radius_m = N.radius(rng, max(spec.radius_m, 926.0), "NM", ["NM", "NM", " NM", " NAUTICAL MILES"])
        lat, lon, meant.center = _position(rng, *spec.center, "dms")
        meant.kind = "circle"
        navaid = f" ({draw.letters(rng, 3)} VOR/DME {rng.randint(1, 360):03d} DEGREES {rng.randint(1, 40)}.{rng.randint(0, 9)}NM)"
        where = f"{r} RADIUS OF {lat}{lon}{navaid if rng.random() < 0.6 else ''}"
        area = N.circle_area(lat, lon, r)
    else:
        pts = [_position(rng, a, b, "dms") for a, b in spec.vertices]
        meant.kind, meant.vertices = "polygon", [p[2] for p in pts]
        pts.append(pts[0])
        where = " TO ".join(a + b for a, b, _ in pts)
        area = N.polygon_area([(a, b) for a, b, _ in pts])
    vertical, floor, ceiling = _vertical(rng, spec, meant, True)
    icao, offset = rng.random() < 0.75, rng.choice([-4, -5, -6, -7, -8, -10]) if rng.random() < 0.4 else None
    (b_text, b), (c_text, c) = (_fdc_time(t, icao, offset) for t in (start, end))
    who = "UNMANNED AIRCRAFT OPERATIONS ARE PROHIBITED" if uas else rng.choice([
        "PURSUANT TO 14 CFR SECTION 91.137(A)(2)", "PURSUANT TO 49 USC 40103(B)", "PURSUANT TO 14 CFR SECTION 99.7"])
    why = f" {who} DUE TO {reason}." if uas or rng.random() < 0.7 else f" {who}."
    text = (f"!FDC {nid} {artcc} {state}..AIRSPACE {place(rng)}, {state}..TEMPORARY FLIGHT RESTRICTIONS "
            f"{rng.choice(['WI', 'WI', 'WITHIN'])} AN AREA DEFINED AS {where} {vertical} "
            f"EFFECTIVE {b_text} UNTIL {c_text}.{why}")
    if rng.random() < 0.6:
        text += (f" {place(rng)} {rng.choice(['POLICE', 'FIRE DEPT', 'EOC'])} TEL {rng.randint(200, 999)}-"
                 f"{rng.randint(200, 999)}-{rng.randint(1000, 9999)} IS THE POINT OF CONTACT.")
    if rng.random() < 0.7:
        text += f" {N.icao_time(start)}-{N.icao_time(end)}"
    if rng.random() < 0.3:
        text = text.replace(". ", ".\n")
    gold = NoFlyZone(notam_id=nid, floor=floor, ceiling=ceiling, valid_from_raw=b, valid_to_raw=c, uas_only=uas,
                     reason=reason if why.endswith(f"{reason}.") else None, area=area)
    return text, gold, meant


def _fdc_time(t, icao: bool, offset) -> tuple[str, str]:
    """(as written, the piece copied): '2612051200 UTC', perhaps with the local clock after it
    ('(0700 LOCAL 12/05/26)', offset hours from UTC), or '1200 UTC DECEMBER 5, 2026'."""
    if not icao:
        piece = N.english_time(N.local(t, 0), 4).upper()
        return piece, piece
    piece, local = N.icao_time(t), None if offset is None else N.local(t, offset)
    return f"{piece} UTC" + ("" if local is None else f" ({local:%H%M} LOCAL {local:%m/%d/%y})"), piece


def _listing(rng, spec, meant, start, end, reason, uas):
    """The TFR web listing: one field a line. The area on one line (`Area: Within 3 NM of ...,
    from the surface ...`) or, for a circle half the time, as the detail page splits it
    (`Center:`, `Radius:`, `Altitude:` lines); times '1200 UTC December 5, 2026' or
    'December 05, 2026 at 1200 UTC'."""
    notation = rng.choice(["symbols", "decimal", "dms"])
    places = rng.choice([4, 5]) if notation == "decimal" else 0
    comma = ", " if notation == "decimal" else " "
    vertical, floor, ceiling = _vertical(rng, spec, meant, False)
    if spec.radius_m is not None:
        r, meant.radius_m = N.radius(rng, max(spec.radius_m, 926.0), "NM", [" nautical miles", " NM"])
        lat, lon, meant.center = _position(rng, *spec.center, notation, places)
        meant.kind = "circle"
        area = N.circle_area(lat, lon, r)
        where = ([f"Area: Within {r} of {lat}{comma}{lon}, {vertical}"] if rng.random() < 0.5 else
                 [f"Center: {lat}{comma}{lon}", f"Radius: {r}", f"Altitude: {vertical[0].upper()}{vertical[1:]}"])
    else:
        pts = [_position(rng, a, b, notation, places) for a, b in spec.vertices]
        meant.kind, meant.vertices = "polygon", [p[2] for p in pts]
        where = ["Area: Bounded by " + "; ".join(f"{a}{comma}{b}" for a, b, _ in pts) + f", {vertical}"]
        area = N.polygon_area([(a, b) for a, b, _ in pts])
    if rng.random() < 0.5:
        a, b = (N.english_time(N.local(t, 0), 4) for t in (start, end))   # '1200 UTC December 5, 2026'
    else:
        a, b = (f"{N.MONTHS[t.month - 1]} {t:%d}, {t.year} at {t:%H%M} UTC" for t in (start, end))
    head = f"TFR {start.year % 10}/{rng.randint(1000, 9999)}" if rng.random() < 0.6 else "Temporary Flight Restriction"
    fields = [[f"Type: {rng.choice(KINDS)}"], [f"Location: {place(rng, title=True)}, {rng.choice(STATES)}"],
              [f"Beginning Date and Time: {a}", f"Ending Date and Time: {b}"],
              [f"{rng.choice(['Reason', 'Reason for NOTAM'])}: {reason}"]]
    rng.shuffle(fields)
    lines = [head, *(line for field in fields for line in field), *where]
    if uas:
        lines.append("Unmanned aircraft (drone) operations are prohibited.")
    eol = rng.choice(["\n", "\r\n"])
    gold = NoFlyZone(floor=floor, ceiling=ceiling, valid_from_raw=a, valid_to_raw=b, uas_only=uas, reason=reason,
                     area=area)
    return eol.join(lines), gold, meant
