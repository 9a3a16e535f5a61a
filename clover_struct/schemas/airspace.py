"""A 3D restricted volume (no-fly zone) as a pydantic model, with geometry helpers.

Every value a notice states is a piece of it, copied as written, and read by code
(``readers``): each latitude and longitude in its own notation ('510718N', 'N2609',
'S05 59 00', '40°26'46"N', '北纬22.5431度'; a joined pair like 'N2609E11430' is copied as
its two halves), the radius ('1NM', '1.35 nautical miles', '500米'), the vertical limits
('SFC', '2300FT AMSL', 'FL100', '真高120米'), the times ('2606010700', '1200 UTC December 5,
2026', '2026年12月3日08时'). A model fills such a record by picking pieces of the text and
deciding choices (the kind of area, the clock, uas_only); it never writes a digit the text
lacks. Properties give decimal degrees, metres and aware UTC datetimes; ``footprint()`` and
``contains()`` answer geometric questions. A notice that restricts no volume (a runway
closure, a crane, a NOTAMC cancelling another, garbage) is a record with ``area`` null:
``defines_zone`` is False. Knows nothing of models, decoding or how notices are generated.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from shapely.geometry import MultiPoint
from shapely.geometry import Point as _ShapelyPoint
from shapely.geometry import Polygon

from .readers import read_coordinate, read_limit, read_radius, read_time, stated_clock, states_a_maximum
from .times import shifted
from .units import EARTH_RADIUS_M, TURNS, VERBATIM, destination_point, distance_m, unwrapped

CIRCLE_SEGMENTS = 64
# Real boundaries list up to 31 points; a closing repeat of the first makes 32.
MAX_VERTICES = 32
# A height that names no reference ('120米', 'below 400 ft') is read as above ground: the
# convention of drone rules, where such notices come from.
DEFAULT_REF = "AGL"
# Offsets of the world's clocks from UTC, in hours: what `utc_offset_hours` may decide.
UTC_OFFSETS = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0,
               -1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0, -9.0, -10.0, -11.0, -12.0,
               3.5, 4.5, 5.5, 5.75, 6.5, 8.75, 9.5, 10.5, 12.75, 13.75, -3.5, -9.5)
UtcOffset = Literal[UTC_OFFSETS]  # type: ignore[valid-type]  (a Literal of the tuple's values)


def _ci(word: str) -> str:
    """'NM' -> '[Nn][Mm]': ASCII letters of either case (notices come lowercased too)."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isascii() and c.isalpha() else re.escape(c) for c in word)


def _words(*words: str) -> str:
    return "(" + "|".join(_ci(w) for w in sorted(words, key=len, reverse=True)) + ")"


# -- what a copied piece may look like (the readers decide what it means) ----------------------------
# Degrees, minutes and seconds digit by digit, so a piece the automaton lets through reads
# (a compact latitude has 2, 4 or 6 digits, a longitude 3, 5 or 7; minutes and seconds < 60).
_DEC = r"([.,]\d{1,8})?"   # a decimal point or comma: 51,5074N
_POINT = r"(\.\d{1,8})?"    # after a hemisphere letter, a point only (E00012,5140N: two coordinates)
_MS = r"[0-5]\d"
_DEG = {"lat": r"([0-8]\d|90)", "lon": r"(0\d\d|1[0-7]\d|180)"}
_DEG_FREE = {"lat": r"([0-8]?\d|90)", "lon": r"(1[0-7]\d|180|0?\d?\d)"}   # degrees not padded to a width
_WIDTHS = {"lat": (4, 6), "lon": (5, 7)}                                # compact DDMM[SS] / DDDMM[SS]


def _body(axis: str, dec: str = _DEC) -> str:
    d, free = _DEG[axis], _DEG_FREE[axis]
    compact = rf"({d}{_MS}{_MS}|{d}{_MS}|{free}){dec}"                       # 510718, 2609, 31.2304
    # N35 0047: a line end cut the digits (or the decimals) somewhere; they still count as one run
    cuts = [rf"\d{{{k}}} \d{{{n - k}}}" for n in _WIDTHS[axis] for k in range(1, n)]
    whole = "|".join(rf"\d{{{n}}}" for n in _WIDTHS[axis])
    wrapped = rf"({'|'.join(cuts)})(\.\d{{1,3}})?|({whole})\.( \d{{1,3}}|\d{{1,2}} \d{{1,2}})"
    spaced = rf"{free} {_MS}( {_MS}(\.\d{{1,3}})?)?"                          # 05 59 00
    return f"({_symbols(axis)}|{spaced}|{wrapped}|{compact})"


