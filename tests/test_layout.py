"""Canvas layout: fixed spans, slots, budgets, groups, parse/fill, and every SchemaError."""

import datetime
import enum
import json
import re
from typing import Annotated, Literal, Optional, Union

import pytest
from pydantic import BaseModel, Field

from clover_struct.constraints import compile_canvas
from clover_struct.errors import ExtractionError, SchemaError
from clover_struct.patterns import CHAR
from clover_struct.schema_walk import build_canvas


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Flat(BaseModel):
    name: str = Field(max_length=10)
    count: int = Field(ge=0, le=500)
    lat: float = Field(ge=-90, le=90)
    ok: bool
    color: Color
    day: datetime.date
    note: Optional[str] = None


class Item(BaseModel):
    name: str = Field(max_length=4)
    qty: int = Field(ge=0, le=9)


class Order(BaseModel):
    items: list[Item] = Field(min_length=1, max_length=3)


class Circle(BaseModel):
    kind: Literal["circle"]
    radius: int = Field(ge=0, le=999)


class Poly(BaseModel):
    kind: Literal["poly"]
    sides: int = Field(ge=3, le=9)
    label: str = Field(max_length=3)


Shape = Annotated[Union[Circle, Poly], Field(discriminator="kind")]


class Zone(BaseModel):
    shape: Shape
    backup: Optional[Shape] = None
    contact: Optional[Item] = None


def text_of(canvas, ids):
    return "".join(canvas.tokenizer.token_bytes(t).decode() for t in ids)


def test_fixed_text_is_tokenized_once_and_slots_are_masks(toy_tokenizer):
    c = build_canvas(Flat, toy_tokenizer)
    assert c.text("#") == ('{"name": "' + "#" * 10 + '", "count": ###, "lat": ' + "#" * 10 + ', "ok": #####, '
                           '"color": #######, "day": "##########", "note": ' + "#" * 26 + "}")
    assert c.ids[:c.slots[0].start] == tuple(toy_tokenizer.encode('{"name": "'))
    assert c.ids[c.slots[0].end:c.slots[1].start] == tuple(toy_tokenizer.encode('", "count": '))
    at_slot = {p for s in c.slots for p in range(s.start, s.end)}
    assert all((t == c.mask_id) == (i in at_slot) for i, t in enumerate(c.ids))
    assert [s.path for s in c.slots] == ["name", "count", "lat", "ok", "color", "day", "note"]


def test_budgets_patterns_and_checks(toy_tokenizer):
    slots = {s.path: s for s in build_canvas(Flat, toy_tokenizer).slots}
    assert (slots["name"].json_kind, slots["name"].pattern, slots["name"].length) == ("string", CHAR + "*", (0, 10))
    assert slots["count"].budget == 3 and [bool(re.fullmatch(slots["count"].pattern, v)) for v in (
        "0", "7", "500", "501", "-1", "07")] == [True, True, True, False, False, False]   # 0..500: ge=0, le=500
    assert slots["lat"].pattern.startswith("-?(?:0|[1-9][0-9]{0,1})") and slots["lat"].budget == 10
    assert [(k.op, k.bound) for k in slots["lat"].checks] == [("ge", -90), ("le", 90)]
    assert slots["day"].json_kind == "string" and slots["day"].budget == 10
    note = slots["note"]   # Optional[str]: the slot covers the quotes or null
    assert note.nullable and note.json_kind == "value" and note.pattern.startswith('null|"')
    assert note.budget == 24 + 2


def test_budget_can_be_set_per_field_and_per_canvas(toy_tokenizer):
    class M(BaseModel):
        a: str = Field(json_schema_extra={"max_tokens": 7})
        b: str
        c: list[int] = Field(max_length=2, json_schema_extra={"max_tokens": 2})
    slots = build_canvas(M, toy_tokenizer, max_tokens=5).slots
    assert [s.budget for s in slots] == [7, 5, 2, 2]


def test_choice_slots(toy_tokenizer):
    class M(BaseModel):
        ok: bool
        color: Color
        level: Optional[Literal[1, 2, "x"]] = None
    a, b, c = build_canvas(M, toy_tokenizer).slots
    assert a.kind == "choice" and a.choices == ("true", "false") and a.budget == 5
    assert b.choices == ('"red"', '"green"') and b.budget == 7
    assert c.choices == ("1", "2", '"x"', "null") and c.nullable and c.budget == 4
    assert all(len(ids) <= s.budget for s in (a, b, c) for ids in s.choice_ids)
    assert b.choice_ids[0] == tuple(toy_tokenizer.encode('"red"'))


def test_a_float_choice_is_written_as_its_enum_text(toy_tokenizer):
    class M(BaseModel):
        hours: Literal[0.0, 8.0, 5.75, -3.5] = 0.0   # a UTC offset, as NoFlyZone decides it
    c = build_canvas(M, toy_tokenizer)
    assert c.slots[0].choices == ("0.0", "8.0", "5.75", "-3.5")
    for hours in (0.0, 8.0, 5.75, -3.5):
        assert c.validate(c.fill(M(hours=hours))).hours == hours


def test_fill_and_parse_round_trip(toy_tokenizer):
    c = build_canvas(Flat, toy_tokenizer)
    flat = Flat(name='say "hi"', count=42, lat=-51.25, ok=False, color=Color.GREEN, day="2024-02-29", note=None)
    ids = c.fill(flat)
    assert text_of(c, ids[c.slots[0].start:c.slots[0].end]).startswith('say \\"hi\\"')
    assert c.parse(ids) == {"name": 'say "hi"', "count": 42, "lat": -51.25, "ok": False, "color": "green",
                            "day": "2024-02-29", "note": None}
    assert c.validate(ids) == flat


