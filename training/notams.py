"""ICAO-format NOTAMs: draw what a notice says, write it in one of four layouts, build gold.

``draw_values`` fixes the intended meaning (a ``NotamValues`` in plain numbers and
datetimes); ``render`` writes it as a real service would (European AIS one-line A-C, multi-line ICAO,
FAA domestic with CRLF and blank Q-line parts, AFTN parentheses); ``notam_gold`` turns it
into a Notam (zone notices in these layouts are zone_notams.py's). Item E text is invented
from templates; ``item_e(rng, zones=False)`` leaves out the statements that define a zone.
Knows nothing of models; the real notices are never read here.
"""

from __future__ import annotations

import math
import random
import textwrap
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional

from clover_struct.schemas.notam import Notam

from . import draw
from .draw import dms, place, yymmddhhmm


FIRST = datetime(2000, 1, 1, tzinfo=timezone.utc)
LAST = datetime(2049, 12, 31, tzinfo=timezone.utc)  # two-digit years stop at 49


@dataclass
class NotamValues:
    """The intended content of one notice, in plain values (what the gold must decode to)."""

    notam_id: Optional[str]
    notam_type: Optional[str]
    replaces: Optional[str]
    fir: str
    qcode: Optional[str]
    traffic: Optional[str]
    purpose: Optional[str]
    scope: Optional[str]
    lower_fl: int
    upper_fl: Optional[int]
    q_minutes: tuple[int, int]  # signed centre in whole arc minutes (lat, lon)
    radius_nm: int
    location: str
    valid_from: datetime
    valid_to: Optional[datetime]
    permanent: bool
    estimated: bool
    schedule: Optional[str]
    lower: Optional[str]
    upper: Optional[str]
    body: str

    @property
    def center(self) -> tuple[float, float]:
        return tuple(round(m / 60, 6) for m in self.q_minutes)


def _pick(rng: random.Random, weighted: dict):
    return rng.choices(list(weighted), weights=list(weighted.values()))[0]


def _notam_id(rng: random.Random, layout: str, year: int) -> str:
    if layout == "notam_faa":
        return f"{rng.randint(1, 12):02d}/{rng.randrange(1, 1000):03d}"
    number = rng.randrange(1, 10000)
    digits = f"{number:04d}" if rng.random() < 0.9 else str(number)  # a few issuers drop leading zeros
    return f"{draw.letters(rng, 1)}{digits}/{year % 100:02d}"


def _limit_text(rng: random.Random, metres: Optional[float], ref: str, is_floor: bool) -> str:
    """A vertical limit as items F/G write it."""
    if metres is None:
        return "UNL"
    if metres == 0 and is_floor:
        return rng.choice(["SFC", "SFC", "GND"])
    if ref == "STD":
        return f"FL{max(1, round(metres / 30.48)):03d}"
    if rng.random() < 0.2:
        return f"{max(10, round(metres, -1)):.0f}M {ref}"
    step = rng.choice([10, 50, 100])
    return f"{max(step, round(metres / 0.3048 / step) * step)}FT {ref}"


def _fl_of(text: Optional[str], up: bool) -> Optional[int]:
    """The Q-line flight level an issuer derives from item F/G (rounded outward)."""
    if text is None:
        return None
    if text in ("SFC", "GND"):
        return 0
    if text == "UNL":
        return 999
    if text.startswith("FL"):
        return int(text[2:])
    number, unit = float(text.split()[0][:-2 if "FT" in text else -1]), ("FT" if "FT" in text else "M")
    feet = number if unit == "FT" else number / 0.3048
    return min(999, math.ceil(feet / 100) if up else math.floor(feet / 100))