def _symbols(axis: str) -> str:
    free = _DEG_FREE[axis]
    return (rf"{free}{_DEC} ?[°º˚]|{free} ?[°º˚] ?{_MS}{_DEC} ?['′’]"       # 40°26.767', 40°26'46"
            rf"|{free} ?[°º˚] ?{_MS} ?['′’] ?{_MS}{_DEC} ?(\"|″|”|'')?")


def _coordinate(axis: str, letters: str, words: str) -> str:
    body, free = _body(axis), _DEG_FREE[axis]
    chinese = rf"{free}{_DEC}度|{free}度{_MS}{_DEC}分|{free}度{_MS}分{_MS}{_DEC}秒"   # 22.5431度, 114度03分28秒
    # without a hemisphere, decimal degrees with a sign and a fraction (31.2304, -122.42), never a bare integer
    return (rf"^([{letters}] ?{_body(axis, _POINT)}|{body} ?[{letters}]"
            rf"|({words}) ?({chinese}|{_symbols(axis)}|{free}{_DEC})"
            rf"|[+\-−]?{free}\.\d{{1,8}}°?)$")   # 北纬31°10′20″ too; − a minus sign


LAT_PIECE = _coordinate("lat", "NSns", "北纬|南纬|北緯|南緯")
LON_PIECE = _coordinate("lon", "EWew", "东经|西经|東經|西經")
# above zero: 1,200, 1 200 (ICAO's grouping, a space or a no-break one), 0.5, 2,5 (a decimal comma)
_AMOUNT = (r"(([1-9]\d{0,2}((,\d{3})+|([ \u00a0\u202f]\d{3})+)|[1-9]\d{0,5})(\.\d{1,3})?|0\.\d{0,2}[1-9]"
           r"|[1-9]\d{0,5},\d{1,2}|0,\d?[1-9])")
RADIUS_PIECE = (rf"^(半径(为)? ?)?{_AMOUNT} ?({_words('NM', 'NMI', 'nautical mile', 'nautical miles', 'KM', 'kilometre', 'kilometres', 'kilometer', 'kilometers', 'M', 'metre', 'metres', 'meter', 'meters', 'FT', 'feet', 'foot', 'SM', 'statute mile', 'statute miles')}"
                rf"|海里|公里|千米|米)$")
_REF = _words("AGL", "AMSL", "MSL", "above ground level", "above ground", "above mean sea level", "above sea level")
_LEAD = _words("MAX HGT", "HGT", "up to", "below", "height", "max")
LIMIT_PIECE = (rf"^({_words('SFC', 'GND', 'surface', 'ground level', 'ground')}|地面|{_ci('FL')} ?\d{{2,3}}"
               rf"|({_LEAD} )?{_AMOUNT} ?{_words('FT', 'feet', 'foot', 'M', 'metres', 'meters')}( {_REF})?"
               rf"|(真高|相对高度|海拔高度|海拔|限高|最高)?{_AMOUNT} ?(米|{_ci('m')})(以下|及以下)?)$")
# A time as written, in the notations times.read_time reads: YYMMDDhhmm (item B/C, perhaps
# EST), a clock time, English dates with month names (day first or month first, FAA's
# '1200 UTC December 5, 2026'), ISO dates, Chinese dates. A UTC/GMT/Z mark may stand in the
# piece (it then wins over utc_offset_hours); other clocks are utc_offset_hours' business.
_MONTH = _words(*"January February March April May June July August September October November December".split(),
                *"Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec".split())
# 9:30, 09:30, 0930, 0930Z, 09:30 UTC, 9:30 pm (a Z only right after the digits)
_CLOCK = (rf"((([01]?\d|2[0-4]):[0-5]\d|([01]\d|2[0-4])[0-5]\d)(Z| {_words('UTC', 'GMT')})?"
          r"|(0?[1-9]|1[0-2]):[0-5]\d ?[AaPp][Mm])")
