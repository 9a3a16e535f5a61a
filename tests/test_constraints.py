"""Slot automata: pad rules, length-aware pruning, counting, choices, checks, random walks."""

import datetime
import json
import random
import re
from typing import Annotated, Literal, Optional, Union

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from clover_struct.constraints import DEAD, ChoiceSet, SlotAutomaton, compile_canvas, slot_value
from clover_struct.errors import ExtractionError, SchemaError
from clover_struct.patterns import content_pattern, delimited, loosened, one_run, regular
from clover_struct.schema_walk import build_canvas


class Circle(BaseModel):
    kind: Literal["circle"]
    radius: int = Field(ge=1, le=500)


class Poly(BaseModel):
    kind: Literal["poly"]
    sides: int = Field(ge=3, le=9)
    label: Optional[str] = Field(None, max_length=3)


class Task(BaseModel):
    who: str = Field(min_length=1, max_length=6)
    priority: Optional[int] = Field(None, ge=-5, le=5)
    due: Optional[datetime.date] = None


class Record(BaseModel):
    code: str = Field(pattern=r"^[A-Z]{2}[0-9]{1,3}$")
    free: str = Field(pattern=r"^[^,]+$")
    some_digit: str = Field(pattern=r"[0-9]", max_length=4)
    lat: float = Field(ge=-90, le=90)
    active: bool
    note: Optional[str] = Field(None, max_length=5)
    at: datetime.datetime
    shape: Annotated[Union[Circle, Poly], Field(discriminator="kind")]
    tasks: list[Task] = Field(min_length=1, max_length=3)
    lead: Optional[Task] = None
    spare: Optional[Annotated[Union[Circle, Poly], Field(discriminator="kind", json_schema_extra={"one_slot": True})]] \
        = None


def slot_named(canvas, autos, path):
    return next(a for s, a in zip(canvas.slots, autos) if s.path == path)


def walk(auto, tokens):
    state = auto.initial
    for t in tokens:
        state = auto.next(state, t)
    return state


def test_pad_only_in_final_states_and_only_pads_after_pad(toy_tokenizer):
    class M(BaseModel):
        n: int = Field(ge=0, le=99)
    c = build_canvas(M, toy_tokenizer)
    (a,) = compile_canvas(c)
    pad, one = toy_tokenizer.pad_id, toy_tokenizer.encode("1")[0]
    assert pad not in a.allowed(a.initial, 2)                       # no value yet: not final
    assert pad in a.allowed(a.initial, 2, allow_empty=True)        # unless the slot may be empty (absent)
    s1 = a.next(a.initial, one)
    assert a.is_final(s1) and pad in a.allowed(s1, 1)
    done = a.next(s1, pad)
    assert list(a.allowed(done, 1)) == [pad] and a.next(done, one) == DEAD
    assert a.accepts([one, pad]) and not a.accepts([pad, one]) and not a.accepts([pad, pad])
    assert a.accepts([pad, pad], allow_empty=True) and not a.accepts([one, one, one])


def test_special_tokens_never_inside_a_value(toy_tokenizer):
    c = build_canvas(Record, toy_tokenizer)
    banned = {toy_tokenizer.mask_id, toy_tokenizer.eos_id}
    for a in compile_canvas(c):
        if isinstance(a, SlotAutomaton):
            for state in range(len(a._t.final.flat)):
                assert not banned & set(a.allowed(state, a.budget).tolist())


def test_pruning_keeps_a_final_state_reachable(toy_tokenizer):
    class M(BaseModel):
        day: datetime.date
        name: str = Field(min_length=3, max_length=5)
    c = build_canvas(M, toy_tokenizer)
    day, name = compile_canvas(c)
    assert day.min_tokens(day.initial) == 10
    assert len(day.allowed(day.initial, 9)) == 0 and len(day.allowed(day.initial, 10)) == 10   # digits
    state = walk(name, toy_tokenizer.encode("ab"))
    assert toy_tokenizer.pad_id not in name.allowed(state, 3)       # min_length 3 not reached
    last = name.allowed(state, 1).tolist()     # the last position must complete the value
    assert name.min_tokens(state) == 1 and last and all(name.is_final(name.next(state, t)) for t in last)
    # Brute force: a token is allowed iff its next state can still finish in the positions left.
    for state in [name.initial, walk(name, [toy_tokenizer.encode("a")[0]]), state]:
        for r in range(1, 6):
            expected = {t for t in range(toy_tokenizer.vocab_size)
                        if name.next(state, t) >= 0 and name.min_tokens(name.next(state, t)) <= r - 1}
            assert set(name.allowed(state, r).tolist()) == expected
            mask = name.allowed_mask(state, r)
            assert set(np.flatnonzero(mask).tolist()) == expected and not mask.flags.writeable


def test_budget_below_the_shortest_value_is_a_schema_error(toy_tokenizer):
    class M(BaseModel):
        day: datetime.date = Field(json_schema_extra={"max_tokens": 9})
    with pytest.raises(SchemaError, match="shortest value needs 10 tokens but the budget is 9") as e:
        compile_canvas(build_canvas(M, toy_tokenizer))
    assert e.value.path == "day" and "max_tokens" in str(e.value)


