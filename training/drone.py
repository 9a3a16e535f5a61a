"""Plain-language drone no-fly notices in English (prose or key: value bulletin) and Chinese.

Each renderer writes a ``ZoneSpec`` in its own notation (decimal, hemisphere-decimal,
symbol or compact DMS centres; m / km / NM / ft radii; AGL / AMSL heights; UTC or a local
clock such as 北京时间 with its offset) and returns the text, the ``NoFlyZone`` that copies
its pieces, and what they mean (notation.Meant). Knows nothing of models or ICAO layouts.
"""

from __future__ import annotations

import random
from datetime import datetime
from typing import Optional

from clover_struct.schemas.airspace import NoFlyZone

from . import draw
from . import notation as N
from .draw import ZoneSpec, place

# Reasons are drawn broadly (invented places, words combined) so that the model copies the
# notice's reason, whatever it says, rather than recall a list.
EVENTS = ("Half Marathon", "Air Show", "Music Festival", "Cup Final", "State Visit", "Summit", "Regatta",
          "Fireworks Night", "Street Parade", "Film Shoot", "Motor Rally", "Trade Fair", "Boat Race", "Triathlon",
          "Food Festival", "Carnival", "Charity Run", "Horse Show", "Golf Open", "Light Show", "Book Fair", "Expo")
EVENT_WORDS = ("International", "Youth", "Summer", "Winter", "Heritage", "Technology", "Maritime", "Spring",
               "Classic", "Open", "Grand", "Autumn")
GENERIC_REASONS = ("wildfire suppression", "police operations", "a search and rescue operation", "military training",
                   "emergency services activity", "prison security", "a rocket launch", "crop spraying")
SITES = ("harbour", "bridge", "power station", "border", "stadium", "railway", "pipeline", "dam", "coastguard",
         "airfield", "refinery", "embassy", "hospital", "wind farm", "motorway", "reservoir", "naval base", "power line")
WORKS = ("security", "inspection", "maintenance", "survey", "patrol", "construction", "demolition", "testing",
         "repair", "protection", "mapping", "photography")
ENDINGS = ("operations", "works", "activity")   # 'bridge inspection works'
FREE_WORDS = SITES + WORKS + ("port", "airport", "ceremony", "visit", "exercise", "filming", "launch", "recovery",
                              "concert", "match", "protest", "drill", "trial", "calibration", "flypast", "display",
                              "blasting", "spraying", "royal", "VIP", "national", "public", "order", "event", "site"
                              ) + ENDINGS + ("training", "festival", "funeral", "movement")
OFFSETS = [h for h in range(-12, 15)] + [5.5, 5.75, 9.5, 3.5, -3.5, 10.5]
EN_NOTATIONS = ("decimal", "decimal_degree_hemi", "symbols", "dms")


def _offset_text(offset: float, rng: random.Random) -> str:
    sign = "+" if offset >= 0 else "-"
    h, m = divmod(round(abs(offset) * 60), 60)
    return f"UTC{sign}{h}" + (f":{m:02d}" if m else "") if rng.random() < 0.6 or m else f"UTC{sign}{h:02d}:00"


def _en_position(lat: float, lon: float, notation: str, places: int) -> tuple[str, tuple[str, str], tuple]:
    """(text, (lat piece, lon piece), exact (lat, lon)) of a point."""
    a, x = N.coordinate(lat, "lat", notation, places)
    b, y = N.coordinate(lon, "lon", notation, places)
    return (f"{a}, {b}" if notation == "decimal" else f"{a} {b}"), (a, b), (x, y)


