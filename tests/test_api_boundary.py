"""The API's boundary: every user mistake is a CloverError that says what to pass; a failure
while decoding one record is that record's ExtractionError and never its neighbours'; calls
from several threads on one model give what sequential calls give."""

import json
import threading
from decimal import Decimal
from typing import Literal, Optional, Union

import pytest
from pydantic import BaseModel, Field

import clover_struct.api as api
from clover_struct import (CheckpointError, CloverError, ExtractionError, InternalError, SchemaError, UsageError,
                           decide, extract, extract_many, implies, load_model)
from clover_struct.schemas.airspace import NoFlyZone
from clover_struct.schemas.notam import Notam
from tiny_models import tiny_model


class Zone(BaseModel):
    name: str = Field(max_length=6)
    kind: Literal["circle", "polygon"]


class Round(BaseModel):
    kind: Literal["round"]
    radius: float


class Box(BaseModel):
    kind: Literal["box"]
    side: float


class Plot(BaseModel):
    area: Union[Round, Box]
    tags: list[str] = Field(default_factory=list, max_length=3)
    spare: Optional[Box] = None


class Triage(BaseModel):
    urgent: bool
    escalate: bool
    lane: Literal["left", "right", "hold"]


@pytest.fixture(scope="module")
def model(toy_tokenizer):
    return tiny_model(toy_tokenizer, block_size=256, std=0.5)


@pytest.fixture(scope="module")
def byte_model(toy_byte_tokenizer):
    """Byte-level: NoFlyZone's pieces hold °, 北纬 and the like, which the char-level toy cannot write."""
    return tiny_model(toy_byte_tokenizer, block_size=256, std=0.5, max_position_embeddings=8192)


@pytest.fixture(scope="module")
def embedded():
    return load_model()


