"""Regular expressions over JSON text: the pieces slot patterns are made of.

A string slot holds the *content* of a JSON string (between fixed quotes), so its pattern
is written over the escaped text: `CHAR` is one character of it, `SAFE` one character JSON
holds unescaped. `content_pattern` rewrites a user's `pattern` (over the unescaped string)
into that form; `FORMATS` are the string formats laid out as patterns; the digit counts
bound numbers without both bounds. Knows nothing of schemas, canvases or tokenizers.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

try:
    import re._parser as _sre  # Python 3.11+
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre

from .errors import SchemaError

DEFAULT_STRING_TOKENS = 24  # budget of a string without max_length
INT_DIGITS = 12             # digits of an integer not bounded on both sides
LISTED_MULTIPLES = 64       # an integer range holding at most this many multiples lists them
FLOAT_INT_DIGITS = 9        # integer digits of such a float
FLOAT_FRACTION_DIGITS = 6   # fraction digits of every float (about 0.1 m in degrees)

WIDE_REPEAT = 12            # a user's {m,n} wider than this is written {m,} (see content_pattern)
WIDE_CLASS_REPEAT = 2       # the same for a count of a class wider than printable ASCII
STRING_TOKENS_CAP = 128     # most tokens a string slot takes from max_length alone (max_tokens overrides)
COUNTED_LENGTH = 2048       # the longest length bound a slot's counter holds (a longer max: the check)

SAFE = r'[^"\\\x00-\x1f]'                       # a character JSON holds unescaped
CHAR = r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])'    # a character of JSON string content
_DATE = (r"[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
         r"|02-(?:0[1-9]|1[0-9]|2[0-9]))")   # leap years and year 0000: a format check
_CLOCK = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
_FRACTION = r"(?:\.[0-9]+)?"   # of a second, in a JSON Schema's times: the slot's budget bounds it
_OFFSET = r"(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_HEX = "[0-9a-fA-F]"
_N = "[0-9]{1,4}"
_DURATION = (f"P(?:(?:{_N}Y(?:{_N}M)?(?:{_N}D)?|{_N}M(?:{_N}D)?|{_N}D)(?:T(?:{_N}H(?:{_N}M)?(?:{_N}S)?|{_N}M(?:{_N}S)?|{_N}S))?"
             f"|T(?:{_N}H(?:{_N}M)?(?:{_N}S)?|{_N}M(?:{_N}S)?|{_N}S)|{_N}W)")
# No counted repeats here: outlines-core takes minutes over them (the slot's budget bounds the length,
# the final check the 63-character labels). The idn- and IRI forms take any letter past ASCII too.
_WIDE = r"[^\x00-\x7f]"
_LABEL, _IDN_LABEL = (f"{c}(?:(?:{c}|-)*{c})?" for c in ("[A-Za-z0-9]", f"(?:[A-Za-z0-9]|{_WIDE})"))
_HOST = f"(?:{_LABEL}\\.)*[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_IDN_HOST = f"(?:{_IDN_LABEL}\\.)*(?:[A-Za-z]|{_WIDE})(?:(?:[A-Za-z0-9-]|{_WIDE})*(?:[A-Za-z0-9]|{_WIDE}))?"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = f"{_OCTET}(?:\\.{_OCTET}){{3}}"
_H16 = "[0-9a-fA-F]{1,4}"
_LS32 = f"(?:{_H16}:{_H16}|{_IPV4})"   # the last 32 bits: two groups, or an IPv4 address (::ffff:192.0.2.1)


def _groups(n: int) -> str:
    return f"(?:{_H16}:){{{n}}}" if n else ""


# RFC 3986's IPv6address: all eight groups, or "::" standing for one or more zero groups
_IPV6 = "|".join([f"{_groups(6)}{_LS32}", f"::{_groups(5)}{_LS32}"]
                 + [f"(?:{_H16}(?::{_H16}){{0,{k}}})?::{_groups(4 - k)}{_LS32}" for k in range(5)]
                 + [f"(?:{_H16}(?::{_H16}){{0,4}})?::{_H16}", f"(?:{_H16}(?::{_H16}){{0,5}})?::"])


def _uri(wide: bool) -> tuple[str, str]:
    """RFC 3986's URI and URI reference (RFC 3987's IRI and IRI reference where `wide`):
    userinfo, a host of any registered name (IPv4 and empty too) or an IP literal (its
    hex groups the final check's), a port."""
    extra = f"|{_WIDE}" if wide else ""
    unreserved = f"[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{{2}}{extra}"
    p, nc = f"(?:{unreserved}|[:@])", f"(?:{unreserved}|@)"   # a path character; one of a first segment's
    authority = f"(?:(?:{unreserved}|:)*@)?(?:\\[[0-9A-Fa-f:.]+\\]|(?:{unreserved})*)(?::[0-9]*)?"
    path = f"//{authority}(?:/{p}*)*|/(?:{p}+(?:/{p}*)*)?"   # with an authority, or absolute
    scheme, tail = "[A-Za-z][A-Za-z0-9+.-]*:", f"(?:\\?(?:{p}|[/?])*)?(?:#(?:{p}|[/?])*)?"
    return (f"{scheme}(?:{path}|{p}+(?:/{p}*)*)?{tail}",
            f"(?:(?:{scheme})?(?:{path})?|{scheme}{p}+(?:/{p}*)*|{nc}+(?:/{p}*)*){tail}")


(_URI, _URI_REFERENCE), (_IRI, _IRI_REFERENCE) = _uri(False), _uri(True)
_EMAIL = f"[A-Za-z0-9_%+-]+(?:\\.[A-Za-z0-9_%+-]+)*@{_HOST}"
_IDN_EMAIL = f"(?:[A-Za-z0-9_%+-]|{_WIDE})+(?:\\.(?:[A-Za-z0-9_%+-]|{_WIDE})+)*@{_IDN_HOST}"
_UUID = f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"
_NET4, _NET6 = f"{_IPV4}(?:/(?:3[0-2]|[12]?[0-9]))?", f"(?:{_IPV6})(?:/(?:12[0-8]|1[01][0-9]|[1-9]?[0-9]))?"
_POINTER = r'(?:/(?:[^"\\\x00-\x1f~/]|\\["\\bfnrt]|~[01])*)*'   # RFC 6901, as JSON string content
_NETWORKS = {"ipv4": (_NET4, 18), "ipv6": (_NET6, 49), "ipvany": (f"{_NET4}|{_NET6}", 49)}
# format -> (content regex, longest text): JSON Schema's formats and, for pydantic models, pydantic's
# own as it validates them (UUID4: its version and RFC 4122's variant; IPvAnyAddress; a network,
# whose zero host bits are the final check's; AwareDatetime: model_schema.py). Pydantic's
# date-time and time may omit the offset (it reads both); JSON Schema's (RFC 3339) carry one, may
# hold a second's fraction and a lower-case t and z: STRICT_FORMATS, for JSON Schemas. (A model's
# times are laid out as the shipped model was trained on them: whole seconds.)
_STANDARD = {"date": (_DATE, 10), "uuid": (_UUID, 36), "duration": (_DURATION, 24), "email": (_EMAIL, 80),
             "hostname": (_HOST, 120), "ipv4": (_IPV4, 15), "ipv6": (_IPV6, 45), "uri": (_URI, 120),
             "uri-reference": (_URI_REFERENCE, 120), "iri": (_IRI, 120),
             "iri-reference": (_IRI_REFERENCE, 120), "idn-hostname": (_IDN_HOST, 120),
             "idn-email": (_IDN_EMAIL, 80), "json-pointer": (_POINTER, 120),
             "relative-json-pointer": (f"(?:0|[1-9][0-9]*)(?:#|{_POINTER})", 120)}
FORMATS = {**_STANDARD, "time": (f"{_CLOCK}{_OFFSET}?", 14), "date-time": (f"{_DATE}T{_CLOCK}{_OFFSET}?", 25),
           "date-time-aware": (f"{_DATE}T{_CLOCK}{_OFFSET}", 25), "date-time-naive": (f"{_DATE}T{_CLOCK}", 19),
           "ipvanyaddress": (f"{_IPV4}|{_IPV6}", 45),
           **{f"{v}{kind}": net for v, net in _NETWORKS.items() for kind in ("network", "interface")},
           **{f"uuid{v}": (f"{_HEX}{{8}}-{_HEX}{{4}}-{v}{_HEX}{{3}}-[89abAB]{_HEX}{{3}}-{_HEX}{{12}}", 36)
              for v in (1, 3, 4, 5, 6, 7, 8)}}
_LOWER_OFFSET = _OFFSET.replace("Z", "[Zz]")   # RFC 3339 5.6: t and z may be lower case
STRICT_FORMATS = {**_STANDARD, "time": (f"{_CLOCK}{_FRACTION}{_LOWER_OFFSET}", 24),
                  "date-time": (f"{_DATE}[Tt]{_CLOCK}{_FRACTION}{_LOWER_OFFSET}", 35)}
# A pydantic time copied from the text is taken as pydantic reads it, whole: minutes without seconds,
# a fraction, a space or lower-case t, an offset without its colon or a lower-case z (the trained
# layout above had stopped a copy at the fraction and lost its Z: a naive time).
_HM = r"(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]+)?)?"
_WIDE_OFFSET = r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):?[0-5][0-9])"
COPIED_TIMES = {"time": (f"{_HM}{_WIDE_OFFSET}?", 24), "date-time": (f"{_DATE}[Tt ]{_HM}{_WIDE_OFFSET}?", 35),
                "date-time-aware": (f"{_DATE}[Tt ]{_HM}{_WIDE_OFFSET}", 35),
                "date-time-naive": (f"{_DATE}[Tt ]{_HM}", 29)}
