"""examples/dispatch_demo.py: geometry facts, and the run end to end with a given extractor."""

import importlib.util
import itertools
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from shapely.geometry import Point

from clover_struct.airspace import ed318, geojson
from clover_struct.airspace.geometry import Waypoint, check_route, route_facts, volumes
from clover_struct.errors import UsageError
from clover_struct.schemas import DispatchJudgments, DispatchMessage, judgment_rules_hold
from clover_struct.schemas.airspace import CircleArea, NoFlyZone, Position
from tiny_models import tiny_model

spec = importlib.util.spec_from_file_location("dispatch_demo", Path(__file__).parents[1] / "examples/dispatch_demo.py")
demo = importlib.util.module_from_spec(spec)
spec.loader.exec_module(demo)


def zone(lat, lon, ceiling_m, start="2705120800", end="2705121800"):
    return NoFlyZone(area=CircleArea(kind="circle", center=Position(lat=lat, lon=lon), radius="800 m"),
                     floor="SFC", ceiling=f"{ceiling_m} m AGL", valid_from_raw=start, valid_to_raw=end, uas_only=True,
                     reason="event")


def facts(z):
    return route_facts(demo.ROUTE, demo.ALTITUDE_M, *demo.WINDOW, [z])


def test_facts_come_from_geometry():
    assert facts(zone("31.2150", "121.4700", 120)) == {
        "crosses_zone": True, "vertical_overlap": True, "time_overlap": True, "conflict": True}
    assert facts(zone("31.2150", "121.4700", 60))["vertical_overlap"] is False
    assert facts(zone("31.2150", "121.4700", 120, "2705121000"))["time_overlap"] is False
    assert facts(zone("31.3000", "121.6000", 120)) == {
        "crosses_zone": False, "vertical_overlap": False, "time_overlap": False, "conflict": False}


def test_a_conflict_needs_one_zone_both_high_and_in_force():
    low_now, high_later = zone("31.2150", "121.4700", 60), zone("31.2150", "121.4700", 120, "2705121000")
    assert route_facts(demo.ROUTE, demo.ALTITUDE_M, *demo.WINDOW, [low_now, high_later]) == {
        "crosses_zone": True, "vertical_overlap": True, "time_overlap": True, "conflict": False}


@pytest.fixture
def model_dir(toy_byte_tokenizer, tmp_path):
    """A tiny random model saved where --model can load it."""
    from clover_struct.engine.checkpoint import save_model

    save_model(tiny_model(toy_byte_tokenizer, block_size=4096, max_position_embeddings=8192), tmp_path)
    return tmp_path


def test_runs_end_to_end(model_dir, monkeypatch, capsys):
    gold_zone = zone("31.2150", "121.4700", 120)
    real_extract = demo.extract
    monkeypatch.setattr(demo, "extract", lambda text, schema, **kw:
                        gold_zone if schema is NoFlyZone else real_extract(text, schema, **kw))
    code = demo.main(["--model", str(model_dir)])
    out = capsys.readouterr()
    if code == 0:  # a random model may fail the dispatch message; then the error is one line
        answers = {line.split()[0]: line.split()[1] for line in out.out.splitlines()
                   if line.startswith("  ") and line.split()[0] in DispatchJudgments.model_fields}
        assert answers["crosses_zone"] == answers["conflict"] == "True"   # known from geometry
        assert judgment_rules_hold(DispatchJudgments.model_validate(
            {k: v == "True" if v in ("True", "False") else v for k, v in answers.items()}))
    else:
        assert code == 2 and out.err.startswith("dispatch demo: ") and len(out.err.splitlines()) == 1


def test_a_notice_that_fails_leaves_every_answer_to_the_model(model_dir, monkeypatch, capsys):
    from clover_struct import ExtractionError

    message = DispatchMessage.model_validate({"sender": "OPS", "issued_utc": "08:15:00", "tasks": [
        {"kind": "mission_assigned", "drone_id": "UAV-12", "mission_type": "medical", "priority": "urgent",
         "destination": "RENJI HOSPITAL"}]})

    def extract(text, schema, **kw):
        if schema is NoFlyZone:
            raise ExtractionError("valid_to_raw", "before valid_from_raw")
        return message

    monkeypatch.setattr(demo, "extract", extract)
    assert demo.main(["--model", str(model_dir)]) == 0
    out = capsys.readouterr().out
    assert "zone: not extracted (field `valid_to_raw`: before valid_from_raw)" in out
    answers = {line.split()[0]: line.split()[1] for line in out.splitlines()
               if line.startswith("  ") and line.split()[0] in DispatchJudgments.model_fields}
    assert set(answers) == set(DispatchJudgments.model_fields)