def test_max_length_counts_characters_not_tokens_or_bytes(toy_tokenizer, toy_byte_tokenizer):
    class M(BaseModel):
        s: str = Field(max_length=3, json_schema_extra={"max_tokens": 8})
        n: Optional[str] = Field(None, max_length=2)
    s, n = compile_canvas(build_canvas(M, toy_tokenizer))
    enc, pad = toy_tokenizer.encode, toy_tokenizer.pad_id
    assert s.accepts(enc('a\\"b')) and not s.accepts(enc("abcd")) and s.accepts(enc("abc"))   # \" is one
    assert n.accepts(enc("null")) and n.accepts(enc('"ab"')) and n.accepts(enc('"a"') + [pad])
    assert n.budget == 4 and not n.accepts(enc('"abc"')) and not n.accepts(enc('"a'))
    s, _ = compile_canvas(build_canvas(M, toy_byte_tokenizer))
    enc = toy_byte_tokenizer.encode
    assert s.accepts(enc("北京")) and s.accepts(enc("Zoë")) and not s.accepts(enc("北京市!"))


@pytest.mark.parametrize("tokenizer", ["toy_tokenizer", "toy_byte_tokenizer"])
def test_a_nullable_string_with_a_min_length_may_be_null(request, tokenizer):
    """null had counted as a string of no characters: an Optional[str] with min_length (every
    Optional URL) could never be null, so a text without one failed."""
    tok = request.getfixturevalue(tokenizer)

    class M(BaseModel):
        n: Optional[str] = Field(None, min_length=3, max_length=5)
        m: Optional[str] = Field(None, min_length=2)

    enc = tok.encode
    for a in compile_canvas(build_canvas(M, tok)):
        assert a.accepts(enc("null")) and a.accepts(enc('"nnn"')) and a.accepts(enc('"null"'))
        assert not any(a.accepts(enc(t)) for t in ('""', '"n"', "nul", '"nul'))


class City(BaseModel):
    city: str = Field(max_length=3)
    code: str = Field(pattern=r"^.{0,3}$")


def test_a_free_strings_budget_holds_max_length_letters_of_the_text(toy_byte_tokenizer):
    """max_length counts characters, a slot's budget tokens: for a text whose letters take up to
    three tokens each (a byte-level vocabulary without 市), a free string's budget is three tokens
    a character, so 北京市 is written whole (it had been cut to what 3 tokens spell: 北)."""
    from clover_struct import extract
    from clover_struct.api import prepare, prompt_ids
    from clover_struct.vocab import letter_tokens
    from tiny_models import MockModel

    tok, text = toy_byte_tokenizer, "城市: 北京市, code 北京市"
    assert [letter_tokens(tok, t) for t in ("city: Oslo", "Zoë", text, "市 😀")] == [1, 1, 3, 3]   # ë is a token
    mock = MockModel(tok, {}, 0)
    narrow, wide = (prepare(City, mock, None, width)[1] for width in (1, 3))
    assert [s.budget for s in narrow.slots] == [3, 3] and [s.budget for s in wide.slots] == [9, 3]   # a pattern: one each
    mock.script = dict(enumerate(wide.fill({"city": "北京市", "code": "abc"})))
    mock.width = len(prompt_ids(tok, text, wide))
    assert extract(text, City, model=mock) == City(city="北京市", code="abc")


def test_texts_share_a_canvas_wherever_their_widths_change_nothing(toy_byte_tokenizer):
    """A schema whose strings have patterns (NoFlyZone's) lays out alike at every width: its wide
    and narrow texts are one batch, one decode (the demo's Chinese notices had been a second
    decode: 21 forward passes for 12)."""
    from clover_struct.api import by_width, laid_width
    from tiny_models import MockModel

    class Coded(BaseModel):
        code: str = Field(pattern=r"^.{0,3}$")

    mock, texts = MockModel(toy_byte_tokenizer, {}, 0), ["city: Oslo", "城市: 北京市", "Zoë"]
    assert laid_width(City, mock, None, 3) == 3 and laid_width(Coded, mock, None, 3) == 1
    assert by_width(City, mock, None, texts) == {1: [0, 2], 3: [1]} and by_width(Coded, mock, None, texts) == {1: [0, 1, 2]}


def test_a_wide_canvas_past_the_context_falls_back_to_one_token_a_letter(toy_byte_tokenizer):
    from clover_struct import extract
    from clover_struct.api import prepare, prompt_ids
    from tiny_models import MockModel

    class Long(BaseModel):
        city: str = Field(max_length=60)

    tok, text = toy_byte_tokenizer, "城市: 北京市"
    narrow, wide = (prepare(Long, MockModel(tok, {}, 0), None, width)[1] for width in (1, 3))
    prompt = len(prompt_ids(tok, text, narrow))
    mock = MockModel(tok, dict(enumerate(narrow.fill({"city": "北京市"}))), prompt, context=len(narrow) + prompt + 10)
    assert len(wide) > mock.config.max_position_embeddings   # a canvas of 3 tokens a letter would not fit
    assert extract(text, Long, model=mock) == Long(city="北京市")