def _en_vertical(rng: random.Random, spec: ZoneSpec, meant: N.Meant):
    """(prose phrase, lower-limit text, upper-limit text, floor piece, ceiling piece)."""
    floor_piece = None
    floor_text = rng.choice(["surface", "SFC", "ground level"])
    if spec.floor_m > 0:
        floor_text, meant.floor_m, meant.floor_ref = N.plain_limit(rng, spec.floor_m, spec.floor_ref)
        floor_piece = floor_text
    if spec.ceiling_m is None:
        if spec.floor_m == 0:
            return rng.choice(["at all altitudes", "with no upper limit"]), floor_text, "unlimited", None, None
        return f"from {floor_text} upwards", floor_text, rng.choice(["unlimited", "UNL", "none"]), floor_piece, None
    ceiling, meant.ceiling_m, meant.ceiling_ref = N.plain_limit(rng, spec.ceiling_m, spec.ceiling_ref)
    if spec.floor_m == 0:
        if rng.random() < 0.4:   # the surface stated: copied as the floor
            return f"from the surface up to {ceiling}", "surface", ceiling, "surface", ceiling
        return rng.choice([f"below {ceiling}", f"up to {ceiling}"]), floor_text, ceiling, None, ceiling
    return f"between {floor_text} and {ceiling}", floor_text, ceiling, floor_piece, ceiling


def _en_times(rng: random.Random, spec: ZoneSpec, meant: N.Meant, prose: bool):
    """(prose phrase, start text, end text, start piece, end piece, offset); in prose an end on
    the start's day may be a bare clock time ('from 14 June 2031 06:00 to 11:30 UTC')."""
    offset = 0.0 if rng.random() < 0.6 else float(rng.choice(OFFSETS))
    start = None if spec.start is None else N.local(spec.start, offset)
    end = None if spec.end is None else N.local(spec.end, offset)
    meant.valid_from, meant.valid_to = spec.start, spec.end
    form = rng.randrange(5 if offset == 0 else 4)   # form 4 names UTC inside the piece
    zone = "UTC" if offset == 0 else _offset_text(offset, rng)
    clock = "" if form == 4 else f" {zone}" if offset == 0 else f" local time ({zone})"
    if offset == 0 and form == 2 and rng.random() < 0.5:
        clock = "Z"  # 03 MAR 2031 1400Z
    a = None if start is None else N.english_time(start, form)
    b = None if end is None else N.english_time(end, form)
    s = "with immediate effect" if a is None else a + clock
    e = "until further notice" if b is None else b + clock
    if a is None:
        prose = f"{s} {e}" if b is None else f"{s} until {e}"
    elif prose and b is not None and form == 0 and start.date() == end.date() and rng.random() < 0.7:
        b = f"{end:%H:%M}"   # the end shares the start's day: '... 06:00 to 11:30'
        prose = f"from {a} to {b}{clock}"
    elif prose and b is not None and rng.random() < 0.4:   # the clock named once, after the end
        prose = f"from {a} {rng.choice(['to', 'until', 'through'])} {b}{clock}"
    else:
        prose = f"from {s} " + (e if b is None else f"{rng.choice(['until', 'until', 'to'])} {e}")
    return prose, s, e, a, b, offset


def _reason(rng: random.Random) -> str:
    """'the Kelvorn Half Marathon', 'bridge inspection works', or any few words: 'royal
    visit drill', 'Tarsbury port calibration'."""
    roll = rng.random()
    if roll < 0.45:
        words = [place(rng, title=True)] + [rng.choice(EVENT_WORDS)] * (rng.random() < 0.3) + [rng.choice(EVENTS)]
        return "the " + " ".join(words)
    if roll < 0.7:
        return " ".join([rng.choice(SITES), rng.choice(WORKS)] + [rng.choice(ENDINGS)] * (rng.random() < 0.5))
    if roll < 0.8:
        return rng.choice(GENERIC_REASONS)
    words = [place(rng, title=True) if rng.random() < 0.2 else rng.choice(FREE_WORDS) for _ in range(rng.randint(1, 5))]
    return " ".join(words)