NO_FORMATS = {"binary": "bytes cannot be laid out; use str"}
CALENDAR_FORMATS = ("date", "date-time", "date-time-aware", "date-time-naive")   # a real date: a check


def string_content(s: dict, path: str, strict: bool = True, default_tokens: int = DEFAULT_STRING_TOKENS,
                   quoted: bool = False, letter_tokens: int = 1, copied: bool = False
                   ) -> tuple[str, int, tuple | None, list[tuple], str | None]:
    """A string schema's slot: (content regex, tokens its longest value takes, (min, max) length for
    the automaton's counter or None, [(check op, bound)], the format's content regex where a
    `pattern` stands beside a known format, else None). The user's pattern always holds; beside a
    format the automaton runs both regexes at once; an unknown format is an annotation. `quoted`:
    the regex stands between quotes (a nullable string's, one in a value's expression).
    `letter_tokens`: tokens a letter of the text may take (vocab.letter_tokens), which a free
    string's max_length counts; a pattern's or a format's characters count one each. `copied`:
    a verbatim field's, whose pydantic times are COPIED_TIMES."""
    fmt, lo, hi, pattern = s.get("format"), s.get("minLength", 0), s.get("maxLength"), s.get("pattern")
    pattern = pattern if pattern is None else anchored_once(pattern)
    if pattern is not None and (least := least_width(pattern)) > COUNTED_LENGTH:   # (before any automaton of it)
        raise SchemaError(path, f"its pattern asks for at least {least} characters, more than the {COUNTED_LENGTH} a "
                                "string slot is laid out for; lower the pattern's repeat counts")
    if pattern is not None and (run := one_run(pattern)):   # its count is a length bound: the counter's
        pattern, lo, hi = f"^{run[0]}*$", max(lo, run[1]), run[2] if hi is None else min(hi, run[2])
    formats = STRICT_FORMATS if strict else {**FORMATS, **COPIED_TIMES} if copied else FORMATS
    if fmt in NO_FORMATS and not strict:   # a pydantic bytes field; in a JSON Schema, an annotation
        raise SchemaError(path, NO_FORMATS[fmt])
    if hi is not None and hi < lo:
        raise SchemaError(path, f"min_length {lo} exceeds max_length {hi}: no string satisfies both; fix the bounds")
    checks = [("format", fmt)] * (fmt in CALENDAR_FORMATS)
    also = None
    if fmt in formats and pattern is None:   # its regex, the length bounds held by the counter
        content, size = formats[fmt]
        size, length = min(size, hi or size), (lo, hi) if lo or hi is not None else None
    else:
        if pattern is not None and not regular(pattern):   # the automaton holds a looser one; the check the rest
            checks.append(("pattern", pattern))
            pattern = loosened(pattern)
        content = content_pattern(pattern, path, quoted) if pattern is not None else CHAR + "*"
        free = letter_tokens if pattern is None else 1
        size = max(hi * free, 1) if hi is not None else max(default_tokens, lo * free)   # (a pad at least)
        length = (lo, hi) if lo or hi is not None else None
        if pattern is not None and (width := plain_width(pattern)) is not None:
            size = max(min(size, width), 1)  # no value of the pattern is longer
            if any(int(m[2]) - int(m[1]) > WIDE_REPEAT for m in _COUNTED.finditer(pattern)):
                length = (lo, width if hi is None else min(hi, width))   # the counter bounds loosened repeats
        if fmt in formats:
            also, longest = formats[fmt]
            size = min(size, longest)
    checks += [("min_length", lo)] * (lo > 0) + [("max_length", hi)] * (hi is not None)
    return content, size, length, checks, also


