"""Property test over JSON Schemas: whatever a user's schema holds, `extract` returns a
value the schema accepts, or a CloverError: nothing else, and never an invalid value.

Hypothesis draws JSON Schemas from the features real ones use (the schema issue's list):
untagged unions (anyOf/oneOf of different types, type lists, int-or-string), maps
(additionalProperties, patternProperties, minProperties), open and bounded lists
(uniqueItems, contains, prefixItems), any value (`{}`, `true`), `$defs` with `$ref` (and a
recursive tree), allOf, const and enum, formats (and a pattern beside one), a look-ahead
pattern, conditionals, `not`, required keys the properties do not describe, boolean subschemas, and any root (a list, a string, a number). A tiny random
Clover model decodes them from random texts. The oracle is the `jsonschema` package with
format checking: a returned value must validate; a SchemaError or ExtractionError is an
answer (random weights often cannot satisfy a rule the layout leaves to the final check);
any other exception fails the test.
"""

import jsonschema
import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from clover_struct import CloverError, extract
from clover_struct.engine.config import preset
from clover_struct.engine.model import CloverModel

EXAMPLES = 60

SCALARS = st.sampled_from([
    {"type": "string", "maxLength": 12},
    {"type": "string", "pattern": "^[A-Z]{2}[0-9]{1,3}$"},
    {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,40}$"},
    {"type": "string", "format": "date"},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "email"},
    {"type": "string", "format": "ipv4"},
    {"type": "string", "format": "uuid"},
    {"type": "string", "format": "hostname"},
    {"type": "string", "format": "date", "pattern": "^20[0-9]{2}-0"},      # a pattern beside a format
    {"type": "string", "pattern": "^(?!-)[a-z0-9-]{1,10}$"},           # a look-ahead: loosened, then checked
    {"type": "integer", "minimum": 1, "maximum": 99},
    {"type": "integer", "minimum": 1e12},
    {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5},
    {"type": "boolean"},
    {"enum": ["red", "green", 3, None]},
    {"const": "fixed"},
    {"type": ["integer", "string"]},
    {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 6}]},
    {"type": ["string", "null"], "maxLength": 8},
    {},
    True,
])


def objects(children):
    """An object over `children`: some keys required (one the properties do not describe),
    a map or a closed object, now and then a conditional or a `not`."""
    @st.composite
    def build(draw):
        props = draw(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), children, min_size=1, max_size=3))
        s = {"type": "object", "properties": props}
        s["required"] = draw(st.lists(st.sampled_from([*props, "extra"]), unique=True, max_size=2))
        s["additionalProperties"] = draw(st.sampled_from([False, True, {"type": "integer"}]))
        if draw(st.booleans()):
            s["maxProperties"] = len(props) + draw(st.integers(0, 2))
        if draw(st.integers(0, 4)) == 0:
            s["not"] = {"required": list(props)[:2]} if len(props) > 1 else {"type": "null"}
        if draw(st.integers(0, 4)) == 0:
            first = next(iter(props))
            s["if"] = {"properties": {first: {"type": "string"}}}
            s["then"] = {"properties": {"z": {"type": "boolean"}}}
        return s
    return build()


def lists(children):
    @st.composite
    def build(draw):
        s = {"type": "array", "items": draw(children)}
        if draw(st.booleans()):
            s["maxItems"] = draw(st.integers(1, 5))
        s["minItems"] = draw(st.integers(0, min(2, s.get("maxItems", 2))))
        if draw(st.integers(0, 3)) == 0:
            s["uniqueItems"] = True
        if draw(st.integers(0, 4)) == 0:
            s["prefixItems"] = [{"type": "boolean"}]
        return s
    return build()


def maps(children):
    return st.builds(lambda v, pattern, least: {"type": "object", "patternProperties": {"^[a-z]+$": v},
                                                "minProperties": least}
                     if pattern else {"type": "object", "additionalProperties": v, "minProperties": least},
                     children, st.booleans(), st.integers(0, 2))


VALUES = st.recursive(SCALARS, lambda inner: st.one_of(objects(inner), lists(inner), maps(inner),
                                                       st.builds(lambda a, b: {"allOf": [a, b]},
                                                                 objects(inner), objects(inner))),
                      max_leaves=6)

TREE = {"$defs": {"node": {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 8},
    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["name"]}},
    "$ref": "#/$defs/node"}


@st.composite
def schemas(draw):
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return TREE
    if kind == 1:   # a definition reached through a JSON pointer
        return {"$defs": {"x": draw(VALUES)}, "type": "object", "properties": {"v": {"$ref": "#/$defs/x"}},
                "required": ["v"]}
    return draw(VALUES)   # any root


@pytest.fixture(scope="module")
def model(toy_byte_tokenizer):
    tok = toy_byte_tokenizer
    torch.manual_seed(0)
    config = preset("tiny", vocab_size=tok.vocab_size, mask_token_id=tok.mask_id, pad_token_id=tok.pad_id,
                    eos_token_id=tok.eos_id, block_size=64)
    return CloverModel(config, tok).init_weights(std=0.3).eval()


@pytest.mark.slow
def test_any_json_schema_gives_a_valid_value_or_a_clover_error(model):
    outcomes = {"valid": 0, "refused": 0, "error": 0}

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate],
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(schemas(), st.text(min_size=1, max_size=120).filter(str.strip), st.sampled_from([0.0, 1.0]))
    def check(schema, text, temperature):
        root = schema if isinstance(schema, dict) else {}
        validator = jsonschema.Draft202012Validator(root, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        try:
            value = extract(text, schema, model=model, temperature=temperature, seed=0)
        except CloverError as e:
            outcomes["refused" if type(e).__name__ == "SchemaError" else "error"] += 1
            return
        errors = [e.message for e in validator.iter_errors(value)]
        assert not errors, f"schema {schema}\nvalue {value!r}\nbreaks it: {errors}"
        outcomes["valid"] += 1

    check()
    print(outcomes)
    assert outcomes["valid"] >= EXAMPLES // 3, f"too few valid values to mean anything: {outcomes}"
