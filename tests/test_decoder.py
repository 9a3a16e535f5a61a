"""The joint decoder and the extract API, with tiny random models (which know nothing)."""

import math
import re
from typing import Annotated, Literal, Optional, Union

import pytest
from pydantic import BaseModel, Field, model_validator

from clover_struct import ExtractionError, SchemaError, UsageError, extract, extract_many
from clover_struct.schema_walk import build_canvas
from clover_struct.api import prompt_ids
from tiny_models import MockModel, tiny_model, without_prefill_step


class Six(BaseModel):
    a: str = Field(max_length=8)
    b: str = Field(max_length=8)
    c: str = Field(max_length=8)
    d: int
    e: str = Field(pattern=r"[A-Z]{4}")
    f: Literal["yes", "no"]


def budgets(canvas, lo, hi):
    return [s.budget for s in canvas.slots if s.start < hi and s.end > lo]


def test_forward_passes_follow_the_longest_field_not_the_sum(toy_tokenizer):
    model = tiny_model(toy_tokenizer, block_size=256)
    value, trace = extract("alpha beta gamma", Six, model=model, trace=True)
    canvas = __import__("clover_struct.schema_walk", fromlist=["x"]).build_canvas(Six, toy_tokenizer)
    assert len(canvas.ids) <= 256  # one block
    sizes = budgets(canvas, 0, len(canvas.ids))
    assert trace.steps <= max(sizes) < sum(sizes)
    assert trace.forward_passes == trace.steps     # the first step's pass also encodes the prompt
    assert trace.tokens_committed == sum(sizes)
    assert set(trace.settled_at) == {s.path for s in canvas.slots}
    assert all(0.0 <= p <= 1.0 for p in trace.confidence.values())
    assert isinstance(value, Six)


def test_several_blocks_cost_the_longest_field_of_each(toy_tokenizer):
    from clover_struct.schema_walk import build_canvas

    model = tiny_model(toy_tokenizer, block_size=16)
    canvas = build_canvas(Six, toy_tokenizer)
    _, trace = extract("some text", Six, model=model, trace=True)
    blocks = range(0, len(canvas.ids), 16)
    bound = sum(max(budgets(canvas, b, b + 16), default=0) for b in blocks)
    assert trace.steps <= bound
    assert trace.forward_passes == trace.steps   # a block's first pass also commits the one before


class Item(BaseModel):
    name: str = Field(max_length=6)
    qty: int = Field(ge=0, le=99)


class Ledger(BaseModel):
    title: str = Field(max_length=6)
    items: list[Item] = Field(min_length=1, max_length=3, json_schema_extra={"item_blocks": True})
    note: str = Field(max_length=6)


def test_item_blocks_decode_alike_in_a_batch_alone_and_without_the_cache(toy_tokenizer):
    model = tiny_model(toy_tokenizer, block_size=256, std=0.5)
    texts = ["first ledger", "a second, longer ledger text", "3"]
    batch = extract_many(texts, Ledger, model=model, trace=True)
    alone = [extract(t, Ledger, model=model, trace=True) for t in texts]
    uncached = extract_many(texts, Ledger, model=model, trace=True, use_cache=False)
    for (a, ta), (b, tb), (c, tc) in zip(batch, alone, uncached):
        assert a == b == c and ta.steps == tb.steps == tc.steps
        assert ta.forward_passes == ta.steps   # each block's first pass also takes in the blocks before


def test_an_absent_item_ends_the_list_without_a_step_in_its_blocks(toy_tokenizer):
    from clover_struct.schema_walk import build_canvas

    model = tiny_model(toy_tokenizer, block_size=256, std=0.5)
    canvas = build_canvas(Ledger, toy_tokenizer)
    value, trace = extract("a ledger", Ledger, model=model, trace=True, known={"items[1].name": ""})
    assert len(value.items) == 1
    assert {p: s for p, s in trace.settled_at.items() if p.startswith(("items[1]", "items[2]"))} == {
        "items[1].name": 0, "items[1].qty": 0, "items[2].name": 0, "items[2].qty": 0}
    first, last = canvas.spans()[0], canvas.spans()[-1]
    assert trace.steps <= max(budgets(canvas, *first)) + max(budgets(canvas, *last))   # only blocks 0 and 2