def number_bounds(s: dict) -> tuple:
    """A number schema's (minimum, maximum, exclusiveMinimum, exclusiveMaximum), each None where
    absent or no bound (a maximum of Infinity), draft 4's boolean exclusive bounds read as the
    later drafts' numbers."""
    lo, hi, xlo, xhi = (s.get(k) for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"))
    if isinstance(xlo, bool):   # draft 4 spelling
        lo, xlo = (None, lo) if xlo else (lo, None)
    if isinstance(xhi, bool):
        hi, xhi = (None, hi) if xhi else (hi, None)
    lo, xlo = (None if b == -math.inf else b for b in (lo, xlo))
    hi, xhi = (None if b == math.inf else b for b in (hi, xhi))
    return lo, hi, xlo, xhi


def exact(x) -> Fraction:
    """A JSON number as the decimal it is written as (0.1 a tenth, not the nearest binary float)."""
    return Fraction(str(x))


def exact_bounds(s: dict) -> tuple:
    """number_bounds as exact decimals (Fractions), each None where absent; the bounds finite."""
    return tuple(None if b is None else exact(b) for b in number_bounds(s))


def number_pattern(s: dict, integer: bool) -> tuple[str, int, list[tuple]]:
    """A number schema's slot: (regex, longest text, [(check op, bound)]): digits enough for its
    bounds, a sign only where a negative value is allowed, fractions of FLOAT_FRACTION_DIGITS, or
    of k where multipleOf is 10**-k (0.01: cents), with no trailing zero: an integral number is
    written as an integer, so no oneOf of an integer and a number reads it as both."""
    lo, hi, xlo, xhi = number_bounds(s)
    checks = [(op, b) for op, b in (("ge", lo), ("gt", xlo), ("le", hi), ("lt", xhi)) if b is not None]
    checks += [("multiple_of", s["multipleOf"])] if s.get("multipleOf") else []
    low, high = (lo if lo is not None else xlo), (hi if hi is not None else xhi)
    sign = not ((lo is not None and lo >= 0) or (xlo is not None and xlo >= -integer))
    if low is not None and high is not None:
        digits = len(str(int(max(abs(low), abs(high)))))
    elif high is not None and not sign:
        digits = len(str(int(abs(high))))
    else:   # one side open: the default, or more where the bound itself is longer (1e12)
        bound = abs(low if low is not None else high if high is not None else 0)
        digits = max(INT_DIGITS if integer else FLOAT_INT_DIGITS, len(str(int(bound))) + 1)
    # past INT_DIGITS the digits go uncounted (outlines-core's index time grows exponentially with
    # the count: 6 s at 20); the budget bounds them, the bound checks the value
    counted = f"{{0,{digits - 1}}}" if digits <= INT_DIGITS else "*"
    pattern = "-?" * sign + (f"(?:0|[1-9][0-9]{counted})" if digits > 1 else "[0-9]")
    if integer and low is not None and high is not None and digits <= INT_DIGITS:
        pattern = integer_pattern(s)
    fraction = FLOAT_FRACTION_DIGITS
    if isinstance(m := s.get("multipleOf"), float) and 0 < m < 1 and math.isfinite(m):
        step = exact(m)
        fraction = next((k for k in range(1, fraction) if step == Fraction(1, 10 ** k)), fraction)
    size = sign + digits + (not integer) * (1 + fraction)
    pattern += "" if integer else rf"(?:\.[0-9]{{0,{fraction - 1}}}[1-9])?"   # 1.5, not 1.50; 120, not 120.0
    return pattern, size, checks


def integer_pattern(s: dict) -> str:
    """The integers a schema bounded on both sides allows, as a regex: its multiples of multipleOf
    listed where there are few (LISTED_MULTIPLES), else every integer of the range."""
    lo, hi, xlo, xhi = exact_bounds(s)
    a = max(([math.ceil(lo)] if lo is not None else []) + ([math.floor(xlo) + 1] if xlo is not None else []))
    b = min(([math.floor(hi)] if hi is not None else []) + ([math.ceil(xhi) - 1] if xhi is not None else []))
    if isinstance(m := s.get("multipleOf"), (int, float)) and m > 0:
        step = exact(m)
        first, last = math.ceil(a / step), math.floor(b / step)
        if last - first < LISTED_MULTIPLES:
            values = [v for k in range(first, last + 1) if (v := k * step).denominator == 1]
            return "(?:" + "|".join(str(v.numerator) for v in values) + ")"
    return integer_range(a, b)


def integer_range(a: int, b: int) -> str:
    """A regex of the integers a..b as JSON writes them (no leading zero, no -0)."""
    parts = ([f"-{_naturals(max(1, -b), -a)}"] if a < 0 else []) + ([_naturals(max(a, 0), b)] if b >= 0 else [])
    return parts[0] if len(parts) == 1 else f"(?:{'|'.join(parts)})"


def _naturals(lo: int, hi: int) -> str:
    """lo..hi (0 <= lo <= hi): a run of same-length digit ranges per number of digits."""
    runs = [(max(lo, 10 ** (n - 1) * (n > 1)), min(hi, 10 ** n - 1)) for n in range(len(str(lo)), len(str(hi)) + 1)]
    parts = [_same_length(str(x), str(y)) for x, y in runs if x <= y]
    return parts[0] if len(parts) == 1 else f"(?:{'|'.join(parts)})"


def _same_length(a: str, b: str) -> str:
    """The digit strings a..b, both of one length (inner digits may be 0)."""
    if a == b:
        return a
    if len(a) == 1:
        return f"[{a}-{b}]"
    if a[0] == b[0]:
        return a[0] + _same_length(a[1:], b[1:])
    rest = len(a) - 1
    whole_low, whole_high = a[1:] == "0" * rest, b[1:] == "9" * rest
    first, last = int(a[0]) + (not whole_low), int(b[0]) - (not whole_high)
    parts = [a[0] + _same_length(a[1:], "9" * rest)] * (not whole_low)
    lead = f"[{first}-{last}]" if first < last else str(first)
    parts += [f"{lead}[0-9]" + f"{{{rest}}}" * (rest > 1)] * (first <= last)
    parts += [b[0] + _same_length("0" * rest, b[1:])] * (not whole_high)
    return parts[0] if len(parts) == 1 else f"(?:{'|'.join(parts)})"


def literal(text: str) -> str:
    """`text` as a regex that matches it literally (only metacharacters escaped)."""
    return re.sub(r"([\\.+*?()|\[\]{}^$#&~-])", r"\\\1", text)


_ESCAPES = {'"': r'\\"', "\\": r"\\\\", "\n": r"\\n", "\r": r"\\r", "\t": r"\\t", "\b": r"\\b", "\f": r"\\f"}


def _atom(python: str, rust: str) -> str:
    """A character class as JSON text: the characters JSON holds unescaped, or the
    escape of each quote, backslash or control character the class matches."""
    try:
        escapes = [e for ch, e in _ESCAPES.items() if re.fullmatch(python, ch)]
    except re.error:
        escapes = []
    return f"(?:[{rust}&&{SAFE}]|{'|'.join(escapes)})" if escapes else f"[{rust}&&{SAFE}]"


def plain_width(pattern: str) -> int | None:
    """The longest match of `pattern` in characters, if it is bounded and every character it
    can match is printable ASCII other than a quote or backslash (one byte, no JSON escape),
    so that many tokens always suffice. None otherwise (an unanchored pattern is a search,
    so its values are unbounded)."""
    if (tree := _whole(pattern)) is None:
        return None
    width = tree.getwidth()[1]
    return width if width < _sre.MAXREPEAT and _plain(tree) else None


def least_width(pattern: str) -> int:
    """The fewest characters a text `pattern` matches has (0 where Python's re cannot read it)."""
    try:
        return _sre.parse(pattern).getwidth()[0]
    except (re.error, OverflowError, RecursionError):
        return 0


def _whole(pattern: str):
    """The parsed `pattern` where it is anchored at both ends (else None, and where unparsable)."""
    if not (pattern.startswith("^") and pattern.endswith("$") and not pattern.endswith("\\$")):
        return None
    try:
        return _sre.parse(pattern)
    except re.error:
        return None


def _plain(tree) -> bool:
    ok = lambda c: 32 <= c < 127 and chr(c) not in '"\\'  # noqa: E731
    for op, av in tree:
        if op is _sre.LITERAL:
            good = ok(av)
        elif op is _sre.IN:
            good = all(ok(a) if o is _sre.LITERAL else
                       (ok(a[0]) and ok(a[1]) and not (a[0] <= 34 <= a[1] or a[0] <= 92 <= a[1]))
                       if o is _sre.RANGE else o is _sre.CATEGORY and a is _sre.CATEGORY_DIGIT
                       for o, a in av)
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
            good = _plain(av[2])
        elif op is _sre.SUBPATTERN:
            good = _plain(av[-1])
        elif op is _sre.BRANCH:
            good = all(_plain(b) for b in av[1])
        else:
            good = op is _sre.AT  # anchors; anything else (., \w, negations) may not be plain
        if not good:
            return False
    return True


def regular(pattern: str) -> bool:
    """Whether a token automaton can hold `pattern`: no look-around, back-reference or word
    boundary, and anchors only at its two ends. (An unparsable one is left to the compile, which
    names it.)"""
    try:
        tree = _sre.parse(pattern)
    except re.error:
        return True
    if _bars_at_top(pattern) and any(op is _sre.AT for op, _ in tree):
        return False   # `^v?\d+|^dev-`: each anchor binds its branch (the parse shows one `^` before both)
    ends = {0: _sre.AT_BEGINNING, len(tree) - 1: _sre.AT_END}
    items = [(tree, k, op, av) for k, (op, av) in enumerate(tree)]
    while items:
        top, k, op, av = items.pop()
        if op in (_sre.ASSERT, _sre.ASSERT_NOT, _sre.GROUPREF, _sre.GROUPREF_EXISTS):
            return False
        if op is _sre.AT and not (top is tree and ends.get(k) is av):
            return False
        subs = [av[-1]] if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.SUBPATTERN) else \
            av[1] if op is _sre.BRANCH else []
        items += [(sub, j, o, a) for sub in subs for j, (o, a) in enumerate(sub)]
    return True


