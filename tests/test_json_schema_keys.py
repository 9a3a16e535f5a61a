"""A JSON Schema object's optional keys: each a "key" group the model writes or leaves out
(schema_walk.py), left out of the parsed object when absent (layout.py), and left out by the
repair when the final check asks for it (repair.py); a pydantic model's canvas as before. Also
how maps, references ($id by draft, dynamic references, members of other documents) and the
repair's list and record rules meet the schemas users bring."""

import json
import re
from pathlib import Path

import pytest

from clover_struct.constraints import compile_canvas
from clover_struct.decoder import decode
from clover_struct.errors import ExtractionError, SchemaError
from clover_struct.repair import finish
from clover_struct.schema_walk import build_canvas
from clover_struct.schemas import DispatchJudgments, DispatchMessage, NoFlyZone, Notam
from test_layout import Flat
from tiny_models import MockModel

CORPUS = Path(__file__).parent / "schema_corpus"

EXCLUSIVE = {"type": "object", "properties": {"count": {"type": "integer", "minimum": 1},
                                              "until": {"type": "string", "format": "date"},
                                              "name": {"type": "string", "maxLength": 4}},
             "required": ["name"], "not": {"required": ["count", "until"]}}
CARD = {"type": "object", "properties": {"card": {"type": "string", "pattern": "^[0-9]{4}$"},
                                         "cvc": {"type": "string", "pattern": "^[0-9]{3}$"},
                                         "name": {"type": "string", "maxLength": 4}},
        "required": ["name"], "dependentRequired": {"card": ["cvc"]}}


def keys(schema, tok) -> list[str]:
    """The paths of the canvas's key groups: the keys the model may leave out."""
    return [g.path for g in build_canvas(schema, tok).groups if g.kind == "key"]


def test_an_optional_key_is_a_group_holding_its_separator_key_and_value(toy_tokenizer):
    c = build_canvas(EXCLUSIVE, toy_tokenizer)
    assert [(g.kind, g.path) for g in c.groups] == [("key", "count"), ("key", "until")]
    assert c.text("#") == '{"count": ############, "until": "##########", "name": "####"}'
    fixed = [b"".join(toy_tokenizer.token_bytes(c.ids[p]) for p in g.fixed).decode() for g in c.groups]
    assert fixed == ['"count": ', ', "until": ""']   # the brace outside, the comma inside
    for data in ({"name": "ab"}, {"until": "2024-05-01", "name": "ab"}, {"count": 3, "name": ""}):
        assert c.parse(c.fill(data)) == data
    assert "count:                           key group, present or absent" in c.describe()


def test_a_pydantic_model_writes_its_optional_fields_as_before(toy_tokenizer):
    """A model's optional fields are written (null), and so are its JSON Schema's (nullable,
    `default: null`: null says absent); a nullable key without that default is a key group."""
    model, schema = build_canvas(Flat, toy_tokenizer), build_canvas(Flat.model_json_schema(), toy_tokenizer)
    assert model.groups == schema.groups == () and model.ids == schema.ids
    assert model.slots[-1].path == "note" and model.slots[-1].nullable
    note = {"type": "object", "properties": {"note": {"type": ["string", "null"], "maxLength": 4}}}
    assert keys(note, toy_tokenizer) == ["note"]
    assert keys({**note, "properties": {"note": {**note["properties"]["note"], "default": None}}}, toy_tokenizer) == []
    for shipped in (Notam, NoFlyZone, DispatchMessage, DispatchJudgments):
        assert "key" not in {g.kind for g in build_canvas(shipped, toy_tokenizer).groups}


def test_keys_a_rule_may_ask_for_are_written_always(toy_tokenizer):
    """The repair can leave keys out but not add them: what a rule may require is written."""
    props = {k: {"type": "integer"} for k in "abcdef"}
    obj = {"type": "object", "properties": props}
    assert keys(obj, toy_tokenizer) == list("abcdef")
    assert keys({**obj, "required": ["a"], "dependentRequired": {"a": ["b"], "c": ["d"]},
                 "if": {"required": ["a"]}, "then": {"required": ["e"]}}, toy_tokenizer) == ["c", "d", "f"]
    assert keys({**obj, "dependencies": {"c": ["d"]}, "required": ["c"]}, toy_tokenizer) == list("abef")
    assert keys({**obj, "minProperties": 2}, toy_tokenizer) == list("cdef")
    assert keys({**obj, "anyOf": [{"required": ["x"]}, {"required": ["c", "d"]}]}, toy_tokenizer) == list("abef")
    # package.json's: the first member requires nothing, so no key need be written
    assert keys({**obj, "anyOf": [{"type": "object", "not": {"required": ["a", "b"]}}, {"required": ["c"]}]},
                toy_tokenizer) == list("abcdef")
    assert keys({**obj, "maxProperties": 2, "required": ["f"]}, toy_tokenizer) == ["a"]   # as many as there is room


# snapcraft's shape: which keys, and which values of a key, go together, as an allOf of two anyOfs
# whose members carry an annotation keyword of the schema's own ("usage")
KINDS = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 4},
                                          "kind": {"enum": ["app", "base"]}, "base": {"type": "string", "maxLength": 4},
                                          "version": {"type": "integer"}, "adopt": {"type": "string", "maxLength": 4}},
         "required": ["name"], "additionalProperties": False,
         "allOf": [{"anyOf": [{"usage": "kind: base, no base", "properties": {"kind": {"enum": ["base"]}},
                               "allOf": [{"required": ["kind"]}, {"not": {"required": ["base"]}}]},
                              {"usage": "base: <base>", "type": "object", "allOf": [{"required": ["base"]}]}]},
                   {"anyOf": [{"required": ["version"]}, {"required": ["adopt"]}]}]}


def test_members_that_rule_only_over_keys_and_values_of_keys_lay_the_object_out_once(toy_tokenizer):
    """They and their allOfs say which keys an object has and what its properties hold: the object
    is laid out once, the first member's keys written always, and the final check holds the rest."""
    c = build_canvas(KINDS, toy_tokenizer)
    assert [s.path for s in c.slots] == ["name", "kind", "base", "version", "adopt"]
    assert [g.path for g in c.groups if g.kind == "key"] == ["base", "adopt"]
    assert finish(decoded(toy_tokenizer, KINDS, {"name": "ab", "kind": "base", "version": 2})) == \
        {"name": "ab", "kind": "base", "version": 2}
    d = decoded(toy_tokenizer, KINDS, {"name": "ab", "kind": "app", "version": 2})
    with pytest.raises(ExtractionError):   # kind app asks for a base key
        d.canvas.validate(d.ids)
    # a member that says more of the value than its keys, or describes a key of its own, is a union
    typed = {**KINDS, "allOf": [{"anyOf": [{"required": ["base"], "maxProperties": 3}, {"type": "string"}]}]}
    own = {**KINDS, "allOf": [{"anyOf": [{"properties": {"size": {"type": "integer"}}, "required": ["size"]},
                                         {"required": ["version"]}]}]}
    for union in (typed, own):
        assert [s.kind for s in build_canvas(union, toy_tokenizer).slots] == ["regex"]


def test_a_members_own_optional_key_is_laid_out_as_the_objects(toy_tokenizer):
    """bootstraprc's shape: each member of an anyOf beside the object's properties describes a key
    of its own that it does not require and bars the other's: the object is laid out once with
    both keys optional, and the final check holds the rule (as one slot of any value, the
    object's own required keys had been left out)."""
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 4}}, "required": ["name"],
              "anyOf": [{"properties": {"env": {"type": "boolean"}}, "not": {"required": ["extract"]}},
                        {"properties": {"extract": {"type": "boolean"}}, "not": {"required": ["env"]}}]}
    assert [s.path for s in build_canvas(schema, toy_tokenizer).slots] == ["name", "env", "extract"]
    assert finish(decoded(toy_tokenizer, schema, {"name": "ab", "env": True})) == {"name": "ab", "env": True}
    d = decoded(toy_tokenizer, schema, {"name": "ab", "env": True, "extract": False})
    with pytest.raises(ExtractionError):   # both keys: neither member holds
        d.canvas.validate(d.ids)


def test_an_optional_key_past_the_recursion_depth_or_with_nothing_to_decide_is_left_out(toy_tokenizer):
    tree = {"$defs": {"n": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/n"}},
                            "required": ["v"]}}, "$ref": "#/$defs/n"}
    c = build_canvas(tree, toy_tokenizer)
    assert keys(tree, toy_tokenizer) == ["next", "next.next"]
    assert c.parse(c.fill({"v": 1, "next": {"v": 2}})) == {"v": 1, "next": {"v": 2}}
    fixed = {"type": "object", "properties": {"a": {"type": "object", "additionalProperties": False},
                                              "b": {"type": "array", "maxItems": 0}}, "required": ["b"]}
    c = build_canvas(fixed, toy_tokenizer)
    assert c.text() == '{"b": []}' and c.parse(c.ids) == {"b": []}


