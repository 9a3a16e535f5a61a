"""A pydantic model's JSON Schema for the layout: pydantic's own, keeping the rules it leaves out
that a slot's regex can hold. A datetime's rule on a time zone is its format (AwareDatetime:
`date-time-aware`, NaiveDatetime: `date-time-naive`, patterns.FORMATS); a URL's schemes are a
pattern beside its `uri` format (HttpUrl: `^(?:http|https):`); a Decimal is the number it is read
from (pydantic also takes a string, whose pattern any text matches), its decimal places the
number's fraction digits (multipleOf 10**-places) and its digits bounds. pydantic still validates
the record.
"""

from __future__ import annotations

from pydantic.json_schema import GenerateJsonSchema

from .patterns import literal


class _Rules(GenerateJsonSchema):
    def datetime_schema(self, schema):
        out, tz = super().datetime_schema(schema), schema.get("tz_constraint")
        return out if tz is None else {**out, "format": f"date-time-{'naive' if tz == 'naive' else 'aware'}"}

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
    return model.model_json_schema(schema_generator=_Rules)
