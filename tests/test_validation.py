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
