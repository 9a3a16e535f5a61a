"""One canvas being decoded: its state, and how a step commits tokens to it.

`Row` holds a canvas's ids as decoding fills them, which slots are done, which groups
(list items, optional objects, union variants) are present, and the alternatives the
model ranked at each decided position. `decode_slot` is the selection rule of one slot
in one step: its next token always (left to right inside the slot, among the tokens its
automaton allows), more while the model is confident (`threshold`); a choice slot is
settled whole, as the best-scoring candidate, and so is a free-text copy, as the best-scoring
piece of the text. Knows nothing of models: log-probs in.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

import torch

_ITEM = re.compile(r"\[\d+\]")   # an item index in a slot path: vertices[2].lat
TOP = 8  # alternatives remembered per position, for fallbacks when a value fails its checks
WIDTH, WIDE = 16, 1024   # paths best_copy's narrow and wide searches keep per position
WIDE_TRIES = 4096        # paths the wide search tries at most (of 189 generated zone notices, 3,263 at most)
_TORCH_MASKS: dict[int, tuple] = {}  # id(numpy mask) -> (the mask, kept alive; its torch copy)


@dataclass
class Trace:
    forward_passes: int = 0                   # model calls: prefill, denoising steps, block commits
    decodes: int = 0                          # of the record: 1, more where a failed union variant was decoded again
    steps: int = 0                            # denoising steps
    tokens_committed: int = 0                 # slot positions filled by decoding
    confidence: dict[str, float] = field(default_factory=dict)   # per field: mean prob of its tokens
    settled_at: dict[str, int] = field(default_factory=dict)     # per field: step at which it finished
    tokens_per_step: list[int] = field(default_factory=list)
    # per verbatim field holding a piece of the text: (start, end) of the piece, in characters
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)
    # time spent on constraints: allowed-token masks built and applied, choice candidates
    # scored, automata advanced (benchmarks/compare.py reports its share of decoding time)
    constraint_seconds: float = 0.0

    @property
    def lowest(self) -> tuple[str, float] | None:
        """(field, confidence) of the field the model was least sure of; None if none was decoded."""
        return min(self.confidence.items(), key=lambda item: item[1], default=None)

    def count(self, other: "Trace") -> None:
        """Count the work of another decode of the same record (a retry) in this one's."""
        self.decodes += other.decodes
        self.forward_passes += other.forward_passes
        self.steps += other.steps
        self.tokens_committed += other.tokens_committed
        self.tokens_per_step += other.tokens_per_step
        self.constraint_seconds += other.constraint_seconds

    @property
    def tokens_per_forward(self) -> float:
        return self.tokens_committed / max(self.steps, 1)


@lru_cache(maxsize=64)
def groups_of(canvas) -> tuple[tuple[int, ...], ...]:
    """Per slot, the groups that contain it, outermost first (the same for every row of a canvas)."""
    chains = [[] for _ in canvas.slots]
    for g in canvas.groups:
        for i in g.slots:
            chains[i].append(g.index)
    return tuple(tuple(sorted(c, key=lambda gi: canvas.groups[gi].start)) for c in chains)


def _ordered_items(canvas) -> set[int]:
    """The item groups of item_blocks lists: those that start a block, and each list's first."""
    ordered = {g.index for g in canvas.groups if g.kind == "item" and g.start in canvas.blocks}
    return ordered | {canvas.groups[gi].prev for gi in ordered} - {None}


@lru_cache(maxsize=64)
def copied_after(canvas) -> tuple[tuple[int, ...], ...]:
    """Per verbatim slot of an item_blocks list's item: the verbatim slots whose copies its own
    follows in the text (those of the item before, decoded a block earlier, and those before it
    in its own item, which it waits for); empty for every other slot."""
    ordered = _ordered_items(canvas)
    copies = {i for i, s in enumerate(canvas.slots) if s.verbatim}
    out = [()] * len(canvas.slots)
    for i, chain in enumerate(groups_of(canvas)):
        item = next((gi for gi in reversed(chain) if gi in ordered), None)
        if i in copies and item is not None:
            g = canvas.groups[item]
            before = canvas.groups[g.prev].slots if g.prev is not None else ()
            out[i] = tuple(j for j in before + g.slots if j in copies and j < i)
    return tuple(out)