def _area(rng: random.Random, spec: ZoneSpec, meant: N.Meant) -> tuple[str, str, dict]:
    """(circle/polygon phrase for prose, bulletin phrase, gold area)."""
    notation = rng.choice(EN_NOTATIONS)
    places = rng.choice([3, 4, 4, 5, 6]) if notation.startswith("decimal") else 0
    if spec.radius_m is not None:
        unit = draw_unit(rng, spec.radius_m, {"M": 35, "KM": 25, "NM": 25, "FT": 15})
        r, meant.radius_m = N.radius(rng, spec.radius_m, unit)
        c_text, (lat, lon), meant.center = _en_position(*spec.center, notation, places)
        meant.kind = "circle"
        return f"within {r} of {c_text}", f"circle, radius {r}, centred on {c_text}", N.circle_area(lat, lon, r)
    pts = [_en_position(a, b, notation, places) for a, b in spec.vertices]
    meant.kind, meant.vertices = "polygon", [p[2] for p in pts]
    sep = rng.choice(["; ", " / "] if notation == "decimal" else ["; ", " / ", " - "])  # no dash before a minus
    listed = sep.join(t for t, _, _ in pts)
    return f"within the area bounded by {listed}", f"polygon {listed}", N.polygon_area([p[1] for p in pts])


def draw_unit(rng: random.Random, metres: float, weights: dict) -> str:
    unit = rng.choices(list(weights), weights=list(weights.values()))[0]
    return "KM" if unit in ("M", "FT") and metres >= 3000 else unit


def en_notice(rng: random.Random, spec: ZoneSpec, style: str) -> tuple[str, NoFlyZone, N.Meant]:
    """style 'drone_en_prose' or 'drone_en_fields'."""
    meant = N.Meant()
    reason = _reason(rng)
    area_prose, area_field, area = _area(rng, spec, meant)
    vertical, lower_text, upper_text, floor, ceiling = _en_vertical(rng, spec, meant)
    when, start_text, end_text, start, end, offset = _en_times(rng, spec, meant, style == "drone_en_prose")
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
                            "Notice to drone operators", "PUBLIC NOTICE: AIRSPACE RESTRICTION", ""])
        if rng.random() < 0.6:
            verb = rng.choice(["are prohibited from flying", "may not operate", "must not fly"])
            body = f"Due to {reason}, {who} {verb} {area_prose} {vertical}, {when}."
        else:   # the flights banned, the reason last
            flights = (rng.choice(["Drone flights", "Unmanned aircraft flights", "Drone operations"]) if spec.uas_only
                       else rng.choice(["All flights", "Flights of all aircraft, drones included,"]))
            verb = rng.choice(["are banned", "are prohibited", "are not permitted"])
            body = f"{flights} {verb} {area_prose} {vertical} {when} for {reason}."
        if schedule:
            body += f" The restriction is active {schedule}." if schedule.startswith("daily") else f" Hours: {schedule}."
        text = f"{title}\n\n{body} {permission}".strip()
    else:
        lines = [rng.choice(["UAS FLIGHT RESTRICTION", "DRONE RESTRICTION BULLETIN", "No-fly zone"]),
                 f"Reason: {reason}", f"Area: {area_field}", f"Lower limit: {lower_text}",
                 f"Upper limit: {upper_text}", f"Valid from: {start_text}", f"Valid until: {end_text}"]
        floor = floor or lower_text   # 'Lower limit: SFC' states the floor: copied
        if schedule:
            lines.append(f"Active hours: {schedule}")
        lines.append(f"Applies to: {'unmanned aircraft only' if spec.uas_only else 'all aircraft'}")
        if permission:
            lines.append(f"Permission: {permission}")
        text = "\n".join(lines)
    gold = NoFlyZone(floor=floor, ceiling=ceiling, valid_from_raw=start, valid_to_raw=end, utc_offset_hours=offset,
                     schedule=schedule, uas_only=spec.uas_only, reason=reason, area=area)
    return text, gold, meant


