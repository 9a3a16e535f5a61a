"""Whole JSON values as regular expressions: the slot of a part no fixed layout fits.

An untagged union (int-or-string, an object or a list), a value of any type, or an
open-ended part nested inside one is laid out as ONE slot holding its whole JSON text,
under a regex that accepts every value of the subschema (within a nesting depth): the
model's first token then picks the variant (`"`, a digit, `{`, ...). Objects are written as
the canvas writes them (`{"a": 1, "b": [2, 3]}`): every property in schema order, then any
extra entries. Beside a oneOf's regex go those of its members that a regex holds exactly
(`told`), for an automaton of texts at most one of them matches (constraints.py). The regex
is the layout's guide; the final check against the original schema (api.py) enforces what it
cannot (oneOf exclusivity between other members, uniqueness, conditionals, maxItems and
longer maxLengths, which repair.py cuts to, and everything of a slot whose exact regex is too
large to compile quickly: `LONGEST`).
Knows nothing of canvases, tokenizers or models.
"""

from __future__ import annotations

import json

from .errors import SchemaError
from .patterns import CHAR, literal, number_pattern, string_content
from .schema_refs import Unsatisfiable

ANY_DEPTH = 2       # nesting of arrays and objects a whole value may have (any(3) compiles in a minute)
SHORT = 6           # the longest maxLength a whole value's regex counts (0.02 s to compile; 12: 0.8 s)
KEY = f'"{CHAR}+"'   # (a counted repeat of a Unicode class takes outlines-core minutes to compile)
LONGEST = 1500      # characters of a slot's regex past which it is cut shallower (`slot`): the token DFA's
                    # build time grows with its states (a 9,000-character union of job shapes took minutes;
                    # at 3,000 a cloudify schema took past 90 s); the final check holds what a looser one lets by


class _Cut(Exception):
    """The nesting cut leaves no valid value here: an object with required keys, a list with minItems."""


_INEXACT = {"pattern", "format", "minLength", "maxLength", "maximum", "exclusiveMaximum", "exclusiveMinimum",
            "multipleOf", "not", "if", "x-union"}   # what a scalar's regex here does not hold


def _exact(s: dict) -> bool:
    """Whether the regex `of` writes for `s` (resolved) matches exactly its values' JSON texts."""
    if "enum" in s:
        return True
    return s.get("type") in ("null", "boolean", "string", "integer", "number") and not _INEXACT & set(s) \
        and s.get("minimum", 0) == 0