@lru_cache(maxsize=64)
def sibling_copies(canvas, mark: str) -> dict[int, int]:
    """Per verbatim slot marked copies_before (mark "before") or copies_beside ("beside"): the
    slot whose copy its own precedes, or stands next to, in the text."""
    at = {s.path: i for i, s in enumerate(canvas.slots)}
    return {i: at[getattr(s, mark)] for i, s in enumerate(canvas.slots) if getattr(s, mark)}


@lru_cache(maxsize=64)
def run_heads(canvas) -> dict[int, tuple[int, int]]:
    """Per item_blocks list whose items copy: its first item's first verbatim slot -> (that item's
    last verbatim slot, the items the list must hold): the list's first piece starts a run of
    them in the text (copy_run)."""
    following = {g.prev: g for g in canvas.groups if g.kind == "item" and g.prev is not None}
    out = {}
    for gi in _ordered_items(canvas):
        g = canvas.groups[gi]
        copies = [i for i in g.slots if canvas.slots[i].verbatim]
        if g.prev is None and copies:
            items, item = 0, g
            while item is not None and item.required:
                items, item = items + 1, following.get(item.index)
            out[copies[0]] = copies[-1], max(items, 1)
    return out


@lru_cache(maxsize=64)
def variant_copies(canvas) -> dict[int, tuple[tuple[tuple[str, ...], tuple[int, ...]], ...]]:
    """Per union tag slot, per variant: (its tags, its verbatim slots written whenever it is, no
    optional group between): the copies the text must be able to give for it to be chosen."""
    chains, out = groups_of(canvas), {}
    for g in canvas.groups:
        if g.kind == "variant":
            copies = tuple(j for j in g.slots if canvas.slots[j].verbatim and all(
                canvas.groups[k].required for k in chains[j][chains[j].index(g.index) + 1:]))
            out[g.selector] = out.get(g.selector, ()) + ((g.tags, copies),)
    return out


@lru_cache(maxsize=64)
def slot_positions(canvas) -> tuple[bool, ...]:
    """Per canvas position, whether a slot holds it (the rest is fixed text)."""
    inside = [False] * len(canvas.ids)
    for s in canvas.slots:
        inside[s.start:s.end] = [True] * s.budget
    return tuple(inside)


