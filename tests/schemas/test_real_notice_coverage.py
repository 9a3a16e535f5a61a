"""Can the Notam schema express every reference value of the real development notices?

Reads ../shared/data/notams-dev.jsonl (kept outside the repository on purpose) and is
skipped where it is absent. Nothing from it is stored here; failures print ids only.
"""

import json
import re
from datetime import datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from clover_struct.schemas.notam import Notam

DEV = Path(__file__).resolve().parents[2].parent / "shared/data/notams-dev.jsonl"
pytestmark = pytest.mark.skipif(not DEV.exists(), reason=f"real notices not present at {DEV}")

# An invented, valid notice; each check swaps in one reference value.
BASE = dict(fir="ZQXW", q_lower="000", q_coordinates="4417S07152E", q_radius="003", location="ZQXA",
            valid_from_raw="3107041530")


def rows():
    with DEV.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _blank(v):
    return None if v in ("", None) else v


def failures(field: str, to_fields) -> list[str]:
    bad = []
    for row in rows():
        value = row["ref"].get(field)
        if value in ("", None):
            continue
        try:
            Notam(**{**BASE, **to_fields(value)})
        except ValidationError as e:
            bad.append(f"{row['id']}: {e.errors()[0]['msg']}")
    return bad


@pytest.mark.parametrize(
    "field, to_fields",
    [
        ("qcode", lambda v: {"qcode": v}),
        ("fir", lambda v: {"fir": v}),
        ("location", lambda v: {"location": v}),
        ("notam_id", lambda v: {"notam_id": v}),
        ("traffic", lambda v: {"traffic": v}),
        ("purpose", lambda v: {"purpose": v}),
        ("scope", lambda v: {"scope": v}),
        ("lower", lambda v: {"lower": v}),
        ("upper", lambda v: {"upper": v}),
        ("schedule", lambda v: {"schedule": v}),
    ],
)
def test_reference_values_match_field_patterns(field, to_fields):
    bad = failures(field, to_fields)
    assert not bad, f"{len(bad)} reference `{field}` values cannot be expressed:\n" + "\n".join(bad[:10])


def test_item_c_as_written_fits():
    """Item C is copied whole: every form the real notices write (PERM, a time, a time with EST)."""
    forms, bad = set(), []
    for row in rows():
        for c in re.findall(r"\bC\) ?([^\n]*?)\s*(?=\b[D-G]\)|\)?$)", row["text"], flags=re.M):
            forms.add(re.sub(r"\d", "d", c))
            try:
                Notam(**{**BASE, "valid_from_raw": "0001010000", "valid_to_raw": c})
            except ValidationError as e:
                bad.append(f"{row['id']}: {e.errors()[0]['msg']}")
    assert not bad, f"{len(bad)} item C values cannot be copied:\n" + "\n".join(bad[:10])
    print("item C forms:", sorted(forms))
    assert {"PERM", "dddddddddd"} <= forms


def test_properties_reproduce_reference_values():
    """Write each reference Q-line and B/C as the copied fields would hold them; the
    properties must give back the reference numbers and datetimes."""
    checked = 0
    for row in rows():
        ref = row["ref"]
        if ref.get("center_lat") is None or ref.get("lower_fl") is None:
            continue
        lat_min, lon_min = round(abs(ref["center_lat"]) * 60), round(abs(ref["center_lon"]) * 60)
        coords = (f"{lat_min // 60:02d}{lat_min % 60:02d}{'N' if ref['center_lat'] >= 0 else 'S'}"
                  f"{lon_min // 60:03d}{lon_min % 60:02d}{'E' if ref['center_lon'] >= 0 else 'W'}")
        fields = dict(BASE, fir=ref["fir"], qcode=_blank(ref["qcode"]), traffic=ref["traffic"], purpose=ref["purpose"],
                      scope=_blank(ref["scope"]), q_lower=f"{ref['lower_fl']:03d}", q_coordinates=coords,
                      q_upper=None if ref["upper_fl"] is None else f"{ref['upper_fl']:03d}",
                      q_radius=f"{ref['radius_nm']:03d}")
        if isinstance(ref.get("valid_from"), str):
            fields["valid_from_raw"] = datetime.fromisoformat(ref["valid_from"]).strftime("%y%m%d%H%M")
            if ref["valid_to"] == "PERM":
                fields["valid_to_raw"] = "PERM"
            elif ref["valid_to"]:
                end = datetime.fromisoformat(ref["valid_to"]).strftime("%y%m%d%H%M")
                fields["valid_to_raw"] = end + "EST" * bool(ref.get("valid_to_est"))
        n = Notam(**fields)
        assert (n.center_lat, n.center_lon) == pytest.approx((ref["center_lat"], ref["center_lon"]), abs=1e-6), row["id"]
        assert (n.lower_fl, n.upper_fl, n.radius_nm) == (ref["lower_fl"], ref["upper_fl"], ref["radius_nm"]), row["id"]
        assert (n.scope or "") == ref["scope"] and (n.qcode or "") == ref["qcode"], row["id"]
        if isinstance(ref.get("valid_from"), str):
            assert n.valid_from.isoformat() == ref["valid_from"], row["id"]
            assert (n.valid_to.isoformat() if n.valid_to else "PERM") == ref["valid_to"], row["id"]
            assert (n.permanent, n.estimated) == (ref["valid_to"] == "PERM", bool(ref.get("valid_to_est"))), row["id"]
        checked += 1
    assert checked > 400


def test_positions_in_item_e_fit_the_zone_schema():
    """Every DMS position pair written in a real notice is a valid NoFlyZone Position."""
    import re

    from clover_struct.schemas.airspace import Position

    pair = re.compile(r"\b(\d{6}(?:\.\d+)?[NS])\s?(\d{7}(?:\.\d+)?[EW])\b")
    bad, seen = [], 0
    for row in rows():
        for m in pair.finditer(row["text"]):
            seen += 1
            try:
                Position(lat=m[1], lon=m[2])
            except ValidationError:
                bad.append(row["id"])
    assert seen > 100 and not bad, bad[:10]
