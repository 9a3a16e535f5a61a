"""The readers against values worked out by hand, their errors, and round trips.

Every notation of the no-fly-zone issue and of the real development notices has a case
here, written out as its degrees-minutes-seconds arithmetic or its UTC time. The last
test runs benchmarks/reader_coverage.py over ../shared/data (read there, never copied)
and is skipped where that folder is absent.
"""

import importlib.util
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clover_struct.schemas.readers import (coordinate_pieces, read_coordinate, read_limit, read_position,
                                           read_radius, read_time, read_time_range, stated_clock,
                                           states_a_maximum)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
FT, NM = 0.3048, 1852.0


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


# -- coordinates --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [
        ("510718N", 51 + 7 / 60 + 18 / 3600),
        ("0021047W", -(2 + 10 / 60 + 47 / 3600)),
        ("5107N", 51 + 7 / 60),  # minutes only
        ("00210W", -(2 + 10 / 60)),
        ("N2609", 26 + 9 / 60),
        ("E11430", 114.5),
        ("S05 59 00", -(5 + 59 / 60)),
        ("E090 05 00", 90 + 5 / 60),
        ("E 094 23 00", 94 + 23 / 60),
        ("43 49 48 S", -(43 + 49 / 60 + 48 / 3600)),
        ("172 42 00 E", 172.7),
        ("253000N", 25.5),
        ("1213000E", 121.5),
        ("40°26'46\"N", 40 + 26 / 60 + 46 / 3600),
        ("79°58'56\"W", -(79 + 58 / 60 + 56 / 3600)),
        ("40°26.767'N", 40 + 26.767 / 60),
        ("40° 26′ 46″ N", 40 + 26 / 60 + 46 / 3600),
        ("N 22°32'35''", 22 + 32 / 60 + 35 / 3600),
        ("-33°52'", -(33 + 52 / 60)),
        ("22.5431", 22.5431),
        ("-122.42", -122.42),
        ("\u221233.8688", -33.8688),   # a minus sign, not a hyphen: the hemisphere had flipped
        ("31.2304N", 31.2304),
        ("51,5074N", 51.5074),   # a decimal comma (had been no zone)
        ("W0,1278", -0.1278),
        ("40°26,767'N", 40 + 26.767 / 60),
        ("121.4737E", 121.4737),
        ("N31.2304", 31.2304),
        ("北纬22.5431度", 22.5431),
        ("东经114.0579度", 114.0579),
        ("北纬31度14分", 31 + 14 / 60),
        ("南纬33度52分10秒", -(33 + 52 / 60 + 10 / 3600)),
        ("西经 122度25分", -(122 + 25 / 60)),
        ("510718.5N", 51 + 7 / 60 + 18.5 / 3600),
        ("403834.34N", 40 + 38 / 60 + 34.34 / 3600),
        ("515959.9N", 51 + 59 / 60 + 59.9 / 3600),  # seconds 59.9
        ("4026.767N", 40 + 26.767 / 60),  # compact with decimal minutes
        ("510718n", 51 + 7 / 60 + 18 / 3600),  # lowercase
        ("  0021047W\r\n", -(2 + 10 / 60 + 47 / 3600)),
        ("N40\n4001", 40 + 40 / 60 + 1 / 3600),  # a notice's line wrapped inside the number
        ("N40461\r\n1", 40 + 46 / 60 + 11 / 3600),
        ("５１０７１８Ｎ", 51 + 7 / 60 + 18 / 3600),  # full-width
        ("1800000E", 180.0),  # the 180th meridian, from either side
        ("1800000W", -180.0),
        ("W180 00 00", -180.0),
        ("E180", 180.0),
        ("-180", -180.0),
        ("900000N", 90.0),
        ("S90", -90.0),
        ("0000000E", 0.0),
    ],
)
def test_read_coordinate(text, expected):
    assert read_coordinate(text) == pytest.approx(expected, abs=1e-9)


