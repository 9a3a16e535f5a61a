"""Joint constrained denoising of every slot of a batch of canvases.

One forward pass per step over the current block of every canvas, against the
prefix cache. In each step every unfinished slot of the block commits its next
token (left to right inside a slot, which keeps the slot completable by
construction: only tokens from which a final state is reachable within the
positions left are allowed) and keeps committing further tokens from the same
forward while the model is confident (`threshold`, as in Fast-dLLM). A pad ends
a value; the rest of the slot is padded at once. Choice slots (enums, bools,
union tags) are settled in their first step by scoring whole candidates.

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
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import torch

from .engine.interface import DenoisingModel
from .errors import UsageError

TOP = 8  # alternatives remembered per position, for fallbacks when a value fails its checks
_TORCH_MASKS: dict[int, tuple] = {}  # id(numpy mask) -> (the mask, kept alive; its torch copy)


@dataclass
class Trace:
    forward_passes: int = 0                   # model calls: prefill, denoising steps, block commits
    steps: int = 0                            # denoising steps
    tokens_committed: int = 0                 # slot positions filled by decoding
    confidence: dict[str, float] = field(default_factory=dict)   # per field: mean prob of its tokens
    settled_at: dict[str, int] = field(default_factory=dict)     # per field: step at which it finished
    tokens_per_step: list[int] = field(default_factory=list)
    # time spent on constraints: allowed-token masks built and applied, choice candidates
    # scored, automata advanced (benchmarks/compare.py reports its share of decoding time)
    constraint_seconds: float = 0.0

    @property
    def tokens_per_forward(self) -> float:
        return self.tokens_committed / max(self.steps, 1)


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


@lru_cache(maxsize=64)
def _groups_of(canvas) -> tuple[tuple[int, ...], ...]:
    """Per slot, the groups that contain it, outermost first (the same for every row of a canvas)."""
    chains = [[] for _ in canvas.slots]
    for g in canvas.groups:
        for i in g.slots:
            chains[i].append(g.index)
    return tuple(tuple(sorted(c, key=lambda gi: canvas.groups[gi].start)) for c in chains)


class _Row:
    """Decoding state of one canvas."""

    def __init__(self, canvas, automata):
        self.canvas, self.automata = canvas, automata
        self.ids = list(canvas.ids)
        n = len(canvas.slots)
        self.filled = [0] * n                  # positions committed, from the slot's start
        self.state = [getattr(a, "initial", None) for a in automata]
        self.done = [False] * n
        self.present = [True if g.required else None for g in canvas.groups]
        self.probs: dict[int, list[float]] = {}
        self.top: dict[int, tuple[list[float], list[int]]] = {}   # position -> alternatives
        self.trace = Trace()
        self.groups_of = _groups_of(canvas)
        for g in canvas.groups:
            if g.required:
                self.set_present(g.index)

    # ---- groups ----
    def set_present(self, gi):
        g = self.canvas.groups[gi]
        if self.present[gi] is False:
            raise AssertionError(f"group {g.path} was made absent, then present")
        self.present[gi] = True
        if g.parent is not None and self.present[g.parent] is None and self.canvas.groups[g.parent].kind != "variant":
            self.set_present(g.parent)
        if g.prev is not None and self.present[g.prev] is None:
            self.set_present(g.prev)

    def set_absent(self, gi, step):
        g = self.canvas.groups[gi]
        self.present[gi] = False
        for i in g.slots:
            if not self.done[i]:
                self.fill_pads(i, step)
        for child in g.children:
            self.present[child] = False
        for later in self.canvas.groups:  # the items after an absent item are absent
            if later.prev == gi and self.present[later.index] is not False:
                self.set_absent(later.index, step)

    def may_be_absent(self, i) -> int | None:
        """The innermost undecided group a pad at slot i's first position would make absent."""
        if self.filled[i]:
            return None
        for gi in reversed(self.groups_of[i]):
            g = self.canvas.groups[gi]
            if self.present[gi] is None and g.kind != "variant" and g.slots[0] == i:
                return gi
        return None

    # ---- slots ----
    def next_slots(self, block_start, block_end) -> list[int]:
        """Unfinished slots whose next position lies in the block, in canvas order."""
        return [i for i, s in enumerate(self.canvas.slots)
                if not self.done[i] and block_start <= s.start + self.filled[i] < block_end]

    def wanted(self, block_start, block_end) -> list[int]:
        """Canvas positions whose log-probs this step may read: every not yet written position
        of the unfinished slots of the block (a choice slot is scored over its whole span)."""
        return [p for i in self.next_slots(block_start, block_end)
                for p in range(max(self.canvas.slots[i].start + self.filled[i], block_start),
                               min(self.canvas.slots[i].end, block_end))]

    def remaining(self, i):
        return self.canvas.slots[i].budget - self.filled[i]

    def fill_pads(self, i, step):
        s = self.canvas.slots[i]
        for p in range(s.start + self.filled[i], s.end):
            self.ids[p] = self.canvas.pad_id
        self.trace.tokens_committed += self.remaining(i)
        self.filled[i] = s.budget
        self.finish(i, step)

    def finish(self, i, step):
        self.done[i] = True
        path = self.canvas.slots[i].path
        self.trace.settled_at[path] = step
        probs = self.probs.get(i, [])
        self.trace.confidence[path] = sum(probs) / len(probs) if probs else 1.0

    def put(self, i, token, prob, step):
        s = self.canvas.slots[i]
        absent = self.may_be_absent(i) if token == self.canvas.pad_id else None  # before filling
        self.ids[s.start + self.filled[i]] = token
        self.filled[i] += 1
        self.trace.tokens_committed += 1
        self.probs.setdefault(i, []).append(prob)
        if token == self.canvas.pad_id:
            return self.set_absent(absent, step) if absent is not None else self.fill_pads(i, step)
        if self.filled[i] == 1:
            for gi in self.groups_of[i]:
                if self.present[gi] is None and self.canvas.groups[gi].kind != "variant":
                    self.set_present(gi)
        if self.state[i] is not None:
            started = time.perf_counter()
            self.state[i] = self.automata[i].next(self.state[i], token)
            self.trace.constraint_seconds += time.perf_counter() - started
        if self.filled[i] == s.budget:
            self.finish(i, step)

    def allowed(self, i) -> torch.Tensor:
        """Tokens slot i may take at its next position ([vocab] bool)."""
        mask = self.automata[i].allowed_mask(self.state[i], self.remaining(i),
                                             allow_empty=self.may_be_absent(i) is not None)
        if mask.flags.writeable:          # made for this call (a Verbatim slot's): use it as it is
            return torch.from_numpy(mask)
        if id(mask) not in _TORCH_MASKS:  # the automaton caches its masks; keep one tensor view each
            _TORCH_MASKS[id(mask)] = (mask, torch.from_numpy(mask.copy()))
        return _TORCH_MASKS[id(mask)][1]

    def choices(self, i) -> list[list[int]]:
        return self.automata[i].candidates(allow_empty=self.may_be_absent(i) is not None).tolist()

    def select_variants(self, i, step):
        """A union tag was written: its variant is present, the others absent."""
        tag = self.canvas.slot_text(self.ids, i)
        for g in self.canvas.groups:
            if g.kind == "variant" and g.selector == i:
                if tag in g.tags:
                    self.set_present(g.index)
                else:
                    self.set_absent(g.index, step)