@pytest.mark.parametrize("route, height, window, wrong", [
    ([(121.47, 31.215)], 100.0, demo.WINDOW, "route point 0"),               # (lon, lat): latitude 121
    ([(31.215, 121.47), (200.0, 121.5)], 100.0, demo.WINDOW, "route point 1"),
    ([(float("nan"), 121.47)], 100.0, demo.WINDOW, "route point 0"),
    ([(31.215, float("inf"))], 100.0, demo.WINDOW, "route point 0"),
    ([], 100.0, demo.WINDOW, "no points"),
    ([(31.215, 121.47, 100.0)], 100.0, demo.WINDOW, "route point 0 is .*a .latitude, longitude. pair"),
    (demo.ROUTE, float("nan"), demo.WINDOW, "height"),
    (demo.ROUTE, True, demo.WINDOW, "height"),
    ([("31.215", 121.47)], 100.0, demo.WINDOW, "route point 0"),   # numbers, not strings of them
    (demo.ROUTE, 100.0, demo.WINDOW[::-1], "ends"),
    (demo.ROUTE, 100.0, tuple(t.replace(tzinfo=None) for t in demo.WINDOW), "timezone-aware"),
    (demo.ROUTE, 100.0, (None, None), "timezone-aware"),
])
def test_a_flight_no_one_can_fly_is_refused_not_judged_clear(route, height, window, wrong):
    with pytest.raises(UsageError, match=wrong):
        route_facts(route, height, *window, [zone("31.2150", "121.4700", 120)])


def test_a_window_that_reaches_into_the_schedule_by_seconds_overlaps_it():
    z = NoFlyZone(area=CircleArea(center=Position(lat="31.2150", lon="121.4700"), radius="800 m"), uas_only=True,
                  schedule="DLY 0700-0800")
    start = datetime(2027, 5, 12, 6, 59, 30, tzinfo=timezone.utc)
    assert route_facts(demo.ROUTE, 50.0, start, start + timedelta(seconds=50), [z])["time_overlap"]
    assert not route_facts(demo.ROUTE, 50.0, start, start + timedelta(seconds=20), [z])["time_overlap"]


def test_zones_that_are_no_records_are_refused():
    with pytest.raises(UsageError, match="give NoFlyZone records"):
        route_facts(demo.ROUTE, 100.0, *demo.WINDOW, [None])


def test_a_route_across_the_antimeridian_goes_the_short_way():
    """A circle and a square astride 180 degrees; flights from 179.5E to 179.5W (either way
    round), and one wholly on the zones' west side, in their lifetime: each meets the zone."""
    start = datetime(2027, 5, 12, 9, tzinfo=timezone.utc)
    circle = NoFlyZone(area=CircleArea(center=Position(lat="0000N", lon="17954E"), radius="20NM"), floor="SFC",
                       ceiling="400FT AGL", uas_only=False)
    square = NoFlyZone(area={"kind": "polygon", "vertices": [{"lat": a, "lon": b} for a, b in
                                                             (("10N", "179E"), ("10N", "179W"), ("11N", "179W"),
                                                              ("11N", "179E"))]},
                       floor="SFC", ceiling="400FT AGL", uas_only=False)
    assert square.footprint().area == pytest.approx(2.0)   # 2 degrees by 1, not a band around the Earth
    for z, lat in ((circle, 0.0), (square, 10.5)):
        for route in ([(lat, 179.5), (lat, -179.5)], [(lat, -179.5), (lat, 179.5)], [(lat, -179.95), (lat, -179.9)]):
            assert route_facts(route, 50.0, start, start, [z])["conflict"], route
            waypoints = [Waypoint(a, b, 50.0, start + timedelta(minutes=k)) for k, (a, b) in enumerate(route)]
            assert [c.conflict for c in check_route(waypoints, volumes([("z", z)]))] == [True], route
    assert not route_facts([(10.5, 0.0), (10.6, 0.1)], 50.0, start, start, [square])["crosses_zone"]