MISTAKES = [   # (call, error class, what the message must say)
    (lambda m: extract_many("one text", Zone, model=m), UsageError, r"list of texts.*extract\(text, schema\)"),
    (lambda m: extract_many(5, Zone, model=m), UsageError, "list of texts, not a int"),
    (lambda m: extract_many({"a": "text"}, Zone, model=m), UsageError, r"not a mapping.*list\(d.values\(\)\)"),
    (lambda m: extract("x", Zone, model=m, seed=2**64), UsageError, "seed must be a whole number from"),
    (lambda m: extract("x", "Zone", model=m), UsageError, "no such JSON Schema file; pass a pydantic model class"),
    (lambda m: extract("x", Zone(name="a", kind="circle"), model=m), UsageError, "the class Zone itself"),
    (lambda m: extract("x", {"type": "object", "properties": {"a": False}, "required": ["a"]}, model=m),
     SchemaError, "field `a`"),
    (lambda m: extract("x", Zone, model="/models/x"), UsageError, r"load_model\('/models/x'\)"),
    (lambda m: extract_many(["x"], Zone, model=m, batch_size=0), UsageError, "batch_size.*at least 1"),
    (lambda m: extract("x", Zone, model=m, threshold=2), UsageError, "between 0 and 1"),
    (lambda m: extract("x", Zone, model=m, threshold=float("nan")), UsageError, "between 0 and 1"),
    (lambda m: extract("x", Zone, model=m, temperature=-1), UsageError, "temperature must be 0"),
    (lambda m: extract("x", Zone, model=m, seed="a"), UsageError, "seed must be a whole number"),
    (lambda m: extract("x", Zone, model=m, max_tokens=0), UsageError, "max_tokens.*at least 1"),
    (lambda m: extract("x", Zone, model=m, treshold=0.5), UsageError, "no option `treshold`; did you mean `threshold`"),
    (lambda m: extract_many(["x"], Zone, model=m, treshold=0.5), UsageError, r"extract_many\(\) has no option"),
    (lambda m: extract("x", Zone, model=m, known=["name"]), UsageError, "known= takes a dict"),
    (lambda m: extract("x", __import__("typing").TypedDict("Pair", {"a": int}), model=m), SchemaError,
     r"not a pydantic model class or a JSON Schema; for a dataclass or a TypedDict, .*TypeAdapter\(it\)"),
    (lambda m: extract("x", Zone, model=m, known={"nmae": "a"}), UsageError, "no field `nmae`; did you mean `name`"),
    (lambda m: extract("x", Zone, model=m, known={"kind": object()}), UsageError, "`kind`"),
    (lambda m: extract("x", Plot, model=m, known={"area.kind": "box", "area<round>.radius": 2.0}), UsageError,
     r"`area<round>.radius` lies in the member `area<round>`, which the known `area.kind` does not choose"),
    (lambda m: extract("x", Plot, model=m, known={"tags[1]": "b"}), UsageError,
     r"`tags\[1\]` needs the list item before its own, `tags\[0\]`, known too"),
    (lambda m: extract("x", Plot, model=m, known={"area<round>.radius": 2.1234567}), UsageError,
     "writes 2.1234567 as 2.123457"),
    (lambda m: extract("x", Plot, model=m, known={"spare": {"side": 2}}), UsageError,
     r"`spare` is an object: give its fields \(`spare.kind`\), or None to leave it out"),
    (lambda m: extract_many(["x", "y"], Zone, model=m, known=[{}]), UsageError, r"one dict \(or None\) per text"),
    (lambda m: extract_many(["x", "y"], Zone, model=m, known={"kind": "circle"}), UsageError, r"\[known\] \* len"),
    (lambda m: extract_many(["x", "y"], Zone, model=m, known=[None, {"kind": "oval"}]), UsageError,
     "^record 1's known: 'oval' cannot be written in field .kind."),   # which of the batch's, named
    (lambda m: extract(None, Zone, model=m), ExtractionError, "of type NoneType, not str"),
    (lambda m: extract(b"bytes", Zone, model=m), ExtractionError, "decode bytes first"),
    (lambda m: extract("ab\ud800cd", Zone, model=m), ExtractionError, "lone surrogate"),
    (lambda m: decide("x", Triage, model=m, known={"urgnt": True}), UsageError, "did you mean `urgent`"),
    (lambda m: decide("x", Triage, model=m, known=[True]), UsageError, "known= takes a dict"),
    (lambda m: decide("x", Triage, model=m, rules=[implies("urgnet", "escalate")]), UsageError,
     "rule `urgnet implies escalate`: the schema has no field `urgnet`; did you mean `urgent`"),
    (lambda m: decide("x", Triage, model=m, rules=[implies("urgent", "lane=up")]), UsageError,
     r"`lane` has no value 'up'; its values are \['left', 'right', 'hold'\]"),
    (lambda m: decide("x", Triage, model=m, rules=[implies("lane", "urgent")]), UsageError,
     "`lane` is not a bool field; name one of its values, such as `lane=left`"),
    (lambda m: decide("x", Triage, model=m, rules=implies("urgent", "escalate")), UsageError, "list of rules"),
    (lambda m: decide("x", Triage, model=m, rules=["urgent"]), UsageError, "no rule"),
    (lambda m: decide("x", Triage, model=m, rules=[lambda r: 1 / 0]), UsageError, "raised ZeroDivisionError"),
    (lambda m: decide("x", Triage, model="dir"), UsageError, "takes a loaded model"),
]


@pytest.mark.parametrize("call, error, message", MISTAKES)
def test_every_user_mistake_is_a_clover_error_that_says_what_to_pass(model, call, error, message):
    with pytest.raises(error, match=message):
        call(model)


def test_known_takes_the_paths_users_write_and_a_wrong_one_lists_the_close_matches(byte_model, monkeypatch):
    model = byte_model
    seen = []
    decode = api.decode
    monkeypatch.setattr(api, "decode", lambda *a, **k: seen.append(k["known"]) or decode(*a, **k))
    known = {"area.radius": "800 M", "area.center.lat": "3112N"}
    value = extract_many(["No drones within 800 M of 3112N12128E"], NoFlyZone, model=model, known=[known])[0]
    canvas = api.prepare(NoFlyZone, model)[1]
    paths = {canvas.slots[i].path: canvas.tokenizer.decode(ids).strip('"') for i, ids in seen[0][0].items()}
    assert paths == {"area<circle>.radius": "800 M", "area<circle>.center.lat": "3112N", "area.kind": "circle"}
    if not isinstance(value, ExtractionError):
        assert (value.area.radius, value.area.center.lat) == ("800 M", "3112N")
    with pytest.raises(UsageError) as e:
        extract("x", NoFlyZone, model=model, known={"area.radius_unit": "M"})
    message = str(e.value)
    assert "did you mean `area.radius`" in message and message.count("`") <= 10   # not every path
    with pytest.raises(UsageError, match="`area.vertices.lat`.*did you mean"):
        extract("x", NoFlyZone, model=model, known={"area.vertices.lat": "3112N"})
    assert extract("No zone here.", NoFlyZone, model=model, known={"area": None}).area is None   # (had no field `area`)