def test_a_record_with_every_field_known_needs_no_step(toy_tokenizer):
    known = {"a": "x", "b": "y", "c": "z", "d": 4, "e": "EGTT", "f": "no"}
    for texts in (["t"], ["t", "u"]):   # one block of several: its commits still get a prefix cache
        out = extract_many(texts, Six, model=tiny_model(toy_tokenizer, block_size=16), trace=True,
                           known=[known] * len(texts))
        assert all(v == Six(**known) and t.steps == 0 for v, t in out)


def test_a_confident_model_commits_many_tokens_per_step(toy_tokenizer):
    model = tiny_model(toy_tokenizer, block_size=256, std=1.0)  # large weights: peaked distributions
    _, trace = extract("x", Six, model=model, trace=True, threshold=0.5)
    assert trace.tokens_per_forward > len(Six.model_fields)


@pytest.mark.slow
def test_a_batch_equals_each_text_alone(toy_tokenizer):
    model = tiny_model(toy_tokenizer, block_size=32, std=0.5)
    texts = [("notice " * (1 + i % 7) + str(i))[: 5 + 3 * i] for i in range(32)]
    batch = extract_many(texts, Six, model=model, batch_size=32)
    for text, got in zip(texts, batch):
        assert got == extract(text, Six, model=model)


def test_known_values_are_kept_and_not_generated(toy_tokenizer):
    model = tiny_model(toy_tokenizer)
    value, trace = extract("t", Six, model=model, trace=True, known={"e": "EGTT", "f": "no", "d": 42})
    assert (value.e, value.f, value.d) == ("EGTT", "no", 42)
    free, _ = extract("t", Six, model=model, trace=True)
    assert trace.tokens_committed > 0 and trace.settled_at["e"] == 0
    with pytest.raises(UsageError, match="no field `zz`"):
        extract("t", Six, model=model, known={"zz": 1})
    with pytest.raises(UsageError, match="not a value field `e` can hold"):
        extract("t", Six, model=model, known={"e": "lowercase"})


def test_sampling_is_reproducible_with_a_seed(toy_tokenizer):
    model = tiny_model(toy_tokenizer, std=0.5)
    runs = [extract("t", Six, model=model, temperature=1.0, seed=s) for s in (1, 1, 2)]
    assert runs[0] == runs[1]
    assert extract("t", Six, model=model) == extract("t", Six, model=model)


def test_text_longer_than_the_context(toy_tokenizer):
    model = tiny_model(toy_tokenizer, max_position_embeddings=160)
    with pytest.raises(ExtractionError, match="context leaves"):
        extract("x" * 500, Six, model=model)
    assert isinstance(extract("x" * 500, Six, model=model, truncate=True), Six)


def test_one_bad_record_does_not_lose_the_others(toy_tokenizer):
    model = tiny_model(toy_tokenizer)
    out = extract_many(["fine", "", "also fine"], Six, model=model)
    assert isinstance(out[0], Six) and isinstance(out[2], Six)
    assert isinstance(out[1], ExtractionError) and "empty" in str(out[1])


class Bounded(BaseModel):
    x: float = Field(ge=-1.5, le=2.0)
    n: int = Field(gt=10, lt=13)


def test_numeric_bounds_fall_back_to_the_next_best_value(toy_tokenizer):
    for seed in range(5):
        v = extract("bounds", Bounded, model=tiny_model(toy_tokenizer, seed=seed, std=0.5))
        assert -1.5 <= v.x <= 2.0 and 10 < v.n < 13


class Counted(BaseModel):
    k: int = Field(multiple_of=7, ge=10, le=100)
    n: int = Field(ge=-40, lt=1000)


def test_an_integer_slot_writes_only_the_integers_its_bounds_and_multiple_allow(toy_tokenizer):
    """Of 0..999, 13 are multiples of 7 within bounds: a random model's picks stay among them
    (the search for a next-best value that passes had run out before finding one)."""
    for seed in range(5):
        v = extract("numbers", Counted, model=tiny_model(toy_tokenizer, seed=seed, std=0.5))
        assert v.k % 7 == 0 and 10 <= v.k <= 100 and -40 <= v.n < 1000