def test_a_map_is_written_inside_its_braces(toy_tokenizer):
    """A map with no properties opens its brace before its first entry (the canvas the model reads
    had shown `"m": "key": 1}`)."""
    import re

    one = {"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": "integer"},
                                                  "maxProperties": 1}}, "required": ["m"]}
    c = build_canvas(one, toy_tokenizer)
    assert re.fullmatch(r'\{"m": \{"#+": #+\}\}', c.text("#")), c.text("#")
    assert c.parse(c.fill({"m": {"a": 1}})) == {"m": {"a": 1}} and c.parse(c.fill({"m": {}})) == {"m": {}}


def test_a_map_of_the_document_itself_ends_at_the_recursion_depth(toy_tokenizer):
    """`additionalProperties: {"$ref": "#"}` (a tree of named nodes): where the canvas is shrunk to
    fit the context, a map's entries end at the recursion depth, as a list's items do; a map
    that needs an entry there has no way to stop."""
    tree = {"type": "object", "properties": {"v": {"type": "integer"}}, "additionalProperties": {"$ref": "#"}}
    for context in (1024, 256):
        c = build_canvas(tree, toy_tokenizer, context=context)
        assert c.parse(c.fill({"v": 1, "a": {"v": 2}})) == {"v": 1, "a": {"v": 2}}
    with pytest.raises(SchemaError, match="no way to stop"):
        build_canvas({"type": "object", "additionalProperties": {"$ref": "#"}, "minProperties": 1}, toy_tokenizer,
                     context=1024)


def test_optional_keys_past_the_room_are_laid_out_in_order_while_they_fit(toy_tokenizer):
    """Where a schema's optional keys alone outgrow 3/4 of the context, the first ones that fit are
    laid out (a config schema of hundreds of keys had been laid out with none: `{}`)."""
    props = {f"k{i}": {"type": "string", "maxLength": 8} for i in range(60)}
    schema = {"type": "object", "properties": {"id": {"type": "integer"}, **props}, "required": ["id"]}
    assert len(keys(schema, toy_tokenizer)) == 60
    c = build_canvas(schema, toy_tokenizer, context=400)
    kept = [g.path for g in c.groups if g.kind == "key"]
    print(f"{len(kept)} of 60 optional keys kept, canvas {len(c)} tokens of 300")
    assert len(c) <= 300 and 5 <= len(kept) < 60 and kept == [f"k{i}" for i in range(len(kept))]
    assert c.left_out == tuple(f"k{i}" for i in range(len(kept), 60))   # and `clover-struct schema` says so
    assert c.describe().endswith(f"never written ({60 - len(kept)} optional keys past maxProperties or the room): "
                                 + ", ".join(c.left_out))
    assert build_canvas(schema, toy_tokenizer).left_out == () and "never written" not in build_canvas(
        schema, toy_tokenizer).describe()
    assert build_canvas({**schema, "maxProperties": 3}, toy_tokenizer).left_out == tuple(f"k{i}" for i in range(2, 60))
    assert c.parse(c.fill({"id": 4, "k1": "ab"})) == {"id": 4, "k1": "ab"}


def decoded(tok, schema, values: dict):
    """The schema's canvas decoded by a model scripted to write `values` (absent keys: pads)."""
    canvas, prompt = build_canvas(schema, tok), [5, 6, 7]
    model = MockModel(tok, dict(enumerate(canvas.fill(values))), len(prompt))
    (d,) = decode(model, [prompt], [canvas], [compile_canvas(canvas, tok)])
    return d


def test_a_key_the_model_leaves_out_is_absent_from_the_output(toy_tokenizer):
    assert finish(decoded(toy_tokenizer, EXCLUSIVE, {"count": 2, "name": "ab"})) == {"count": 2, "name": "ab"}


@pytest.mark.parametrize("schema, values", [
    (EXCLUSIVE, {"count": 2, "until": "2024-05-01", "name": "ab"}),   # not: {required: [count, until]}
    (CARD, {"card": "1234", "name": "ab"}),                           # card without its cvc
])
def test_the_repair_leaves_out_an_optional_key_the_final_check_rejects(toy_tokenizer, schema, values):
    d = decoded(toy_tokenizer, schema, values)
    with pytest.raises(ExtractionError):
        d.canvas.validate(d.ids)
    value = finish(d)
    assert value["name"] == "ab" and len(value) == len(values) - 1 and set(value) < set(values)


def test_a_dependent_required_schema_decodes_valid(toy_tokenizer):
    assert finish(decoded(toy_tokenizer, CARD, {"card": "1234", "cvc": "567", "name": "ab"})) == \
        {"card": "1234", "cvc": "567", "name": "ab"}
    assert finish(decoded(toy_tokenizer, CARD, {"cvc": "567", "name": "ab"})) == {"cvc": "567", "name": "ab"}


def test_a_whole_value_no_ranked_value_mends_falls_back_to_the_emptiest_of_a_type(toy_tokenizer):
    """A whole-value slot's regex is looser than its schema (bounds, maxItems): past the values the
    model ranked, the repair tries the emptiest value of each JSON type the slot's regex accepts."""
    import jsonschema

    from clover_struct.repair import _fallbacks
    schema = {"type": "object", "required": ["v", "name"], "properties": {
        "name": {"type": "string", "maxLength": 4},
        "v": {"anyOf": [{"type": "integer", "minimum": 10**9}, {"type": "array", "maxItems": 0}]}}}
    d = decoded(toy_tokenizer, schema, {"v": 5, "name": "ab"})
    i, s = next((k, s) for k, s in enumerate(d.canvas.slots) if s.path == "v")
    last = [d.canvas.slot_text(d.ids[:s.start] + ids + d.ids[s.end:], i) for ids in list(_fallbacks(d, i))[-2:]]
    assert last == ["[]", "0"]   # of {} [] "" 0 false null, those the regex takes, in that order
    value = finish(d)
    jsonschema.validate(value, schema)
    assert value["name"] == "ab"


@pytest.mark.parametrize("number, value, fixed", [
    ({"type": "integer", "multipleOf": 7, "minimum": 1000}, 0, 1001),   # had been 1000: not a multiple
    ({"type": "integer", "multipleOf": 7, "minimum": 1000, "maximum": 100000}, 55274, 55272),
    ({"type": "number", "multipleOf": 0.1, "minimum": 123.45}, 0, 123.5),
    ({"type": "integer", "maximum": -5.5}, 0, -6),                          # had been int(-5.5): -5
    ({"type": "integer", "exclusiveMinimum": 2.5, "exclusiveMaximum": 4}, 9, 3),
    ({"type": "number", "exclusiveMaximum": 0.5}, 1, 0.499999),
])
def test_the_last_resort_for_a_number_is_the_nearest_that_keeps_its_bounds_and_step(toy_tokenizer, number,
                                                                                    value, fixed):
    """Where no value the model rated passes, a bounded number is mended to the nearest valid one
    (the repair had refused these schemas: it kept to the bounds alone, and cut -5.5 to -5)."""
    import jsonschema

    from clover_struct.repair import _nearest
    schema = {"type": "object", "required": ["n"], "properties": {"n": number}}
    d = decoded(toy_tokenizer, schema, {"n": value})
    assert _nearest(next(s for s in d.canvas.slots if s.path == "n"), value) == fixed
    jsonschema.validate(finish(d), schema)


def test_a_value_nothing_mends_is_an_error_that_names_the_field_and_what_to_do(toy_tokenizer):
    code = {"type": "string", "minLength": 2, "maxLength": 4, "not": {"pattern": "."}}   # no string passes
    with pytest.raises(ExtractionError, match="make the field nullable or optional, or relax its check") as e:
        finish(decoded(toy_tokenizer, {"type": "object", "required": ["code"], "properties": {"code": code}},
                       {"code": "bb"}))
    assert e.value.path == "code" and "should not be valid" in e.value.reason
    with pytest.raises(ExtractionError, match="relax the schema"):
        finish(decoded(toy_tokenizer, code, "bbb"))
    assert finish(decoded(toy_tokenizer, {"type": "object", "properties": {"code": code}}, {"code": "bb"})) == {}