def test_parse_names_the_slot_that_is_not_a_value(toy_tokenizer):
    c = build_canvas(Flat, toy_tokenizer)
    good = c.fill(Flat(name="a", count=1, lat=0.5, ok=True, color=Color.RED, day="2024-01-01"))
    count = c.slots[1]

    def with_count(tokens):
        ids = list(good)
        ids[count.start:count.end] = tokens
        return ids
    pad, enc = toy_tokenizer.pad_id, toy_tokenizer.encode
    for tokens, reason in [(enc("1a") + [pad], "not a valid JSON value"), ([c.mask_id] * 3, "not filled"),
                           ([pad] + enc("12"), "follows padding"), ([pad] * 3, "slot is empty")]:
        with pytest.raises(ExtractionError, match=reason) as e:
            c.parse(with_count(tokens))
        assert e.value.path == "count"
    with pytest.raises(ExtractionError) as e:   # a value the automaton allows but the bounds do not
        c.validate(with_count(enc("999")))
    assert e.value.path == "count"


def test_list_items_are_groups_present_first(toy_tokenizer):
    c = build_canvas(Order, toy_tokenizer)
    assert [(g.path, g.kind, g.required, g.prev) for g in c.groups] == [
        ("items[0]", "item", True, None), ("items[1]", "item", False, 0), ("items[2]", "item", False, 1)]
    g1 = c.groups[1]
    assert g1.slots == (2, 3) and all(c.slots[i].group == 1 for i in g1.slots)
    assert text_of(c, [c.ids[p] for p in g1.fixed]) == ', {"name": "", "qty": }'   # its separator included
    assert g1.start == c.groups[0].end and c.groups[2].end == len(c) - 2             # then "]}"
    ids = c.fill({"items": [{"name": "ab", "qty": 1}, {"name": "", "qty": 2}]})
    assert [c.is_present(ids, g) for g in range(3)] == [True, True, False]
    assert all(t == c.pad_id for i in c.groups[2].slots for t in ids[c.slots[i].start:c.slots[i].end])
    assert c.parse(ids) == {"items": [{"name": "ab", "qty": 1}, {"name": "", "qty": 2}]}
    # Parsing drops an absent item wherever it is.
    ids = c.fill({"items": [{"name": "a", "qty": 1}, {"name": "b", "qty": 2}, {"name": "c", "qty": 3}]})
    for i in c.groups[1].slots:
        ids[c.slots[i].start:c.slots[i].end] = [c.pad_id] * c.slots[i].budget
    assert [x["name"] for x in c.parse(ids)["items"]] == ["a", "c"]


class Ledger(BaseModel):
    title: str = Field(max_length=4)
    items: list[Item] = Field(min_length=1, max_length=3, json_schema_extra={"item_blocks": True})
    note: str = Field(max_length=4)


def test_item_blocks_start_a_block_at_every_item_after_the_first(toy_tokenizer):
    c = build_canvas(Ledger, toy_tokenizer)
    items = [g for g in c.groups if g.kind == "item"]
    assert c.blocks == (0, items[1].start, items[2].start)
    assert c.spans() == [(0, items[1].start), (items[1].start, items[2].start), (items[2].start, len(c))]
    assert c.spans(6) == [(x, min(x + 6, b)) for a, b in c.spans() for x in range(a, b, 6)]
    assert text_of(c, c.ids[items[1].start:]).startswith(", {")   # a block begins with its separator
    assert c.slots[-1].path == "note" and c.slots[-1].start > items[2].start   # what follows joins the last
    assert "blocks at 0, " in c.describe()
    # the layout of the text is the one without blocks
    plain = build_canvas(Order, toy_tokenizer)
    assert text_of(c, c.ids).count('{"name": ') == text_of(plain, plain.ids).count('{"name": ') == 3
    assert build_canvas(Order, toy_tokenizer).blocks == (0,)
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer"},
                                                      "maxItems": 2, "item_blocks": True}}}
    assert len(build_canvas(schema, toy_tokenizer).blocks) == 2
    with pytest.raises(SchemaError, match="item_blocks applies to lists only"):
        build_canvas({"type": "object", "properties": {"x": {"type": "string", "item_blocks": True}}}, toy_tokenizer)


def test_an_all_empty_item_reads_as_absent(toy_tokenizer):
    class Tags(BaseModel):
        tags: list[str] = Field(max_length=3)
    c = build_canvas(Tags, toy_tokenizer)
    assert c.parse(c.fill({"tags": ["a", ""]})) == {"tags": ["a"]}


def test_nested_lists_link_groups_to_parents(toy_tokenizer):
    class Grid(BaseModel):
        rows: Optional[list[list[int]]] = Field(None, max_length=2)
    # Grid.rows has no inner bound: an open list inside, laid out up to Options.items at its depth
    open_inner = build_canvas(Grid, toy_tokenizer)
    assert [g.path for g in open_inner.groups if g.parent == 0] == ["rows[0][0]", "rows[0][1]", "rows[0][2]"]
    assert open_inner.parse(open_inner.fill({"rows": [[1, 2, 3], [4]]})) == {"rows": [[1, 2, 3], [4]]}

    class Grid2(BaseModel):
        rows: Optional[list[Annotated[list[int], Field(max_length=2)]]] = Field(None, max_length=2)
    c = build_canvas(Grid2, toy_tokenizer)
    assert [(g.path, g.parent) for g in c.groups] == [("rows[0]", None), ("rows[0][0]", 0), ("rows[0][1]", 0),
                                                       ("rows[1]", None), ("rows[1][0]", 3), ("rows[1][1]", 3)]
    assert c.groups[0].children == (1, 2) and c.groups[0].slots == (0, 1)
    assert c.parse(c.fill({"rows": [[1], [2, 3]]})) == {"rows": [[1], [2, 3]]}
    assert c.parse(c.fill({"rows": None})) == {"rows": None}     # nullable list: no item is null


