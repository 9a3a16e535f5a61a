"""The decoder against a scripted model: exact forward passes, commits per step, cache policy."""

import math
from typing import Literal, Optional

import pytest
import torch
from pydantic import BaseModel, Field

from clover_struct.constraints import compile_canvas
from clover_struct.decoder import decode
from clover_struct.schema_walk import build_canvas
from clover_struct.verbatim import for_text
from tiny_models import MockModel


class Pair(BaseModel):
    code: str = Field(pattern=r"^[A-Z]{4}$")
    note: str = Field(max_length=6)
    flag: Literal["yes", "no"]


def setup(tok, values: dict, prompt=(5, 6, 7), **mock):
    """The canvas of Pair, a script that spells `values` in its slots, and a MockModel."""
    canvas = build_canvas(Pair, tok)
    gold = canvas.fill(values)
    script = {c: t for c, t in enumerate(gold)}
    return canvas, compile_canvas(canvas, tok), MockModel(tok, script, len(prompt), **mock), list(prompt)


def test_a_confident_model_fills_the_canvas_in_one_pass(toy_tokenizer):
    canvas, automata, model, prompt = setup(toy_tokenizer, {"code": "EGTT", "note": "ab", "flag": "no"})
    (d,) = decode(model, [prompt], [canvas], [automata])
    assert canvas.validate(d.ids) == Pair(code="EGTT", note="ab", flag="no")
    assert model.calls == ["prefill_step"] and d.trace.forward_passes == d.trace.steps == 1
    assert d.trace.tokens_per_step == [sum(s.budget for s in canvas.slots)]


def test_below_the_threshold_each_slot_commits_one_token_a_step(toy_tokenizer):
    canvas, automata, model, prompt = setup(toy_tokenizer, {"code": "EGTT", "note": "ab", "flag": "no"}, p=0.6)
    (d,) = decode(model, [prompt], [canvas], [automata], threshold=0.9)
    code = canvas.slots[0]
    assert canvas.validate(d.ids).code == "EGTT"
    # the code slot takes one token a step (its four letters, then it is full); the note ends at its pad
    assert d.trace.steps == code.budget and model.calls == ["prefill_step"] + ["step"] * (code.budget - 1)


def test_without_the_cache_every_step_encodes_the_prompt_again(toy_tokenizer):
    canvas, automata, model, prompt = setup(toy_tokenizer, {"code": "EGTT", "note": "ab", "flag": "no"}, p=0.6)
    (d,) = decode(model, [prompt], [canvas], [automata], use_cache=False)
    assert set(model.calls) == {"prefill_step"} and len(model.calls) == d.trace.steps == d.trace.forward_passes


@pytest.mark.parametrize("block", [8, 16])
def test_each_block_after_the_first_commits_the_one_before_in_its_first_pass(toy_tokenizer, block):
    canvas, automata, model, prompt = setup(toy_tokenizer, {"code": "EGTT", "note": "ab", "flag": "no"},
                                            block_size=block)
    (d,) = decode(model, [prompt], [canvas], [automata])
    starts = [b for b in canvas.spans(block) if any(b[0] <= s.start < b[1] for s in canvas.slots)]
    touched = [b for b in canvas.spans(block) if any(s.start < b[1] and b[0] < s.end for s in canvas.slots)]
    assert canvas.validate(d.ids).flag == "no"
    # one pass a block (confident: one step each), every one of them a prefill_step
    assert model.calls == ["prefill_step"] * d.trace.forward_passes
    assert len(starts) <= d.trace.forward_passes <= len(touched)


def test_known_values_are_written_before_the_first_pass(toy_tokenizer):
    canvas, automata, model, prompt = setup(toy_tokenizer, {"code": "EGTT", "note": "ab", "flag": "no"})
    known = {0: toy_tokenizer.encode("LFPG")}
    (d,) = decode(model, [prompt], [canvas], [automata], known=[known])
    assert canvas.validate(d.ids).code == "LFPG" and d.trace.settled_at["code"] == 0


def test_a_value_the_automaton_refuses_is_never_committed(toy_tokenizer):
    """The script spells a lowercase code; the pattern allows capitals only, so the decoder takes
    the model's best allowed tokens instead and the record stays valid."""
    canvas, automata, model, prompt = setup(toy_tokenizer, {"code": "EGTT", "note": "ab", "flag": "no"})
    start = canvas.slots[0].start
    for k, ch in enumerate("egtt"):
        model.script[start + k] = toy_tokenizer.encode(ch)[0]
    (d,) = decode(model, [prompt], [canvas], [automata])
    code = canvas.validate(d.ids).code
    assert code.isupper() and len(code) == 4


