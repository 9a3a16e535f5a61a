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

Knows nothing of pydantic or text: canvases, automata and a model in, token ids
and statistics out. The model is anything with `prefill`, `step`, `commit`; one with
`prefill_step` too encodes the prompts, or commits the blocks before, in each block's
first step (`first_step`: a record settled in one step then costs one forward pass, not two).
"""

from __future__ import annotations

import heapq
import math
import time
from functools import lru_cache
from dataclasses import dataclass, field

import torch

UNRANKED = 4.0  # log-prob penalty, below the lowest remembered, of a token outside the top TOP
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


def _choice_scores(row: _Row, i, lp, block_end):
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


def _next_logprobs(row: _Row, i, lp, block_end):
    """Log-probs of slot i's next position, with the tokens it may not take at -inf."""
    started = time.perf_counter()
    masked = lp[row.canvas.slots[i].start + row.filled[i]].masked_fill(~row.allowed(i), -math.inf)
    row.trace.constraint_seconds += time.perf_counter() - started
    return masked


def _confidence(row: _Row, i, lp, block_end) -> float:
    """How sure the model is of slot i's next decision (for the one-token-per-step schedule)."""
    if row.canvas.slots[i].kind == "choice":
        return float(_choice_scores(row, i, lp, block_end)[1].softmax(0).max())
    masked = _next_logprobs(row, i, lp, block_end)
    return float((masked - masked.logsumexp(0)).max().exp())


def _pick_viable(row: _Row, i, lp, block_end, temperature, generator):
    """Slot i's next token and the log-probs it was picked from. A verbatim slot's pick is
    passed over while no whole piece of the text can follow it; with none left, the slot
    gives up the copy (its pattern alone decides) and picks again."""
    masked = _next_logprobs(row, i, lp, block_end)
    token, a = _pick(masked, temperature, generator), row.automata[i]
    if not hasattr(a, "viable"):
        return token, masked
    started = time.perf_counter()
    while not a.viable(row.state[i], token, row.remaining(i) - 1):
        masked[token] = -math.inf
        if not torch.isfinite(masked).any():
            row.state[i] = a.release(row.state[i])
            masked = _next_logprobs(row, i, lp, block_end)
        token = _pick(masked, temperature, generator)
    row.trace.constraint_seconds += time.perf_counter() - started
    return token, masked


def _decode_slot(row: _Row, i, lp, block_end, step, threshold, temperature, generator):
    """Commit slot i's next token, then more while confident. lp: the row's _Logprobs."""
    s = row.canvas.slots[i]
    if s.kind == "choice":
        cands, scores = _choice_scores(row, i, lp, block_end)
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
        token, masked = _pick_viable(row, i, lp, block_end, temperature, generator)
        prob = math.exp(float(masked[token] - masked.logsumexp(0)))  # confidence under the constraint
        if not first and prob < threshold:
            break
        values, ids = masked.topk(min(TOP, masked.shape[0]))
        row.top[s.start + row.filled[i]] = (values.tolist(), ids.tolist())
        row.put(i, token, prob, step)
        first = False


def first_step(model, history, block_ids, lengths=None, *, at=None, cache=None):
    """The prefix cache extended by `history` (the prompts, or with `cache` the canvas
    decoded since it was last extended), the logits of the first step over `block_ids`, and
    the forward passes that took: one where the model has `prefill_step`, else two."""
    if hasattr(model, "prefill_step"):
        return (*model.prefill_step(history, block_ids, lengths, at=at, cache=cache), 1)
    if cache is None:
        cache, _ = model.prefill(history, lengths=lengths)
    else:
        model.commit(history, cache)
    return cache, model.step(block_ids, cache, at=at), 2


SCHEDULES = ("joint", "sequential", "one_token")


