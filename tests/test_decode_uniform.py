"""The decoder on uniform-noise canvases (DiffusionGemma's contract) against a scripted model.

UniformMockModel records what each pass showed it: the canvas ids, the self-conditioning
logits, the history encoded. The noise is replayed from the same seed, so the tests know
exactly which random token every unwritten position had to show at every step."""

import pytest
import torch

from clover_struct.api import canvas_marks, prepare
from clover_struct.decoder import decode, row_generator
from clover_struct.errors import UsageError
from clover_struct.rows import slot_positions
from test_decode_steps import Pair, setup
from tiny_models import MockModel, UniformMockModel

GOLD = {"code": "EGTT", "note": "ab", "flag": "no"}


def uniform(tok, values=GOLD, **mock):
    canvas, automata, _, prompt = setup(tok, values)
    model = UniformMockModel(tok, {c: t for c, t in enumerate(canvas.fill(values))}, len(prompt), **mock)
    return canvas, automata, model, prompt


def replayed_noise(model, seed, prompt):
    """The random canvas of every pass of one row, as the decoder must have drawn it from `seed`
    and the row's prompt."""
    g = row_generator(seed, prompt, "noise")
    return [torch.randint(0, model.config.vocab_size, shown.shape, generator=g) for shown in (p.shown for p in model.seen)]


def test_slot_positions_start_as_uniform_noise_reproducible_by_seed(toy_tokenizer):
    firsts = []
    for seed in (11, 11, 12):
        canvas, automata, model, prompt = uniform(toy_tokenizer)
        (d,) = decode(model, [prompt], [canvas], [automata], seed=seed)
        assert canvas.validate(d.ids) == Pair(**GOLD)
        firsts.append(model.seen[0].shown[0])
        inside = torch.tensor(slot_positions(canvas))
        assert torch.equal(firsts[-1][~inside], torch.tensor(canvas.ids)[~inside])   # fixed spans as written
        assert torch.equal(firsts[-1][inside], replayed_noise(model, seed, prompt)[0][0][inside])
    assert torch.equal(firsts[0], firsts[1]) and not torch.equal(firsts[0], firsts[2])
    values = firsts[0][torch.tensor(slot_positions(canvas))]
    assert len(set(values.tolist())) > len(values) // 2 and canvas.mask_id not in values.tolist()


def test_without_a_generator_the_noise_is_the_same_every_call(toy_tokenizer):
    shown = []
    for _ in range(2):
        canvas, automata, model, prompt = uniform(toy_tokenizer, p=0.6)
        decode(model, [prompt], [canvas], [automata])
        shown.append(torch.stack([p.shown for p in model.seen]))
    assert torch.equal(*shown)


def test_a_rows_noise_and_its_samples_draw_apart():
    draws = {stream: torch.rand(64, generator=row_generator(7, [1, 2, 3], stream)) for stream in ("noise", "sample")}
    print("largest gap between the two streams' draws:", (draws["noise"] - draws["sample"]).abs().max().item())
    assert not torch.equal(draws["noise"], draws["sample"])
    assert torch.equal(draws["noise"], torch.rand(64, generator=row_generator(7, [1, 2, 3], "noise")))


def test_a_row_riding_along_in_a_pass_draws_no_noise(toy_tokenizer):
    """A row whose block is known rides along in the block's first pass (its history is encoded)
    and must draw nothing: its stream moves with its own steps alone, so it shows the model the
    same noise in a batch as by itself (a ride-along draw had shifted every later block's)."""
    canvas, automata, model, prompt = uniform(toy_tokenizer, p=0.6)
    code = canvas.slots[0]
    known = {0: canvas.fill(GOLD)[code.start:code.end]}
    assert canvas.spans(12)[0] == (0, 12) and code.end <= 12   # the first block holds the known slot alone
    decode(model, [prompt], [canvas], [automata], known=[known], seed=5, block_size=12)
    alone = [p.shown[0] for p in model.seen]
    _, automata2, batch, _ = uniform(toy_tokenizer, p=0.6)
    decode(batch, [prompt, [5, 6, 8]], [canvas, canvas], [automata, automata2], known=[known, {}], seed=5,
           block_size=12)
    ride, *steps = [p.shown[0] for p in batch.seen if len(p.shown) == 2]
    written = list(canvas.ids)
    written[code.start:code.end] = known[0]
    assert ride.tolist() == written[:12]   # the known value, no random token
    assert len(steps) == len(alone) and all(torch.equal(a, b) for a, b in zip(steps, alone))


def test_each_step_renoises_what_is_unwritten_and_never_touches_the_rest(toy_tokenizer):
    """One token a slot a step (p=0.6): at every pass a slot position shows either the step's fresh
    noise or the token finally committed there; once committed it stays; fixed spans never change."""
    canvas, automata, model, prompt = uniform(toy_tokenizer, p=0.6)
    (d,) = decode(model, [prompt], [canvas], [automata], seed=8)
    final, inside = torch.tensor(d.ids), torch.tensor(slot_positions(canvas))
    noise = replayed_noise(model, 8, prompt)
    assert len(model.seen) == d.trace.steps == 4
    committed = torch.zeros_like(inside)
    for k, (shown, drawn) in enumerate(zip((p.shown for p in model.seen), noise)):
        shown, drawn = shown[0], drawn[0]
        assert torch.equal(shown[~inside], final[~inside])                       # fixed spans
        assert bool(((shown == drawn) | (shown == final))[inside].all())          # noise or the final token
        assert bool((shown[committed] == final[committed]).all())                 # committed tokens stay
        written = inside & (shown != drawn)
        assert int(written.sum()) <= sum(d.trace.tokens_per_step[:k]) <= int((inside & (shown == final)).sum())
        committed |= written
        if k:   # positions unwritten at both passes got fresh draws, not the last step's
            both = inside & (shown != final) & (model.seen[k - 1].shown[0] != final)
            assert bool(both.any()) and not torch.equal(shown[both], model.seen[k - 1].shown[0][both])