# -- Chinese ----------------------------------------------------------------------------------
ZH_EVENTS = ("马拉松比赛", "国际会议", "运动会", "航展", "演唱会", "重大活动", "灯光秀", "博览会", "龙舟赛", "音乐节",
             "足球赛", "自行车赛", "烟花表演", "庆典活动", "开幕式", "论坛", "车展", "帆船赛", "文化节", "峰会")
ZH_GENERIC = ("森林防火", "军事训练", "航空器试飞", "应急救援", "重要目标安保", "农林作业", "空中拍摄", "边境巡逻",
              "气象探测", "靶场射击", "爆破作业", "人工影响天气")
ZH_SITES = ("港口", "大桥", "电厂", "水库", "码头", "铁路", "高速公路", "油气管道", "输电线路", "监狱", "军事基地", "核电站")
ZH_WORKS = ("安保", "施工", "巡查", "检修", "维护", "演练", "保护", "检测", "建设")
# Common characters, most of them spelled in bytes by clover-mini's tokenizer, for reasons of
# any wording (none of 因, 需, 要: they frame the reason in 因…需要).
ZH_FREE = ("的一是在不了有和人这中大为上个国我以他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种"
           "面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本"
           "去把性好应开它合还由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反明看原又利比或但质"
           "气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题程展五果料象员革位入常文总次品式活"
           "设及管特件长求老头基资边流路级少图山统接知较将组见计别手角期根论运农指几九区强放决西被干做必战先回则"
           "任取据处府研滩港湾桥站馆园场院校厂镇村峰岭湖河江海岛")


def _zh_reason(rng: random.Random, city: str) -> str:
    """'安平马拉松比赛安保', '龙泉大桥检修', '森林防火', or any few characters: '港湾站点检'.
    An event is often the issuing city's own."""
    roll = rng.random()
    if roll < 0.4:
        where = city if rng.random() < 0.3 else draw.zh_place(rng)
        return where + rng.choice(ZH_EVENTS) + rng.choice(["安保", "保障", "", ""])
    if roll < 0.6:
        return rng.choice([draw.zh_place(rng), ""]) + rng.choice(ZH_SITES) + rng.choice(ZH_WORKS)
    if roll < 0.75:
        return rng.choice(ZH_GENERIC)
    return "".join(rng.choice(ZH_FREE) for _ in range(rng.randint(2, 8)))


def _zh_point(lat: float, lon: float, notation: str, places: int, lon_first: bool) -> tuple[str, tuple, tuple]:
    a, x = N.coordinate(lat, "lat", notation, places)
    b, y = N.coordinate(lon, "lon", notation, places)
    return (f"{b}、{a}" if lon_first else f"{a}、{b}"), (a, b), (x, y)


def _zh_when(rng: random.Random, start: Optional[datetime], end: Optional[datetime], clock: str):
    """(phrase, start piece, end piece) in the notice's clock."""
    if start is None:
        b = None if end is None else N.zh_time(end)
        return "即日起" + ("至另行通知" if end is None else f"至{b}{clock}"), None, b
    a = N.zh_time(start)
    if end is None:
        return f"自{a}{clock}起至另行通知", a, None
    dated = end.date() != start.date() or rng.random() < 0.4   # '18时' shares the start's day
    b = N.zh_time(end, year=dated and (end.year != start.year or rng.random() < 0.4), date=dated)
    head = clock.strip("（）") if rng.random() < 0.3 else ""   # 北京时间2026年12月3日8时至...
    return (f"{head}{a}至{b}" + ("" if head else clock)), a, b


