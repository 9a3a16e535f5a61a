"""The hand-written notices' labels: a record holding the right pieces of each notice, read by
the schema's own readers, has nothing wrong against its label (so the labels and the readers
agree), and a record that misses is told what it missed."""

import pytest

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


def polygon(*points):
    return {"kind": "polygon", "vertices": [{"lat": a, "lon": b} for a, b in points]}


FRESH_RIGHT = {
    "fr_radius_centred": dict(area=circle("485112N", "0022130E", "3NM"), floor="SFC", ceiling="3500FT AMSL",
                              valid_from_raw="2705140600", valid_to_raw="2705141800", uas_only=False),
    "drone_times_first": dict(area=circle("48.8584", "2.2945", "2 km"), ceiling="150 m above ground level",
                              valid_from_raw="14 July 2027 08:00", valid_to_raw="14 July 2027 23:00", uas_only=True),
    "faa_no_bang": dict(area=circle("404630N", "0735800W", "2NM"), floor="SFC", ceiling="2999FT AGL",
                        valid_from_raw="2708011400", valid_to_raw="2708012200", uas_only=False),
    "rocket_back_to_start": dict(area=polygon(("2500S", "13300E"), ("2500S", "13500E"), ("2600S", "13500E"),
                                              ("2600S", "13300E")),
                                 floor="SFC", valid_from_raw="2709010000", valid_to_raw="2709072359", uas_only=False),
    "zh_times_first": dict(area=circle("北纬30.5928度", "东经114.3055度", "1公里"), ceiling="真高150米",
                           utc_offset_hours=8.0, valid_from_raw="2027年5月1日10时", valid_to_raw="16时", uas_only=True),
    "exercise_polygon": dict(area=polygon(("5330N", "01000E"), ("5345N", "01030E"), ("5315N", "01045E"),
                                          ("5300N", "01015E")),
                             floor="GND", ceiling="FL100", valid_from_raw="2711010800", valid_to_raw="2711011600",
                             uas_only=False),
    "runway_words": dict(uas_only=False),
    "office_note": dict(uas_only=False),
    "lower_drone_terse": dict(area=circle("51.5007 N", "0.1246 W", "500 m"), ceiling="120 m agl",
                              valid_from_raw="3 june 2028 10:00", valid_to_raw="3 june 2028 16:00", uas_only=True),
    "iso_bulletin": dict(area=circle("53°20'40\"N", "006°15'10\"W", "1.5 km"), ceiling="400 ft AGL",
                         valid_from_raw="2028-08-12 09:00 UTC", valid_to_raw="2028-08-12 21:00 UTC", uas_only=True),
    "circle_centre_km": dict(area=circle("4530N", "00915E", "5KM"), floor="SFC", ceiling="FL130",
                             valid_from_raw="2806010800", valid_to_raw="2806011700", uas_only=False),
    "zh_dms_polygon": dict(area=polygon(("北纬31°10′20″", "东经121°25′30″"), ("北纬31°10′20″", "东经121°30′00″"),
                                        ("北纬31°05′00″", "东经121°30′00″"), ("北纬31°05′00″", "东经121°25′30″")),
                           ceiling="海拔高度500米", utc_offset_hours=8.0, valid_from_raw="2028年3月15日9时",
                           valid_to_raw="17时", uas_only=True),
    "tfr_labels": dict(area=circle("38°53'23\"N", "077°00'32\"W", "3 nautical mile"), floor="surface",
                       ceiling="17,999 feet MSL", valid_from_raw="December 20, 2027 at 1500 UTC",
                       valid_to_raw="December 20, 2027 at 2300 UTC", uas_only=False),
    "drone_dm_local": dict(area=circle("52°22'N", "4°54'E", "3 km"), ceiling="400 ft", utc_offset_hours=2.0,
                           valid_from_raw="27 April 2028 10:00", valid_to_raw="27 April 2028 18:00", uas_only=True),
    "crane": dict(notam_id="A2211/28", valid_from_raw="2802010700", valid_to_raw="2802281700", uas_only=False),
    "taxiway_lower": dict(uas_only=False),
    "lower_polygon": dict(area=polygon(("5100n", "00200w"), ("5110n", "00150w"), ("5100n", "00140w"),
                                       ("5100n", "00200w")),
                          floor="sfc", ceiling="5000ft amsl", valid_from_raw="2809100900", valid_to_raw="2809101500",
                          uas_only=False),
    "crlf_spaced": dict(area=circle("500712N", "0084120E", "1.5NM"), floor="GND", ceiling="4000FT MSL",
                        valid_from_raw="2810050900", valid_to_raw="2810051600", uas_only=False),
    "drone_all_heights": dict(area=circle("33.8568 S", "151.2153 E", "1 nautical mile"), utc_offset_hours=11.0,
                              valid_from_raw="31 Dec 2027 18:00", valid_to_raw="1 Jan 2028 02:00", uas_only=True),
    "decimal_polygon_prose": dict(area=polygon(("40.4400", "-3.7000"), ("40.4400", "-3.6800"), ("40.4250", "-3.6800"),
                                               ("40.4250", "-3.7000")),
                                  floor="surface", ceiling="500 ft AGL", valid_from_raw="1 May 2028 16:00 UTC",
                                  valid_to_raw="1 May 2028 22:00 UTC", uas_only=False),
}