def test_an_integer_range_is_a_regex_of_exactly_its_integers():
    from clover_struct.patterns import integer_pattern, integer_range

    rng = __import__("random").Random(0)
    ranges = [(a, b) for a in range(-130, 131, 7) for b in range(a, 131, 5)]
    ranges += [tuple(sorted(rng.sample(range(-10**7, 10**7), 2))) for _ in range(200)]
    for a, b in ranges:
        regex = re.compile(integer_range(a, b))
        for v in {*range(a - 12, a + 12), *range(b - 12, b + 12), *(rng.randrange(a - 99, b + 99) for _ in range(50))}:
            assert bool(regex.fullmatch(str(v))) == (a <= v <= b), (a, b, v)
        assert not regex.fullmatch("-0") and not regex.fullmatch(f"0{max(a, 0)}")
    tenths = re.compile(integer_pattern({"minimum": 0, "maximum": 3, "multipleOf": 0.1}))   # every integer: 0.1 a tenth
    assert [v for v in range(-2, 6) if tenths.fullmatch(str(v))] == [0, 1, 2, 3]


class Quoted(BaseModel):
    who: str = Field(max_length=12, json_schema_extra={"verbatim": True})
    gate: str = Field(pattern=r"^[A-Z]{2}[0-9]{2}$", json_schema_extra={"verbatim": True})
    note: Optional[str] = Field(None, max_length=8, json_schema_extra={"verbatim": True})


def test_verbatim_fields_are_pieces_of_the_text(toy_tokenizer):
    """A random model knows nothing: only the constraint keeps its values to the text."""
    texts = [f"call {name} at gate {gate}, then {name} to XQ{i:02d}9" for i, (name, gate) in
             enumerate([("Ann", "AB12"), ("Bo \n  Li", "ZZ07"), ("Cy", "QX55"), ("Dee-Dee", "MN31")] * 4)]
    for seed in range(3):
        model = tiny_model(toy_tokenizer, seed=seed, std=0.5)
        for text, (got, trace) in zip(texts, extract_many(texts, Quoted, model=model, trace=True)):
            folded = " ".join(text.split())
            assert got.who in folded and (got.note is None or got.note in folded)
            assert got.gate == text.split("gate ")[1][:4]   # the only piece the pattern takes (XQ..9 runs on)
            for path, value in got.model_dump().items():   # each piece's place in the text, as written
                if value is not None:
                    start, end = trace.spans[path]
                    assert re.sub(r"\s+", " ", text[start:end]) == value, (text, path, trace.spans)
    known = extract(texts[0], Quoted, model=model, known={"who": "Nobody"})
    assert known.who == "Nobody"   # known values are the caller's, not the text's


class Short(BaseModel):
    what: str = Field(max_length=5, json_schema_extra={"verbatim": True})
    why: Optional[str] = Field(None, max_length=5, json_schema_extra={"verbatim": True})


def _kind(ch: str) -> str:
    return "digit" if ch in "0123456789" else "letter" if ch.isascii() and ch.isalpha() else ch


def test_a_copy_shorter_than_the_words_ends_at_a_word_edge(toy_tokenizer):
    """Words longer than the field's five characters are never cut to fit ('MAINT' of
    'MAINTENANCE', 'EGLL R'): a copy runs word edge to word edge, here 'RWY', '09L', 'EGLL'."""
    texts = ["EGLL RWY 09L CLOSED FOR MAINTENANCE", "AERODROME EGLL CLOSED, TAXIWAYS 09L AND B2 OPEN"] * 3
    for seed in range(4):
        model = tiny_model(toy_tokenizer, seed=seed, std=0.5)
        for text, (got, trace) in zip(texts, extract_many(texts, Short, model=model, trace=True)):
            for path, value in got.model_dump().items():
                if value is not None:
                    start, end = trace.spans[path]
                    assert text[start:end] == value
                    assert start == 0 or _kind(text[start - 1]) != _kind(text[start]), (value, text)
                    assert end == len(text) or _kind(text[end - 1]) != _kind(text[end]), (value, text)


class Stop(BaseModel):
    gate: str = Field(pattern=r"^[A-Z]{2}[0-9]{2}$", json_schema_extra={"verbatim": True})
    who: str = Field(max_length=8, json_schema_extra={"verbatim": True})


class Route(BaseModel):
    stops: list[Stop] = Field(min_length=1, max_length=6, json_schema_extra={"item_blocks": True})