_YYMMDDHHMM = r"\d\d(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])([01]\d|2[0-4])[0-5]\d"   # item B/C, digit by digit
_DAY = r"([012]?\d|3[01])(st|nd|rd|th)?"
_AT = rf"(,? ({_words('at')} )?{_CLOCK})?"
_ENGLISH = (rf"{_DAY} {_MONTH}\.?,? \d{{4}}{_AT}|{_MONTH}\.? {_DAY},? \d{{4}}{_AT}|{_MONTH} {_DAY} {_CLOCK} \d{{4}}"
            rf"|{_CLOCK},? ({_words('on')} )?({_MONTH} {_DAY},? \d{{4}}|{_DAY} {_MONTH},? \d{{4}})")
_ISO = rf"\d{{4}}[-/.][01]?\d[-/.][0-3]?\d([ T]{_CLOCK})?"
_CHINESE_TIME = (r"((\d{4}年)?[01]?\d月)?([0-3]?\d[日号])?(上午|下午|晚上|傍晚|凌晨|早上|中午)?"
                 r"([012]?\d([时点](([0-5]?\d)分?|半)?|:[0-5]\d))")
TIME_PIECE = (rf"^({_YYMMDDHHMM}( ?EST)?|\d\d{_YYMMDDHHMM}|{_CLOCK}|{_ENGLISH}|{_ISO}|{_CHINESE_TIME}"
              r"|(\d{4}年)?[01]?\d月[0-3]?\d[日号])$")
NOTAM_ID = r"^[A-Za-z]?\d{1,4}/\d{2,4}$"

# What the text around a copied piece says of it, where extract gives the validators the text
# (info.context["text"]): a height ('60 m above ground', 'Maximum altitude: 400 feet') is no
# radius, a radius ('within 800 m', '2KM RADIUS') no height, and the year of a date
# ('21 September 2028', '2028年') no clock time.
_HEIGHT = (re.compile(rf"(({_words('altitude', 'height', 'HGT', 'ceiling', 'elevation')}|真高|海拔|高度|限高)"
                      rf"(\s+{_words('limit', 'of', 'is', 'at', 'up to', 'not exceeding', 'maximum', 'max')})*"
                      rf"\s*[:：]?\s*(不超过|不高于|低于)?|(?<![A-Za-z]){_words('below')}\s*)\Z"),
           re.compile(rf"\s*({_REF}(?![A-Za-z])|及?以下)"))
_RADIUS = (re.compile(rf"(?<![A-Za-z])({_words('within', 'WI', 'radius of', 'radius')}|半径为?)\s*\Z"),
           re.compile(rf"\s*({_words('radius', 'around')}(?![A-Za-z])|范围)"))
# A NOTAM that cancels another: NOTAMC as its type, after its number (not 'NO NOTAMC WILL BE ISSUED')
_CANCELS = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]?\d{1,4}/\d{2,4}\s+NOTAMC(?![A-Za-z])", re.IGNORECASE)
# a NOTAM's item Q up to the piece, no other item (A) to G)) begun since
_Q_LINE = (re.compile(r"(?<![A-Za-z])[Qq]\)((?![A-Ga-g]\))[^\n])*\Z"), re.compile(r"(?!)"))
_YEAR = (re.compile(rf"{_MONTH}\.?(\s+{_DAY})?,?\s*\Z|\b[0-3]?\d[./-][01]?\d[./-]\s*\Z"),
         re.compile(r"年|[./-][01]?\d[./-][0-3]?\d"))


def _source(info: ValidationInfo) -> str | None:
    """The text a record was extracted from, where the caller gave it (extract does)."""
    text = info.context.get("text") if isinstance(info.context, dict) else None
    return text if isinstance(text, str) else None


def _not_a_year(time: str, info: ValidationInfo) -> None:
    """A time piece of four digits (a clock's 2028) that is, wherever the text states it, a date's year."""
    if time.isdigit() and len(time) == 4 and (text := _source(info)) is not None and _stated_as(time, text, _YEAR):
        raise ValueError(f"{time!r} is the year of a date where the text states it, not a time")


def _not_a_radius(limit: Optional[str], info: ValidationInfo) -> None:
    """A height piece naming no reference that, wherever the text states it, is a distance
    ('within 800 m', '2 km around'), and nowhere a height."""
    if limit is not None and read_limit(limit)[1] is None and (text := _source(info)) is not None \
            and _stated_as(limit, text, _RADIUS) and not _stated_as(limit, text, _HEIGHT):
        raise ValueError(f"{limit!r} is a radius where the text states it, not a height")