def _class_end(pattern: str, k: int) -> int:
    """The index of the `]` closing the character class opened at `k` (len(pattern): unclosed)."""
    k += 1 + (pattern[k + 1:k + 2] == "^")
    k += pattern[k:k + 1] == "]"   # a `]` first in the class is literal
    while k < len(pattern) and pattern[k] != "]":
        k += 2 if pattern[k] == "\\" else 1
    return k


def _bars_at_top(pattern: str) -> list[int]:
    """Where `pattern` has a `|` outside every group and character class."""
    depth, k, bars = 0, 0, []
    while k < len(pattern):
        c = pattern[k]
        if c == "[":
            k = _class_end(pattern, k)
        elif c in "()":
            depth += 1 if c == "(" else -1
        elif c == "|" and depth == 0:
            bars.append(k)
        k += 2 if c == "\\" else 1
    return bars


def anchored_once(pattern: str) -> str:
    """`^A$|^B$` as `^(?:A|B)$`, the same language with its anchors at its two ends, where an
    automaton holds it; any other pattern as it is."""
    cuts = [-1, *_bars_at_top(pattern), len(pattern)]
    branches = [pattern[a + 1:b] for a, b in zip(cuts, cuts[1:])]
    if len(branches) < 2 or not all(b.startswith("^") and b.endswith("$") and not b.endswith("\\$")
                                    for b in branches):
        return pattern
    return "^(?:" + "|".join(b[1:-1] for b in branches) + ")$"