class _Logprobs:
    """One row's log-probs at the positions a step computed, looked up by canvas position:
    the output head runs only where a decision can still be made, not on the whole block."""

    def __init__(self, packed: torch.Tensor, positions: list[int]):
        self.packed, self.row = packed, {p: j for j, p in enumerate(positions)}

    def __getitem__(self, p: int) -> torch.Tensor:
        return self.packed[self.row[p]]

    def __contains__(self, p: int) -> bool:
        return p in self.row


def _pick(logprobs: torch.Tensor, temperature: float, generator) -> int:
    if temperature <= 0:
        return int(logprobs.argmax())
    # Gumbel-max in float64: low-precision Gumbel noise skews sampling (arXiv:2409.02908)
    u = torch.rand(logprobs.shape, dtype=torch.float64, generator=generator)
    return int((logprobs.double() / temperature - torch.log(-torch.log(u))).argmax())


def _choice_scores(row: _Row, i, lp):
    """Candidates of choice slot i and their summed log-probs over the slot's positions in the
    block. The candidates' tokens' log-probs are remembered per position (row.top), so a
    later repair can price the other candidates."""
    started = time.perf_counter()
    s = row.canvas.slots[i]
    cands = row.choices(i)
    scores = torch.zeros(len(cands), dtype=torch.float64)
    for p in range(s.start, s.end):
        if p in lp:
            column = [c[p - s.start] for c in cands]
            tokens = sorted(set(column))
            row.top[p] = (lp[p][tokens].tolist(), tokens)
            scores += lp[p][column].double()
    row.trace.constraint_seconds += time.perf_counter() - started
    return cands, scores.float()


def _next_logprobs(row: _Row, i, lp):
    """Log-probs of slot i's next position, with the tokens it may not take at -inf."""
    started = time.perf_counter()
    masked = lp[row.canvas.slots[i].start + row.filled[i]].masked_fill(~row.allowed(i), -math.inf)
    row.trace.constraint_seconds += time.perf_counter() - started
    return masked


