"""Notices that define no zone, and text that is no notice: the "no zone" answers.

Family `zone_none`: NOTAMs in the ICAO layouts (one-line, multi-line, FAA with CRLF)
whose item E restricts no volume: runway, taxiway and apron closures, lighting and navaid
outages, cranes and obstacles (FAA's own form too: `CRANE (ASN ...) 403837N0734718W (0.5NM
WNW JFK) 253FT (241FT AGL)`), hours, procedures, services. Their gold has no area; it still
copies what every notice states (number, items B, C, D, F, G). Family
`zone_garbage`: text that is no notice at all (chat, logs, word salad, stray digits):
its gold is empty. Knows nothing of models; the real notices are never read here.
"""

from __future__ import annotations

import random
import string

from clover_struct.schemas.airspace import NoFlyZone

from . import draw
from . import notation as N
from .draw import place
from .notams import _pick, _pos, _rwy, draw_values, item_c, item_e, render

_LIGHTS = ("PAPI", "APCH LGT", "RCLL", "TDZ LGT", "REDL", "TWY CL LGT", "ABN", "WDI LGT", "OBST LGT")


def _body(rng: random.Random) -> str:
    """One statement that restricts no volume (lighting, obstacles, closures), or item E of notams.py without zones."""
    r = rng.randint
    t = rng.randrange(7)
    if t == 0:
        return f"RWY {_rwy(rng)[:3]} {rng.choice(_LIGHTS)} {rng.choice(['U/S', 'NOT AVBL', 'OPR AT REDUCED INTENSITY'])}."
    if t == 1:
        return (f"OBST {rng.choice(['LGT U/S', 'ERECTED', 'NOT LIT'])} PSN {_pos(rng)} ({place(rng)}) HGT "
                f"{r(20, 900)}FT AGL, {r(30, 1500)}FT AMSL.")
    if t == 2:
        return rng.choice(["AD CLSD.", "AD CLSD EXC HEL.", f"APRON {r(1, 9)} CLSD.", f"STAND {r(1, 60)} CLSD.",
                           f"HELIPAD {draw.letters(rng, 1)} CLSD DUE WIP."])
    if t == 3:
        return (f"TEMPORARY CRANE {r(40, 400)}FT AGL {r(50, 2000)}FT MSL {r(1, 9)}.{r(0, 9)}NM "
                f"{rng.choice(['N', 'NE', 'SW', 'W'])} OF AD. {rng.choice(['LGT', 'FLAGGED AND LGTD', 'NOT LGTD'])}.")
    if t == 4:
        return (f"{rng.choice(['RNAV (GNSS)', 'ILS', 'VOR'])} {rng.choice(['APCH', 'SID', 'STAR'])} RWY {_rwy(rng)[:2]} "
                f"{rng.choice(['NOT AVBL', 'SUSPENDED', 'AMENDED'])}. {rng.choice(['', 'MNM ALT ' + str(r(10, 60) * 100) + 'FT.'])}")
    if t == 5:   # FAA obstacle: its number, its position, where that lies from the airport, its heights
        agl = r(40, 900)
        return (f"{rng.choice(['CRANE', 'RIG', 'TOWER', 'WIND TURBINE', 'BLDG'])} (ASN {r(2015, 2049)}-"
                f"{rng.choice(['AEA', 'AGL', 'ASO', 'ASW', 'ANM', 'AWP', 'ACE', 'ANE'])}-{r(1, 9999)}-"
                f"{rng.choice(['NRA', 'OE'])}) {_pos(rng).replace(' ', '')} ({r(0, 9)}.{r(1, 9)}NM "
                f"{rng.choice(['N', 'NE', 'E', 'SE', 'S', 'SW', 'W', 'NW', 'WNW', 'ESE'])} {draw.letters(rng, 3)}) "
                f"{agl + r(5, 900)}FT ({agl}FT AGL) {rng.choice(['FLAGGED AND LGTD', 'LGTD', 'FLAGGED', 'NOT LGTD'])}")
    return item_e(rng, zones=False)


def none_notice(rng: random.Random) -> tuple[str, NoFlyZone, N.Meant]:
    """A NOTAM that defines no zone, in one of the training layouts."""
    layout = _pick(rng, {"notam_icao": 45, "notam_multiline": 25, "notam_faa": 30})
    v = draw_values(rng, layout)
    v.body = _body(rng) if rng.random() < 0.6 else item_e(rng, zones=False)
    c = item_c(v, rng)
    text = render(v, c, layout, rng)
    meant = N.Meant(valid_from=v.valid_from, valid_to=v.valid_to)
    lower, upper = v.lower, None if v.upper == "UNL" else v.upper
    if lower is not None:
        meant.floor_m, meant.floor_ref = N.icao_limit_value(lower)
    if upper is not None:
        meant.ceiling_m, meant.ceiling_ref = N.icao_limit_value(upper)
    valid_to = None if c in (None, "PERM") else c[:10]
    gold = NoFlyZone(notam_id=v.notam_id, floor=lower, ceiling=upper, valid_from_raw=N.icao_time(v.valid_from),
                     valid_to_raw=valid_to, schedule=v.schedule, uas_only=False)
    return text, gold, meant


_WORDS = ("the", "meeting", "lunch", "invoice", "please", "send", "report", "weather", "tomorrow", "server", "error",
          "update", "sale", "recipe", "garden", "train", "delayed", "football", "score", "ticket", "ok", "thanks")


def garbage(rng: random.Random) -> tuple[str, NoFlyZone, N.Meant]:
    """Text that is no notice: chat, a log line, word salad, random characters or digits."""
    t = rng.randrange(6)
    if t == 0:
        text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 40))).capitalize() + "."
    elif t == 1:
        text = "".join(rng.choice(string.ascii_letters + string.digits + " .,-/:") for _ in range(rng.randint(5, 300)))
    elif t == 2:
        text = (f"{rng.randint(2000, 2049)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {draw.hhmm(rng)[:2]}:"
                f"{rng.randint(0, 59):02d} {rng.choice(['INFO', 'WARN', 'ERROR'])} {place(rng).lower()}: "
                f"{rng.choice(['connection reset', 'retrying in 5 s', 'disk 93% full', 'job done'])}")
    elif t == 3:
        text = " ".join(str(rng.randint(0, 10**rng.randint(1, 8))) for _ in range(rng.randint(1, 20)))
    elif t == 4:
        text = rng.choice(["hello", "?", "N/A", "see attached", "no notices today", "NIL", "TEST TEST TEST",
                           "lorem ipsum dolor sit amet", "请查收附件", "今天天气很好", "会议改到明天下午三点"])
    else:
        text = (f"METAR {draw.location(rng)} {rng.randint(1, 28):02d}{draw.hhmm(rng)}Z {rng.randint(0, 36) * 10:03d}"
                f"{rng.randint(2, 30):02d}KT {rng.choice(['9999', 'CAVOK', '4000 BR'])} {rng.randint(-5, 35):02d}/"
                f"{rng.randint(-10, 20):02d} Q{rng.randint(990, 1035)}")
    return text, NoFlyZone(uas_only=False), N.Meant()