def test_a_pattern_the_layout_could_not_place_narrows_the_search_for_the_next_value(toy_tokenizer):
    """then/else patterns are the final check's: a value breaking one is searched again among the
    values that match it (the slot's automaton times the pattern), greedily where ranks run out."""
    import jsonschema
    schema = {"type": "object", "required": ["country", "code"],
              "properties": {"country": {"enum": ["US", "NL"]}, "code": {"type": "string", "maxLength": 8}},
              "if": {"properties": {"country": {"const": "US"}}},
              "then": {"properties": {"code": {"pattern": "^[0-9]{5}$"}}}}
    value = finish(decoded(toy_tokenizer, schema, {"country": "US", "code": "abc"}))
    jsonschema.validate(value, schema)
    assert value["country"] == "US" and len(value["code"]) == 5


def test_a_member_from_another_document_keeps_its_references_and_ours_keep_ours(toy_tokenizer):
    """allOf of the draft-07 meta-schema (its own $id and `#` references) and a member of ours:
    each member's references resolve in the document it came from."""
    from clover_struct.schema_refs import Document

    schema = {"$defs": {"name": {"type": "string", "maxLength": 5}}, "type": "object", "required": ["payload"],
              "properties": {"payload": {"allOf": [{"$ref": "http://json-schema.org/draft-07/schema#"},
                                                   {"properties": {"title": {"$ref": "#/$defs/name"}}}]}}}
    doc = Document(schema)
    payload = doc.resolve(schema["properties"]["payload"], "payload").schema
    assert doc.resolve(payload["properties"]["title"], "payload.title").schema == {"type": "string", "maxLength": 5}
    meta = next(m for m in payload["anyOf"] if m.get("type") == "object")   # its type is object or boolean
    assert doc.resolve(meta["properties"]["not"], "payload.not").refs == ["http://json-schema.org/draft-07/schema"]
    build_canvas(schema, toy_tokenizer)


def test_our_member_merged_into_a_property_of_another_documents_keeps_its_references(toy_tokenizer):
    """A schema with no $id that extends the draft-07 meta-schema (as AsyncAPI's does): laid out,
    each union member's `additionalProperties` holds the meta-schema's `$ref` beside our anyOf,
    whose `#` is still ours."""
    ours = {"properties": {"additionalProperties": {"anyOf": [{"$ref": "#/definitions/name"}, {"type": "boolean"}]}}}
    schema = {"definitions": {"name": {"type": "string", "maxLength": 5}}, "type": "object",
              "properties": {"payload": {"allOf": [{"$ref": "http://json-schema.org/draft-07/schema#"}, ours]}}}
    assert any(s.path.startswith("payload") for s in build_canvas(schema, toy_tokenizer).slots)


def write(path: Path, schema) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(schema))
    return path


def test_a_schema_file_reads_the_files_its_references_name_beside_it(toy_tokenizer, tmp_path):
    """A schema given by its path refers to other files by relative path, and they to theirs;
    each is laid out where it is referred to and checked by the final check as written."""
    write(tmp_path / "common" / "units.json", {"$defs": {"unit": {"enum": ["FT", "M"]}}})
    write(tmp_path / "common" / "limit.json", {"type": "object", "required": ["value", "unit"],
                                               "properties": {"value": {"type": "integer", "maximum": 99},
                                                              "unit": {"$ref": "units.json#/$defs/unit"}}})
    write(tmp_path / "never.json", False)   # a boolean schema: no value, so its optional key is left out
    path = write(tmp_path / "zone.json", {"type": "object", "required": ["ceiling"],
                                          "properties": {"ceiling": {"$ref": "common/limit.json"},
                                                         "note": {"$ref": "never.json"}}})
    c = build_canvas(path, toy_tokenizer)
    assert [s.path for s in c.slots] == ["ceiling.value", "ceiling.unit"]
    assert c.parse(c.fill({"ceiling": {"value": 40, "unit": "M"}})) == {"ceiling": {"value": 40, "unit": "M"}}
    with pytest.raises(ExtractionError, match="ceiling.value"):
        c.validate(c.fill({"ceiling": {"value": 400, "unit": "M"}}))


def test_a_published_schema_set_saved_together_reads_its_references_from_the_files(toy_tokenizer, tmp_path):
    """References to addresses beside the schema's $id are read from the files beside it (as the
    JSON Schema Store's base.json, saved next to a schema that uses it); other addresses, and
    a dict with no file to stand beside, are refused, saying what to do."""
    site = "https://schemas.example.org/"
    write(tmp_path / "base.json", {"$id": f"{site}base.json", "definitions": {"name": {"type": "string",
                                                                                     "not": {"const": "root"}}}})
    tool = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",   # (http and https alike)
            "$id": f"{site}tool.json".replace("https", "http"),
            "required": ["name"], "properties": {"name": {"$ref": f"{site}base.json#/definitions/name"}}}
    c = build_canvas(write(tmp_path / "tool.json", tool), toy_tokenizer)
    assert [s.path for s in c.slots] == ["name"]
    with pytest.raises(ExtractionError, match="name"):   # the final check finds base.json too
        c.validate(c.fill({"name": "root"}))
    with pytest.raises(SchemaError, match="outside this schema.*save it as a file beside"):
        build_canvas(tool, toy_tokenizer)
    with pytest.raises(SchemaError, match="outside this schema"):
        build_canvas(write(tmp_path / "elsewhere.json", {**tool, "$id": "https://other.example.org/t.json"}),
                     toy_tokenizer)
    with pytest.raises(SchemaError, match=r"\$ref .*gone.json: tool.json refers to the file .*gone.json, which "
                                          "cannot be read"):
        build_canvas(write(tmp_path / "tool.json", {**tool, "properties": {"name": {"$ref": "gone.json"}}}),
                     toy_tokenizer)


@pytest.mark.parametrize("x", [
    {"$id": "sub/", "type": "object", "required": ["v"], "properties": {"v": {"$ref": "h.json"}}},
    {"$id": "sub/", "allOf": [{"type": "object", "required": ["v"], "properties": {"v": {"$ref": "h.json"}}}]},
])
def test_a_relative_id_is_joined_to_the_base_once(toy_tokenizer, x):
    """A subschema with `$id: sub/`, reached by a pointer or holding an allOf, had been read at
    sub/sub/, where its references found nothing."""
    schema = {"type": "object", "required": ["w"], "properties": {"w": {"$ref": "#/$defs/x"}},
              "$defs": {"x": x, "h": {"$id": "sub/h.json", "enum": ["SUB"]}}}
    assert build_canvas(schema, toy_tokenizer).slots[0].choices == ('"SUB"',)


def test_files_of_a_schema_set_that_name_other_drafts_each_keep_to_their_own(toy_tokenizer, tmp_path):
    """A 2020-12 schema referring to a draft-04 file (a boolean exclusiveMaximum) and a draft-07
    one (items as a list) had been checked whole against 2020-12's metaschema and refused."""
    write(tmp_path / "temp.json", {"$schema": "http://json-schema.org/draft-04/schema#", "type": "number",
                                   "maximum": 50, "exclusiveMaximum": True})
    write(tmp_path / "pair.json", {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
                                   "items": [{"enum": ["N", "S"]}, {"type": "integer"}], "additionalItems": False})
    root = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "required": ["t", "p"],
            "properties": {"t": {"$ref": "temp.json"}, "p": {"$ref": "pair.json"}}}
    c = build_canvas(write(tmp_path / "root.json", root), toy_tokenizer)
    assert [s.path for s in c.slots] == ["t", "p[0]", "p[1]"]
    assert c.validate(c.fill({"t": 49.5, "p": ["N", 7]})) == {"t": 49.5, "p": ["N", 7]}
    with pytest.raises(ExtractionError, match="`t`: .*50 is greater than or equal to the maximum of 50"):
        c.validate(c.fill({"t": 50, "p": ["N", 7]}))
    write(tmp_path / "ids.json", {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
                                  "required": ["y"], "properties": {"y": {"$ref": "sub/d.json"}},
                                  "definitions": {"d": {"id": "sub/d.json", "enum": ["p", "q"]}}})
    nested = build_canvas(write(tmp_path / "root2.json", {**root, "properties": {"i": {"$ref": "ids.json"}},
                                                          "required": ["i"]}), toy_tokenizer)
    assert nested.slots[0].path == "i.y" and nested.slots[0].choices == ('"p"', '"q"')   # draft 4's id inside
    write(tmp_path / "temp.json", {"$schema": "http://json-schema.org/draft-04/schema#", "type": "number",
                                   "exclusiveMaximum": 50})   # a number here is draft 6's, not draft 4's
    with pytest.raises(SchemaError, match=r"\$defs.file:.*temp.json.exclusiveMaximum`: not a valid JSON Schema "
                                          r"\(50 is not of type 'boolean'\)"):
        build_canvas(tmp_path / "root.json", toy_tokenizer)