def test_axis_must_agree_with_the_hemisphere():
    assert read_coordinate("510718N", "lat") == pytest.approx(51 + 7 / 60 + 18 / 3600)
    assert read_coordinate("-122.42", "lon") == -122.42
    with pytest.raises(ValueError, match="'510718N' is a latitude .*expected a lon"):
        read_coordinate("510718N", "lon")
    with pytest.raises(ValueError, match="is a longitude"):
        read_coordinate("E11430", "lat")
    with pytest.raises(ValueError, match="beyond 90"):
        read_coordinate("95.5", "lat")
    with pytest.raises(ValueError, match="axis"):
        read_coordinate("1.0", "alt")


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "no number"),
        ("garbage", "not a number"),
        ("N", "no number"),
        ("4760N", "below 60"),  # 60 minutes
        ("473060N", "below 60"),
        ("9100N", "beyond 90"),
        ("900000.1N", "beyond 90"),
        ("1800001E", "beyond 180"),
        ("180°00'00.1\"E", "beyond 180"),
        ("181.5", "beyond 180"),
        ("12345N", "5 digits fit no lat form"),
        ("0484N", "below 60"),  # 04°84', as a NOTAM number N0484/26 might look
        ("114300E", "6 digits fit no lon form"),
        ("510718", "need a hemisphere letter"),
        ("51 07 18", "need a hemisphere letter"),
        ("N12E", "two hemisphere letters"),
        ("-5N", "both a sign and a hemisphere"),
        ("40.5°26'N", "only the last group may have decimals"),
        ("51.5.5N", "not a number"),
        ("E10 5 30", "not a number"),   # spaced groups with a one-digit minute (had read 105.5)
        ("N 1 2 30", "not a number"),
    ],
)
def test_read_coordinate_rejects(text, match):
    with pytest.raises(ValueError, match=match) as e:
        read_coordinate(text)
    assert repr(text) in str(e.value)  # the message names the piece


@pytest.mark.parametrize(
    "text, lat, lon",
    [
        ("510718N 0021047W", 51 + 7 / 60 + 18 / 3600, -(2 + 10 / 60 + 47 / 3600)),
        ("5107N00210W", 51 + 7 / 60, -(2 + 10 / 60)),
        ("5502N00141W", 55 + 2 / 60, -(1 + 41 / 60)),  # a Q-line centre without its radius
        ("N2609E11430", 26.15, 114.5),
        ("N354800E0982500", 35.8, 98 + 25 / 60),
        ("S05 59 00 E090 05 00", -(5 + 59 / 60), 90 + 5 / 60),
        ("S40 53 00 E 094 23 00", -(40 + 53 / 60), 94 + 23 / 60),
        ("43 49 48 S 172 42 00 E", -(43 + 49 / 60 + 48 / 3600), 172.7),
        ("253000N1213000E", 25.5, 121.5),
        ("2232S 08521E", -(22 + 32 / 60), 85 + 21 / 60),
        ("40°26'46\"N 79°58'56\"W", 40 + 26 / 60 + 46 / 3600, -(79 + 58 / 60 + 56 / 3600)),
        ("31.2304N 121.4737E", 31.2304, 121.4737),
        ("北纬22.5431度，东经114.0579度", 22.5431, 114.0579),
        ("东经114.0579度、北纬22.5431度", 22.5431, 114.0579),  # longitude first
        ("北纬31度14分 东经121度28分", 31 + 14 / 60, 121 + 28 / 60),
        ("22.5431, 114.0579", 22.5431, 114.0579),
        ("22.5431,114.0579", 22.5431, 114.0579),   # a comma between signed decimals parts them
        ("51,5074N 0,1278W", 51.5074, -0.1278),   # decimal commas beside hemisphere letters
        ("-33.8688 151.2093", -33.8688, 151.2093),
        ("N40\n4001E1013000", 40 + 40 / 60 + 1 / 3600, 101.5),
        ("514758.91N 0010840.60E", 51 + 47 / 60 + 58.91 / 3600, 1 + 8 / 60 + 40.6 / 3600),
        ("n2609e11430", 26.15, 114.5),
        ("510718N\r\n0021047W", 51 + 7 / 60 + 18 / 3600, -(2 + 10 / 60 + 47 / 3600)),
        ("000000N 1800000W", 0.0, -180.0),
    ],
)
def test_read_position(text, lat, lon):
    assert read_position(text) == pytest.approx((lat, lon), abs=1e-9)


