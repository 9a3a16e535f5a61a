"""The hand-written notices' labels: a record holding the right pieces of each notice, read by
the schema's own readers, has nothing wrong against its label (so the labels and the readers
agree), and a record that misses is told what it missed."""

from clover_struct.schemas import NoFlyZone
from training import handwritten as H


def circle(lat, lon, radius):
    return {"kind": "circle", "center": {"lat": lat, "lon": lon}, "radius": radius}


NEW_YORK = circle("404512N", "0735830W", "2NM")
RIGHT = {
    "lowercase": dict(area=circle("513012n", "0001012w", "2nm"), floor="sfc", ceiling="2500ft amsl",
                      valid_from_raw="3207011000", valid_to_raw="3207011600", uas_only=False),
    "faa_fdc": dict(area=NEW_YORK, floor="SFC", ceiling="2999FT AGL", valid_from_raw="2612051200",
                    valid_to_raw="2612051800", uas_only=False),
    "faa_words": dict(area=circle("404512N", "0735830W", "2 NAUTICAL MILES"), floor="SFC", ceiling="2999FT AGL",
                      valid_from_raw="1200 UTC DECEMBER 5, 2026", valid_to_raw="1800 UTC DECEMBER 5, 2026",
                      uas_only=False),
    "faa_listing": dict(area=circle("40°45'12\"N", "73°58'30\"W", "2 nautical miles"), floor="surface",
                        ceiling="2,999 feet AGL", valid_from_raw="1200 UTC December 5, 2026",
                        valid_to_raw="1800 UTC December 5, 2026", uas_only=False),
    "drone_km_ft": dict(area=circle("48.8584", "2.2945", "2.5 km"), ceiling="400 ft above ground level",
                        utc_offset_hours=2.0, valid_from_raw="10 July 2031 08:00", valid_to_raw="10 July 2031 20:00",
                        uas_only=True),
    "chinese": dict(area=circle("北纬30.5728度", "东经104.0668度", "2公里"), ceiling="真高150米", utc_offset_hours=8.0,
                    valid_from_raw="2031年9月20日7时", valid_to_raw="19时", uas_only=True),
    "dms_polygon": dict(area={"kind": "polygon", "vertices": [
        {"lat": a, "lon": b} for a, b in [("32 20 00S", "115 30 00E"), ("32 20 00S", "115 50 00E"),
                                          ("32 35 00S", "115 55 00E"), ("32 45 00S", "115 40 00E"),
                                          ("32 35 00S", "115 25 00E"), ("32 20 00S", "115 30 00E")]]},
                        floor="SFC", ceiling="FL100", valid_from_raw="3108010000", valid_to_raw="3108050600",
                        uas_only=False),
    "garbage": dict(uas_only=False),
}


def test_each_notice_read_right_has_nothing_wrong_and_its_pieces_are_in_it():
    assert [name for name, _, _ in H.NOTICES] == list(RIGHT)
    for name, text, zone in H.NOTICES:
        record = NoFlyZone.model_validate(RIGHT[name])
        assert H.misses(record, zone) == [], name
        pieces = [v for k, v in RIGHT[name].items() if k.endswith("_raw") or k in ("floor", "ceiling")]
        assert all(p in " ".join(text.split()) for p in pieces), name


def test_what_a_record_misses_is_named():
    _, _, zone = H.NOTICES[1]
    late = NoFlyZone.model_validate({**RIGHT["faa_fdc"], "valid_from_raw": "2612051300"})
    assert H.misses(late, zone) == ["valid_from"]
    assert H.misses(NoFlyZone(uas_only=False), zone) == ["no zone"]
    assert H.misses(late, None) == ["a zone"]