def test_a_schema_nested_past_what_can_be_read_is_refused_saying_so(toy_tokenizer, tmp_path):
    """Nesting deeper than jsonschema's own check of a schema recurses (about 100 objects deep) or
    than a JSON reader goes is refused, not a RecursionError; the same chain through $defs lays out."""
    deep = {"type": "string", "maxLength": 3}
    for _ in range(100):
        deep = {"type": "object", "properties": {"a": deep}, "required": ["a"]}
    with pytest.raises(SchemaError, match="nests 201 levels of objects and lists deep; clover-struct reads at most"):
        build_canvas(deep, toy_tokenizer)
    for _ in range(3000):   # past what the JSON writer of the canvas cache's key nests
        deep = {"not": deep}
    with pytest.raises(SchemaError, match="nests 3201 levels"):
        build_canvas(deep, toy_tokenizer)
    defs = {f"d{i}": {"type": "object", "properties": {"a": {"$ref": f"#/$defs/d{i + 1}"}}, "required": ["a"]}
            for i in range(100)}
    flat = build_canvas({"$defs": {**defs, "d100": {"type": "string", "maxLength": 3}}, "$ref": "#/$defs/d0"},
                        toy_tokenizer)
    assert [s.path for s in flat.slots] == [".".join(["a"] * 100)]
    with pytest.raises(SchemaError, match="deeper than a JSON reader goes"):
        (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
        build_canvas(tmp_path / "deep.json", toy_tokenizer)


@pytest.mark.parametrize("sid", ["urn:example:zone", "ng-cli://config/zone.json"])
def test_references_resolve_under_an_id_of_any_scheme(toy_tokenizer, sid):
    """urljoin leaves `#...` alone against `urn:` or an unknown scheme; the references still
    lead into the document."""
    schema = {"$id": sid, "$defs": {"kind": {"enum": ["circle", "polygon"]}}, "type": "object",
              "required": ["kind"], "properties": {"kind": {"$ref": "#/$defs/kind"}}}
    c = build_canvas(schema, toy_tokenizer)
    assert c.parse(c.fill({"kind": "polygon"})) == {"kind": "polygon"}


def test_a_key_pattern_with_a_look_ahead_is_laid_out_loosened_and_checked_whole(toy_tokenizer):
    """No automaton holds `(?!...)`: the entries' keys follow the pattern without it, and a key it
    rules out fails the final check (where the repair drops its entry)."""
    schema = {"type": "object", "patternProperties": {"^(?!x-)[a-z-]+$": {"type": "integer"}},
              "additionalProperties": False}
    c = build_canvas(schema, toy_tokenizer)
    key = next(s for s in c.slots if s.path.endswith(":key"))
    assert "?!" not in key.pattern
    assert c.parse(c.fill({"speed": 3})) == {"speed": 3}
    with pytest.raises(ExtractionError):
        c.validate(c.fill({"x-speed": 3}))


def test_a_property_patternproperties_match_is_laid_out_under_both_schemas(toy_tokenizer):
    """`part` is held to its property's maxLength and to the minLength of the pattern `^p` that
    matches its name (laid out under the property's alone, an empty value failed every text); a
    required key only patterns describe, to every pattern that matches it."""
    schema = {"type": "object", "required": ["part", "pin"], "properties": {"part": {"type": "string", "maxLength": 8}},
              "patternProperties": {"^p": {"minLength": 3}, "n$": {"type": "string", "maxLength": 4}}}
    part, pin = build_canvas(schema, toy_tokenizer).slots[:2]
    assert (part.path, part.length, pin.path, pin.length) == ("part", (3, 8), "pin", (3, 4))


def test_a_key_pattern_longer_than_a_keys_budget_gets_the_tokens_its_shortest_key_needs(toy_tokenizer):
    from clover_struct.schema_walk import KEY_TOKENS

    prefix = "backend.request.querystring."
    schema = {"type": "object", "patternProperties": {f"^{prefix}": {"type": "string", "maxLength": 4}},
              "additionalProperties": False}
    c = build_canvas(schema, toy_tokenizer)
    key = next(s for s in c.slots if s.path.endswith(":key"))
    assert key.budget >= len(prefix) > KEY_TOKENS   # a character a token here
    compile_canvas(c, toy_tokenizer)


def test_an_optional_key_whose_objects_require_a_key_they_forbid_is_left_out(toy_tokenizer):
    """A map whose entries require a key no property describes, beside additionalProperties
    false (as apibuilder's interfaces): no entry is valid, so the optional key holding the map is
    left out; where it is required it is empty, and where it needs an entry, the schema is
    refused, naming the key to describe."""
    never = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"],
             "additionalProperties": False}
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 4},
                                               "map": {"type": "object", "additionalProperties": never}},
              "required": ["name"]}
    c = build_canvas(schema, toy_tokenizer)
    assert [s.path for s in c.slots] == ["name"]
    assert c.parse(c.fill({"name": "ab"})) == {"name": "ab"}
    c = build_canvas({**schema, "required": ["name", "map"]}, toy_tokenizer)
    assert c.parse(c.fill({"name": "ab", "map": {}})) == {"name": "ab", "map": {}}
    one = {**schema["properties"]["map"], "minProperties": 1}
    with pytest.raises(SchemaError, match="no object is valid; add it to properties"):
        build_canvas({**schema, "properties": {**schema["properties"], "map": one}, "required": ["name", "map"]},
                     toy_tokenizer)


@pytest.mark.parametrize("name", ["dynamicref_tree", "recursiveref_tree"])
def test_a_dynamic_reference_is_laid_out_as_its_target(toy_tokenizer, name):
    """`$dynamicRef` (2020-12) and `$recursiveRef` (2019-09) to the document's root: the children
    are nodes laid out field by field, not values of any shape."""
    schema = json.loads((CORPUS / f"keywords/{name}.json").read_text())
    c = build_canvas(schema, toy_tokenizer)
    assert {"children[0].label", "children[0].children[0].label"} <= {s.path for s in c.slots}
    tree = {"label": "a", "children": [{"label": "b", "children": [{"label": "c"}]}]}
    assert c.parse(c.fill(tree)) == tree


CIRCLE = {"type": "object", "properties": {"kind": {"const": "circle"}, "radius": {"type": "number"}},
          "required": ["kind", "radius"]}
SQUARE = {"type": "object", "properties": {"kind": {"enum": ["square", "box"]}, "side": {"type": "integer"}},
          "required": ["kind", "side"], "additionalProperties": False}


def test_objects_told_apart_by_a_keys_values_are_a_tagged_union(toy_tokenizer):
    """A oneOf of objects that each give one key values of their own is laid out as a tagged union
    (the tag a choice, each member's fields a variant), not as one slot of the whole value."""
    schema = {"type": "object", "properties": {"shape": {"oneOf": [CIRCLE, SQUARE]}}, "required": ["shape"]}
    c = build_canvas(schema, toy_tokenizer)
    assert [(s.path, s.kind) for s in c.slots] == [("shape.kind", "choice"), ("shape<circle>.radius", "regex"),
                                                   ("shape<square>.side", "regex")]
    assert c.slots[0].choices == ('"circle"', '"square"', '"box"')
    for value in ({"shape": {"kind": "box", "side": 2}}, {"shape": {"kind": "circle", "radius": 1.5}}):
        assert c.validate(c.fill(value)) == value
    beside = {"type": "object", "required": ["kind"], "properties": {"kind": {"type": "string"}}}   # as GeoJSON's
    c = build_canvas({**schema, "properties": {"shape": {**beside, "oneOf": [CIRCLE, SQUARE]}}}, toy_tokenizer)
    assert c.slots[0].choices == ('"circle"', '"square"', '"box"')
    assert c.validate(c.fill({"shape": {"kind": "circle", "radius": 2}})) == {"shape": {"kind": "circle", "radius": 2}}
    loose = {"required": ["kind"]}   # nothing but the tag required, and the tag's values shared or missing
    for members in ([CIRCLE, {**SQUARE, **loose, "properties": {**SQUARE["properties"], "kind": {"enum": ["circle"]}}}],
                    [{**CIRCLE, **loose}, {**SQUARE, "properties": {"side": {"type": "integer"}}, "required": []}]):
        c = build_canvas({**schema, "properties": {"shape": {"oneOf": members}}}, toy_tokenizer)
        assert [s.path for s in c.slots] == ["shape"]   # the whole value under one regex, as before


