"""The airspace demo: its notices, the geometry it builds from gold zones (GeoJSON, route
conflicts, figure), and run() end to end on a tiny random model (robustness only)."""

import dataclasses
import importlib.util
import io
import json
from datetime import datetime, timezone

import pytest
import torch

from clover_struct.demo import NOTICES_PATH, kind_of, load_notices, main, run
from clover_struct.demo.airspace import ROUTE
from clover_struct.airspace.export import ed318, geojson
from clover_struct.airspace.geometry import check_route, inside, volumes
from clover_struct.engine.checkpoint import save_model
from clover_struct.engine.config import preset
from clover_struct.engine.model import CloverModel
from clover_struct.errors import UsageError
from clover_struct.schemas.airspace import NoFlyZone

SFC = "SFC"


def circle(lat, lon, radius):
    return {"kind": "circle", "center": {"lat": lat, "lon": lon}, "radius": radius}


def polygon(*points):
    return {"kind": "polygon", "vertices": [{"lat": a, "lon": b} for a, b in points]}


# What a perfect extractor returns for six of the notices, copied by hand from their text.
GOLD = {
    "notam-1": NoFlyZone(notam_id="A1432/31", area=circle("310336N", "1211912E", "1.5NM"), floor=SFC,
                         ceiling="400FT AGL", valid_from_raw="3106132300", valid_to_raw="3106141200",
                         uas_only=True, reason="AERIAL SURVEY"),
    "notam-3": NoFlyZone(notam_id="C0871/31", area=polygon(("311700N", "1213700E"), ("311800N", "1214300E"),
                                                           ("311300N", "1214400E"), ("311200N", "1213800E"),
                                                           ("311700N", "1213700E")),
                         floor="1500FT AMSL", ceiling="FL065", valid_from_raw="3106140000",
                         valid_to_raw="3106141000", uas_only=False, reason="MILITARY EXERCISE"),
    "notam-4": NoFlyZone(notam_id="A1451/31", area=circle("311800N", "1214312E", "2NM"), floor=SFC,
                         ceiling="1000FT AGL", valid_from_raw="3106100000", valid_to_raw="3106202359",
                         schedule="DLY 0100-0300", uas_only=False, reason="POWERLINE INSPECTION"),
    "en-3": NoFlyZone(area=polygon(("31.2250", "121.5700"), ("31.2400", "121.6100"), ("31.2200", "121.6250"),
                                   ("31.2000", "121.5900")),
                      ceiling="400 ft AGL", valid_from_raw="14 June 2031 14:00", valid_to_raw="14 June 2031 20:00",
                      utc_offset_hours=8, uas_only=True, reason="the Zhangjiang Science Fair"),
    "en-4": NoFlyZone(area=circle("31°25'48\"N", "121°22'48\"E", "2 nautical miles"), ceiling=None,
                      valid_from_raw="14 June 2031 00:30", uas_only=False, reason="emergency services activity"),
    "zh-1": NoFlyZone(area=circle("北纬31.1650度", "东经121.5000度", "3公里"), ceiling="真高300米",
                      valid_from_raw="2031年6月14日8时", valid_to_raw="18时", utc_offset_hours=8, uas_only=True,
                      reason="前滩国际会议安保"),
}

SUMMARY_KEYS = {"notices", "zones", "seconds", "forward_passes", "one_token_forward_passes"}


@pytest.fixture(scope="module")
def gold_volumes():
    return volumes(list(GOLD.items()))


# -- the notices -------------------------------------------------------------------------------
def test_twenty_unique_notices_of_three_kinds():
    notices = load_notices()
    assert len(notices) == 20
    assert all(set(n) == {"id", "text"} and n["text"].strip() for n in notices)
    assert len({n["id"] for n in notices}) == 20 and len({n["text"] for n in notices}) == 20
    kinds = [kind_of(n["text"]) for n in notices]
    assert {k: kinds.count(k) for k in set(kinds)} == {"icao": 8, "en": 6, "zh": 6}
    prefix = {"icao": "notam-", "en": "en-", "zh": "zh-"}
    assert all(n["id"].startswith(prefix[k]) for n, k in zip(notices, kinds))
    icao = [" ".join(n["text"].split()) for n, k in zip(notices, kinds) if k == "icao"]   # item E wraps
    assert sum("RADIUS OF" in t for t in icao) == 5 and sum("AREA BOUNDED BY" in t for t in icao) == 3