def _stated_as(piece: str, text: str, around: tuple[re.Pattern, re.Pattern]) -> bool:
    """Whether `piece` stands in `text` (a run of white space as one space), and wherever it does,
    the text before it ends with a match of around[0] or the text after it starts with one of
    around[1]."""
    words = r"\s+".join(map(re.escape, piece.split()))
    found = [m.span() for m in re.finditer(rf"(?<![0-9A-Za-z.,]){words}", text)]
    return bool(found) and all(around[0].search(text, max(0, a - 40), a) or around[1].match(text, b)
                               for a, b in found)


@lru_cache(maxsize=8192)
def _degrees(piece: str, axis: str) -> float:
    return read_coordinate(piece, axis)


def _piece(pattern: str, tokens: int, description: str, default=..., **extra) -> Field:
    return Field(default, pattern=pattern, description=description,
                 json_schema_extra={"max_tokens": tokens, **VERBATIM, **extra})


def _limit(piece: str, other: Optional[str]) -> tuple[Optional[float], Optional[str]]:
    """A limit piece in metres and its reference; a height that names none takes the one the
    other limit names (above ground or sea level), else DEFAULT_REF."""
    try:
        named = read_limit(other)[1] if other is not None else None
    except ValueError:      # the other limit's own check says what is wrong with it
        named = None
    return read_limit(piece, named if named in ("AGL", "AMSL") else DEFAULT_REF)


@lru_cache(maxsize=8192)
def _limits(floor: Optional[str], ceiling: Optional[str]) -> tuple[tuple, tuple]:
    """((floor metres, reference), (ceiling metres, reference)); a null floor is the surface
    (0.0, 'AGL'), a null ceiling (None, None)."""
    low = (0.0, "AGL") if floor is None else _limit(floor, ceiling)
    return low, (None, None) if ceiling is None else _limit(ceiling, floor)


class Position(BaseModel):
    """A point as the notice writes it: latitude and longitude, each copied as written."""

    model_config = ConfigDict(extra="forbid")

    lat: str = _piece(LAT_PIECE, 16, "latitude as written, e.g. 510718N, N2609, S05 59 00, 40°26'46\"N, "
                                     "31.2304, 北纬22.5431度")
    lon: str = _piece(LON_PIECE, 16, "longitude as written, e.g. 0021047W, E11430, E090 05 00, 121.4737, "
                                     "东经114.0579度", copies_beside="lat")   # after it, or before: 东经..、北纬..

    @field_validator("lat")
    @classmethod
    def _lat(cls, v: str) -> str:
        _degrees(v, "lat")
        return v

    @field_validator("lon")
    @classmethod
    def _lon(cls, v: str) -> str:
        _degrees(v, "lon")
        return v

    @property
    def decimal(self) -> tuple[float, float]:
        return _degrees(self.lat, "lat"), _degrees(self.lon, "lon")


Vertex = Position  # a polygon corner is a position like any other


class CircleArea(BaseModel):
    """WI <radius> RADIUS OF <centre>."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["circle"] = Field("circle", description="discriminator: a circle around a centre")
    center: Position = Field(description="centre of the circle as written")
    radius: str = _piece(RADIUS_PIECE, 24, "radius as written, number and unit, e.g. 1NM, 0.5 NM, 1.35 nautical "
                                           "miles, 500米, 5 km")

    @model_validator(mode="after")
    def _off_the_poles(self) -> CircleArea:
        try:
            circle_about(*self.center.decimal, read_radius(self.radius))
        except ValueError:
            raise ValueError(f"a circle of {self.radius} around {self.center.lat} takes in a pole, or its polygon "
                             "in degrees would, which a footprint in degrees cannot hold") from None
        return self

    @field_validator("radius")
    @classmethod
    def _radius(cls, v: str, info: ValidationInfo) -> str:
        read_radius(v)
        if (text := _source(info)) is not None and _stated_as(v, text, _HEIGHT):
            raise ValueError(f"{v!r} is a height where the text states it, not a radius")
        return v


class PolygonArea(BaseModel):
    """WI AREA BOUNDED BY <v1> - <v2> - ... ; the closing repeat of v1 may be copied too
    (it is dropped when the footprint is read); 'BACK TO START' closes the ring unwritten."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["polygon"] = Field("polygon", description="discriminator: an area bounded by vertices")
    vertices: list[Position] = Field(
        min_length=3, max_length=MAX_VERTICES, json_schema_extra={"item_blocks": True},
        description="vertices in the order written, each copied as written",
    )

    @field_validator("vertices")
    @classmethod
    def _three_distinct(cls, v: list[Position]) -> list[Position]:
        points = [p.decimal for p in v]
        if len(set(points)) < 3:
            raise ValueError("an area needs at least three distinct vertices")
        ring = unwrapped(points + points[:1])
        if abs(ring[-1][1] - ring[0][1]) > 180:   # around and back to the start a turn east or west
            raise ValueError("the boundary goes round a pole, which a footprint in degrees cannot hold")
        if MultiPoint([(lon, lat) for lat, lon in ring]).convex_hull.area < 1e-12:
            raise ValueError("the vertices lie on one line: they bound no area")
        return v

    @property
    def ring(self) -> list[tuple[float, float]]:
        """(lat, lon) of the vertices without a closing repeat of the first."""
        points = [p.decimal for p in self.vertices]
        return points[:-1] if len(points) > 3 and points[-1] == points[0] else points