@pytest.mark.parametrize(
    "text, match",
    [
        ("510718N", "found 1"),
        ("N2609N11430", "both coordinates are latitudes"),
        ("5502N00141W005", "neither starts nor ends"),
        ("PSN 531916N 0014347W", "found 4"),
        ("22.5431", "lat, lon"),
        ("91.0, 10.0", "beyond 90"),
        ("N9100E01000", "beyond 90"),
    ],
)
def test_read_position_rejects(text, match):
    with pytest.raises(ValueError, match=match):
        read_position(text)


def test_coordinate_pieces_finds_each_coordinate_once():
    # invented: a circle, a wrapped dm_prefix list, a Chinese pair, and look-alikes that are not
    # coordinates (a radius, a danger area's name, a NOTAM number with minutes out of range)
    text = ("A0484/26 WI 0.5NM RADIUS OF 514219N 0000746W. EGD809N ACTIVE.\n"
            "N3333E11035-N3331E11048-N33\n13E11045 BACK TO START. 北纬22.5431度，东经114.0579度")
    pieces = [text[a:b] for a, b in coordinate_pieces(text)]
    assert pieces == ["514219N", "0000746W", "N3333", "E11035", "N3331", "E11048", "N33\n13", "E11045",
                      "北纬22.5431度", "东经114.0579度"]
    text = "AREA N5130 E00012,5140N 00020E, CENTRE 51,5074N 0,1278W"   # a decimal comma before a hemisphere only
    assert [text[a:b] for a, b in coordinate_pieces(text)] == ["N5130", "E00012", "5140N", "00020E", "51,5074N",
                                                               "0,1278W"]


# Round trips: a coordinate drawn as whole degrees, minutes and hundredths of seconds, written
# in each notation by a formatter of the test's own, reads back to its value.
@st.composite
def coordinates(draw):
    axis = draw(st.sampled_from(["lat", "lon"]))
    limit = 90 if axis == "lat" else 180
    deg = draw(st.integers(0, limit))
    minutes = 0 if deg == limit else draw(st.integers(0, 59))
    centis = 0 if deg == limit else draw(st.integers(0, 5999))  # seconds x 100
    hemi = draw(st.sampled_from("NS" if axis == "lat" else "EW"))
    sign = -1 if hemi in "SW" else 1
    return axis, deg, minutes, centis, hemi, sign * (deg + minutes / 60 + centis / 360000)


CHINESE = {"N": "北纬", "S": "南纬", "E": "东经", "W": "西经"}


def written(axis, deg, minutes, centis, hemi, style) -> str:
    d = f"{deg:02d}" if axis == "lat" else f"{deg:03d}"
    sec = f"{centis // 100:02d}.{centis % 100:02d}"
    return {
        "compact_suffix": f"{d}{minutes:02d}{sec}{hemi}",
        "compact_prefix": f"{hemi}{d}{minutes:02d}{sec}",
        "spaced_prefix": f"{hemi}{d} {minutes:02d} {sec}",
        "spaced_suffix": f"{d} {minutes:02d} {sec} {hemi}",
        "symbols": f"{deg}°{minutes}'{sec}\"{hemi}",
        "decimal_minutes": f"{deg}°{minutes + centis / 6000:.7f}'{hemi}",
        "chinese": f"{CHINESE[hemi]}{deg}度{minutes}分{sec}秒",
        "decimal_hemisphere": f"{deg + minutes / 60 + centis / 360000:.8f}{hemi}",
    }[style]


STYLES = ["compact_suffix", "compact_prefix", "spaced_prefix", "spaced_suffix", "symbols", "decimal_minutes",
          "chinese", "decimal_hemisphere"]


@given(coordinates(), st.sampled_from(STYLES))
def test_round_trip_each_notation(coordinate, style):
    axis, deg, minutes, centis, hemi, value = coordinate
    text = written(axis, deg, minutes, centis, hemi, style)
    assert read_coordinate(text, axis) == pytest.approx(value, abs=1e-6), text