def test_objects_told_apart_by_a_key_only_one_requires_are_a_union_on_that_key(toy_tokenizer):
    """With no tag values of their own, members that each require a key no other member requires
    (a GitHub job has `runs-on` or `uses`) are a union whose selector names that key: the variant
    writes its value first, then its other fields."""
    circle = {**CIRCLE, "properties": {"radius": {"type": "number"}, "kind": {"type": "string"}}}
    square = {**SQUARE, "properties": {"side": {"type": "integer"}, "kind": {"type": "string"}}}
    schema = {"type": "object", "properties": {"shape": {"oneOf": [circle, square]}}, "required": ["shape"]}
    c = build_canvas(schema, toy_tokenizer)
    assert [(s.path, s.kind) for s in c.slots] == [
        ("shape", "choice"), ("shape<radius>.radius", "regex"), ("shape<radius>.kind", "regex"),
        ("shape<side>.side", "regex"), ("shape<side>.kind", "regex")]
    assert c.slots[0].choices == ('"radius"', '"side"')
    assert c.text().startswith('{"shape": {▢▢▢▢▢▢▢▢: ▢')
    for value in ({"shape": {"side": 2, "kind": "box"}}, {"shape": {"radius": 1.5, "kind": "round"}}):
        assert c.validate(c.fill(value)) == value
    nullable = {**schema, "properties": {"shape": {"oneOf": [circle, square, {"type": "null"}]}}}
    c = build_canvas(nullable, toy_tokenizer)
    assert c.slots[0].choices == ('"radius"', '"side"', "null") and c.parse(c.fill({"shape": None})) == {"shape": None}


def test_a_tagged_union_leaves_out_a_member_past_the_recursion_depth(toy_tokenizer):
    """An expression tree: at the deepest level only the members that do not recurse are offered."""
    schema = json.loads((CORPUS / "realistic/expression_ast.json").read_text())
    c = build_canvas(schema, toy_tokenizer)
    selectors = [s for s in c.slots if s.kind == "choice" and s.path.endswith(".node") or s.path == "expression.node"]
    assert '"binary"' in selectors[0].choices
    assert min(len(s.choices) for s in selectors) < len(selectors[0].choices)
    assert all('"binary"' not in s.choices for s in selectors if s.path.count("<") >= 3)


def test_a_draft_04_subschema_is_named_by_id_and_a_dollar_id_there_is_no_keyword(toy_tokenizer):
    """Draft 4 spells a subschema's URI `id`; a `$id` there (as schema generators write) moves
    no base, so `#` still means the document, and a property named `id` is a property."""
    from clover_struct.schema_refs import Document

    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "id": "https://example.com/root.json",
              "type": "object", "definitions": {"cvar": {"type": "string", "maxLength": 3}},
              "properties": {"vars": {"$id": "/properties/vars", "type": "array",
                                      "items": {"$ref": "#/definitions/cvar"}},
                             "unit": {"id": "units.json", "enum": ["ft", "m"]},
                             "copy": {"$ref": "units.json"},
                             "id": {"type": "integer"}}}
    doc = Document(schema)
    vars_ = doc.resolve(schema["properties"]["vars"], "vars")
    assert vars_.base == "https://example.com/root.json"
    assert doc.resolve(vars_.schema["items"], "vars[0]", vars_.base).schema == {"type": "string", "maxLength": 3}
    copy = doc.resolve(schema["properties"]["copy"], "copy")
    assert (copy.schema, copy.base) == ({"enum": ["ft", "m"]}, "https://example.com/units.json")   # its id taken in
    assert "id" in doc.anchored(schema, doc.base)["properties"]
    assert {s.path for s in build_canvas(schema, toy_tokenizer).slots} >= {"vars[0]", "unit", "copy", "id"}


SCORES = {"type": "object", "required": ["scores"], "properties": {"scores": {
    "type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 10},
    "contains": {"minimum": 9}, "maxContains": 2}}}


def test_the_repair_drops_the_last_optional_items_past_max_contains(toy_tokenizer):
    """maxContains counts across a list, so no single change meets it: the last optional items
    that match `contains` are dropped, as many as it is exceeded by."""
    assert finish(decoded(toy_tokenizer, SCORES, {"scores": [9, 1, 10, 10, 2, 9]})) == {"scores": [9, 1, 10, 2]}
    assert finish(decoded(toy_tokenizer, SCORES, {"scores": [9, 10]})) == {"scores": [9, 10]}
    required = {**SCORES, "properties": {"scores": {**SCORES["properties"]["scores"], "minItems": 5}}}
    with pytest.raises(ExtractionError, match="at most 2"):   # four items match, only one of them optional
        finish(decoded(toy_tokenizer, required, {"scores": [9, 10, 10, 1, 2, 9]}))


@pytest.mark.parametrize("otherwise", [{"not": {"required": ["x"]}}, {"properties": {"x": False}}])
def test_a_key_then_requires_and_else_forbids_may_be_left_out(toy_tokenizer, otherwise):
    """It had been written always (so the else side could never hold)."""
    schema = {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "x": {"type": "integer"}},
              "required": ["kind"], "if": {"properties": {"kind": {"const": "a"}}},
              "then": {"required": ["x"]}, "else": otherwise}
    assert keys(schema, toy_tokenizer) == ["x"]
    assert finish(decoded(toy_tokenizer, schema, {"kind": "b"})) == {"kind": "b"}
    assert finish(decoded(toy_tokenizer, schema, {"kind": "a", "x": 3})) == {"kind": "a", "x": 3}


DATE = {"type": "string", "format": "date"}


@pytest.mark.parametrize("draft, word", [("https://json-schema.org/draft/2020-12/schema", "dependentSchemas"),
                                         ("http://json-schema.org/draft-07/schema#", "dependencies")])
def test_the_keys_a_dependent_schema_describes_are_laid_out(toy_tokenizer, draft, word):
    """billing, described only under dependentSchemas, had no slot: every record with a card failed."""
    schema = {"$schema": draft, "type": "object", "properties": {"card": {"type": "integer"}}, "required": ["card"],
              word: {"card": {"properties": {"billing": {"type": "string", "maxLength": 4}}, "required": ["billing"]},
                     "cash": True}}
    assert {s.path for s in build_canvas(schema, toy_tokenizer).slots} == {"card", "billing"}
    assert keys(schema, toy_tokenizer) == []   # the card is written, so is its billing
    assert finish(decoded(toy_tokenizer, schema, {"card": 41, "billing": "Elm"})) == {"card": 41, "billing": "Elm"}


@pytest.mark.parametrize("rule", [
    {"if": {"properties": {"kind": {"const": "a"}}}, "then": {"properties": {"x": DATE}, "required": ["x"]}},
    {"dependentSchemas": {"kind": {"properties": {"x": DATE}, "required": ["x"]}}},
])
def test_a_key_only_a_branch_describes_is_laid_out_by_that_branch(toy_tokenizer, rule):
    """x, required and described by a branch alone, had been laid out as any JSON value."""
    schema = {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}}, "required": ["kind"], **rule}
    (x,) = [slot for slot in build_canvas(schema, toy_tokenizer).slots if slot.path == "x"]
    takes = lambda text: any(re.fullmatch(x.pattern, t) for t in (text, f'"{text}"'))  # noqa: E731
    assert takes("2027-05-12") and not any(map(takes, ("abc", "{}", "12")))


def test_a_branch_s_own_keys_under_unevaluated_properties_false_may_be_left_out(toy_tokenizer):
    """x and y had both been written always: under unevaluatedProperties false one of them is
    always unevaluated, so every record failed. Now each is a key the repair may leave out."""
    schema = {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}}, "required": ["kind"],
              "if": {"properties": {"kind": {"const": "a"}}},
              "then": {"properties": {"x": {"type": "integer"}}, "required": ["x"]},
              "else": {"properties": {"y": {"type": "string", "maxLength": 3}}, "required": ["y"]}}
    assert keys(schema, toy_tokenizer) == []
    assert keys({**schema, "unevaluatedProperties": False}, toy_tokenizer) == ["x", "y"]


def test_the_first_min_contains_items_are_ones_contains_asks_for(toy_tokenizer):
    """minContains 2: two items held to `contains` by the layout (one had been, so a list the
    model ended early failed the final check on every text)."""
    schema = {**SCORES, "properties": {"scores": {**SCORES["properties"]["scores"], "minContains": 2.0}}}
    canvas = build_canvas(schema, toy_tokenizer)   # (2.0 is an integer to JSON Schema)
    held = [s.path for s in canvas.slots if any(c.op == "ge" and c.bound == 9 for c in s.checks)]
    assert held == ["scores[0]", "scores[1]"]
    assert [g.required for g in canvas.groups if g.kind == "item"][:3] == [True, True, False]


