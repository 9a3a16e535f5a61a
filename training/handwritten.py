"""Notices written by hand for the project, one of each kind a user brings that the generated
sets and the real dev files do not hold: a lowercase ICAO NOTAM, FAA domestic TFRs (the FDC
line, the same in words, the web listing), an English drone notice in km and ft with a local
clock, a Chinese 禁飞区 notice in Beijing time, a 5-vertex polygon in spaced DMS, and garbage.

Each is scored as zone_eval scores a real zone (footprint at IoU >= 0.9, limits, validity and
uas_only exact) or, for garbage, as a negative (no zone). `python training/evaluate.py --sets
handwritten` prints what each notice got wrong. Knows nothing of decoding.
"""

from __future__ import annotations

from clover_struct import ExtractionError, extract_many
from clover_struct.schemas import NoFlyZone

from .zone_eval import IOU_RIGHT, field_hits, iou, labelled_footprint


def _circle(lat, lon, radius_m, ceiling_m, ceiling_ref, start, end, uas=False):
    return {"shape": "circle", "center_lat": lat, "center_lon": lon, "radius_m": radius_m, "polygon": None,
            "floor_m": 0.0, "floor_ref": "AGL", "ceiling_m": ceiling_m, "ceiling_ref": ceiling_ref,
            "valid_from": start, "valid_to": end, "uas_only": uas}


_FT = 0.3048
_NEW_YORK = _circle(40 + 45 / 60 + 12 / 3600, -(73 + 58 / 60 + 30 / 3600), 2 * 1852.0, 2999 * _FT, "AGL",
                    "2026-12-05T12:00:00Z", "2026-12-05T18:00:00Z")
NOTICES = [
    ("lowercase", "a0123/32 notamn\nq) egtt/qrtca/iv/bo/w/000/025/5130n00010w003\na) egll b) 3207011000 c) 3207011600\n"
                  "e) temporary restricted area wi 2nm radius of 513012n 0001012w. all acft prohibited.\n"
                  "f) sfc g) 2500ft amsl",
     _circle(51 + 30 / 60 + 12 / 3600, -(10 / 60 + 12 / 3600), 2 * 1852.0, 2500 * _FT, "AMSL",
             "2032-07-01T10:00:00Z", "2032-07-01T16:00:00Z")),
    ("faa_fdc", "!FDC 6/1234 ZNY NY..AIRSPACE NEW YORK, NY..TEMPORARY FLIGHT RESTRICTIONS WI AN AREA DEFINED AS "
                "2NM RADIUS OF 404512N0735830W (JFK) SFC-2999FT AGL EFFECTIVE 2612051200 UTC (0700 LOCAL 12/05/26) "
                "UNTIL 2612051800 UTC (1300 LOCAL 12/05/26). PURSUANT TO 14 CFR SECTION 91.137(A)(2).", _NEW_YORK),
    ("faa_words", "!FDC 6/1234 ZNY NY..AIRSPACE NEW YORK, NY..TEMPORARY FLIGHT RESTRICTIONS WITHIN AN AREA DEFINED "
                  "AS 2 NAUTICAL MILES RADIUS OF 404512N0735830W SFC-2999FT AGL EFFECTIVE 1200 UTC DECEMBER 5, 2026 "
                  "UNTIL 1800 UTC DECEMBER 5, 2026.", _NEW_YORK),
    ("faa_listing", "Temporary Flight Restriction\nLocation: NEW YORK, NY\nType: HAZARDS\n"
                    "Beginning Date and Time: 1200 UTC December 5, 2026\nEnding Date and Time: 1800 UTC December 5, 2026\n"
                    "Reason: FIRE FIGHTING OPERATIONS\nAltitude: from the surface up to and including 2,999 feet AGL\n"
                    "Center: 40°45'12\"N 73°58'30\"W\nRadius: 2 nautical miles", _NEW_YORK),
    ("drone_km_ft", "Drone flights are banned within 2.5 km of 48.8584, 2.2945 up to 400 ft above ground level from "
                    "10 July 2031 08:00 to 10 July 2031 20:00 local time (UTC+2) for the parade rehearsal.",
     _circle(48.8584, 2.2945, 2500.0, 400 * _FT, "AGL", "2031-07-10T06:00:00Z", "2031-07-10T18:00:00Z", uas=True)),
    ("chinese", "关于设立临时禁飞区的通告：因体育赛事安保需要，2031年9月20日7时至19时（北京时间），以北纬30.5728度、"
                "东经104.0668度为中心、半径2公里范围内，真高150米以下设立禁飞区，禁止无人机飞行。",
     _circle(30.5728, 104.0668, 2000.0, 150.0, "AGL", "2031-09-19T23:00:00Z", "2031-09-20T11:00:00Z", uas=True)),
    ("dms_polygon", "A0456/31 NOTAMN\nQ) YMMM/QRDCA/IV/BO/W/000/100/3230S11545E010\nA) YMMM B) 3108010000 "
                    "C) 3108050600\nE) DANGER AREA ACTIVATED BOUNDED BY 32 20 00S 115 30 00E - 32 20 00S 115 50 00E - "
                    "32 35 00S 115 55 00E - 32 45 00S 115 40 00E - 32 35 00S 115 25 00E - 32 20 00S 115 30 00E.\n"
                    "F) SFC G) FL100",
     {"shape": "polygon", "polygon": [[-(32 + 20 / 60), 115.5], [-(32 + 20 / 60), 115 + 50 / 60],
                                      [-(32 + 35 / 60), 115 + 55 / 60], [-32.75, 115 + 40 / 60],
                                      [-(32 + 35 / 60), 115 + 25 / 60]],
      "floor_m": 0.0, "floor_ref": "AGL", "ceiling_m": 3048.0, "ceiling_ref": "STD",
      "valid_from": "2031-08-01T00:00:00Z", "valid_to": "2031-08-05T06:00:00Z", "uas_only": False}),
    ("garbage", "Lorem ipsum 12345 !!! the quick brown fox jumps ### 0x3F", None),
]


def misses(pred, zone: dict | None) -> list[str]:
    """What an extraction got wrong against a notice's label: "footprint", field names, "no zone"
    (a zone notice read as none) or "a zone" (garbage read as one); empty when all is right."""
    defined = not isinstance(pred, ExtractionError) and pred.defines_zone
    if zone is None:
        return ["a zone"] if defined else []
    if not defined:
        return ["no zone"]
    wrong = [] if iou(pred.footprint(), labelled_footprint(zone)) >= IOU_RIGHT else ["footprint"]
    return wrong + [k for k, ok in field_hits(pred, zone).items() if not ok]


def score_handwritten(model) -> dict:
    """{"n", "right" (notices with nothing wrong), "misses": {notice: [what it got wrong]}}."""
    preds = extract_many([text for _, text, _ in NOTICES], NoFlyZone, model=model, batch_size=len(NOTICES))
    got = {name: misses(pred, zone) for (name, _, zone), pred in zip(NOTICES, preds)}
    return {"n": len(NOTICES), "right": sum(not m for m in got.values()), "misses": {k: m for k, m in got.items() if m}}