@given(coordinates(), st.data())
def test_round_trip_wrapped_and_signed(coordinate, data):
    axis, deg, minutes, centis, hemi, value = coordinate
    text = written(axis, deg, minutes, centis, hemi, "compact_prefix")
    cut = data.draw(st.integers(2, len(text) - 1))  # a line break anywhere inside the digits
    assert read_coordinate(text[:cut] + "\r\n" + text[cut:], axis) == pytest.approx(value, abs=1e-6)
    assert read_coordinate(f"{value:.8f}", axis) == pytest.approx(value, abs=1e-6)


@given(coordinates().filter(lambda c: c[0] == "lat"), coordinates().filter(lambda c: c[0] == "lon"),
       st.sampled_from([("compact_suffix", " "), ("compact_prefix", ""), ("spaced_prefix", " "),
                        ("spaced_suffix", " "), ("symbols", " "), ("chinese", "，")]), st.booleans())
def test_round_trip_positions(lat, lon, style_joint, lon_first):
    style, joint = style_joint
    a, b = written(*lat[:5], style), written(*lon[:5], style)
    if lon_first and style in ("symbols", "chinese"):  # hemisphere words say which is which
        a, b = b, a
    assert read_position(a + joint + b) == pytest.approx((lat[5], lon[5]), abs=1e-6)


# -- radii and vertical limits ------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, metres",
    [
        ("0.2NM", 0.2 * NM),
        ("5 NM", 5 * NM),
        ("1NM RADIUS", NM),
        ("0.1 NM RADIUS", 0.1 * NM),
        ("2KM", 2000.0),
        ("500M", 500.0),
        ("1000 FT", 1000 * FT),
        ("1,000 ft", 1000 * FT),
        ("半径500米", 500.0),
        ("半径2公里", 2000.0),
        ("半径为3千米", 3000.0),
        ("5海里", 5 * NM),
        ("radius of 3 kilometres", 3000.0),
        ("WI 1.35 nautical miles", 1.35 * NM),
        ("２ＫＭ", 2000.0),
        ("3 statute miles", 3 * 1609.344),
        ("5 SM", 5 * 1609.344),
        ("2 500 M", 2500.0),   # ICAO's grouping of thousands
        ("1.500 m", 1500.0),   # a European thousands point (had been 1.5 m, as a limit's never was)
        ("2.000 ft", 2000 * FT),
        ("1.5 M", 1.5),
        ("2,5 km", 2500.0),   # decimal commas
        ("0,5 NM", 0.5 * NM),
        ("1,25 NM", 1.25 * NM),
    ],
)
def test_read_radius(text, metres):
    assert read_radius(text) == pytest.approx(metres, abs=1e-9)


@pytest.mark.parametrize(
    "text, match",
    [("", "number and a unit"), ("5", "number and a unit"), ("0NM", "at least a metre"),
     ("0.001 m", "at least a metre"), ("-5NM", "number and a unit"),
     ("3 miles", "statute or nautical"), ("FL100", "number and a unit"), ("5NM AGL", "number and a unit")],
)
def test_read_radius_rejects(text, match):
    with pytest.raises(ValueError, match=match):
        read_radius(text)


