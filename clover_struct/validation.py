"""The final check: an output validated against the user's own JSON Schema, as written.

The layout follows the schema as far as a canvas can (schema_walk.py); this check holds
what it cannot: oneOf exclusivity (but between plain scalars), uniqueItems, contains,
if/then/else, not, dependencies, a pattern beside a format, and every format, with the
`jsonschema` package (the draft of the schema's `$schema`, 2020-12 by default, formats
checked). A failing value becomes an ExtractionError with the path of the value, which
repair.py answers with the next-best values before it gives up. Knows nothing of canvases
or models.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any, Callable

from .errors import ExtractionError, SchemaError


class SchemaRejects(ExtractionError):
    """The final check's refusal; `keyword` is the JSON Schema keyword that failed and `rule`
    its value, for maxContains with the indices of the items that match, and `where` the
    failing value's location (keys and indices). repair.py answers some by keyword: a list's
    repeated items for uniqueItems, its extra matching ones for maxContains, a value searched
    again under a pattern the layout could not place for pattern, a string or list inside a
    whole value cut for maxLength and maxItems."""

    def __init__(self, path: str, reason: str, keyword: str = "", rule: Any = None, where: tuple = ()):
        super().__init__(path, reason)
        self.keyword, self.rule, self.where = keyword, rule, where

    def __reduce__(self):
        return type(self), (self.path, self.reason, self.keyword, self.rule, self.where)


def path_of(parts) -> str:
    """A JSON location (keys and indices) as the fields' paths are written: `a.b[2].c`."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")


# `$schema` naming a draft: http or https, with or without its '#' (jsonschema knows each as written)
_DRAFT = re.compile(r"json-schema\.org/(?:draft-0([3467])|draft/(2019-09|2020-12))/schema#?$")


def draft_validator(schema):
    """The jsonschema validator class of the draft `schema`'s `$schema` names, however its URI
    is spelt (https://json-schema.org/draft-07/schema# had been read as 2020-12, where
    `dependencies` is no keyword); 2020-12 where it names none."""
    import jsonschema

    uri = schema.get("$schema") if isinstance(schema, dict) else None
    if uri is not None and not isinstance(uri, str):
        raise SchemaError("$schema", f"names the schema's draft by its URI, a string, not {uri!r}: write "
                                     '"https://json-schema.org/draft/2020-12/schema" or leave $schema out')
    if isinstance(uri, str) and (m := _DRAFT.search(uri.strip())):
        return {"3": jsonschema.Draft3Validator, "4": jsonschema.Draft4Validator, "6": jsonschema.Draft6Validator,
                "7": jsonschema.Draft7Validator, "2019-09": jsonschema.Draft201909Validator,
                "2020-12": jsonschema.Draft202012Validator}[m[1] or m[2]]
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)


def valid_schema(schema, where: tuple = ()):
    """The jsonschema validator class of `schema`'s draft; SchemaError where the schema breaks
    its draft's metaschema (a multipleOf of 0, a negative maxLength). A schema resource inside
    it that names another draft (a draft-04 file a 2020-12 schema refers to, embedded by
    read_schema) keeps to its own draft's metaschema, as the final check reads it by its own."""
    import jsonschema

    cls = draft_validator(schema)
    own, others = _resources(schema, cls)
    try:
        cls.check_schema(own)
    except jsonschema.SchemaError as e:
        raise _schema_error(e, where + tuple(e.absolute_path)) from None
    for at, resource in others:
        valid_schema(resource, where + at)
    return cls


# Where a schema holds schemas (in any draft): lists of them, maps of names to them, one.
SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
SUBSCHEMA_ONE = ("items", "additionalItems", "additionalProperties", "unevaluatedItems", "unevaluatedProperties",
                 "not", "if", "then", "else", "contains", "propertyNames")


def subschemas(s: dict):
    """(location, schema) of each schema `s` holds itself, its location a key or a key and an
    index or name; what no schema keyword holds (an `x-` word's value, an enum) is no schema."""
    for key in SUBSCHEMA_LISTS:
        if isinstance(s.get(key), list):
            yield from (((key, k), v) for k, v in enumerate(s[key]))
    for key in SUBSCHEMA_MAPS:
        if isinstance(s.get(key), dict):
            yield from (((key, name), v) for name, v in s[key].items())
    for key in SUBSCHEMA_ONE:
        if key in s and not isinstance(s[key], list):
            yield (key,), s[key]