def test_item_blocks_copy_in_the_order_of_the_text_and_end_with_it(toy_tokenizer):
    """The first item's gate is the model's pick; each later item's gate is the next one after
    what the item before copied, each name comes after its item's gate (anywhere if nothing
    does), and the list ends where the text has no further gate, well before its cap of 6."""
    texts = ["board at AB12 then Ann goes to CD34, Bo to EF56.", "XY99 only", "from QQ10 to RR20"]
    for seed in range(4):
        model = tiny_model(toy_tokenizer, seed=seed, std=0.5)
        for text, (got, trace) in zip(texts, extract_many(texts, Route, model=model, trace=True)):
            gates = {m.start(): m.group() for m in re.finditer(r"[A-Z]{2}[0-9]{2}", text)}
            starts = [trace.spans[f"stops[{k}].gate"][0] for k in range(len(got.stops))]
            assert starts[0] in gates and [text[s:s + 4] for s in starts] == [s.gate for s in got.stops]
            for k in range(1, len(got.stops)):   # the first gate after what the item before copied
                copied = max(trace.spans[f"stops[{k - 1}].{f}"][1] for f in ("gate", "who"))
                assert starts[k] == min(g for g in gates if g >= copied), (seed, text, got)
            copied = max(trace.spans[f"stops[{len(got.stops) - 1}].{f}"][1] for f in ("gate", "who"))
            assert not any(g >= copied for g in gates), (seed, text, got)   # no gate left after the last
            for stop in got.stops:      # each piece after the one before it in its item, where one is
                after = text[text.index(stop.gate) + len(stop.gate):]
                assert stop.who in (after if after.strip() else text), (seed, text, got)


class Leg(BaseModel):
    code: str = Field(pattern=r"^[A-Z]{2}[0-9]{2}$", json_schema_extra={"verbatim": True})
    alt: str = Field(pattern=r"^[0-9]{3}$", json_schema_extra={"verbatim": True})


class Legs(BaseModel):
    legs: list[Leg] = Field(min_length=1, max_length=8, json_schema_extra={"item_blocks": True})


def test_item_blocks_copy_whole_runs_of_the_text(toy_tokenizer):
    """A list starts where a run of its pieces starts (not at CD34: a leg's altitude and a dash
    come before it) and, once in a run, copies it to its end: the legs are whole runs, in order."""
    text = "ref QQ10 900. legs: AB12 100 - CD34 200, EF56 300 to\n2. GH78 400 end ZZ99 500"
    runs = [["QQ10"], ["AB12", "CD34", "EF56", "GH78"], ["ZZ99"]]
    heads = set()
    for seed in range(8):
        got = extract(text, Legs, model=tiny_model(toy_tokenizer, seed=seed, std=0.5))
        codes = [leg.code for leg in got.legs]
        for leg in got.legs:
            assert text[text.index(leg.code) + 5:].startswith(leg.alt), (seed, got)
        first = next(k for k, run in enumerate(runs) if codes[0] in run)
        heads.add(codes[0])
        whole = [c for run in runs[first:] for c in run]
        assert codes[0] == runs[first][0] and codes == whole[:len(codes)], (seed, codes)
        assert len(codes) >= len(runs[first]), (seed, codes)     # a run is not left half copied
    assert len(heads) > 1       # the models differ in where they start


class LongLegs(BaseModel):
    legs: list[Leg] = Field(min_length=3, max_length=8, json_schema_extra={"item_blocks": True})


def test_a_list_starts_at_a_run_as_long_as_it_must_be(toy_tokenizer):
    """A list of at least three legs starts at the run of four, not at a lone leg before or after
    it (QQ10 stands as a NOTAM's Q-line centre stands before its polygon's vertices)."""
    text = "ref QQ10 900. legs: AB12 100 - CD34 200, EF56 300 to\n2. GH78 400 end ZZ99 500"
    for seed in range(8):
        got = extract(text, LongLegs, model=tiny_model(toy_tokenizer, seed=seed, std=0.5))
        assert [leg.code for leg in got.legs][:4] == ["AB12", "CD34", "EF56", "GH78"], (seed, got)


class Window(BaseModel):
    start: Optional[str] = Field(None, pattern=r"^[0-9]{4}$",
                                 json_schema_extra={"verbatim": True, "copies_before": "end"})
    end: Optional[str] = Field(None, pattern=r"^[0-9]{4}$", json_schema_extra={"verbatim": True})