class Row:
    """Decoding state of one canvas."""

    def __init__(self, canvas, automata, barred: dict[int, set] | None = None):
        self.canvas, self.automata = canvas, automata
        self.barred = barred or {}             # choice slot -> candidates (token tuples) not to choose
        self.barred_share: dict[int, float] = {}   # choice slot -> the probability its barred candidates had
        self.ids = list(canvas.ids)
        n = len(canvas.slots)
        self.filled = [0] * n                  # positions committed, from the slot's start
        self.state = [getattr(a, "initial", None) for a in automata]
        self.done = [False] * n
        self.present = [True if g.required else None for g in canvas.groups]
        self.probs: dict[int, list[float]] = {}
        self.top: dict[int, tuple[list[float], list[int]]] = {}   # position -> alternatives
        self.trace = Trace(decodes=1)
        self.groups_of = groups_of(canvas)
        self.bound = bound = [hasattr(a, "copied_to") for a in automata]   # verbatim slots bound to a text
        self.copied_after = [tuple(j for j in after if bound[j]) if bound[i] else ()
                             for i, after in enumerate(copied_after(canvas))]
        self.heads = {h: run for h, run in run_heads(canvas).items() if bound[h] and bound[run[0]]}
        self.before, self.beside = ({i: j for i, j in sibling_copies(canvas, mark).items() if bound[i] and bound[j]}
                                    for mark in ("before", "beside"))
        self.partner = {j: i for i, j in self.beside.items()}   # the slot copied beside j (a latitude's longitude)
        self.waits_for = [after + tuple(m[i] for m in (self.before, self.beside) if i in m)   # done before i starts
                          for i, after in enumerate(self.copied_after)]
        self.placed: set[int] = set()           # slots whose copy's start `place` set
        self._unreachable: dict[tuple[int, int], list[int]] = {}   # (choice slot, candidates) -> barred
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
        """Unfinished slots whose next position lies in the block, in canvas order; a slot that
        copies after others, or before or beside another, waits until they are done."""
        return [i for i, s in enumerate(self.canvas.slots)
                if not self.done[i] and block_start <= s.start + self.filled[i] < block_end
                and all(self.done[j] for j in self.waits_for[i])]

    def wanted(self, block_start, block_end) -> list[int]:
        """Canvas positions whose log-probs this step may read: every not yet written position
        of the unfinished slots of the block (a choice slot is scored over its whole span)."""
        return [p for i in self.next_slots(block_start, block_end)
                for p in range(max(self.canvas.slots[i].start + self.filled[i], block_start),
                               min(self.canvas.slots[i].end, block_end))]

    def unwritten(self, start, end) -> list[bool]:
        """Per position of [start, end): a slot position nothing is written at yet (it still holds
        the canvas's mask id). A uniform-noise model sees fresh random tokens there each step."""
        inside, mask = slot_positions(self.canvas), self.canvas.mask_id
        return [inside[p] and self.ids[p] == mask for p in range(start, end)]

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

    def copy_after(self, i):
        """A verbatim slot of an item_blocks item copies from after the pieces it follows (past the
        earliest end of each); where nothing follows them, an item that may be absent is absent,
        and a slot that must be written copies from anywhere. Where a piece of the item's follows
        with only separators between ("5130N 00010W - 5140N ...", "北纬31.02度；（2）东经121.65度、
        北纬..."), the run goes on: the item is present."""
        ends = [self.automata[j].copied_to(self.state[j]) for j in self.copied_after[i]]
        ends = [e for e in ends if e is not None]
        if ends:
            item = self.may_be_absent(i)
            self.state[i] = self.automata[i].starting_from(self.state[i], max(ends), self.remaining(i),
                                                           or_anywhere=item is None,
                                                           among=[self.automata[j] for j in self.copied_after[i]])
            if item is not None and any(self.bound[j] and self.automata[j].follows_on(max(ends))
                                        for j in self.canvas.groups[item].slots):
                self.set_present(item)

    def copy_before(self, i):
        """A slot marked copies_before copies a piece that starts before the one its sibling copied
        (a start before its end), where the text has one; as it was where the sibling copied none."""
        j = self.before[i]
        span = self.automata[j].span(self.state[j], self.canvas.slot_text(self.ids, j))
        if span is not None:
            self.state[i] = self.automata[i].starting_before(self.state[i], span[0])

    def copy_beside(self, i) -> bool:
        """A slot marked copies_beside copies the piece right next to its sibling's: the one just
        before it, where that starts after what the item before copied, else the one just after;
        where neither is, any piece but the sibling's. False where the text has none (the slot is
        then placed as if unmarked)."""
        j = self.beside[i]
        piece = self.automata[j].copied_piece(self.state[j], self.canvas.slot_text(self.ids, j))
        ends = [self.automata[k].copied_to(self.state[k]) for k in self.copied_after[i] if k != j]
        state = piece and self.automata[i].beside(self.state[i], piece, max(filter(None, ends), default=0),
                                                  self.remaining(i))
        if state:
            self.state[i] = state
        return bool(state)

    def copy_run(self, i):
        """A list's first piece starts a run of its pieces in the text, not in the middle of one,
        and one as long as the list must be where there is such a run."""
        last, items = self.heads[i]
        self.state[i] = self.automata[i].starting_a_run(self.state[i], self.remaining(i), self.automata[last],
                                                        items)

    def place(self, i):
        """Where slot i's copy may start, set once before its first token (the slots it copies
        after, beside or before are done by then)."""
        if i in self.beside and self.copy_beside(i):
            return
        if self.copied_after[i]:
            self.copy_after(i)
        elif i in self.heads:
            self.copy_run(i)
        elif i in self.before:
            self.copy_before(i)
        elif i in self.partner:
            self.state[i] = self.automata[i].starting_paired(self.state[i], self.remaining(i),
                                                             self.automata[self.partner[i]])

    def placed_state(self, i):
        """Slot i's automaton state, its copy's start placed first where it has not begun."""
        if self.filled[i] == 0 and i not in self.placed:
            self.place(i)
            self.placed.add(i)
        return self.state[i]

    def allowed(self, i) -> torch.Tensor:
        """Tokens slot i may take at its next position ([vocab] bool)."""
        self.placed_state(i)
        mask = self.automata[i].allowed_mask(self.state[i], self.remaining(i),
                                             allow_empty=self.may_be_absent(i) is not None)
        if mask.flags.writeable:          # made for this call (a Verbatim slot's): use it as it is
            return torch.from_numpy(mask)
        if id(mask) not in _TORCH_MASKS:  # the automaton caches its masks; keep one tensor view each
            _TORCH_MASKS[id(mask)] = (mask, torch.from_numpy(mask.copy()))
        return _TORCH_MASKS[id(mask)][1]

    def choices(self, i) -> list[list[int]]:
        return self.automata[i].candidates(allow_empty=self.may_be_absent(i) is not None).tolist()

    def unreachable(self, i, cands) -> list[int]:
        """The candidates of choice slot i not to choose: those barred (a union variant an
        earlier decode of the record could not fill validly), and those that select a variant
        the text cannot fill: one with a copy it must make (a required verbatim string, in
        required groups) of which the text holds no piece, as a circle's radius in a notice
        that states none, or with more required items of a list than the text holds pieces
        one after another, as a polygon's three vertices where it states one position. None
        of them if every candidate would be (the slot's choice then stands as the model makes
        it)."""
        key = (i, len(cands))
        if key not in self._unreachable:
            unfilled = {tag for tags, copies in variant_copies(self.canvas).get(i, ())
                        if not self._can_copy(copies) for tag in tags}
            s, ids, out, barred = self.canvas.slots[i], list(self.ids), [], self.barred.get(i, ())
            for k, cand in enumerate(cands if unfilled or barred else ()):
                ids[s.start:s.end] = cand
                if tuple(cand) in barred or self.canvas.slot_text(ids, i) in unfilled:
                    out.append(k)
            self._unreachable[key] = out if len(out) < len(cands) else []
        return self._unreachable[key]

    def _can_copy(self, slots) -> bool:
        """Whether the text holds a piece for each of these verbatim slots (those bound to it),
        and for the items of an item_blocks list among them, which copy in the order of the
        text, one piece each, one after another."""
        ordered = _ordered_items(self.canvas)
        field = {j: _ITEM.sub("[]", self.canvas.slots[j].path) if ordered.intersection(self.groups_of[j]) else j
                 for j in slots if hasattr(self.automata[j], "pieces_in_turn")}
        need = Counter(field.values())   # vertices[].lat: 3 where a polygon must have three vertices
        return all(self.automata[j].pieces_in_turn(need[f]) == need[f] for j, f in field.items())

    def select_variants(self, i, step):
        """A union tag was written: its variant is present, the others absent."""
        tag = self.canvas.slot_text(self.ids, i)
        for g in self.canvas.groups:
            if g.kind == "variant" and g.selector == i:
                if tag in g.tags:
                    self.set_present(g.index)
                else:
                    self.set_absent(g.index, step)