def loosened(pattern: str) -> str:
    """`pattern` less what no automaton holds, so it matches at least what `pattern` does:
    look-arounds and word boundaries dropped, a back-reference as `.*`, anchors kept only at
    the two ends of a pattern with no alternation at its top."""
    try:
        branched = any(op is _sre.BRANCH for op, _ in _sre.parse(pattern))
    except re.error:
        return pattern
    out, depth, look, k = [], 0, [], 0   # look: depths of the look-arounds being dropped
    while k < len(pattern):
        c, step = pattern[k], 2 if pattern[k] == "\\" else 1
        if c == "[":   # a character class, whole
            step = _class_end(pattern, k) + 1 - k
        piece = pattern[k:k + step]
        if c == "(":
            depth += 1
            if re.match(r"\(\?<?[=!]", pattern[k:]):
                look.append(depth)
        elif c == ")":
            if look and look[-1] == depth:
                look.pop()
                piece = ""
            depth -= 1
        elif piece in ("\\b", "\\B") or c in "^$" and (branched or 0 < k < len(pattern) - 1):
            piece = ""
        elif c == "\\" and piece[1:].isdigit():
            piece = ".*"
        if not look:
            out.append(piece)
        k += step
    return "".join(out)


_COUNTED = re.compile(r"\{(\d+),(\d+)\}")
_COUNT = re.compile(r"\{(\d+)(?:,(\d+))?\}")   # {n} or {m,n}
_UNBOUNDED = re.compile(r"[*+]|,\}")   # a run of any length in a regex written so far
_RUN = re.compile(r"\^(.+)\{(\d+),(\d+)\}\$")