def test_a_known_item_past_those_laid_out_is_named_as_such(model):
    """An open list inside another holds 3 items; its fourth had been 'no field' of the schema."""
    schema = {"type": "object", "properties": {"orders": {"type": "array", "items": {
        "type": "object", "properties": {"lines": {"type": "array", "items": {"type": "integer"}}}}}}}
    with pytest.raises(UsageError, match=r"`orders\[0\]\.lines\[3\]` is an item past those laid out"):
        extract("x", schema, model=model, known={"orders[0].lines[3]": 1})


def test_an_optional_object_known_as_none_is_left_out(embedded):
    text = "a round plot of radius 4, and a spare box of side 2"
    assert extract(text, Plot, model=embedded, known={"spare": None}).spare is None
    assert extract(text, Plot, model=embedded, known={"spare.side": 2.0}).spare == Box(kind="box", side=2.0)


class Aliased(BaseModel):
    model_config = __import__("pydantic").ConfigDict(strict=True, populate_by_name=True)
    day: __import__("datetime").date = Field(alias="Day")
    ref: __import__("uuid").UUID
    amount: __import__("decimal").Decimal = Field(max_digits=6, decimal_places=2)


def test_a_strict_model_takes_its_json_and_known_values_of_its_python_types(embedded):
    """A strict model validates the record as the JSON it is (a date, a UUID as strings; in Python
    mode every such field had failed), known= takes a field's own Python type (a date had been
    refused as no JSON), and a record is written under its aliases, as the schema reads it back."""
    import datetime
    import decimal
    import uuid

    from clover_struct.distributed import outcome

    known = {"Day": datetime.date(2027, 5, 12), "ref": uuid.UUID(int=7), "amount": decimal.Decimal("12.50")}
    got, trace = extract("Paid 12.50 on 12 May 2027.", Aliased, model=embedded, known=known, trace=True)
    assert (got.day, got.ref, got.amount) == (datetime.date(2027, 5, 12), uuid.UUID(int=7), decimal.Decimal("12.5"))
    record, _, _ = outcome((got, trace))
    assert set(record) == {"Day", "ref", "amount"} and Aliased.model_validate_json(json.dumps(record)) == got
    for odd in (decimal.Decimal("Infinity"), decimal.Decimal("sNaN"), b"\xff", object()):   # raw errors before
        with pytest.raises(UsageError):
            extract("Paid 12.50.", Aliased, model=embedded, known={"amount": odd})


class Login(BaseModel):
    user: str = Field(max_length=12)
    password: __import__("pydantic").SecretStr = Field(max_length=12)


def test_a_known_secret_is_written_as_its_secret_not_its_mask(embedded):
    from pydantic import SecretStr

    got = extract("Log in as dana.", Login, model=embedded, known={"password": SecretStr("hunter2")})
    assert got.password.get_secret_value() == "hunter2"   # (it had been **********)


class Offsets(BaseModel):
    offset: Literal[0.0, 8.0, 5.5]
    city: str = Field(max_length=3)
    note: str = ""


