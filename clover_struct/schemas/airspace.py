"""A 3D restricted volume (no-fly zone) as a pydantic model, with geometry helpers.

Fields copy what a notice states, in its own notation: coordinates as written (compact
DMS '473012N' or signed decimal '31.2304'), a radius as number + unit, vertical limits
as value + unit + reference, times as YYMMDDhhmm in the notice's own clock plus that
clock's UTC offset (0 for ICAO notices, 8 for Beijing time). Properties convert to
decimal degrees, metres and aware UTC datetimes; ``footprint()`` and ``contains()`` answer
geometric questions. Sources: item E of a NOTAM when it gives a precise zone (not the
coarse Q-line circle), or a plain-language drone notice (English or Chinese).
Knows nothing of models, decoding or how notices are generated.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from shapely.geometry import Point as _ShapelyPoint
from shapely.geometry import Polygon

from .units import LAT_PATTERN, LON_PATTERN, TIME10, VERBATIM, coordinate_to_decimal, destination_point
from .units import check_utc_offset, parse_yymmddhhmm, to_metres

CIRCLE_SEGMENTS = 64
# Bounds the canvas. Some real boundaries list 19-24 points (closing repeat included);
# those do not fit and would need a larger bound at the cost of a longer canvas.
MAX_VERTICES = 16


class Position(BaseModel):
    """A point as written in the notice."""

    model_config = ConfigDict(extra="forbid")

    lat: str = Field(pattern=LAT_PATTERN, description="latitude as written: DDMMSS[.s]N|S, DDMMN or signed decimal")
    lon: str = Field(pattern=LON_PATTERN, description="longitude as written: DDDMMSS[.s]E|W, DDDMMW or signed decimal")

    @field_validator("lat")
    @classmethod
    def _lat(cls, v: str) -> str:
        coordinate_to_decimal(v, "lat")
        return v

    @field_validator("lon")
    @classmethod
    def _lon(cls, v: str) -> str:
        coordinate_to_decimal(v, "lon")
        return v

    @property
    def decimal(self) -> tuple[float, float]:
        return coordinate_to_decimal(self.lat, "lat"), coordinate_to_decimal(self.lon, "lon")


Vertex = Position  # a polygon corner is a position like any other


class CircleArea(BaseModel):
    """WI <radius> RADIUS OF <centre>."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["circle"] = Field("circle", description="discriminator: a circle around a centre")
    center: Position = Field(description="centre of the circle as written")
    radius_value: float = Field(gt=0, le=100_000, description="radius number as written, e.g. 1.35")
    radius_unit: Literal["M", "KM", "NM", "FT"] = Field(description="radius unit: M (米), KM (公里), NM or FT")