def test_discriminated_union_is_a_selector_and_variant_groups(toy_tokenizer):
    c = build_canvas(Zone, toy_tokenizer)
    sel = c.slots[0]
    assert sel.path == "shape.kind" and sel.choices == ('"circle"', '"poly"')
    circle, poly = c.groups[:2]
    assert (circle.kind, circle.selector, circle.tags, circle.path) == ("variant", 0, ('"circle"',), "shape<circle>")
    assert [c.slots[i].path for i in poly.slots] == ["shape<poly>.sides", "shape<poly>.label"]
    assert c.slots[c.groups[2].selector].choices == ('"circle"', '"poly"', "null")   # Optional union
    zone = Zone(shape=Poly(kind="poly", sides=5, label="ab"), backup=None, contact=Item(name="x", qty=0))
    ids = c.fill(zone)
    assert not c.is_present(ids, 0) and c.is_present(ids, 1)
    assert all(c.is_empty(ids, i) for i in circle.slots)
    assert c.parse(ids) == {"shape": {"kind": "poly", "sides": 5, "label": "ab"}, "backup": None,
                            "contact": {"name": "x", "qty": 0}}
    assert c.validate(ids) == zone
    contact = c.groups[-1]
    assert (contact.kind, contact.path) == ("optional", "contact")
    assert c.parse(c.fill(zone.model_copy(update={"contact": None})))["contact"] is None


ONE_SLOT = {"one_slot": True}
OneSlotShape = Annotated[Union[Circle, Poly], Field(discriminator="kind", json_schema_extra=ONE_SLOT)]


class Drawing(BaseModel):
    shapes: list[OneSlotShape] = Field(max_length=2)
    spare: Optional[OneSlotShape]


class Bag(BaseModel):
    kind: Literal["bag"]
    items: list[Item] = Field(max_length=2)


def test_one_slot_union_is_one_slot_holding_the_variant_object(toy_tokenizer):
    c = build_canvas(Drawing, toy_tokenizer)
    assert [s.path for s in c.slots] == ["shapes[0]", "shapes[1]", "spare"]
    first, _, spare = c.slots
    tokens = lambda text: len(toy_tokenizer.encode(text))  # noqa: E731
    # the longer variant: its fixed texts, its tag, then one digit and three characters
    fixed = ('{"kind": ', '"poly"', ', "sides": ', ', "label": "', '"}')
    assert first.budget == sum(map(tokens, fixed)) + 1 + 3
    assert not first.nullable and spare.nullable and spare.pattern.startswith("null|")
    drawing = Drawing(shapes=[Poly(kind="poly", sides=5, label="ab"), Circle(kind="circle", radius=7)], spare=None)
    ids = c.fill(drawing)
    assert c.slot_text(ids, 0) == '{"kind": "poly", "sides": 5, "label": "ab"}' and c.slot_text(ids, 2) == "null"
    assert c.validate(ids) == drawing
    assert all(a.accepts(ids[s.start:s.end]) for s, a in zip(c.slots[:2], compile_canvas(c)))
    assert c.parse(c.fill({"shapes": [], "spare": {"kind": "circle", "radius": 3}})) == {
        "shapes": [], "spare": {"kind": "circle", "radius": 3}}
    assert first.violation({"kind": "poly", "sides": 12, "label": "ab"}) == "sides: 12 breaks le 9"
    assert first.violation({"kind": "circle", "radius": 12}) is None
    with pytest.raises(ValueError, match="no variant has kind"):
        c.fill({"shapes": [{"kind": "star"}], "spare": None})


def test_json_schema_input_matches_the_model(toy_tokenizer, tmp_path):
    schema = Flat.model_json_schema()
    from_dict = build_canvas(json.loads(json.dumps(schema)), toy_tokenizer)
    assert from_dict.ids == build_canvas(Flat, toy_tokenizer).ids and from_dict.model is None
    path = tmp_path / "flat.schema.json"
    path.write_text(json.dumps(schema))
    assert build_canvas(str(path), toy_tokenizer).ids == from_dict.ids
    hand = {"type": "object", "properties": {
        "n": {"type": ["integer", "null"], "minimum": 0, "exclusiveMaximum": 100},
        "when": {"type": "string", "format": "date-time"},
        "kind": {"const": "a"},
        "ids": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2}}}
    c = build_canvas(hand, toy_tokenizer)
    n, when, kind = c.slots[:3]
    assert n.nullable and [(k.op, k.bound) for k in n.checks] == [("ge", 0), ("lt", 100)]
    assert when.json_kind == "string" and "T" in when.pattern and kind.choices == ('"a"',)
    data = {"n": None, "when": "2024-05-01T10:00:00Z", "kind": "a", "ids": ["abc"]}
    assert c.parse(c.fill(data)) == data