def test_known_values_are_taken_as_the_schema_takes_them(embedded):
    """8 for Literal[8.0] (pydantic and JSON Schema take it; it had been refused); 北京市 for a
    max_length of 3 beside an English text (its canvas had been the text's, too narrow); a value
    past a budget says to raise max_tokens (it had blamed the constraint)."""
    got = extract("Offset eight hours.", Offsets, model=embedded, known={"offset": 8, "city": "北京市"})
    assert (got.offset, got.city) == (8.0, "北京市")
    with pytest.raises(UsageError, match="takes .* tokens, more than the 24 of field `note`; raise its budget"):
        extract("Call back.", Offsets, model=embedded, known={"note": "please call the customer back tomorrow morning before 9"})
    floor = {"type": "object", "properties": {"floor": {"type": "integer", "minimum": 0, "maximum": 99}}}
    for value in (150, "12"):   # no value the field holds, whatever its budget (it had been told to raise it)
        with pytest.raises(UsageError, match=f"known: {value!r} is not a value field `floor` can hold"):
            extract("floor 12", floor, model=embedded, known={"floor": value})

    class Price(BaseModel):   # a bound no grammar holds (max_digits: below 10): a UsageError, as the grammar's
        x: Decimal = Field(max_digits=3, decimal_places=2)

    with pytest.raises(UsageError, match=r"known: Decimal\('12.5'\) is not a value field `x` can hold "
                                         r"\(12.5 breaks lt 10\)"):
        extract("x is 1", Price, model=embedded, known={"x": Decimal("12.5")})
    class Fine(BaseModel):   # more decimals than a number keeps: named as given (it had been the float's)
        x: Decimal = Field(max_digits=30, decimal_places=20)

    with pytest.raises(UsageError, match=r"writes Decimal\('1.1234567891'\) as 1.123457 \(numbers keep at most 6"):
        extract("x is 1", Fine, model=embedded, known={"x": Decimal("1.1234567891")})
    for x in ("1234567890.123456", "9007199254.740993"):   # the second is no float
        assert extract("x is 1", Fine, model=embedded, known={"x": Decimal(x)}).x == Decimal(x)
    anything = {"type": "object", "properties": {"v": {}}, "required": ["v"]}   # Decimals inside, the depth named
    assert extract("v", anything, model=embedded, known={"v": {"a": Decimal("1.5"), "b": Decimal("2")}}) == \
        {"v": {"a": 1.5, "b": 2}}
    with pytest.raises(UsageError, match=r"known: \[\[1\]\] is not .*; a value of any type is held one list or "
                                         r"object deep"):
        extract("v", anything, model=embedded, known={"v": [[1]]})
    stamps = {"type": "object", "properties": {"ms": {"type": "integer"}}}   # the cap of an unbounded number, named
    with pytest.raises(UsageError, match="at most 12 integer digits .9 for a non-integer.: give the field a maximum"):
        extract("at 1717000000000", stamps, model=embedded, known={"ms": 1717000000000})
    stamps["properties"]["ms"]["maximum"] = 1e15
    assert extract("at 1717000000000", stamps, model=embedded, known={"ms": 1717000000000}) == {"ms": 1717000000000}


def test_a_model_that_reads_no_aliases_is_laid_out_by_its_names(embedded):
    """validate_by_alias=False: the canvas had been keyed by the aliases pydantic then ignored, so
    every record failed, nested ones too."""
    from pydantic import ConfigDict
    from pydantic.alias_generators import to_camel

    class Person(BaseModel):
        model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=False)
        first_name: str = Field(max_length=10)

    class Card(BaseModel):
        model_config = ConfigDict(alias_generator=to_camel)
        holder: Person
        card_kind: str = Field(max_length=10)

    assert isinstance(extract("Bob", Person, model=embedded, known={"first_name": "Bob"}), Person)
    got = extract("Bob, visa", Card, model=embedded, known={"holder.first_name": "Bob", "cardKind": "visa"})
    assert (got.holder.first_name, got.card_kind) == ("Bob", "visa")


def test_decide_takes_known_paths_and_enum_values(model):
    answer = decide("smoke in the cabin", Triage, model=model, known={"urgent": True, "lane": "left"},
                    rules=[implies("urgent", "escalate")])
    assert answer.urgent and answer.escalate and answer.lane == "left"


@pytest.mark.parametrize("text", ["hello world", "a1234/26 notamn\nq) egtt/qrdca/iv/bo/w/000/050/5130n00045w005",
                                  "禁止无人机飞行 半径 500 米", "\u202eA1234/26\u202c NOTAMN \ufeff"])