class PolygonArea(BaseModel):
    """WI AREA BOUNDED BY <v1> - <v2> - ... (the closing repeat of v1 may be copied too)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["polygon"] = Field("polygon", description="discriminator: an area bounded by vertices")
    vertices: list[Position] = Field(min_length=3, max_length=MAX_VERTICES, description="vertices in the order written")

    @field_validator("vertices")
    @classmethod
    def _three_distinct(cls, v: list[Position]) -> list[Position]:
        if len({p.decimal for p in v}) < 3:
            raise ValueError("an area needs at least three distinct vertices")
        return v


class Limit(BaseModel):
    """A vertical limit: SFC/GND is value 0, unit M, ref AGL; FL195 is 195, FL, STD."""

    model_config = ConfigDict(extra="forbid")

    value: float = Field(ge=0, le=99999, description="number as written, e.g. 350 for 350FT; 0 for SFC/GND/地面")
    unit: Literal["M", "FT", "FL"] = Field(description="M (米), FT, or FL for a flight level")
    ref: Literal["AGL", "AMSL", "STD"] = Field(
        description="AGL (above ground, 真高, SFC/GND), AMSL (above sea level, 海拔), STD for flight levels"
    )

    @model_validator(mode="after")
    def _fl_is_std(self) -> "Limit":
        if (self.unit == "FL") != (self.ref == "STD"):
            raise ValueError("flight levels (unit FL) go with ref STD, and STD only with FL")
        return self

    @property
    def metres(self) -> float:
        return to_metres(self.value, self.unit)


Area = Annotated[Union[CircleArea, PolygonArea], Field(discriminator="kind")]

# Daily windows are the only schedule contains() enforces: 'DLY 0800-1700', '0615-1745 2000-2200',
# '每日08:00-18:00'. Anything else (weekdays, dates, SR-SS) is ignored: the zone then counts as
# active throughout its validity, the safe reading for a no-fly check.
_WINDOW = re.compile(r"(\d{2}):?(\d{2})\s*(?:-|–|~|至|到)\s*(\d{2}):?(\d{2})")
_DAILY_NOISE = re.compile(r"DLY|DAILY|EVERY DAY|每日|每天|[\s,;，、]|AND|和")


class NoFlyZone(BaseModel):
    """A restricted volume: an area, a floor and a ceiling, a validity window."""

    model_config = ConfigDict(extra="forbid")

    notam_id: Optional[str] = Field(
        None, pattern=r"^[A-Z]?\d{1,4}/\d{2,4}$", json_schema_extra=VERBATIM,
        description="NOTAM number if the notice is a NOTAM, else null",
    )
    area: Area = Field(description="the horizontal extent: a circle or a polygon")
    floor: Limit = Field(description="lower limit (F); SFC/GND as 0 M AGL")
    ceiling: Optional[Limit] = Field(None, description="upper limit (G); null when unlimited (UNL)")
    valid_from_raw: Optional[str] = Field(
        None, pattern=TIME10, description="start as YYMMDDhhmm in the notice's clock; null if not stated"
    )
    valid_to_raw: Optional[str] = Field(
        None, pattern=TIME10, description="end as YYMMDDhhmm in the notice's clock; null if permanent or not stated"
    )
    utc_offset_hours: float = Field(
        0.0, ge=-12, le=14, description="offset of the notice's clock from UTC: 0 for UTC/Z, 8 for 北京时间"
    )
    schedule: Optional[str] = Field(
        None, max_length=120, description="active hours as written, e.g. DLY 0800-1700; null if continuous",
        json_schema_extra={"max_tokens": 32, **VERBATIM},
    )
    uas_only: bool = Field(description="true when the restriction applies only to unmanned aircraft / drones")
    reason: Optional[str] = Field(
        None, max_length=160, description="the stated activity or reason, copied briefly, e.g. FIREWORK DISPLAY",
        json_schema_extra={"max_tokens": 48, **VERBATIM},
    )

    @field_validator("valid_from_raw", "valid_to_raw")
    @classmethod
    def _real_time(cls, v: Optional[str]) -> Optional[str]:
        if v is not None:
            parse_yymmddhhmm(v)
        return v

    @field_validator("utc_offset_hours")
    @classmethod
    def _offset(cls, v: float) -> float:
        return check_utc_offset(v)

    @model_validator(mode="after")
    def _consistent(self) -> "NoFlyZone":
        # Only comparable in one reference: 1200FT AGL over a valley may lie below 200M AMSL.
        if self.ceiling is not None and self.ceiling.ref == self.floor.ref and self.ceiling_m < self.floor_m:
            raise ValueError(f"ceiling {self.ceiling_m:.0f} m is below floor {self.floor_m:.0f} m")
        if self.valid_from and self.valid_to and self.valid_to < self.valid_from:
            raise ValueError(f"valid_to_raw {self.valid_to_raw} is before valid_from_raw {self.valid_from_raw}")
        return self

    # -- decoded values ---------------------------------------------------------------------
    @property
    def center_lat(self) -> float:
        return self._center()[0]

    @property
    def center_lon(self) -> float:
        return self._center()[1]

    def _center(self) -> tuple[float, float]:
        # A circle's centre as given; a polygon's is its footprint centroid (for labels, maps).
        if isinstance(self.area, CircleArea):
            return self.area.center.decimal
        c = self.footprint().centroid
        return c.y, c.x

    @property
    def radius_m(self) -> Optional[float]:
        if isinstance(self.area, CircleArea):
            return to_metres(self.area.radius_value, self.area.radius_unit)
        return None

    @property
    def polygon(self) -> Optional[list[tuple[float, float]]]:
        """(lat, lon) vertices in decimal degrees for polygons; None for circles."""
        if isinstance(self.area, PolygonArea):
            return [p.decimal for p in self.area.vertices]
        return None

    @property
    def floor_m(self) -> float:
        return self.floor.metres

    @property
    def ceiling_m(self) -> Optional[float]:
        return None if self.ceiling is None else self.ceiling.metres

    @property
    def floor_ref(self) -> str:
        return self.floor.ref

    @property
    def ceiling_ref(self) -> Optional[str]:
        return None if self.ceiling is None else self.ceiling.ref

    @property
    def valid_from(self) -> Optional[datetime]:
        return None if self.valid_from_raw is None else parse_yymmddhhmm(self.valid_from_raw, self.utc_offset_hours)

    @property
    def valid_to(self) -> Optional[datetime]:
        return None if self.valid_to_raw is None else parse_yymmddhhmm(self.valid_to_raw, self.utc_offset_hours)

    # -- geometry ---------------------------------------------------------------------------
    def footprint(self) -> Polygon:
        """The horizontal extent as a shapely Polygon in (x=lon, y=lat) degrees.

        Circles: CIRCLE_SEGMENTS great-circle points on a sphere (not wrapped at +-180, so
        a ring across the antimeridian stays one piece; circles around a pole are not
        supported). Polygons: the vertices as given, not repaired if self-intersecting.
        """
        if isinstance(self.area, CircleArea):
            return circle_ring(*self.area.center.decimal, self.radius_m)
        return Polygon([(lon, lat) for lat, lon in self.polygon])

    def active_at(self, when: datetime) -> bool:
        """Within the validity window (bounds inclusive) and, for a plain daily schedule,
        within one of its windows. Other schedules are ignored (treated as always active)."""
        if when.tzinfo is None:
            raise ValueError("`when` must be timezone-aware, e.g. datetime(..., tzinfo=timezone.utc)")
        if self.valid_from is not None and when < self.valid_from:
            return False
        if self.valid_to is not None and when > self.valid_to:
            return False
        windows = daily_windows(self.schedule)
        if not windows:
            return True
        # Schedule hours are in the notice's clock, like its validity times.
        local = when.timestamp() / 60 + self.utc_offset_hours * 60
        minute = int(local % 1440)
        return any(a <= minute <= b if a <= b else minute >= a or minute <= b for a, b in windows)

    def contains(self, lat: float, lon: float, alt_m: float, when: datetime) -> bool:
        """Is (lat, lon, alt_m) inside the volume at `when`?

        alt_m is compared with floor_m/ceiling_m as numbers: give it in the zone's own
        reference (floor_ref/ceiling_ref); the zone cannot convert AGL to AMSL without
        terrain. Horizontal test on footprint(), boundary included."""
        if not self.active_at(when):
            return False
        if alt_m < self.floor_m or (self.ceiling is not None and alt_m > self.ceiling_m):
            return False
        shape = self.footprint()
        return any(shape.covers(_ShapelyPoint(lon + k, lat)) for k in (0.0, 360.0, -360.0))


def circle_ring(lat: float, lon: float, radius_m: float, points: int = CIRCLE_SEGMENTS) -> Polygon:
    """A circle as `points` great-circle destinations from its centre, in (x=lon, y=lat) degrees."""
    ring = [destination_point(lat, lon, 360 * k / points, radius_m) for k in range(points)]
    return Polygon([(x, y) for y, x in ring])


def daily_windows(schedule: Optional[str]) -> list[tuple[int, int]]:
    """'DLY 0800-1700 2000-2200' -> [(480, 1020), (1200, 1320)] minutes of the day, or []
    when the schedule is absent or is anything but a list of daily windows."""
    if not schedule:
        return []
    text = schedule.upper()
    found = [tuple(map(int, w)) for w in _WINDOW.findall(text)]
    if not found or _DAILY_NOISE.sub("", _WINDOW.sub("", text)):
        return []
    if any(h > 24 or m > 59 for a, b, c, d in found for h, m in ((a, b), (c, d))):
        return []
    return [(a * 60 + b, c * 60 + d) for a, b, c, d in found]
