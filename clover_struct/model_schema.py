"""A pydantic model's JSON Schema for the layout: pydantic's own, keeping the rules it leaves out
that a slot's regex can hold. A datetime's rule on a time zone is its format (AwareDatetime:
`date-time-aware`, NaiveDatetime: `date-time-naive`, patterns.FORMATS); a URL's schemes are a
pattern beside its `uri` format (HttpUrl: `^(?:http|https):`); a Decimal is the number it is read
from (pydantic also takes a string, whose pattern any text matches), its decimal places the
number's fraction digits (multipleOf 10**-places) and its digits bounds. pydantic still validates
the record.
"""

from __future__ import annotations

from enum import Enum

from pydantic import RootModel
from pydantic.json_schema import GenerateJsonSchema

from .errors import SchemaError
from .patterns import literal


class _Rules(GenerateJsonSchema):
    @property
    def mode(self):
        """Always the validation schema, what a record is read by: a model's
        json_schema_mode_override="serialization" had laid out its output (computed fields,
        serialization aliases), which no record validates as."""
        return self._mode

    def model_schema(self, schema):
        """A model's keys as pydantic reads them: by name where it reads no alias (validate_by_alias=False)."""
        reads_aliases, kept = schema["cls"].model_config.get("validate_by_alias") is not False, self.by_alias
        self.by_alias = kept and reads_aliases
        try:
            return super().model_schema(schema)
        finally:
            self.by_alias = kept

    def datetime_schema(self, schema):
        out, tz = super().datetime_schema(schema), schema.get("tz_constraint")
        return out if tz is None else {**out, "format": f"date-time-{'naive' if tz == 'naive' else 'aware'}"}

    def literal_schema(self, schema):
        """SchemaError for a member of a plain Enum (not a str or int one): pydantic reads it from
        no JSON value, so no record could hold it."""
        if member := next((v for v in schema["expected"] if isinstance(v, Enum) and not isinstance(v, (str, int))),
                          None):
            raise _NoJsonValue(f"Literal[{type(member).__name__}.{member.name}]: pydantic reads a plain Enum's member "
                               f"from no JSON value, so no record could hold it; make {type(member).__name__} a "
                               "str or int Enum (class Kind(str, Enum), StrEnum)")
        return super().literal_schema(schema)

    def url_schema(self, schema):
        out, schemes = super().url_schema(schema), schema.get("allowed_schemes")
        return out if not schemes else {**out, "pattern": f"^(?:{'|'.join(map(literal, schemes))}):"}

    def decimal_schema(self, schema):
        out = super().decimal_schema(schema)
        number = next(s for s in out.get("anyOf", [out]) if s.get("type") == "number")
        places, digits = schema.get("decimal_places"), schema.get("max_digits")
        if places is not None and "multipleOf" not in number:
            number["multipleOf"] = 10.0 ** -places if places else 1
        if digits is not None:   # fewer than 10**(digits - places) in size
            top = 10 ** (digits - (places or 0))
            number["exclusiveMaximum"] = min(number.get("exclusiveMaximum", top), top)
            number["exclusiveMinimum"] = max(number.get("exclusiveMinimum", -top), -top)
        return number


def model_schema(model) -> dict:
    """The model's validation JSON Schema; SchemaError where a field's type has none (a Callable)."""
    from pydantic.errors import PydanticInvalidForJsonSchema

    try:
        schema = model.model_json_schema(schema_generator=_Rules)
    except PydanticInvalidForJsonSchema as e:
        raise SchemaError(_without_schema(model), f"its type has no JSON Schema, so no value of it can be written "
                                                  f"({e.message}); give it a type that has one, or leave it out "
                                                  "of the model") from None
    except _NoJsonValue as e:
        raise SchemaError(_without_schema(model), str(e)) from None
    top = schema
    if isinstance(ref := schema.get("$ref"), str) and ref.startswith("#/$defs/"):   # a recursive model: its own def
        top = schema.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
    laid_out = top.get("properties", {})
    for name, field in model.model_fields.items() if not issubclass(model, RootModel) else ():
        if field.is_required() and not any(key in laid_out for key in _read_as(model, name, field)):
            raise SchemaError(name, "pydantic reads this required field from a key its JSON Schema does not give "
                                    "(an AliasPath, or SkipJsonSchema), so no record could fill it; give it a "
                                    "string alias, or a default")
    return schema


def _read_as(model, name, field) -> list[str]:
    """The top-level keys pydantic reads a field from."""
    alias = field.validation_alias if field.validation_alias is not None else field.alias
    keys = [alias] if isinstance(alias, str) else [c for c in getattr(alias, "choices", ()) if isinstance(c, str)]
    by_name = model.model_config.get("populate_by_name") or model.model_config.get("validate_by_name")
    if model.model_config.get("validate_by_alias") is False:
        return [name]
    return keys + [name] * (alias is None or bool(by_name))


class _NoJsonValue(Exception):
    """A type whose values pydantic reads from no JSON value."""


def _without_schema(model) -> str:
    """The first field of `model` whose type has no JSON Schema, or a value none ("" where it is deeper)."""
    from pydantic import TypeAdapter
    from pydantic.errors import PydanticInvalidForJsonSchema

    for name, field in model.model_fields.items():
        try:
            TypeAdapter(field.annotation).json_schema(schema_generator=_Rules)
        except (PydanticInvalidForJsonSchema, _NoJsonValue):
            return name
        except Exception:   # (a type TypeAdapter cannot take alone: not this one)
            continue
    return ""