def test_texts_with_no_piece_of_a_pattern_decode_to_a_record_or_its_error(embedded, text):
    # each of these raised IndexError inside the verbatim look-ahead (verbatim.py)
    try:
        assert isinstance(extract(text, Notam, model=embedded), Notam)
    except ExtractionError as e:
        assert not isinstance(e, InternalError), e.__cause__


def _poisoned(monkeypatch, name, fail):
    """api.<name> raising RuntimeError whenever `fail(args)` says so; returns the call log."""
    calls, real = [], getattr(api, name)

    def wrapped(*args, **kwargs):
        calls.append(args)
        if fail(args):
            raise RuntimeError("poisoned")
        return real(*args, **kwargs)
    monkeypatch.setattr(api, name, wrapped)
    return calls


def test_a_batch_that_fails_is_decoded_again_record_by_record(model, monkeypatch):
    texts = ["zone alpha", "POISON here", "zone gamma", "zone delta"]
    clean = extract_many(texts, Zone, model=model, batch_size=4)
    poison = model.tokenizer.encode("POISON")
    has_poison = lambda args: any(str(poison)[1:-1] in str(p) for p in args[1])   # noqa: E731
    calls = _poisoned(monkeypatch, "decode", has_poison)
    got = extract_many(texts, Zone, model=model, batch_size=4)
    assert [len(c[1]) for c in calls] == [4, 1, 1, 1, 1]       # the batch, then each record alone
    assert got[0] == clean[0] and got[2:] == clean[2:]
    assert isinstance(got[1], InternalError) and "decoding failed (RuntimeError: poisoned)" in str(got[1])
    assert isinstance(got[1].__cause__, RuntimeError)
    with pytest.raises(InternalError, match="poisoned") as e:
        extract("POISON", Zone, model=model)
    assert isinstance(e.value.__cause__, RuntimeError)


@pytest.mark.parametrize("stage, message", [("for_text", "reading the text's pieces"),
                                            ("finish", "validating the decoded record")])
def test_a_failure_in_any_stage_stays_with_its_record(model, monkeypatch, stage, message):
    texts = ["zone alpha", "zone beta", "zone gamma"]
    clean = extract_many(texts, Zone, model=model, trace=True)
    count = [0]

    def second(args):
        count[0] += 1
        return count[0] == 2
    _poisoned(monkeypatch, stage, second)
    got = extract_many(texts, Zone, model=model, trace=True)
    assert [got[n][0] for n in (0, 2)] == [clean[n][0] for n in (0, 2)]
    assert [got[n][1].steps for n in (0, 2)] == [clean[n][1].steps for n in (0, 2)]
    assert isinstance(got[1][0], InternalError) and message in str(got[1][0])


@pytest.mark.parametrize("stage, error", [("decode", UsageError), ("prompt_ids", CheckpointError)])
def test_a_mistake_in_the_call_or_the_model_is_not_made_a_record_error(model, monkeypatch, stage, error):
    def wrong(*args, **kwargs):
        raise error("the call is wrong")   # as a chat template without jinja2 installed
    monkeypatch.setattr(api, stage, wrong)
    with pytest.raises(error, match="the call is wrong"):
        extract_many(["a", "b"], Zone, model=model)


def test_a_schema_walk_failure_is_a_schema_error(model, monkeypatch):
    def broken(*args, **kwargs):
        raise TypeError("argument of type 'bool' is not iterable")
    monkeypatch.setattr(api, "build_canvas", broken)
    with pytest.raises(SchemaError, match="could not be laid out.*TypeError") as e:
        extract("x", Zone, model=model)
    assert isinstance(e.value.__cause__, TypeError)