def _confidence(row: _Row, i, lp) -> float:
    """How sure the model is of slot i's next decision (for the one-token-per-step schedule)."""
    if row.canvas.slots[i].kind == "choice":
        return float(_choice_scores(row, i, lp)[1].softmax(0).max())
    masked = _next_logprobs(row, i, lp)
    return float((masked - masked.logsumexp(0)).max().exp())


def _pick_viable(row: _Row, i, lp, temperature, generator):
    """Slot i's next token and the log-probs it was picked from. A verbatim slot's pick is
    passed over while no whole piece of the text can follow it; with none left, the slot
    gives up the copy (its pattern alone decides) and picks again."""
    masked = _next_logprobs(row, i, lp)
    token, a = _pick(masked, temperature, generator), row.automata[i]
    if not hasattr(a, "viable"):
        return token, masked
    started = time.perf_counter()
    while not a.viable(row.state[i], token, row.remaining(i) - 1):
        masked[token] = -math.inf
        if not torch.isfinite(masked).any():
            row.state[i] = a.release(row.state[i])
            masked = _next_logprobs(row, i, lp)
        token = _pick(masked, temperature, generator)
    row.trace.constraint_seconds += time.perf_counter() - started
    return token, masked


def _decode_slot(row: _Row, i, lp, block_end, step, threshold, temperature, generator):
    """Commit slot i's next token, then more while confident. lp: the row's _Logprobs."""
    s = row.canvas.slots[i]
    if s.kind == "choice":
        cands, scores = _choice_scores(row, i, lp)
        best = _pick(scores, temperature, generator)
        prob = float(scores.softmax(0)[best])
        for t in cands[best]:
            if row.done[i]:
                break
            row.put(i, t, prob, step)
        if not row.done[i]:
            row.finish(i, step)
        row.select_variants(i, step)
        return
    first = True
    while not row.done[i] and s.start + row.filled[i] < block_end:
        token, masked = _pick_viable(row, i, lp, temperature, generator)
        prob = math.exp(float(masked[token] - masked.logsumexp(0)))  # confidence under the constraint
        if not first and prob < threshold:
            break
        values, ids = masked.topk(min(TOP, masked.shape[0]))
        row.top[s.start + row.filled[i]] = (values.tolist(), ids.tolist())
        row.put(i, token, prob, step)
        first = False


class _History:
    """What the model has encoded of each row besides the block being denoised: the prompt
    and the blocks finished before it. With `use_cache` they live in the model's prefix
    cache, extended in each block's first step; without it (the baseline benchmarks compare
    with) they are encoded again, with the block, at every step. One step function
    either way: `logits`."""

    def __init__(self, model: DenoisingModel, prompts: list[list[int]], use_cache: bool):
        self.model, self.use_cache, self.device = model, use_cache, model.device
        P, pad = max(map(len, prompts)), model.config.pad_token_id or 0
        self.prompts = torch.tensor([[pad] * (P - len(p)) + list(p) for p in prompts], device=self.device)
        self.lengths = torch.tensor([len(p) for p in prompts], device=self.device)
        self.cache, self.held, self.cached_to = None, [], 0   # the cache holds rows `held`, canvas[:cached_to]
        self.view, self.view_rows = None, None                # the cache cut to the rows of the last step

    def _ids(self, rows, which, start, end) -> torch.Tensor:
        return torch.tensor([rows[n].ids[start:end] for n in which], dtype=torch.long, device=self.device)

    def _first(self, history, block, lengths, at, cache=None):
        """The first step of a block: `history` encoded (into `cache`, or a new one) and the
        block's logits, in one pass where the model has prefill_step; and the passes it took."""
        if hasattr(self.model, "prefill_step"):
            return (*self.model.prefill_step(history, block, lengths, at=at, cache=cache), 1)
        if cache is None:
            cache, _ = self.model.prefill(history, lengths=lengths)
        else:
            self.model.commit(history, cache)
        return cache, self.model.step(block, cache, at=at), 2

    def logits(self, rows, live, start, end, at, first) -> tuple[torch.Tensor, dict[int, int]]:
        """Log-prob inputs for one step: the logits at `at` (rows indexing `live`, columns of
        the block [start, end)), and the forward passes beyond this step's one charged to
        each row (the history encoded in a separate pass, or a finished block committed)."""
        if not self.use_cache:
            index = torch.tensor(live, device=self.device)
            history = torch.cat([self.prompts[index], self._ids(rows, live, 0, start)], 1)
            _, logits, passes = self._first(history, self._ids(rows, live, start, end), self.lengths[index] + start, at)
            return logits, {n: passes - 1 for n in live}
        if first:   # extend the cache by the prompts, or by the canvas finished since, for every unfinished row
            need = [n for n, r in enumerate(rows) if not all(r.done)]
            history, lengths, cache = self._ids(rows, need, self.cached_to, start), None, None
            if self.cache is None:
                history, lengths = torch.cat([self.prompts[need], history], 1), self.lengths[need] + start
            else:
                cache = self.cache if need == self.held else self.cache.select([self.held.index(n) for n in need])
            index = torch.tensor([need.index(n) for n in live], device=self.device)
            self.cache, logits, passes = self._first(history, self._ids(rows, need, start, end), lengths,
                                                     (index[at[0]], at[1]), cache)
            self.held, self.cached_to, self.view, self.view_rows = need, start, self.cache, need
            return logits, {n: passes - (n in live) for n in need}
        if live != self.view_rows:   # cut the cache only when the set of rows changes
            self.view, self.view_rows = self.cache.select([self.held.index(n) for n in live]), live
        return self.model.step(self._ids(rows, live, start, end), self.view, at=at), {}


