"""The final check (validation.py): the user's JSON Schema as written, formats checked."""

import pickle

import pytest

from clover_struct.errors import ExtractionError
from clover_struct.validation import SchemaRejects, checker

DRAFT4 = "http://json-schema.org/draft-04/schema#"


@pytest.mark.parametrize("fmt, bad, good", [
    ("iri", "a c c c", "https://例え.jp/ü"),   # draft 4 defines neither format
    ("uuid", "not-a-uuid", "123e4567-e89b-12d3-a456-426614174000"),
])
def test_a_format_the_draft_does_not_define_is_checked_as_2020_12_defines_it(fmt, bad, good):
    check = checker({"$schema": DRAFT4, "type": "object", "properties": {"w": {"type": "string", "format": fmt}}})
    with pytest.raises(ExtractionError, match=f"is not a '{fmt}'") as e:
        check({"w": bad})
    assert e.value.path == "w" and e.value.keyword == "format"
    check({"w": good})


def test_a_draft_keeps_its_own_definition_of_a_format():
    """Draft 3's `time` is hh:mm:ss with no offset; 2020-12's (RFC 3339) needs one."""
    draft3 = checker({"$schema": "http://json-schema.org/draft-03/schema#", "format": "time"})
    draft3("10:00:00")
    with pytest.raises(ExtractionError):
        checker({"format": "time"})("10:00:00")


def test_a_max_contains_refusal_names_the_items_that_match_and_survives_pickling():
    check = checker({"type": "array", "contains": {"minimum": 9}, "maxContains": 1})
    with pytest.raises(SchemaRejects) as e:
        check([9, 1, 10])
    assert (e.value.keyword, e.value.rule) == ("maxContains", (1, [0, 2]))
    again = pickle.loads(pickle.dumps(e.value))
    assert (again.path, again.keyword, again.rule) == (e.value.path, "maxContains", (1, [0, 2]))
    with pytest.raises(SchemaRejects) as e:
        checker({"properties": {"a": {"items": {"maxLength": 2}}}})({"a": ["abc"]})
    assert (e.value.path, e.value.where, pickle.loads(pickle.dumps(e.value)).where) == ("a[0]", ("a", 0), ("a", 0))


def test_multiple_of_holds_of_the_numbers_as_written():
    """0.3 under multipleOf 0.1 (33 of the tenths below 10, 159 of the hundredths) had been refused:
    jsonschema divides in binary floating point. A text's 0.3 became the model's next value."""
    for step, places in ((0.1, 1), (0.01, 2)):
        check = checker({"type": "number", "multipleOf": step})
        for k in range(10 ** (places + 1)):
            check(round(k * step, places))
        with pytest.raises(SchemaRejects, match="not a multiple of"):
            check(0.305 if places == 1 else 0.0051)
    checker({"type": "integer", "multipleOf": 3})(9)
    with pytest.raises(SchemaRejects):
        checker({"type": "integer", "multipleOf": 3})(10)


def test_a_pattern_python_cannot_read_says_how_to_write_it():
    """pydantic (Rust's regex) takes \\p{L}; the message had told the user to fix a JSON Schema they never wrote."""
    from clover_struct.errors import SchemaError
    from clover_struct.validation import valid_schema

    with pytest.raises(SchemaError, match=r"no regular expression Python's re reads.*\[\^\\W\\d_\]"):
        valid_schema({"type": "object", "properties": {"name": {"type": "string", "pattern": r"^\p{L}+$"}}})


def test_a_malformed_pattern_says_what_is_wrong_with_it():
    """'([' had been told only how to write \\p{L}, not that its bracket is never closed."""
    from clover_struct.errors import SchemaError
    from clover_struct.validation import valid_schema

    with pytest.raises(SchemaError, match=r"'\(\[' is no regular expression Python's re reads \(unterminated "
                                          r"character set at position 1\)"):
        valid_schema({"type": "string", "pattern": "(["})


def test_only_schemas_inside_a_schema_are_checked_by_the_draft_they_name():
    """A `$schema` in an extension's value names no resource; a property named `default` holds one."""
    from clover_struct.errors import SchemaError
    from clover_struct.validation import valid_schema

    d4, d7 = "http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-07/schema#"
    valid_schema({"$schema": d7, "x-sample": {"$schema": d4, "type": 5}})
    valid_schema({"$schema": d7, "properties": {"default": {"$schema": d4, "maximum": 3, "exclusiveMaximum": True}}})
    with pytest.raises(SchemaError, match="properties.default.exclusiveMaximum`: a boolean exclusiveMaximum is"):
        valid_schema({"$schema": d4, "properties": {"default": {"$schema": d7, "exclusiveMaximum": True}}})


def test_a_draft_4_bound_in_a_schema_that_names_no_draft_says_how_to_name_it():
    from clover_struct.errors import SchemaError
    from clover_struct.validation import valid_schema

    with pytest.raises(SchemaError, match=r"a boolean exclusiveMinimum is draft 4's: say so with \"\$schema\""):
        valid_schema({"type": "number", "minimum": 0, "exclusiveMinimum": True})
    valid_schema({"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "minimum": 0,
                  "exclusiveMinimum": True})


@pytest.mark.parametrize("uri", ["https://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-07/schema",
                                 "https://json-schema.org/draft-07/schema"])
def test_a_draft_is_read_however_its_uri_is_spelt(uri):
    """https://...draft-07/schema# had been read as 2020-12 by the final check (and as draft 7 by
    the layout): `dependencies` went unchecked and an output broke the schema."""
    check = checker({"$schema": uri, "properties": {"b": {"type": "integer"}},
                     "dependencies": {"a": {"properties": {"b": {"const": 1}}}}})
    check({"a": 5, "b": 1})
    with pytest.raises(SchemaRejects, match="1 was expected"):
        check({"a": 5, "b": 0})
    checker({"$schema": uri.replace("07", "04"), "maximum": 1, "exclusiveMaximum": True})(0)


def test_openapi_nullable_lets_null_through_as_the_layout_does():
    """The layout read `nullable: true` as a null it may write; the check had refused the null."""
    for key in ("nullable", "x-nullable"):
        check = checker({"properties": {"a": {"type": "string", key: True, "pattern": "^[0-9]{4}$"}}})
        check({"a": None})
        check({"a": "2027"})
        with pytest.raises(SchemaRejects, match="is not of type 'string'"):
            check({"a": 5})
    with pytest.raises(SchemaRejects, match="None is not of type 'string'"):
        checker({"properties": {"a": {"type": "string", "nullable": False}}})({"a": None})


@pytest.mark.parametrize("key", ["nullable", "x-nullable"])
def test_a_schema_that_names_its_draft_reads_nullable_as_that_draft_does(toy_tokenizer, key):
    """Under a `$schema`, OpenAPI's words mean nothing, as jsonschema reads them: a null had been
    laid out and let through that the schema's own draft refuses."""
    from clover_struct.schema_walk import build_canvas

    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "required": ["a"],
              "properties": {"a": {"type": "string", key: True, "pattern": "^[0-9]{3}$"}}}
    with pytest.raises(SchemaRejects, match="None is not of type 'string'"):
        checker(schema)({"a": None})
    assert not build_canvas(schema, toy_tokenizer).slots[0].nullable
    assert build_canvas({k: v for k, v in schema.items() if k != "$schema"}, toy_tokenizer).slots[0].nullable
