"""Read a radius or a vertical limit, copied verbatim from a notice, into metres.

Radii: ``0.2NM``, ``5 NM``, ``2KM``, ``500M``, ``1000 FT``, ``3 statute miles``, ``半径500米``,
``半径2公里``, ``radius of 3 kilometres``, ``1NM RADIUS``. Vertical limits: ``SFC``/``GND``/``地面``
(0 m AGL), ``UNL`` (unlimited), flight levels ``FL100``/``FL 245`` (STD, 100 ft each),
``2300FT AMSL``, ``500 FT MSL``, ``1200M AMSL``, ``400ft AGL``, ``1.5 km``, ``up to 1,200 ft above
ground``, ``MAX HGT 500FT AGL``, ``真高120米以下`` (AGL), ``海拔1200米`` (AMSL), ``120米``. Thousands
may be grouped with commas, spaces (``1 200 FT``) or, in feet and metres, points (``1.200 FT``,
``1.500 m``); a comma before one or two digits is a decimal comma (``2,5 km``, ``0,5 NM``).
Lowercase, full-width characters and line breaks inside a piece are accepted.
Knows nothing of schemas, models or which item of a notice a piece came from.
"""

from __future__ import annotations

import re
import unicodedata

from .units import FT_M, KM_M, NM_M, SM_M

# Unit words -> metres per unit. Plain "MILE" is left out on purpose: statute or nautical
# cannot be told from the word alone; SM and "statute mile" say which.
_UNIT = {"NM": NM_M, "NMI": NM_M, "NAUTICAL MILE": NM_M, "NAUTICAL MILES": NM_M, "海里": NM_M,
         "KM": KM_M, "KILOMETRE": KM_M, "KILOMETRES": KM_M, "KILOMETER": KM_M, "KILOMETERS": KM_M,
         "公里": KM_M, "千米": KM_M,
         "M": 1.0, "METRE": 1.0, "METRES": 1.0, "METER": 1.0, "METERS": 1.0, "米": 1.0,
         "FT": FT_M, "FEET": FT_M, "FOOT": FT_M, "英尺": FT_M,
         "SM": SM_M, "STATUTE MILE": SM_M, "STATUTE MILES": SM_M}
_HEIGHT_UNITS = ("M", "METRE", "METRES", "METER", "METERS", "米", "FT", "FEET", "FOOT", "英尺",
                 "KM", "KILOMETRE", "KILOMETRES", "KILOMETER", "KILOMETERS")
_AMOUNT = r"(\d{1,3}(?:(?:,\d{3})+|(?: \d{3})+)(?:\.\d+)?|\d+,\d{1,2}|\d+(?:\.\d+)?)"  # 1,200, 1 200, 2,5, 1200.5


def _units(names) -> str:
    return "|".join(sorted(map(re.escape, names), key=len, reverse=True))  # longest first: NMI before NM before M


_QUANTITY = re.compile(rf"{_AMOUNT} ?({_units(_UNIT)})")
_HEIGHT = re.compile(rf"{_AMOUNT} ?({_units(_HEIGHT_UNITS)})(?: ?(.+))?")
# Reference words after the number, and Chinese ones before it.
_REF_AFTER = {"AGL": "AGL", "ABOVE GROUND": "AGL", "ABOVE GROUND LEVEL": "AGL",
              "AMSL": "AMSL", "MSL": "AMSL", "ABOVE SEA LEVEL": "AMSL", "ABOVE MEAN SEA LEVEL": "AMSL"}
_REF_BEFORE = re.compile(r"^(真高|相对高度|海拔高度|海拔)")
_SURFACE = {"SFC", "GND", "SURFACE", "GROUND", "GROUND LEVEL", "地面"}
_UNLIMITED = {"UNL", "UNLIMITED", "无限", "无限制", "不限"}
# Words that say "at most" around a ceiling: MAX HGT 500FT AGL, HGT UP TO 750FT AGL, 真高120米以下.
_LEAD = re.compile(r"^(?:(?:MAX JIB|MAX(?:IMUM)?|HGT|HEIGHT|ALT(?:ITUDE)?|UP TO|BELOW"
                   r"|限高|最高|高度|不超过|不高于) ?)+")