def zh_notice(rng: random.Random, spec: ZoneSpec) -> tuple[str, NoFlyZone, N.Meant]:
    meant = N.Meant(valid_from=spec.start, valid_to=spec.end)
    city = draw.zh_place(rng)
    reason = _zh_reason(rng, city)
    offset = 8.0 if rng.random() < 0.85 else 0.0
    clock = "（北京时间）" if offset == 8 else "（协调世界时）"
    start = None if spec.start is None else N.local(spec.start, offset)
    end = None if spec.end is None else N.local(spec.end, offset)
    when, a, b = _zh_when(rng, start, end, clock)
    notation = rng.choice(["zh_decimal", "zh_decimal", "zh_dms"])
    places, lon_first = rng.choice([4, 4, 5, 6]), rng.random() < 0.15
    if spec.radius_m is not None:
        unit = "米" if spec.radius_m < 3000 and rng.random() < 0.7 else "公里"
        r, meant.radius_m = N.radius(rng, spec.radius_m, unit)
        c_text, (lat, lon), meant.center = _zh_point(*spec.center, notation, places, lon_first)
        where = f"以{c_text}为中心、半径{r}" + rng.choice(["的圆形区域", "的圆形区域", "范围"])
        area, meant.kind = N.circle_area(lat, lon, r), "circle"
    else:
        pts = [_zh_point(x, y, notation, places, lon_first) for x, y in spec.vertices]
        where = "由" + "；".join(f"（{i + 1}）{t}" for i, (t, _, _) in enumerate(pts)) + "各点依次连线围成的区域"
        area, meant.kind, meant.vertices = N.polygon_area([p[1] for p in pts]), "polygon", [p[2] for p in pts]
    # Chinese notices give heights in metres, true height (真高, AGL) or altitude (海拔, AMSL).
    ref = "AGL" if spec.ceiling_ref == "AGL" else "AMSL"
    floor = ceiling = None
    if spec.ceiling_m is None:
        height = "全高度范围"
        if spec.floor_m:
            floor, meant.floor_m, meant.floor_ref = N.zh_height(spec.floor_m, ref)
            height = f"{floor}以上"
    else:
        ceiling, meant.ceiling_m, meant.ceiling_ref = N.zh_height(spec.ceiling_m, ref)
        if spec.floor_m == 0:
            height = f"{ceiling}以下"
        else:
            floor, meant.floor_m, meant.floor_ref = N.zh_height(min(spec.floor_m, meant.ceiling_m), ref)
            if ref == "AGL":   # 真高50米至300米: the ceiling names no reference, which reads as AGL
                ceiling = ceiling.removeprefix("真高")
            height = f"{floor}至{ceiling}"
    who = rng.choice(["无人机", "无人驾驶航空器", "无人机、航空模型等"]) if spec.uas_only else rng.choice(["一切航空器（含无人机）", "各类航空器"])
    schedule = None
    if spec.windows:
        schedule = "每日" + "、".join(f"{x[:2]}:{x[2:]}至{y[:2]}:{y[2:]}" for x, y in spec.windows)
    office = rng.choice(["", "", "市", "区", "县", "新区"]) + rng.choice(["公安局", "人民政府", "空管部门"])
    title = f"{city}{office}关于划设{rng.choice(['临时', '临时', ''])}禁飞区域的通告"
    ban = f"禁止{who}飞行" if rng.random() < 0.6 else f"设立{rng.choice(['临时', ''])}禁飞区，禁止{who}飞行"
    joint = "" if ban.startswith("设立") and rng.random() < 0.4 else "，"   # 真高150米以下设立禁飞区
    body = f"因{reason}需要，{when}，{rng.choice(['在', ''])}{where}内{rng.choice(['', '，'])}{height}{joint}{ban}。"
    if schedule:
        body += f"管制时段为{schedule}。"
    if spec.authorisable:
        body += f"确需飞行的，须提前向{draw.zh_place(rng)}空管部门申请批准。"
    elif rng.random() < 0.5:
        body += "违者将依法处理。"
    gold = NoFlyZone(floor=floor, ceiling=ceiling, valid_from_raw=a, valid_to_raw=b, utc_offset_hours=offset,
                     schedule=schedule, uas_only=spec.uas_only, reason=reason, area=area)
    return title + rng.choice(["\n", "："]) + f"{body}\n特此通告。", gold, meant