def test_a_max_length_of_zero_is_an_empty_string_by_grammar(toy_tokenizer):
    """max_length 0 had been read as no bound: a free string of 24 tokens, checked afterwards."""
    class Empty(BaseModel):
        b: str = Field(max_length=0)
        d: str = Field(pattern="^x*$", max_length=0)

    c = build_canvas(Empty, toy_tokenizer)
    autos, enc = compile_canvas(c), toy_tokenizer.encode
    assert [s.budget for s in c.slots] == [1, 1]
    for name in ("b", "d"):
        slot = slot_named(c, autos, name)
        assert slot.accepts([toy_tokenizer.pad_id]) and not slot.accepts(enc("x"))


def test_user_patterns_apply_to_the_unescaped_content(toy_tokenizer):
    c = build_canvas(Record, toy_tokenizer)
    autos = compile_canvas(c)
    code, free = slot_named(c, autos, "code"), slot_named(c, autos, "free")
    enc = toy_tokenizer.encode
    assert code.accepts(enc("AB12")) and not code.accepts(enc("A12")) and not code.accepts(enc("AB1234"))
    assert free.accepts(enc('x\\"y')) and not free.accepts(enc("a,b")) and not free.accepts(enc('a"b'))
    digit = slot_named(c, autos, "some_digit")      # unanchored: a search, as in pydantic
    assert digit.accepts(enc("ab1c")) and not digit.accepts(enc("abc")) and not digit.accepts(enc("ab1cd"))


@pytest.mark.parametrize("pattern, loose", [
    ("^(?!-)[a-z0-9-]{1,8}$", "^[a-z0-9-]{1,8}$"), (r"\b(?:high|low)\b", "(?:high|low)"),
    ("(?:in$|^out)", "(?:in|out)"), ("^a$|b", "a|b"), (r"^(a)-\1$", "^(a)-.*$"), ("[(?!]x", "[(?!]x"),
    ("^x(?<!y)z$", "^xz$"), (r"^v?\d+|^dev-", r"v?\d+|dev-")])   # (composer's: `^` before each branch)
def test_a_pattern_no_automaton_holds_is_loosened_for_it_and_checked_whole(toy_tokenizer, pattern, loose):
    assert not regular(pattern) or pattern == loose
    assert loosened(pattern) == loose
    for text in ("a", "b", "-ab", "ab-c", "a-a", "xz", "in", "out", "high", "x(z"):   # loosened: never stricter
        assert not re.search(pattern, text) or re.search(loose, text)
    schema = {"type": "object", "required": ["v"], "properties": {"v": {"type": "string", "pattern": pattern}}}
    c = build_canvas(schema, toy_tokenizer)
    assert [(k.op, k.bound) for k in c.slots[0].checks] == ([("pattern", pattern)] if pattern != loose else [])


@pytest.mark.parametrize("pattern, kept", [
    (r"^[^.\s]{1,32}(\.[^.\s]{1,32}){1,3}$", True),   # winget's identifiers: the dots cut the runs apart
    (r"^[a-z0-9_-]{1,40}$", True), (r"^x[ab]{0,40}$", True),
    (r"^[a-z][a-z0-9_]{0,63}$", False),   # the run may start at the first letter or the second
    (r"[a-z]{1,40}", False)])              # unanchored: a search, which may start anywhere
def test_a_wide_count_is_kept_where_the_literals_cut_the_runs_apart(toy_tokenizer, pattern, kept):
    """Counted, such a pattern's automaton has states in proportion to its counts; else
    exponentially many, and the count is loosened to `{m,}` (the final check holds it)."""
    assert not delimited(r"^[ab]{0,30}a[ab]{30}$") and not delimited(r"^[ab]{0,30}[ac]{1,1}[ab]{30}$")
    schema = {"type": "object", "required": ["v"],
              "properties": {"v": {"type": "string", "pattern": pattern, "maxLength": 64}}}
    c = build_canvas(schema, toy_tokenizer)
    lo, hi = max(re.findall(r"\{(\d+),(\d+)\}", pattern), key=lambda m: int(m[1]) - int(m[0]))
    assert (f"{{{lo},{hi}}}" in c.slots[0].pattern) == kept == delimited(pattern)
    if pattern.startswith("^[^.") and kept:   # a segment one past its count: refused as it is written
        v, enc = slot_named(c, compile_canvas(c), "v"), toy_tokenizer.encode
        assert v.accepts(enc("a" * 32 + ".b")) and not v.accepts(enc("a" * 33 + ".b"))


