"""Values written as the pieces a zone notice shows, each with the exact value it means.

Every writer quantises first (to the arc second, the minute, the 10 ft a notation can
show) and formats the quantised number, returning ``(piece, value)``: the text to put in
the notice and to copy into the gold, and what a correct reader must get from it, worked
out here by arithmetic on the written digits, never by the schema's readers (the tests
compare the two). ``Meant`` gathers a notice's values; ``locate`` finds a piece again in a
notice whose lines were cut inside it; ``lowercased`` turns a notice and its gold into the
lowercase variant real feeds also carry. Knows nothing of models; imports the schema only
to build gold records.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Optional

from clover_struct.verbatim import unwrapped

FT, NM, KM = 0.3048, 1852.0, 1000.0
MONTHS = "January February March April May June July August September October November December".split()
COORDINATE_NOTATIONS = ("dms", "dm", "dms_prefix", "dm_prefix", "spaced_prefix", "spaced_suffix", "symbols",
                        "symbols_dm", "decimal", "decimal_hemi", "decimal_degree_hemi", "zh_decimal", "zh_dms")


@dataclass
class Meant:
    """What a notice says, in exact numbers of what it wrote (None: not stated / no zone)."""

    kind: Optional[str] = None                       # 'circle', 'polygon' or None (no zone)
    center: Optional[tuple[float, float]] = None
    radius_m: Optional[float] = None
    vertices: Optional[list[tuple[float, float]]] = None   # without a closing repeat
    floor_m: float = 0.0
    floor_ref: str = "AGL"
    ceiling_m: Optional[float] = None
    ceiling_ref: Optional[str] = None
    valid_from: Optional[datetime] = None            # aware UTC
    valid_to: Optional[datetime] = None
    extra: dict = field(default_factory=dict)        # anything a family wants its test to see


# -- coordinates ---------------------------------------------------------------------------------
def _hemi(value: float, axis: str) -> str:
    return ("N" if value >= 0 else "S") if axis == "lat" else ("E" if value >= 0 else "W")


def _dms(value: float, seconds: bool, decimals: int = 0) -> tuple[int, int, str, float]:
    """|value| -> (degrees, minutes, seconds text, exact |value| of what is written)."""
    if not seconds:
        total = round(abs(value) * 60)
        return total // 60, total % 60, "", total / 60
    scale = 10**decimals
    total = round(abs(value) * 3600 * scale)
    deg, rest = divmod(total, 3600 * scale)
    minutes, secs = divmod(rest, 60 * scale)
    text = f"{secs // scale:02d}" + (f".{secs % scale:0{decimals}d}" if decimals else "")
    return deg, minutes, text, total / (3600 * scale)


def coordinate(value: float, axis: str, notation: str, places: int = 0) -> tuple[str, float]:
    """A latitude or longitude written in `notation` (COORDINATE_NOTATIONS) -> (piece, signed
    degrees). `places`: decimals of the seconds (dms, symbols) or of the degrees (decimal
    notations, at least 1); one choice per notice, as services write them."""
    hemi, width = _hemi(value, axis), 2 if axis == "lat" else 3
    sign = -1.0 if hemi in "SW" else 1.0
    if notation in ("dms", "dm", "dms_prefix", "dm_prefix"):
        d, m, s, exact = _dms(value, notation.startswith("dms"), places if notation == "dms" else 0)
        digits = f"{d:0{width}d}{m:02d}{s}"
        return (digits + hemi if notation in ("dms", "dm") else hemi + digits), sign * exact
    if notation in ("spaced_prefix", "spaced_suffix"):
        d, m, s, exact = _dms(value, True)
        groups = f"{d:0{width}d} {m:02d} {s}"
        return (f"{groups} {hemi}" if notation == "spaced_suffix" else hemi + groups), sign * exact
    if notation in ("symbols", "symbols_dm"):
        d, m, s, exact = _dms(value, notation == "symbols", places)
        return f"{d}°{m:02d}'" + (f'{s}"' if s else "") + hemi, sign * exact
    if notation in ("decimal", "decimal_hemi", "decimal_degree_hemi", "zh_decimal"):
        k = max(places, 1)
        exact = round(abs(value), k)
        text = f"{exact:.{k}f}"
        if notation == "decimal":
            return ("-" if sign < 0 and exact > 0 else "") + text, sign * exact
        if notation == "decimal_hemi":
            return text + hemi, sign * exact
        if notation == "decimal_degree_hemi":
            return text + "°" + hemi, sign * exact
        return _ZH[hemi] + text + "度", sign * exact
    if notation == "zh_dms":
        d, m, s, exact = _dms(value, True)
        return f"{_ZH[hemi]}{d}度{m:02d}分{s}秒", sign * exact
    raise ValueError(f"unknown coordinate notation {notation!r}")


_ZH = {"N": "北纬", "S": "南纬", "E": "东经", "W": "西经"}


# -- radii and vertical limits -----------------------------------------------------------------------
RADIUS_WORDS = {"NM": ["NM", "NM", " NM", " nautical miles", " nm"], "KM": ["KM", " km", " kilometres", " km"],
                "M": ["M", " m", " metres", " m"], "FT": ["FT", " ft", " feet"]}


def radius(rng: random.Random, metres: float, unit: str, words: Optional[list[str]] = None) -> tuple[str, float]:
    """A radius in `unit` (NM, KM, M, FT, 米, 公里) -> (piece, metres)."""
    per = {"NM": NM, "KM": KM, "M": 1.0, "FT": FT, "米": 1.0, "公里": KM}[unit]
    if unit in ("NM", "KM", "公里"):
        k = rng.choice([0, 1, 1, 2])
        number = max(round(metres / per, k), 0.1)
        text = f"{number:.{max(k, 1)}f}".rstrip("0").rstrip(".")   # 4NM, 0.5NM, 1.35NM
    else:
        step = rng.choice([10, 50, 100]) if unit in ("M", "米") else 100
        number = max(step, round(metres / per / step) * step)
        text = str(number)
    word = unit if unit in ("米", "公里") else rng.choice(words or RADIUS_WORDS[unit])
    return text + word, float(text) * per


def icao_limit(rng: random.Random, metres: Optional[float], ref: str, is_floor: bool) -> tuple[Optional[str], float, str]:
    """Items F/G as written: 'SFC', 'FL100', '2300FT AMSL', '150M AGL'; None for UNL.
    -> (piece, metres, reference)."""
    if metres is None:
        return None, 0.0, "AGL"
    if metres == 0 and is_floor:
        return rng.choice(["SFC", "SFC", "GND"]), 0.0, "AGL"
    if ref == "STD":
        n = max(1, round(metres / (100 * FT)))
        return f"FL{n:03d}", n * 100 * FT, "STD"
    if rng.random() < 0.2:
        n = max(10, round(metres, -1))
        return f"{n:.0f}M {ref}", float(n), ref
    step = rng.choice([10, 50, 100])
    n = max(step, round(metres / FT / step) * step)
    return f"{n}FT {ref}", n * FT, ref


def icao_limit_value(text: str) -> tuple[float, str]:
    """Items F/G as notams.py writes them ('SFC', 'FL100', '2300FT AMSL', '150M AGL') -> (metres, reference)."""
    if text in ("SFC", "GND"):
        return 0.0, "AGL"
    if text.startswith("FL"):
        return int(text[2:]) * 100 * FT, "STD"
    number, ref = text.split()
    return (float(number[:-2]) * FT if number.endswith("FT") else float(number[:-1])), ref


def plain_limit(rng: random.Random, metres: float, ref: str) -> tuple[str, float, str]:
    """A height as plain English writes it: '150 m AGL', '400 ft above ground level', '1,200 feet MSL'."""
    if ref == "STD":
        n = max(1, round(metres / (100 * FT)))
        return f"FL{n:03d}", n * 100 * FT, "STD"
    if rng.random() < 0.5:
        n = max(50, round(metres / FT / 50) * 50)
        number, value = (f"{n:,}" if n >= 1000 and rng.random() < 0.5 else str(n)), n * FT
        unit = rng.choice(["ft", "feet", "FT"])
    else:
        n = max(5, round(metres / 5) * 5)
        number, value, unit = str(n), float(n), rng.choice(["m", "metres", "M"])
    words = {"AGL": ["AGL", "above ground level", "above ground"], "AMSL": ["AMSL", "MSL", "above mean sea level"]}
    return f"{number} {unit} {rng.choice(words[ref])}", value, ref


def zh_height(metres: float, ref: str) -> tuple[str, float, str]:
    """'真高120米' (AGL) or '海拔高度1200米' (AMSL), to 10 m."""
    n = max(10, round(metres / 10) * 10)
    return ("真高" if ref == "AGL" else "海拔高度") + f"{n}米", float(n), ref


# -- times -------------------------------------------------------------------------------------------
UTC = timezone.utc


def local(t: datetime, offset: float) -> datetime:
    """An aware UTC instant on a clock `offset` hours ahead, as a naive datetime."""
    return (t + timedelta(hours=offset)).replace(tzinfo=None)


def utc(t: datetime, offset: float) -> datetime:
    """A naive clock time `offset` hours ahead of UTC -> the aware UTC instant."""
    return (t - timedelta(hours=offset)).replace(tzinfo=UTC)


def icao_time(t: datetime) -> str:
    return t.strftime("%y%m%d%H%M")


def english_time(t: datetime, form: int) -> str:
    """A local clock time `t` (naive) in one of five English/ISO forms."""
    month = MONTHS[t.month - 1]
    return [f"{t.day} {month} {t.year} {t:%H:%M}", f"{t:%Y-%m-%d %H:%M}", f"{t:%d} {month[:3].upper()} {t.year} {t:%H%M}",
            f"{month} {t.day}, {t.year} at {t:%H:%M}", f"{t:%H%M} UTC {month} {t.day}, {t.year}"][form]


def zh_time(t: datetime, year: bool = True, date: bool = True) -> str:
    """'2026年12月3日8时', '12月3日18时30分', '18时' (whole hours often drop 分)."""
    head = (f"{t.year}年" if year else "") + (f"{t.month}月{t.day}日" if date else "")
    minutes = f"{t.minute:02d}分" if t.minute or (t.hour % 3 and t.day % 2) else ""
    return f"{head}{t.hour}时{minutes}"


# -- finding pieces in a laid-out notice -----------------------------------------------------------
def normal(text: str) -> str:
    """The text as verbatim slots read it: every run of whitespace one space, none where a
    line end cuts a coordinate (verbatim.unwrapped)."""
    return " ".join(unwrapped(text).split())


def locate(text: str, piece: str, start: int = 0) -> tuple[str, int]:
    """`piece` as it stands in normal(text) at or after `start`, where a line cut inside it
    shows as one space: -> (the piece as copied, where it ends). ValueError if absent."""
    pattern = " ?".join(re.escape(c) for c in piece.replace(" ", ""))
    m = re.compile(pattern).search(text, start)
    if m is None:
        raise ValueError(f"{piece!r} is not in the notice")
    return m[0], m.end()


def located(text: str, pairs: list[tuple[str, str]], after: str = "") -> list[tuple[str, str]]:
    """The (lat, lon) pieces of a notice's points as they stand in it, in order from the
    first `after` (a line cut inside one shows as a space)."""
    flat = normal(text)
    at, out = flat.index(after) if after else 0, []
    for a, b in pairs:
        lat, at = locate(flat, a, at)
        lon, at = locate(flat, b, at)
        out.append((lat, lon))
    return out


def hard_wrap(text: str, width: int) -> str:
    """Cut `text` into lines of `width` characters wherever that falls (inside words and
    numbers too), as some services print item E."""
    return "\n".join(text[i:i + width].rstrip(" ") for i in range(0, len(text), width))


def lowercased(text: str, gold, meant: Meant):
    """The lowercase twin of a notice: the text and every copied piece lowercased (the
    readers read either case; the meaning is unchanged)."""
    def low(v):
        if isinstance(v, str):
            return v.lower()
        if isinstance(v, dict):
            return {k: (x if k == "kind" else low(x)) for k, x in v.items()}
        if isinstance(v, list):
            return [low(x) for x in v]
        return v
    data = gold.model_dump(mode="python")
    return text.lower(), type(gold).model_validate(low(data)), replace(meant)


def circle_area(lat: str, lon: str, radius_piece: str) -> dict:
    return {"kind": "circle", "center": {"lat": lat, "lon": lon}, "radius": radius_piece}


def polygon_area(points: list[tuple[str, str]]) -> dict:
    return {"kind": "polygon", "vertices": [{"lat": a, "lon": b} for a, b in points]}