@pytest.mark.parametrize(
    "text, metres, ref",
    [
        ("SFC", 0.0, "AGL"),
        ("GND", 0.0, "AGL"),
        ("地面", 0.0, "AGL"),
        ("UNL", None, None),
        ("2300FT AMSL", 2300 * FT, "AMSL"),
        ("500FT AGL", 500 * FT, "AGL"),
        ("500 FT MSL", 500 * FT, "AMSL"),
        ("FL100", 10000 * FT, "STD"),
        ("FL 245", 24500 * FT, "STD"),
        ("FL999", 99900 * FT, "STD"),
        ("1200M AMSL", 1200.0, "AMSL"),
        ("20,000M AMSL", 20000.0, "AMSL"),
        ("真高120米以下", 120.0, "AGL"),
        ("海拔1200米", 1200.0, "AMSL"),
        ("up to 1,200 ft above ground", 1200 * FT, "AGL"),
        ("1.200 FT AMSL", 1200 * FT, "AMSL"),   # a European thousands separator
        ("100,5 m AGL", 100.5, "AGL"),   # a decimal comma
        ("1.5 FT AMSL", 1.5 * FT, "AMSL"),
        ("1 200 FT AMSL", 1200 * FT, "AMSL"),   # ICAO's grouping (the piece had been '200 FT AMSL')
        ("1.5 km", 1500.0, None),
        ("1.500 KM AGL", 1500.0, "AGL"),         # kilometres keep their decimals
        ("400ft AGL", 400 * FT, "AGL"),
        ("MAX HGT 500FT AGL", 500 * FT, "AGL"),
        ("MAX HGT 400FT\nAGL", 400 * FT, "AGL"),
        ("HGT UP TO 750FT AGL", 750 * FT, "AGL"),
        ("1500 feet above mean sea level", 1500 * FT, "AMSL"),
        ("120米", 120.0, None),  # no reference stated
        ("sfc", 0.0, "AGL"),
    ],
)
def test_read_limit(text, metres, ref):
    got = read_limit(text)
    assert got[1] == ref
    assert got[0] == (None if metres is None else pytest.approx(metres, abs=1e-9))


def test_read_limit_takes_a_default_reference_only_where_none_is_stated():
    assert read_limit("120米", default_ref="AGL") == (120.0, "AGL")
    assert read_limit("3000FT", default_ref="AMSL") == pytest.approx((3000 * FT, "AMSL"))
    assert read_limit("500FT AGL", default_ref="AMSL")[1] == "AGL"
    with pytest.raises(ValueError, match="default_ref"):
        read_limit("120米", default_ref="QNH")


@pytest.mark.parametrize(
    "text, match",
    [("", "vertical limit"), ("120", "vertical limit"), ("FL", "vertical limit"), ("FL1000", "vertical limit"),
     ("5NM AGL", "vertical limit"), ("120 FOO", "vertical limit"), ("500FT QNH", "vertical limit"),
     ("-100FT AMSL", "vertical limit"), ("真高120米 AMSL", "two different references")],
)
def test_read_limit_rejects(text, match):
    with pytest.raises(ValueError, match=match) as e:
        read_limit(text)
    assert repr(text) in str(e.value)


# -- times --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, offset, expected",
    [
        ("2606010700", 0, utc(2026, 6, 1, 7, 0)),
        ("2606011800 EST", 0, utc(2026, 6, 1, 18, 0)),  # EST: an estimate, not a zone
        ("2606011800EST", 0, utc(2026, 6, 1, 18, 0)),
        ("202606010700", 0, utc(2026, 6, 1, 7, 0)),
        ("205001010000", 0, utc(2050, 1, 1, 0, 0)),  # four-digit years are taken as written
        ("2606010700", 8, utc(2026, 5, 31, 23, 0)),  # digits in Beijing time
        ("1200 UTC December 5, 2026", 0, utc(2026, 12, 5, 12, 0)),
        ("1200 UTC December 5, 2026", 8, utc(2026, 12, 5, 12, 0)),  # the piece names its clock
        ("DEC 05 12:00 2026", 0, utc(2026, 12, 5, 12, 0)),
        ("9 Aug 2031 09:30", 0, utc(2031, 8, 9, 9, 30)),
        ("09 AUG 2031 0930", 1, utc(2031, 8, 9, 8, 30)),
        ("December 5th, 2026 at 12:00", -5, utc(2026, 12, 5, 17, 0)),
        ("Sept 1 2026 9:30 pm", 0, utc(2026, 9, 1, 21, 30)),
        ("2026-12-03 08:00", 0, utc(2026, 12, 3, 8, 0)),
        ("2026年12月3日08时", 8, utc(2026, 12, 3, 0, 0)),
        ("2026年12月3日8时30分", 8, utc(2026, 12, 3, 0, 30)),
        ("2026年12月3日 08:30", 8, utc(2026, 12, 3, 0, 30)),
        ("2026年12月3日08时（北京时间）", 0, utc(2026, 12, 3, 0, 0)),
        ("2026年12月3日下午3时", 8, utc(2026, 12, 3, 7, 0)),
        ("2026年12月3日8点半", 8, utc(2026, 12, 3, 0, 30)),
        ("2026年12月3日06时（北京时间）", 0, utc(2026, 12, 2, 22, 0)),  # previous UTC day
        ("2027年1月1日07时30分（北京时间）", 0, utc(2026, 12, 31, 23, 30)),  # previous UTC year
        ("2028年3月1日06时（北京时间）", 0, utc(2028, 2, 29, 22, 0)),  # back into a leap day
        ("2028年2月29日08时", 8, utc(2028, 2, 29, 0, 0)),
        ("2402290000", 0, utc(2024, 2, 29, 0, 0)),
        ("2606302400", 0, utc(2026, 7, 1, 0, 0)),  # 2400: end of the month's last day
        ("2026年12月31日24时", 0, utc(2027, 1, 1, 0, 0)),
        ("2026年12月3日", 8, utc(2026, 12, 2, 16, 0)),  # a date alone: its start
        ("1200 UTC+8 December 5, 2026", 0, utc(2026, 12, 5, 4, 0)),
        ("2606010700 gmt-5", 0, utc(2026, 6, 1, 12, 0)),
        ("2026年12月3日晚上12时", 8, utc(2026, 12, 3, 16, 0)),   # midnight at the day's end
        ("2026年12月3日中午1时", 8, utc(2026, 12, 3, 5, 0)),     # 13:00
        ("2026年12月3日中午12时", 8, utc(2026, 12, 3, 4, 0)),
        ("2026年12月3日凌晨12时", 8, utc(2026, 12, 2, 16, 0)),   # midnight at the day's start
        ("2026-12-03 08:00 UTC+05:30", 0, utc(2026, 12, 3, 2, 30)),
    ],
)
def test_read_time(text, offset, expected):
    got = read_time(text, offset)
    assert got == expected and got.tzinfo == timezone.utc