@pytest.mark.parametrize("kind", ["string", ["string", "null"]])
def test_one_counted_class_past_ascii_is_a_length_bound(toy_tokenizer, kind):
    """`^.{1,24}$` is a length bound: the slot counts it (nullable, a DFA counting it would not
    be built in six minutes), and takes 1 to 24 characters, as written, or null where nullable.
    Counted before a quote, a wider class loosens its count (winget's identifiers: the final
    check holds it); an ASCII one's stays."""
    winget, ascii = r"^[^.\s]{1,32}(\.[^.\s]{1,32}){1,3}$", r"^[a-z0-9]{1,40}(\.[a-z0-9]{1,40})*$"
    schema = {"type": "object", "required": ["v", "w", "x", "y"], "properties": {
        "v": {"type": kind, "pattern": "^.{1,24}$"}, "w": {"type": kind, "pattern": "^[^,]{2,40}$", "maxLength": 30},
        "x": {"type": kind, "pattern": winget}, "y": {"type": kind, "pattern": ascii}}}
    c = build_canvas(schema, toy_tokenizer)
    autos, enc = compile_canvas(c), toy_tokenizer.encode
    quoted = (lambda t: f'"{t}"') if kind != "string" else (lambda t: t)
    for name, lo, hi in (("v", 1, 24), ("w", 2, 30)):
        slot = slot_named(c, autos, name)
        assert next(s for s in c.slots if s.path == name).length == (lo, hi)
        assert slot.accepts(enc(quoted("x" * lo))) and slot.accepts(enc(quoted("x" * hi)))
        assert not slot.accepts(enc(quoted("x" * (lo - 1)))) and not slot.accepts(enc(quoted("x" * (hi + 1))))
    assert ("{1,32}" in c.slots[2].pattern) == (kind == "string") and "{1,40}" in c.slots[3].pattern
    assert one_run(r"^[a-z][a-z]{1,4}$") is None and one_run(r"^[a-z]{1,4}$") is None
    assert one_run(r"^\w{3,9}$") == (r"\w", 3, 9)


def test_a_count_of_a_class_past_ascii_is_loosened_unless_narrow_or_delimited():
    """An automaton counting `.` between literals it also takes grows exponentially with the count
    (`^.{1,12}@.{1,12}$`: 32 s to lay out, nullable `^.{2,10} .{2,10}$` 144 s): such counts are
    written {m,}, the final check holds them. ASCII classes, counts of at most WIDE_CLASS_REPEAT
    and runs the literals cut apart (unquoted) keep theirs."""
    assert content_pattern(r"^.{1,12}@.{1,12}$", "v").count("{1,}") == 2
    assert content_pattern(r"^[a-z]{1,12}@[a-z]{1,12}$", "v").count("{1,12}") == 2
    narrow = content_pattern(r"^\w{1,3}-(x|\w){1,12}$", "v")
    assert "{1,3}" in narrow and "{1,12}" not in narrow and "(ab){1,12}" in content_pattern(r"^(ab){1,12}$", "v")
    cut = r"^[^/]{1,20}/[^/]{1,20}$"
    assert content_pattern(cut, "v").count("{1,20}") == 2 and "{1,20}" not in content_pattern(cut, "v", quoted=True)


def test_a_long_count_after_a_run_of_any_length_is_loosened_to_a_run(toy_tokenizer):
    """After a run of any length (an unanchored start is one) an automaton counting a class the
    run also takes needs states exponential in the count, even written {n,}: `^[ab]*a[ab]{16}$`
    took 45 s to lay out and unanchored `a[ab]{16}$` past 23 GB, a server's worker held meanwhile.
    Such a count is written `*`; the final check holds the pattern."""
    for pattern in ("^[ab]*a[ab]{16}$", "a[ab]{16}$", "^[ab]{0,30}a[ab]{30}$", "^[ab]*a[ab]{3,40}$"):
        written = content_pattern(pattern, "v")
        assert not re.search(r"\{(1[3-9]|[2-9][0-9])", written) and written.endswith("]*)"), written
    assert "{12}" in content_pattern("^[ab]*a[ab]{12}$", "v") and "{16}" in content_pattern("^[A-Z]{4}[0-9]{16}$", "v")
    schema = {"type": "object", "required": ["v"], "properties": {"v": {"type": "string", "pattern": "a[ab]{16}$"}}}
    v = slot_named(c := build_canvas(schema, toy_tokenizer), compile_canvas(c), "v")
    assert v.accepts(toy_tokenizer.encode("xab"))   # the automaton's; `validate` refuses it
    with pytest.raises(ExtractionError, match="does not match"):
        c.validate(c.fill({"v": "xab"}))


def test_a_pattern_beside_a_format_holds_both(toy_tokenizer):
    schema = {"type": "object", "required": ["day", "mail"], "properties": {
        "day": {"type": "string", "format": "date", "pattern": "^202[0-9]-"},
        "mail": {"type": ["string", "null"], "format": "email", "pattern": "@clover\\.invalid$"}}}
    c = build_canvas(schema, toy_tokenizer)
    autos = compile_canvas(c)
    day, mail = slot_named(c, autos, "day"), slot_named(c, autos, "mail")
    enc = toy_tokenizer.encode
    assert day.accepts(enc("2024-05-01")) and day.budget <= 10
    assert not day.accepts(enc("2019-05-01")) and not day.accepts(enc("2024-5-1"))   # the pattern, the format
    assert mail.accepts(enc('"ops@clover.invalid"')) and mail.accepts(enc("null"))
    assert not mail.accepts(enc('"ops@example.org"')) and not mail.accepts(enc('"@clover.invalid"'))
    assert not any(check.op == "format" for s in c.slots for check in s.checks if s.path == "mail")