UNSEEN_RIGHT = {
    "closure_prose": dict(area=circle("55°57'N", "003°11'W", "5 NM"), floor="surface", ceiling="5000 ft AMSL",
                          valid_from_raw="21 September 2028 09:00", valid_to_raw="21 September 2028 17:00 UTC",
                          uas_only=False),
    "pje": dict(area=circle("523015N", "0013020E", "2NM"), floor="SFC", ceiling="FL150",
                valid_from_raw="2807121000", valid_to_raw="2807121800", uas_only=False),
    "aerial_work": dict(area=circle("513045N", "0000512W", "0.5NM"), floor="SFC", ceiling="1000FT AMSL",
                        valid_from_raw="2808020800", valid_to_raw="2808021200", uas_only=False),
    "zh_centre_first_lon": dict(area=circle("北纬30.2741度", "东经120.1551度", "3公里"), ceiling="真高300米",
                                utc_offset_hours=8.0, valid_from_raw="2028年4月15日6时", valid_to_raw="2028年4月15日14时",
                                uas_only=True),
    "ils": dict(notam_id="A0455/28", valid_from_raw="2805010600", valid_to_raw="2805031800", uas_only=False),
    "hours": dict(uas_only=False),
    "comma_polygon": dict(area=polygon(("45 12 30N", "005 40 00E"), ("45 15 00N", "005 45 00E"),
                                       ("45 10 00N", "005 48 00E")),
                          floor="SFC", ceiling="6500FT AMSL", valid_from_raw="2810010700", valid_to_raw="2810011500",
                          uas_only=False),
    "signed_decimal": dict(area=circle("-37.7906", "144.9117", "2 km"), ceiling="400 feet", utc_offset_hours=11.0,
                           valid_from_raw="4 November 2028 10:00", valid_to_raw="4 November 2028 19:00", uas_only=True),
    "fdc_lower": dict(area=circle("340350n", "1181440w", "1nm"), floor="sfc", ceiling="1500ft agl",
                      valid_from_raw="2811041800", valid_to_raw="2811050400", uas_only=False),
    "uas_prohibited_area": dict(area=circle("41.9029 N", "12.4534 E", "800 metres"), ceiling="60 m above ground",
                                valid_from_raw="8 December 2028 07:00 UTC", valid_to_raw="8 December 2028 13:00 UTC",
                                uas_only=True),
    "flight_levels": dict(area=polygon(("35°00'N", "117°30'W"), ("35°30'N", "117°30'W"), ("35°30'N", "117°00'W"),
                                       ("35°00'N", "117°00'W")),
                          floor="FL180", ceiling="FL290", valid_from_raw="2028-05-06 14:00 UTC",
                          valid_to_raw="2028-05-06 22:00 UTC", uas_only=False),
    "zh_all_heights": dict(area=circle("北纬39.9042度", "东经116.4074度", "5公里"), utc_offset_hours=8.0,
                           valid_from_raw="2028年10月1日9时", valid_to_raw="12时", uas_only=False),
}


@pytest.mark.parametrize("notices, right", [(H.NOTICES, RIGHT), (H.FRESH, FRESH_RIGHT), (H.UNSEEN, UNSEEN_RIGHT)],
                         ids=["handwritten", "fresh", "unseen"])
def test_each_notice_read_right_has_nothing_wrong_and_its_pieces_are_in_it(notices, right):
    assert [name for name, _, _ in notices] == list(right)
    for name, text, zone in notices:
        record = NoFlyZone.model_validate(right[name])
        assert H.misses(record, zone) == [], name
        pieces = [v for k, v in right[name].items() if k.endswith("_raw") or k in ("floor", "ceiling")]
        assert all(p in " ".join(text.split()) for p in pieces), name



def test_a_threshold_sets_aside_the_notices_whose_least_sure_field_is_below_it():
    fresh = {"n": 3, "right": 1, "misses": {"a": ["footprint"], "b": ["no zone"]}, "lowest": {"a": 0.5, "b": 0.95, "c": 0.9}}
    unseen = {"n": 1, "right": 1, "misses": {}, "lowest": {"d": 0.99}}
    assert H.set_aside([fresh, unseen], 0.92) == {"threshold": 0.92, "n_wrong": 2, "wrong_set_aside": 1,
                                                   "n_right": 2, "right_set_aside": 1}


def test_what_a_record_misses_is_named():
    _, _, zone = H.NOTICES[1]
    late = NoFlyZone.model_validate({**RIGHT["faa_fdc"], "valid_from_raw": "2612051300"})
    assert H.misses(late, zone) == ["valid_from"]
    assert H.misses(NoFlyZone(uas_only=False), zone) == ["no zone"]
    assert H.misses(late, None) == ["a zone"]