Area = Annotated[Union[CircleArea, PolygonArea], Field(discriminator="kind")]

# Daily windows are the only schedule contains() enforces: 'DLY 0800-1700', '0615-1745 2000-2200',
# '每日08:00-18:00'. Anything else (weekdays, dates, SR-SS) is ignored: the zone then counts as
# active throughout its validity, the safe reading for a no-fly check.
_WINDOW = re.compile(r"(\d{2}):?(\d{2})\s*(?:-|–|~|至|到)\s*(\d{2}):?(\d{2})")
_DAILY_NOISE = re.compile(r"DLY|DAILY|EVERY DAY|每日|每天|[\s,;，、]|AND|和")


@lru_cache(maxsize=8192)
def read_validity(start: Optional[str], end: Optional[str], utc_offset_hours: float, alone: bool = False
                  ) -> tuple[Optional[datetime], Optional[datetime]]:
    """The start and end pieces -> aware UTC datetimes (None where not stated or PERM/UFN).

    Each piece is read in the notice's clock unless it names its own. Either may leave out
    what the other states ('2026年12月3日08时' ... '18时' shares the start's day; '06:00' ...
    '11:30 on 14 June 2031' takes the end's); a time with no date that would put the end
    before the start is a day later (an end) or earlier (a start): an overnight window.
    Raises ValueError naming the piece. alone=True: the start's own check, which lets a start
    with no date pass (the end, not yet read, may give it).
    """
    def by_itself(piece, is_end):
        try:
            return read_time(piece, utc_offset_hours, end=is_end), True
        except ValueError as e:
            if "pass `default`" not in str(e):
                raise
            return None, False

    def near(piece, other, days, is_end):
        """The piece read on the first of `days` from `other` that keeps the start before the end (29
        February: a year with one)."""
        for k, day in enumerate(days):
            try:
                moment = read_time(piece, utc_offset_hours, default=shifted(other, timedelta(days=day), piece),
                                   end=is_end)
            except ValueError:
                if k == len(days) - 1:
                    raise
                continue
            if moment is None or (moment >= other if is_end else moment <= other):
                return moment
        return moment

    first, first_dated = by_itself(start, False) if start is not None else (None, True)
    last, last_dated = by_itself(end, True) if end is not None else (None, True)
    if not first_dated and not alone:
        if last is None:
            raise ValueError(f"cannot read {start!r} as a time: it states no date (or no year) and the end "
                             "gives none")
        first = near(start, last, (0, -1, -366, -731, -1096, -1461), False)   # that day, the one before, years before
    if not last_dated:
        if first is None:
            raise ValueError(f"cannot read {end!r} as a time: it states no date (or no year) and the start "
                             "gives none")
        last = near(end, first, (0, 1, 366, 731, 1096, 1461), True)   # that day, the one after, the years after
    return first, last