def test_the_previous_steps_logits_are_fed_back_none_first(toy_tokenizer):
    """Two rows, the second with its code known, so it finishes a step earlier: the last step's
    self-conditioning is the step before's logits of the one row still decoding."""
    canvas, automata, model, prompt = uniform(toy_tokenizer, p=0.6)
    known = [{}, {0: toy_tokenizer.encode("LFPG")}]
    decode(model, [prompt, prompt], [canvas, canvas], [automata, automata], known=known)
    seen = model.seen
    assert [p.name for p in seen] == ["prefill_step", "step", "step", "step"] and seen[0].conditioning is None
    assert [tuple(p.shown.shape) for p in seen] == [(2, len(canvas))] * 3 + [(1, len(canvas))]
    for k in (1, 2):
        assert torch.equal(seen[k].conditioning, seen[k - 1].logits)
    assert torch.equal(seen[3].conditioning, seen[2].logits[:1])
    assert seen[1].logits.shape == (2, len(canvas), model.config.vocab_size)   # every position asked for


@pytest.mark.parametrize("use_cache", [True, False])
def test_each_canvas_starts_without_self_conditioning_over_the_committed_canvas_before(toy_tokenizer, use_cache):
    """Blocks of 8: each block's first pass has no self-conditioning, the others the pass before's
    logits; the history a pass encodes is only committed tokens: the prompt (cached: once) and the
    canvas before the block as decoded, no noise, no mask id."""
    canvas, automata, model, prompt = uniform(toy_tokenizer, p=0.6, block_size=8)
    (d,) = decode(model, [prompt], [canvas], [automata], use_cache=use_cache)
    assert canvas.validate(d.ids) == Pair(**GOLD)
    starts = [p.start for p in model.seen]
    assert starts == sorted(starts) and len(set(starts)) >= 3 and set(starts) <= {s for s, _ in canvas.spans(8)}
    cached = None
    for k, p in enumerate(model.seen):
        first = k == 0 or starts[k - 1] != p.start
        assert (p.conditioning is None) == first
        if not first:
            assert torch.equal(p.conditioning, model.seen[k - 1].logits)
        assert p.name == ("prefill_step" if first or not use_cache else "step")
        if not use_cache:
            assert p.history.tolist()[0] == prompt + d.ids[:p.start]
        elif first:
            assert p.history.tolist()[0] == (prompt if cached is None else []) + d.ids[cached or 0:p.start]
            cached = p.start
    assert d.trace.forward_passes == len(model.seen)


def test_forward_passes_stay_within_the_longest_slot_of_each_block(toy_tokenizer):
    canvas, automata, model, prompt = uniform(toy_tokenizer, p=0.6, block_size=8)
    (d,) = decode(model, [prompt], [canvas], [automata])
    longest = [max((min(s.end, e) - max(s.start, b) for s in canvas.slots if s.start < e and b < s.end), default=0)
               for b, e in canvas.spans(8)]
    assert d.trace.forward_passes == d.trace.steps <= sum(longest)


def test_a_mask_model_sees_its_mask_and_no_self_conditioning(toy_tokenizer):
    """The same decode on a mask-noise model: unwritten positions show the mask id, and its step is
    never given self_conditioning (its signature has none: the call would fail)."""
    canvas, automata, _, prompt = setup(toy_tokenizer, GOLD)
    shown = []

    class Recording(MockModel):
        def step(self, block_ids, cache, *, at=None):
            shown.append(block_ids.clone())
            return super().step(block_ids, cache, at=at)

    model = Recording(toy_tokenizer, {c: t for c, t in enumerate(canvas.fill(GOLD))}, len(prompt), p=0.6)
    (d,) = decode(model, [prompt], [canvas], [automata])
    assert canvas.validate(d.ids) == Pair(**GOLD) and len(shown) == d.trace.steps - 1
    inside = torch.tensor(slot_positions(canvas))
    for ids in shown:
        unwritten = inside & (ids[0] != torch.tensor(d.ids))
        assert bool(unwritten.any()) and set(ids[0][unwritten].tolist()) == {canvas.mask_id}


def test_prepare_lets_a_uniform_noise_model_through(toy_tokenizer, make_toy_tokenizer):
    canvas, _, model, _ = uniform(toy_tokenizer)
    model.source = None
    assert canvas_marks(model) == (toy_tokenizer.mask_id, toy_tokenizer.pad_id)   # the tokenizer's mask marks slots
    _, laid, automata = prepare(Pair, model)
    assert (laid.mask_id, laid.pad_id) == (toy_tokenizer.mask_id, toy_tokenizer.pad_id) and len(automata) == 3
    no_mask = make_toy_tokenizer(["<|endoftext|>", "<|pad|>"])   # no mask token: eos marks the slots
    other = UniformMockModel(no_mask, {}, 0)
    assert canvas_marks(other) == (no_mask.eos_id, no_mask.pad_id)
    other.config.pad_token_id = None
    with pytest.raises(UsageError, match="no pad token"):
        canvas_marks(other)
    mask_model = MockModel(toy_tokenizer, {}, 0)
    mask_model.config.mask_token_id = None
    with pytest.raises(UsageError, match="no mask token, so it cannot denoise"):
        prepare(Pair, mask_model)
