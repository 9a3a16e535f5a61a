"""Regular expressions over JSON text: the pieces slot patterns are made of.

A string slot holds the *content* of a JSON string (between fixed quotes), so its pattern
is written over the escaped text: `CHAR` is one character of it, `SAFE` one character JSON
holds unescaped. `content_pattern` rewrites a user's `pattern` (over the unescaped string)
into that form; `FORMATS` are the string formats laid out as patterns; the digit counts
bound numbers without both bounds. Knows nothing of schemas, canvases or tokenizers.
"""

from __future__ import annotations

import re

try:
    import re._parser as _sre  # Python 3.11+
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre

from .errors import SchemaError

DEFAULT_STRING_TOKENS = 24  # budget of a string without max_length
INT_DIGITS = 12             # digits of an integer not bounded on both sides
FLOAT_INT_DIGITS = 9        # integer digits of such a float
FLOAT_FRACTION_DIGITS = 6   # fraction digits of every float (about 0.1 m in degrees)

SAFE = r'[^"\\\x00-\x1f]'                       # a character JSON holds unescaped
CHAR = r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])'    # a character of JSON string content
_DATE = (r"[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
         r"|02-(?:0[1-9]|1[0-9]|2[0-9]))")   # leap years and year 0000: a format check
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])?"
_HEX = "[0-9a-fA-F]"
FORMATS = {  # format -> (content regex, longest text); whole seconds only
    "date": (_DATE, 10), "time": (_TIME, 14), "date-time": (f"{_DATE}T{_TIME}", 25),
    "uuid": (f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}", 36)}
NO_FORMATS = {"binary": "bytes cannot be laid out; use str",
               "duration": "timedelta cannot be laid out; use an int number of seconds"}


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
    if not (pattern.startswith("^") and pattern.endswith("$") and not pattern.endswith("\\$")):
        return None
    try:
        tree = _sre.parse(pattern)
    except re.error:
        return None
    width = tree.getwidth()[1]
    return width if width < _sre.MAXREPEAT and _plain(tree) else None


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


def content_pattern(pattern: str, path: str) -> str:
    """A `pattern` over the unescaped string, as a regex over the JSON text of the string.

    Each character class (`.`, `\\w`, `[^,]`, ...) becomes its characters JSON holds
    unescaped plus the escapes of the others; literal quotes, backslashes and
    `\\n \\r \\t` become their escapes. So whatever the slot writes matches the pattern
    once unescaped. An unanchored side gets `CHAR*`, as pydantic's pattern is a search.
    """
    head, tail = pattern.startswith("^"), pattern.endswith("$") and not pattern.endswith("\\$")
    p, out, i = pattern[head:len(pattern) - tail], [], 0
    while i < len(p):
        c, e, j = p[i], p[i + 1:i + 2], i + 2
        if c == "\\" and e == "d":  # ASCII digits: outlines-core's \d takes any Unicode digit
            out.append("[0-9]")
        elif c == "\\" and e in ("s", "S", "w", "W", "D", "p", "P"):
            j = (p.index("}", i) + 1 if p[i + 2:i + 3] == "{" else i + 3) if e in "pP" else j
            out.append(_atom(p[i:j], p[i:j]))
        elif c == "\\":
            out.append({"n": r"\\n", "r": r"\\r", "t": r"\\t", '"': r'\\"', "\\": r"\\\\"}.get(e, p[i:j]))
        elif c == "[":
            j = i + 1 + (p[i + 1:i + 2] == "^")
            j += p[j:j + 1] == "]"
            while j < len(p) and p[j] != "]":
                j += 2 if p[j] == "\\" else 1
            if j >= len(p):
                raise SchemaError(path, f"pattern {pattern!r} has an unclosed character class; close it with ]")
            body = re.sub(r"(?<!\\)((?:\\\\)*)\[", r"\1\\[", p[i + 1:j])  # a `[` in a Python class is literal
            body = re.sub(r"(?<!\\)((?:\\\\)*)\\d", r"\g<1>0-9", body)      # ASCII digits, as above
            out.append(_atom(p[i:j + 1], f"[{body}]"))
            j += 1
        else:
            out.append(_atom(".", SAFE) if c == "." else {'"': r'\\"'}.get(c, c))
            j = i + 1
        i = j
    return f"{'' if head else CHAR + '*'}(?:{''.join(out)}){'' if tail else CHAR + '*'}"
