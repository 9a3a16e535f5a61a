"""Read a time or a time range, copied verbatim from a notice, into aware UTC datetimes.

Notations read:

- ICAO items B/C: ``2606010700`` (YYMMDDhhmm), ``2606011800 EST`` (an estimate: the time
  is read, the EST is not a zone), ``PERM`` and ``UFN`` (no end: None); also ``202606010700``;
- FAA: ``1200 UTC December 5, 2026``, ``DEC 05 12:00 2026``; English ``9 Aug 2031 09:30``,
  ``December 5, 2026 at 12:00``; ISO-like ``2026-12-03 08:00``;
- a clock time alone, its date taken from ``default``: ``09:30 local time``, ``0930Z``;
- Chinese: ``2026年12月3日08时``, ``2026年12月3日8时30分``, ``12月3日下午3时``,
  ``（北京时间）`` for UTC+8;
- ranges: ``2026年12月3日08时至18时``, ``0700-2000``, ``DEC 05 12:00 2026 UNTIL DEC 05
  18:00 2026``; the end takes the parts it leaves out from the start.

A piece is in the notice's clock, ``utc_offset_hours`` from UTC, unless it names its own
(UTC, Z, GMT+8, 北京时间), which wins. Knows nothing of schemas, models or notices.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import date, datetime, time, timedelta, timezone

from .units import check_utc_offset, parse_yymmddhhmm

_MONTHS = ("JANUARY", "FEBRUARY", "MARCH", "APRIL", "MAY", "JUNE", "JULY",
           "AUGUST", "SEPTEMBER", "OCTOBER", "NOVEMBER", "DECEMBER")
_NO_END = {"PERM", "UFN", "PERMANENT", "UNTIL FURTHER NOTICE", "永久", "长期"}
_MON = r"([A-Z]{3,9})\.?"  # checked against _MONTHS by _month()
_CLOCK = r"(\d{1,2}:\d{2}(?: ?[AP]M)?|\d{4})"
_D, _Y = r"(\d{1,2})", r"(\d{4})"
# English and ISO forms -> the order of (year, month, day, clock) in their groups
_FORMS = [
    (re.compile(rf"{_D} {_MON} {_Y}(?: {_CLOCK})?"), "dmyc"),  # 9 AUG 2031 09:30
    (re.compile(rf"{_MON} {_D} {_Y}(?: {_CLOCK})?"), "mdyc"),  # DECEMBER 5 2026 12:00
    (re.compile(rf"{_MON} {_D} {_CLOCK} {_Y}"), "mdcy"),  # DEC 05 12:00 2026 (FAA)
    (re.compile(rf"{_D} {_MON} {_CLOCK} {_Y}"), "dmcy"),  # 5 DEC 1200 2026
    (re.compile(rf"{_CLOCK} {_MON} {_D} {_Y}"), "cmdy"),  # 1200 DECEMBER 5 2026 (FAA, UTC removed)
    (re.compile(rf"{_CLOCK} {_D} {_MON} {_Y}"), "cdmy"),  # 0930 9 AUG 2031
    (re.compile(rf"{_Y}[-/.]{_D}[-/.]{_D}(?:[ T]{_CLOCK}(?::\d{{2}})?)?"), "ymdc"),  # 2026-12-03 08:00
    (re.compile(_CLOCK), "c"),  # 09:30, 0930
]
_CHINESE = re.compile(r"(?:(\d{4})年)?(?:(\d{1,2})月)?(?:(\d{1,2})[日号])?"
                      r"(上午|下午|晚上|傍晚|凌晨|早上|中午)?"
                      r"(?:(\d{1,2})(?:[时点:](?:(\d{1,2})分?|(半))?))?")
# Zone marks. A named offset wins over the caller's; 'local time' confirms the caller's.
# (not UTC-1800; not 'UTC - 1000', a range's separator: a sign spaced on both sides is no offset's)
_OFFSET = re.compile(r"\(?\b(?:UTC|GMT)(?:([+-]) ?| ([+-]))(1[0-4]|0?\d)(?::?([0-5]\d))?(?!\d)\)?")
_UTC = re.compile(r"\(?\b(?:UTC|GMT)\b\)?|(?<=\d)Z\b")
_BEIJING = re.compile(r"\(?(?:北京时间|BEIJING TIME|\bBJT\b)\)?")
_LOCAL = re.compile(r"\(?(?:\bLOCAL TIME\b|\bLOCAL\b|\bLT\b|当地时间)\)?")
_SEPARATOR = re.compile(r"至|到|~|–|—|-|\b(?:UNTIL|TILL|TIL|THRU|THROUGH|TO)\b")


def read_time(text: str, utc_offset_hours: float = 0, default: date | datetime | None = None,
              end: bool = False) -> datetime | None:
    """A time piece -> aware UTC datetime; None for PERM / UFN.

    ``default`` supplies what the piece leaves out (the year of '12月3日08时', the date of
    '09:30'), in the notice's clock (an aware datetime is first moved into that clock).
    A date alone reads as 00:00, or as the end of that day where the piece is an ``end``
    ('to 5 December 2026': through the 5th). Raises ValueError naming the piece and the problem.
    """
    s, offset = _zone(_normal(text), utc_offset_hours, text)
    if s in _NO_END:
        return None
    local, has_date, has_clock = _read_local(s, _default_local(default, offset), text)
    if end and has_date and not has_clock:
        local = shifted(local, timedelta(days=1), text)
    return _utc(local, offset, text)


def read_time_range(text: str, utc_offset_hours: float = 0,
                    default: date | datetime | None = None) -> tuple[datetime, datetime | None]:
    """A range piece ('2026年12月3日08时至18时', '0700-2000', '... UNTIL ...') -> (start, end) in UTC.

    The end takes the parts it leaves out from the start ('18时' shares the start's day);
    an end with no date that is not after the start is on the next day ('2200-0600'); an
    end with a date and no time is the end of that day ('12月3日至5日'). The end may be
    PERM/UFN (None). The range must split at exactly one separator into two readable times.
    """
    s, offset = _zone(_normal(text), utc_offset_hours, text)
    fallback = _default_local(default, offset)
    readings, problem = [], "no separator (至, 到, -, UNTIL, TO)"
    for sep in _SEPARATOR.finditer(s):
        left, right = s[: sep.start()].strip(), s[sep.end() :].strip()
        try:
            start, _, _ = _read_local(left, fallback, left)
            if right in _NO_END:
                readings.append((start, None))
                continue
            end, has_date, has_clock = _read_local(right, start, right)
            if not has_clock or (not has_date and end <= start):  # end of that day; overnight window
                end = shifted(end, timedelta(days=1), right)
            if end < start and has_date and not _states_a_year(right):   # 12月31日22时至1月1日02时
                end = _read_local(right, start.replace(year=start.year + 1), right)[0]
            if end < start:
                raise ValueError("it ends before it starts")
        except ValueError as e:
            problem = str(e)
            continue
        readings.append((start, end))
    if len(readings) != 1:
        why = problem if not readings else f"it splits {len(readings)} ways"
        raise ValueError(f"cannot read {text!r} as a time range: {why}")
    start, end = readings[0]
    return _utc(start, offset, text), None if end is None else _utc(end, offset, text)


def stated_clock(text: str) -> float | None:
    """The offset from UTC of the one clock a whole notice names as an offset ('(UTC+2)', 'GMT-5')
    or as Beijing time (8), or None where it names none or several. An ICAO NOTAM's items B and C
    are in UTC whatever its item E says of local time: for one, None."""
    s = _normal(text)
    if re.search(r"(?<![A-Z])B\) ?\d{10}", s):
        return None
    named = set(map(_hours, _OFFSET.finditer(s)))
    named |= {8.0} if _BEIJING.search(s) else set()
    return named.pop() if len(named) == 1 else None


def _states_a_year(piece: str) -> bool:
    try:
        _read_local(piece, None, piece)
    except ValueError as e:
        return "pass `default`" not in str(e)
    return True


def _normal(text: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"a time piece must be a string, got {text!r}")
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip().upper()


def _zone(s: str, utc_offset_hours: float, text: str) -> tuple[str, float]:
    """Strip the zone marks from a piece -> (rest, the offset its clock runs at)."""
    named = set()
    if m := _OFFSET.search(s):
        named.add(_hours(m))
        s = _OFFSET.sub(" ", s)
    for pattern, hours in ((_BEIJING, 8.0), (_UTC, 0.0)):
        if pattern.search(s):
            named.add(hours)
            s = pattern.sub(" ", s)
    s = _LOCAL.sub(" ", s)
    if len(named) > 1:
        raise ValueError(f"cannot read {text!r} as a time: it names more than one clock ({sorted(named)} h from UTC)")
    offset = named.pop() if named else utc_offset_hours
    return re.sub(r"\s+", " ", s).strip(" ,"), check_utc_offset(offset)


def _hours(offset: re.Match) -> float:
    """The hours from UTC an _OFFSET match names."""
    return (1 if (offset[1] or offset[2]) == "+" else -1) * (int(offset[3]) + int(offset[4] or 0) / 60)


def _default_local(default: date | datetime | None, offset: float) -> datetime | None:
    if isinstance(default, datetime):
        if default.tzinfo is not None:
            default = default.astimezone(timezone(timedelta(hours=offset)))
        return default.replace(tzinfo=None)
    if isinstance(default, date):
        return datetime.combine(default, time())
    if default is not None:
        raise ValueError(f"default must be a date or datetime, got {default!r}")
    return None


def _utc(local: datetime, offset: float, text: str) -> datetime:
    return shifted(local, timedelta(hours=-offset), text).replace(tzinfo=timezone.utc)


def shifted(moment: datetime, delta: timedelta, text: str) -> datetime:
    """`moment + delta`, or ValueError where that leaves the calendar's years 1 to 9999."""
    try:
        return moment + delta
    except OverflowError:
        raise ValueError(f"cannot read {text!r} as a time: it lies outside the years 1 to 9999") from None


def _read_local(s: str, default: datetime | None, text: str) -> tuple[datetime, bool, bool]:
    """A zone-free piece -> (naive datetime in the notice's clock, states a date?, states a clock?)."""
    if m := re.fullmatch(r"(\d{10}) ?(?:EST)?", s):  # ICAO YYMMDDhhmm, the project's one reading of it
        try:
            return parse_yymmddhhmm(m[1]).replace(tzinfo=None), True, True
        except ValueError as e:
            raise ValueError(f"cannot read {text!r} as a time: {e}") from None
    if m := re.fullmatch(r"(\d{4})(\d{2})(\d{2})(\d{2})(\d{2}) ?(?:EST)?", s):  # YYYYMMDDhhmm
        return _build(*m.groups(), default, text)
    if re.search(r"[年月日号时点分午晚凌早傍]", s):
        m = _CHINESE.fullmatch(s.replace(" ", ""))
        if m is None or not any(m.groups()):
            raise ValueError(f"cannot read {text!r} as a time: not a Chinese date/time like 2026年12月3日08时30分")
        year, month, day, period, hour, minute, half = m.groups()
        if hour is not None and period:
            hour = _afternoon(period, int(hour))
        minute = 30 if half else minute
        return _build(year, month, day, hour, minute, default, text)
    s = re.sub(r"(?<=\d)(?:ST|ND|RD|TH)\b", "", s.replace(",", " "))
    s = re.sub(r"\s+", " ", re.sub(r"\b(?:AT|ON)\b", " ", s)).strip()
    readings = [dict(zip(order, m.groups()), order=order) for pattern, order in _FORMS if (m := pattern.fullmatch(s))]
    # 'DEC 05 1200 2026': a clock and a year both four digits; the year is the one that is a year now
    parts = next((r for r in readings if 1900 <= int(r.get("y") or 2000) < 2200), readings[0] if readings else None)
    if parts is not None:
        hour, minute = _clock(parts["c"], text) if parts.get("c") else (None, None)
        month = _month(parts["m"], text) if parts["order"] != "ymdc" and "m" in parts else parts.get("m")
        return _build(parts.get("y"), month, parts.get("d"), hour, minute, default, text)
    raise ValueError(f"cannot read {text!r} as a time: not a notation read here (YYMMDDhhmm, PERM, "
                     "'9 Aug 2031 09:30', 'DEC 05 12:00 2026', '1200 UTC December 5, 2026', "
                     "'2026年12月3日08时', '09:30')")


def _afternoon(period: str, hour: int) -> int:
    """The 24-hour hour of a Chinese period's hour: 下午3时 15, 晚上12时 24 (midnight), 中午1时 13,
    凌晨12时 0; an hour already past noon stays."""
    if period in ("下午", "晚上", "傍晚") and hour <= 12 or period == "中午" and hour < 11:
        return hour + 12
    return 0 if period == "凌晨" and hour == 12 else hour


def _clock(s: str, text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d{1,2}):?(\d{2})(?: ?([AP])M)?", s)
    hour, minute = int(m[1]), int(m[2])
    if m[3]:
        if not 1 <= hour <= 12:
            raise ValueError(f"cannot read {text!r} as a time: {s} is not a 12-hour clock time")
        hour = hour % 12 + (12 if m[3] == "P" else 0)
    return hour, minute


def _month(word: str, text: str) -> int:
    for number, name in enumerate(_MONTHS, 1):
        if name.startswith(word) and len(word) >= 3 or word == "SEPT" and number == 9:
            return number
    raise ValueError(f"cannot read {text!r} as a time: {word!r} is not a month")


def _build(year, month, day, hour, minute, default: datetime | None, text: str) -> tuple[datetime, bool, bool]:
    """Fields as written (strings or None) -> (naive datetime, states a date?, states a clock?)."""
    has_date, has_clock = day is not None or month is not None or year is not None, hour is not None
    hour, minute = int(hour or 0), int(minute or 0)
    if hour > 24 or minute > 59 or (hour == 24 and minute):
        raise ValueError(f"cannot read {text!r} as a time: {hour:02d}:{minute:02d} is not a time of day")
    if has_date and day is None:
        raise ValueError(f"cannot read {text!r} as a time: it states a month or year but no day")
    if year is None or month is None or day is None:
        if default is None:
            missing = "year" if has_date and year is None else "month" if has_date else "date"
            raise ValueError(f"cannot read {text!r} as a time: it states no {missing}; pass `default`")
        year, month, day = year or default.year, month or default.month, day or default.day
    try:
        moment = datetime(int(year), int(month), int(day))
    except ValueError as e:
        raise ValueError(f"cannot read {text!r} as a time: {year}-{month}-{day} is not a real date ({e})") from None
    return shifted(moment, timedelta(hours=hour, minutes=minute), text), has_date, has_clock
