"""NoFlyZone: conversions, the footprint's area, and contains() in space and time."""

import math
from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from clover_struct.schemas.airspace import CIRCLE_SEGMENTS, NoFlyZone, daily_windows
from clover_struct.schemas.units import EARTH_RADIUS_M

UTC = timezone.utc


def circle(lat="473000N", lon="0083000E", value=2.0, unit="KM", **kw):
    data = dict(
        area={"kind": "circle", "center": {"lat": lat, "lon": lon}, "radius_value": value, "radius_unit": unit},
        floor={"value": 0, "unit": "M", "ref": "AGL"}, ceiling={"value": 400, "unit": "FT", "ref": "AGL"},
        valid_from_raw="3103031400", valid_to_raw="3103051800", uas_only=True, reason="TEST EVENT",
    )
    data.update(kw)
    return NoFlyZone(**data)


def area_m2(polygon) -> float:
    """Area on the sphere via the sinusoidal projection (equal-area)."""
    from shapely.geometry import Polygon

    lon0 = polygon.centroid.x
    pts = [(EARTH_RADIUS_M * math.radians(x - lon0) * math.cos(math.radians(y)), EARTH_RADIUS_M * math.radians(y))
           for x, y in polygon.exterior.coords]
    return Polygon(pts).area


@pytest.mark.parametrize("lat, radius_km", [("473000N", 2.0), ("000000N", 0.3), ("6830S", 25.0)])
def test_circle_area_is_close_to_pi_r_squared(lat, radius_km):
    z = circle(lat=lat, value=radius_km)
    shape = z.footprint()
    assert shape.is_valid and len(shape.exterior.coords) == CIRCLE_SEGMENTS + 1
    expected = math.pi * (radius_km * 1000) ** 2
    assert area_m2(shape) == pytest.approx(expected, rel=0.005)  # a 64-gon covers 99.84% of its circle


def test_conversions():
    z = circle(value=1.35, unit="NM", ceiling={"value": 195, "unit": "FL", "ref": "STD"})
    assert z.center_lat == pytest.approx(47.5) and z.center_lon == pytest.approx(8.5)
    assert z.radius_m == pytest.approx(2500.2)
    assert z.ceiling_m == pytest.approx(5943.6) and z.ceiling_ref == "STD"
    assert z.floor_m == 0 and z.floor_ref == "AGL"
    assert z.polygon is None
    assert z.valid_from == datetime(2031, 3, 3, 14, 0, tzinfo=UTC)
    assert NoFlyZone.model_validate(z.model_dump(mode="json")) == z


def test_local_clock_is_converted_to_utc():
    z = circle(lat="31.2304", lon="121.4737", valid_from_raw="3105010800", valid_to_raw="3105011800", utc_offset_hours=8)
    assert z.valid_from == datetime(2031, 5, 1, 0, 0, tzinfo=UTC)
    assert z.valid_to == datetime(2031, 5, 1, 10, 0, tzinfo=UTC)
    assert z.center_lat == 31.2304


def test_contains_inside_outside_above_and_out_of_time():
    z = circle()
    inside = datetime(2031, 3, 4, 12, 0, tzinfo=UTC)
    assert z.contains(47.5, 8.5, 50.0, inside)
    assert z.contains(47.51, 8.5, 0.0, inside)  # 1.1 km north, on the floor
    assert not z.contains(47.53, 8.5, 50.0, inside)  # 3.3 km north
    assert not z.contains(47.5, 8.5, 130.0, inside)  # ceiling is 400 ft = 121.9 m
    assert not z.contains(47.5, 8.5, 50.0, datetime(2031, 3, 3, 13, 59, tzinfo=UTC))
    assert not z.contains(47.5, 8.5, 50.0, datetime(2031, 3, 5, 18, 1, tzinfo=UTC))
    assert z.contains(47.5, 8.5, 50.0, datetime(2031, 3, 5, 18, 0, tzinfo=UTC))  # bounds inclusive
    with pytest.raises(ValueError, match="timezone-aware"):
        z.contains(47.5, 8.5, 50.0, datetime(2031, 3, 4, 12, 0))


def test_unlimited_and_permanent():
    z = circle(ceiling=None, valid_to_raw=None)
    assert z.ceiling_m is None and z.valid_to is None
    assert z.contains(47.5, 8.5, 20_000.0, datetime(2049, 1, 1, tzinfo=UTC))


def test_polygon_zone():
    corners = [("10.0", "20.0"), ("10.0", "20.1"), ("10.1", "20.1"), ("10.1", "20.0"), ("10.0", "20.0")]
    verts = [{"lat": a, "lon": b} for a, b in corners]
    z = NoFlyZone(area={"kind": "polygon", "vertices": verts}, floor={"value": 0, "unit": "M", "ref": "AGL"},
                  uas_only=False)
    assert z.radius_m is None and z.polygon[1] == (10.0, 20.1)
    assert (z.center_lat, z.center_lon) == pytest.approx((10.05, 20.05))
    when = datetime(2030, 1, 1, tzinfo=UTC)
    assert z.contains(10.05, 20.05, 100.0, when) and not z.contains(10.2, 20.05, 100.0, when)
    with pytest.raises(ValidationError, match="three distinct"):
        NoFlyZone(area={"kind": "polygon", "vertices": verts[:2] + verts[:1]},
                  floor={"value": 0, "unit": "M", "ref": "AGL"}, uas_only=False)


def test_circle_across_the_antimeridian():
    z = circle(lat="000000N", lon="1795900E", value=5.0)
    assert z.contains(0.0, -179.99, 10.0, datetime(2031, 3, 4, tzinfo=UTC))


def test_daily_schedule_is_enforced_other_schedules_ignored():
    z = circle(schedule="DLY 0800-1700 2145-0315")
    day = datetime(2031, 3, 4, tzinfo=UTC)
    assert z.contains(47.5, 8.5, 10.0, day + timedelta(hours=9))
    assert not z.contains(47.5, 8.5, 10.0, day + timedelta(hours=18))
    assert z.contains(47.5, 8.5, 10.0, day + timedelta(hours=2))  # overnight window
    zh = circle(schedule="每日08:00至17:00", utc_offset_hours=8)
    assert zh.contains(47.5, 8.5, 10.0, day + timedelta(hours=1))  # 09:00 Beijing time
    assert not zh.contains(47.5, 8.5, 10.0, day + timedelta(hours=12))  # 20:00 Beijing time
    weekly = circle(schedule="MON-FRI 0800-1700")
    assert weekly.contains(47.5, 8.5, 10.0, day + timedelta(hours=20))
    assert daily_windows("SR-SS") == [] and daily_windows("daily 08:00-17:00") == [(480, 1020)]


@pytest.mark.parametrize(
    "change",
    [
        {"ceiling": {"value": 100, "unit": "FL", "ref": "AGL"}},
        {"floor": {"value": 500, "unit": "M", "ref": "AGL"}, "ceiling": {"value": 100, "unit": "M", "ref": "AGL"}},
        {"valid_to_raw": "3103011800"},
        {"utc_offset_hours": 5.2},
        {"area": {"kind": "circle", "center": {"lat": "47.5N", "lon": "8.5"}, "radius_value": 1, "radius_unit": "KM"}},
        {"area": {"kind": "circle", "center": {"lat": "473000N", "lon": "0083000E"},
                  "radius_value": 1, "radius_unit": "MI"}},
        {"area": {"kind": "square"}},
    ],
)
def test_invalid_zones_are_rejected(change):
    with pytest.raises(ValidationError):
        circle(**change)