@pytest.mark.parametrize("draft, tuple_", [(None, {"prefixItems": [{"type": "integer"}], "items": {"type": "string"}}),
                                           ("http://json-schema.org/draft-07/schema#",
                                            {"items": [{"type": "integer"}], "additionalItems": {"type": "string"}})])
def test_items_contains_asks_for_follow_the_prefix(toy_tokenizer, draft, tuple_):
    """Beside prefixItems, no item had been held to `contains`: a list the model ended early failed
    the final check on every text. Where maxItems leaves no room, the check alone holds it."""
    schema = {"type": "object", "properties": {"a": {"type": "array", **tuple_, "contains": {"const": "ok"},
                                                      "maxItems": 3}}, "required": ["a"]}
    schema |= {"$schema": draft} if draft else {}
    canvas = build_canvas(schema, toy_tokenizer)
    assert [s.path for s in canvas.slots][:2] == ["a[0]", "a[1]"] and canvas.slots[1].choices == ("\"ok\"",)
    assert [g.required for g in canvas.groups if g.kind == "item"] == [True, True, False]
    schema["properties"]["a"]["maxItems"] = 1
    assert [g.required for g in build_canvas(schema, toy_tokenizer).groups if g.kind == "item"] == [False]


def test_a_prefix_item_that_may_meet_contains_is_the_one_held_to_it(toy_tokenizer):
    """An item after the prefix had been added though the prefix's own could be the one: ['x']
    was refused as unsatisfiable, and under uniqueItems ['x', 'x'] failed on every text."""
    schema = {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": {"type": "string"},
              "contains": {"const": "x"}, "uniqueItems": True}
    canvas = build_canvas(schema, toy_tokenizer)
    assert [s.path for s in canvas.slots][:2] == ["[0]", "[1]"] and canvas.slots[1].choices == ('"x"',)
    assert [g.required for g in canvas.groups if g.kind == "item"][:3] == [True, True, False]


@pytest.mark.parametrize("draft, schema", [
    ("http://json-schema.org/draft-04/schema#", {"type": "array", "items": {"type": "integer"}, "contains": False}),
    ("http://json-schema.org/draft-04/schema#", {"type": "object", "required": ["a"], "propertyNames": False}),
    ("http://json-schema.org/draft-07/schema#", {"type": "array", "contains": {}, "minContains": 5, "maxItems": 3}),
    ("http://json-schema.org/draft-03/schema#", {"type": "object", "not": {}}),
])
def test_a_keyword_the_draft_lacks_is_no_rule(toy_tokenizer, draft, schema):
    """Draft 4 has no contains or propertyNames, draft 7 no minContains, draft 3 no not: such a
    schema had been refused as unsatisfiable."""
    build_canvas({"$schema": draft, **schema}, toy_tokenizer)