SCHEDULES = ("joint", "sequential", "one_token")


def _start(canvases, automata, known) -> list[_Row]:
    """A row per canvas, the known values written in."""
    rows = [_Row(c, a) for c, a in zip(canvases, automata)]
    for row, fixed in zip(rows, known or [{}] * len(rows)):
        for i, toks in sorted(fixed.items()):
            for t in list(toks) + [row.canvas.pad_id] * (row.canvas.slots[i].budget - len(toks)):
                if not row.done[i]:
                    row.put(i, t, 1.0, 0)
            if row.canvas.slots[i].kind == "choice":
                row.select_variants(i, 0)
    return rows


def _commit(r: _Row, lp, block_start, block_end, step, schedule, threshold, temperature, generator) -> None:
    """One step of one row: its slots in the block decide, as the schedule says."""
    before = r.trace.tokens_committed
    slots, limit = r.next_slots(block_start, block_end), threshold
    if schedule == "sequential":
        slots = slots[:1]
    elif schedule == "one_token":
        slots, limit = [max(slots, key=lambda i: _confidence(r, i, lp))], math.inf
    for i in slots:
        if not r.done[i]:  # a group decision earlier in this step may have settled it
            _decode_slot(r, i, lp, block_end, step, limit, temperature, generator)
    r.trace.tokens_per_step.append(r.trace.tokens_committed - before)


@torch.no_grad()
def decode(model: DenoisingModel, prompts: list[list[int]], canvases, automata, *, threshold: float = 0.9,
           temperature: float = 0.0, generator: torch.Generator | None = None,
           block_size: int | None = None, known: list[dict] | None = None,
           schedule: str = "joint", use_cache: bool = True) -> list[Decoded]:
    """Fill every canvas; a Decoded per canvas (ids, trace, the alternatives ranked per position).

    prompts: token ids per canvas (any lengths); canvases: same layout length;
    automata[b][i]: the SlotAutomaton or ChoiceSet of slot i of canvas b;
    known[b]: {slot index: token ids} fixed before decoding.
    Blocks are the canvas's (`Canvas.spans`), cut again every `block_size` tokens
    (default: the model's).
    schedule: "joint" (every unfinished slot of the block each step), or the baselines
    "sequential" (one field after another) and "one_token" (one decision per step: the
    most confident next token, or choice, of any slot). use_cache=False re-encodes the
    prompt and the finished blocks at every step instead of reading the prefix cache.
    """
    if schedule not in SCHEDULES:
        raise UsageError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    rows = _start(canvases, automata, known)
    history = _History(model, prompts, use_cache)
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
            step += 1
            begin = 0
            for n, w in zip(live, wanted):
                lp, begin = _Logprobs(packed[begin:begin + len(w)], w), begin + len(w)
                rows[n].trace.forward_passes += 1
                rows[n].trace.steps += 1
                _commit(rows[n], lp, block_start, block_end, step, schedule, threshold, temperature, generator)
    return [Decoded(r.canvas, r.automata, r.ids, r.trace, r.top) for r in rows]


@torch.no_grad()
def score_choices(model: DenoisingModel, prompt: list[int], canvas, automata, ids: list[int]):
    """Every slot of a canvas of choice slots scored in one forward pass, as the decoder's
    first step scores choice slots: per slot, each candidate's summed log-probs over its
    positions, given `ids` (known values written in, the rest masked). Returns the scores
    and the forward passes taken."""
    row = _Row(canvas, automata)
    row.ids = list(ids)
    positions = [p for s in canvas.slots for p in range(s.start, s.end)]
    at = (torch.zeros(len(positions), dtype=torch.long, device=model.device),
          torch.tensor(positions, device=model.device))
    logits, extra = _History(model, [prompt], True).logits([row], [0], 0, len(canvas), at, True)
    lp = _Logprobs(torch.log_softmax(logits.float(), -1).cpu(), positions)
    return [_choice_scores(row, i, lp)[1] for i in range(len(canvas.slots))], 1 + extra.get(0, 0)