def test_a_tokenizer_without_a_mask_token_takes_one_by_argument(make_toy_tokenizer):
    tok = make_toy_tokenizer(["<|endoftext|>", "<|pad|>"])
    assert tok.mask_id is None
    with pytest.raises(ValueError, match="mask_id="):
        build_canvas(Task, tok)
    c = build_canvas(Task, tok, mask_id=tok.eos_id)
    assert c.mask_id == tok.eos_id and c.ids.count(tok.eos_id) == sum(s.budget for s in c.slots)
    for a in compile_canvas(c):
        assert tok.eos_id not in a.allowed(a.initial, a.budget)
    with pytest.raises(ExtractionError, match="not filled"):
        c.parse(c.ids)
    assert c.validate(c.fill(Task(who="bo", priority=-5))) == Task(who="bo", priority=-5)


def test_choice_sets_score_whole_candidates(toy_tokenizer):
    class M(BaseModel):
        kind: Literal["a", "bcd"]
    c = build_canvas(M, toy_tokenizer)
    (choice,) = compile_canvas(c)
    pad = toy_tokenizer.pad_id
    assert isinstance(choice, ChoiceSet) and choice.ids.shape == (2, 5)
    assert choice.ids[0].tolist() == toy_tokenizer.encode('"a"') + [pad, pad]
    assert choice.candidates(allow_empty=True).shape == (3, 5)
    logp = np.full((5, toy_tokenizer.vocab_size), -5.0)
    logp[np.arange(5), choice.ids[1]] = -0.1
    assert choice.score(logp).argmax() == 1 and choice.score(logp, allow_empty=True).shape == (3,)
    assert choice.index(choice.ids[1][:5].tolist()) == 1 and choice.value(1) == "bcd"
    assert choice.accepts(toy_tokenizer.encode('"a"')) and not choice.accepts(toy_tokenizer.encode('"b"'))
    assert choice.accepts([pad] * 5, allow_empty=True) and not choice.accepts([pad] * 5)


def test_checks_no_regex_expresses_are_reported(toy_tokenizer):
    c = build_canvas(Record, toy_tokenizer)
    lat = slot_named(c, compile_canvas(c), "lat")
    assert lat.accepts(toy_tokenizer.encode("96.5"))                  # the regex caps digits only
    assert lat.violation(96.5) == "96.5 breaks le 90" and lat.violation(-89.0) is None
    ids = list(c.fill(Record(code="AB1", free="x", some_digit="1", lat=1.5, active=True, at="2024-01-01T00:00:00Z",
                             shape=Circle(kind="circle", radius=3), tasks=[Task(who="a")])))
    i = [s.path for s in c.slots].index("lat")
    assert slot_value(c, ids, i) == (1.5, None)


def test_automata_are_shared_per_pattern(toy_tokenizer):
    c = build_canvas(Record, toy_tokenizer)
    autos = compile_canvas(c)
    assert compile_canvas(c) is autos
    whos = [a for s, a in zip(c.slots, autos) if s.path.endswith(".who")]
    assert len(whos) == 4 and all(a._t is whos[0]._t for a in whos)


def random_fill(canvas, autos, rng: random.Random) -> list[int]:
    """What a decoder does, with random choices: groups decided in order, each slot walked
    left to right over allowed tokens (a verbatim slot's, as the decoder's, passed over while
    no whole piece can follow), values breaking a check drawn again."""
    ids, pad, present, chosen = list(canvas.ids), canvas.pad_id, {}, {}
    for g in canvas.groups:
        if g.kind != "variant":
            up = (g.parent is None or present[g.parent]) and (g.prev is None or present[g.prev])
            present[g.index] = up and (g.required or rng.random() < 0.6)
    for i, (slot, auto) in enumerate(zip(canvas.slots, autos)):
        g = slot.group
        if g is not None and canvas.groups[g].kind == "variant":
            parent = canvas.groups[g].parent
            present[g] = (parent is None or present[parent]) and chosen.get(canvas.groups[g].selector) in \
                canvas.groups[g].tags
        if g is not None and not present[g]:
            ids[slot.start:slot.end] = [pad] * slot.budget
            continue
        for _ in range(20):
            if isinstance(auto, ChoiceSet):
                row = rng.randrange(len(auto.texts))
                tokens, chosen[i] = auto.ids[row].tolist(), auto.texts[row]
            else:
                state, tokens = auto.initial, []
                for pos in range(slot.budget):
                    allowed = auto.allowed(state, slot.budget - pos)
                    assert len(allowed), f"{slot.path}: dead end at position {pos}"
                    values = [t for t in allowed.tolist() if t != pad]
                    t = pad if pad in allowed and (not values or rng.random() < 0.3) else rng.choice(values)
                    while hasattr(auto, "viable") and not auto.viable(state, t, slot.budget - pos - 1):
                        values.remove(t)
                        if not values and pad not in allowed:
                            state = auto.release(state)
                            values = auto.allowed(state, slot.budget - pos).tolist()
                        t = rng.choice(values) if values else pad
                    tokens.append(t)
                    state = auto.next(state, t)
                assert auto.is_final(state) and auto.accepts(tokens)
            ids[slot.start:slot.end] = tokens
            if slot_value(canvas, ids, i)[1] is None:
                break
    return ids


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_walks_always_give_a_valid_record(toy_tokenizer, seed):
    c = build_canvas(Record, toy_tokenizer)
    ids = random_fill(c, compile_canvas(c), random.Random(seed))
    record = c.validate(ids)
    assert isinstance(record, Record) and 1 <= len(record.tasks) <= 3


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_walks_with_a_byte_level_tokenizer(toy_byte_tokenizer, seed):
    c = build_canvas(Record, toy_byte_tokenizer)
    record = c.validate(random_fill(c, compile_canvas(c), random.Random(seed)))
    assert all(1 <= len(t.who) <= 6 for t in record.tasks) and (record.note is None or len(record.note) <= 5)