def test_a_one_of_whole_value_matches_at_most_one_member_a_regex_tells_apart(toy_tokenizer, make_toy_tokenizer,
                                                                             monkeypatch):
    """oneOf exclusivity in the grammar: the slot's automaton takes a text of the union's own regex
    (digits counted, as a number slot's: a 47-digit decimal would be read as an integral float)
    that at most one of the members whose regexes are exact (digits uncounted) matches. Members
    with a pattern, format, length or bound other than minimum 0 are left to the final check, as
    is a union whose automaton would pass PRODUCT transitions."""
    import clover_struct.constraints as constraints

    schema = {"type": "object", "required": ["amount"], "properties": {"amount": {"oneOf": [
        {"type": "integer"}, {"type": "number", "minimum": 0}]}}}
    (slot,) = build_canvas(schema, toy_tokenizer).slots
    assert "{0,11}" in slot.pattern and slot.one_of == ("-?(?:0|[1-9][0-9]*)", r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")

    def accepted(texts, tok):
        (auto,) = compile_canvas(build_canvas(schema, tok), tok)
        return [t for t in texts if auto.accepts(tok.encode(t))]

    texts = ["2", "0", "-3", "2.5", "0.5", "-2.5", "9" * 13, "9" * 9 + ".5", "7.0", "2.50"]
    assert accepted(texts, toy_tokenizer) == ["-3", "2.5", "0.5", "9" * 9 + ".5"]   # integers >= 0: both members
    # (7.0 is an integer too, and 2.50 is written 2.5: a number slot's fraction ends in no 0)
    monkeypatch.setattr(constraints, "PRODUCT", 1)   # (a tokenizer of its own: automata are cached per tokenizer)
    assert accepted(texts, make_toy_tokenizer()) == ["2", "0", "-3", "2.5", "0.5", "9" * 9 + ".5"]   # any member's
    formats = {"oneOf": [{"type": "string", "format": "email"}, {"type": "string", "maxLength": 3}, {"type": "string"}]}
    assert build_canvas({"type": "object", "properties": {"v": formats}}, toy_tokenizer).slots[0].one_of == ()


def test_a_too_long_string_or_list_inside_a_whole_value_is_cut_to_its_bound(toy_tokenizer):
    """A whole value's regex counts a string's maxLength only up to a few characters and no
    maxItems at all, so the final check catches a longer one: it is cut to the bound, as a
    number past its bound is clamped, in a whole value of a field, of the root, or of a map entry."""
    words = {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 2}
    either = {"anyOf": [{"type": "integer"}, words]}
    schema = {"type": "object", "required": ["cmd"], "properties": {"cmd": either}}
    assert finish(decoded(toy_tokenizer, schema, {"cmd": ["ls", "a-long-word"]})) == {"cmd": ["ls", "a-long-w"]}
    assert finish(decoded(toy_tokenizer, schema, {"cmd": ["a", "b", "c"]})) == {"cmd": ["a", "b"]}
    assert finish(decoded(toy_tokenizer, {"$defs": {}, **either}, ["a-long-word"])) == ["a-long-w"]
    jobs = {"type": "object", "additionalProperties": either, "minProperties": 1}
    assert finish(decoded(toy_tokenizer, jobs, {"build": ["a", "a-long-word"]})) == {"build": ["a", "a-long-w"]}


def test_a_whole_value_too_large_to_lay_out_exactly_keeps_its_types_and_scalars_exact():
    """Past LONGEST characters of exact regex at every depth, a whole value's slot takes any value of
    the types its schema allows, its scalars exact (an avro schema: a type name, or any object or
    list; before, any JSON value, and the model wrote a number)."""
    import re

    from clover_struct.schema_refs import Document
    from clover_struct.value_regex import LONGEST, ValueRegex
    record = {"type": "object", "properties": {f"field{i}": {"enum": [f"alpha{i}", f"beta{i}"]} for i in range(80)}}
    schema = {"anyOf": [{"enum": ["int", "long"]}, {"type": "integer"}, {"anyOf": [record, {"type": "null"}]},
                        {"$ref": "#/$defs/union"}], "$defs": {"union": {"type": "array", "items": record}}}
    doc = Document(schema)
    values, resolved = ValueRegex(doc), doc.resolve(schema, "v").schema
    assert len(values.of(schema, "v", depth=1)) > LONGEST
    slot = values.slot(resolved, "v")
    for text in ('"long"', "12", '{"field0": "beta0", "k": {"n": 1}}', "null", '["x", [2]]', "[]"):
        assert re.fullmatch(slot, text), text
    for text in ('"any name"', "1.5", "true"):
        assert not re.fullmatch(slot, text), text


def test_a_key_repeated_in_a_later_key_patterns_entries_is_dropped_there(toy_tokenizer):
    """A map's entries are numbered across its key patterns, so an error names one entry: a
    key written twice among the second pattern's entries drops the second of them (the first
    pattern's entries had the same paths, and the repair emptied one of those instead)."""
    schema = {"type": "object", "patternProperties": {"^[0-9]+$": {"type": "boolean"},
                                                      "^x": {"type": "string", "maxLength": 4}},
              "additionalProperties": False}
    c = build_canvas(schema, toy_tokenizer)
    assert len({s.path for s in c.slots}) == len(c.slots)
    entries, ids = c.tree.extra.entries, c.fill({})
    half = len(entries) // 2   # the "^x" entries after as many of "^[0-9]+$"
    for (_, key, value), written in zip([entries[0], entries[half], entries[half + 1]],
                                        [("1", True), ("xa", "b"), ("xa", "d")]):   # "xa" twice
        for i, v in zip((key, value), written):
            s = c.slots[i]
            toks = toy_tokenizer.encode(s.render(v))
            ids[s.start:s.end] = toks + [c.pad_id] * (s.budget - len(toks))
    prompt = [5, 6, 7]
    (d,) = decode(MockModel(toy_tokenizer, dict(enumerate(ids)), len(prompt)), [prompt], [c],
                  [compile_canvas(c, toy_tokenizer)])
    assert finish(d) == {"1": True, "xa": "b"}


def test_where_no_single_change_will_do_each_failing_optional_part_is_left_out(toy_tokenizer):
    """A rule the layout cannot place (if/then) fails on two lists: leaving out either alone still
    fails, so each is left out in turn and the record checked again; a failing part no optional
    one holds is the error."""
    names = {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 2}
    schema = {"type": "object", "properties": {"cmd": {"type": "string", "maxLength": 4}, "images": names,
                                               "tags": names},
              "required": ["cmd"], "if": {"required": ["cmd"]},
              "then": {"properties": {"images": {"type": "null"}, "tags": {"type": "null"}}}}
    values = {"cmd": "ls", "images": ["ab"], "tags": ["cd", "ef"]}
    assert finish(decoded(toy_tokenizer, schema, values)) == {"cmd": "ls"}
    with pytest.raises(ExtractionError, match="images"):
        finish(decoded(toy_tokenizer, {**schema, "required": ["cmd", "images"]}, values))


def test_map_entries_the_final_check_names_by_their_keys_are_left_out(toy_tokenizer):
    """The final check names a map entry by its key (`owners.bob`), the canvas by its place
    (`owners{1}`): of two failing entries one is left out, then the other mended by a single
    change (another value the model ranked, or left out too)."""
    schema = {"type": "object", "properties": {"owners": {"type": "object", "additionalProperties": {
        "type": "string", "maxLength": 4, "not": {"const": "x"}}}}, "required": ["owners"]}
    owners = finish(decoded(toy_tokenizer, schema, {"owners": {"al": "ok", "bob": "x", "cy": "x"}}))["owners"]
    assert owners["al"] == "ok" and len(owners) < 3 and "x" not in owners.values()


def test_the_next_best_values_are_every_value_the_slot_takes_cheapest_first(toy_tokenizer):
    """repair.alternatives (a best-first search handing out a position's unranked tokens one at a
    time) against every value the slot's automaton takes, priced one by one."""
    from clover_struct.repair import alternatives, cost

    d = decoded(toy_tokenizer, {"type": "object", "required": ["code"],
                                "properties": {"code": {"type": "string", "pattern": "^[ab]{1,3}c?$"}}}, {"code": "ab"})
    i, s = next((k, s) for k, s in enumerate(d.canvas.slots) if s.path == "code")
    a, pad, every = d.automata[i], d.canvas.pad_id, []

    def walk(seq, state):
        if len(seq) == s.budget or seq and seq[-1] == pad:
            every.append(seq + [pad] * (s.budget - len(seq)))
            return
        for t in a.allowed(state, s.budget - len(seq)).tolist():
            walk(seq + [t], a.next(state, t))
    walk([], a.initial)
    every = [v for v in every if v != d.ids[s.start:s.end]]
    got = list(alternatives(d, i, limit=10**6, pops=10**6))
    assert sorted(map(tuple, every)) == sorted(tuple(v) for _, v in got) and len(got) > 20
    assert [c for c, _ in got] == sorted(c for c, _ in got)
    assert all(abs(c - cost(d, i, v)) < 1e-6 for c, v in got)


@pytest.mark.parametrize("draft, kind", [("http://json-schema.org/draft-07/schema#", "string"),
                                         ("https://json-schema.org/draft/2020-12/schema", None)])
def test_up_to_draft_7_the_keywords_beside_a_ref_are_not_read(toy_tokenizer, draft, kind):
    """Draft 7 reads a $ref alone (its validator accepts "AB12" here; the layout had refused the
    schema, merging a string and an integer); from 2019-09 on the keywords beside it apply too."""
    schema = {"$schema": draft, "definitions": {"code": {"type": "string", "maxLength": 4}},
              "$defs": {"code": {"type": "string", "maxLength": 4}}, "type": "object",
              "properties": {"a": {"$ref": "#/definitions/code" if kind else "#/$defs/code", "type": "integer"}},
              "required": ["a"]}
    if kind is None:
        with pytest.raises(SchemaError, match="no value is both"):
            build_canvas(schema, toy_tokenizer)
        return
    assert finish(decoded(toy_tokenizer, schema, {"a": "AB12"})) == {"a": "AB12"}


@pytest.mark.parametrize("pattern, value", [(r"^[0-9]+$|^\$\{[a-z]+\}$", "${port}"), (r"^[^\<\>]*$", "ab"),
                                            (r"^\<b\>$", "<b>"), ("(?i)^[a-z]{3}$", "AbC")])
def test_patterns_of_anchored_branches_and_escaped_angles_are_held_exactly(toy_tokenizer, pattern, value):
    """`^A$|^B$` had been loosened to a search (the record failed its final check, blamed on
    look-around it lacks); \\< had been read as a word boundary, refusing the schema."""
    schema = {"type": "object", "properties": {"v": {"type": "string", "pattern": pattern}}, "required": ["v"]}
    (slot,) = build_canvas(schema, toy_tokenizer).slots
    assert not any(c.op == "pattern" for c in slot.checks), slot.checks   # held by the grammar itself
    assert finish(decoded(toy_tokenizer, schema, {"v": value})) == {"v": value}


@pytest.mark.parametrize("pattern, fix", [("(?a)^[a-z]{3}$", "inline flag"), (r"^abc\Z", "anchor it with"),
                                          ("^[a-z]{,5}$", "write {0,n}"), ("^a(?#note)$", "comment"),
                                          ("^[[:upper:]]{2}$", "POSIX class"), ("^[a-z&&[^x]]$", "set operation")])
def test_what_python_reads_in_a_pattern_and_no_grammar_does_is_named(toy_tokenizer, pattern, fix):
    schema = {"type": "object", "properties": {"v": {"type": "string", "pattern": pattern}}, "required": ["v"]}
    with pytest.raises(SchemaError, match=fix) as e:
        build_canvas(schema, toy_tokenizer)
    assert "(?:" not in str(e.value)   # the pattern as written, not the automaton's regex


@pytest.mark.parametrize("fmt, value", [("json-pointer", "/a~1b/0"), ("relative-json-pointer", "1/x")])
def test_json_pointer_formats_are_grammars(toy_tokenizer, fmt, value):
    schema = {"type": "object", "properties": {"p": {"type": "string", "format": fmt}}, "required": ["p"]}
    (slot,) = build_canvas(schema, toy_tokenizer).slots
    assert "~[01]" in slot.pattern
    assert finish(decoded(toy_tokenizer, schema, {"p": value})) == {"p": value}


def test_a_canvas_path_is_named_as_the_final_check_names_it(toy_tokenizer):
    """Map entries by their keys and union members' tags left out, a tag holding `<` or `{0}`
    too (a regex had cut `<c<1>>` short), so an error inside a member is found in it."""
    from clover_struct.repair import _data_path, _key_slots, failed_variants

    def member(tag, extra):
        return {"type": "object", "properties": {"kind": {"const": tag}, "n": {"type": "integer"}, **extra},
                "required": ["kind", "n"], "additionalProperties": False}
    union = {"oneOf": [member("c<1>{0}", {"note": {"type": "string", "maxLength": 4}}), member("sq", {})]}
    schema = {"type": "object", "required": ["zones"],
              "properties": {"zones": {"type": "object", "additionalProperties": union, "maxProperties": 1}}}
    d = decoded(toy_tokenizer, schema, {"zones": {"ab": {"kind": "c<1>{0}", "n": 2, "note": "no"}}})
    paths = {g.path: _data_path(d.canvas, d.ids, g.path, _key_slots(d.canvas)) for g in d.canvas.groups}
    assert paths == {"zones{0}": "zones.ab", "zones{0}<c<1>{0}>": "zones.ab", "zones{0}<c<1>{0}>.note": "zones.ab.note",
                     "zones{0}<sq>": "zones.ab"}
    circle = next(g.selector for g in d.canvas.groups if g.path == "zones{0}<c<1>{0}>")
    assert list(failed_variants(d, d.ids, ExtractionError("zones.ab.note", "too long"))) == [circle]


def test_a_part_no_value_fills_is_left_out_where_optional_and_refused_where_required(toy_tokenizer):
    """A key, items past minItems or map entries whose grammar no value fills (a pattern and a
    length that exclude each other) are left out, as an optional key of impossible bounds is; the
    whole schema had been refused."""
    never = {"type": "string", "pattern": "^$", "minLength": 2}
    schema = {"type": "object", "required": ["a", "items"], "properties": {
        "a": {"type": "integer"}, "b": never, "items": {"type": "array", "items": never},
        "map": {"type": "object", "additionalProperties": never}}}
    c = build_canvas(schema, toy_tokenizer)
    assert [s.path for s in c.slots] == ["a"] and c.parse(c.fill({"a": 4, "items": []})) == {"a": 4, "items": []}
    for required in (["b"], ["items"], ["map"]):
        least = {"items": {"minItems": 1}, "map": {"minProperties": 1}}.get(required[0], {})
        props = {**schema["properties"], required[0]: {**schema["properties"][required[0]], **least}}
        with pytest.raises(SchemaError, match="no value meets this field's pattern, length and bounds"):
            build_canvas({**schema, "properties": props, "required": required}, toy_tokenizer)


def test_a_maps_keys_keep_to_property_names_by_grammar(toy_tokenizer):
    """propertyNames' lengths and format (pydantic's dict[date, int]) are the key slot's grammar:
    only enum and pattern had been, so a key of four letters or no date failed the record."""
    import datetime

    from pydantic import BaseModel

    def key(names):
        schema = {"type": "object", "additionalProperties": {"type": "integer"}, "propertyNames": names}
        c = build_canvas(schema, toy_tokenizer)
        return c, compile_canvas(c, toy_tokenizer)[0], c.slots[0]

    enc = toy_tokenizer.encode
    _, short, slot = key({"maxLength": 3})
    assert slot.budget == 3 and short.accepts(enc("abc")) and not short.accepts(enc("abcd"))
    _, day, _ = key({"format": "date"})
    assert day.accepts(enc("2026-05-01")) and not day.accepts(enc("May 1"))

    class Visits(BaseModel):
        visits: dict[datetime.date, int]

    c = build_canvas(Visits, toy_tokenizer)
    assert c.slots[0].path == "visits{0}:key" and c.slots[0].pattern.startswith("[0-9]{4}-")


@pytest.mark.parametrize("rule", [{"dependentRequired": {"a": ["zz"]}}, {"dependencies": {"a": ["zz"]}},
                                  {"if": {"required": ["a"]}, "then": {"required": ["zz"]}}])
def test_a_key_a_rule_requires_is_written_though_no_property_describes_it(toy_tokenizer, rule):
    """As a required key the properties do not describe is (its value the map's); it had never
    been written, so every record failed the rule."""
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}, "required": ["a"], **rule}
    c = build_canvas(schema, toy_tokenizer)
    assert [s.path for s in c.slots][:2] == ["a", "zz"]
    assert c.validate(c.fill({"a": "x", "zz": 4})) == {"a": "x", "zz": 4}


