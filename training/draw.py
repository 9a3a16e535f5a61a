"""Random draws and notations shared by the generators: names, codes, places, times, zones.

Values are drawn broadly on purpose (random letters for locations and FIRs, Q-codes
weighted toward common subjects but never restricted to them, coordinates worldwide,
years 2000-2049) so that a model learns to copy rather than to recall a list.
Formatters turn a value into the exact string a notice shows. Knows nothing of schemas.
"""

from __future__ import annotations

import math
import random
import string
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Optional

UPPER = string.ascii_uppercase

# Common NOTAM-code subjects and conditions (ICAO Doc 8126 style two-letter groups); a
# third of draws ignore them and take random letters.
Q_SUBJECTS = ("MR MX MA MN MP MK MD FA FF FU FH OB OL WU WE WM WL WP WA WV WY WH WR WT RT RD RR RP "
              "RA RO NV ND NB NM IC IG IL IS PI PA PD PK PF SA SE ST SP AC AE AR AH CG LC LR LT LX XX").split()
Q_CONDITIONS = ("LC LT AS CE CH CA CS AH XX LW LP AU AW HW CL CN AP TT CC CR CD LH LL AL AO AK LI "
                "LS HX HV").split()
ZONE_SUBJECTS = ("WU", "RT", "RR", "RD", "RP", "WE", "WL", "WM", "WP", "WA", "WY", "RA")


def letters(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(UPPER) for _ in range(n))


def location(rng: random.Random) -> str:
    return letters(rng, 4)


def fir(rng: random.Random) -> str:
    # Some FAA notices carry a 3-letter ARTCC id instead of a 4-letter FIR.
    return letters(rng, 3) if rng.random() < 0.08 else letters(rng, 4)


def qcode(rng: random.Random, subjects: tuple[str, ...] = tuple(Q_SUBJECTS)) -> str:
    subject = rng.choice(subjects) if rng.random() < 0.67 else letters(rng, 2)
    condition = rng.choice(Q_CONDITIONS) if rng.random() < 0.67 else letters(rng, 2)
    return "Q" + subject + condition


_ONSETS = "B C D F G H K L M N P R S T V W Z BR CH DR FL GR KL PR SH ST TH TR".split()
_VOWELS = "A E I O U AI EA OU IE".split()
_CODAS = ["", "", "N", "R", "L", "S", "M", "T", "ND", "RK", "LL", "ST"]


def place(rng: random.Random, title: bool = False) -> str:
    """An invented place name such as 'KELVORN' or 'Draimouth'."""
    syl = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(rng.choice([1, 2, 2, 3])))
    name = syl + rng.choice(["", "", "", "TON", "FIELD", "MOUTH", "BURY", "VILLE", " HILL", " PARK", " BAY"])
    return name.title() if title else name


_ZH_CHARS = ("安宝北滨长成川东丰福广海和河华江金京康兰乐临龙明南宁平青清庆泉山上胜石顺松泰天通西祥新兴阳永云昌德"
             "武汉沙岳衡常扬盐淮连宿芜蚌合肥厦漳莆晋温绍丽衢舟义乌慈余姚桐乡化仪如皋启靖昆仓张吴溧宜春赣萍景鹰潭抚九吉"
             "赤峰包头伦贝尔鄂多斯桂柳梧贵遵毕昭曲玉溪保定邯郸邢沧廊承秦唐锦鞍本丹营盘葫芦岛朝")


def zh_place(rng: random.Random) -> str:
    return "".join(rng.choice(_ZH_CHARS) for _ in range(rng.randint(2, 3)))


def phone(rng: random.Random) -> str:
    return "0" + "".join(rng.choice(string.digits) for _ in range(4)) + " " + "".join(
        rng.choice(string.digits) for _ in range(6)
    )


def world_point(rng: random.Random, max_lat: float = 80.0) -> tuple[float, float]:
    """Uniform over the sphere between +-max_lat (poles excluded: circles there wrap)."""
    z = rng.uniform(math.sin(math.radians(-max_lat)), math.sin(math.radians(max_lat)))
    return math.degrees(math.asin(z)), rng.uniform(-180.0, 180.0)


