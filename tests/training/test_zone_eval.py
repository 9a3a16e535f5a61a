"""Scoring NoFlyZone on real text: footprint IoU, circles as rings, field matches, the rule
that picks NOTAMs defining no zone, garbage text, and the two sets' tallies. Every notice and
zone here is made up for the test."""

import json
import math

import pytest
from shapely.geometry import Polygon

from clover_struct import ExtractionError
from clover_struct.decoder import Trace
from clover_struct.airspace.geometry import distance_m
from clover_struct.schemas import NoFlyZone
from clover_struct.schemas.units import EARTH_RADIUS_M
from training import evaluate as ev
from training import zone_eval as ze


def square(lat, lon, side):
    return Polygon([(lon, lat), (lon + side, lat), (lon + side, lat + side), (lon, lat + side)])


def zone(**area):
    """A made-up zone: 0 M AGL to 500 FT AMSL, 23 Aug 2026 09:30-19:30 UTC."""
    return NoFlyZone(area=area or {"kind": "circle", "center": {"lat": "523000N", "lon": "0011500W"}, "radius": "1NM"},
                     floor="SFC", ceiling="500FT AMSL", valid_from_raw="2608230930", valid_to_raw="2608231930",
                     uas_only=False)


LABEL = {"shape": "circle", "center_lat": 52.5, "center_lon": -1.25, "radius_m": 1852.0, "polygon": None,
         "floor_m": 0.0, "floor_ref": "AGL", "ceiling_m": 152.4, "ceiling_ref": "AMSL",
         "valid_from": "2026-08-23T09:30:00Z", "valid_to": "2026-08-23T19:30:00Z", "uas_only": False}


def test_a_circle_is_a_ring_of_128_points_at_its_radius():
    ring = ze.circle_ring(52.5, -1.25, 1852.0)
    points = ring.exterior.coords[:-1]
    assert len(points) == ze.RING_POINTS == 128
    spread = [abs(distance_m((52.5, -1.25), (y, x)) - 1852.0) for x, y in points]
    assert max(spread) < 0.01, f"max distance error {max(spread):.4f} m"
    # Its area on the sphere (equal-area projection, degrees² to m²) is that of the circle.
    area = ze._equal_area(ring, -1.25).area * (math.pi / 180 * EARTH_RADIUS_M) ** 2
    assert abs(area / (math.pi * 1852.0 ** 2) - 1) < 1e-3


def test_iou_of_overlapping_disjoint_and_equal_footprints():
    a = square(10, 20, 1)
    assert ze.iou(a, a) == pytest.approx(1.0)
    assert ze.iou(square(10, 21.5, 1), a) == 0.0
    # Half a square's width apart: the overlap is half of each, so 0.5 / 1.5 (to the small
    # change of cos(latitude) across one degree).
    assert ze.iou(square(10, 20.5, 1), a) == pytest.approx(1 / 3, abs=2e-3)


def test_iou_is_by_area_on_the_sphere_not_in_degrees():
    # One degree of longitude from the equator to 60° N, and its upper half in latitude: half
    # in square degrees, but the ground shrinks poleward, (sin 60° - sin 30°) / sin 60° of it.
    whole = Polygon([(0, 0), (1, 0), (1, 60), (0, 60)])
    upper = Polygon([(0, 30), (1, 30), (1, 60), (0, 60)])
    on_ground = (math.sin(math.radians(60)) - math.sin(math.radians(30))) / math.sin(math.radians(60))
    assert ze.iou(upper, whole) == pytest.approx(on_ground, abs=1e-4)


def test_iou_of_a_zone_across_the_antimeridian_written_either_way():
    east = Polygon([(179.9, -10), (180.1, -10), (180.1, -9.8), (179.9, -9.8)])
    signed = Polygon([(179.9, -10), (-179.9, -10), (-179.9, -9.8), (179.9, -9.8)])
    assert ze.iou(signed, east) == pytest.approx(1.0)


def test_a_self_crossing_footprint_is_scored_by_the_area_it_encloses():
    bowtie = Polygon([(0, 0), (1, 1), (1, 0), (0, 1)])    # two triangles meeting at the middle
    assert ze.iou(bowtie, square(0, 0, 1)) == pytest.approx(0.5, abs=1e-3)


def test_an_extracted_circle_matches_its_labelled_128_point_ring():
    assert ze.iou(zone().footprint(), ze.labelled_footprint(LABEL)) > 0.998
    polygon = {**LABEL, "shape": "polygon", "polygon": [[10, 20], [10, 21], [11, 21], [11, 20]]}
    assert ze.labelled_footprint(polygon).equals(square(10, 20, 1))