def draw_values(rng: random.Random, layout: str) -> NotamValues:
    start = draw.instant(rng)
    faa = layout == "notam_faa"
    kind = _pick(rng, {"NOTAMN": 80, "NOTAMR": 15, "NOTAMC": 5})
    headerless = layout == "notam_multiline" and rng.random() < 0.2
    nid = None if headerless else _notam_id(rng, layout, start.year)
    replaces = _notam_id(rng, layout, start.year) if kind != "NOTAMN" and not faa and not headerless else None
    if faa and kind == "NOTAMC":
        kind = "NOTAMN"
    scope = _pick(rng, {"A": 40, "E": 12, "W": 15, "AE": 12, "AW": 12, "EW": 3, "AEW": 2, "K": 1})
    lower = upper = None
    if rng.random() < (0.6 if "W" in scope else 0.15):
        spec = draw.zone_spec(rng)
        lower = _limit_text(rng, spec.floor_m, spec.floor_ref, True)
        upper = _limit_text(rng, spec.ceiling_m, spec.ceiling_ref, False)
    if lower is not None:
        lower_fl, upper_fl = _fl_of(lower, False), _fl_of(upper, True)
    else:
        lower_fl = 0 if rng.random() < 0.85 else rng.randrange(0, 600)
        upper_fl = 999 if rng.random() < 0.5 else rng.randint(max(lower_fl, 1), 999)
    blank_q = faa and rng.random() < 0.3  # FAA obstacle notices leave scope and upper empty
    lat, lon = draw.world_point(rng, 89.0)
    permanent = kind != "NOTAMC" and rng.random() < 0.08
    end = None if permanent or kind == "NOTAMC" else start + draw.duration(rng)
    if end is not None:
        end = min(end, LAST)
    return NotamValues(
        notam_id=nid, notam_type=None if headerless else kind, replaces=replaces,
        fir=draw.fir(rng), qcode=None if faa and rng.random() < 0.02 else draw.qcode(rng),
        traffic=_pick(rng, {"IV": 70, "I": 14, "V": 12, "K": 1}),
        purpose=_pick(rng, {"NBO": 30, "BO": 28, "M": 34, "B": 4, "O": 2, "NB": 1, "K": 1}),
        scope=None if blank_q else scope, lower_fl=lower_fl, upper_fl=None if blank_q else upper_fl,
        q_minutes=(_signed_minutes(lat), _signed_minutes(lon)),
        radius_nm=_pick(rng, {1: 25, 2: 10, 5: 35, 25: 5}) if rng.random() < 0.7 else rng.randint(1, 999),
        location=_location(rng), valid_from=start, valid_to=end, permanent=permanent,
        estimated=end is not None and rng.random() < (0.2 if faa else 0.08),
        schedule=draw.icao_schedule(rng) if end is not None and rng.random() < 0.25 else None,
        lower=lower, upper=upper, body=item_e(rng),
    )


def _signed_minutes(value: float) -> int:
    return int(math.copysign(round(abs(value) * 60), value))


def _location(rng: random.Random) -> str:
    n = 1 if rng.random() < 0.94 else rng.randint(2, 3)
    return " ".join(draw.location(rng) for _ in range(n))


# -- item E -----------------------------------------------------------------------------------
def _pos(rng: random.Random) -> str:
    lat, lon = draw.world_point(rng)
    k = rng.choice([0, 0, 0, 2])
    sep = rng.choice([" ", " ", ""])
    return dms(lat, "lat", k) + sep + dms(lon, "lon", k)


def _rwy(rng: random.Random) -> str:
    n = rng.randint(1, 18)
    side = rng.choice(["", "", "L", "R", "C"])
    other = {"L": "R", "R": "L", "C": "C", "": ""}[side]
    return f"{n:02d}{side}/{n + 18:02d}{other}"