def test_read_time_no_end():
    for text in ("PERM", "UFN", "perm", " PERM\r\n"):
        assert read_time(text) is None


def test_read_time_fills_what_the_piece_leaves_out_from_default():
    day = date(2026, 12, 3)
    assert read_time("09:30 local time", 8, default=day) == utc(2026, 12, 3, 1, 30)
    assert read_time("0930Z", 8, default=day) == utc(2026, 12, 3, 9, 30)  # Z wins over the offset
    assert read_time("0700", 0, default=day) == utc(2026, 12, 3, 7, 0)
    assert read_time("12月3日08时", 8, default=date(2026, 1, 1)) == utc(2026, 12, 3, 0, 0)
    # an aware default is first moved into the notice's clock: 20:00Z is 04:00 next day in Beijing
    assert read_time("09:30", 8, default=utc(2026, 12, 3, 20, 0)) == utc(2026, 12, 4, 1, 30)
    assert read_time("09:30", 0, default=datetime(2026, 12, 3, 23, 0)) == utc(2026, 12, 3, 9, 30)


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "not a notation"),
        ("garbage", "not a notation"),
        ("2302290000", "not a real date"),  # 2023 is no leap year
        ("2604310000", "not a real date"),  # April has 30 days
        ("2027年2月29日08时", "not a real date"),
        ("2026年4月31日08时", "not a real date"),
        ("2026年12月3日25时", "not a time of day"),
        ("2026年12月3日24时30分", "not a time of day"),
        ("2026年12月", "no day"),
        ("12月3日08时", "no year; pass `default`"),
        ("09:30", "no date; pass `default`"),
        ("13:00 PM", "12-hour"),
        ("FOO 5 2026", "not a month"),
        ("1200 UTC 北京时间 December 5, 2026", "more than one clock"),
        ("0700-2000", "not a notation"),  # a range is read by read_time_range
        ("202606010700000", "not a notation"),
        ("202613010700", "not a real date"),
        ("9999-12-31 24:00", "outside the years 1 to 9999"),   # past datetime's range (OverflowError)
        ("999912312400", "outside the years 1 to 9999"),
    ],
)
def test_read_time_rejects(text, match):
    with pytest.raises(ValueError, match=match) as e:
        read_time(text)
    assert repr(text) in str(e.value)