VERBATIM = {"verbatim": True}


class Copied(BaseModel):
    code: str = Field(pattern=r"^[A-Z]{2}[0-9]{1,3}$", json_schema_extra=VERBATIM)
    said: str = Field(max_length=12, json_schema_extra=VERBATIM)
    note: Optional[str] = Field(None, max_length=8, json_schema_extra=VERBATIM)


def values_of(auto, budget, pad, limit=20_000) -> set[tuple[int, ...]]:
    """Every complete token sequence a decoder can write in a verbatim slot (depth first): it
    picks among the allowed tokens those `viable` passes, or gives the copy up if none does."""
    found, todo = set(), [((), auto.initial)]
    while todo and len(found) < limit:
        seq, state = todo.pop()
        if len(seq) == budget or seq and seq[-1] == pad:
            found.add(tuple(t for t in seq if t != pad))
            continue
        left = budget - len(seq)
        tokens = [t for t in auto.allowed(state, left).tolist() if auto.viable(state, t, left - 1)]
        if not tokens:
            state = auto.release(state)
            tokens = auto.allowed(state, left).tolist()
        todo += [(seq + (t,), auto.next(state, t)) for t in tokens]
    return found


def bound(tok, text):
    from clover_struct.verbatim import Verbatim, for_text

    canvas = build_canvas(Copied, tok)
    autos = for_text(compile_canvas(canvas), text, tok)
    assert sum(isinstance(a, Verbatim) for a in autos) == 3
    return canvas, autos


def test_verbatim_values_are_whole_pieces_of_the_text(toy_tokenizer):
    canvas, autos = bound(toy_tokenizer, 'Seen: AB12,\n  then AB123 and "X9" (not AB1234).')
    s = canvas.slots[0]
    codes = {toy_tokenizer.decode(list(v)) for v in values_of(autos[0], s.budget, canvas.pad_id)}
    # AB1 and AB123's AB12 would end inside a run of digits; AB1234 breaks the pattern
    assert codes == {"AB12", "AB123"}


def test_a_free_text_piece_neither_starts_nor_ends_with_a_space(toy_tokenizer):
    canvas, autos = bound(toy_tokenizer, "SFC UP TO 400FT")
    s = canvas.slots[1]
    said = {toy_tokenizer.decode(list(v)) for v in values_of(autos[1], s.budget, canvas.pad_id)}
    assert {"SFC", "SFC UP TO", "400FT", "UP"} <= said and "P TO" not in said
    assert not any(v.startswith(" ") or v.endswith(" ") for v in said), sorted(said)


def test_a_line_end_inside_a_coordinate_is_read_as_if_the_line_went_on():
    """A notice wrapped at a fixed width cuts `N292000` as `N2` and `92000`, or `0115354.9W` before
    its point: copies and the prompt read it whole, the copy's place is in the text as given;
    other line ends stay spaces."""
    from clover_struct.api import as_read
    from clover_struct.verbatim import folded

    text = ("BOUNDED BY:\r\nN294500E1220500-N2\r\n92000E1222500-N3712E0\n8946-161937.5S0115354\n.9W BACK TO START\n"
            "ALT 1200\n1500 E2 \n3")
    data, origin = folded(text)
    assert b"-N292000E1222500-N3712E08946-161937.5S0115354.9W BACK" in data and b"1200 1500 E2 3" in data
    start = data.find(b"N292000")
    assert text[origin[start]:origin[start + 6] + 1] == "N2\r\n92000"
    read = as_read(text)
    assert "-N292000E1222500-N3712E08946-161937.5S0115354.9W BACK" in read and "1200\n1500 E2 \n3" in read


class Round(BaseModel):
    kind: Literal["round"] = "round"
    radius: str = Field(pattern=r"\d+NM", json_schema_extra={"verbatim": True})