class Logprobs:
    """One row's log-probs at the positions a step computed, looked up by canvas position:
    the output head runs only where a decision can still be made, not on the whole block."""

    def __init__(self, packed: torch.Tensor, positions: list[int]):
        self.packed, self.row = packed, {p: j for j, p in enumerate(positions)}

    def __getitem__(self, p: int) -> torch.Tensor:
        return self.packed[self.row[p]]

    def __contains__(self, p: int) -> bool:
        return p in self.row


def pick(logprobs: torch.Tensor, temperature: float, generator) -> int:
    if temperature <= 0:
        return int(logprobs.argmax())
    # Gumbel-max in float64: low-precision Gumbel noise skews sampling (arXiv:2409.02908). Below a
    # temperature of 1 as argmax(lp + T g), which lp / T overflows at a tiny T (1e-310 drew
    # uniformly); above it as argmax(lp / T + g), which T g overflows at a huge one
    u = torch.rand(logprobs.shape, dtype=torch.float64, generator=generator)
    lp, gumbel = logprobs.double(), -torch.log(-torch.log(u))
    if temperature < 1:
        return int((lp + temperature * gumbel).argmax())
    return int((torch.where(lp > -math.inf, lp / temperature, lp) + gumbel).argmax())


def choice_scores(row: Row, i, lp):
    """Candidates of choice slot i and their summed log-probs over the slot's positions in the
    block. The candidates' tokens' log-probs are remembered per position (row.top), so a
    later repair can price the other candidates, and so is the probability the model gives
    the barred ones (row.barred_share), which the chosen one's confidence does not take."""
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
    out = row.unreachable(i, cands)
    if barred := [k for k in out if tuple(cands[k]) in row.barred.get(i, ())]:
        seen = scores.clone()
        seen[[k for k in out if k not in barred]] = -math.inf
        row.barred_share[i] = float(seen.softmax(0)[barred].sum())
    scores[out] = -math.inf
    row.trace.constraint_seconds += time.perf_counter() - started
    return cands, scores.float()