def test_a_start_copies_a_piece_before_its_end(toy_tokenizer):
    """A field marked copies_before copies a piece that starts before its sibling's (a start
    before its end), where the text has one; left free, three of these random models copy a
    later time as the start."""
    text = "open 0800 1130 then 1545 and 2210 shut"
    order = ["0800", "1130", "1545", "2210"]
    both = 0
    for seed in range(8):
        got = extract(text, Window, model=tiny_model(toy_tokenizer, seed=seed, std=0.5))
        if got.start and got.end:
            both += 1
            assert order.index(got.start) < order.index(got.end), (seed, got)
    assert both


class Spot(BaseModel):
    lat: str = Field(pattern=r"^N?[0-9]{2}\.[0-9]{2}$", json_schema_extra={"verbatim": True})
    lon: str = Field(pattern=r"^E?[0-9]{2}\.[0-9]{2}$", json_schema_extra={"verbatim": True, "copies_beside": "lat"})


class Spots(BaseModel):
    spots: list[Spot] = Field(min_length=2, max_length=4, json_schema_extra={"item_blocks": True})


class Fix(BaseModel):
    lat: str = Field(pattern=r"^N[0-9]{2}\.[0-9]{2}$", json_schema_extra={"verbatim": True})
    lon: str = Field(pattern=r"^E[0-9]{2}\.[0-9]{2}$", json_schema_extra={"verbatim": True, "copies_beside": "lat"})


def test_a_field_copies_the_piece_beside_its_sibling(toy_tokenizer):
    """A field marked copies_beside copies the piece right next to its sibling's: the one
    before it where there is one (E12.00 for N26.09), else the one after (E22.22 for N22.22);
    the models pick the latitude, never the longitude."""
    text = "ref E01.00 then E12.00 N26.09, N22.22 E22.22 end E99.99"
    pairs = {"N26.09": "E12.00", "N22.22": "E22.22"}
    for seed in range(8):
        got = extract(text, Fix, model=tiny_model(toy_tokenizer, seed=seed, std=0.5))
        assert got.lon == pairs[got.lat], (seed, got)


def test_a_field_with_a_sibling_beside_it_copies_a_piece_that_has_one(toy_tokenizer):
    """The field a copies_beside sibling names copies a piece with one of the sibling's next to
    it: of three latitudes only N26.09 has a longitude beside it (a circle's radius, 0.5NM, is
    no latitude of its centre); left free, the models copy the others too."""
    text = "radius N05.50 then N26.09 E12.00, end N33.33"
    for seed in range(8):
        got = extract(text, Fix, model=tiny_model(toy_tokenizer, seed=seed, std=0.5))
        assert (got.lat, got.lon) == ("N26.09", "E12.00"), (seed, got)


class Bare(BaseModel):
    lat: str = Field(pattern=r"^-?[0-9]{2}\.[0-9]{2}$", json_schema_extra={"verbatim": True})
    lon: str = Field(pattern=r"^-?[0-9]{2}\.[0-9]{2}$", json_schema_extra={"verbatim": True, "copies_beside": "lat"})


def test_a_field_with_no_piece_beside_its_sibling_copies_another_than_the_siblings(toy_tokenizer):
    """Where a word stands between the two ('lat 40.71 long -74.00'), the longitude copies some
    other piece, never the latitude's own: left free, it had copied '40.71' twice."""
    text = "at lat 40.71 long -74.00 today"
    for seed in range(8):
        got = extract(text, Bare, model=tiny_model(toy_tokenizer, seed=seed, std=0.5))
        assert {got.lat, got.lon} == {"40.71", "-74.00"}, (seed, got)


class Round(BaseModel):
    kind: Literal["round"] = "round"
    radius: str = Field(pattern=r"^[0-9]+NM$", json_schema_extra={"verbatim": True})


class Box(BaseModel):
    kind: Literal["box"] = "box"
    low: str = Field(pattern=r"^[A-Z]{3}$", json_schema_extra={"verbatim": True})
    high: str = Field(pattern=r"^[A-Z]{3}$", json_schema_extra={"verbatim": True})

    @model_validator(mode="after")
    def _two_corners(self):
        if self.low == self.high:
            raise ValueError("a box needs two corners")
        return self


class Area(BaseModel):
    shape: Optional[Annotated[Union[Round, Box], Field(discriminator="kind")]] = None


class Shape(BaseModel):
    shape: Annotated[Union[Round, Box], Field(discriminator="kind")]