def test_a_flight_that_stays_at_one_point_is_checked_there():
    here = zone("31.2150", "121.4700", 120)
    assert route_facts([(31.215, 121.47)], demo.ALTITUDE_M, *demo.WINDOW, [here])["conflict"] is True
    assert route_facts([(31.3, 121.6)], demo.ALTITUDE_M, *demo.WINDOW, [here])["crosses_zone"] is False


def test_a_route_check_needs_legs_with_times_in_order():
    v = volumes([("z", zone("31.2150", "121.4700", 120))])
    start, end = demo.WINDOW
    with pytest.raises(UsageError, match="no leg"):
        check_route([Waypoint(31.215, 121.47, 100.0, start)], v)
    with pytest.raises(UsageError, match="before it starts"):
        check_route([Waypoint(31.21, 121.46, 100.0, end), Waypoint(31.22, 121.48, 100.0, start)], v)
    assert [c.conflict for c in check_route([Waypoint(31.21, 121.46, 100.0, start),
                                             Waypoint(31.22, 121.48, 100.0, end)], v)] == [True]


def test_a_zone_narrower_than_the_samples_is_met_where_the_leg_crosses_it():
    """A 50 m circle on a 400 km leg (samples 200 m apart), and a leg clipping a square's corner
    by a 30 m chord: the route check had found no crossing where route_facts found a conflict."""
    start = datetime(2027, 5, 12, 9, tzinfo=timezone.utc)
    small = NoFlyZone(area=CircleArea(center=Position(lat="30.0000", lon="122.8013"), radius="50 m"), floor="SFC",
                      ceiling="400FT AGL", uas_only=False)
    corner = NoFlyZone(area={"kind": "polygon", "vertices": [{"lat": a, "lon": b} for a, b in
                                                             (("31.0000", "121.0000"), ("31.1000", "121.0000"),
                                                              ("31.1000", "121.1000"), ("31.0000", "121.1000"))]},
                       floor="SFC", ceiling="400FT AGL", uas_only=False)
    tip = (31.0999, 121.0999)   # just inside the north-east corner, between two samples of the leg
    clip = (tip[0] - 0.03, tip[1] + 0.03), (tip[0] + 0.03012, tip[1] - 0.03012)
    for z, (a, b) in ((small, ((30.0, 120.8), (30.0, 124.8))), (corner, clip)):
        assert route_facts([a, b], 50.0, start, start, [z])["conflict"]
        legs = [Waypoint(*a, 50.0, start), Waypoint(*b, 50.0, start + timedelta(hours=1))]
        assert [c.conflict for c in check_route(legs, volumes([("z", z)]))] == [True]


@pytest.mark.parametrize("hours, schedule, offset, in_force", [
    (("2705121100", "2705121200"), None, 0, ("11:00:00", "12:00:00")),
    ((None, None), "DLY 1100-1200", 0, ("11:00:00", "12:00:59.999999")),   # a window holds its last minute
    ((None, None), "DLY 1900-2000", 8, ("11:00:00", "12:00:59.999999")),   # in the notice's clock
])
def test_a_zone_in_force_for_part_of_a_hover_or_a_slow_leg_is_a_conflict_then(hours, schedule, offset, in_force):
    """A hover (and a leg of 220 m in 4 hours) had two samples, at its ends: a zone in force only
    between them was 'not active then'. The leg is sampled where the zone comes into force and
    last is, and where its height meets a limit."""
    start, end = datetime(2027, 5, 12, 10, tzinfo=timezone.utc), datetime(2027, 5, 12, 14, tzinfo=timezone.utc)
    z = NoFlyZone(area=CircleArea(center=Position(lat="31.2000", lon="121.4000"), radius="1 km"), floor="SFC",
                  ceiling="120 M AGL", valid_from_raw=hours[0], valid_to_raw=hours[1], schedule=schedule,
                  utc_offset_hours=offset, uas_only=True)
    shanghai = ZoneInfo("Asia/Shanghai")   # the same instants in another clock (a schedule had been missed)
    for (a, b), clock in itertools.product((((31.2, 121.4), (31.2, 121.4)), ((31.199, 121.4), (31.201, 121.4))),
                                           (timezone.utc, shanghai)):
        legs = [Waypoint(*a, 50.0, start.astimezone(clock)), Waypoint(*b, 50.0, end.astimezone(clock))]
        (c,) = check_route(legs, volumes([("z", z)]))
        assert c.conflict
        since, until = (t.astimezone(timezone.utc) for t in (c.conflict_from, c.conflict_to))
        assert (f"{since:%H:%M:%S}", f"{until:%H:%M:%S.%f}".removesuffix(".000000")) == in_force
    layer = NoFlyZone(area=CircleArea(center=Position(lat="31.2000", lon="121.4000"), radius="1 km"),
                      floor="300 M AGL", ceiling="310 M AGL", uas_only=True)   # 10 m a 500 m climb passes
    (c,) = check_route([Waypoint(31.2, 121.4, 0.0, start), Waypoint(31.2005, 121.4, 500.0, end)],
                       volumes([("z", layer)]))
    assert c.conflict and f"{c.conflict_from:%H:%M}" == "12:24" and f"{c.conflict_to:%H:%M}" == "12:28"