def next_logprobs(row: Row, i, lp):
    """Log-probs of slot i's next position, with the tokens it may not take at -inf."""
    started = time.perf_counter()
    masked = lp[row.canvas.slots[i].start + row.filled[i]].masked_fill(~row.allowed(i), -math.inf)
    row.trace.constraint_seconds += time.perf_counter() - started
    return masked


def confidence(row: Row, i, lp) -> float:
    """How sure the model is of slot i's next decision (for the one-token-per-step schedule)."""
    if row.canvas.slots[i].kind == "choice":
        return float(choice_scores(row, i, lp)[1].softmax(0).max())
    masked = next_logprobs(row, i, lp)
    return float((masked - masked.logsumexp(0)).max().exp())


def pick_viable(row: Row, i, lp, temperature, generator):
    """Slot i's next token and the log-probs it was picked from. A verbatim slot's pick is
    passed over while no whole piece of the text can follow it; with none left, the slot
    gives up the copy (its pattern alone decides) and picks again."""
    masked = next_logprobs(row, i, lp)
    token, a = pick(masked, temperature, generator), row.automata[i]
    if not hasattr(a, "viable"):
        return token, masked
    started = time.perf_counter()
    while not a.viable(row.state[i], token, row.remaining(i) - 1):
        masked[token] = -math.inf
        if not torch.isfinite(masked).any():
            row.state[i] = a.release(row.state[i])
            masked = next_logprobs(row, i, lp)
        token = pick(masked, temperature, generator)
    row.trace.constraint_seconds += time.perf_counter() - started
    return token, masked


def copies_free_text(row: Row, i, lp) -> bool:
    """Whether slot i is a free-text copy inside its quotes with nothing copied yet, each of its
    positions left in this step's log-probs."""
    s, a = row.canvas.slots[i], row.automata[i]
    return hasattr(a, "unbegun_free_text") and all(p in lp for p in range(s.start + row.filled[i], s.end)) \
        and a.unbegun_free_text(row.placed_state(i))


def best_copy(row: Row, i, lp, temperature, generator) -> list[int] | None:
    """The rest of free-text copy slot i, chosen whole as a choice slot is: of the token paths
    its automaton allows (pieces of the text) that write their piece as the tokenizer does,
    the one whose tokens, and the pads after them, have the highest summed log-probs over the
    slot's positions left; None where no path ends. Free text has no pattern to say where a
    piece ends, so the piece is read whole, not from its first token alone.

    Two beam searches: a narrow one (WIDTH paths per position) finds a good path soon; a wide
    one (WIDE) then keeps only paths that may still beat it, so a piece whose first token the
    model doubts (a place at a reason's start) is not lost to paths that only start well."""
    started = time.perf_counter()
    s, pad = row.canvas.slots[i], row.canvas.pad_id
    left = range(s.start + row.filled[i], s.end)
    tail = _suffix_sums([lp[p][pad] for p in left])                 # pads at each position from k on
    reach = _suffix_sums([lp[p].max() for p in left])[1:] + [0.0]   # the most the positions after k add
    ended = _copy_search(row, i, lp, tail, reach, WIDTH, -math.inf)
    floor = max((score for score, _ in ended), default=-math.inf)
    ended += _copy_search(row, i, lp, tail, reach, WIDE, floor, WIDE_TRIES)
    ended = list({tuple(path): (score, path) for score, path in ended}.values())   # once each, to sample from
    row.trace.constraint_seconds += time.perf_counter() - started
    if not ended:
        return None
    return ended[pick(torch.tensor([score for score, _ in ended]), temperature, generator)][1]


def _suffix_sums(values: list[torch.Tensor]) -> list[float]:
    return torch.stack(values).double().flip(0).cumsum(0).flip(0).tolist()


