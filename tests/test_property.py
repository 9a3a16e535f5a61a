"""Property test: any supported schema, any text, any random model of either family -> a valid
instance, in at most as many forward passes per block as the block's longest slot.

Hypothesis draws pydantic models from the whole grammar layout.py supports (str with
max_length / pattern / max_tokens, int and float with ge/gt/le/lt, bool, Literal,
Enum, date / datetime / time, Optional (JSON null), nested models, bounded lists of
scalars or models, discriminated unions) to depth 2, and batches of printable-ASCII
texts. Tiny random models (which have no idea what to write; std 1.0 makes them
confidently wrong) decode them with `extract_many`, greedily or sampled: Clover models
(mask noise) and DiffusionGemma checkpoints (uniform noise and self-conditioning, built
with transformers' classes, saved and loaded through our load_model).

Every record must be an instance that re-validates. The generator knows which
constraints it made unsatisfiable (inverted bounds, min_length > max_length, a pattern
longer than its max_length or token budget): an ExtractionError, or a SchemaError at
layout time, is allowed only if it names such a field, and a field no value (null
included) fits must be refused with a SchemaError. Nothing else may escape. Every step
commits a token in each unfinished slot of the block, so a record's forward passes (its
prefill and commits ride in each block's first pass) are at most the sum over blocks of the
longest slot part in the block.
"""

import datetime
import enum
import json
import re
from dataclasses import dataclass, field
from typing import Annotated, Generic, Literal, Optional, TypeVar, Union

import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Discriminator, Field, Tag, create_model, field_validator, model_validator

from clover_struct import ExtractionError, SchemaError, extract_many
from clover_struct.api import prepare
from clover_struct.engine.config import preset
from clover_struct.engine.model import CloverModel
from tiny_models import tiny_diffusion_gemma

SCHEMAS, TEXTS_PER_SCHEMA, MIN_PAIRS = 200, 5, 500
DEFAULT_TOKENS = 8   # extract_many(max_tokens=...): budget of strings without max_length
# Realistic patterns and the fewest characters of a match (= tokens of the toy tokenizer,
# whose only merges are JSON punctuation none of these shortest matches contain).
PATTERNS = [(r"^[A-Z]{4}$", 4), (r"^\d{4}[NS]\d{5}[EW]$", 11), (r"^Q[A-Z]{4}$", 5),
            (r"^[a-z]+( [a-z]+)?$", 1), (r"[A-Z]{2}\d", 3), (r"^\d{3}-\d{4}$", 8)]
WORDS = ["red", "green", "blue", "NOTAM", "q", "x y"]
RARELY = st.sampled_from([False] * 9 + [True])   # a contradictory constraint, now and then


@dataclass
class Notes:
    """What the generator knows about one schema."""
    names: int = 0
    bad: set = field(default_factory=set)       # fields with a constraint no value meets
    refused: set = field(default_factory=set)   # fields no value (null included) fits

    def name(self) -> str:
        self.names += 1
        return f"f{self.names}"


@st.composite
def bounds(draw, integer: bool):
    """Field kwargs for ge/gt/le/lt, and whether no number meets them."""
    lo_op, hi_op = draw(st.sampled_from([None, "ge", "gt"])), draw(st.sampled_from([None, "le", "lt"]))
    a, width, invert = draw(st.integers(-300, 300)), draw(st.integers(0, 300)), draw(RARELY)
    lo, hi = (a, a - 1 - width) if invert else (a, a + width)
    if not integer:
        lo, hi = lo / 2, hi / 2
    kw = {k: v for k, v in ((lo_op, lo), (hi_op, hi)) if k}
    if not (lo_op and hi_op):
        return kw, False
    if integer:
        return kw, lo + (lo_op == "gt") > hi - (hi_op == "lt")
    return kw, lo > hi or (lo == hi and (lo_op == "gt" or hi_op == "lt"))


