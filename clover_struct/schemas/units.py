"""Unit and notation conversions for aeronautical values: coordinates, lengths, times.

Pure functions from strings/numbers to numbers/datetimes, each validating its input and
raising ``ValueError`` that names the offending value and the accepted forms. The schemas
call these from properties and validators; the data generator calls the formatters.
Knows nothing of pydantic, schemas or models.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone

FT_M = 0.3048  # international foot, exact
NM_M = 1852.0  # international nautical mile, exact
SM_M = 1609.344  # statute mile, exact
KM_M = 1000.0
EARTH_RADIUS_M = 6_371_008.8  # IUGG mean radius; a sphere is enough for zones of a few km

# DDMM / DDMMSS / DDMMSS.s + N|S and DDDMM / DDDMMSS / DDDMMSS.s + E|W: the compact ICAO
# forms. Degrees have a fixed width so the digits are never ambiguous.
_DMS_LAT = re.compile(r"^(\d{2})(\d{2})(?:(\d{2}(?:\.\d+)?))?([NS])$")
_DMS_LON = re.compile(r"^(\d{3})(\d{2})(?:(\d{2}(?:\.\d+)?))?([EW])$")
_DECIMAL = re.compile(r"^-?\d{1,3}(?:\.\d+)?$")
_Q_COORDS = re.compile(r"^(\d{4}[NS])(\d{5}[EW])$")
_YYMMDDHHMM = re.compile(r"^\d{10}$")

# YYMMDDhhmm with a real month, day, hour and minute: the automaton then rules out
# "0000000000"-like times (day 31 of a short month is still left to the validator).
TIME10 = r"^\d{2}(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])([01]\d|2[0-3])[0-5]\d$"
# Coordinates as written, with degrees, minutes and seconds in range digit by digit (a
# model under these automata cannot write 61 minutes; 90 or 180 with minutes is left to
# the validator).
_MS = r"[0-5]\d"
_LAT_DEG, _LON_DEG = r"([0-8]\d|90)", r"(0\d\d|1[0-7]\d|180)"
_LAT_DMS = rf"{_LAT_DEG}{_MS}({_MS}(\.\d{{1,2}})?)?[NS]"
_LON_DMS = rf"{_LON_DEG}{_MS}({_MS}(\.\d{{1,2}})?)?[EW]"
LAT_PATTERN = rf"^({_LAT_DMS}|-?([0-8]?\d|90)(\.\d{{1,7}})?)$"
LON_PATTERN = rf"^({_LON_DMS}|-?(1[0-7]\d|180|\d{{1,2}})(\.\d{{1,7}})?)$"
Q_COORDINATES = rf"^{_LAT_DEG}{_MS}[NS]{_LON_DEG}{_MS}[EW]$"
# json_schema_extra of a string copied from the text as written: the decoder keeps it a piece
# of the text (clover_struct.verbatim.Verbatim)
VERBATIM = {"verbatim": True}


def dms_to_decimal(text: str) -> float:
    """Compact DMS with hemisphere ('473012N', '0083015W', '4730N', '473012.55N') -> degrees.

    Latitudes take two degree digits and N/S, longitudes three and E/W; seconds are
    optional and may carry decimals. South and west are negative.
    """
    s = text.strip().upper()
    m = _DMS_LAT.match(s) or _DMS_LON.match(s)
    if m is None:
        raise ValueError(
            f"{text!r} is not a compact DMS coordinate; expected DDMM[SS[.s]]N|S for a "
            "latitude or DDDMM[SS[.s]]E|W for a longitude, e.g. '473012N', '0083015W'"
        )
    deg, minutes, seconds, hemi = int(m[1]), int(m[2]), float(m[3] or 0), m[4]
    if minutes >= 60 or seconds >= 60:
        raise ValueError(f"{text!r}: minutes and seconds must be below 60")
    value = deg + minutes / 60 + seconds / 3600
    limit = 90 if hemi in "NS" else 180
    if value > limit:
        raise ValueError(f"{text!r}: {value:.6f} degrees is beyond {limit}")
    return -value if hemi in "SW" else value


def coordinate_to_decimal(text: str, axis: str) -> float:
    """A latitude (axis='lat') or longitude (axis='lon') written as compact DMS or signed
    decimal degrees ('31.2304', '-122.42') -> decimal degrees, range-checked."""
    if axis not in ("lat", "lon"):
        raise ValueError(f"axis must be 'lat' or 'lon', got {axis!r}")
    s = text.strip().upper()
    if _DECIMAL.match(s):
        value = float(s)
    else:
        value = dms_to_decimal(s)
        is_lat = s[-1] in "NS"
        if is_lat != (axis == "lat"):
            raise ValueError(f"{text!r} is a {'latitude' if is_lat else 'longitude'}, expected a {axis}")
    limit = 90 if axis == "lat" else 180
    if not -limit <= value <= limit:
        raise ValueError(f"{text!r}: {axis} must lie within [-{limit}, {limit}] degrees")
    return value


def parse_q_coordinates(text: str) -> tuple[float, float]:
    """The Q-line centre 'DDMMNDDDMMW' (e.g. '4730N00845W') -> (lat, lon) degrees."""
    m = _Q_COORDS.match(text.strip().upper())
    if m is None:
        raise ValueError(f"{text!r} is not a Q-line centre; expected DDMM[NS]DDDMM[EW], e.g. '4730N00845W'")
    return dms_to_decimal(m[1]), dms_to_decimal(m[2])


def feet_to_m(feet: float) -> float:
    return _finite(feet, "feet") * FT_M


def fl_to_m(flight_level: float) -> float:
    """Flight level (hundreds of feet on the standard 1013.25 hPa setting) -> metres."""
    if _finite(flight_level, "flight level") < 0:
        raise ValueError(f"flight level must be >= 0, got {flight_level}")
    return flight_level * 100 * FT_M


def nm_to_m(nm: float) -> float:
    return _finite(nm, "nautical miles") * NM_M


def km_to_m(km: float) -> float:
    return _finite(km, "kilometres") * KM_M


_TO_M = {"M": 1.0, "KM": KM_M, "NM": NM_M, "FT": FT_M, "FL": 100 * FT_M}


def to_metres(value: float, unit: str) -> float:
    """value in unit ('M', 'KM', 'NM', 'FT', 'FL') -> metres."""
    try:
        factor = _TO_M[unit.upper()]
    except (KeyError, AttributeError):
        raise ValueError(f"unknown length unit {unit!r}; use one of {sorted(_TO_M)}") from None
    return _finite(value, "length") * factor


def parse_yymmddhhmm(text: str, utc_offset_hours: float = 0.0) -> datetime:
    """'3107041530' (ICAO items B/C) -> aware UTC datetime.

    Two-digit years 00-49 are 2000-2049 and 50-99 are 1950-1999. '2400' is accepted as
    the end of that day. A non-zero utc_offset_hours says the digits are local time
    (e.g. 8 for Beijing time) and are shifted to UTC.
    """
    s = text.strip()
    if not _YYMMDDHHMM.match(s):
        raise ValueError(f"{text!r} is not a YYMMDDhhmm time; expected 10 digits, e.g. '3107041530'")
    yy, mo, dd, hh, mi = (int(s[i : i + 2]) for i in range(0, 10, 2))
    year = 2000 + yy if yy < 50 else 1900 + yy
    end_of_day = hh == 24 and mi == 0
    try:
        dt = datetime(year, mo, dd, 0 if end_of_day else hh, mi, tzinfo=timezone.utc)
    except ValueError as e:
        raise ValueError(f"{text!r} is not a real date and time ({e})") from None
    if end_of_day:
        dt += timedelta(days=1)
    return dt - timedelta(hours=check_utc_offset(utc_offset_hours))


def format_yymmddhhmm(dt: datetime) -> str:
    """datetime -> 'YYMMDDhhmm' (aware datetimes are first converted to UTC)."""
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc)
    if not 1950 <= dt.year <= 2049:
        raise ValueError(f"year {dt.year} cannot be written as YYMMDDhhmm (1950-2049 only)")
    return dt.strftime("%y%m%d%H%M")


def check_utc_offset(hours: float) -> float:
    """Offsets run from -12 to +14 hours in quarter hours (e.g. 5.75 for Nepal)."""
    if not -12 <= _finite(hours, "UTC offset") <= 14 or (hours * 4) % 1:
        raise ValueError(f"UTC offset {hours} h must be a multiple of 0.25 within [-12, 14]")
    return hours


def destination_point(lat: float, lon: float, bearing_deg: float, distance_m: float) -> tuple[float, float]:
    """Great-circle destination on a sphere of EARTH_RADIUS_M; longitude is not wrapped,
    so rings drawn around a centre near the antimeridian stay continuous."""
    d = distance_m / EARTH_RADIUS_M
    p1, l1, b = math.radians(lat), math.radians(lon), math.radians(bearing_deg)
    p2 = math.asin(math.sin(p1) * math.cos(d) + math.cos(p1) * math.sin(d) * math.cos(b))
    l2 = l1 + math.atan2(math.sin(b) * math.sin(d) * math.cos(p1), math.cos(d) - math.sin(p1) * math.sin(p2))
    return math.degrees(p2), math.degrees(l2)


def distance_m(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Great-circle distance between two (lat, lon) points (haversine)."""
    (p1, l1), (p2, l2) = (tuple(map(math.radians, p)) for p in (a, b))
    h = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin((l2 - l1) / 2) ** 2
    return 2 * EARTH_RADIUS_M * math.asin(math.sqrt(h))


TURNS = (0.0, 360.0, -360.0)   # a longitude as written, and a turn east or west (a footprint may lie past 180)


def unwrapped(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """(lat, lon) points, each longitude moved by whole turns to lie within 180 degrees of the
    one before: a ring or a path across the antimeridian in one piece (longitudes past 180)."""
    out: list[tuple[float, float]] = []
    for lat, lon in points:
        out.append((lat, lon + 360 * round((out[-1][1] - lon) / 360) if out else lon))
    return out


def _finite(x: float, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"{what} must be a finite number, got {x!r}")
    return x