def test_gold_zones_copy_their_notices():
    """The hand-built gold must say what the text says (a guard against editing one only)."""
    texts = {n["id"]: " ".join(n["text"].split()) for n in load_notices(NOTICES_PATH)}   # item E wraps
    for i, zone in GOLD.items():
        points = [zone.area.center] if zone.area.kind == "circle" else zone.area.vertices
        copied = [zone.notam_id, zone.floor, zone.ceiling, zone.valid_from_raw, zone.valid_to_raw, zone.schedule,
                  zone.reason, getattr(zone.area, "radius", None)] + [x for p in points for x in (p.lat, p.lon)]
        assert all(piece in texts[i] for piece in copied if piece is not None), i


# -- geometry from gold zones ----------------------------------------------------------------------
def signed_area(ring):
    return sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(ring, ring[1:])) / 2


def test_ed318_is_a_dataset_the_eurocae_models_read(gold_volumes):
    from implicitdict import ImplicitDict
    from uas_standards.eurocae_ed318 import ED318Schema, Point, Polygon, UASZone

    doc = json.loads(json.dumps(ed318(gold_volumes, country="CHN")))
    ED318Schema.from_dict({**doc, "features": []})   # uas-standards' typed model reads each part (whole, its
    for feature in doc["features"]:                   # parser takes a union's first member: Point for all)
        ImplicitDict.parse(feature["properties"], UASZone)
        ImplicitDict.parse(feature["geometry"], {"Point": Point, "Polygon": Polygon}[feature["geometry"]["type"]])
    assert len(doc["features"]) == len(GOLD)
    f = {f["properties"]["identifier"]: f for f in doc["features"]}
    assert f["notam-1"]["geometry"] == {"type": "Point", "coordinates": [pytest.approx(121.32), pytest.approx(31.06)],
                                        "extent": {"subType": "Circle", "radius": pytest.approx(1.5 * 1852, abs=0.1)},
                                        "layer": {"upper": pytest.approx(121.9, abs=0.1), "upperReference": "AGL",
                                                  "lower": 0.0, "lowerReference": "AGL", "uom": "m"}}
    notam_3 = f["notam-3"]["geometry"]
    assert notam_3["type"] == "Polygon" and len(notam_3["coordinates"][0]) == 5
    assert notam_3["layer"] == {"upper": pytest.approx(1981.2, abs=0.1), "upperReference": "AMSL",   # FL65
                                "lower": pytest.approx(457.2, abs=0.1), "lowerReference": "AMSL", "uom": "m"}
    assert "layer" not in f["en-4"]["geometry"]   # no ceiling: ED-318 has no "unlimited"
    zone = f["notam-4"]["properties"]
    assert zone["type"] == "PROHIBITED" and zone["country"] == "CHN" and zone["name"][0]["text"] == "A1451/31"
    assert zone["limitedApplicability"] == [{"startDateTime": "2031-06-10T00:00:00Z", "endDateTime": "2031-06-20T23:59:00Z",
                                             "schedule": [{"day": ["ANY"], "startTime": "01:00:00Z",
                                                           "endTime": "03:00:00Z"}]}]
    assert zone["otherReasonInfo"] == [{"text": "POWERLINE INSPECTION", "lang": "en"}]
    beijing = volumes([("zh", NoFlyZone(area=circle("31.2", "121.5", "1KM"), uas_only=True, utc_offset_hours=8,
                                         schedule="每日08:00-12:00"))])
    period = ed318(beijing, country="CHN")["features"][0]["properties"]["limitedApplicability"][0]
    assert period["schedule"] == [{"day": ["ANY"], "startTime": "00:00:00Z", "endTime": "04:00:00Z"}]   # in UTC
    with pytest.raises(UsageError, match="alpha-3"):
        ed318(gold_volumes, country="China")
    named = [dataclasses.replace(v, id=i) for v, i in zip(gold_volumes, ["notam-10", "Z1", "a b", "ok"])]
    zones = [f["properties"] for f in ed318(named, country="CHN")["features"]]   # ED-318 4.2.5.4: 1-7 of [A-Za-z0-9_-]
    assert [z["identifier"] for z in zones] == ["Z2", "Z1", "Z3", "ok"]   # (notam-10 had been written)
    with pytest.raises(UsageError, match="volume ids notam-1 are given twice"):   # (the features' ids)
        ed318(gold_volumes + gold_volumes[:1], country="CHN")


