"""Read a latitude, a longitude or a position, copied verbatim from a notice, into degrees.

The model copies a coordinate exactly as written; these functions turn the piece into
signed decimal degrees (south and west negative). Notations read, all seen in real
notices or named in the no-fly-zone issue:

- compact ICAO, hemisphere after or before: ``510718N``, ``5107N``, ``510718.5N``,
  ``N2609``, ``E11430``, pairs ``253000N1213000E``, ``N354800E0982500``, Q-line ``5502N00141W``;
- spaced groups, minutes and seconds of two digits: ``S05 59 00``, ``43 49 48 S``, ``E 094 23 00``;
- symbols: ``40°26'46"N``, ``40°26.767'N``, ``N 22°32′35″``;
- decimal degrees with a hemisphere (``31.2304N``) or a sign (``-122.42``); with a hemisphere
  after it or a degree mark, a decimal comma too (``51,5074N``, ``51,5074°``);
- Chinese: ``北纬22.5431度``, ``东经114度03分28秒``, ``北纬31度14分``;
- a line break inside a number where a notice wraps its line (``N40\\n4001``), lowercase,
  full-width digits and punctuation.

Compact forms are told apart by digit count (latitudes DD, DDMM, DDMMSS; longitudes DDD,
DDDMM, DDDMMSS; decimals belong to the last group), so a hemisphere letter is required
for them; a bare number is decimal degrees. Knows nothing of schemas, models or where a
piece came from; ``coordinate_pieces`` only lists candidates, for measuring.
"""

from __future__ import annotations

import re
import unicodedata

# Marks that mean degrees, minutes, seconds (and the minus sign), mapped before NFKC (which
# would turn º into 'o' and ″ into two primes).
_MARKS = str.maketrans({"º": "°", "˚": "°", "度": "°", "′": "'", "’": "'", "‘": "'", "´": "'", "分": "'",
                        "″": '"', "“": '"', "”": '"', "秒": '"', "−": "-"})
_CHINESE_HEMISPHERES = {"北纬": "N", "北緯": "N", "南纬": "S", "南緯": "S",
                        "东经": "E", "東經": "E", "東经": "E", "西经": "W", "西經": "W"}
_BETWEEN = " \t\r\n,;/、-–—"  # what may stand between the two halves of a position
_AXIS = {"N": "lat", "S": "lat", "E": "lon", "W": "lon"}
_LIMIT = {"lat": 90, "lon": 180, None: 180}

_SPLIT = re.compile(r"([NSEW]?)\s*([+-]?)\s*(.*?)\s*([NSEW]?)", re.DOTALL)
_NUMBER = r"\d+(?:\.\d+)?"
_SYMBOLS = re.compile(rf"({_NUMBER})\s*°\s*(?:({_NUMBER})\s*'\s*(?:({_NUMBER})\s*(?:\"|'')?)?)?")
_SPACED = re.compile(r"(\d{1,3}(?:\.\d+)?)\s+(\d{2}(?:\.\d+)?)(?:\s+(\d{2}(?:\.\d+)?))?")
_COMPACT = re.compile(r"(\d+)(\.\d+)?")
# (degree digits, minute digits, second digits) of each compact length, per axis
_COMPACT_GROUPS = {"lat": {1: (1,), 2: (2,), 4: (2, 2), 6: (2, 2, 2)},
                   "lon": {1: (1,), 2: (2,), 3: (3,), 5: (3, 2), 7: (3, 2, 2)}}


def read_coordinate(text: str, axis: str | None = None) -> float:
    """A latitude or longitude piece -> signed decimal degrees.

    ``axis`` ('lat' or 'lon') is what the caller expects; a hemisphere letter in the piece
    must agree with it. Raises ValueError naming the piece and the problem.
    """
    if axis not in (None, "lat", "lon"):
        raise ValueError(f"axis must be 'lat', 'lon' or None, got {axis!r}")
    s = re.sub(r"(?<=\d),(?=\d)", ".", _normal(text))  # a decimal comma: 51,5074N
    lead, sign, body, trail = _SPLIT.fullmatch(s).groups()
    if lead and trail:
        raise ValueError(f"cannot read {text!r} as a coordinate: two hemisphere letters ({lead}, {trail})")
    hemi = lead or trail
    if hemi and sign:
        raise ValueError(f"cannot read {text!r} as a coordinate: both a sign and a hemisphere letter")
    if hemi and axis and _AXIS[hemi] != axis:
        found = "latitude" if _AXIS[hemi] == "lat" else "longitude"
        raise ValueError(f"{text!r} is a {found} ({hemi}), expected a {axis}")
    axis = _AXIS[hemi] if hemi else axis
    groups = _groups(body, axis, hemi, text)
    value = _degrees(groups, text)
    if value > _LIMIT[axis]:
        raise ValueError(f"cannot read {text!r} as a coordinate: {value:.6f} degrees is beyond {_LIMIT[axis]}")
    return -value if hemi in ("S", "W") or sign == "-" else value


