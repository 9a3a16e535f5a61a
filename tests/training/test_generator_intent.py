"""The gold says what the generator meant, and the text says what the gold says.

Notam properties are compared with the values drawn before rendering, and the rendered
text is re-read with regular expressions independent of the schema code. Zone golds are
compared with the drawn ZoneSpec (times exactly, places and limits within the rounding
of the notation), and judgment answers with hand-built scenarios.
"""

import random
import re
from datetime import datetime, timedelta, timezone

import pytest

from training import draw, drone, notams, zone_notams
from training.families import NOTAM_LAYOUTS
from training.judgments import answers

UTC = timezone.utc


@pytest.mark.parametrize("layout", NOTAM_LAYOUTS)
def test_notam_properties_equal_intended_values(layout):
    for seed in range(120):
        rng = random.Random(seed)
        v = notams.draw_values(rng, layout)
        g = notams.notam_gold(v, notams.item_c(v, rng))
        assert (g.center_lat, g.center_lon) == pytest.approx(v.center, abs=1e-9)
        assert (g.lower_fl, g.upper_fl, g.radius_nm) == (v.lower_fl, v.upper_fl, v.radius_nm)
        assert g.valid_from == v.valid_from and g.valid_to == (None if v.valid_to is None else v.valid_to.replace(second=0))
        assert (g.permanent, g.estimated, g.schedule) == (v.permanent, v.estimated, v.schedule)
        assert (g.fir, g.qcode, g.traffic, g.purpose, g.scope) == (v.fir, v.qcode, v.traffic, v.purpose, v.scope)
        assert (g.lower, g.upper, g.location, g.notam_id) == (v.lower, v.upper, v.location, v.notam_id)


Q_LINE = re.compile(
    r"Q\) ?([A-Z]{3,4})/(Q[A-Z]{4})?/([A-Z]*)/([A-Z ]*)/([A-Z ]*)/(\d{3})/(\d{3})?/(\d{4}[NS]\d{5}[EW])(\d{3})"
)


@pytest.mark.parametrize("layout", NOTAM_LAYOUTS)
def test_text_shows_the_gold(layout):
    for seed in range(120):
        text, g = notams.notam_example(random.Random(seed), layout)
        q = Q_LINE.search(text)
        assert q, text
        fir, qcode, traffic, purpose, scope, lo, up, coords, radius = q.groups()
        assert (fir, qcode, traffic or None) == (g.fir, g.qcode, g.traffic)
        assert (purpose.strip() or None, scope.strip() or None) == (g.purpose, g.scope)
        assert (lo, up, coords, radius) == (g.q_lower, g.q_upper, g.q_coordinates, g.q_radius)
        assert re.search(rf"A\) {g.location}\b", text)
        assert re.search(rf"B\) {g.valid_from_raw}\b", text)
        c = re.search(r"C\) (PERM|\d{10}( ?EST)?)", text)
        assert (c and c.group(1)) == g.valid_to_raw
        if g.schedule:
            assert f"D) {g.schedule}" in text
        for item, value in (("F", g.lower), ("G", g.upper)):
            assert (f"{item}) {value}" in text) if value else (f"{item}) " not in text)
        if g.notam_id:
            assert re.search(rf"^\(?{re.escape(g.notam_id)} {g.notam_type}", text, re.M)


def _check_zone(spec, zone, text):
    if spec.start is not None:
        assert zone.valid_from == spec.start, text
    assert zone.valid_to == spec.end, text
    assert zone.uas_only == spec.uas_only
    lat, lon = spec.center
    if spec.radius_m is not None:
        assert (zone.center_lat, zone.center_lon) == pytest.approx((lat, lon), abs=1 / 120), text  # whole minutes
        assert zone.radius_m == pytest.approx(spec.radius_m, abs=926 + 0.02 * spec.radius_m), text
    else:
        n = len(spec.vertices)
        flat = lambda pts: [x for p in pts for x in p]  # noqa: E731  approx does not nest
        assert flat(zone.polygon[:n]) == pytest.approx(flat(spec.vertices), abs=1 / 120), text
    tolerance = lambda m: max(31.0, 0.02 * m)  # noqa: E731  rounding to 100 ft / 10 m / a flight level
    assert zone.floor_m == pytest.approx(spec.floor_m, abs=tolerance(spec.floor_m)), text
    if spec.ceiling_m is None:
        assert zone.ceiling is None
    else:
        assert zone.ceiling_m == pytest.approx(spec.ceiling_m, abs=tolerance(spec.ceiling_m)), text


@pytest.mark.parametrize("family", NOTAM_LAYOUTS + ("drone_en_prose", "drone_en_fields", "drone_zh"))
def test_zone_gold_matches_the_drawn_zone(family):
    for seed in range(120):
        rng = random.Random(seed)
        spec = draw.zone_spec(rng)
        if family in NOTAM_LAYOUTS:
            text, zone, _ = zone_notams.zone_notice(rng, family, spec)
            assert zone.utc_offset_hours == 0
        elif family == "drone_zh":
            text, zone, _ = drone.zh_notice(rng, spec)
        else:
            text, zone, _ = drone.en_notice(rng, spec, family)
        _check_zone(spec, zone, text)
        if zone.reason:  # item E may wrap a reason across lines; the gold keeps single spaces
            assert zone.reason in " ".join(text.split())
        if zone.schedule:
            assert zone.schedule in text


def test_dms_notation_round_trips():
    from clover_struct.schemas.units import dms_to_decimal

    rng = random.Random(0)
    for _ in range(500):
        lat, lon = draw.world_point(rng, 89.9)
        for k in (0, 1, 2):
            assert dms_to_decimal(draw.dms(lat, "lat", k)) == pytest.approx(lat, abs=0.5 / 3600 / 10**k + 1e-12)
            assert dms_to_decimal(draw.dms(lon, "lon", k)) == pytest.approx(lon, abs=0.5 / 3600 / 10**k + 1e-12)


# -- judgments: hand-built scenarios ----------------------------------------------------------
START = datetime(2031, 3, 4, 12, 0, tzinfo=UTC)


def _zone(radius_km=1.0, ceiling_m=120.0, start="3103040000", end="3103060000"):
    from clover_struct.schemas.airspace import NoFlyZone

    return NoFlyZone(area={"kind": "circle", "center": {"lat": "47.5", "lon": "8.5"}, "radius": f"{radius_km} KM"},
                     floor="SFC", ceiling=f"{ceiling_m} M AGL", valid_from_raw=start, valid_to_raw=end, uas_only=True)


ACROSS = [(47.49, 8.49), (47.51, 8.51)]
AWAY = [(47.60, 8.49), (47.61, 8.51)]


@pytest.mark.parametrize(
    "route, height, zone, auth, expected",
    [
        (AWAY, 100, _zone(), False, (False, False, False, False, "proceed")),
        (ACROSS, 200, _zone(), False, (True, False, True, False, "proceed")),
        (ACROSS, 100, _zone(start="3103100000", end=None), False, (True, True, False, False, "proceed")),
        (ACROSS, 100, _zone(), True, (True, True, True, True, "request_authorisation")),
        (ACROSS, 100, _zone(end="3103050600"), False, (True, True, True, True, "delay")),
        (ACROSS, 100, _zone(end=None), False, (True, True, True, True, "reroute")),
    ],
)
def test_judgment_answers(route, height, zone, auth, expected):
    j = answers(route, height, START, START + timedelta(hours=1), [zone], [auth])
    assert (j.crosses_zone, j.vertical_overlap, j.time_overlap, j.conflict, j.action.value) == expected