@st.composite
def scalar(draw, notes: Notes, name: str):
    """A leaf annotation (maybe Optional) for field `name`; records contradictions in `notes`."""
    kind = draw(st.sampled_from(["str", "pattern", "int", "float", "bool", "literal", "enum", "date",
                                 "datetime", "time"]))
    nullable, bad, refused = draw(st.booleans()), False, False
    if kind in ("str", "pattern"):
        def room(need):   # a budget for `need`, now and then too small
            return max(1, need + draw(st.integers(-3, -1) if draw(RARELY) else st.integers(0, 6)))
        if kind == "str":   # content CHAR{lo,ml}; `, ` is one token, so lo characters need (lo+1)//2
            ml = draw(st.integers(1, 10))
            lo = ml + 1 if draw(RARELY) else draw(st.integers(0, ml))
            kw, need, contradiction = dict(min_length=lo), (lo + 1) // 2, lo > ml
        else:
            pattern, need = draw(st.sampled_from(PATTERNS))
            ml = room(need) if draw(st.booleans()) else None
            kw, contradiction = dict(pattern=pattern), need > (ml or need)
        mt = room(need + 2 * nullable) if draw(st.booleans()) else None
        ann = Annotated[str, Field(max_length=ml, json_schema_extra={"max_tokens": mt} if mt else None, **kw)]
        # layout: the budget is max_tokens, else max_length or the default (+2 quotes if nullable).
        # A nullable string's quotes may merge with its content (`": "` is one token), so whether
        # a string fits is certain only without null.
        over = need + 2 * nullable > mt if mt else need > (ml or DEFAULT_TOKENS)
        refused = (kind == "str" and lo > ml) or (over and not nullable)
        bad = refused or ((contradiction or over) and not (nullable and (mt or 4) >= 4))
    elif kind in ("int", "float"):
        kw, bad = draw(bounds(kind == "int"))
        ann = Annotated[int if kind == "int" else float, Field(**kw)]
    elif kind == "literal":
        ann = Literal[tuple(draw(st.lists(st.sampled_from(WORDS) | st.integers(-9, 99), min_size=1,
                                          max_size=4, unique=True)))]
    elif kind == "enum":
        values = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4, unique=True))
        ann = enum.Enum(f"E{name}", {f"V{i}": v for i, v in enumerate(values)})
    else:
        ann = {"bool": bool, "date": datetime.date, "datetime": datetime.datetime,
               "time": datetime.time}[kind]
    notes.bad |= {name} if bad else set()
    notes.refused |= {name} if refused else set()
    return Optional[ann] if nullable else ann


@st.composite
def model(draw, notes: Notes, depth: int, most: int = 6, tag: str | None = None):
    """A pydantic model class with 1..`most` fields (a union variant with 0.. if `tag`)."""
    fields = {"kind": (Literal[tag], ...)} if tag else {}
    for _ in range(draw(st.integers(0 if tag else 1, most))):
        name = notes.name()
        fields[name] = (draw(value(notes, name, depth)), ...)
    return create_model(f"V{tag}" if tag else f"M{notes.name()}", **fields)


@st.composite
def value(draw, notes: Notes, name: str, depth: int):
    """Any annotation for field `name` at `depth` (models nest at most to depth 2)."""
    kinds = ["scalar"] * 6 + (["model", "list", "union"] if depth < 2 else [])
    kind, nullable = draw(st.sampled_from(kinds)), draw(st.booleans())
    if kind == "scalar":
        return draw(scalar(notes, name))
    if kind == "model":
        ann = draw(model(notes, depth + 1, most=4))
    elif kind == "list":   # a variable count: min_length..max_length items
        hi = draw(st.integers(1, 3))
        item = draw(model(notes, depth + 1, most=3) if draw(st.booleans()) else scalar(notes, name))
        ann = Annotated[list[item], Field(min_length=draw(st.integers(0, hi)), max_length=hi)]
    else:   # one_slot: variants of plain fields (drawn at the depth where only scalars are)
        one_slot = draw(st.booleans())
        variants = [draw(model(notes, 2 if one_slot else depth + 1, most=3, tag=f"{name}t{i}"))
                    for i in range(draw(st.integers(2, 3)))]
        ann = Annotated[Union[tuple(variants)], Field(discriminator="kind", json_schema_extra={"one_slot": one_slot})]
        for v in variants * one_slot:   # a pattern and a length bound on one string: refused
            for field, spec in v.model_json_schema()["properties"].items():
                if any("pattern" in x and {"minLength", "maxLength"} & set(x) for x in spec.get("anyOf", [spec])):
                    notes.bad.add(field)
                    notes.refused.add(field)
    return Optional[ann] if nullable else ann


@st.composite
def schemas(draw):
    notes = Notes()
    return draw(model(notes, 0)), notes


TEXTS = st.lists(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=200)
                 .filter(str.strip), min_size=TEXTS_PER_SCHEMA, max_size=TEXTS_PER_SCHEMA)