def one_run(pattern: str) -> tuple[str, int, int] | None:
    """(class, m, n) where `pattern` is one character class wider than printable ASCII counted m
    to n times (`^.{1,24}$`, `^[^,]{2,40}$`), else None. Its count is a length bound, held by the
    slot's counter: a DFA counting it before a closing quote grows exponentially with n (0.4 s
    at 12, none at 24 after six minutes)."""
    if not (m := _RUN.fullmatch(pattern)):
        return None
    try:
        items = _sre.parse(m[1])
    except re.error:
        return None
    one = len(items) == 1 and items[0][0] in (_sre.IN, _sre.ANY, _sre.NOT_LITERAL) and not _plain(items)
    return (m[1], int(m[2]), int(m[3])) if one else None


_CATEGORIES = {_sre.CATEGORY_DIGIT: r"\d", _sre.CATEGORY_NOT_DIGIT: r"\D", _sre.CATEGORY_SPACE: r"\s",
               _sre.CATEGORY_NOT_SPACE: r"\S", _sre.CATEGORY_WORD: r"\w", _sre.CATEGORY_NOT_WORD: r"\W"}


def delimited(pattern: str) -> bool:
    """Whether the anchored `pattern` has one character class (`[...]`, `.`, `\\w`), each time the
    whole of a repeat, and no character it writes as itself is one the class takes, as in
    winget's `^[^.]{1,32}(\\.[^.]{1,32}){1,3}$`: the literals then cut a text into its runs
    in one way only, and an automaton counts a run in as many states as its count. (Where a run
    may start at several places, as in `[a-z][a-z0-9_]{0,63}` or `[ab]{0,30}a[ab]{30}`, it needs
    states exponentially many.)"""
    if (tree := _whole(pattern)) is None:
        return False
    classes, literals = [], []

    def walk(items, alone: bool = False) -> bool:
        for op, av in items:
            if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
                if not walk(av[2], alone=len(av[2]) == 1):
                    return False
            elif op is _sre.SUBPATTERN:
                if not walk(av[-1]):
                    return False
            elif op is _sre.BRANCH:
                if not all(walk(b) for b in av[1]):
                    return False
            elif op is _sre.LITERAL:
                literals.append(chr(av))
            elif op in (_sre.IN, _sre.ANY, _sre.NOT_LITERAL) and alone:
                classes.append((op, av))
            elif op is not _sre.AT:
                return False
        return True
    return walk(tree) and all(item == classes[0] for item in classes) and \
        not any(_takes(op, av, c) for op, av in classes[:1] for c in literals)