def _body(rng: random.Random, zones: bool = True) -> str:
    P, r = place(rng), rng.randint
    t = rng.randrange(9)
    while t == 6 and not zones:   # the one statement that gives a zone (a circle)
        t = rng.randrange(9)
    if t == 0:
        ft = r(40, 900)
        text = (f"{rng.choice(['', 'LIT ', 'TEMPO '])}{rng.choice(['CRANE', 'MAST', 'RIG', 'WIND TURBINE', 'CHIMNEY'])}"
                f" {rng.choice(['OPR ', 'ERECTED ', ''])}AT PSN {_pos(rng)} ({P}). HGT {ft}FT AGL/{ft + r(5, 900)}FT AMSL.")
    elif t == 1:
        text = f"RWY {_rwy(rng)} CLSD{rng.choice(['', ' DUE WIP', ' DUE MAINT', ' DUE FILMING', ' EXC FOR EMERG ACFT'])}."
    elif t == 2:
        a, b, c = (draw.letters(rng, 1) + rng.choice(["", str(r(1, 9))]) for _ in range(3))
        text = f"TWY {a} BTN TWY {b} AND TWY {c} {rng.choice(['CLSD', 'LGT U/S', 'RESTRICTED TO ACFT WINGSPAN BELOW 36M'])}"
    elif t == 3:
        text = (f"{rng.choice(['VOR', 'DME', 'NDB', 'VOR/DME', 'ILS LOC RWY ' + _rwy(rng)[:2]])} {draw.letters(rng, 3)} "
                f"{r(108, 117)}.{r(0, 95):02d}MHZ {rng.choice(['U/S', 'ON TEST, DO NOT USE', 'UNMONITORED'])}")
    elif t == 4:
        days = rng.sample(draw.DAYS, r(2, 5))
        text = "AD OPENING HR:\n" + "\n".join(f"{d}-{draw.hhmm(rng)}-{draw.hhmm(rng)}" for d in days)
    elif t == 5:
        text = (f"{P} INTL, {place(rng)}.\nRNAV (GPS) RWY {_rwy(rng)[:2]}, AMDT {r(1, 9)}{rng.choice(['', 'A', 'B'])}...\n"
                f"LNAV MDA {r(300, 1900)}/HAT {r(200, 900)} ALL CATS. TEMPORARY CRANE {r(100, 900)} MSL "
                f"{r(1, 9)}.{r(0, 99)} NM {rng.choice(['NW', 'SE', 'E', 'WSW'])} OF RWY {_rwy(rng)[:3]}.")
    elif t == 6:
        text = (f"{rng.choice(['PARACHUTE DROPPING', 'GLIDER FLYING', 'AEROBATICS', 'BALLOON RELEASE'])} WI "
                f"{r(1, 9)}NM RADIUS OF {_pos(rng)} ({P}). FOR INFO {draw.phone(rng)}.")
    elif t == 7:
        unit = rng.choice(["ATIS", "APP", "TWR", "GND"])
        text = f"{unit} FREQ {r(118, 136)}.{r(0, 995):03d} {rng.choice(['U/S', 'CHANGED', 'HOURS OF SER REDUCED'])}."
    else:
        service = rng.choice(["FUEL", "DE-ICING", f"FIRE AND RESCUE CAT {r(3, 9)}"])
        text = f"{service} {rng.choice(['NOT AVBL', 'REDUCED', 'AVBL ON REQUEST'])}."
    if rng.random() < 0.3:
        text += f" {rng.choice(['AIP', 'UK AIP', 'AIP SUP ' + str(r(1, 99)) + '/' + str(r(0, 49)).zfill(2)])} " \
                f"{draw.location(rng)} AD 2.{r(1, 24)} REFERS."
    return text


def item_e(rng: random.Random, zones: bool = True) -> str:
    """Item E: one statement, or (one notice in six) a long run of them, as published
    procedure amendments and obstacle lists are: real notices reach 1,000 tokens, and a
    model that saw only short ones loses the Q-line behind a long E. zones=False: none of
    them defines a zone (runways, taxiways, cranes, navaids, hours, procedures, services)."""
    n = 1 if rng.random() < 5 / 6 else rng.randint(3, 16)
    return "\n".join(_body(rng, zones) for _ in range(n))