@pytest.fixture(scope="module")
def models(toy_tokenizer):
    """Random tiny models: near-uniform (std 0.02) to confidently wrong (std 1.0)."""
    tok, out = toy_tokenizer, []
    for seed, std, block in [(0, 0.02, 16), (1, 1.0, 16), (2, 1.0, 32), (3, 0.3, 8)]:
        config = preset("tiny", vocab_size=tok.vocab_size, mask_token_id=tok.mask_id,
                        pad_token_id=tok.pad_id, eos_token_id=tok.eos_id, block_size=block)
        g = torch.Generator().manual_seed(seed)
        out.append(CloverModel(config, tok).init_weights(g, std=std).eval())
    return out


@pytest.fixture(scope="module")
def diffusion_gemma_models(toy_tokenizer, tmp_path_factory):
    """Random tiny DiffusionGemma checkpoints, canvases of 16, 32 and 8: transformers' init
    (near-uniform) to confidently wrong (every weight moved by N(0, 1))."""
    pytest.importorskip("transformers", reason="transformers is a test extra: pip install -e .[test]")
    return [tiny_diffusion_gemma(toy_tokenizer, tmp_path_factory.mktemp(f"dg{seed}"), canvas=canvas, std=std,
                                 seed=seed) for seed, std, canvas in [(0, 0.0, 16), (1, 1.0, 16), (2, 1.0, 32),
                                                                     (3, 0.3, 8)]]


def pass_budget(canvas, block_size: int) -> int:
    """The most forward passes a record may take: per block, its longest slot part."""
    return sum(max((min(s.end, e) - max(s.start, b) for s in canvas.slots if s.start < e and b < s.end), default=0)
               for b, e in canvas.spans(block_size))


def _names(path: str) -> set[str]:
    """The field names along an error path ("f2<f2t0>.f3", "f1[0]")."""
    return set(re.split(r"[.\[\]<>]+", path))


@pytest.mark.slow
@pytest.mark.parametrize("family", ["clover", "diffusion_gemma"])
def test_any_schema_any_text_gives_a_valid_instance(family, request):
    models = request.getfixturevalue("models" if family == "clover" else "diffusion_gemma_models")
    decoded = []

    # No shrinking: every example decodes a batch, and the failure message shows the schema.
    @settings(max_examples=SCHEMAS, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate],
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.large_base_example, HealthCheck.filter_too_much])
    @given(schemas(), TEXTS, st.integers(0, len(models) - 1),
           st.sampled_from([0.0, 0.0, 0.7, 2.0]), st.integers(0, 2**31 - 1), st.sampled_from([0.9, 0.5]))
    def check(drawn, texts, which, temperature, seed, threshold):
        schema, notes = drawn
        where = f"schema {json.dumps(schema.model_json_schema())}\nunsatisfiable fields: {sorted(notes.bad)}"
        try:
            results = extract_many(texts, schema, model=models[which], batch_size=TEXTS_PER_SCHEMA,
                                   temperature=temperature, seed=seed, threshold=threshold,
                                   max_tokens=DEFAULT_TOKENS, trace=True)
        except SchemaError as e:
            assert _names(e.path) & notes.bad, f"SchemaError names no unsatisfiable field: {e}\n{where}"
            return
        assert not notes.refused, f"no SchemaError for {sorted(notes.refused)}, which no value fits\n{where}"
        assert len(results) == len(texts)
        _, canvas, _ = prepare(schema, models[which], DEFAULT_TOKENS)
        budget = pass_budget(canvas, models[which].config.block_size)
        for text, (r, trace) in zip(texts, results):
            assert trace.forward_passes <= budget, \
                f"{trace.forward_passes} forward passes, more than the blocks' longest slots ({budget})\n{where}"
            if isinstance(r, ExtractionError):
                assert _names(r.path) & notes.bad, \
                    f"ExtractionError names no unsatisfiable field: {r}\ntext {text!r}\n{where}"
            else:
                assert isinstance(r, schema), f"{type(r).__name__} is not a {schema.__name__}: {r!r}"
                assert schema.model_validate(r.model_dump()) == r
            decoded.append(text)

    check()
    assert len(decoded) >= MIN_PAIRS, f"only {len(decoded)} (schema, text) pairs decoded"


class _Biased:
    """A tiny model that rates `token` far above every other token: a reproducer's puppet."""

    def __init__(self, model, token: int, bias: float = 100.0):
        self.model, self.token, self.bias = model, token, bias
        self.config, self.tokenizer = model.config, model.tokenizer
        self.device, self.prefill, self.commit = model.device, model.prefill, model.commit

    def step(self, ids, cache, at=None):
        logits = self.model.step(ids, cache, at=at)
        logits[..., self.token] += self.bias
        return logits