def test_threads_on_one_model_give_the_sequential_results_one_call_at_a_time(model, monkeypatch):
    texts = [f"zone {chr(97 + i) * (1 + i % 3)} number {i}" for i in range(8)]
    sequential = [extract(t, Zone, model=model) for t in texts]
    inside, most, guard, step = [0], [0], threading.Lock(), model.step

    def counted(*args, **kwargs):
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            threading.Event().wait(0.002)   # long enough for another thread to come in, were it let in
            return step(*args, **kwargs)
        finally:
            with guard:
                inside[0] -= 1
    monkeypatch.setattr(model, "step", counted)
    got = [None] * len(texts)

    def work(n):
        try:
            got[n] = extract(texts[n], Zone, model=model)
        except CloverError as e:
            got[n] = e
    threads = [threading.Thread(target=work, args=(n,)) for n in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == sequential
    assert most[0] == 1   # the model is never run by two threads at once


def test_a_truncated_text_binds_verbatim_fields_to_the_part_the_model_sees(toy_tokenizer, monkeypatch):
    model = tiny_model(toy_tokenizer, block_size=64, max_position_embeddings=256)
    seen, for_text = [], api.for_text
    monkeypatch.setattr(api, "for_text", lambda automata, text, tok: seen.append(text) or for_text(automata, text, tok))
    text = "B)zone near the harbour " * 40 + "TAIL9"      # read as "B) zone": more tokens than written
    with pytest.raises(ExtractionError, match="pass truncate=True"):
        extract(text, Zone, model=model)
    value = extract_many([text], Zone, model=model, truncate=True)[0]
    assert isinstance(value, (Zone, ExtractionError))
    assert text.startswith(seen[0]) and 0 < len(seen[0]) < len(text) and "TAIL9" not in seen[0]
    canvas = api.lay_out(Zone, model)       # the whole prompt fits beside the canvas, its end included
    assert len(api.prompt_ids(toy_tokenizer, seen[0], canvas)) <= 256 - len(canvas.ids)


def test_a_truncated_text_ends_on_a_whole_character(toy_byte_tokenizer):
    """A cut between the byte tokens of one character had kept a U+FFFD the text does not hold,
    which validators and verbatim fields then read as the text."""
    model = tiny_model(toy_byte_tokenizer, block_size=64, max_position_embeddings=256)
    canvas = api.lay_out(Zone, model)
    for lead in ("", "a", "ab", "abc"):
        text = lead + "запрещено 😀 " * 60
        ids, kept = api.fit_prompt(model, text, canvas, truncate=True)
        assert text.startswith(kept) and 0 < len(kept) < len(text) and len(ids) <= 256 - len(canvas.ids), kept[-8:]


def test_a_truncated_text_is_tokenized_only_as_far_as_a_context_could_reach(toy_byte_tokenizer, monkeypatch):
    """A 6 MB text had been tokenized whole, six times (58 s, 2.2 GB) to keep its first tokens."""
    model = tiny_model(toy_byte_tokenizer, block_size=64, max_position_embeddings=256)
    canvas = api.lay_out(Zone, model)
    text = "a zone of 2 km " * 200_000
    whole = api.fit_prompt(model, text[:20_000], canvas, truncate=True)
    seen, encode = [], toy_byte_tokenizer.encode
    monkeypatch.setattr(toy_byte_tokenizer, "encode", lambda t: seen.append(len(t)) or encode(t))
    assert api.fit_prompt(model, text, canvas, truncate=True) == whole
    longest = max(map(len, toy_byte_tokenizer.vocabulary_map()))
    assert max(seen) < 256 * longest + 1000, max(seen)


class Strict(BaseModel):
    name: str = Field(max_length=6)

    @__import__("pydantic").model_validator(mode="before")
    @classmethod
    def _refuse(cls, data):
        raise TypeError("before boom")


def test_a_validator_that_raises_another_error_is_the_records_error_naming_it(model):
    with pytest.raises(ExtractionError, match="Strict's validation raised TypeError: before boom") as e:
        extract("a name", Strict, model=model)
    assert not isinstance(e.value, InternalError)
    assert "the text may not state" not in str(e.value)   # the model's code failing: no advice on the text


def test_a_pattern_the_grammar_holds_loosely_is_named_when_no_value_passes(model):
    schema = {"type": "object", "properties": {"c": {"type": "string", "pattern": r"^(ab)\1$"}}, "required": ["c"]}
    with pytest.raises(ExtractionError, match="back-reference or a word boundary, which a grammar holds only loosely"):
        extract("x", schema, model=model)