# -- layouts ----------------------------------------------------------------------------------
def _q_line(v: NotamValues, pad: bool) -> str:
    lat_m, lon_m = v.q_minutes
    coords = draw.q_coordinates(lat_m / 60, lon_m / 60)
    purpose, scope = v.purpose or "", v.scope or ""
    if pad:
        purpose, scope = purpose.ljust(3), scope.ljust(2)
    upper = "" if v.upper_fl is None else f"{v.upper_fl:03d}"
    return f"{v.fir}/{v.qcode or ''}/{v.traffic or ''}/{purpose}/{scope}/{v.lower_fl:03d}/{upper}/{coords}{v.radius_nm:03d}"


def item_c(v: NotamValues, rng: random.Random) -> Optional[str]:
    """Item C as the notice writes it (PERM, 2507011200, 2507011200EST or ... EST), None if absent."""
    if v.permanent:
        return "PERM"
    if v.valid_to is None:
        return None
    return yymmddhhmm(v.valid_to) + rng.choice(["EST", "EST", " EST"]) * v.estimated


def render(v: NotamValues, c: Optional[str], layout: str, rng: random.Random) -> str:
    """The notice as one of the NOTAM_LAYOUTS writes it, with item C `c`."""
    header = None if v.notam_id is None else " ".join(x for x in (v.notam_id, v.notam_type, v.replaces) if x)
    b = yymmddhhmm(v.valid_from)
    q = "Q) " + _q_line(v, pad=layout in ("notam_icao", "notam_aftn") and rng.random() < 0.5)
    a_b_c = [f"A) {v.location}", f"B) {b}"] + ([f"C) {c}"] if c else [])
    d = [f"D) {v.schedule}"] if v.schedule else []
    f_g = [x for x in (v.lower and f"F) {v.lower}", v.upper and f"G) {v.upper}") if x]
    if layout in ("notam_icao", "notam_aftn"):
        width = rng.randint(50, 72)
        body = "\n".join(textwrap.fill(par, width) for par in v.body.split("\n"))
        lines = [header] * bool(header) + [q, " ".join(a_b_c)] + d + ["E) " + body] + ([" ".join(f_g)] if f_g else [])
        text = "\n".join(lines)
        if layout == "notam_aftn":
            pre = f"GG {draw.letters(rng, 8)}\n{v.valid_from:%d%H%M} {draw.letters(rng, 8)}\n" if rng.random() < 0.6 else ""
            text = f"{pre}({text})"
        return text
    if layout == "notam_multiline":
        f_g = f_g if rng.random() < 0.6 or not f_g else [" ".join(f_g)]
        lines = [header] * bool(header) + [q] + a_b_c + d + ["E) " + v.body] + f_g
        return "\n".join(lines)
    # FAA: trailing spaces, often CRLF, often a blank line before E.
    eol = rng.choice([" \r\n", " \n", "\n"])
    lines = [header or ""] + [q] + a_b_c + [(" " if rng.random() < 0.2 else "") + x for x in d]
    lines += [""] * (rng.random() < 0.5) + ["E) " + v.body.replace("\n", " ")] + f_g
    return eol.join(lines if header else lines[1:])


def notam_gold(v: NotamValues, c: Optional[str]) -> Notam:
    lat_m, lon_m = v.q_minutes
    return Notam(
        notam_id=v.notam_id, notam_type=v.notam_type, replaces=v.replaces, fir=v.fir, qcode=v.qcode,
        traffic=v.traffic, purpose=v.purpose, scope=v.scope, q_lower=f"{v.lower_fl:03d}",
        q_upper=None if v.upper_fl is None else f"{v.upper_fl:03d}",
        q_coordinates=draw.q_coordinates(lat_m / 60, lon_m / 60), q_radius=f"{v.radius_nm:03d}",
        location=v.location, valid_from_raw=yymmddhhmm(v.valid_from),
        valid_to_raw=c, schedule=v.schedule, lower=v.lower, upper=v.upper,
    )


def notam_example(rng: random.Random, layout: str) -> tuple[str, Notam]:
    v = draw_values(rng, layout)
    c = item_c(v, rng)
    return render(v, c, layout, rng), notam_gold(v, c)