def test_describe_lists_fields_budgets_and_patterns(toy_tokenizer):
    text = str(build_canvas(Zone, toy_tokenizer))
    assert "shape<poly>.sides" in text and "variant group, present iff shape.kind is \"poly\"" in text
    assert "ge 3  le 9" in text and "contact:" in text and "optional group" in text
    assert build_canvas(Order, toy_tokenizer).describe().count("item group") == 3


def test_verbatim_comes_from_pydantic_and_json_schema_alike(toy_tokenizer):
    schema = {"type": "object", "properties": {"id": {"type": "string", "maxLength": 8, "verbatim": True},
                                               "note": {"anyOf": [{"type": "string"}, {"type": "null"}],
                                                        "verbatim": True}, "free": {"type": "string"}}}
    canvas = build_canvas(schema, toy_tokenizer)
    assert [s.verbatim for s in canvas.slots] == [True, True, False]
    assert canvas.describe().count("  verbatim") == 2


def test_canvases_are_cached_and_checked_against_the_context(toy_tokenizer):
    assert build_canvas(Flat, toy_tokenizer) is build_canvas(Flat, toy_tokenizer)
    need = len(build_canvas(Flat, toy_tokenizer))
    assert build_canvas(Flat, toy_tokenizer, context=need)
    least = build_canvas(Flat, toy_tokenizer, context=need - 1)   # `note`, which has a default, left out
    assert [s.path for s in least.slots] == ["name", "count", "lat", "ok", "color", "day"] and least.left_out == ("note",)
    with pytest.raises(SchemaError, match=f"needs {len(least)} tokens but only 50 fit") as e:
        build_canvas(Flat, toy_tokenizer, context=50)
    largest = max(least.slots, key=lambda s: s.end - s.start)
    assert e.value.path == largest.path and f"{largest.end - largest.start} of them this field's" in e.value.message


class Node(BaseModel):
    name: str
    children: list["Node"] = Field(max_length=2)


class A(BaseModel):
    x: int


class B(BaseModel):
    y: int


def model(**fields):
    return type("M", (BaseModel,), {"__annotations__": {k: v[0] for k, v in fields.items()},
                                    **{k: v[1] for k, v in fields.items() if len(v) > 1}})


@pytest.mark.parametrize("schema, path, fix", [
    (model(u=(Annotated[Union[Bag, Circle], Field(discriminator="kind", json_schema_extra=ONE_SLOT)],)),
     "u<bag>", "one_slot union needs variants of plain fields"),
    (model(b=(bytes,)), "b", "use str"),
    (model(c=(Color, Field(json_schema_extra={"max_tokens": 3}))), "c", "raise max_tokens to 7"),
    (model(s=(str, Field(min_length=5, max_length=2))), "s", "exceeds max_length"),
    (model(p=(str, Field(pattern=r"^\d{3}-\d{4}$", max_length=5))), "p", "no value meets this field's pattern"),
    (model(**{"é": (int,)}), "", "cannot write"),
    ({"type": "object", "properties": {"x": {"$ref": "other.json#/X"}}}, "x", "outside this schema"),
    ({"$defs": {"a": {}}, "properties": {"x": {"$ref": "schema.json#/$defs/a"}}}, "x", r"outside this schema \(schema.json\)"),
    ({"type": "object", "properties": {"x": {"$ref": "#/$defs/nope"}}}, "x", "finds no '\\$defs'"),
    ({"type": "object", "properties": {"x": False}, "required": ["x"]}, "x", "no value is valid"),
    ({"type": "object", "properties": {"x": {"enum": []}}, "required": ["x"]}, "x", "enum is empty"),
    ({"type": "object", "properties": {"n": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 1}},
      "required": ["n"]}, "n", "no integer meets its bounds"),
    (model(k=(int, Field(multiple_of=7, ge=1, le=6))), "k", "no integer meets its bounds and multipleOf"),
    (model(f=(float, Field(gt=0, lt=1e-9))), "f", "no number of at most 6 decimals meets its bounds"),
    (model(a=(list[int], Field(min_length=2, max_length=1))), "a", "minItems 2 exceeds maxItems 1"),
    ({"type": "object", "properties": {"a": {"type": "array", "items": False, "minItems": 1}}, "required": ["a"]},
     "a", r"minItems 1 exceeds the 0 items it allows \(items false\)"),
    ({"type": "object", "properties": {"a": {"type": "array", "prefixItems": [{}], "items": False, "minItems": 2}},
      "required": ["a"]}, "a", "exceeds the 1 items it allows"),
    ({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True,
                                             "minItems": 3}}, "required": ["a"]},
     "a", r"minItems 3 unique items \(uniqueItems\) exceeds the 2 values an item may take"),
    ({"type": "object", "properties": {"a": {"type": "array", "contains": {"const": 3}, "maxContains": 0}},
      "required": ["a"]}, "a", r"minContains 1 \(its default\) exceeds maxContains 0"),
    ({"type": "object", "properties": {"a": {"type": "array", "contains": False}}, "required": ["a"]},   # (decoded,
     "a", r"contains is false, which no item matches, and minContains 1 \(its default\)"),              # then failed)
    ({"type": "object", "properties": {"a": {"type": "array", "contains": {}, "minContains": 3, "maxItems": 2}},
      "required": ["a"]}, "a", "minContains 3 exceeds maxItems 2"),
    # each of these had been decoded, then failed with advice about the text
    ({"type": "object", "properties": {"a": {"not": {}}}, "required": ["a"]}, "a", "`not` holds a schema every value"),
    ({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"},
                                             "contains": {"type": "string"}}}, "required": ["a"]},
     "a", "no item meets both its items and its contains schema, and minContains 1"),
    ({"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "b"], "maxProperties": 1}, "",
     "it requires 2 keys, more than maxProperties 1"),
    ({"type": "object", "propertyNames": False, "minProperties": 1}, "", "propertyNames is false"),
    ({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "properties": {"A": {}}, "required": ["A"]}, "",
     "the key 'A' it requires breaks its propertyNames"),
    ({"type": "object", "properties": {"o": {"type": "object", "properties": {"b": {}}, "minProperties": 2,
                                             "additionalProperties": False}}, "required": ["o"]},
     "o", "minProperties 2 exceeds the 1 keys it allows"),
    (model(s=(str, Field(min_length=10_000))), "s", "lower min_length"),
    ({"$schema": 5, "type": "string"}, "$schema", "by its URI, a string, not 5"),   # (had been called our bug)
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^(ab){1000000}$"}}, "required": ["s"]},
     "s", "asks for at least 2000000 characters"),   # refused before its automaton (which had filled the memory)
    (model(j=(__import__("pydantic").Json[list[int]], ...)), "j", r"declare the field as its inner type"),
    ({"type": "object", "properties": {"n": {"type": "number", "maximum": float("nan")}}, "required": ["n"]},
     "n", "no number of at most 6 decimals meets its bounds"),
    ({"type": "object", "properties": {"n": {"type": "integer", "minimum": float("inf")}}, "required": ["n"]},
     "n", "no integer meets its bounds"),
    ({"allOf": [{"type": "string"}, {"type": "integer"}]}, "", "no value is both"),
    ({"type": "object", "properties": {"a": {"type": "string", "maxLength": 2, "const": "hello"}}, "required": ["a"]},
     "a", r"no value of enum/const \['hello'\] meets the type, maxLength beside it"),   # (an InternalError before)
    ({"type": "object", "properties": {"a": {"const": "abc", "pattern": "^[0-9]+$"}}, "required": ["a"]},
     "a", "meets the pattern beside it"),
    ({"type": "object", "properties": {"a": {"type": "integer", "enum": [1, 3], "minimum": 5}}, "required": ["a"]},
     "a", "meets the type, minimum beside it"),
    ({"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}, "required": ["next"]}},
      "$ref": "#/$defs/n"}, "next.next.next", "no way to stop"),
])
def test_schema_errors_name_the_field_and_the_fix(toy_tokenizer, schema, path, fix):
    with pytest.raises(SchemaError, match=fix) as e:
        build_canvas(schema, toy_tokenizer)
    assert e.value.path == path and f"`{path or '<root>'}`" in str(e.value)