# Regression: a pad written first must make the group absent (decoder._Row.put once asked
# may_be_absent after counting the pad, so the group was never made absent).
def test_a_pad_first_makes_an_optional_model_null(models):
    flag = create_model("Flag", on=(bool, ...), n=(int, ...))
    holder = create_model("Holder", flag=(Optional[flag], ...))
    result, = extract_many(["some text"], holder, model=_Biased(models[0], models[0].config.pad_token_id))
    assert result == holder(flag=None)


# Regression: every out-of-range value is repaired, however many (api._finish once stopped
# after a fixed number of rounds for the whole record).
def test_every_out_of_range_number_is_replaced(models):
    negative = create_model("Negative", **{f"x{k}": (int, Field(le=-1)) for k in range(5)})
    seven = models[0].tokenizer.encode("7")[0]
    result, = extract_many(["some text"], negative, model=_Biased(models[0], seven))
    assert isinstance(result, negative), result


# Regression: a required item (below min_length) whose fields are all lists or optional
# may decode empty and must still be kept (Canvas.parse once dropped it).
def test_a_required_item_with_only_optional_content_is_kept(models):
    leaf = create_model("Leaf", n=(int, ...))
    mid = create_model("Mid", leaves=(Annotated[list[leaf], Field(max_length=2)], ...))
    outer = create_model("Outer", mids=(Annotated[list[mid], Field(min_length=1, max_length=1)], ...))
    result, = extract_many(["some text"], outer, model=_Biased(models[0], models[0].config.pad_token_id))
    assert isinstance(result, outer), result


class _Range(BaseModel):
    lo: int
    hi: int

    @model_validator(mode="after")
    def _ordered(self):
        if self.hi <= self.lo:
            raise ValueError(f"hi {self.hi} is not above lo {self.lo}")
        return self


class _Never(BaseModel):
    lo: int

    @model_validator(mode="after")
    def _refuse(self):
        raise ValueError("never valid")


# A check across fields (a model validator) is repaired by the single-field change the model
# finds least unlikely (the puppet writes 7s, with 1s its second choice, so lo == hi until one
# of them changes), or the record fails with the validator's reason.
def test_a_check_across_fields_is_repaired_by_one_field_or_reported(models):
    seven, one = (models[0].tokenizer.encode(d)[0] for d in "71")
    biased = _Biased(_Biased(models[0], one, 50.0), seven)
    r, = extract_many(["some text"], _Range, model=biased)
    assert isinstance(r, _Range) and r.hi > r.lo, r
    assert 777777777777 in (r.lo, r.hi)   # one field kept what the model wrote
    e, = extract_many(["some text"], _Never, model=biased)
    assert isinstance(e, ExtractionError) and "never valid" in str(e)


class _Reply(BaseModel):
    kind: Literal["new", "reply"]
    to: int

    @model_validator(mode="after")
    def _refers(self):
        if self.kind != "reply":
            raise ValueError("only a reply refers to another message")
        return self


class _Odd(BaseModel):
    n: int = Field(ge=0, le=999)

    @field_validator("n")
    @classmethod
    def _odd(cls, v):
        if v % 2 == 0:
            raise ValueError("n must be odd")
        return v


# The repair may change a choice field too: here only `kind` can fix the record, and the
# puppet made "new" (its first letter) far likelier than "reply".
def test_a_check_across_fields_is_repaired_through_a_choice_field(models):
    n = models[0].tokenizer.encode("n")[0]
    r, = extract_many(["some text"], _Reply, model=_Biased(models[0], n))
    assert isinstance(r, _Reply) and r.kind == "reply", r


# A field's own validator (one no regex or slot check expresses) is tried on each fallback,
# not only the slot's checks: the puppet writes 888 with 1s second, and the first fallbacks
# (88, 8) pass the bounds but are still even.
def test_a_field_validator_is_checked_on_every_fallback(models):
    eight, one = (models[0].tokenizer.encode(d)[0] for d in "81")
    r, = extract_many(["some text"], _Odd, model=_Biased(_Biased(models[0], one, 50.0), eight))
    assert isinstance(r, _Odd) and r.n % 2 == 1 and set(str(r.n)) <= {"1", "8"}, r