_TAIL = re.compile(r"(?:及以下|以下|以内)$")
_AT_MOST = re.compile(r"^(?:MAX(?:IMUM)?|UP TO|BELOW)\b|^(?:限高|最高|不超过|不高于)|(?:及以下|以下|以内)$")


def states_a_maximum(text: str) -> bool:
    """Whether a limit piece says "at most" (a ceiling's wording: BELOW 400FT, 真高120米以下)."""
    return _AT_MOST.search(_normal(text)) is not None


def read_radius(text: str) -> float:
    """A radius piece ('0.2NM', '半径500米', 'radius of 3 kilometres') -> metres (> 0)."""
    s = _normal(text)
    s = re.sub(r"^(?:WI(?:THIN)? )?(?:A )?(?:(?:RADIUS(?: OF)?|半径(?:为)?) ?)?", "", s)
    s = re.sub(r" ?(?:RADIUS|范围内|范围)$", "", s)
    m = _QUANTITY.fullmatch(s)
    if m is None and re.search(r"\bMILES?\b", s):
        raise ValueError(f"cannot read {text!r} as a radius: 'mile' alone may be statute or nautical; "
                         "only NM, nautical miles, SM or statute miles are read")
    if m is None:
        raise ValueError(f"cannot read {text!r} as a radius: expected a number and a unit "
                         "(NM, SM, KM, M, FT, 海里, 公里, 米), e.g. '0.2NM' or '半径500米'")
    metres = _height(m[1], m[2]) * _UNIT[m[2]]
    if metres < 1:   # (and an exported footprint's corners, to 7 decimals, would fall together)
        raise ValueError(f"cannot read {text!r} as a radius: a zone's radius is at least a metre")
    return metres


def read_limit(text: str, default_ref: str | None = None) -> tuple[float | None, str | None]:
    """A vertical limit piece -> (metres, reference).

    The reference is 'AGL', 'AMSL' or 'STD' (flight levels); SFC/GND is (0.0, 'AGL') and
    UNL is (None, None). A height that states no reference ('120米', '3000FT') takes
    ``default_ref``, which is None unless the caller knows the notice's convention.
    """
    if default_ref not in (None, "AGL", "AMSL", "STD"):
        raise ValueError(f"default_ref must be 'AGL', 'AMSL', 'STD' or None, got {default_ref!r}")
    s = _normal(text)
    if s in _SURFACE:
        return 0.0, "AGL"
    if s in _UNLIMITED:
        return None, None
    if m := re.fullmatch(r"FL ?(\d{1,3})", s):
        return int(m[1]) * 100 * FT_M, "STD"
    s = _TAIL.sub("", _LEAD.sub("", s)).strip()
    ref = None
    if m := _REF_BEFORE.match(s):
        ref, s = ("AGL" if m[1] in ("真高", "相对高度") else "AMSL"), _LEAD.sub("", s[m.end():]).strip()
    m = _HEIGHT.fullmatch(s)
    if m is None or (m[3] is not None and m[3] not in _REF_AFTER):
        raise ValueError(f"cannot read {text!r} as a vertical limit: expected SFC, GND, UNL, FLnnn, or a height "
                         "with FT, M or KM and a reference (AGL, AMSL, MSL), e.g. '2300FT AMSL' or '真高120米'")
    if m[3] is not None:
        if ref is not None and _REF_AFTER[m[3]] != ref:
            raise ValueError(f"cannot read {text!r} as a vertical limit: two different references")
        ref = _REF_AFTER[m[3]]
    return _height(m[1], m[2]) * _UNIT[m[2]], ref or default_ref


def _height(digits: str, unit: str) -> float:
    """A height's or radius's amount; in feet or metres '1.200' is a thousands separator (European
    notices write 1.200 FT for 1200 ft), since no limit or radius is stated to the thousandth of
    either."""
    if _UNIT[unit] < KM_M and re.fullmatch(r"[1-9]\d{0,2}(?:\.\d{3})+", digits):
        digits = digits.replace(".", "")
    return _amount(digits)


def _normal(text: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"a piece must be a string, got {text!r}")
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip().upper()


def _amount(digits: str) -> float:
    if re.fullmatch(r"\d+,\d{1,2}", digits):   # a decimal comma
        return float(digits.replace(",", "."))
    return float(digits.replace(",", "").replace(" ", ""))