def test_on_step_sees_every_step_its_passes_and_the_rows_as_they_fill(toy_tokenizer):
    canvas, automata, model, prompt = setup(toy_tokenizer, {"code": "EGTT", "note": "ab", "flag": "no"}, p=0.6)
    seen = []
    (d,) = decode(model, [prompt], [canvas], [automata], threshold=0.9,
                  on_step=lambda step, passes, rows: seen.append((step, passes, list(rows[0].ids), sum(rows[0].done))))
    assert [s for s, *_ in seen] == list(range(1, d.trace.steps + 1)) and d.trace.steps > 1
    assert sum(p for _, p, *_ in seen) == d.trace.forward_passes == len(model.calls)
    done = [n for *_, n in seen]
    assert done == sorted(done) and done[-1] == len(canvas.slots) and seen[-1][2] == d.ids
    assert seen[0][2] != d.ids   # the first call sees the canvas part-filled, not the result


def test_on_step_counts_a_separate_prefill_pass(toy_tokenizer):
    from tiny_models import without_prefill_step

    canvas, automata, model, prompt = setup(toy_tokenizer, {"code": "EGTT", "note": "ab", "flag": "no"})
    passes = []
    (d,) = decode(without_prefill_step(model), [prompt], [canvas], [automata],
                  on_step=lambda step, n, rows: passes.append(n))
    assert passes == [2] and d.trace.forward_passes == 2


class Said(BaseModel):
    what: str = Field(max_length=8, json_schema_extra={"verbatim": True})
    why: Optional[str] = Field(None, max_length=8, json_schema_extra={"verbatim": True})


@pytest.mark.parametrize("schedule", ["joint", "one_token"])
def test_a_free_text_copy_is_the_piece_that_scores_best_whole(toy_tokenizer, schedule):
    """Each slot's first letter leans to `n` (only `now` starts so), its later positions spell
    `blue`: read whole, the piece is `blue`, where its first token alone would copy `now`."""
    text, tok = "go to the blue house now", toy_tokenizer
    canvas = build_canvas(Said, tok)
    script = dict(enumerate(canvas.fill({"what": "blue", "why": "blue"})))
    firsts = [canvas.slots[0].start, canvas.slots[1].start + 1]    # `why` opens with its quote
    script.update({c: tok.encode("n")[0] for c in firsts})
    model = MockModel(tok, script, 3, confidence={c: 0.5 for c in firsts})
    (d,) = decode(model, [[5, 6, 7]], [canvas], [for_text(compile_canvas(canvas, tok), text, tok)],
                  schedule=schedule)
    assert canvas.validate(d.ids) == Said(what="blue", why="blue")


def test_a_free_text_copy_is_written_as_the_tokenizer_writes_it(toy_byte_tokenizer):
    """The script spells 北京 byte by byte, where the tokenizer writes it in three merged
    tokens: read whole, the copy is a piece of the text in the tokens the tokenizer gives it
    (those a model learns), never a spelling the model was not shown that only sums well."""
    text, tok = "从北京出发，半径 500 米", toy_byte_tokenizer
    canvas = build_canvas(Said, tok)
    s = canvas.slots[0]
    by_bytes = tok.vocabulary_map()
    spelt = [by_bytes[bytes([b])][0] for b in "北京".encode()]
    script = dict(enumerate(canvas.fill({"what": "北京", "why": None})))
    script.update(zip(range(s.start, s.end), spelt + tok.encode('"') + [tok.pad_id] * s.budget))
    (d,) = decode(MockModel(tok, script, 3), [[5, 6, 7]], [canvas], [for_text(compile_canvas(canvas, tok), text, tok)])
    got = canvas.validate(d.ids).what
    assert got in text and d.ids[s.start:s.end] == canvas.fill({"what": got, "why": None})[s.start:s.end]


def test_a_free_text_copy_is_found_where_its_first_token_is_doubted(toy_tokenizer, monkeypatch):
    """The narrow search keeps one path here, `now`, the only one that starts well; the wide one
    after it still finds `blue`, which scores best whole. Without it, or where it gives up (after
    WIDE_TRIES paths), `now` is read."""
    import clover_struct.rows as rows

    text, tok = "go to the blue house now", toy_tokenizer
    canvas = build_canvas(Said, tok)
    script = dict(enumerate(canvas.fill({"what": "blue", "why": None})))
    first = canvas.slots[0].start
    script[first] = tok.encode("n")[0]
    model = MockModel(tok, script, 3, confidence={first: 0.5})

    def read(wide: int) -> str:
        monkeypatch.setattr(rows, "WIDE", wide)
        (d,) = decode(model, [[5, 6, 7]], [canvas], [for_text(compile_canvas(canvas, tok), text, tok)])
        return canvas.validate(d.ids).what

    wide = rows.WIDE
    monkeypatch.setattr(rows, "WIDTH", 1)
    assert (read(1), read(wide)) == ("now", "blue")
    monkeypatch.setattr(rows, "WIDE_TRIES", 2)
    assert read(wide) == "now"


