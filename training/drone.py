"""Plain-language drone no-fly notices in English (prose or key: value bulletin) and Chinese.

Each renderer writes a ``ZoneSpec`` in its own notation (decimal or DMS centres, m / km /
NM / ft radii, AGL / AMSL heights, UTC or a local clock) and returns the text with the
``NoFlyZone`` that copies what it wrote. Knows nothing of models or of ICAO layouts.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Optional

from clover_struct.schemas.airspace import NoFlyZone

from . import draw
from .draw import ZoneSpec, decimal, dms, dms_symbols, place, yymmddhhmm
from .notams import radius_text

MONTH_NAMES = "January February March April May June July August September October November December".split()
EVENTS = ("Half Marathon", "Air Show", "Music Festival", "Cup Final", "State Visit", "Summit", "Regatta",
          "Fireworks Night", "Street Parade", "Film Shoot", "Motor Rally", "Trade Fair")
GENERIC_REASONS = ("wildfire suppression", "police operations", "a search and rescue operation", "military training",
                   "emergency services activity", "prison security", "a rocket launch", "crop spraying")
OFFSETS = [h for h in range(-12, 15)] + [5.5, 5.75, 9.5, 3.5, -3.5, 10.5]


def _local(t: Optional[datetime], offset: float) -> Optional[datetime]:
    return None if t is None else (t + timedelta(hours=offset)).replace(tzinfo=None)


def _raw(t: Optional[datetime]) -> Optional[str]:
    return None if t is None else yymmddhhmm(t)


def _offset_text(offset: float, rng: random.Random) -> str:
    sign = "+" if offset >= 0 else "-"
    h, m = divmod(round(abs(offset) * 60), 60)
    return f"UTC{sign}{h}" + (f":{m:02d}" if m else "") if rng.random() < 0.6 or m else f"UTC{sign}{h:02d}:00"


def _en_time(t: datetime, form: int) -> str:
    month = MONTH_NAMES[t.month - 1]
    return [f"{t.day} {month} {t.year} {t:%H:%M}", f"{t:%Y-%m-%d %H:%M}",
            f"{t:%d} {draw.MONTHS[t.month - 1]} {t.year} {t:%H%M}", f"{month} {t.day}, {t.year} at {t:%H:%M}"][form]


def _en_position(rng: random.Random, lat: float, lon: float, form: int) -> tuple[str, dict]:
    """Text and gold Position for a point; `form` fixed per notice so a notice is consistent."""
    if form == 0:
        k = rng.choice([3, 4, 4, 5, 6])
        a, b = decimal(lat, k), decimal(lon, k)
        return f"{a}, {b}", {"lat": a, "lon": b}
    if form == 1:
        k = rng.choice([3, 4, 5])
        a, b = decimal(lat, k), decimal(lon, k)
        text = f"{decimal(abs(lat), k)}°{'N' if lat >= 0 else 'S'} {decimal(abs(lon), k)}°{'E' if lon >= 0 else 'W'}"
        return text, {"lat": a, "lon": b}
    a, b = dms(lat, "lat", 0), dms(lon, "lon", 0)
    return (f"{dms_symbols(a)} {dms_symbols(b)}" if form == 2 else f"{a} {b}"), {"lat": a, "lon": b}


def _en_limit(rng: random.Random, metres: float, ref: str) -> tuple[str, dict]:
    if ref == "STD":
        n = max(1, round(metres / 30.48))
        return f"FL{n:03d}", {"value": float(n), "unit": "FL", "ref": "STD"}
    if rng.random() < 0.5:
        n = max(10, round(metres / 0.3048 / 50) * 50)
        unit_text, unit = rng.choice(["ft", "feet", "FT"]), "FT"
    else:
        n = max(5, round(metres / 5) * 5)
        unit_text, unit = rng.choice(["m", "metres", "M"]), "M"
    ref_text = rng.choice({"AGL": ["AGL", "above ground level"], "AMSL": ["AMSL", "above mean sea level"]}[ref])
    return f"{n} {unit_text} {ref_text}", {"value": float(n), "unit": unit, "ref": ref}


def _en_vertical(rng: random.Random, spec: ZoneSpec) -> tuple[str, str, str, dict, Optional[dict]]:
    """(prose phrase, lower-limit text, upper-limit text, gold floor, gold ceiling)."""
    floor = {"value": 0.0, "unit": "M", "ref": "AGL"}
    floor_text = rng.choice(["surface", "SFC", "ground level"])
    if spec.floor_m > 0:
        floor_text, floor = _en_limit(rng, spec.floor_m, spec.floor_ref)
    if spec.ceiling_m is None:
        prose = f"from {floor_text} upwards"
        if spec.floor_m == 0:
            prose = rng.choice(["at all altitudes", "with no upper limit"])
        return prose, floor_text, rng.choice(["unlimited", "UNL", "none"]), floor, None
    ceil_text, ceiling = _en_limit(rng, spec.ceiling_m, spec.ceiling_ref)
    if spec.floor_m == 0:
        prose = rng.choice([f"from the surface up to {ceil_text}", f"below {ceil_text}", f"up to {ceil_text}"])
    else:
        prose = f"between {floor_text} and {ceil_text}"
    return prose, floor_text, ceil_text, floor, ceiling


def _en_times(rng: random.Random, spec: ZoneSpec) -> tuple[str, str, str, float]:
    """(prose phrase, start text, end text, offset) in UTC or a local clock with its offset."""
    offset = 0.0 if rng.random() < 0.65 else float(rng.choice(OFFSETS))
    start, end = _local(spec.start, offset), _local(spec.end, offset)
    form = rng.randrange(4)
    zone = "UTC" if offset == 0 else _offset_text(offset, rng)
    clock = f" {zone}" if offset == 0 else f" local time ({zone})"
    if offset == 0 and form == 2 and rng.random() < 0.5:
        clock = "Z"  # 03 MAR 2031 1400Z
    s = "with immediate effect" if start is None else _en_time(start, form) + clock
    e = "until further notice" if end is None else _en_time(end, form) + clock
    if start is None:
        prose = f"{s} {e}" if end is None else f"{s} until {e}"
    elif end is not None and form == 0 and start.date() == end.date() and rng.random() < 0.7:
        prose = f"from {start:%H:%M} to {end:%H:%M}{clock} on {start.day} {MONTH_NAMES[start.month - 1]} {start.year}"
    else:
        prose = f"from {s} " + (e if end is None else f"until {e}")
    return prose, s, e, offset


def _reason(rng: random.Random) -> str:
    return f"the {place(rng, title=True)} {rng.choice(EVENTS)}" if rng.random() < 0.6 else rng.choice(GENERIC_REASONS)


def _area(rng: random.Random, spec: ZoneSpec, form: int) -> tuple[str, str, dict]:
    """(circle/polygon phrase for prose, bulletin phrase, gold area)."""
    if spec.radius_m is not None:
        number, unit = radius_text(rng, spec.radius_m, {"M": 35, "KM": 25, "NM": 25, "FT": 15})
        words = {"M": ["m", "metres"], "KM": ["km", "kilometres"], "NM": ["NM", "nautical miles"], "FT": ["ft", "feet"]}
        r = f"{number} {rng.choice(words[unit])}"
        c_text, c_gold = _en_position(rng, *spec.center, form)
        gold = {"kind": "circle", "center": c_gold, "radius_value": float(number), "radius_unit": unit}
        return f"within {r} of {c_text}", f"circle, radius {r}, centred on {c_text}", gold
    pts = [_en_position(rng, a, b, form) for a, b in spec.vertices]
    sep = rng.choice(["; ", " / "] if form == 0 else ["; ", " / ", " - "])  # no dash before a minus sign
    listed = sep.join(t for t, _ in pts)
    gold = {"kind": "polygon", "vertices": [g for _, g in pts]}
    return f"within the area bounded by {listed}", f"polygon {listed}", gold


def en_notice(rng: random.Random, spec: ZoneSpec, style: str) -> tuple[str, NoFlyZone]:
    """style 'drone_en_prose' or 'drone_en_fields'."""
    reason = _reason(rng)
    area_prose, area_field, area = _area(rng, spec, rng.randrange(4))
    vertical, lower_text, upper_text, floor, ceiling = _en_vertical(rng, spec)
    when, start_text, end_text, offset = _en_times(rng, spec)
    schedule = None
    if spec.windows:
        joined = " and ".join(f"{a[:2]}:{a[2:]}-{b[:2]}:{b[2:]}" for a, b in spec.windows)
        schedule = rng.choice([f"daily {joined}", f"DLY {' '.join(f'{a}-{b}' for a, b in spec.windows)}"])
    who = (rng.choice(["unmanned aircraft (drones)", "drones", "all unmanned aircraft"]) if spec.uas_only
           else rng.choice(["all aircraft, including drones,", "all aircraft"]))
    name = place(rng, title=True)
    contact = f"{name} Police on {draw.phone(rng)}" if rng.random() < 0.5 else f"{name} ATC ({draw.phone(rng)})"
    permission = (f"Flights require prior permission from {contact}." if spec.authorisable
                  else rng.choice(["No exemptions will be granted.", "", ""]))
    if style == "drone_en_prose":
        title = rng.choice(["DRONE NO-FLY ZONE NOTICE", "Temporary flight restriction for drones",
                            "Notice to drone operators", "PUBLIC NOTICE: AIRSPACE RESTRICTION"])
        verb = rng.choice(["are prohibited from flying", "may not operate", "must not fly"])
        body = f"Due to {reason}, {who} {verb} {area_prose} {vertical}, {when}."
        if schedule:
            body += f" The restriction is active {schedule}." if schedule.startswith("daily") else f" Hours: {schedule}."
        text = f"{title}\n\n{body} {permission}".strip()
    else:
        lines = [rng.choice(["UAS FLIGHT RESTRICTION", "DRONE RESTRICTION BULLETIN", "No-fly zone"]),
                 f"Reason: {reason}", f"Area: {area_field}", f"Lower limit: {lower_text}",
                 f"Upper limit: {upper_text}", f"Valid from: {start_text}", f"Valid until: {end_text}"]
        if schedule:
            lines.append(f"Active hours: {schedule}")
        lines.append(f"Applies to: {'unmanned aircraft only' if spec.uas_only else 'all aircraft'}")
        if permission:
            lines.append(f"Permission: {permission}")
        text = "\n".join(lines)
    gold = NoFlyZone(area=area, floor=floor, ceiling=ceiling, valid_from_raw=_raw(_local(spec.start, offset)),
                     valid_to_raw=_raw(_local(spec.end, offset)), utc_offset_hours=offset, schedule=schedule,
                     uas_only=spec.uas_only, reason=reason)
    return text, gold


# -- Chinese ----------------------------------------------------------------------------------
ZH_EVENTS = ("马拉松比赛", "国际会议", "运动会", "航展", "演唱会", "重大活动", "灯光秀", "博览会")
ZH_GENERIC = ("森林防火", "军事训练", "航空器试飞", "应急救援", "重要目标安保")


def _zh_time(t: datetime, with_year: bool = True) -> str:
    y = f"{t.year}年" if with_year else ""
    minutes = f"{t.minute:02d}分" if t.minute or t.hour % 3 else ""  # whole hours often drop 分
    return f"{y}{t.month}月{t.day}日{t.hour}时{minutes}"


def _zh_point(lat: float, lon: float, k: int, lon_first: bool) -> tuple[str, dict]:
    ns, ew = ("北纬" if lat >= 0 else "南纬"), ("东经" if lon >= 0 else "西经")
    a, b = decimal(abs(lat), k), decimal(abs(lon), k)
    text = f"{ew}{b}度、{ns}{a}度" if lon_first else f"{ns}{a}度、{ew}{b}度"
    return text, {"lat": decimal(lat, k), "lon": decimal(lon, k)}


def _zh_height(metres: float) -> int:
    return max(10, round(metres / 10) * 10)


def zh_notice(rng: random.Random, spec: ZoneSpec) -> tuple[str, NoFlyZone]:
    city = draw.zh_place(rng)
    reason = f"{draw.zh_place(rng)}{rng.choice(ZH_EVENTS)}" + rng.choice(["安保", ""]) if rng.random() < 0.7 else rng.choice(ZH_GENERIC)
    offset = 8.0 if rng.random() < 0.85 else 0.0
    clock = "（北京时间）" if offset == 8 else "（协调世界时）"
    start, end = _local(spec.start, offset), _local(spec.end, offset)
    if start is None:
        when = "即日起" + ("至另行通知" if end is None else f"至{_zh_time(end)}{clock}")
    elif end is None:
        when = f"自{_zh_time(start)}{clock}起至另行通知"
    else:
        when = f"{_zh_time(start)}至{_zh_time(end, end.year != start.year or rng.random() < 0.5)}{clock}"
    k, lon_first = rng.choice([4, 4, 5, 6]), rng.random() < 0.15
    if spec.radius_m is not None:
        number, unit = radius_text(rng, spec.radius_m, {"M": 50, "KM": 50})
        c_text, c_gold = _zh_point(*spec.center, k, lon_first)
        where = f"以{c_text}为中心、半径{number}{'米' if unit == 'M' else '公里'}的圆形区域"
        area = {"kind": "circle", "center": c_gold, "radius_value": float(number), "radius_unit": unit}
    else:
        pts = [_zh_point(a, b, k, lon_first) for a, b in spec.vertices]
        where = "由" + "；".join(f"（{i + 1}）{t}" for i, (t, _) in enumerate(pts)) + "各点依次连线围成的区域"
        area = {"kind": "polygon", "vertices": [g for _, g in pts]}
    # Chinese notices give heights in metres, true height (真高, AGL) or altitude (海拔, AMSL).
    ref = "AGL" if spec.ceiling_ref == "AGL" else "AMSL"
    word = "真高" if ref == "AGL" else "海拔高度"
    floor = {"value": 0.0, "unit": "M", "ref": "AGL"}
    ceiling = None
    if spec.ceiling_m is None:
        height = "全高度范围" if spec.floor_m == 0 else f"{word}{_zh_height(spec.floor_m)}米以上"
        if spec.floor_m:
            floor = {"value": float(_zh_height(spec.floor_m)), "unit": "M", "ref": ref}
    else:
        c = _zh_height(spec.ceiling_m)
        ceiling = {"value": float(c), "unit": "M", "ref": ref}
        if spec.floor_m == 0:
            height = f"{word}{c}米以下"
        else:
            f = min(_zh_height(spec.floor_m), c)
            floor = {"value": float(f), "unit": "M", "ref": ref}
            height = f"{word}{f}米至{c}米"
    who = rng.choice(["无人机", "无人驾驶航空器", "无人机、航空模型等"]) if spec.uas_only else rng.choice(["一切航空器（含无人机）", "各类航空器"])
    schedule = None
    if spec.windows:
        schedule = "每日" + "、".join(f"{a[:2]}:{a[2:]}至{b[:2]}:{b[2:]}" for a, b in spec.windows)
    title = f"{city}{rng.choice(['公安局', '人民政府', '空管部门'])}关于划设临时禁飞区域的通告"
    body = f"因{reason}需要，{when}，在{where}内{height}，禁止{who}飞行。"
    if schedule:
        body += f"管制时段为{schedule}。"
    if spec.authorisable:
        body += f"确需飞行的，须提前向{draw.zh_place(rng)}空管部门申请批准。"
    elif rng.random() < 0.5:
        body += "违者将依法处理。"
    gold = NoFlyZone(area=area, floor=floor, ceiling=ceiling, valid_from_raw=_raw(start), valid_to_raw=_raw(end),
                     utc_offset_hours=offset, schedule=schedule, uas_only=spec.uas_only, reason=reason)
    return f"{title}\n{body}\n特此通告。", gold
