"""Joint constrained denoising of every slot of a batch of canvases.

One forward pass per step over the current block of every canvas, against the
prefix cache. In each step every unfinished slot of the block commits its next
token (left to right inside a slot, which keeps the slot completable by
construction: only tokens from which a final state is reachable within the
positions left are allowed) and keeps committing further tokens from the same
forward while the model is confident (`threshold`, as in Fast-dLLM). A pad ends
a value; the rest of the slot is padded at once. Choice slots (enums, bools,
union tags) are settled in their first step by scoring whole candidates, and so
are free-text copies (a stated reason): the piece of the text whose tokens score
best over the slot's positions, written as the tokenizer writes it (rows.best_copy).

Groups (list items, optional objects, union variants) are present or absent
as a whole (layout.py has the rules). The decoder decides a group when the
first token of its first slot is committed: a pad there makes the innermost
undecided group absent (its slots are padded at once, and so are the later
items of its list); a value token makes it and its enclosing groups present
(and, for items, the items before it). A variant is decided by its tag.

Knows nothing of pydantic or text: canvases, automata and a model in, a `Decoded`
per canvas out (its ids, the trace, the alternatives the model ranked at each
position, for repair.py). The model is anything with the engine's interface
(engine/interface.py: `prefill`, `step`, `commit`); one with `prefill_step` too
encodes the prompts, or commits the blocks before, in each block's first step, so a
record settled in one step costs one forward pass, not two.

Two kinds of noise (`model.noise`): a "mask" model (Clover) sees its mask token at every
position not yet written; a "uniform" model (DiffusionGemma) has no mask token and sees
uniform random tokens there, drawn afresh at every step, so what it is not asked to keep
is renoised. A model whose `step` takes `self_conditioning` gets the logits of the step
before at every block position (none in a block's first step). Fixed spans and committed
tokens are shown as written either way; the commit rule is the same.
"""

from __future__ import annotations

import hashlib
import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .engine.interface import DenoisingModel
from .errors import CheckpointError, UsageError
from .rows import Logprobs, Row, Trace, choice_scores, confidence, decode_slot

__all__ = ["Decoded", "Trace", "decode", "score_choices", "SCHEDULES"]


@dataclass
class Decoded:
    """One canvas, decoded: what `decode` returns per canvas."""
    canvas: Any                  # the layout.Canvas
    automata: list               # per slot: its automaton (bound to the text) or ChoiceSet
    ids: list[int]               # the filled canvas
    trace: Trace
    # canvas position -> (log-probs, token ids) the model ranked highest there when the
    # position was decided: a choice slot's candidates' tokens, else the top TOP
    top: dict[int, tuple[list[float], list[int]]] = field(default_factory=dict)
    states: list = field(default_factory=list)   # per slot: its automaton's state at the end
    text: str | None = None      # the text the prompt holds: a pydantic validator reads it as info.context["text"]
    known: frozenset = frozenset()   # the slots the caller gave values (`known`): repair keeps them as given


NOISES = ("mask", "uniform")
NOISE_SEED = 0   # a uniform-noise model's canvases when the caller gives no seed: the same every call