class Boxed(BaseModel):
    kind: Literal["boxed"] = "boxed"
    corner: str = Field(pattern=r"[A-Z]{3}", json_schema_extra={"verbatim": True})
    note: Optional[str] = Field(None, pattern=r"\d+NM", json_schema_extra={"verbatim": True})


class Shaped(BaseModel):
    shape: Optional[Annotated[Union[Round, Boxed], Field(discriminator="kind")]] = None


def test_a_variant_that_must_copy_what_the_text_lacks_is_not_chosen(toy_tokenizer):
    """A circle's radius is copied: where the text states none, the model may not pick the
    circle (it would have to write the radius); an optional copy bars nothing, and where no
    variant can be filled the null is left."""
    from clover_struct.rows import Row
    from clover_struct.verbatim import for_text

    canvas = build_canvas(Shaped, toy_tokenizer)
    i = next(k for k, s in enumerate(canvas.slots) if s.kind == "choice")

    def barred(text):
        row = Row(canvas, for_text(compile_canvas(canvas), text, toy_tokenizer))
        cands = row.choices(i)
        return sorted(toy_tokenizer.decode([t for t in cands[k] if t != canvas.pad_id])
                      for k in row.unreachable(i, cands))

    assert barred("a round 5NM wide, or a box at ABC") == []
    assert barred("a box at ABC of unknown size") == ['"round"']
    assert barred("nothing to copy here") == ['"boxed"', '"round"']


def test_verbatim_strings_copy_escapes_and_fold_whitespace(toy_tokenizer):
    canvas, autos = bound(toy_tokenizer, 'He said "go  now"\tthen\nleft')
    i = next(k for k, s in enumerate(canvas.slots) if s.path == "said")
    said = {canvas.slots[i].value(toy_tokenizer.decode(list(v)))
            for v in values_of(autos[i], canvas.slots[i].budget, canvas.pad_id)}
    assert {'"go now"', "He said", "then left", "left"} <= said
    folded = 'He said "go now" then left'
    assert all(v in folded for v in said)


def test_a_copied_piece_has_its_place_in_the_text_as_written(toy_tokenizer):
    from clover_struct.verbatim import folded, pieces, Source

    text = '  Fix at N35\n  0047E, said "go"\tN35 0047E again'
    data, origin = folded(text)
    assert data == json.dumps(" ".join(text.split()), ensure_ascii=False)[1:-1].encode() and len(origin) == len(data) + 1
    src = Source(text, pieces(toy_tokenizer, toy_tokenizer.vocab_size))
    first, second = src.span(None, b"N35 0047E"), src.span((len(data) - 6,), b"N35 0047E")
    assert text[first[0]:first[1]] == "N35\n  0047E" and text[second[0]:second[1]] == "N35 0047E"
    start, end = src.span(None, b'\\"go\\"')
    assert text[start:end] == '"go"'
    assert src.span(None, b"nowhere") is None
    # a piece found anew (a value repair put in) stands at word edges; é and a combining accent are letters
    text = "XEGKKX EGLL, café, Zu\u0308rich, EGKK"
    src = Source(text, pieces(toy_tokenizer, toy_tokenizer.vocab_size))
    start, end = src.span(None, b"EGKK")
    assert (start, end) == (len(text) - 4, len(text))
    assert [src.span(None, piece.encode()) for piece in ("caf", "Zu", "rich")] == [None, None, None]
    assert src.span(None, "café".encode()) == (13, 17)
    # Korean writes spaces between words, and full-width letters and digits run on: no '서' of '서울'
    text = "서울 ＥＧＬＬ １２０米"
    src = Source(text, pieces(toy_tokenizer, toy_tokenizer.vocab_size))
    assert [src.span(None, piece.encode()) for piece in ("서", "Ｅ", "２０米")] == [None, None, None]
    assert [src.span(None, piece.encode()) for piece in ("서울", "ＥＧＬＬ", "１２０米", "米")] == [(0, 2), (3, 7), (8, 12), (11, 12)]
    # a control character's escape is one piece whole: no digits copied out of \u0012 (0012N)
    text = "WI 1NM OF \x12N 1214312E, quote \\"
    src = Source(text, pieces(toy_tokenizer, toy_tokenizer.vocab_size))
    assert src.span(None, b"0012N") is None and src.span(None, b"u0012N") is None
    assert text[slice(*src.span(None, b"\\u0012N"))] == "\x12N"
    assert src.span(None, b"\\") is None and src.span(None, b"\\\\") == (len(text) - 1, len(text))


def test_a_verbatim_piece_is_not_empty_and_null_says_absent(toy_tokenizer):
    canvas, autos = bound(toy_tokenizer, "Pilots note: keep clear")
    for path in ("said", "note"):
        i = next(k for k, s in enumerate(canvas.slots) if s.path == path)
        values = {canvas.slots[i].value(toy_tokenizer.decode(list(v)))
                  for v in values_of(autos[i], canvas.slots[i].budget, canvas.pad_id)}
        assert "" not in values and "keep" in values
        assert (None in values) == (path == "note")