def read_position(text: str) -> tuple[float, float]:
    """A piece holding both a latitude and a longitude -> (lat, lon) in decimal degrees.

    With hemisphere letters the two may come in either order, joined or apart
    (``N2609E11430``, ``510718N 0021047W``, ``东经114.0579度，北纬22.5431度``); without
    them, two signed decimals are latitude then longitude (``22.5431, 114.0579``).
    """
    s = _normal(text)
    letters = [m for m in re.finditer(r"[NSEW]", s)]
    if not letters:
        m = re.fullmatch(r"([+-]?[\d.]+)\s*°?\s*(?:[,;/]\s*|\s+)([+-]?[\d.]+)\s*°?", s)
        if m is None:
            raise ValueError(f"cannot read {text!r} as a position: expected two coordinates with hemisphere "
                             "letters, or 'lat, lon' in signed decimal degrees")
        return read_coordinate(m[1], "lat"), read_coordinate(m[2], "lon")
    if len(letters) != 2:
        raise ValueError(f"cannot read {text!r} as a position: expected two hemisphere letters, found {len(letters)}")
    if s[0] in _AXIS:  # hemisphere first: N2609E11430 -> cut before the second letter
        cut = letters[1].start()
    elif s[-1] in _AXIS:  # hemisphere last: 253000N1213000E -> cut after the first letter
        cut = letters[0].end()
    else:
        raise ValueError(f"cannot read {text!r} as a position: it neither starts nor ends with a hemisphere letter")
    parts = s[:cut].rstrip(_BETWEEN), s[cut:].lstrip(_BETWEEN)
    axes = [_AXIS[m[0]] for m in letters]
    if axes[0] == axes[1]:
        both = "latitudes" if axes[0] == "lat" else "longitudes"
        raise ValueError(f"cannot read {text!r} as a position: both coordinates are {both}")
    values = dict(zip(axes, (read_coordinate(p) for p in parts)))
    return values["lat"], values["lon"]


def _normal(text: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"a coordinate piece must be a string, got {text!r}")
    s = unicodedata.normalize("NFKC", text.translate(_MARKS)).upper().strip()
    for word, letter in _CHINESE_HEMISPHERES.items():
        s = s.replace(word, letter)
    return s


def _groups(body: str, axis: str | None, hemi: str, text: str) -> list[str]:
    """The written degree, minute and second groups of a coordinate without its hemisphere."""
    if not body:
        raise ValueError(f"cannot read {text!r} as a coordinate: no number")
    if m := _SYMBOLS.fullmatch(body):
        return [g for g in m.groups() if g is not None]
    if m := _SPACED.fullmatch(body):
        if not hemi:
            raise ValueError(f"cannot read {text!r} as a coordinate: spaced degrees-minutes-seconds need a "
                             "hemisphere letter (N, S, E, W)")
        return [g for g in m.groups() if g is not None]
    m = _COMPACT.fullmatch(re.sub(r"\s+", "", body))  # a wrapped line may split the digits, once
    if m is None or len(re.findall(r"\s+", body)) > 1:
        raise ValueError(f"cannot read {text!r} as a coordinate: {body!r} is not a number in a known notation")
    digits, fraction = m[1], m[2] or ""
    if not hemi:
        if len(digits) > 3:
            raise ValueError(f"cannot read {text!r} as a coordinate: compact degrees-minutes-seconds need a "
                             "hemisphere letter (N, S, E, W); a bare number is read as decimal degrees")
        return [digits + fraction]
    widths = _COMPACT_GROUPS[axis].get(len(digits))
    if widths is None:
        raise ValueError(f"cannot read {text!r} as a coordinate: {len(digits)} digits fit no {axis} form "
                         f"({'DD, DDMM or DDMMSS' if axis == 'lat' else 'DDD, DDDMM or DDDMMSS'})")
    groups, at = [], 0
    for w in widths:
        groups.append(digits[at : at + w])
        at += w
    groups[-1] += fraction
    return groups


def _degrees(groups: list[str], text: str) -> float:
    """[degrees, minutes?, seconds?] as written -> degrees; only the last group may carry decimals."""
    if any("." in g for g in groups[:-1]):
        raise ValueError(f"cannot read {text!r} as a coordinate: only the last group may have decimals")
    numbers = [float(g) for g in groups]
    if any(n >= 60 for n in numbers[1:]):
        raise ValueError(f"cannot read {text!r} as a coordinate: minutes and seconds must be below 60")
    return sum(n / 60**i for i, n in enumerate(numbers))


# -- finding candidate pieces (for measuring) --------------------------------------------------
_NUM = r"\d+(?:[ \t]*\r?\n[ \t]*\d+)*(?:\.\d+)?"  # digits, perhaps wrapped across a line
_SPACED_GROUPS = r"\d{1,3}(?:[ \t]+\d{2}){1,2}(?:\.\d+)?"
_SYM = (r"\d{1,3}(?:\.\d+)?\s*[°º˚度](?:\s*\d{1,2}(?:\.\d+)?\s*['′’分]"
        r"(?:\s*\d{1,2}(?:\.\d+)?\s*(?:[\"″”秒]|'')?)?)?")
_BODY = rf"(?:{_SYM}|{_SPACED_GROUPS}|{_NUM})"
_BODY_COMMA = rf"(?:{_SYM}|{_SPACED_GROUPS}|{_NUM}|\d+,\d+)"   # a decimal comma before a hemisphere: 51,5074N
_PIECE = re.compile(
    rf"(?:{'|'.join(_CHINESE_HEMISPHERES)})\s*{_BODY}"  # 北纬22.5431度
    rf"|(?<![A-Z])[NSEW][ \t]?{_BODY}"  # N2609, E 094 23 00
    # 510718N; not inside a word (EGD809N) but right after a latitude (253000N1213000E)
    rf"|(?<![\d.])(?<![A-DF-MO-RT-VX-Z]){_BODY_COMMA}[ \t]?[NSEW](?![A-Z])"
    r"|(?<![\d.])[+-]?\d{1,3}\.\d{4,}(?![\d.])",  # bare decimal degrees with 4+ decimals
    re.IGNORECASE,
)


def coordinate_pieces(text: str) -> list[tuple[int, int]]:
    """(start, end) of every piece of ``text`` that reads as one latitude or longitude."""
    spans = []
    for m in _PIECE.finditer(text):
        try:
            read_coordinate(m[0])
        except ValueError:
            continue
        spans.append(m.span())
    return spans