@pytest.mark.parametrize("schema, fix", [
    (__import__("pydantic").BaseModel, "BaseModel itself has no fields"),
    ({"type": "object", "properties": {"a": {"enum": {1, 2}}}}, r"holds what JSON has no value for \(set"),
    ({"type": "object", "properties": {"a": {"const": object()}}}, "holds what JSON has no value for"),
])
def test_a_schema_that_is_no_json_schema_is_named_as_such(toy_tokenizer, schema, fix):
    """Not a bug of ours (these had said "this is a bug in clover-struct")."""
    with pytest.raises(SchemaError, match=fix):
        build_canvas(schema, toy_tokenizer)
    titled = __import__("pydantic").create_model("Odd", __config__={"title": "\ud800"}, a=(int, ...))
    with pytest.raises(SchemaError, match="lone surrogate"):   # (an InternalError at the prompt before)
        build_canvas(titled, toy_tokenizer)
    circular = {"type": "object", "properties": {}}
    circular["properties"]["self"] = circular
    with pytest.raises(SchemaError, match="Circular reference"):
        build_canvas(circular, toy_tokenizer)


def test_schemas_that_differ_in_key_order_are_laid_out_each_in_its_own(toy_tokenizer):
    """The canvas cache had keyed on the schema with sorted keys: the second order got the first's."""
    props = {"name": {"type": "string", "maxLength": 4}, "floor": {"type": "integer"}}
    first, second = ({"type": "object", "properties": p, "required": list(p)}
                     for p in (props, dict(reversed(props.items()))))
    assert [s.path for s in build_canvas(first, toy_tokenizer).slots] == ["name", "floor"]
    assert [s.path for s in build_canvas(second, toy_tokenizer).slots] == ["floor", "name"]


def test_a_schema_read_with_decimal_numbers_is_laid_out_as_its_numbers(toy_tokenizer):
    """json.loads(parse_float=Decimal) keeps multipleOf 0.01 exact; the layout reads the numbers."""
    from decimal import Decimal

    text = '{"type": "object", "properties": {"p": {"type": "number", "multipleOf": 0.01, "maximum": 99.5}}}'
    exact, plain = json.loads(text, parse_float=Decimal), json.loads(text)
    assert [s.pattern for s in build_canvas(exact, toy_tokenizer).slots] == \
        [s.pattern for s in build_canvas(plain, toy_tokenizer).slots]