class BoxThenRound(MockModel):
    """Scripted to write a box (the text has one corner: it fails), and to rank a round second."""

    def __init__(self, tok, text, schema):
        self.canvas = build_canvas(schema, tok)
        box = self.canvas.fill({"shape": {"kind": "box", "low": "ABC", "high": "ABC"}})
        super().__init__(tok, dict(enumerate(box)), len(prompt_ids(tok, text, self.canvas)))
        tag = next(s for s in self.canvas.slots if s.kind == "choice")
        self.second = {tag.start + k: t for k, t in enumerate(tok.encode('"round"'))}

    def _logits(self, offset, rows, block, at):
        out = super()._logits(offset, rows, block, at)
        for k, c in enumerate((at[1] + offset).tolist()):
            if c in self.second:
                out[k, self.second[c]] = math.log(0.005)
        return out


@pytest.mark.parametrize("schema", [Area, Shape])
def test_a_variant_the_record_cannot_be_valid_with_is_decoded_again_without_it(toy_tokenizer, schema):
    """The model's box copies its one corner twice and fails its check; the single change that
    would mend it is null (Area), which the model rated below a round, or there is none (Shape):
    the record is decoded again without the box, and the round (its radius copied) is read,
    every pass counted. The round is no surer than the model was of it: the box keeps its
    share of the tag's confidence."""
    text = "a round 5NM wide at ABC"
    model = BoxThenRound(toy_tokenizer, text, schema)
    got, trace = extract(text, schema, model=model, trace=True)
    assert got.shape == Round(radius="5NM")
    assert trace.forward_passes == len(model.calls) > 1 and trace.decodes == 2, model.calls
    print(f"confidence of the tag: {trace.confidence['shape.kind']:.4f}")
    assert trace.lowest == ("shape.kind", trace.confidence["shape.kind"]) and trace.confidence["shape.kind"] < 0.1


class Corner(BaseModel):
    at: str = Field(pattern=r"^[A-Z]{3}$", json_schema_extra={"verbatim": True})


class Ring(BaseModel):
    kind: Literal["ring"] = "ring"
    corners: list[Corner] = Field(min_length=3, max_length=4, json_schema_extra={"item_blocks": True})


class Outline(BaseModel):
    shape: Annotated[Union[Round, Ring], Field(discriminator="kind")]


@pytest.mark.parametrize("text, want", [
    ("a round 5NM wide at ABC", Round(radius="5NM")),
    ("a ring ABC, DEF, GHI of 5NM", Ring(corners=[Corner(at=a) for a in ("ABC", "DEF", "GHI")])),
])
def test_a_variant_needs_a_piece_for_each_item_its_list_must_have(toy_tokenizer, text, want):
    """The model is sure of a ring of three corners, copied in the order of the text (item
    blocks). Where the text names one corner, the ring cannot be filled but by copying it
    thrice: the round is read, in one decode. Where it names three, the ring is read."""
    canvas = build_canvas(Outline, toy_tokenizer)
    ring = canvas.fill({"shape": {"kind": "ring", "corners": [{"at": "ABC"}] * 3}})
    model = MockModel(toy_tokenizer, dict(enumerate(ring)), len(prompt_ids(toy_tokenizer, text, canvas)))
    got, trace = extract(text, Outline, model=model, trace=True)
    assert got.shape == want and trace.decodes == 1


class Crate(Box):
    kind: Literal["crate"] = "crate"


class Case(Box):
    kind: Literal["case"] = "case"


class Packed(BaseModel):
    shape: Annotated[Union[Box, Crate, Case], Field(discriminator="kind")]


def test_a_record_is_decoded_again_at_most_retries_times_then_fails_as_its_first_choice_did(toy_tokenizer, monkeypatch):
    """Every variant copies the text's one corner twice and fails: the record is decoded again
    with the box barred, then with the next, RETRIES times in all, and the error is the one of
    the variant the model preferred, with what to do about it."""
    from clover_struct import api

    decodes, real = [], api.decode
    monkeypatch.setattr(api, "decode", lambda *a, **k: decodes.append(k.get("barred")) or real(*a, **k))
    text, canvas = "stacked at ABC", build_canvas(Packed, toy_tokenizer)
    box = canvas.fill({"shape": {"kind": "box", "low": "ABC", "high": "ABC"}})
    with pytest.raises(ExtractionError) as e:
        extract(text, Packed, model=MockModel(toy_tokenizer, dict(enumerate(box)),
                                              len(prompt_ids(toy_tokenizer, text, canvas))))
    print(f"{len(decodes)} decodes; {e.value}")
    assert len(decodes) == api.RETRIES + 1 and e.value.path == "shape<box>" and "relax the check" in e.value.reason