def _copy_search(row: Row, i, lp, tail: list[float], reach: list[float], width: int, floor: float,
                 tries: float = math.inf) -> list[tuple[float, list]]:
    """best_copy's beam search, keeping `width` paths per position (one per automaton state, so
    per place in the text) and only those that could still score above `floor` and above every
    path ended so far: the paths that end, with their scores; those ended before it gives up,
    having tried `tries` paths. tail[k]: pads from position k on; reach[k]: the most the
    positions after k can add."""
    s, a, pad, tok = row.canvas.slots[i], row.automata[i], row.canvas.pad_id, row.canvas.tokenizer
    left = range(s.start + row.filled[i], s.end)
    committed = row.ids[s.start:left.start]
    beam, ended = {row.state[i]: (0.0, [], b"".join(tok.token_bytes(t) for t in committed))}, []
    for k, p in enumerate(left):
        grown = []
        for state, (score, path, data) in beam.items():
            toks = a.allowed(state, len(left) - k)
            if pad in toks and a.copied_whole(state):
                ended.append((score + tail[k], path + [pad]))
            toks = toks[toks != pad]
            top = (lp[p][torch.from_numpy(toks)].double() + score).topk(min(width, len(toks)))
            grown += [(v, state, path, data, int(toks[j])) for v, j in zip(top.values.tolist(), top.indices.tolist())]
        best = max([floor] + [score for score, _ in ended]) - reach[k]
        beam = {}
        for v, state, path, data, t in sorted(grown, key=lambda g: g[0], reverse=True):
            if v <= best or len(beam) == width:
                break
            tries -= 1
            after, ids, spelt = a.next(state, t), committed + path + [t], data + tok.token_bytes(t)
            if spelt_as_encoded(tok, ids, spelt, lambda size: a.following(after, size)):
                beam.setdefault(after, (v, path + [t], spelt))
        if tries <= 0:
            return ended
    return ended + [(score, path) for state, (score, path, _) in beam.items()
                    if a.is_final(state) and a.copied_whole(state)]


def spelt_as_encoded(tok, ids: list[int], data: bytes, following) -> bool:
    """Whether `ids`, whose bytes are `data`, are the tokens the tokenizer writes their text with
    (those Canvas.fill gives a value). A model learns one way of writing a text; another (a
    character spelled in bytes where it has a token of its own) is a path best_copy would
    score by log-probs the model never meant for it. Tokens that stop inside a character are
    judged with it finished: `following(size)` gives the `size` bytes that may come next (the
    copied text's there), and one of them must finish it as written so far."""
    try:
        return tok.encode(data.decode()) == ids
    except UnicodeDecodeError as e:
        if e.reason != "unexpected end of data":   # no character starts there
            return False
        size = _UTF8_LENGTH[data[e.start] >> 4] - (len(data) - e.start)
    for rest in following(size):
        try:
            if tok.encode((data + rest).decode())[:len(ids)] == ids:
                return True
        except UnicodeDecodeError:
            continue
    return False


_UTF8_LENGTH = [1] * 12 + [2, 2, 3, 4]   # a character's bytes, by its first byte's high four bits


def decode_slot(row: Row, i, lp, block_end, step, threshold, temperature, generator):
    """Commit slot i's next token, then more while confident. A free-text copy with nothing
    copied yet whose next pick is no pad (a pad: the group absent, or the value null) takes its
    piece whole (best_copy), in a step that may commit more than one token (threshold <= 1).
    lp: the row's Logprobs."""
    s = row.canvas.slots[i]
    if s.kind == "choice":
        cands, scores = choice_scores(row, i, lp)
        best = pick(scores, temperature, generator)
        prob = float(scores.softmax(0)[best]) * (1 - row.barred_share.get(i, 0.0))
        for t in cands[best]:
            if row.done[i]:
                break
            row.put(i, t, prob, step)
        if not row.done[i]:
            row.finish(i, step)
        row.select_variants(i, step)
        return
    first, path = True, None
    while not row.done[i] and s.start + row.filled[i] < block_end:
        token, masked = pick_viable(row, i, lp, temperature, generator)
        if path is None and token != row.canvas.pad_id and (first or threshold <= 1) \
                and copies_free_text(row, i, lp):    # a pad still says null, absent or ended
            path = best_copy(row, i, lp, temperature, generator) or []
        whole = bool(path)
        if whole:
            token = path.pop(0)
        prob = math.exp(float(masked[token] - masked.logsumexp(0)))  # confidence under the constraint
        if not first and prob < threshold and not whole:
            break
        values, ids = masked.topk(min(TOP, masked.shape[0]))
        row.top[s.start + row.filled[i]] = (values.tolist(), ids.tolist())
        row.put(i, token, prob, step)
        first = False