def test_fields_match_in_metres_references_and_utc_instants():
    assert ze.field_hits(zone(), LABEL) == dict.fromkeys(ze.FIELDS, True)
    z = zone()
    assert not ze.field_hits(z, {**LABEL, "ceiling_m": None, "ceiling_ref": None})["ceiling"]
    assert not ze.field_hits(z, {**LABEL, "ceiling_ref": "AGL"})["ceiling"]
    assert ze.field_hits(z, {**LABEL, "ceiling_m": 153.3})["ceiling"]           # within 1 m
    assert not ze.field_hits(z, {**LABEL, "floor_m": 1.5})["floor"]
    assert not ze.field_hits(z, {**LABEL, "valid_to": None})["valid_to"]
    assert not ze.field_hits(z, {**LABEL, "uas_only": True})["uas_only"]
    unlimited = z.model_copy(update={"ceiling": None, "valid_to_raw": None})
    hits = ze.field_hits(unlimited, {**LABEL, "ceiling_m": None, "ceiling_ref": None, "valid_to": None})
    assert hits["ceiling"] and hits["valid_to"]
    beijing = z.model_copy(update={"utc_offset_hours": 8.0})                     # same digits, 8 h earlier
    assert not ze.field_hits(beijing, LABEL)["valid_from"]
    assert ze.field_hits(beijing, {**LABEL, "valid_from": "2026-08-23T01:30:00Z"})["valid_from"]


def notam(qcode, e, rest="F) SFC G) 1000FT AMSL"):
    return (f"A0001/26 NOTAMN\nQ) EGTT/{qcode}/IV/BO/W/000/010/5130N00100W005\n"
            f"A) EGTT B) 2601010000 C) 2601020000\nE) {e}\n{rest}")


@pytest.mark.parametrize("text", [
    notam("QMRLC", "RWY 10/28 CLSD DUE WIP", rest=""),
    notam("QFALC", "AD CLSD TO NON-BASED ACFT", rest=""),
    notam("QOBCE", "NEW CRANE. POSITION: 512000N 0010000W. HGT 150FT AGL", rest=""),   # an obstacle at a point
    "!ABC 01/001 ABC TWY K BTN TWY J AND TWY L CLSD 2601010000-2601020000",       # no Q-line
])
def test_notices_that_define_no_zone_are_negatives(text):
    assert ze.is_negative(text)


@pytest.mark.parametrize("text", [
    notam("QWULW", "UAS OPR WI 0.5NM RADIUS OF 512000N 0010000W"),
    notam("QRTCA", "TEMPO RESTRICTED AREA BOUNDED BY 5120N00100W - 5130N00100W - 5130N00110W"),
    notam("QWMLW", "ROCKET LAUNCH. DEBRIS AREA: N5120W00100-N5130W00100-N5130W00110-N5120W00100"),
    notam("QRDCA", "DANGER AREA EGD999 ACTIVE"),                               # a named area: not drawn here
    notam("QAZCA", "XYZ ATZ ACTIVATED", rest=""),
    notam("QRDCA", "DANGER AREA ACTIVE", rest="").replace("EGTT/", "ZXY/"),   # a three-letter FIR
    notam("QMXLC", "TWY B CLSD AT 512000N 0010000W", rest=""),                 # a position, not an obstacle
    notam("QOBCE", "CRANE OPR WI 0.1NM OF PSN 512000N 0010000W", rest=""),     # an obstacle drawn as an area
    notam("QXXXX", "LGT U/S AT 52.1234, -1.2345", rest=""),                    # a position in decimals
])
def test_notices_that_may_define_a_zone_are_left_out(text):
    assert not ze.is_negative(text)


def test_item_e_stops_at_the_limits():
    assert ze.item_e(notam("QMRLC", "RWY 10/28 CLSD")) == "RWY 10/28 CLSD"
    assert ze.item_e("plain text, no items") == "plain text, no items"


def test_garbage_is_seeded_non_blank_and_of_every_kind():
    g = ze.garbage_texts(3, seed=1)
    assert g == ze.garbage_texts(3, seed=1) and g != ze.garbage_texts(3, seed=2)
    assert set(g) == {"bytes", "words", "codes", "near_empty"} and all(len(v) == 3 for v in g.values())
    assert all(t.strip() for v in g.values() for t in v)