@pytest.mark.parametrize("lat, radius", [(60.0, "100NM"), (80.0, "100NM"), (0.0, "2700NM"), (-70.0, "300 km")])
def test_a_circle_s_footprint_holds_the_whole_circle(lat, radius):
    """Sides straight in degrees bow inwards at high latitudes and large radii: a point 10 m
    inside the edge had lain outside a 100 NM circle at 60N."""
    from clover_struct.schemas.units import destination_point

    z = NoFlyZone(area=CircleArea(center=Position(lat=f"{lat:.4f}", lon="10.0000"), radius=radius), floor="SFC",
                  ceiling="400FT AGL", uas_only=False)
    for bearing in range(0, 360, 3):
        y, x = destination_point(lat, 10.0, bearing + 360 / 128, z.radius_m - 10)   # between two corners
        assert z.footprint().covers(Point(x, y)), bearing


def test_the_exports_and_the_route_check_name_what_they_take():
    z = zone("31.2150", "121.4700", 120)
    with pytest.raises(UsageError, match="a list of Volume, not NoFlyZone"):
        geojson([z])
    with pytest.raises(UsageError, match="a list of Volume, not NoFlyZone"):
        ed318([z], country="CHN")
    with pytest.raises(UsageError, match=r"\(id, NoFlyZone\) pairs"):
        volumes([z])
    with pytest.raises(UsageError, match="Waypoint"):
        check_route([(31.2, 121.4), (31.3, 121.5)], volumes([("z", z)]))
    start = demo.WINDOW[0]
    with pytest.raises(UsageError, match="route point 0"):   # (a bare TypeError from the distances before)
        check_route([Waypoint("31.2", 121.4, 10.0, start), Waypoint(31.2, 121.41, 10.0, start)], volumes([("z", z)]))


def test_judging_a_flight_needs_a_zone_per_notice(model_dir):
    from clover_struct.airspace import judge_flight

    with pytest.raises(UsageError, match="2 notices and 1 zones"):
        judge_flight("fly", ["a", "b"], [zone("31.2150", "121.4700", 120)], demo.ROUTE, 100.0, *demo.WINDOW,
                     model=str(model_dir))
    with pytest.raises(UsageError, match="notices and zones are lists"):
        judge_flight("fly", ["a"], zone("31.2150", "121.4700", 120), demo.ROUTE, 100.0, *demo.WINDOW,
                     model=str(model_dir))


def test_a_zone_in_force_during_a_window_is_found_without_walking_it_minute_by_minute():
    """Against the walk over every minute, on windows of up to three days; then a window of
    20 years, which the walk took seconds over."""
    rng = random.Random(0)
    t0 = datetime(2027, 5, 12, tzinfo=timezone.utc)
    for _ in range(60):
        z = zone("31.2150", "121.4700", 120, f"270512{rng.randrange(24):02d}00", f"27051{rng.randrange(3, 5)}0000")
        z = z.model_copy(update={"schedule": rng.choice([None, "DLY 0700-0900", "DLY 2200-0130", "DLY 1200-1201"])})
        start = t0 + timedelta(minutes=rng.randrange(4 * 1440))
        end = start + timedelta(minutes=rng.randrange(3 * 1440))
        walked, t = False, start
        while t <= end and not walked:
            walked, t = z.active_at(t), t + timedelta(minutes=1)
        assert volumes([("z", z)])[0].active_during(start, end) is walked, (z.schedule, start, end)
    long = volumes([("z", zone("31.2150", "121.4700", 120, "2705120800", "4705121800"))])[0]
    assert long.active_during(t0, t0 + timedelta(days=20 * 365))