def _resources(schema, cls) -> tuple[Any, list[tuple[tuple, dict]]]:
    """`schema` with each schema resource inside it that names a draft other than `cls`'s
    replaced by `{}`, and those resources with their locations."""
    others: list[tuple[tuple, dict]] = []

    def walk(s, at: tuple):
        if not isinstance(s, dict):
            return s
        if at and isinstance(s.get("$schema"), str) and draft_validator(s) is not cls:
            others.append((at, s))
            return {}
        out = s
        for where, sub in subschemas(s):
            if (new := walk(sub, at + where)) is sub:
                continue
            out = dict(out) if out is s else out
            if len(where) == 1:
                out[where[0]] = new
            else:
                if out[where[0]] is s[where[0]]:
                    out[where[0]] = type(s[where[0]])(s[where[0]])
                out[where[0]][where[1]] = new
        return out

    return walk(schema, ()), others


def _schema_error(e, where: tuple) -> SchemaError:
    """Our SchemaError for jsonschema's refusal `e` of the schema at `where`."""
    if e.validator == "format" and e.validator_value == "regex":   # (pydantic's Rust regex takes \p{L})
        try:
            re.compile(e.instance)
            why = ""
        except re.error as bad:
            why = f" ({bad})"
        return SchemaError(path_of(where), f"{e.instance!r} is no regular expression Python's re reads{why}, which "
                           "checks every value: fix it; write a Unicode property as a class (\\p{L}, a letter: "
                           "[^\\W\\d_]), a named group as (?P<name>...)")
    if isinstance(e.instance, bool) and where[-1:] in (("exclusiveMinimum",), ("exclusiveMaximum",)):
        return SchemaError(path_of(where), f"a boolean {where[-1]} is draft 4's: say so with \"$schema\": "
                           '"http://json-schema.org/draft-04/schema#", or give the bound itself as the number')
    return SchemaError(path_of(where), f"not a valid JSON Schema ({e.message}); fix the schema")


def checker(schema) -> Callable[[Any], None]:
    """A function that raises ExtractionError for data `schema` rejects (the most relevant error).
    A format the schema's draft does not define is checked as 2020-12 defines it: a draft-04
    schema's `iri` or `uuid` means one, and an unchecked format would let any text through."""
    import jsonschema
    from jsonschema.exceptions import best_match

    latest = jsonschema.Draft202012Validator
    cls = valid_schema(schema)
    formats = jsonschema.FormatChecker(formats=())
    formats.checkers = {**latest.FORMAT_CHECKER.checkers, **cls.FORMAT_CHECKER.checkers}
    rules = {"multipleOf": _multiple_of}
    if not isinstance(schema, dict) or schema.get("$schema") is None:   # OpenAPI's and Swagger's null
        rules["type"] = _or_null(cls.VALIDATORS["type"])
    validator = jsonschema.validators.extend(cls, rules)(schema, format_checker=formats)

    def check(data) -> None:
        error = best_match(validator.iter_errors(data))
        if error is None:
            return
        rule = error.validator_value
        if error.validator == "maxContains":   # and which items match `contains`, for the repair to drop some
            matches = validator.evolve(schema=error.schema["contains"]).is_valid
            rule = (rule, [k for k, item in enumerate(error.instance) if matches(item)])
        raise SchemaRejects(path_of(error.absolute_path), f"the schema rejects the value: {error.message}",
                            error.validator, rule, tuple(error.absolute_path))
    return check


def openapi_nullable(schema: dict) -> bool:
    """Whether `schema` says OpenAPI 3.0's `nullable: true` or Swagger's `x-nullable: true`. Read
    only in a document that names no draft by `$schema`, as OpenAPI's do not: in one that names
    a JSON Schema draft they are words of no meaning, as jsonschema reads them there."""
    return schema.get("nullable") is True or schema.get("x-nullable") is True


def _or_null(type_rule):
    """`type` as the schema's draft reads it, null passing where OpenAPI's `nullable: true` (or
    Swagger's `x-nullable`) allows it, as the layout does."""
    def check(validator, types, instance, schema):
        if instance is None and openapi_nullable(schema):
            return
        yield from type_rule(validator, types, instance, schema)
    return check


def _multiple_of(validator, step, instance, schema):
    """multipleOf as JSON Schema defines it, on the numbers as JSON writes them: 0.3 is a multiple
    of 0.1 (jsonschema divides in binary floating point, where 0.3 / 0.1 is 2.9999999999999996,
    and refused a third of the tenths)."""
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "number") and (Fraction(str(instance)) / Fraction(str(step))).denominator != 1:
        yield ValidationError(f"{instance!r} is not a multiple of {step}")