def test_spread_takes_evenly_spaced_rows():
    assert ze.spread(list(range(10)), 5) == [0, 2, 4, 6, 8]
    assert ze.spread(list(range(4)), None) == ze.spread(list(range(4)), 9) == [0, 1, 2, 3]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_real_zones_tally_valid_footprints_fields_and_errors(tmp_path, monkeypatch):
    polygon = {**LABEL, "shape": "polygon", "polygon": [[10, 20], [10, 21], [11, 21]]}
    path = write_jsonl(tmp_path / "zones.jsonl", [{"text": "a", "zone": LABEL}, {"text": "b", "zone": polygon},
                                                 {"text": "c", "zone": LABEL}])
    failed = ExtractionError("area.polygon.vertices", "Value error, an area needs at least 3 distinct vertices")
    elsewhere = zone(kind="circle", center={"lat": "100000N", "lon": "0200000E"}, radius="1NM")
    sure = [Trace(confidence={"area.radius": c}) for c in (0.9, 0.5, 0.4)]
    monkeypatch.setattr(ze, "extract_many", lambda texts, *a, **k: list(zip([zone(), failed, elsewhere], sure)))
    r = ze.score_real_zones(None, path=path)
    assert r["n"] == 3 and r["valid_rate"] == pytest.approx(2 / 3) and r["iou90"] == pytest.approx(1 / 3)
    assert r["floor"] == pytest.approx(2 / 3) and r["field_em"] == pytest.approx(2 / 3)
    assert r["by_shape"] == {"circle": {"n": 2, "valid_rate": 1.0, "iou90": 0.5},
                             "polygon": {"n": 1, "valid_rate": 0.0, "iou90": 0.0}}
    assert r["errors"] == {"area.polygon.vertices: Value error, an area needs at least # distinct vertices": 1}
    assert r["confidence"] == {"threshold": 0.9, "right_kept": 1.0, "wrong_set_aside": 1.0, "n_right": 1, "n_wrong": 1}
    assert ze.score_real_zones(None, path=tmp_path / "absent.jsonl") is None
    monkeypatch.setattr(ze, "extract_many", lambda texts, *a, **k: [(NoFlyZone(uas_only=False), Trace())] * 3)
    none = ze.score_real_zones(None, path=path)   # "no zone" on zone notices: no valid zone, IoU 0
    assert none["valid_rate"] == 0.0 and none["iou_mean"] == 0.0 and none["errors"] == {"area: no zone": 3}


def test_negatives_count_no_zone_on_notams_and_garbage(tmp_path, monkeypatch):
    rows = [{"text": notam("QMRLC", "RWY 10/28 CLSD", rest="")},
            {"text": notam("QOBCE", "CRANE. POSITION: 512000N 0010000W.", rest="")},
            {"text": notam("QWULW", "UAS OPR WI 0.5NM RADIUS OF 512000N 0010000W")}]     # not a negative
    path = write_jsonl(tmp_path / "notams.jsonl", rows)
    seen = []

    def extract_many(texts, *a, **k):    # the runway notice read as no zone, all garbage refused; the crane not
        seen.extend(texts)
        return [NoFlyZone(uas_only=False) if k == 0 else zone() if k == 1 else ExtractionError("", "no zone")
                for k in range(len(texts))]

    monkeypatch.setattr(ze, "extract_many", extract_many)
    r = ze.score_negatives(None, path=path)
    garbage = 4 * ze.GARBAGE_PER_KIND
    assert len(seen) == 2 + garbage and rows[2]["text"] not in seen
    assert r["n_notams"] == 2 and r["notams_no_zone"] == 0.5
    assert r["n_with_position"] == 1 and r["with_position_no_zone"] == 0.0
    assert r["n_garbage"] == garbage and r["garbage_no_zone"] == 1.0 and set(r["garbage_by_kind"]) == {
        "bytes", "words", "codes", "near_empty"}
    assert ze.score_negatives(None, path=tmp_path / "absent.jsonl") is None


def test_real_sets_without_their_files_are_skipped_with_a_message(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ev, "load_model", lambda path: None)
    monkeypatch.setattr(ev, "ZONES_DEV", tmp_path / "zones-dev.jsonl")
    monkeypatch.setattr(ev, "NOTAMS_DEV", tmp_path / "notams-dev.jsonl")
    assert ev.main(["--sets", "real_zones,negatives"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out.splitlines()[-1]) == {"real_zones": None, "negatives": None}
    assert "real_zones: skipped" in err and "negatives: skipped" in err and "zones-dev.jsonl not found" in err


def test_the_confidence_threshold_is_the_cut_that_best_splits_right_from_wrong():
    records = [(0.99, True), (0.95, True), (0.9, True), (0.6, True), (0.7, False), (0.5, False), (0.4, False)]
    got = ze.confidence_threshold(records)
    # at 0.9: 3 of 4 right kept, 3 of 3 wrong set aside (sum 1.75); at 0.6 every right one but 2 of 3 wrong
    assert got == {"threshold": 0.9, "right_kept": 0.75, "wrong_set_aside": 1.0, "n_right": 4, "n_wrong": 3}
    assert ze.confidence_threshold([(0.9, True)]) is None