def row_generator(seed: int, prompt: list[int], stream: str) -> torch.Generator:
    """A row's own random `stream` ("sample" or "noise"), from `seed` and its prompt: its noise
    and samples are the same whatever batch it is decoded in (and so a resumed run gives what
    one run gives), and its two streams draw apart."""
    digest = hashlib.blake2b(repr((stream, seed, list(prompt))).encode(), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little"))


def _history(model: DenoisingModel, prompts, use_cache: bool, seed: int | None) -> "_History":
    """The step function for `model`: its noise (`model.noise`, "mask" where it says none) and
    self-conditioning (where its `step` takes `self_conditioning`)."""
    noise = getattr(model, "noise", "mask")
    try:
        conditioning = "self_conditioning" in inspect.signature(model.step).parameters
    except (TypeError, ValueError):   # a step whose signature cannot be read takes only what the interface names
        conditioning = False
    seed = NOISE_SEED if seed is None else seed
    generators = [row_generator(seed, p, "noise") for p in prompts] if noise == "uniform" else []
    return _History(model, prompts, use_cache, noise=noise, self_conditioning=conditioning, generators=generators)


class _History:
    """What the model has encoded of each row besides the block being denoised: the prompt
    and the blocks finished before it. With `use_cache` they live in the model's prefix
    cache, extended in each block's first step; without it (the baseline benchmarks compare
    with) they are encoded again, with the block, at every step. One step function
    either way: `logits`.

    The model's noise decides what an unwritten slot position shows it: the mask id (as the
    canvas holds it) for "mask", fresh uniform random tokens from the row's own generator
    (`generators`) at every step for "uniform". With `self_conditioning` each step but a
    block's first passes the model the logits of the step before at every block position, so
    those steps ask for all of them."""

    def __init__(self, model: DenoisingModel, prompts: list[list[int]], use_cache: bool, *,
                 noise: str = "mask", self_conditioning: bool = False, generators: list[torch.Generator] = ()):
        if noise not in NOISES:
            raise UsageError(f"the model's noise must be one of {NOISES}, got {noise!r}")
        self.model, self.use_cache, self.device = model, use_cache, model.device
        P, pad = max(map(len, prompts)), model.config.pad_token_id or 0
        self.prompts = torch.tensor([[pad] * (P - len(p)) + list(p) for p in prompts], device=self.device)
        self.lengths = torch.tensor([len(p) for p in prompts], device=self.device)
        self.cache, self.held, self.cached_to = None, [], 0   # the cache holds rows `held`, canvas[:cached_to]
        self.view, self.view_rows = None, None                # the cache cut to the rows of the last step
        self.noise, self.generators, self.conditioning = noise, generators, self_conditioning
        self.previous, self.previous_rows = None, []          # the last step's logits [rows, block, vocab]

    def _ids(self, rows, which, start, end) -> torch.Tensor:
        return torch.tensor([rows[n].ids[start:end] for n in which], dtype=torch.long, device=self.device)

    def _block(self, rows, which, start, end, live) -> torch.Tensor:
        """The block as the model sees it this step: written tokens as they are, unwritten slot
        positions as the model's noise (uniform: fresh random tokens from each `live` row's
        generator, drawn on the CPU so a seed gives the same canvas on any device). A row that
        only rides along (its history encoded, nothing of the block left to decide) draws none,
        so its stream moves with its own steps alone, as if decoded by itself."""
        ids = self._ids(rows, which, start, end)
        if self.noise == "mask":
            return ids
        vocab = self.model.config.vocab_size
        for k, n in enumerate(which):
            if n in live:
                unwritten = torch.tensor(rows[n].unwritten(start, end), dtype=torch.bool, device=self.device)
                noise = torch.randint(0, vocab, (end - start,), generator=self.generators[n]).to(self.device)
                ids[k] = torch.where(unwritten, noise, ids[k])
        return ids

    def _asking(self, called, at, first):
        """What a pass over the rows `called` asks for: the logits at `at`, or every block position
        when the next step feeds them back; and the self-conditioning to pass (keyword arguments)."""
        if not self.conditioning:
            return at, {}
        if first:
            return None, {"self_conditioning": None}
        keep = [self.previous_rows.index(n) for n in called]
        same = keep == list(range(len(self.previous_rows)))
        return None, {"self_conditioning": self.previous if same else self.previous[keep]}

    def _kept(self, logits, called, at):
        """The logits at `at`; with self-conditioning the whole block's are kept for the next step."""
        if not self.conditioning:
            return logits
        self.previous, self.previous_rows = logits, called
        return logits[at]

    def _first(self, history, block, lengths, at, cache=None, kw=None):
        """The first step of a block: `history` encoded (into `cache`, or a new one) and the
        block's logits, in one pass where the model has prefill_step; and the passes it took."""
        kw = kw or {}
        if hasattr(self.model, "prefill_step"):
            return (*self.model.prefill_step(history, block, lengths, at=at, cache=cache, **kw), 1)
        if cache is None:
            cache, _ = self.model.prefill(history, lengths=lengths)
        else:
            self.model.commit(history, cache)
        return cache, self.model.step(block, cache, at=at, **kw), 2

    def logits(self, rows, live, start, end, at, first) -> tuple[torch.Tensor, dict[int, int]]:
        """Log-prob inputs for one step: the logits at `at` (rows indexing `live`, columns of
        the block [start, end)), and the forward passes beyond this step's one charged to
        each row (the history encoded in a separate pass, or a finished block committed)."""
        if not self.use_cache:
            index = torch.tensor(live, device=self.device)
            history = torch.cat([self.prompts[index], self._ids(rows, live, 0, start)], 1)
            ask, kw = self._asking(live, at, first)
            block = self._block(rows, live, start, end, live)
            _, logits, passes = self._first(history, block, self.lengths[index] + start, ask, kw=kw)
            return self._kept(logits, live, at), {n: passes - 1 for n in live}
        if first:   # extend the cache by the prompts, or by the canvas finished since, for every unfinished row
            need = [n for n, r in enumerate(rows) if not all(r.done)]
            history, lengths, cache = self._ids(rows, need, self.cached_to, start), None, None
            if self.cache is None:
                history, lengths = torch.cat([self.prompts[need], history], 1), self.lengths[need] + start
            else:
                cache = self.cache if need == self.held else self.cache.select([self.held.index(n) for n in need])
            index = torch.tensor([need.index(n) for n in live], device=self.device)
            at = (index[at[0]], at[1])
            ask, kw = self._asking(need, at, True)
            self.cache, logits, passes = self._first(history, self._block(rows, need, start, end, live), lengths, ask,
                                                     cache, kw)
            self.held, self.cached_to, self.view, self.view_rows = need, start, self.cache, need
            return self._kept(logits, need, at), {n: passes - (n in live) for n in need}
        if live != self.view_rows:   # cut the cache only when the set of rows changes
            self.view, self.view_rows = self.cache.select([self.held.index(n) for n in live]), live
        ask, kw = self._asking(live, at, False)
        block = self._block(rows, live, start, end, live)
        return self._kept(self.model.step(block, self.view, at=ask, **kw), live, at), {}


SCHEDULES = ("joint", "sequential", "one_token")


def _start(canvases, automata, known, barred) -> list[Row]:
    """A row per canvas, the known values written in."""
    rows = [Row(c, a, b) for c, a, b in zip(canvases, automata, barred or [None] * len(canvases))]
    for row, fixed in zip(rows, known or [{}] * len(rows)):
        for i, toks in sorted(fixed.items()):
            for t in list(toks) + [row.canvas.pad_id] * (row.canvas.slots[i].budget - len(toks)):
                if not row.done[i]:
                    row.put(i, t, 1.0, 0)
            if row.canvas.slots[i].kind == "choice":
                row.select_variants(i, 0)
    return rows


def _commit(r: Row, lp, block_start, block_end, step, schedule, threshold, temperature, generator) -> None:
    """One step of one row: its slots in the block decide, as the schedule says."""
    before = r.trace.tokens_committed
    slots, limit = r.next_slots(block_start, block_end), threshold
    if schedule == "sequential":
        slots = slots[:1]
    elif schedule == "one_token":
        slots, limit = [max(slots, key=lambda i: confidence(r, i, lp))], math.inf
    for i in slots:
        if not r.done[i]:  # a group decision earlier in this step may have settled it
            decode_slot(r, i, lp, block_end, step, limit, temperature, generator)
    r.trace.tokens_per_step.append(r.trace.tokens_committed - before)


@torch.no_grad()
def decode(model: DenoisingModel, prompts: list[list[int]], canvases, automata, *, threshold: float = 0.9,
           temperature: float = 0.0, seed: int | None = None,
           block_size: int | None = None, known: list[dict] | None = None, barred: list[dict] | None = None,
           schedule: str = "joint", use_cache: bool = True,
           on_step: Callable[[int, int, list[Row]], None] | None = None) -> list[Decoded]:
    """Fill every canvas; a Decoded per canvas (ids, trace, the alternatives ranked per position).

    prompts: token ids per canvas (any lengths); canvases: same layout length;
    automata[b][i]: the SlotAutomaton or ChoiceSet of slot i of canvas b;
    known[b]: {slot index: token ids} fixed before decoding; barred[b]: {choice slot index:
    candidates (tuples of token ids) it may not choose}, unless it may choose none other.
    Blocks are the canvas's (`Canvas.spans`), cut again every `block_size` tokens
    (default: the model's).
    schedule: "joint" (every unfinished slot of the block each step), or the baselines
    "sequential" (one field after another) and "one_token" (one decision per step: the
    most confident next token, or choice, of any slot). use_cache=False re-encodes the
    prompt and the finished blocks at every step instead of reading the prefix cache.
    seed: of temperature sampling (without one, torch's global generator) and of a uniform-noise
    model's random canvases (without one, NOISE_SEED: the same call, the same record); each
    row draws from its own generator (row_generator), so its record does not hang on its batch.
    on_step(step, passes, rows): called after each step's commits, with the forward passes the
    step took for the whole batch (1, or 2 where the history needed a pass of its own) and every
    canvas's Row (`ids`, `done` per slot, `present` per group): to watch fields settle (the
    server streams them), never to change them.
    """
    if schedule not in SCHEDULES:
        raise UsageError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    rows = _start(canvases, automata, known, barred)
    history = _history(model, prompts, use_cache, seed)
    samplers = [row_generator(seed, p, "sample") if seed is not None else None for p in prompts]
    step = 0
    for block_start, block_end in canvases[0].spans(block_size or model.config.block_size):
        first = True
        while live := [n for n, r in enumerate(rows) if r.next_slots(block_start, block_end)]:
            wanted = [rows[n].wanted(block_start, block_end) for n in live]
            at = (torch.tensor([j for j, w in enumerate(wanted) for _ in w], device=model.device),
                  torch.tensor([p - block_start for w in wanted for p in w], device=model.device))
            logits, extra = history.logits(rows, live, block_start, block_end, at, first)
            first = False
            for n, passes in extra.items():
                rows[n].trace.forward_passes += passes
            packed = torch.log_softmax(logits.float(), -1).cpu()
            if torch.isnan(packed[:, 0]).any():   # (a NaN or infinite logit makes its whole row NaN)
                raise CheckpointError(f"{getattr(model, 'source', 'the model')}: the model's logits are NaN or "
                                      "infinite; its weights or config.json are damaged, or its dtype overflows: "
                                      "load it in float32, or copy the checkpoint again")
            step += 1
            begin = 0
            for n, w in zip(live, wanted):
                lp, begin = Logprobs(packed[begin:begin + len(w)], w), begin + len(w)
                rows[n].trace.forward_passes += 1
                rows[n].trace.steps += 1
                _commit(rows[n], lp, block_start, block_end, step, schedule, threshold, temperature, samplers[n])
            if on_step is not None:
                on_step(step, 1 + max(extra.values(), default=0), rows)
    return [Decoded(r.canvas, r.automata, r.ids, r.trace, r.top, r.state, known=frozenset(fixed))
            for r, fixed in zip(rows, known or [{}] * len(rows))]


@torch.no_grad()
def score_choices(model: DenoisingModel, prompt: list[int], canvas, automata, ids: list[int]):
    """Every slot of a canvas of choice slots scored in one forward pass, as the decoder's
    first step scores choice slots: per slot, each candidate's summed log-probs over its
    positions, given `ids` (known values written in, the rest masked). Returns the scores
    and the forward passes taken."""
    row = Row(canvas, automata)
    row.ids = list(ids)
    positions = [p for s in canvas.slots for p in range(s.start, s.end)]
    at = (torch.zeros(len(positions), dtype=torch.long, device=model.device),
          torch.tensor(positions, device=model.device))
    logits, extra = _history(model, [prompt], True, None).logits([row], [0], 0, len(canvas), at, True)
    lp = Logprobs(torch.log_softmax(logits.float(), -1).cpu(), positions)
    return [choice_scores(row, i, lp)[1] for i in range(len(canvas.slots))], 1 + extra.get(0, 0)