@pytest.mark.parametrize("tokenizer, text", [
    ("toy_tokenizer", "nothing to copy here"),                  # no code: the pattern alone decides it
    ("toy_byte_tokenizer", "禁止无人机飞行 半径 500 米 Zoë"),      # UTF-8 split across byte tokens
])
def test_random_walks_over_verbatim_slots_end_well(request, tokenizer, text):
    canvas, autos = bound(request.getfixturevalue(tokenizer), text)
    for seed in range(20):
        record = canvas.validate(random_fill(canvas, autos, random.Random(seed)))
        assert record.said in text and (record.note is None or record.note in text)


def test_verbatim_is_for_strings_only(toy_tokenizer):
    class Bad(BaseModel):
        n: int = Field(json_schema_extra=VERBATIM)

    class Choice(BaseModel):
        kind: Literal["a", "b"] = Field(json_schema_extra=VERBATIM)

    for schema in (Bad, Choice):
        with pytest.raises(SchemaError, match="verbatim applies to str fields only"):
            build_canvas(schema, toy_tokenizer)


def test_the_look_ahead_rejects_dead_starts_and_gives_up_when_long(toy_tokenizer):
    canvas, autos = bound(toy_tokenizer, "X9 then AB12")
    code, left, x = autos[0], canvas.slots[0].budget - 1, toy_tokenizer.encode("X")[0]
    assert x in code.allowed(code.initial, left + 1).tolist()   # X is a word of the text ...
    assert not code.viable(code.initial, x, left)                # ... but no code of the pattern starts there
    assert code.viable(code.initial, toy_tokenizer.encode("A")[0], left)
    code._finish.clear()
    code.SEARCH = 0     # a search that would run past its bound allows the token
    assert code.viable(code.initial, x, left)


def test_the_look_ahead_answers_on_a_text_with_no_piece_of_the_pattern(toy_tokenizer):
    # "hello world" holds no code: every token the pattern allows leaves the text, and the
    # look-ahead must say no (it raised IndexError: it searched on from a given-up copy)
    canvas, autos = bound(toy_tokenizer, "hello world")
    code, left = autos[0], canvas.slots[0].budget - 1
    tokens = code.allowed(code.initial, left + 1).tolist()
    assert tokens and not any(code.viable(code.initial, t, left) for t in tokens)
    free = code.release(code.initial)
    assert all(code.viable(free, t, left) for t in code.allowed(free, left + 1).tolist())
    ids = random_fill(canvas, autos, random.Random(0))
    assert re.fullmatch(r"[A-Z]{2}[0-9]{1,3}", canvas.validate(ids).code)


def bfs_distances(tables) -> np.ndarray:
    """Fewest tokens from each (state, characters written) to a final one, by a plain search back
    from the final pairs over every token's move: the reference `_Tables.dist` must equal."""
    n, w = len(tables.table), tables.width
    far = np.iinfo(np.int64).max
    back: dict = {}
    for q in range(n):
        for c in range(w):
            targets, columns = tables.step(q, c, tables.toks[q])
            for t, c2 in zip(targets.tolist(), np.broadcast_to(columns, targets.shape).tolist()):
                back.setdefault((t, c2), []).append((q, c))
    dist = np.full((n, w), far)
    todo = [(q, c) for q in range(n) for c in range(w) if tables.final[q, c]]
    for q, c in todo:
        dist[q, c] = 0
    for q, c in todo:   # (todo grows as it is walked: breadth first)
        for p in back.get((q, c), []):
            if dist[p] == far:
                dist[p] = dist[q, c] + 1
                todo.append(p)
    return dist


@pytest.mark.parametrize("field", [{"pattern": "^a{60}$"}, {"pattern": "^(ab|c)*d{3}(e|f){2}$"},
                                   {"pattern": "^[A-Z]{2}[0-9]{1,3}$", "minLength": 3, "maxLength": 4},
                                   {"maxLength": 7}, {"format": "date"}])
def test_slot_distances_equal_a_plain_search_back_from_the_final_states(toy_tokenizer, field):
    """The distances every mask is cut by, swept in the order a search back meets the states
    (naive: in state order, a chain of N states took N sweeps), against breadth-first search."""
    from clover_struct.constraints import _FAR, _tables

    canvas = build_canvas({"type": "object", "required": ["v"], "properties": {"v": {"type": "string", **field}}},
                          toy_tokenizer)
    tables = _tables(canvas.slots[0], toy_tokenizer, toy_tokenizer.vocab_size, toy_tokenizer.pad_id,
                     toy_tokenizer.mask_id)
    fast, slow = tables.dist[:, :tables.width], bfs_distances(tables)
    finite = fast < _FAR
    print(f"{field}: {len(tables.table)} states x {tables.width} columns, largest difference "
          f"{int(abs(fast[finite] - slow[finite]).max(initial=0))}")
    assert (finite == (slow < np.iinfo(np.int64).max)).all()
    assert (fast[finite] == slow[finite]).all()