class ValueRegex:
    """Regexes of whole values over one Document (schema_refs.py)."""

    def __init__(self, document, strict_formats: bool = True):
        self.doc, self.strict = document, strict_formats

    def any(self, depth: int = ANY_DEPTH, only: str | None = None) -> str:
        """Any JSON value nested at most `depth` deep; `only` "array" or "object": any such one."""
        scalar = f'null|true|false|"{CHAR}*"|-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?'   # the budget bounds them
        if depth <= 0:
            return scalar
        inner = self.any(depth - 1)
        kinds = {"array": f"\\[(?:(?:{inner})(?:, (?:{inner}))*)?\\]",
                 "object": f"\\{{(?:{KEY}: (?:{inner})(?:, {KEY}: (?:{inner}))*)?\\}}"}
        return kinds[only] if only else "|".join([scalar, *kinds.values()])

    def slot(self, s: dict, path: str, base: str = "") -> str:
        """The regex of a slot holding one whole value of `s`, the first of these small enough to
        compile quickly: exact, to the deepest nesting that is; any value of the types `s` allows,
        its scalars exact (`loose`: an avro schema's type name, or any object or list); any value."""
        for depth in range(ANY_DEPTH, 0, -1):
            try:
                exact = self._of(s, path, base, depth, top=True)
            except _Cut:
                break   # a shallower cut leaves even less
            if len(exact) <= LONGEST:
                return exact
        # any value of its types, its scalars exact: no larger than any value's regex but for the scalars,
        # whose digits go uncounted as there (counted, hayson's root took 38 s to compile, not 0.6)
        shallow, anything = self._of(s, path, base, 0, loose=True), self.any()
        return shallow if len(shallow) <= len(anything) + LONGEST else anything

    def told(self, s: dict, path: str, base: str = "") -> tuple[str, ...]:
        """For a oneOf, the regexes of the members whose values a regex holds exactly (scalars: no
        pattern, format, length or bound but a minimum of 0), digits uncounted, where two or more:
        a value may match at most one of them (constraints.py). Else ()."""
        if s.get("x-union") != "oneOf":
            return ()
        out = []
        for m in self.doc.members(s):
            try:
                r = self.doc.resolve(m, path, base)
            except Unsatisfiable:
                continue
            if _exact(r.schema):
                out.append(self.of(m, path, base, 0))
        return tuple(out) if len(out) > 1 else ()

    def of(self, s, path: str, base: str = "", depth: int = ANY_DEPTH, top: bool = False, loose: bool = False) -> str:
        """A regex of the JSON text of every value of `s`, nesting cut at `depth` (`loose`: at the
        cut any list or object to ANY_DEPTH, else an empty one)."""
        r = self.doc.resolve(s, path, base)
        core = self._of(r.schema, path, r.base, depth, top, loose)
        return f"null|(?:{core})" if r.nullable and core != "null" else core

    def _container(self, s, path: str, base: str) -> bool:
        """Whether `s` (unresolved) is an object's or a list's schema."""
        try:
            r = self.doc.resolve(s, path, base).schema
        except (SchemaError, Unsatisfiable):
            return False
        return r.get("type") in ("object", "array") or "properties" in r or "items" in r

    def _of(self, s: dict, path: str, base: str, depth: int, top: bool = False, loose: bool = False) -> str:
        """`of` for `s` resolved; `top`: the slot's value itself or a member of its union, whose
        digits are counted as a number slot's (a float's from 15 integer digits on is integral)."""
        if s.get("x-union"):   # each member with what the union's schema says beside it
            members, cut = [], False
            # a member's digits are counted only among scalars: beside an object's regex, a count
            # took outlines-core 30 s to index (type [object, integer]), uncounted 0.1 s
            top = top and not any(self._container(m, path, base) for m in self.doc.members(s))
            for m in self.doc.members(s):
                try:
                    members.append(self.of(m, path, base, depth, top, loose))
                except Unsatisfiable:
                    continue   # a member no value beside the rest satisfies
                except _Cut:
                    cut = True
            if cut and not members:
                raise _Cut
            if not members:
                raise Unsatisfiable(path, f"no member of the {s['x-union']} fits what the schema says beside "
                                          "it: no value is valid; fix the members or the schema around them")
            return "|".join(f"(?:{m})" for m in dict.fromkeys(members))   # once each (loose: any object)
        if "enum" in s:
            return "|".join(literal(json.dumps(v, ensure_ascii=False)) for v in s["enum"])
        t = s.get("type")
        if t is None and "properties" in s:
            t = "object"
        if t == "null":
            return "null"
        if t == "boolean":
            return "true|false"
        if t in ("integer", "number"):   # nested digits uncounted: counted repeats multiply a DFA's states
            pattern = number_pattern(s, t == "integer")[0]
            if top:
                return pattern
            sign = pattern.startswith("-?")
            return "-?" * sign + "(?:0|[1-9][0-9]*)" + ("" if t == "integer" else r"(?:\.[0-9]+)?")
        if t == "string":
            content, _, length, _, _ = string_content(s, path, self.strict, quoted=True)   # a format: the final check
            if content == f"{CHAR}*" and length and length[1] is not None and length[1] <= SHORT:
                content = f"{CHAR}{{{length[0]},{length[1]}}}"   # a short one counted (no slot counter here)
            return f'"(?:{content})"'
        if t is None or depth <= 0 and t not in ("array", "object"):
            return self.any() if loose else self.any(max(depth - 1, 0))
        if depth <= 0 and loose:
            return self.any(only=t)
        if depth <= 0:   # the nesting cut: still a list or an object, empty (more compiles for minutes)
            if s.get("minItems", 0) if t == "array" else s.get("required") or s.get("minProperties", 0):
                raise _Cut   # where it may not be empty, no value: a list item, an optional property left out
            return "\\[\\]" if t == "array" else "\\{\\}"
        if t == "array":
            return self.array(s, path, base, depth)
        if t == "object":
            return self.object(s, path, base, depth)
        raise SchemaError(path, f"type {t!r} is not a JSON Schema type; use string, number, integer, boolean, "
                                "object, array or null")

    def array(self, s: dict, path: str, base: str, depth: int) -> str:
        lo, hi = s.get("minItems", 0), s.get("maxItems")
        tuple_items = isinstance(s.get("items"), list)   # drafts before 2020-12 write prefixItems so
        prefix = [self.of(p, f"{path}[{k}]", base, depth - 1)
                  for k, p in enumerate(s["items"] if tuple_items else s.get("prefixItems", []))]
        items = s.get("additionalItems", True) if tuple_items else s.get("items", True)
        try:
            rest = None if items is False else self.of(items, f"{path}[]", base, depth - 1)
        except _Cut:
            if lo > len(prefix):
                raise
            rest = None   # no item can be written this deep: the list ends with its prefix
        parts = [f"(?:{p})" for p in prefix]
        body = ", ".join(parts)
        if rest is not None:
            more_lo, more_hi = max(lo - len(parts), 0), None if hi is None else max(hi - len(parts), 0)
            if more_hi != 0:
                sep = ", " if parts else ""
                first = f"{sep}(?:{rest})"
                tail = f"(?:, (?:{rest})){{{max(more_lo - 1, 0)},}}"   # maxItems uncounted, as digits are
                body += f"(?:{first}{tail})" + ("" if more_lo else "?")
        return f"\\[{body}\\]" if parts or rest is None or lo else f"\\[(?:{body})?\\]"

    def object(self, s: dict, path: str, base: str, depth: int) -> str:
        props = s.get("properties", {})
        required = set(s.get("required", []))
        fields = []
        for k, v in props.items():
            try:
                value = self.of(v, f"{path}.{k}", base, depth - 1)
            except _Cut:
                if k in required:
                    raise
                continue   # an optional property with no value this deep is left out
            fields.append(f'{literal(json.dumps(k, ensure_ascii=False))}: (?:{value})')
        fields += [f'{literal(json.dumps(k, ensure_ascii=False))}: (?:{self.any(depth - 1)})'
                   for k in required if k not in props]
        extra = s.get("additionalProperties", {} if not props else False)
        entry = None
        if extra is not False and not s.get("patternProperties"):
            value = self.any(depth - 1) if extra in (True, {}) else self.of(extra, f"{path}{{}}", base, depth - 1)
            entry = f"{KEY}: (?:{value})"
        body = ", ".join(fields)
        if entry is None:
            return f"\\{{{body}\\}}"
        if fields:
            return f"\\{{{body}(?:, {entry})*\\}}"
        return f"\\{{(?:{entry}(?:, {entry})*)?\\}}"
