"""The Notam schema: decoded properties, cross-field checks, patterns, descriptions."""

from datetime import datetime, timezone

import pytest
from pydantic import ValidationError

from clover_struct.schemas.notam import Notam

# An invented notice, not taken from any real one.
BASE = dict(
    notam_id="K0412/31", notam_type="NOTAMN", fir="ZQXW", qcode="QRTCA", traffic="IV", purpose="BO",
    scope="W", q_lower="000", q_upper="025", q_coordinates="4417S07152E", q_radius="003",
    location="ZQXA", valid_from_raw="3107041530", valid_to_raw="3107061800", schedule="DLY 1530-1800",
    lower="SFC", upper="2400FT AMSL",
)


def test_properties_decode_the_copied_fields():
    n = Notam(**BASE)
    assert n.center_lat == pytest.approx(-(44 + 17 / 60), abs=1e-6)
    assert n.center_lon == pytest.approx(71 + 52 / 60, abs=1e-6)
    assert (n.lower_fl, n.upper_fl, n.radius_nm) == (0, 25, 3)
    assert n.valid_from == datetime(2031, 7, 4, 15, 30, tzinfo=timezone.utc)
    assert n.valid_to == datetime(2031, 7, 6, 18, 0, tzinfo=timezone.utc)
    assert not n.permanent and not n.estimated
    assert Notam.model_validate(n.model_dump(mode="json")) == n


def test_permanent_and_blank_parts():
    n = Notam(**{**BASE, "valid_to_raw": "PERM", "q_upper": None, "scope": None, "qcode": None})
    assert n.permanent and not n.estimated
    assert n.valid_to is None and n.upper_fl is None and n.scope is None


@pytest.mark.parametrize("item_c", ["3107061800EST", "3107061800 EST"])
def test_estimated_end(item_c):
    n = Notam(**{**BASE, "valid_to_raw": item_c})
    assert n.estimated and not n.permanent
    assert n.valid_to == datetime(2031, 7, 6, 18, 0, tzinfo=timezone.utc)


def test_an_item_c_at_2400_is_the_end_of_its_day():
    """C) 3107062400 had been out of the field's pattern: the model copied item B instead."""
    assert Notam(**{**BASE, "valid_to_raw": "3107062400"}).valid_to == datetime(2031, 7, 7, tzinfo=timezone.utc)
    with pytest.raises(ValueError):
        Notam(**{**BASE, "valid_from_raw": "3107042400"})   # a start at 2400 is the next day's 0000


def test_no_item_c():
    n = Notam(**{**BASE, "valid_to_raw": None})
    assert n.valid_to is None and not n.permanent and not n.estimated


@pytest.mark.parametrize(
    "change, message",
    [
        ({"valid_to_raw": "3107061800E"}, "should match pattern"),
        ({"valid_to_raw": "PERM EST"}, "should match pattern"),
        ({"valid_to_raw": "3107321800EST"}, "should match pattern"),   # day 32
        ({"valid_to_raw": "3107031800"}, "before item B"),
        ({"q_lower": "100", "q_upper": "050"}, "below the lower"),
        ({"replaces": "K0400/31"}, "NOTAMR"),
        ({"valid_from_raw": "3102300000"}, "real date"),
        ({"q_coordinates": "4467S07152E"}, "should match pattern"),   # 67 minutes
    ],
)
def test_inconsistent_notices_are_rejected(change, message):
    with pytest.raises(ValidationError, match=message):
        Notam(**{**BASE, **change})


@pytest.mark.parametrize(
    "field, value",
    [("fir", "ZQ1W"), ("fir", "ZQXWA"), ("qcode", "QRTC"), ("qcode", "XRTCA"), ("location", "ZQXA,ZQXB"),
     ("traffic", "VI"), ("purpose", "M  "), ("scope", "X"), ("q_radius", "5"), ("notam_id", "K0412-31"),
     ("valid_from_raw", "310704153"), ("upper", "ABOUT 2400FT")],
)
def test_patterns_reject_malformed_copies(field, value):
    with pytest.raises(ValidationError):
        Notam(**{**BASE, field: value})


def test_multiple_locations_and_three_letter_fir():
    n = Notam(**{**BASE, "location": "ZQXA ZQXB ZQXC", "fir": "ZQX"})
    assert n.location.split() == ["ZQXA", "ZQXB", "ZQXC"]