def _takes(op, av, c: str) -> bool:
    """Whether the parsed class item (op, av) matches the character `c` (anything unknown: yes,
    so the count is loosened as before)."""
    if op is _sre.IN:
        negate = bool(av) and av[0][0] is _sre.NEGATE
        return any(_takes(o, a, c) for o, a in av[negate:]) != negate
    if op is _sre.CATEGORY:
        return av not in _CATEGORIES or re.fullmatch(_CATEGORIES[av], c) is not None
    if op is _sre.RANGE:
        return av[0] <= ord(c) <= av[1]
    if op in (_sre.LITERAL, _sre.NOT_LITERAL):
        return (ord(c) == av) == (op is _sre.LITERAL)
    return op is not _sre.ANY or c != "\n"


def _plain_atom(atom: str) -> bool:
    """Whether a piece of a pattern (a class, an escape, a group) matches only plain ASCII."""
    try:
        return _plain(_sre.parse(atom))
    except re.error:
        return False


# What Python's re reads in a pattern (and so jsonschema) and a token automaton's regexes do not,
# each with the way to write it that both read.
_PYTHON_ONLY = ((re.compile(r"\(\?[imsux]*[aL][aiLmsux]*\)"), "an inline flag (?a) or (?L), which only Python reads: "
                                                                 "leave it out"),
                (re.compile(r"(?<!\\)(?:\\\\)*\\[AZ]"), "\\A or \\Z: anchor it with ^ and $"),
                (re.compile(r"\(\?#"), "a comment (?#...): leave it out"),
                (re.compile(r"\(\?>"), "an atomic group (?>...): write a plain group (?:...)"),
                (re.compile(r"\(\?P="), "a named back-reference (?P=name): no grammar holds one; leave it out"),
                (re.compile(r"(?<!\\)\{,\d+\}"), "a count {,n}: write {0,n}"),
                (re.compile(r"\[:\^?[a-z]+:\]"), "a POSIX class [[:upper:]], which Python and JSON Schema read as "
                                                  "its letters: write a class such as [A-Z]"),
                (re.compile(r"(?<!\\)\[[^\]]*(?:&&|--|~~)"), "a class set operation (&&, --, ~~), which Python "
                                                              "reads as those characters: write the class out"))