@pytest.mark.parametrize("schedule, offset, periods", [
    ("DLY 0800-2400", 0, [("08:00", "23:59:59")]),   # 24:00:00 is midnight, the day's start (it had ended at 00:00)
    ("DLY 0000-2400", 0, []),                         # all day (it had been a window of no length)
    ("DLY 0600-1000", 8, [("22:00", "23:59:59"), ("00:00", "02:00")]),   # past midnight in UTC: two
    ("DLY 2200-0600", 0, [("22:00", "23:59:59"), ("00:00", "06:00")]),
])
def test_ed318_daily_periods_run_forwards_in_utc(schedule, offset, periods):
    z = NoFlyZone(area=circle("31.2", "121.5", "1KM"), uas_only=True, utc_offset_hours=offset, schedule=schedule)
    period = ed318(volumes([("z", z)]), country="CHN")["features"][0]["properties"]["limitedApplicability"][0]
    clock = lambda t: t if t.count(":") == 2 else f"{t}:00"   # noqa: E731
    assert period.get("schedule", []) == [{"day": ["ANY"], "startTime": clock(a) + "Z", "endTime": clock(b) + "Z"}
                                          for a, b in periods]


def test_exported_corners_lie_on_the_written_grid():
    """A corner 4e-8 degrees past the antimeridian had left, rounded, a flat second piece of four
    points on it (no area, invalid to shapely)."""
    from shapely.geometry import shape

    square = [("10.0000", "179.9000"), ("10.0000", "-179.99999996"), ("10.1000", "-179.99999996"),
              ("10.1000", "179.9000")]
    z = NoFlyZone(area={"kind": "polygon", "vertices": [{"lat": a, "lon": b} for a, b in square]}, uas_only=True)
    for doc in (geojson(volumes([("z", z)])), ed318(volumes([("z", z)]), country="FJI")):
        written = doc["features"][0]["geometry"]
        print(written)
        assert written["type"] == "Polygon" and shape(written).is_valid and len(written["coordinates"][0]) == 5


def test_a_zone_across_the_antimeridian_is_written_in_two_pieces():
    v = volumes([("c", NoFlyZone(area=circle("0000N", "17954E", "20NM"), uas_only=False))])
    written = geojson(v)["features"][0]["geometry"]
    assert written["type"] == "MultiPolygon" and len(written["coordinates"]) == 2, written
    lons = [x for piece in written["coordinates"] for x, _ in piece[0]]
    assert min(lons) >= -180 and max(lons) <= 180 and -180 in lons and 180 in lons


def test_geojson_is_rfc7946(gold_volumes):
    doc = json.loads(json.dumps(geojson(gold_volumes)))
    assert doc["type"] == "FeatureCollection" and "crs" not in doc
    assert [f["id"] for f in doc["features"]] == list(GOLD)
    for f, (i, zone) in zip(doc["features"], GOLD.items()):
        assert f["type"] == "Feature" and f["geometry"]["type"] == "Polygon"
        rings = f["geometry"]["coordinates"]
        assert len(rings) == 1
        ring = rings[0]
        assert len(ring) >= 4 and ring[0] == ring[-1], f"{i}: ring not closed"
        assert all(a != b for a, b in zip(ring, ring[1:])), f"{i}: repeated position"
        assert signed_area(ring) > 0, f"{i}: exterior ring is not counter-clockwise"
        lons, lats = zip(*ring)   # [lon, lat]: Shanghai is at 121 E, 31 N
        assert all(121 < x < 122.1 for x in lons) and all(30.8 < y < 31.6 for y in lats), i
        assert min(lons) <= zone.center_lon <= max(lons) and min(lats) <= zone.center_lat <= max(lats)
        p = f["properties"]
        assert {"id", "floor_m", "ceiling_m", "refs", "valid_from", "valid_to", "schedule", "uas_only",
                "reason"} <= set(p)
        assert p["id"] == i and p["uas_only"] is zone.uas_only and p["reason"] == zone.reason
        if p["valid_from"]:
            assert p["valid_from"].endswith("Z")
            assert datetime.fromisoformat(p["valid_from"].replace("Z", "+00:00")) == zone.valid_from
    props = {f["id"]: f["properties"] for f in doc["features"]}
    assert (props["notam-3"]["floor_m"], props["notam-3"]["ceiling_m"]) == pytest.approx((457.2, 1981.2))
    assert props["notam-3"]["refs"] == {"floor": "AMSL", "ceiling": "STD"}
    assert props["en-4"]["ceiling_m"] is None and props["en-4"]["valid_to"] is None
    assert props["zh-1"]["valid_from"] == "2031-06-14T00:00:00Z"   # 08:00 Beijing time
    assert props["zh-1"]["utc_offset_hours"] == 8 and props["notam-4"]["utc_offset_hours"] == 0   # the schedule's clock
    assert props["notam-4"]["schedule"] == "DLY 0100-0300"