def test_a_sampled_copy_counts_each_path_once(toy_tokenizer, monkeypatch):
    """Sampling a piece (temperature > 0), a path both searches found is one candidate, not two
    (here each search is made to find every path it can, so they share many)."""
    import clover_struct.rows as rows

    text, tok = "go to the blue house now", toy_tokenizer
    canvas = build_canvas(Said, tok)
    model = MockModel(tok, dict(enumerate(canvas.fill({"what": "blue", "why": "house"}))), 3, p=0.6)
    found, candidates = [], []
    search, pick = rows._copy_search, rows.pick

    def searched(row, i, lp, tail, reach, width, *_):
        ended = search(row, i, lp, tail, reach, width, -math.inf)
        found.append([tuple(path) for _, path in ended])
        return ended

    monkeypatch.setattr(rows, "_copy_search", searched)
    monkeypatch.setattr(rows, "pick", lambda scores, *a: candidates.append(len(scores)) or pick(scores, *a))
    decode(model, [[5, 6, 7]], [canvas], [for_text(compile_canvas(canvas, tok), text, tok)], temperature=1.0,
           seed=0)
    pairs = list(zip(found[::2], found[1::2]))
    distinct = [len(set(narrow + wide)) for narrow, wide in pairs]
    assert pairs and all(n in candidates for n in distinct)
    assert sum(len(narrow) + len(wide) for narrow, wide in pairs) > sum(distinct)


def test_a_copy_stopped_inside_a_character_is_judged_with_it_finished(toy_byte_tokenizer):
    """The tokenizer writes 北京 as [北's first two bytes, 北's last and 京's first two, 京's
    last], 猫 byte by byte and 米 as one token: a path that stops inside a character is kept
    only where the bytes the text has next finish it as the tokenizer would write it."""
    from clover_struct.rows import spelt_as_encoded

    tok = toy_byte_tokenizer
    by_bytes = {b: ids[0] for b, ids in tok.vocabulary_map().items()}

    def spelt(pieces: list[bytes], *following: bytes) -> bool:
        return spelt_as_encoded(tok, [by_bytes[p] for p in pieces], b"".join(pieces), lambda size: set(following))

    bei, jing = "北".encode(), "京".encode()
    assert spelt([bei[:2], bei[2:] + jing[:2]], jing[2:])       # 北京 as written, but 京's last byte
    assert not spelt([bei[:2], bei[2:], jing[:2]], jing[2:])    # 北 written alone, then 京 begun
    assert spelt([bei[:2], bei[2:] + jing[:2], jing[2:]])
    assert spelt([b"\xe7"], "米".encode()[1:], "猫".encode()[1:])   # 猫 begun (the text has 米 and 猫 there)
    assert not spelt([b"\xe7"], "米".encode()[1:])                 # 米 begun: it has a token of its own
    assert not spelt([b"\x8c"])                                    # no character starts with this byte
    assert not spelt([b"\xe7"])                                    # nothing said to follow


class Names(BaseModel):
    names: list[Said] = Field(max_length=3)


def test_an_item_whose_first_field_is_free_text_is_still_absent_where_the_model_pads(toy_tokenizer):
    """Read whole, a copy still starts only where the model's pick there is no pad: a pad at an
    item's first position leaves the item out."""
    text, tok = "go to the blue house now", toy_tokenizer
    canvas = build_canvas(Names, tok)
    model = MockModel(tok, dict(enumerate(canvas.fill({"names": [{"what": "blue", "why": None}]}))), 3)
    (d,) = decode(model, [[5, 6, 7]], [canvas], [for_text(compile_canvas(canvas, tok), text, tok)])
    assert canvas.validate(d.ids) == Names(names=[Said(what="blue")])


@pytest.mark.parametrize("temperature, shares", [
    (0.0, (1, 0, 0)), (5e-324, (1, 0, 0)), (1e-300, (1, 0, 0)),   # (1e-310 had overflowed lp / T: uniform)
    (1.0, (0.6285, 0.2312, 0.1402)), (1e308, (1 / 3,) * 3), (math.inf, (1 / 3,) * 3)])
def test_a_pick_samples_the_tempered_distribution_at_any_temperature(temperature, shares):
    from clover_struct.rows import pick

    lp = torch.log_softmax(torch.tensor([2.0, 1.0, 0.5, -1.0]), 0)
    lp[3] = -math.inf   # a token the grammar bars: never picked
    g = torch.Generator().manual_seed(0)
    picks = [pick(lp, temperature, g) for _ in range(4000)]
    drawn = [picks.count(k) / len(picks) for k in range(4)]
    print(f"T={temperature}: drawn {[round(d, 3) for d in drawn]}, expected {shares}")
    assert drawn[3] == 0 and all(abs(d - s) < 0.03 for d, s in zip(drawn, shares))