@torch.no_grad()
def decode(model, prompts: list[list[int]], canvases, automata, *, threshold: float = 0.9,
           temperature: float = 0.0, generator: torch.Generator | None = None,
           block_size: int | None = None, known: list[dict] | None = None,
           schedule: str = "joint", use_cache: bool = True) -> list[_Row]:
    """Fill every canvas; returns the rows (ids, trace, per-position alternatives).

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
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    device = model.device
    rows = [_Row(c, a) for c, a in zip(canvases, automata)]
    for row, fixed in zip(rows, known or [{}] * len(rows)):
        for i, toks in sorted(fixed.items()):
            for t in list(toks) + [row.canvas.pad_id] * (row.canvas.slots[i].budget - len(toks)):
                if not row.done[i]:
                    row.put(i, t, 1.0, 0)
            if row.canvas.slots[i].kind == "choice":
                row.select_variants(i, 0)
    P = max(len(p) for p in prompts)
    pad = model.config.pad_token_id or 0
    prompt_ids = torch.tensor([[pad] * (P - len(p)) + list(p) for p in prompts], device=device)
    lengths = torch.tensor([len(p) for p in prompts], device=device)
    # With use_cache, `cache` holds the prompt and canvas[:cached_to] of the rows in `held`
    # (in its order); a block's first step extends it (first_step) and drops the rows
    # with nothing left to decode.
    cache, held, cached_to = None, [], 0
    step = 0
    for block_start, block_end in canvases[0].spans(block_size or model.config.block_size):
        first = True
        while live := [n for n, r in enumerate(rows) if r.next_slots(block_start, block_end)]:
            wanted = [rows[n].wanted(block_start, block_end) for n in live]
            at = (torch.tensor([j for j, w in enumerate(wanted) for _ in w], device=device),
                  torch.tensor([p - block_start for w in wanted for p in w], device=device))
            if use_cache and first:   # the block's first step also extends the cache
                need = [n for n, r in enumerate(rows) if not all(r.done)]
                history = torch.tensor([rows[n].ids[cached_to:block_start] for n in need], dtype=torch.long,
                                       device=device)
                if cache is None:   # the prompts first
                    history, hist_lengths = torch.cat([prompt_ids[need], history], 1), lengths[need] + block_start
                else:
                    cache = cache if need == held else cache.select([held.index(n) for n in need])
                    hist_lengths = None
                ids = torch.tensor([rows[n].ids[block_start:block_end] for n in need], device=device)
                index = torch.tensor([need.index(n) for n in live], device=device)
                cache, logits, passes = first_step(model, history, ids, hist_lengths, at=(index[at[0]], at[1]),
                                                   cache=cache)
                held, cached_to, rows_cache, live_before = need, block_start, cache, need
                for n in need:   # (a live row counts its step below)
                    rows[n].trace.forward_passes += passes - (n in live)
            elif use_cache:
                if live != live_before:  # re-slice the cache only when the set of rows changes
                    rows_cache, live_before = cache.select([held.index(n) for n in live]), live
                ids = torch.tensor([rows[n].ids[block_start:block_end] for n in live], device=device)
                logits = model.step(ids, rows_cache, at=at)
            else:
                index = torch.tensor(live, device=device)
                ids = torch.tensor([rows[n].ids[:block_end] for n in live], device=device)
                hidden = model.hidden(torch.cat([prompt_ids[index], ids], 1), "block",
                                      block_len=block_end - block_start, pad=P - lengths[index])
                logits = model.lm_head(hidden[:, -(block_end - block_start):][at])
            first = False
            packed = torch.log_softmax(logits.float(), -1).cpu()
            step += 1
            begin = 0
            for n, w in zip(live, wanted):
                lp, begin = _Logprobs(packed[begin:begin + len(w)], w), begin + len(w)
                r = rows[n]
                before = r.trace.tokens_committed
                r.trace.forward_passes += 1
                r.trace.steps += 1
                slots, limit = r.next_slots(block_start, block_end), threshold
                if schedule == "sequential":
                    slots = slots[:1]
                elif schedule == "one_token":
                    slots, limit = [max(slots, key=lambda i: _confidence(r, i, lp, block_end))], math.inf
                for i in slots:
                    if not r.done[i]:  # a group decision earlier in this step may have settled it
                        _decode_slot(r, i, lp, block_end, step, limit, temperature, generator)
                r.trace.tokens_per_step.append(r.trace.tokens_committed - before)
    return rows


def _scores(row: _Row, position: int) -> tuple[dict[int, float], float]:
    """The remembered log-probs at a position, and the score of a token not among them."""
    values, ids = row.top.get(position, ([], []))
    ranked = {t: v for v, t in zip(values, ids) if math.isfinite(v)}
    return ranked, min(ranked.values(), default=0.0) - UNRANKED


def cost(row: _Row, i, seq) -> float:
    """How unlikely the model rated `seq` as slot i's tokens (minus its summed log-probs),
    on the scale `alternatives` orders by; pads after the first count nothing."""
    total, pad = 0.0, row.canvas.pad_id
    for k, t in enumerate(seq):
        ranked, floor = _scores(row, row.canvas.slots[i].start + k)
        total -= ranked.get(t, floor)
        if t == pad:
            break
    return total


def alternatives(row: _Row, i, limit: int = 64, pops: int = 4096, ranked_only: bool = False):
    """Other complete token sequences for slot i, best first, as (cost, tokens), each accepted
    by the slot's automaton: the fallbacks tried when the decoded value fails a check a regex
    cannot express. A token scores its remembered log-prob at that position; tokens the
    model did not rank in its top few score below all of those (UNRANKED), so every
    value the automaton accepts is reachable, likely ones first; ranked_only: only the
    tokens the model ranked, where it ranked any, and the end of the value (a much smaller search)."""
    s, a, pad = row.canvas.slots[i], row.automata[i], row.canvas.pad_id
    if row.state[i] is None:  # a choice slot: its other candidates
        current = row.ids[s.start:s.end]
        yield from sorted((cost(row, i, c), c) for c in row.choices(i) if c != current)[:limit]
        return
    # Entries hold the state BEFORE their last token: the automaton steps only for the
    # sequences popped, not for every token pushed.
    heap = [(0.0, (), a.initial)]
    found = 0
    while heap and found < limit and pops > 0:
        pops -= 1
        total, seq, state = heapq.heappop(heap)
        k = len(seq)
        if k == s.budget or (seq and seq[-1] == pad):
            out = list(seq) + [pad] * (s.budget - k)
            if out != row.ids[s.start:s.end]:
                found += 1
                yield total, out
            continue
        if seq:
            state = a.next(state, seq[-1])
        ranked, floor = _scores(row, s.start + k)
        tokens = a.allowed(state, s.budget - k).tolist()
        if ranked_only and ranked:   # a position never scored keeps every token
            tokens = [t for t in tokens if t in ranked or t == pad]
        for t in tokens:
            heapq.heappush(heap, (total - ranked.get(t, floor), seq + (t,), state))