def instant(rng: random.Random, minute_step: Optional[int] = None) -> datetime:
    """A UTC instant between 2000-01-03 and 2049-12-28, so local clocks stay in 2000-2049."""
    start = datetime(2000, 1, 3, tzinfo=timezone.utc)
    span = (datetime(2049, 12, 28, tzinfo=timezone.utc) - start).total_seconds() // 60
    t = start + timedelta(minutes=rng.randrange(int(span)))
    step = minute_step or rng.choice([1, 5, 15, 30, 60, 60])
    return t.replace(minute=t.minute - t.minute % step)


def duration(rng: random.Random) -> timedelta:
    """From a few minutes to a couple of years, log-uniform."""
    return timedelta(minutes=round(math.exp(rng.uniform(math.log(10), math.log(60 * 24 * 700)))))


def yymmddhhmm(t: datetime) -> str:
    return t.strftime("%y%m%d%H%M")


# -- coordinates as written --------------------------------------------------------------------
def dms(value: float, axis: str, sec_decimals: Optional[int] = 0) -> str:
    """-8.504167, 'lon' -> '0083015W'; sec_decimals=None drops seconds ('00830W')."""
    hemi = ("N" if value >= 0 else "S") if axis == "lat" else ("E" if value >= 0 else "W")
    width = 2 if axis == "lat" else 3
    if sec_decimals is None:
        total = round(abs(value) * 60)
        return f"{total // 60:0{width}d}{total % 60:02d}{hemi}"
    scale = 10**sec_decimals
    total = round(abs(value) * 3600 * scale)
    deg, rest = divmod(total, 3600 * scale)
    minutes, secs = divmod(rest, 60 * scale)
    sec = f"{secs // scale:02d}" + (f".{secs % scale:0{sec_decimals}d}" if sec_decimals else "")
    return f"{deg:0{width}d}{minutes:02d}{sec}{hemi}"


def dms_symbols(compact: str) -> str:
    """'473012N' -> 47°30'12\"N (the same value in symbol notation)."""
    hemi, digits = compact[-1], compact[:-1]
    width = 2 if hemi in "NS" else 3
    d, m, s = digits[:width], digits[width : width + 2], digits[width + 2 :]
    return f"{d}°{m}'{s}\"{hemi}" if s else f"{d}°{m}'{hemi}"


def decimal(value: float, places: int) -> str:
    text = f"{value:.{places}f}"
    return "0" + text[2:] if text.startswith("-0") and float(text) == 0 else text


def q_coordinates(lat: float, lon: float) -> str:
    return dms(lat, "lat", None) + dms(lon, "lon", None)


# -- schedules (item D and plain-language hours) -------------------------------------------------
MONTHS = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()
DAYS = "MON TUE WED THU FRI SAT SUN".split()


def hhmm(rng: random.Random) -> str:
    return f"{rng.randrange(24):02d}{rng.choice([0, 0, 15, 30, 45, rng.randrange(60)]):02d}"


def daily_windows(rng: random.Random) -> list[tuple[str, str]]:
    return [(hhmm(rng), hhmm(rng)) for _ in range(rng.choice([1, 1, 2, 2, 3]))]


def icao_schedule(rng: random.Random) -> str:
    """An item D such as 'MON-FRI 0630-1415', 'DLY 1815-0245' or 'MAR 03-06 11-14 2145-0315'."""
    win = " ".join(f"{a}-{b}" for a, b in daily_windows(rng))
    form = rng.randrange(6)
    if form == 0:
        return win
    if form == 1:
        return f"DLY {win}"
    if form == 2:
        a = rng.randrange(7)
        return f"{DAYS[a]}-{DAYS[rng.randrange(a, 7)]} {win}" if rng.random() < 0.7 else f"{DAYS[a]} {win}"
    if form == 3:
        days = sorted(rng.sample(range(1, 29), rng.randint(1, 5)))
        return f"{rng.choice(MONTHS)} " * (rng.random() < 0.6) + " ".join(f"{d:02d}" for d in days) + f" {win}"
    if form == 4:
        return rng.choice(["SR-SS", "SS-SR", "H24", "HJ", "HN"])
    parts = [f"{DAYS[i]} {hhmm(rng)}-{hhmm(rng)}" for i in sorted(rng.sample(range(7), rng.randint(2, 3)))]
    return ", ".join(parts)