def test_a_length_bound_past_what_the_slot_writes_costs_no_counter(toy_tokenizer):
    """A maxLength the slot's tokens cannot reach is no bound for its counter, which would grow with
    it (10**9: gigabytes); one they can reach, and a min_length, are counted."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    canvas = build_canvas(model(a=(str, Field(max_length=10**9)), b=(str, Field(max_length=30)),
                                c=(str, Field(min_length=40))), toy_tokenizer)
    compile_canvas(canvas, toy_tokenizer)
    assert [s.length for s in canvas.slots] == [None, (0, 30), (40, None)]
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000   # KiB


def test_an_infinite_bound_on_the_open_side_is_no_bound(toy_tokenizer):
    inf = float("inf")   # what json.load reads from `Infinity`
    open_ended = {"type": "object", "properties": {"x": {"type": "number", "minimum": -inf, "maximum": inf},
                                                   "n": {"type": "integer", "minimum": 0, "maximum": inf}}}
    plain = {"type": "object", "properties": {"x": {"type": "number"}, "n": {"type": "integer", "minimum": 0}}}
    assert [s.pattern for s in build_canvas(open_ended, toy_tokenizer).slots] == \
        [s.pattern for s in build_canvas(plain, toy_tokenizer).slots]


def test_a_model_too_big_for_the_context_keeps_the_fields_that_fit_and_defaults_the_rest(toy_tokenizer):
    from pydantic import create_model

    wide = create_model("Wide", must=(int, ...), **{f"f{i}": (Optional[int], None) for i in range(300)})
    canvas = build_canvas(wide, toy_tokenizer, context=1024)
    kept = [s.path for s in canvas.slots]
    assert len(canvas) <= 1024 and 10 < len(kept) < 300 and kept == ["must", *(f"f{i}" for i in range(len(kept) - 1))]
    assert canvas.validate(canvas.fill({"must": 1})) == wide(must=1)


def test_a_decimal_is_the_number_it_is_read_from_with_its_places_and_digits(toy_tokenizer):
    from decimal import Decimal

    from pydantic import condecimal

    cents = model(d=(condecimal(max_digits=5, decimal_places=2), ...), plain=(Decimal, ...))
    slots = {s.path: s for s in build_canvas(cents, toy_tokenizer).slots}
    takes = [bool(re.fullmatch(slots["d"].pattern, v)) for v in ("12.34", "-999.99", "12.345", "12 apples", '"7"')]
    assert takes == [True, True, False, False, False]
    assert re.fullmatch(slots["plain"].pattern, "-3.5") and not re.fullmatch(slots["plain"].pattern, '"3.5"')
    canvas = build_canvas(cents, toy_tokenizer)
    assert canvas.validate(canvas.fill({"d": 12.34, "plain": 7})) == cents(d=Decimal("12.34"), plain=Decimal(7))


def test_counts_no_value_meets_leave_an_optional_key_out(toy_tokenizer):
    schema = {"type": "object", "properties": {"a": {"type": "array", "minItems": 3, "maxItems": 2}, "b": {}}}
    assert [s.path for s in build_canvas(schema, toy_tokenizer).slots] == ["b"]


@pytest.mark.parametrize("fmt", ["email", "uri", "hostname"])
def test_a_length_bound_beside_a_format_is_counted(toy_tokenizer, fmt):
    """maxLength beside a format the layout writes a regex for is the slot's counter (it had been
    left to the final check: 80 tokens of e-mail, and no shorter value to mend with)."""
    schema = {"type": "object", "required": ["a"],
              "properties": {"a": {"type": "string", "format": fmt, "minLength": 3, "maxLength": 20}}}
    (slot,) = build_canvas(schema, toy_tokenizer).slots
    assert slot.length == (3, 20) and slot.budget <= 20


def test_an_openapi_binary_format_in_a_json_schema_is_an_annotation(toy_tokenizer):
    """format: binary (OpenAPI's file contents) had refused the whole schema as a bytes field."""
    schema = {"type": "object", "properties": {"file": {"type": "string", "format": "binary", "maxLength": 8}}}
    assert [s.path for s in build_canvas(schema, toy_tokenizer).slots] == ["file"]


def test_pydantic_formats_are_laid_out_as_pydantic_reads_them(toy_tokenizer):
    """UUID4, IPvAnyAddress, networks and interfaces (pydantic's own formats), aware and naive
    datetimes, HttpUrl's schemes: a slot takes their forms pydantic takes, not another version or
    form (a network's host bits are the final check's)."""
    import ipaddress

    from pydantic import UUID4, AwareDatetime, HttpUrl, IPvAnyAddress, IPvAnyNetwork, NaiveDatetime, TypeAdapter

    fields = {"id": UUID4, "ip": IPvAnyAddress, "net": IPvAnyNetwork, "v4": ipaddress.IPv4Interface,
              "at": AwareDatetime, "local": NaiveDatetime, "web": HttpUrl}
    forms = {"id": (["1b4e28ba-2fa1-41d2-883f-0016D3CCA427"], ["1b4e28ba-2fa1-11d2-883f-0016d3cca427",
                                                            "1b4e28ba-2fa1-41d2-c83f-0016d3cca427"]),
             "ip": (["10.0.0.1", "2001:db8::1", "::ffff:192.0.2.1", "1:2:3:4:5:6:10.0.0.1"],
                    ["10.0.0.256", "10.0.0.1/8", "::ffff:192.0.2.256", "1:2:3:4:5:6:7:10.0.0.1"]),
             "net": (["10.0.0.0/8", "2001:db8::/32", "10.0.0.0", "::ffff:10.0.0.0/104"],
                     ["10.0.0.0/33", "2001:db8::/129"]),
             "v4": (["10.0.0.1/24", "10.0.0.1"], ["2001:db8::1/64"]),
             "at": (["2024-03-18T09:30:00Z", "2024-03-18T09:30:00+05:30"], ["2024-03-18T09:30:00"]),
             "local": (["2024-03-18T09:30:00"], ["2024-03-18T09:30:00Z"]),
             "web": (["https://example.org/a?b=1"], ["ftp://example.org/a"])}
    c = build_canvas(model(**{k: (t,) for k, t in fields.items()}), toy_tokenizer)
    for s in c.slots:
        good, bad = forms[s.path]
        takes = lambda text: all(re.fullmatch(p, text) for p in (s.pattern, s.also) if p)  # noqa: E731
        for text in good:
            assert takes(text) and TypeAdapter(fields[s.path]).validate_python(text), text
        assert not any(takes(text) for text in bad), s.path


def test_a_copied_time_is_taken_whole_as_pydantic_reads_it(toy_tokenizer):
    """A verbatim time's pattern had been the trained layout's (whole seconds): a copy of
    '2027-05-12T08:00:00.5Z' stopped at the fraction and read as a naive time."""
    import datetime as dt

    from pydantic import AwareDatetime, NaiveDatetime, TypeAdapter

    copied = {"json_schema_extra": {"verbatim": True}}
    fields = {"at": AwareDatetime, "local": NaiveDatetime, "any": dt.datetime, "clock": dt.time}
    forms = {"at": (["2027-05-12T08:00:00.5Z", "2027-05-12 08:00+0200", "2027-05-12t08:00:00z"],
                    ["2027-05-12T08:00:00", "2027-05-12T08:00+02"]),
             "local": (["2027-05-12 08:00", "2027-05-12T08:00:00.125"], ["2027-05-12T08:00Z"]),
             "any": (["2027-05-12T08:00:00.5Z", "2027-05-12 08:00"], ["2027-05-12", "2027-02-30T08:00"]),
             "clock": (["19:30", "19:30:15.25Z", "19:30+05:30"], ["19", "24:00"])}
    c = build_canvas(model(**{k: (t, Field(**copied)) for k, t in fields.items()}), toy_tokenizer)
    for s in c.slots:
        good, bad = forms[s.path]
        takes = lambda text: re.fullmatch(s.pattern, text) and not s.violation(text)  # noqa: E731
        for text in good:
            assert takes(text) and TypeAdapter(fields[s.path]).validate_python(text), text
        assert not any(takes(text) for text in bad), s.path


def test_backslash_d_means_ascii_digits(toy_tokenizer):
    class Coord(BaseModel):
        lat: str = Field(pattern=r"^\d{4}[NS\d]$")

    pattern = build_canvas(Coord, toy_tokenizer).slots[0].pattern
    assert "\\d" not in pattern and "[0-9]{4}" in pattern and "NS0-9" in pattern


def test_a_bounded_plain_pattern_sets_the_budget(toy_tokenizer):
    class Codes(BaseModel):
        fir: str = Field(pattern=r"^[A-Z]{3,4}$")
        lat: str = Field(pattern=r"^(\d{4}[NS]|-?\d{1,2}(\.\d{1,7})?)$")
        searched: str = Field(pattern=r"[A-Z]{4}")          # unanchored: a search, unbounded
        wide: str = Field(pattern=r"^\w{4}$")                # \w is not plain ASCII
        told: str = Field(pattern=r"^\d{2}$", json_schema_extra={"max_tokens": 6})

    budgets = {s.path: s.budget for s in build_canvas(Codes, toy_tokenizer).slots}
    assert budgets == {"fir": 4, "lat": 11, "searched": 24, "wide": 24, "told": 6}


def test_a_whole_value_regex_stays_small_enough_to_compile(toy_tokenizer):
    """maxItems inside a whole value is left to the final check (a counted repeat of a nested item
    multiplies the token DFA's states), and a slot whose exact regex is past LONGEST takes any value of
    its own types (here any object)."""
    from clover_struct.value_regex import ValueRegex

    def slot_pattern(schema):
        return build_canvas({"type": "object", "properties": {"v": schema}, "required": ["v"]},
                            toy_tokenizer).slots[0].pattern

    listed = slot_pattern({"anyOf": [{"type": "integer"}, {"type": "array", "maxItems": 49, "minItems": 2,
                                                           "items": {"type": "array", "items": {"type": "string"}}}]})
    assert "49" not in listed and "48" not in listed
    assert re.fullmatch(listed, '[["a"], []]') and not re.fullmatch(listed, '[["a"]]')   # minItems still counted
    shapes = [{"type": "object", "properties": {"id": {"type": "string"}, **{f"k{i}_{j}": {"type": "string"}
                                                                           for j in range(20)}},
               "required": ["id"]} for i in range(8)]   # no key tells them apart
    loose = slot_pattern({"anyOf": shapes})
    assert loose == f"(?:{ValueRegex(None).any(only='object')})" and re.fullmatch(loose, '{"anything": [1, 2]}')
    assert not re.fullmatch(loose, "12")


def test_a_whole_value_slot_keeps_the_deepest_nesting_that_compiles_quickly(toy_tokenizer):
    nested = {"type": "object", "properties": {f"k{j}": {"type": "object", "properties": {
        f"n{m}": {"type": "string"} for m in range(12)}} for j in range(12)}}
    v = build_canvas({"type": "object", "properties": {"v": {"anyOf": [{"type": "integer"}, nested]}},
                      "required": ["v"]}, toy_tokenizer).slots[0].pattern
    assert re.fullmatch(v, "12") and re.fullmatch(v, "{" + ", ".join(f'"k{j}": {{}}' for j in range(12)) + "}")
    assert not re.fullmatch(v, '{"anything": 1}')   # depth 1, not any value


def test_an_item_with_nothing_to_tell_it_is_there_is_one_whole_value_slot(toy_tokenizer):
    """Lists nested past Options.items' depths leave the innermost list empty: its item holds its
    whole value in one slot, which tells the item is there."""
    deep = {"type": "array", "items": {"type": "string"}}
    for _ in range(3):
        deep = {"type": "array", "items": deep}
    c = build_canvas({"type": "object", "properties": {"a": deep}, "required": ["a"]}, toy_tokenizer)
    assert {s.json_kind for s in c.slots} == {"value"} and c.slots[0].path == "a[0][0][0]"


def test_map_entries_are_written_until_min_properties_is_met(toy_tokenizer):
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
              "patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": {"type": "integer"},
              "minProperties": 3}
    c = build_canvas(schema, toy_tokenizer)
    items = [g for g in c.groups if g.kind == "item"]
    assert [g.path for g in items if g.required] == ["{0}", "{1}"]   # name, then the first map's first two


