"""Unit conversions against hand-computed values, and their input validation."""

from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clover_struct.schemas import units as u


@pytest.mark.parametrize(
    "text, expected",
    [
        ("473012N", 47 + 30 / 60 + 12 / 3600),
        ("0083015W", -(8 + 30 / 60 + 15 / 3600)),
        ("4730N", 47.5),
        ("00845W", -8.75),
        ("473012.55N", 47 + 30 / 60 + 12.55 / 3600),
        ("1623045W", -(162 + 30 / 60 + 45 / 3600)),
        ("3352S", -(33 + 52 / 60)),
        ("1800000E", 180.0),
    ],
)
def test_dms_to_decimal(text, expected):
    assert u.dms_to_decimal(text) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("text", ["4760N", "473060N", "9100N", "1810000E", "473012X", "12345N", "47 30 12N", "", "473012W"])
def test_dms_to_decimal_rejects(text):
    with pytest.raises(ValueError, match="DMS|below 60|beyond"):
        u.dms_to_decimal(text)


def test_coordinate_to_decimal_accepts_both_notations_and_checks_axis():
    assert u.coordinate_to_decimal("31.2304", "lat") == 31.2304
    assert u.coordinate_to_decimal("-122.42", "lon") == -122.42
    assert u.coordinate_to_decimal("0083015W", "lon") == pytest.approx(-(8 + 30 / 60 + 15 / 3600))
    for text, axis in [("473012N", "lon"), ("0083015W", "lat"), ("95.5", "lat"), ("-181", "lon")]:
        with pytest.raises(ValueError):
            u.coordinate_to_decimal(text, axis)
    with pytest.raises(ValueError, match="axis"):
        u.coordinate_to_decimal("1.0", "alt")


def test_q_coordinates():
    lat, lon = u.parse_q_coordinates("4730N00845W")
    assert (lat, lon) == pytest.approx((47.5, -8.75))
    with pytest.raises(ValueError, match="Q-line"):
        u.parse_q_coordinates("4730N0845W")


def test_lengths():
    assert u.feet_to_m(1000) == pytest.approx(304.8)
    assert u.fl_to_m(100) == pytest.approx(3048.0)
    assert u.nm_to_m(1) == 1852.0
    assert u.km_to_m(2.5) == 2500.0
    assert u.to_metres(3, "NM") == pytest.approx(5556.0)
    assert u.to_metres(195, "fl") == pytest.approx(5943.6)
    with pytest.raises(ValueError, match="unit"):
        u.to_metres(1, "MI")
    with pytest.raises(ValueError):
        u.fl_to_m(-5)
    with pytest.raises(ValueError, match="finite"):
        u.feet_to_m(float("nan"))


def test_yymmddhhmm():
    assert u.parse_yymmddhhmm("3107041530") == datetime(2031, 7, 4, 15, 30, tzinfo=timezone.utc)
    assert u.parse_yymmddhhmm("4912312359").year == 2049
    assert u.parse_yymmddhhmm("0001010000").year == 2000
    assert u.parse_yymmddhhmm("3107042400") == datetime(2031, 7, 5, tzinfo=timezone.utc)
    # Local clocks: Beijing time is UTC+8, India UTC+5:30.
    assert u.parse_yymmddhhmm("2405010800", 8) == datetime(2024, 5, 1, 0, 0, tzinfo=timezone.utc)
    assert u.parse_yymmddhhmm("2405010530", 5.5) == datetime(2024, 5, 1, 0, 0, tzinfo=timezone.utc)
    assert u.parse_yymmddhhmm("2405010000", -3) == datetime(2024, 5, 1, 3, 0, tzinfo=timezone.utc)
    for bad in ["3102300000", "31070415", "3113010000", "3107042460", "31O7041530"]:
        with pytest.raises(ValueError, match="YYMMDDhhmm|real date"):
            u.parse_yymmddhhmm(bad)
    with pytest.raises(ValueError, match="offset"):
        u.parse_yymmddhhmm("3107041530", 5.3)


def test_format_yymmddhhmm_converts_to_utc():
    from datetime import timedelta

    local = datetime(2031, 3, 3, 8, 0, tzinfo=timezone(timedelta(hours=8)))
    assert u.format_yymmddhhmm(local) == "3103030000"
    with pytest.raises(ValueError, match="year"):
        u.format_yymmddhhmm(datetime(2051, 1, 1))


@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2049, 12, 31, 23, 59)))
def test_yymmddhhmm_round_trip(dt):
    dt = dt.replace(second=0, microsecond=0, tzinfo=timezone.utc)
    assert u.parse_yymmddhhmm(u.format_yymmddhhmm(dt)) == dt


def test_destination_point_distance():
    lat, lon = u.destination_point(51.0, -0.5, 90.0, 1852.0)
    assert lat == pytest.approx(51.0, abs=1e-3)
    # One NM due east at 51N is one arc minute of great circle, about 1/cos(51) minutes of longitude.
    assert (lon + 0.5) * 60 == pytest.approx(1 / 0.62932, rel=1e-3)