class NoFlyZone(BaseModel):
    """A restricted volume: an area, a floor and a ceiling, a validity window; or no zone.

    The notice's values are pieces of its text, as written (see the module docstring).
    ``area`` is null when the notice defines no volume (runway, taxiway, lighting, crane,
    obstacle or procedure notices; text that is no notice at all): then ``defines_zone`` is
    False, ``footprint()`` raises and ``contains()`` is False; the other fields still say
    what the notice states (its number, items B/C/D/F/G), reason and uas_only say nothing.
    A null floor is the surface; a null ceiling is unlimited (UNL is not copied); a null
    valid_to_raw is permanent (PERM/UFN are not copied) or not stated. A height naming no
    reference takes the one the other limit names ('海拔高度100米' to '600米': both above sea
    level), else is above ground (DEFAULT_REF). Validated with the text it was read from
    (``context={"text": ...}``, as extract does), a radius the text states as a height, a time
    that is a date's year ('2028' of '21 September 2028'), a NOTAM number that stands in item Q
    and any area of a NOTAMC (it cancels another NOTAM) are refused.
    """

    model_config = ConfigDict(extra="forbid")

    notam_id: Optional[str] = _piece(NOTAM_ID, 12, "NOTAM number if the notice is a NOTAM, else null", None)
    floor: Optional[str] = _piece(LIMIT_PIECE, 20, "lower limit as written, e.g. SFC, 1500FT AMSL, FL050; "
                                                   "null if not stated (the surface)", None)
    ceiling: Optional[str] = _piece(LIMIT_PIECE, 20, "upper limit as written, e.g. 400FT AGL, FL100, 真高120米; "
                                                     "null when unlimited (UNL) or not stated", None)
    utc_offset_hours: UtcOffset = Field(  # type: ignore[valid-type]
        0.0, description="offset of the notice's clock from UTC: 0 for UTC/Z and ICAO items B/C, 8 for 北京时间")
    valid_from_raw: Optional[str] = _piece(TIME_PIECE, 36, "start as written, e.g. 2606010700, 1200 UTC December 5, 2026, "
                                                       "2026年12月3日08时; null if not stated", None,
                                           copies_before="valid_to_raw")   # a notice states the start first
    valid_to_raw: Optional[str] = _piece(TIME_PIECE, 36, "end as written, e.g. 2606011800, 18时; null if permanent "
                                                     "(PERM, UFN) or not stated", None)
    schedule: Optional[str] = Field(
        None, max_length=200, description="active hours as written (item D), e.g. DLY 0800-1700; null if continuous",
        json_schema_extra={"max_tokens": 64, **VERBATIM},
    )
    uas_only: bool = Field(description="true when the restriction applies only to unmanned aircraft / drones")
    reason: Optional[str] = Field(
        None, max_length=160, description="the stated activity or reason, copied briefly, e.g. FIREWORK DISPLAY",
        json_schema_extra={"max_tokens": 48, **VERBATIM},
    )
    # Last, so that the vertices (a block each) end the canvas: every other field is decoded
    # in the first block.
    area: Optional[Area] = Field(None, description="the horizontal extent: a circle or a polygon; null when the "
                                                   "notice defines no zone")

    # Each check names the field a repair should change: limits and times are read in field
    # order, a field seeing the ones validated before it. Only a zone of no height is checked
    # as a record, as either limit may be the wrong one: the repair makes the change the
    # model finds least unlikely ('Maximum altitude: 400 feet' copied twice loses the floor).
    @field_validator("notam_id")
    @classmethod
    def _number(cls, v: Optional[str], info: ValidationInfo) -> Optional[str]:
        if v is not None and (text := _source(info)) is not None and _stated_as(v, text, _Q_LINE):
            raise ValueError(f"{v!r} stands in item Q (limits and a position), not the NOTAM's number")
        return v

    @field_validator("area")
    @classmethod
    def _in_force(cls, v: Optional[Area], info: ValidationInfo) -> Optional[Area]:
        if v is not None and (text := _source(info)) is not None and _CANCELS.search(text):
            raise ValueError("the notice is a NOTAMC: it cancels a NOTAM and restricts no area of its own")
        return v

    @field_validator("floor")
    @classmethod
    def _floor(cls, v: Optional[str], info: ValidationInfo) -> Optional[str]:
        _not_a_radius(v, info)
        if v is not None and read_limit(v, DEFAULT_REF)[0] is None:
            raise ValueError(f"{v!r} is unlimited: leave the field null instead")
        if v is not None and states_a_maximum(v):   # (0-120 m had become 120 m and up)
            raise ValueError(f"{v!r} says 'at most': a ceiling, not a floor")
        return v

    @field_validator("ceiling")
    @classmethod
    def _ceiling(cls, v: Optional[str], info: ValidationInfo) -> Optional[str]:
        if v is None:
            return v
        floor = info.data.get("floor")
        _not_a_radius(v, info)
        metres, ref = _limit(v, floor)
        if metres is None:
            raise ValueError(f"{v!r} is unlimited: leave the field null instead")
        if metres <= 0:
            raise ValueError(f"ceiling {v!r} is at the surface: it bounds no volume")
        low, low_ref = (0.0, "AGL") if floor is None else _limit(floor, v)
        if "floor" in info.data and _comparable(ref, low_ref) and metres < low:
            raise ValueError(f"ceiling {metres:.0f} m {ref} is below floor {low:.0f} m {low_ref}")
        return v

    @field_validator("utc_offset_hours")
    @classmethod
    def _clock(cls, v: float, info: ValidationInfo) -> float:
        if (text := _source(info)) is not None and (stated := stated_clock(text)) is not None and v != stated:
            raise ValueError(f"the text names its clock as UTC{stated:+g}, not UTC{v:+g}")
        return v

    @field_validator("valid_from_raw")
    @classmethod
    def _start(cls, v: Optional[str], info: ValidationInfo) -> Optional[str]:
        if v is not None:
            _not_a_year(v, info)
            read_validity(v, None, info.data.get("utc_offset_hours", 0.0), alone=True)
        return v

    @field_validator("valid_to_raw")
    @classmethod
    def _end(cls, v: Optional[str], info: ValidationInfo) -> Optional[str]:
        if v is not None:
            _not_a_year(v, info)
        if "valid_from_raw" not in info.data:   # the start failed its own check
            return v
        start, end = read_validity(info.data["valid_from_raw"], v, info.data.get("utc_offset_hours", 0.0))
        if start is not None and end is not None and end < start:
            raise ValueError(f"valid_to_raw {v!r} is before valid_from_raw {info.data['valid_from_raw']!r}")
        return v

    @model_validator(mode="after")
    def _height(self) -> NoFlyZone:
        if self.ceiling is not None and self.floor is not None and _comparable(self.ceiling_ref, self.floor_ref) \
                and self.ceiling_m == self.floor_m:
            raise ValueError(f"floor {self.floor!r} and ceiling {self.ceiling!r} are the same height")
        return self

    # -- read values -----------------------------------------------------------------------------
    @property
    def defines_zone(self) -> bool:
        """Whether the notice restricts a volume (False: a runway closure, a crane, garbage...)."""
        return self.area is not None

    @property
    def center_lat(self) -> Optional[float]:
        return None if self.area is None else self._center()[0]

    @property
    def center_lon(self) -> Optional[float]:
        return None if self.area is None else self._center()[1]

    def _center(self) -> tuple[float, float]:
        # A circle's centre as given; a polygon's is its footprint centroid (for labels, maps).
        if isinstance(self.area, CircleArea):
            return self.area.center.decimal
        c = self.footprint().centroid
        return c.y, c.x

    @property
    def radius_m(self) -> Optional[float]:
        return read_radius(self.area.radius) if isinstance(self.area, CircleArea) else None

    @property
    def polygon(self) -> Optional[list[tuple[float, float]]]:
        """(lat, lon) vertices in decimal degrees for polygons, closing repeat dropped; None otherwise."""
        return self.area.ring if isinstance(self.area, PolygonArea) else None

    @property
    def floor_m(self) -> float:
        return _limits(self.floor, self.ceiling)[0][0]

    @property
    def floor_ref(self) -> str:
        return _limits(self.floor, self.ceiling)[0][1]

    @property
    def ceiling_m(self) -> Optional[float]:
        return _limits(self.floor, self.ceiling)[1][0]

    @property
    def ceiling_ref(self) -> Optional[str]:
        return _limits(self.floor, self.ceiling)[1][1]

    @property
    def valid_from(self) -> Optional[datetime]:
        return read_validity(self.valid_from_raw, self.valid_to_raw, self.utc_offset_hours)[0]

    @property
    def valid_to(self) -> Optional[datetime]:
        return read_validity(self.valid_from_raw, self.valid_to_raw, self.utc_offset_hours)[1]

    # -- geometry ---------------------------------------------------------------------------
    def footprint(self) -> Polygon:
        """The horizontal extent as a shapely Polygon in (x=lon, y=lat) degrees.

        Circles: the polygon of CIRCLE_SEGMENTS sides drawn about the circle on a sphere.
        Polygons: the vertices as given (closing repeat dropped), not repaired if
        self-intersecting. Neither is wrapped at +-180: a zone across the antimeridian stays one
        piece, its longitudes past 180 (contains() tries the point a turn either way). Raises
        ValueError when the notice defines no zone.
        """
        if self.area is None:
            raise ValueError("the notice defines no zone (area is null): there is no footprint")
        if isinstance(self.area, CircleArea):
            return circle_about(*self.area.center.decimal, self.radius_m)
        return Polygon([(lon, lat) for lat, lon in unwrapped(self.polygon)])

    def active_at(self, when: datetime) -> bool:
        """Within the validity window (bounds inclusive) and, for a plain daily schedule,
        within one of its windows. Other schedules are ignored (treated as always active)."""
        if when.tzinfo is None:
            raise ValueError("`when` must be timezone-aware, e.g. datetime(..., tzinfo=timezone.utc)")
        start, end = self.valid_from, self.valid_to
        if start is not None and when < start:
            return False
        if end is not None and when > end:
            return False
        windows = daily_windows(self.schedule)
        if not windows:
            return True
        # Schedule hours are in the notice's clock, like its validity times.
        local = when.timestamp() / 60 + self.utc_offset_hours * 60
        minute = int(local % 1440)
        return any(a <= minute <= b if a <= b else minute >= a or minute <= b for a, b in windows)

    def contains(self, lat: float, lon: float, alt_m: float, when: datetime) -> bool:
        """Is (lat, lon, alt_m) inside the volume at `when`? False when no zone is defined.

        alt_m is compared with floor_m/ceiling_m as numbers: give it in the zone's own
        reference (floor_ref/ceiling_ref); the zone cannot convert AGL to AMSL without
        terrain. Horizontal test on footprint(), boundary included."""
        if self.area is None or not self.active_at(when):
            return False
        if alt_m < self.floor_m or (self.ceiling is not None and alt_m > self.ceiling_m):
            return False
        shape = self.footprint()
        return any(shape.covers(_ShapelyPoint(lon + turn, lat)) for turn in TURNS)