def test_a_whole_value_cut_too_deep_to_hold_its_required_keys_leaves_them_out():
    """Past the nesting cut an object is written empty; one with required keys then has no value,
    so its list stays empty and an optional property holding it is left out."""
    from clover_struct.schema_refs import Document
    from clover_struct.value_regex import ValueRegex

    entry = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    s = {"type": "array", "items": {"type": "object", "properties": {"e": entry, "n": {"type": "integer"},
                                                                     "xs": {"type": "array", "items": entry}}}}
    pattern = ValueRegex(Document(s)).slot(s, "")
    assert re.fullmatch(pattern, '[{"n": 1, "xs": []}]')
    assert not re.fullmatch(pattern, '[{"e": {}, "n": 1, "xs": []}]') and not re.fullmatch(pattern, '[{"n": 1, "xs": [{}]}]')


def test_a_model_is_laid_out_by_the_schema_pydantic_validates_with_or_refused_by_field(toy_tokenizer):
    """A model whose JSON Schema cannot hold a record's reading is refused at layout, naming the
    field: a type with no JSON Schema (had been 'a bug in clover-struct'), a required field read
    from a key the schema lacks (every record had failed at <root>), a multiple_of of 0 (had
    panicked pydantic-core past every except). json_schema_mode_override="serialization" is
    ignored: the output schema (computed fields, serialization aliases) is no record's."""
    from typing import Callable

    from pydantic import AliasPath, ConfigDict, computed_field
    from pydantic.json_schema import SkipJsonSchema

    class Hooked(BaseModel):
        name: str
        hook: Callable[[int], int]

    class ByPath(BaseModel):
        z: int = Field(validation_alias=AliasPath("outer", 0, "k"))

    class Skipped(BaseModel):
        a: int
        b: SkipJsonSchema[int]

    class Zero(BaseModel):
        a: int = Field(multiple_of=0)

    class Kind(enum.Enum):   # a plain Enum: pydantic reads Literal[Kind.CAT] from no JSON value (every record had failed)
        CAT = "cat"

    class Tagged(BaseModel):
        kind: Literal[Kind.CAT]

    for model, path, words in ((Hooked, "hook", "no JSON Schema"), (ByPath, "z", "AliasPath"),
                               (Skipped, "b", "SkipJsonSchema"), (Zero, "properties.a.multipleOf", "not a valid"),
                               (Tagged, "kind", r"make Kind a str or int Enum")):
        with pytest.raises(SchemaError, match=words) as e:
            build_canvas(model, toy_tokenizer)
        assert e.value.path == path

    class Output(BaseModel):
        model_config = ConfigDict(json_schema_mode_override="serialization", extra="forbid")
        w: int = Field(serialization_alias="width")

        @computed_field
        def area(self) -> int:
            return self.w * self.w

    assert [s.path for s in build_canvas(Output, toy_tokenizer).slots] == ["w"]

    class Tree(BaseModel):   # a recursive model's schema is a $ref to its own def (it had been refused)
        name: str
        children: list["Tree"] = []

    assert build_canvas(Tree, toy_tokenizer).slots[0].path == "name"