class Stamp(BaseModel):
    at: str = Field(pattern=r"^[0-9]{4}( UTC)?$", json_schema_extra={"verbatim": True, "max_tokens": 8})
    until: Optional[str] = Field(None, pattern=r"^[0-9]{4}( UTC)?$", json_schema_extra={"verbatim": True})


def test_a_patterned_copy_takes_the_whole_piece(toy_tokenizer):
    """A copy ends where no longer piece its pattern accepts goes on from it: '0800 UTC', not
    the '0800' inside it (a date without its clock, a number without its hemisphere); left
    free, the models stop at the shorter piece too."""
    text = "open 0800 UTC, shut 1730 UTC"
    for seed in range(8):
        got = extract(text, Stamp, model=tiny_model(toy_tokenizer, seed=seed, std=0.5))
        assert got.at in ("0800 UTC", "1730 UTC") and got.until in (None, "0800 UTC", "1730 UTC"), (seed, got)


class Place(BaseModel):
    city: str = Field(pattern=r"^[A-Za-z ]+$", max_length=24, json_schema_extra={"verbatim": True})
    near: Optional[str] = Field(None, pattern=r"^[A-Za-z ]+$", max_length=24, json_schema_extra={"verbatim": True})


class FreePlace(BaseModel):
    city: str = Field(max_length=24, json_schema_extra={"verbatim": True})
    near: Optional[str] = Field(None, max_length=24, json_schema_extra={"verbatim": True})


def test_a_prose_pattern_is_copied_as_free_text(toy_tokenizer):
    """A pattern that takes words run together with spaces (a name, a place) does not say where
    its value ends: the copy ends where the model ends it, as free text's does, not at the
    longest run the pattern takes ('our office moved to New' for 'New York')."""
    text = "our office moved to New York and Ann Lee runs it"
    for seed in range(6):
        model = tiny_model(toy_tokenizer, seed=seed, std=0.5)
        prose, free = extract(text, Place, model=model), extract(text, FreePlace, model=model)
        assert prose.model_dump() == free.model_dump(), (seed, prose, free)


def test_items_written_last_field_first_are_read_item_by_item(toy_tokenizer):
    """Items that give their longitude first ('E14.30 N26.09; E15.00 N26.10'): the list starts at
    the first item's latitude, each longitude is the piece before its latitude, no copy starts
    inside a longer piece (the 14.30 of E14.30 is no latitude), and an item whose longitude
    follows the item before with only separators between is present."""
    text = "area E14.30 N26.09; E15.00 N26.10; E16.00 N26.11 end"
    want = [("N26.09", "E14.30"), ("N26.10", "E15.00"), ("N26.11", "E16.00")]
    for seed in range(8):
        got = extract(text, Spots, model=tiny_model(toy_tokenizer, seed=seed, std=0.5))
        assert [(s.lat, s.lon) for s in got.spots] == want, (seed, got)


def test_items_numbered_in_brackets_are_one_run(toy_tokenizer):
    """'；（2）' stands between two items as '- 2.' does: the list of at least three starts at the
    run of three, not at the lone leg before it."""
    text = "ref QQ10 900. legs: （1）AB12 100；（2）CD34 200；（3）EF56 300 end"
    for seed in range(8):
        got = extract(text, LongLegs, model=tiny_model(toy_tokenizer, seed=seed, std=0.5))
        assert [leg.code for leg in got.legs] == ["AB12", "CD34", "EF56"], (seed, got)


@pytest.mark.parametrize("key", ["copies_before", "copies_beside"])
def test_copies_before_and_beside_name_a_verbatim_sibling_decoded_no_later(toy_tokenizer, key):
    wrong = [({"verbatim": True, key: "nowhere"}, "no verbatim str field"),
             ({key: "end"}, "applies to verbatim str fields"),
             ({"verbatim": True, key: "later"}, "decoded after this one")]
    for extra, says in wrong:
        schema = {"type": "object", "required": ["start", "end", "legs"], "properties": {
            "start": {"type": "string", "pattern": "^[0-9]{4}$", **extra},
            "end": {"type": "string", "pattern": "^[0-9]{4}$", "verbatim": True},
            "legs": {"type": "array", "minItems": 1, "maxItems": 2, "item_blocks": True,
                     "items": {"type": "string", "pattern": "^[A-Z]{2}$", "verbatim": True}},
            "later": {"type": "string", "pattern": "^[0-9]{4}$", "verbatim": True}}}
        with pytest.raises(SchemaError, match=says):
            build_canvas(schema, toy_tokenizer)


CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def test_the_model_reads_glued_notam_items_spaced_and_copies_from_the_text_as_given(toy_tokenizer):
    from clover_struct.api import as_read, prompt_ids
    from clover_struct.schema_walk import build_canvas

    assert as_read("A)ZBPE B)2604270300\r\nE) 5NM (B)ONE f(x)y\rG)UNL") == \
        "A) ZBPE B) 2604270300\nE) 5NM (B) ONE f(x)y\nG) UNL"
    text = "A)ZBPE B)AB12 Ann\r\nC)CD34 Bo"
    prompt = toy_tokenizer.decode(prompt_ids(toy_tokenizer, text, build_canvas(Route, toy_tokenizer)))
    assert "A) ZBPE B) AB12 AnnC) CD34" in prompt       # (the toy tokenizer has no newline)
    for seed in range(3):
        got, trace = extract(text, Route, model=tiny_model(toy_tokenizer, seed=seed, std=0.5), trace=True)
        for k, stop in enumerate(got.stops):        # every copy is a piece of the text as given
            for key in ("gate", "who"):
                start, end = trace.spans[f"stops[{k}].{key}"]
                assert text[start:end].split() == getattr(stop, key).split(), (seed, got)


def test_checkpoints_with_a_chat_template_get_it(toy_byte_tokenizer, monkeypatch):
    from clover_struct.api import prompt_ids
    from clover_struct.schema_walk import build_canvas

    tok = toy_byte_tokenizer
    canvas = build_canvas(Six, tok)
    assert tok.decode(prompt_ids(tok, "the text", canvas)) == "schema: Six\ntext:\nthe text\nrecord:\n"
    monkeypatch.setattr(tok, "chat_template", CHATML)
    chat = tok.decode(prompt_ids(tok, "the text", canvas))
    assert chat.startswith("<|im_start|>user\nExtract a Six record") and '"pattern":"[A-Z]{4}"' in chat
    assert chat.endswith("the text<|im_end|>\n<|im_start|>assistant\n")


def test_without_the_prefix_cache_the_result_is_the_same(toy_tokenizer):
    model = tiny_model(toy_tokenizer, block_size=16, std=0.5)
    texts = ["first notice", "a second, longer notice text"]
    cached = extract_many(texts, Six, model=model, trace=True)
    uncached = extract_many(texts, Six, model=model, trace=True, use_cache=False)
    for (a, ta), (b, tb) in zip(cached, uncached):
        assert a == b and ta.steps == tb.steps
        # cached, the prompt and each finished block go into the next block's first step
        assert ta.forward_passes == tb.forward_passes == tb.steps


def test_a_model_without_prefill_step_gives_the_same_records_in_one_pass_more_per_block(toy_tokenizer):
    from clover_struct.schema_walk import build_canvas

    model = tiny_model(toy_tokenizer, block_size=16, std=0.5)
    canvas = build_canvas(Six, toy_tokenizer)
    slotted = {p for s in canvas.slots for p in range(s.start, s.end)}
    blocks = sum(any(p in slotted for p in range(a, b)) for a, b in canvas.spans(16))
    assert blocks > 1
    texts = ["first notice", "a second, longer notice text"]
    for (a, ta), (b, tb) in zip(extract_many(texts, Six, model=model, trace=True),
                                extract_many(texts, Six, model=without_prefill_step(model), trace=True)):
        assert a == b and tb.forward_passes == ta.forward_passes + blocks


def test_baseline_schedules_take_more_steps_for_the_same_kind_of_result(toy_tokenizer):
    model = tiny_model(toy_tokenizer, block_size=256, std=0.5)
    joint = extract("x", Six, model=model, trace=True)[1]
    for schedule in ("sequential", "one_token"):
        value, trace = extract("x", Six, model=model, trace=True, schedule=schedule)
        assert isinstance(value, Six)
        assert trace.steps > joint.steps
    sequential = extract("x", Six, model=model, trace=True, schedule="sequential")[1]
    assert sequential.steps >= len(Six.model_fields)   # never two fields in one step
    with pytest.raises(UsageError, match="schedule must be one of"):
        extract("x", Six, model=model, schedule="sideways")