def content_pattern(pattern: str, path: str, quoted: bool = False) -> str:
    """A `pattern` over the unescaped string, as a regex over the JSON text of the string.

    Each character class (`.`, `\\w`, `[^,]`, ...) becomes its characters JSON holds
    unescaped plus the escapes of the others; literal quotes, backslashes and
    `\\n \\r \\t` become their escapes. So whatever the slot writes matches the pattern
    once unescaped. An unanchored side gets `CHAR*`, as pydantic's pattern is a search.

    A counted repeat wider than WIDE_REPEAT (`[a-z][a-z0-9_]{0,63}`) is written `{m,}`:
    outlines-core's index takes time exponential in the width of such a repeat after an
    overlapping class (minutes at 63). A class wider than printable ASCII (`.`, `\\w`, `[^,]`)
    grows it far faster, each of its characters several bytes: its counts wider than
    WIDE_CLASS_REPEAT are loosened too (`^.{1,12}@.{1,12}$` took 32 s, 7 s at {2,8} before a
    quote). The slot's character counter then bounds a plain pattern's length (string_content),
    and the final check (validation.py) the rest. In a pattern whose literals cut its runs apart
    (`delimited`) the counts are kept, but for a `quoted` regex only where they count printable
    ASCII: before a closing quote, a count of a wider class (`[^.\\s]`) takes time exponential
    in its width too (6 s at 12). A count past WIDE_REPEAT after a run of any length (an
    unanchored start is one) takes time and memory exponential in it, even exact (`[ab]*a[ab]{16}`:
    45 s; unanchored `a[ab]{16}`: past 23 GB): it is written `*`.
    """
    for construct, fix in _PYTHON_ONLY:
        if construct.search(pattern):
            raise SchemaError(path, f"pattern {pattern!r} holds {fix}")
    if m := re.match(r"\(\?[imsux]+\)\^", pattern):   # (?i)^abc$: the flags after the anchor, where both read them
        pattern = "^" + pattern[:m.end() - 1] + pattern[m.end():]
    head, tail = pattern.startswith("^"), pattern.endswith("$") and not pattern.endswith("\\$")
    p, out, i = pattern[head:len(pattern) - tail], [], 0
    counted = delimited(pattern) and (not quoted or _plain(_whole(pattern)))
    opened, last = [], ""   # where each open group starts; the atom a count repeats
    while i < len(p):
        c, e, j = p[i], p[i + 1:i + 2], i + 2
        if c == "\\" and e == "d":  # ASCII digits: outlines-core's \d takes any Unicode digit
            out.append("[0-9]")
        elif c == "\\" and e in ("s", "S", "w", "W", "D", "p", "P"):
            j = (p.index("}", i) + 1 if p[i + 2:i + 3] == "{" else i + 3) if e in "pP" else j
            out.append(_atom(p[i:j], p[i:j]))
        elif c == "\\":   # (\< and \> are the characters to JSON Schema, word edges to the automaton's regexes)
            out.append({"n": r"\\n", "r": r"\\r", "t": r"\\t", '"': r'\\"', "\\": r"\\\\", "<": "<",
                        ">": ">"}.get(e, p[i:j]))
        elif c == "{" and (m := _COUNT.match(p, i)):
            lo, hi = int(m[1]), int(m[2] or m[1])
            if not counted and hi > WIDE_REPEAT and (not head or _UNBOUNDED.search("".join(out))):
                out.append("*")   # after a run of any length, even {lo,} takes states exponential in lo
            elif hi - lo > (_sre.MAXREPEAT if counted else WIDE_REPEAT if _plain_atom(last) else WIDE_CLASS_REPEAT):
                out.append(f"{{{lo},}}")
            else:
                out.append(m[0])
            j = m.end()
        elif c == "[":
            j = _class_end(p, i)
            if j >= len(p):
                raise SchemaError(path, f"pattern {pattern!r} has an unclosed character class; close it with ]")
            body = re.sub(r"(?<!\\)((?:\\\\)*)\[", r"\1\\[", p[i + 1:j])  # a `[` in a Python class is literal
            body = re.sub(r"(?<!\\)((?:\\\\)*)\\d", r"\g<1>0-9", body)      # ASCII digits, as above
            body = re.sub(r"(?<!\\)((?:\\\\)*)\\([<>])", r"\1\2", body)   # \< is <, as above
            out.append(_atom(p[i:j + 1], f"[{body}]"))
            j += 1
        else:
            out.append(_atom(".", SAFE) if c == "." else {'"': r'\\"'}.get(c, c))
            j = i + 1
            opened += [i] if c == "(" else []
        last = p[opened.pop():j] if c == ")" and opened else p[i:j]
        i = j
    return f"{'' if head else CHAR + '*'}(?:{''.join(out)}){'' if tail else CHAR + '*'}"