def test_read_time_checks_the_offset():
    with pytest.raises(ValueError, match="UTC offset"):
        read_time("2606010700", 15)
    with pytest.raises(ValueError, match="UTC offset"):
        read_time("2606010700", 5.1)
    assert read_time("2606010700", 5.75) == utc(2026, 6, 1, 1, 15)  # Nepal
    with pytest.raises(ValueError, match="outside the years 1 to 9999"):
        read_time("0001-01-01 00:00", 8)


@pytest.mark.parametrize(
    "text, offset, default, start, end",
    [
        ("2026年12月3日08时至18时", 8, None, utc(2026, 12, 3, 0, 0), utc(2026, 12, 3, 10, 0)),
        ("2026年12月3日08时至18时（北京时间）", 0, None, utc(2026, 12, 3, 0, 0), utc(2026, 12, 3, 10, 0)),
        ("2026年12月3日08时至4日06时", 8, None, utc(2026, 12, 3, 0, 0), utc(2026, 12, 3, 22, 0)),
        ("2026年12月31日20时至2时", 8, None, utc(2026, 12, 31, 12, 0), utc(2026, 12, 31, 18, 0)),
        ("2026年12月3日至5日", 8, None, utc(2026, 12, 2, 16, 0), utc(2026, 12, 5, 16, 0)),  # through the 5th
        ("0700-2000", 0, date(2026, 6, 1), utc(2026, 6, 1, 7, 0), utc(2026, 6, 1, 20, 0)),
        ("2200-0600", 0, date(2026, 2, 28), utc(2026, 2, 28, 22, 0), utc(2026, 3, 1, 6, 0)),  # overnight
        ("DEC 05 12:00 2026 UNTIL DEC 05 18:00 2026", 0, None, utc(2026, 12, 5, 12, 0), utc(2026, 12, 5, 18, 0)),
        ("2606010700-2606011800", 0, None, utc(2026, 6, 1, 7, 0), utc(2026, 6, 1, 18, 0)),
        ("2606010700 - PERM", 0, None, utc(2026, 6, 1, 7, 0), None),
        ("2026-12-03 08:00-2026-12-03 18:00", 0, None, utc(2026, 12, 3, 8, 0), utc(2026, 12, 3, 18, 0)),
        ("9 Aug 2031 09:30 to 11:00", 0, None, utc(2031, 8, 9, 9, 30), utc(2031, 8, 9, 11, 0)),
        ("0700 UTC-1800 UTC", 5, date(2026, 6, 1), utc(2026, 6, 1, 7, 0), utc(2026, 6, 1, 18, 0)),  # no offset -18
        ("0700 GMT-1800", 5, date(2026, 6, 1), utc(2026, 6, 1, 7, 0), utc(2026, 6, 1, 18, 0)),
        # a sign spaced on both sides separates (it had been read as UTC-10, 'more than one clock')
        ("0800 UTC - 1000 UTC", 5, date(2026, 6, 1), utc(2026, 6, 1, 8, 0), utc(2026, 6, 1, 10, 0)),
        # an end with no year past New Year (it had ended a year before it began)
        ("2026年12月31日22时至1月1日02时", 8, None, utc(2026, 12, 31, 14, 0), utc(2026, 12, 31, 18, 0)),
    ],
)
def test_read_time_range(text, offset, default, start, end):
    assert read_time_range(text, offset, default=default) == (start, end)


def test_a_four_digit_clock_beside_a_year_is_no_year():
    """'DEC 05 1200 2026' had been read as 20:26 in the year 1200."""
    for text in ("DEC 05 1200 2026", "5 DEC 1200 2026", "December 5 1200 2026", "DECEMBER 5 2026 1200"):
        assert read_time(text) == utc(2026, 12, 5, 12, 0), text


def test_an_end_that_is_a_date_alone_is_the_end_of_that_day():
    assert read_time("5 December 2026", end=True) == utc(2026, 12, 6, 0, 0)
    assert read_time("5 December 2026") == read_time("5 December 2026 0900", end=True) - timedelta(hours=9)
    assert read_time("2026年12月5日", 8, end=True) == utc(2026, 12, 5, 16, 0)