def test_unevaluated_items_hold_past_prefix_items(toy_tokenizer):
    """unevaluatedItems false after prefixItems allows no more items (four any-value slots had
    been laid out, and every record with one failed); a schema types them."""
    one = {"type": "array", "prefixItems": [{"type": "integer"}], "maxItems": 5}
    assert [s.path for s in build_canvas({**one, "unevaluatedItems": False}, toy_tokenizer).slots] == ["[0]"]
    typed = build_canvas({**one, "unevaluatedItems": {"type": "boolean"}}, toy_tokenizer)
    assert [s.kind for s in typed.slots][1:] == ["choice"] * 4


def test_a_map_key_pydantic_refuses_is_its_entry_s_key_and_the_entry_is_dropped(toy_tokenizer):
    """2027-02-29 passes the date grammar (which leaves leap years to the check) and fails
    pydantic's: the error lies at the entry's key, so the optional entry is dropped; it had been
    placed at the value and the record failed."""
    import datetime

    from pydantic import BaseModel

    class Visits(BaseModel):
        visits: dict[datetime.date, int]

    assert finish(decoded(toy_tokenizer, Visits, {"visits": {"2027-02-29": 3}})) == Visits(visits={})
    kept = finish(decoded(toy_tokenizer, Visits, {"visits": {"2028-02-29": 3}}))
    assert kept == Visits(visits={datetime.date(2028, 2, 29): 3})


FORMAT_FORMS = {   # format -> (values jsonschema takes, values it refuses): the grammar agrees on each
    "date-time": (["2027-05-12T10:30:00.123Z", "2027-05-12t10:30:00z"], ["2027-05-12 10:30:00Z"]),
    "time": (["10:30:00.25+05:30"], ["10:30"]),
    "uri": (["http://10.0.0.7/status", "file:///var/log/app.log", "http://u:p@host/", "http://[::1]:8080/",
             "http://my_host/x", "file:/x"], ["no scheme", "http://h:80abc"]),
    "uri-reference": (["//host/x", "../x", "#frag", "a:b"], ["//host:80abc", "//H:56("]),
    "iri": (["https://例え.jp/パス"], ["例え"]),
    "iri-reference": (["/パス?q=値"], ["//h:8x"]),
    "idn-hostname": (["bücher.de", "例え.jp"], ["-x.de"]),
    "idn-email": (["用户@例子.公司"], ["用户"]),
}


@pytest.mark.parametrize("fmt", FORMAT_FORMS)
def test_a_format_s_grammar_takes_the_forms_its_check_takes(toy_tokenizer, fmt):
    """Fractional seconds, a lower-case t and z, URIs with an IP, userinfo or no host had been
    out of their grammars (a text's value was read as another), and iri and the idn- formats had
    none (any text passed: iri has no check without rfc3987)."""
    import jsonschema

    schema = {"type": "object", "properties": {"v": {"type": "string", "format": fmt}}, "required": ["v"]}
    (slot,) = build_canvas(schema, toy_tokenizer).slots
    check = jsonschema.Draft202012Validator.FORMAT_CHECKER.conforms
    good, bad = FORMAT_FORMS[fmt]
    assert [bool(re.fullmatch(slot.pattern, v)) for v in good + bad] == [True] * len(good) + [False] * len(bad)
    assert not [(v, c) for v in good for c in slot.checks if c.violation(v)]   # the slot's date check agrees
    unchecked = fmt.startswith("iri")   # (rfc3987, its checker, is GPL: not a dependency)
    assert all(check(v, fmt) for v in good) and (unchecked or not any(check(v, fmt) for v in bad))


@pytest.mark.parametrize("rule", [{"type": "string", "minLength": 2.0, "maxLength": 3.0},
                                  {"type": "array", "items": {"type": "integer"}, "maxItems": 2.0},
                                  {"type": "object", "additionalProperties": {"type": "integer"},
                                   "maxProperties": 1.0}])
def test_a_count_written_as_a_whole_float_is_that_count(toy_tokenizer, rule):
    """maxLength 3.0 is an integer to the metaschema; it had been 'a bug in clover-struct'
    (a float multiplying a list) and minLength 2.0 an IndexError."""
    as_float = build_canvas({"type": "object", "properties": {"v": rule}, "required": ["v"]}, toy_tokenizer)
    whole = {k: int(v) if isinstance(v, float) else v for k, v in rule.items()}
    as_int = build_canvas({"type": "object", "properties": {"v": whole}, "required": ["v"]}, toy_tokenizer)
    assert as_float.describe().replace(".0", "") == as_int.describe().replace(".0", "")


def test_verbatim_where_a_union_is_one_pattern_is_refused(toy_tokenizer):
    """A verbatim field in a one_slot union or in a union no key tells apart had been laid out
    as a free pattern: a value the text lacks, no span, no error."""
    from typing import Annotated, Literal, Union

    from pydantic import BaseModel, Field

    copied = {"verbatim": True}

    class Rwy(BaseModel):
        kind: Literal["rwy"]
        rwy: str = Field(pattern=r"^[0-3][0-9][LRC]?$", json_schema_extra=copied)

    class Twy(BaseModel):
        kind: Literal["twy"]
        twy: str = Field(pattern=r"^[A-Z][0-9]?$", json_schema_extra=copied)

    class OneSlot(BaseModel):
        what: Union[Rwy, Twy] = Field(discriminator="kind", json_schema_extra={"one_slot": True})

    class Untagged(BaseModel):
        x: Union[Annotated[str, Field(pattern=r"^[0-3][0-9][LRC]?$", json_schema_extra=copied)], int]

    class Tagged(BaseModel):
        what: Union[Rwy, Twy] = Field(discriminator="kind")

    for schema, why in ((OneSlot, "one_slot union's fields are one pattern"), (Untagged, "drop verbatim")):
        with pytest.raises(SchemaError, match=why):
            build_canvas(schema, toy_tokenizer)
    assert sum(s.verbatim for s in build_canvas(Tagged, toy_tokenizer).slots) == 2