def test_route_conflicts(gold_volumes):
    found = {(c.leg, c.zone_id): c for c in check_route(ROUTE, gold_volumes)}
    conflicts = {k for k, c in found.items() if c.conflict}
    assert conflicts == {(1, "notam-1"), (2, "zh-1"), (3, "zh-1"), (4, "notam-4"), (5, "notam-4")}
    # crossed on the ground but not in the air: inactive then, or flown under its floor
    assert "not active" in found[3, "en-3"].why and "not active" in found[4, "en-3"].why
    assert "below its floor" in found[4, "notam-3"].why
    assert not any(z == "en-4" for _, z in found)
    c = found[1, "notam-1"]
    assert ROUTE[0].time < c.conflict_from < c.conflict_to < ROUTE[1].time
    # notam-4 is valid for ten days but active daily 0100-0300 only
    v = next(v for v in gold_volumes if v.id == "notam-4")
    lat, lon = v.zone.center_lat, v.zone.center_lon
    assert inside(v, lat, lon, 120, datetime(2031, 6, 14, 2, 0, tzinfo=timezone.utc))
    assert not inside(v, lat, lon, 120, datetime(2031, 6, 14, 4, 0, tzinfo=timezone.utc))
    assert not inside(v, lat, lon, 400, datetime(2031, 6, 14, 2, 0, tzinfo=timezone.utc))   # above 1000 FT


def test_figure_is_written(gold_volumes, tmp_path):
    pytest.importorskip("matplotlib")
    from clover_struct.demo.plot import figure

    path = figure(gold_volumes, ROUTE, check_route(ROUTE, gold_volumes), tmp_path / "airspace.png", "gold")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000


def test_a_zone_far_larger_than_the_rest_is_cut_at_the_map_edge_instead_of_framing_it(gold_volumes, tmp_path):
    pytest.importorskip("matplotlib")
    from clover_struct.demo.plot import figure, frame

    # a unit slip: 800 KM where the notice meant 800 M; and a zone 5 degrees away
    huge = NoFlyZone(area=circle("31.3450", "121.7570", "800KM"), floor=SFC, ceiling=None,
                     valid_from_raw="3106140000", uas_only=False, reason="unit slip")
    far = NoFlyZone(area=circle("36.3450", "121.7570", "2KM"), floor=SFC, ceiling=None,
                    valid_from_raw="3106140000", uas_only=False, reason="elsewhere")
    vols = gold_volumes + volumes([("huge", huge), ("far", far)])
    x0, y0, x1, y1 = extent = frame(vols, ROUTE)
    assert extent == frame(gold_volumes, ROUTE)
    assert x1 - x0 < 1 and y1 - y0 < 1   # degrees: the route's neighbourhood, not 1,600 km
    for v in gold_volumes:   # every zone near the route is whole on the map
        a, b, c, d = v.footprint.bounds
        assert x0 <= a and c <= x1 and y0 <= b and d <= y1, v.id
    assert all(x0 <= w.lon <= x1 and y0 <= w.lat <= y1 for w in ROUTE)
    assert figure(vols, ROUTE, check_route(ROUTE, vols), tmp_path / "airspace.png").stat().st_size > 50_000