# -- a restricted volume before it is written down -------------------------------------------------
@dataclass
class ZoneSpec:
    """What a zone notice says, in exact numbers; each renderer picks its own notation."""

    center: tuple[float, float]  # lat, lon
    radius_m: Optional[float]  # circle; None for polygons
    vertices: Optional[list[tuple[float, float]]]  # polygon, (lat, lon), without closing repeat
    floor_m: float
    floor_ref: str  # AGL / AMSL / STD
    ceiling_m: Optional[float]  # None: unlimited
    ceiling_ref: str
    start: Optional[datetime]  # UTC; None: not stated
    end: Optional[datetime]  # UTC; None: permanent / until further notice
    windows: list[tuple[str, str]] = field(default_factory=list)  # daily 'hhmm' windows
    uas_only: bool = True
    authorisable: bool = False


LAST_END = datetime(2049, 12, 30, tzinfo=timezone.utc)


def zone_spec(
    rng: random.Random,
    center: Optional[tuple[float, float]] = None,
    agl_only: bool = False,
    start: Optional[datetime] = None,
) -> ZoneSpec:
    # Kept off the antimeridian and the poles so every vertex stays a valid coordinate.
    lat, lon = center or world_point(rng, 75.0)
    lon = max(-178.0, min(178.0, lon))
    size = math.exp(rng.uniform(math.log(150), math.log(25_000)))  # metres
    radius_m = vertices = None
    if rng.random() < 0.7:
        radius_m = size
    else:
        size = max(size, 2000.0)  # vertices written to the arc second must stay distinct
        n = rng.randint(3, 12)
        angles = sorted(rng.uniform(0, 2 * math.pi) for _ in range(n))
        if max(b - a for a, b in zip(angles, angles[1:] + [angles[0] + 2 * math.pi])) > math.pi * 0.9:
            angles = [2 * math.pi * k / n + rng.uniform(-0.2, 0.2) for k in range(n)]  # avoid slivers
        vertices = []
        for a in angles:
            r = size * rng.uniform(0.5, 1.0) / 111_320
            vertices.append((lat + r * math.cos(a), lon + r * math.sin(a) / math.cos(math.radians(lat))))
    refs = ["AGL"] if agl_only else ["AGL", "AGL", "AMSL", "STD"]
    floor_ref = ceiling_ref = rng.choice(refs)
    floor_m = 0.0 if rng.random() < 0.75 else rng.uniform(30, 1500)
    if floor_m == 0.0:
        floor_ref = "AGL"
    unlimited = rng.random() < (0.05 if agl_only else 0.12)
    ceiling_m = None if unlimited else floor_m + math.exp(rng.uniform(math.log(30), math.log(6000)))
    # Local clocks stay in 2000-2049 (two-digit years): the end is cut at LAST_END, and a start
    # asked for (a judgment's zone, days after its route) is moved back a day before it.
    t0 = min(start or instant(rng), LAST_END - timedelta(days=1))
    end = None if rng.random() < 0.1 else min(t0 + duration(rng), LAST_END)
    return ZoneSpec(
        center=(lat, lon), radius_m=radius_m, vertices=vertices,
        floor_m=floor_m, floor_ref=floor_ref, ceiling_m=ceiling_m, ceiling_ref=ceiling_ref,
        start=None if rng.random() < 0.05 else t0, end=end,
        windows=daily_windows(rng) if rng.random() < 0.2 else [],
        uas_only=rng.random() < 0.6, authorisable=rng.random() < 0.5,
    )