def test_a_unions_digits_are_counted_only_among_scalars(toy_tokenizer):
    """Beside an object's or a list's regex a counted integer took outlines-core 30 s to index
    (type [object, integer]; 57 s with array), uncounted 0.1 s; among scalars the count stays."""
    def slot(kinds):
        schema = {"type": "object", "properties": {"id": {"type": kinds}}, "required": ["id"]}
        return build_canvas(schema, toy_tokenizer).slots[0].pattern

    for kinds in (["object", "integer"], ["object", "integer", "array"]):
        assert "[1-9][0-9]*" in slot(kinds) and "[0-9]{0," not in slot(kinds)
    assert "[0-9]{0," in slot(["integer", "string"])


def test_a_multiple_is_checked_exactly_as_the_final_check_does():
    """A step of 1e-320 had overflowed the float division (an InternalError); the slot's check
    agrees with the final check's exact rule (0.3 a multiple of 0.1)."""
    from clover_struct.layout import Check

    assert Check("multiple_of", 1e-320).violation(0.5) is None
    assert Check("multiple_of", 0.1).violation(0.3) is None
    assert Check("multiple_of", 0.07).violation(0.5) == "0.5 breaks multiple_of 0.07"
    assert Check("multiple_of", 2).violation(float("inf")) == "inf breaks multiple_of 2"