def test_a_self_crossing_polygon_is_mapped_checked_and_written_as_given(gold_volumes, tmp_path):
    """A misread vertex can make the list cross itself (a bow tie): shapely's overlays refuse
    such a ring, so geometry takes the area it encloses, and GeoJSON and ED-318 write that:
    its two triangles, as a MultiPolygon."""
    bow = NoFlyZone(area=polygon(("31.20", "121.55"), ("31.24", "121.60"), ("31.20", "121.60"), ("31.24", "121.55")),
                    floor=SFC, ceiling=None, valid_from_raw="3106140000", uas_only=False, reason="misread vertex")
    assert not bow.footprint().is_valid
    vols = gold_volumes + volumes([("bow", bow)])
    v = vols[-1]
    assert v.footprint.is_valid and len(v.footprint.geoms) == 2   # the two triangles of the bow tie
    assert v.footprint.area == pytest.approx(2 * 0.04 * 0.025 / 2)
    assert [c.zone_id for c in check_route(ROUTE, vols)]   # no TopologyException
    for written in (geojson(vols)["features"][-1]["geometry"], ed318(vols, "CHN")["features"][-1]["geometry"]):
        assert written["type"] == "MultiPolygon" and len(written["coordinates"]) == 2, written
        corners = {tuple(p) for piece in written["coordinates"] for p in piece[0]}
        assert corners == {(x, y) for y, x in bow.polygon} | {(121.575, 31.22)}   # and where the sides cross
    if importlib.util.find_spec("matplotlib"):
        from clover_struct.demo.plot import figure
        assert figure(vols, ROUTE, check_route(ROUTE, vols), tmp_path / "airspace.png").stat().st_size > 50_000


# -- end to end on a tiny random model ---------------------------------------------------------------
@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, toy_byte_tokenizer):
    """Byte-level toy tokenizer: the notices hold Chinese, which the char-level one cannot write.
    Two layers (one of each kind) and 8-token blocks keep 2 x 20 decodes to seconds."""
    torch.manual_seed(0)
    tok = toy_byte_tokenizer
    config = preset("tiny", vocab_size=tok.vocab_size, mask_token_id=tok.mask_id, pad_token_id=tok.pad_id,
                    eos_token_id=tok.eos_id, block_size=8, max_position_embeddings=4096, num_hidden_layers=2,
                    layer_types=["linear_attention", "full_attention"])
    model = CloverModel(config, tok).init_weights(std=0.5).eval()
    return str(save_model(model, tmp_path_factory.mktemp("model")))


@pytest.mark.slow
def test_run_end_to_end_on_a_random_model(model_dir, tmp_path):
    out = io.StringIO()
    summary = run(model_dir, tmp_path / "out", batch_size=10, baseline=True, stream=out)
    last = out.getvalue().strip().splitlines()[-1]
    assert json.loads(last) == summary and set(summary) == SUMMARY_KEYS
    assert summary["notices"] == 20 and 0 <= summary["zones"] <= 20
    assert summary["forward_passes"] > 0 and summary["one_token_forward_passes"] > 0 and summary["seconds"] > 0
    doc = json.loads((tmp_path / "out" / "zones.geojson").read_text(encoding="utf-8"))
    assert doc["type"] == "FeatureCollection" and len(doc["features"]) == summary["zones"]
    if importlib.util.find_spec("matplotlib"):   # the figure is optional (the demo extra)
        assert (tmp_path / "out" / "airspace.png").stat().st_size > 20_000
    report = out.getvalue()
    rows = report.splitlines()   # each notice without a zone: FAILED (an error) or no zone (read as none)
    assert sum(" FAILED: " in r or r.endswith(" no zone") for r in rows) == 20 - summary["zones"]
    assert "route check" in report


@pytest.mark.slow
def test_the_one_token_baseline_runs_only_when_asked(model_dir, tmp_path):
    out = io.StringIO()
    summary = run(model_dir, tmp_path / "out", batch_size=20, stream=out)
    assert summary["one_token_forward_passes"] is None and "not run (--baseline" in out.getvalue()


def test_main_reports_a_missing_model_in_one_line(tmp_path, capsys):
    assert main(["--model", str(tmp_path / "nothing"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("airspace demo: error:") and "\n" not in err


def test_a_record_with_no_zone_is_left_out_of_the_geometry(gold_volumes):
    from clover_struct.airspace.geometry import passages, volume

    none = NoFlyZone(notam_id="A0001/31", valid_from_raw="3106140000", uas_only=False)   # e.g. a runway closure
    assert volumes([("none", none)]) == [] and len(volumes([*GOLD.items(), ("none", none)])) == len(GOLD)
    with pytest.raises(ValueError, match="defines no zone"):
        volume("none", none)
    start = datetime(2031, 6, 14, 1, 0, tzinfo=timezone.utc)
    assert passages([(31.03, 121.25), (31.4, 121.8)], 100.0, start, start, [none]) == [(False, False, False)]
    assert geojson(volumes([("none", none)]))["features"] == []