class _Unstated(BaseModel):
    n: int = Field(ge=0, le=99)

    @field_validator("n")
    @classmethod
    def _not_in_text(cls, v, info):
        if str(v) in info.context["text"]:
            raise ValueError("n may not be a number the text states")
        return v


# extract gives a model's validators the text (info.context["text"]), on every fallback too:
# the puppet writes 8s, and the text states 8 and 88.
def test_a_validator_reads_the_text(models):
    eight = models[0].tokenizer.encode("8")[0]
    text = "gate 8, stand 88"
    r, = extract_many([text], _Unstated, model=_Biased(models[0], eight))
    assert isinstance(r, _Unstated) and str(r.n) not in text, r


class _Ring(BaseModel):
    k: Literal[1] = 1
    r: int = Field(ge=0, le=99)


class _Box(BaseModel):
    k: Literal[2] = 2
    s: int = Field(ge=0, le=99)


class _Plot(BaseModel):
    area: Annotated[Union[_Ring, _Box], Field(discriminator="k")]


class _Dot(BaseModel):
    kind: Literal["dot"] = "dot"
    r: int = Field(ge=0, le=99)


class _Bar(BaseModel):
    kind: Literal["bar"] = "bar"
    s: int = Field(ge=0, le=99)


class _Spot(BaseModel):
    at: Optional[Annotated[Union[_Dot, _Bar], Field(discriminator="kind")]] = None


class _Spread(BaseModel):
    at: Optional[Union[_Dot, _Bar]] = None   # no discriminator: pydantic tries each member


class _Counted(BaseModel):
    area: Union[_Ring, _Box]   # integer tags, no discriminator


class _Called(BaseModel):   # a callable discriminator, its Tags named otherwise than the kinds
    at: Annotated[Union[Annotated[_Dot, Tag("D")], Annotated[_Bar, Tag("B")]],
                  Discriminator(lambda v: {"dot": "D", "bar": "B"}[v["kind"] if isinstance(v, dict) else v.kind])]


_X = TypeVar("_X")


class _Pinned(BaseModel, Generic[_X]):
    kind: Literal["dot"] = "dot"
    r: int = Field(ge=0, le=99)
    note: Optional[_X] = None


class _Generic(BaseModel):
    at: Union[_Pinned[str], _Bar]   # pydantic names the first member `_Pinned[str]`, its $defs `_Pinned_str_`


class _Zones(BaseModel):
    zones: dict[str, Union[_Dot, _Bar]]


# pydantic names the member of a union an error lies in: a discriminated union's by its tag, a
# callable discriminator's by its Tag, another's by its model, reporting every member's errors.
# The error repair gets names the slot of the member the record holds, so that field is mended
# on its own instead of the record failing as a check across fields.
@pytest.mark.parametrize("schema, data, slot", [
    (_Plot, {"area": {"k": 2, "s": -1}}, "area<2>.s"),
    (_Spot, {"at": {"kind": "dot", "r": -1}}, "at<dot>.r"),
    (_Spread, {"at": {"kind": "bar", "s": -1}}, "at<bar>.s"),
    (_Counted, {"area": {"k": 2, "s": -1}}, "area<2>.s"),
    (_Called, {"at": {"kind": "bar", "s": -1}}, "at<bar>.s"),
    (_Generic, {"at": {"kind": "dot", "r": -1}}, "at<dot>.r"),
    (_Generic, {"at": {"kind": "bar", "s": -1}}, "at<bar>.s"),
    (_Zones, {"zones": {"north": {"kind": "bar", "s": -1}}}, "zones{0}<bar>.s"),
])
def test_a_variant_field_is_found_under_pydantic_s_name_for_it(models, schema, data, slot):
    from clover_struct.repair import _slot_of

    _, canvas, _ = prepare(schema, models[0], None)
    with pytest.raises(ExtractionError) as e:
        canvas.validate(canvas.fill(data))
    assert e.value.path == slot and _slot_of(canvas, e.value.path) is not None, e.value


class _Unheard(BaseModel):
    word: Optional[str] = Field(None, max_length=6)

    @field_validator("word")
    @classmethod
    def _refuse(cls, v):
        if v is not None:
            raise ValueError("no word is valid here")
        return v


# Where no value the model rates passes a field's check, a field that may be null is null (the
# text may not state it) rather than an error: the puppet writes letters, never null.
def test_a_nullable_field_no_value_mends_is_null(models):
    a = models[0].tokenizer.encode("a")[0]
    r, = extract_many(["some text"], _Unheard, model=_Biased(models[0], a))
    assert r == _Unheard(word=None), r