def test_a_limit_that_says_at_most_is_known():
    assert [states_a_maximum(t) for t in ("真高120米以下", "BELOW 400FT", "up to 1,200 ft above ground",
                                          "MAX HGT 500FT AGL", "限高120米", "SFC", "2300FT AMSL", "FL100")] \
        == [True] * 5 + [False] * 3


def test_read_time_range_rejects():
    with pytest.raises(ValueError, match="time range: cannot read '0700' as a time: it states no date"):
        read_time_range("0700-2000")
    for backwards in ("2606011800-2606010700", "2026年12月3日8时至2026年12月2日18时"):
        with pytest.raises(ValueError, match="as a time range: it ends before it starts"):
            read_time_range(backwards)
    with pytest.raises(ValueError, match="no separator"):
        read_time_range("2606010700")
    with pytest.raises(ValueError, match="time range"):
        read_time_range("2606010700 - garbage")
    with pytest.raises(ValueError, match="outside the years 1 to 9999"):
        read_time_range("9999-12-31 23:00-0100")


MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]


@given(st.datetimes(datetime(2000, 1, 1), datetime(2049, 12, 31, 23, 59)),
       st.integers(-48, 56).map(lambda q: q / 4), st.sampled_from(["icao", "chinese", "english", "faa"]))
def test_round_trip_times(local, offset, style):
    local = local.replace(second=0, microsecond=0)
    text = {
        "icao": local.strftime("%y%m%d%H%M"),
        "chinese": f"{local.year}年{local.month}月{local.day}日{local.hour}时{local.minute}分",
        "english": f"{local.day} {MONTHS[local.month - 1]} {local.year} {local:%H:%M}",
        "faa": f"{MONTHS[local.month - 1]} {local.day:02d} {local:%H:%M} {local.year}",
    }[style]
    expected = (local - timedelta(hours=offset)).replace(tzinfo=timezone.utc)
    assert read_time(text, offset) == expected, text


# -- the real development notices ---------------------------------------------------------------
@pytest.mark.skipif(not (DATA / "zones-dev.jsonl").is_file(), reason=f"real notices not present at {DATA}")
def test_coverage_on_the_real_notices(capsys):
    """Every labelled value that the text states is read from some piece of it. The one
    exception known: a notice that states only a ceiling, whose floor the labeller assumed."""
    spec = importlib.util.spec_from_file_location("reader_coverage", ROOT / "benchmarks" / "reader_coverage.py")
    coverage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(coverage)
    result = coverage.main(["--data", str(DATA), "--show", "0"])
    capsys.readouterr()
    zones = result["zones"]
    assert zones["vertex"]["labelled"] > 1000 and zones["centre"]["labelled"] > 40
    for name, c in zones.items():
        assert c["labelled"] - c["covered"] <= (1 if name == "floor" else 0), (name, c)
    for name, c in result.get("notams", {}).items():
        assert c["covered"] == c["labelled"], (name, c)


@pytest.mark.parametrize("text, clock", [
    ("from 3 DEC 2026 0800 until 3 DEC 2026 1800 (UTC+8).", 8.0),
    ("2026年12月3日08时至18时（北京时间）禁止无人机飞行", 8.0),
    ("14 June 2031 06:00 until 11:30 local time (UTC+02:00)", 2.0),
    ("0900-1700 local (GMT-5), see UTC-5 above", -5.0),
    ("India: 1000 IST (UTC+5:30)", 5.5),
    ("from 0800 UTC to 1000 UTC", None),   # UTC marks each time: no clock named for the notice
    ("0800 (UTC+8) or 0900 (UTC+9)", None),   # two clocks: the model's choice
    ("A1234/26 NOTAMN\nQ) EGTT/QRDCA/IV/BO/W/000/050/5130N00045W005\nA) EGTT B) 2607010800 C) 2607011800\n"
     "E) ACTIVE 1000-1200 LOCAL TIME (UTC+1).", None),   # items B and C are UTC
])
def test_stated_clock(text, clock):
    assert stated_clock(text) == clock