def _comparable(ref: str, other: str) -> bool:
    """Whether heights in two references compare as numbers: in one reference, and flight levels
    with heights above sea level (on a standard day); 1200FT AGL over a valley may lie below
    200M AMSL."""
    return ref == other or {ref, other} == {"AMSL", "STD"}


def circle_ring(lat: float, lon: float, radius_m: float, points: int = CIRCLE_SEGMENTS) -> Polygon:
    """A circle as `points` great-circle destinations from its centre, in (x=lon, y=lat) degrees."""
    ring = [destination_point(lat, lon, 360 * k / points, radius_m) for k in range(points)]
    return Polygon([(x, y) for y, x in ring])


@lru_cache(maxsize=4096)   # (contains() draws the footprint for each point it tests)
def circle_about(lat: float, lon: float, radius_m: float) -> Polygon:
    """A polygon of CIRCLE_SEGMENTS sides in (x=lon, y=lat) degrees that holds the whole circle:
    its ring drawn out until every side passes outside it (a side straight in degrees bows in,
    at high latitudes and large radii, past what 1/cos(pi/CIRCLE_SEGMENTS) allows). ValueError
    where no such ring stays off the poles (one drawn over a pole wraps to its far side)."""
    drawn = radius_m / math.cos(math.pi / CIRCLE_SEGMENTS)
    for _ in range(8):
        if abs(lat) + math.degrees(drawn / EARTH_RADIUS_M) >= 90:
            break
        ring = circle_ring(lat, lon, drawn)
        corners = ring.exterior.coords
        nearest = min(distance_m((lat, lon), (y1 + (y2 - y1) * f, x1 + (x2 - x1) * f))
                      for (x1, y1), (x2, y2) in zip(corners, corners[1:]) for f in (0.25, 0.5, 0.75))
        if nearest >= radius_m:
            return ring
        drawn += max(radius_m - nearest, radius_m * 1e-6) * 1.1   # (past a shortfall of float noise)
    raise ValueError(f"no polygon in degrees holds a circle of {radius_m:.0f} m around latitude {lat} off the poles")


def daily_windows(schedule: Optional[str]) -> list[tuple[int, int]]:
    """'DLY 0800-1700 2000-2200' -> [(480, 1020), (1200, 1320)] minutes of the day, or []
    when the schedule is absent or is anything but a list of daily windows."""
    if not schedule:
        return []
    text = schedule.upper()
    found = [tuple(map(int, w)) for w in _WINDOW.findall(text)]
    if not found or _DAILY_NOISE.sub("", _WINDOW.sub("", text)):
        return []
    if any(h * 60 + m > 1440 or m > 59 for a, b, c, d in found for h, m in ((a, b), (c, d))):
        return []
    return [(a * 60 + b, c * 60 + d) for a, b, c, d in found]
