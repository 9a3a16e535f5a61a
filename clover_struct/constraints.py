"""Token automata for canvas slots: what each slot may hold, as arrays the decoder reads.

A regex slot becomes a `SlotAutomaton`. outlines-core compiles its pattern into a
token-level DFA over the tokenizer's vocabulary, with the pad token in outlines'
end-of-sequence role (a slot with a second pattern, a format beside the user's, gets the
product of the two DFAs; a oneOf's whole value, the product of its DFA and its members',
final where at most one member's is); the transition table is copied into numpy arrays:
- `next(state, token)` is one table lookup;
- `allowed(state, remaining)` returns the tokens that keep a final state reachable
  within the `remaining` positions of the slot (this one included), a slice of a
  per-state array sorted by that distance, so a slot can never be painted into a
  corner; pad is allowed only in final states and, once written, only pads follow;
- `allowed_mask` is the same as a boolean row over the vocabulary, cached.
A choice slot (enum, bool, Literal, discriminator) becomes a `ChoiceSet`: its
candidates as token ids padded to the budget, scored by the decoder as wholes.
Checks a regex cannot express (numeric bounds) stay on the slot: `violation`.

Special tokens (mask, pad, eos, chat markers) are never inside a value: they are
not in the vocabulary given to outlines-core. Knows nothing of torch, models or
schemas: slots in (from layout.py), arrays out.
"""

from __future__ import annotations

import weakref
from dataclasses import replace

import numpy as np

from .errors import SchemaError
from .vocab import END, outlines_vocabulary, per_tokenizer, unit_starts

DEAD = -1               # the state after a token the slot cannot take
_FAR = 1 << 30          # distance of a state that cannot reach a final state
PRODUCT = 4_000_000     # transitions of a oneOf's at-most-one automaton past which the final check alone holds it
_COMPILED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # canvas -> [SlotAutomaton|ChoiceSet]


class _Untold(Exception):
    """A oneOf's members that regexes do not tell apart here: their at-most-one automaton would
    pass PRODUCT transitions."""


class _Tables:
    """The token DFA of one pattern, times a character counter when `length` is given.

    outlines-core gives base states q (plus `done`, the sink after pad) and
    `table[q, t]`, the next base state or DEAD. A state is q * width + c, c being the
    characters written so far (width 1 without length bounds; saturating at min_length
    without max_length), so max_length costs a counter, not a DFA copy per character.
    `dist[q, c]` is the fewest tokens to a final state; `rows(state)` lists the tokens
    leaving a state sorted by the distance they leave, with cumulative counts `cuts`.
    """

    def __init__(self, patterns: tuple[str, ...], tokenizer, vocab_size: int, path: str, pad: int, mask: int,
                 length: tuple[int, int | None] | None = None, inside: bool = True, one: bool = False):
        vocabulary, vmap = outlines_vocabulary(tokenizer, pad, mask)
        trans, start = _transitions(patterns, vocabulary, path, one)
        self.pad = pad
        names = np.array(sorted(set(trans) | {t for row in trans.values() for t in row.values()} | {start}))
        n = len(names) + 1
        self.done, self.vocab_size = n - 1, vocab_size
        self.table = np.full((n, vocab_size), DEAD, np.int16 if n < 2**15 else np.int32)
        base_final = np.zeros(n, bool)
        for s, row in trans.items():
            toks = np.fromiter(row.keys(), np.int64, len(row))
            targets = np.searchsorted(names, np.fromiter(row.values(), np.int64, len(row)))
            keep = (toks != pad) & (toks < vocab_size)
            q = np.searchsorted(names, s)
            self.table[q, toks[keep]] = targets[keep]
            base_final[q] = END in row
        q0 = int(np.searchsorted(names, start))
        base_final[self.done] = True
        self.table[base_final, pad] = self.done
        self.toks = [np.flatnonzero(row >= 0) for row in self.table]
        self.flag = self._flags(tokenizer, vmap, q0, inside) if length else None
        if self.flag is None:
            length = None          # the pattern does not tell where quotes are: the checks count
        elif not inside and length[0]:   # a nullable string's null is no string: it meets min_length
            nulls = [i for b, ids in vmap.items() if b[:1] == b"n" for i in ids if i < vocab_size]
            self.starts = self.starts.copy()
            self.starts[0, nulls] = length[0]   # (outside the quotes, only null's first token starts with n)
        self.reach = [int(self.starts[f, toks].max(initial=0)) for f, toks in zip(self.flag, self.toks)] \
            if length else [0] * n   # most characters one token out of q writes
        self.lo, self.hi = length or (0, None)
        self.counted = length is not None   # (max_length 0 counts in one column too: a character is too long)
        self.width = 1 if length is None else (self.hi if self.hi is not None else self.lo) + 1
        self.initial = q0 * self.width
        self.final = base_final[:, None] & (np.arange(self.width) >= self.lo)
        self.dist = self._distances()
        dead = np.flatnonzero((self.dist[:, :self.width] >= _FAR).all(axis=1))
        if len(dead):      # states no value can be finished from (e.g. after a real 0x01 token)
            self.table[np.isin(self.table, dead)] = DEAD
            self.toks = [np.flatnonzero(row >= 0) for row in self.table]
        self.cache: dict = {}
        self.masks: dict = {}      # (state, remaining, allow empty) -> a mask of `cache`

    def _flags(self, tokenizer, vmap: dict, q0: int, inside: bool) -> np.ndarray | None:
        """The entry flag (inside quotes, after a backslash) of each base state, None if ambiguous."""
        self.starts, exits = unit_starts(tokenizer, vmap, self.vocab_size)
        flag, todo = np.full(len(self.table), -1), [q0]
        flag[q0] = 2 * inside
        while todo:
            q = todo.pop()
            toks = self.toks[q][self.toks[q] != self.pad]
            for t, f in np.unique(np.stack([self.table[q, toks], exits[flag[q], toks]]), axis=1).T:
                if flag[t] < 0:
                    flag[t] = f
                    todo.append(t)
                elif flag[t] != f:
                    return None
        return np.maximum(flag, 0)

    def step(self, q: int, c: int, toks: np.ndarray):
        """Targets (q', c') of `toks` out of (q, c); c' == width means too long."""
        if not self.counted:
            return self.table[q, toks], np.zeros(np.shape(toks), np.int64)
        c2 = c + self.starts[self.flag[q], toks]
        return self.table[q, toks], np.minimum(c2, self.width - (self.hi is None))

    def _distances(self) -> np.ndarray:
        """Fewest tokens from each (q, c) to a final state (column `width`: too long, never)."""
        w = self.width
        dist = np.hstack([np.where(self.final, 0, _FAR), np.full((len(self.final), 1), _FAR)])
        moves = []         # per q: the distinct (q', characters) its tokens lead to
        for q, toks in enumerate(self.toks):
            k = self.starts[self.flag[q], toks] if self.counted else np.zeros(len(toks), np.int64)
            t, k = np.unique(np.stack([self.table[q, toks], k]), axis=1)
            moves.append((t[:, None], k[:, None] + np.arange(w)))
        # sweep the states in the order a search back from the final ones meets them: a chain's
        # distances then settle in one sweep (in number order, a 5,000-state chain took 5,000)
        order, before = list(np.flatnonzero(self.final.any(axis=1))), [[] for _ in moves]
        for q, (t, _) in enumerate(moves):
            for target in np.unique(t):
                before[target].append(q)
        seen = set(order)
        for q in order:    # (order grows as it is walked)
            for p in before[q]:
                if p not in seen:
                    seen.add(p)
                    order.append(p)
        changed = True
        while changed:     # until nothing changes: the same distances in any order
            changed = False
            for q in order:
                t, c2 = moves[q]
                if len(t):
                    c2 = np.minimum(c2, w - (self.hi is None))
                    best = dist[t, c2].min(axis=0) + 1
                    if (best < dist[q, :w]).any():
                        dist[q, :w] = np.minimum(dist[q, :w], best)
                        changed = True
        return dist

    def rows(self, state: int, empty: bool) -> tuple[tuple, np.ndarray, np.ndarray]:
        """(key, order, cuts) of a state: the tokens allowed with r positions left are
        order[:cuts[r-1]]. States that see the same distances ahead share one entry."""
        q, c = divmod(state, self.width)
        ahead = self.dist[:, np.minimum(c + np.arange(self.reach[q] + 1), self.width - (self.hi is None))]
        key = (q, ahead.tobytes(), empty)
        if key not in self.cache:
            if len(self.cache) > 4096:
                self.cache.clear()
            toks = self.toks[q]
            t, c2 = self.step(q, c, toks)
            need = np.where(t >= 0, self.dist[t, c2], _FAR)
            if empty:      # an empty (absent) slot: pad straight from the initial state
                toks, need = np.append(toks, self.pad), np.append(np.where(toks == self.pad, _FAR, need), 0)
            ok = np.flatnonzero(need < _FAR)
            need = need[ok].astype(np.int16 if need[ok].max(initial=0) < 2**15 else np.int64)
            by = np.argsort(need, kind="stable")      # radix sort: distances are small ints
            cuts = np.searchsorted(need[by], np.arange(int(need.max(initial=0)) + 1), side="right")
            self.cache[key] = (toks[ok][by], cuts)
        return (key, *self.cache[key])


def _transitions(patterns: tuple[str, ...], vocabulary, path: str, one: bool = False) -> tuple[dict, int]:
    """({state: {token: state}}, initial state) of the token DFA of all `patterns` at once: outlines-
    core's for one pattern; for more, the product of theirs (a state per tuple of their states that
    the value can reach; a token leaves it where every pattern takes it). With `one`, the DFA of
    texts the first pattern matches and at most one of the others (a token leaves where the first
    takes it, the others that cannot left behind, and the value may end where the first can and
    at most one of the others); _Untold past PRODUCT transitions."""
    from outlines_core import Index
    indexes = []
    for pattern in patterns:
        try:
            indexes.append(Index(f"(?:{pattern})\\x01", vocabulary))
        except (ValueError, RuntimeError) as e:
            raise SchemaError(path, f"pattern {pattern!r} cannot be compiled over this vocabulary ({e}); "
                                    "simplify the pattern") from None
    if len(indexes) == 1:
        return indexes[0].get_transitions(), indexes[0].get_initial_state()
    tables = [index.get_transitions() for index in indexes]
    start = tuple(index.get_initial_state() for index in indexes)
    number, todo, trans, work = {start: 0}, [start], {}, 0
    while todo:
        state = todo.pop()
        rows = [table.get(q, {}) for table, q in zip(tables, state)]
        row = {}
        for token in rows[0] if one else set(rows[0]).intersection(*rows[1:]):
            if one and token == END and sum(END in r for r in rows[1:]) > 1:
                continue
            target = tuple(r.get(token, DEAD) for r in rows)
            if target not in number:
                number[target] = len(number)
                todo.append(target)
            row[token] = number[target]
        trans[number[state]] = row
        work += len(row)
        if one and work > PRODUCT:
            raise _Untold
    return trans, 0


def _tables(slot, tokenizer, vocab_size: int, pad: int, mask: int) -> _Tables:
    """The tables of a slot's patterns, shared by every slot with the same patterns and length."""
    cache = per_tokenizer(tokenizer)
    patterns = (slot.pattern,) + (slot.one_of or ((slot.also,) if slot.also is not None else ()))
    key = (patterns, slot.length, slot.json_kind == "string", vocab_size, pad, mask)
    if key not in cache:
        try:
            cache[key] = _Tables(patterns, tokenizer, vocab_size, slot.path, pad, mask, slot.length,
                                 slot.json_kind == "string", one=bool(slot.one_of))
        except _Untold:   # the final check alone tells the members apart
            cache[key] = _tables(replace(slot, one_of=()), tokenizer, vocab_size, pad, mask)
    return cache[key]


class SlotAutomaton:
    """A regex slot: its token automaton bound to its budget and checks.

    States are ints; the decoder keeps one per slot, from `initial`, advancing with
    `next` as it commits tokens left to right. `allow_empty=True` (the slot's group
    may be absent) also allows pad from the initial state: an empty slot.
    """

    def __init__(self, slot, tables: _Tables):
        self.slot, self.budget, self._t = slot, slot.budget, tables
        self.pad_id, self.initial, self.vocab_size = tables.pad, tables.initial, tables.vocab_size

    def allowed(self, state: int, remaining: int, *, allow_empty: bool = False) -> np.ndarray:
        """Token ids (int64) allowed at `state` with `remaining` positions left, this one included."""
        if state < 0 or remaining < 1:
            return np.zeros(0, np.int64)
        _, order, cuts = self._t.rows(state, allow_empty and state == self.initial)
        return order[:cuts[min(remaining, len(cuts)) - 1]] if len(cuts) else order

    def allowed_mask(self, state: int, remaining: int, *, allow_empty: bool = False) -> np.ndarray:
        """`allowed` as a read-only bool row over the vocabulary, cached per state and distance."""
        if state < 0 or remaining < 1:
            return np.zeros(self._t.vocab_size, bool)
        seen = self._t.masks   # the answer per (state, remaining), before the shared row's key is built
        if (state, remaining, allow_empty) in seen:
            return seen[state, remaining, allow_empty]
        key, _, cuts = self._t.rows(state, allow_empty and state == self.initial)
        key = (key, min(remaining, len(cuts)))
        mask = self._t.cache.get(key)
        if mask is None:
            mask = np.zeros(self._t.vocab_size, bool)
            mask[self.allowed(state, remaining, allow_empty=allow_empty)] = True
            mask.setflags(write=False)
            self._t.cache[key] = mask
        if len(seen) > 65536:
            seen.clear()
        seen[state, remaining, allow_empty] = mask
        return mask

    def next(self, state: int, token: int) -> int:
        """The state after `token`, or DEAD. Pad from the initial state always gives an empty slot."""
        t = self._t
        if state < 0 or not 0 <= token < t.vocab_size:
            return DEAD
        q, c = divmod(state, t.width)
        if token == self.pad_id and state == self.initial:
            return t.done * t.width
        q2 = int(t.table[q, token])     # _Tables.step for one token, without arrays
        if q2 < 0 or not t.counted:
            return DEAD if q2 < 0 else q2
        c2 = min(c + int(t.starts[t.flag[q], token]), t.width - (t.hi is None))
        return DEAD if c2 >= t.width else q2 * t.width + c2

    def is_final(self, state: int) -> bool:
        return state >= 0 and bool(self._t.final.flat[state])

    def min_tokens(self, state: int) -> int:
        """Fewest tokens from `state` to a complete value (a huge number if none)."""
        return int(self._t.dist[divmod(state, self._t.width)]) if state >= 0 else _FAR

    def accepts(self, token_ids, *, allow_empty: bool = False) -> bool:
        """Whether `token_ids` (value tokens, then pads, at most the budget) fill the slot."""
        ids = list(token_ids)
        if len(ids) > self.budget:
            return False
        if all(t == self.pad_id for t in ids):
            return allow_empty or self.is_final(self.initial)
        state = self.initial
        for t in ids:
            state = self.next(state, t)
        return self.is_final(state)

    def violation(self, value) -> str | None:
        """Why a decoded value breaks a check no regex expresses (numeric bounds), or None."""
        return self.slot.violation(value)


class ChoiceSet:
    """A choice slot: candidate texts as token ids padded to the budget, scored whole.

    `ids` is (n, budget) int64; row i spells `texts[i]` then pads. With
    `allow_empty=True` an all-pad row (the absent slot) is added last.
    """

    def __init__(self, slot, pad_id: int):
        self.slot, self.budget, self.pad_id, self.texts = slot, slot.budget, pad_id, slot.choices
        self.ids = np.full((len(slot.choices), slot.budget), pad_id, np.int64)
        for row, toks in zip(self.ids, slot.choice_ids):
            row[:len(toks)] = toks
        self.lengths = np.array([len(t) for t in slot.choice_ids])

    def candidates(self, *, allow_empty: bool = False) -> np.ndarray:
        if not allow_empty:
            return self.ids
        return np.vstack([self.ids, np.full((1, self.budget), self.pad_id, np.int64)])

    def score(self, logprobs: np.ndarray, *, allow_empty: bool = False) -> np.ndarray:
        """Sum over the slot's positions of each candidate's log-probabilities.

        `logprobs` is (budget, V) for the slot's positions; returns (n,) (n+1 with the empty row).
        """
        rows = self.candidates(allow_empty=allow_empty)
        return np.asarray(logprobs)[np.arange(self.budget), rows].sum(axis=1)

    def index(self, token_ids) -> int | None:
        """Which candidate `token_ids` spell (pads implied), or None."""
        ids = list(token_ids) + [self.pad_id] * (self.budget - len(token_ids))
        hits = np.flatnonzero((self.ids == np.asarray(ids)).all(axis=1))
        return int(hits[0]) if len(hits) else None

    def accepts(self, token_ids, *, allow_empty: bool = False) -> bool:
        if len(token_ids) > self.budget:
            return False
        empty = all(t == self.pad_id for t in token_ids)
        return self.index(token_ids) is not None or (allow_empty and empty)

    def value(self, i: int):
        """The JSON value of candidate i."""
        return self.slot.value(self.texts[i])

    def violation(self, value) -> str | None:
        return self.slot.violation(value)


def compile_slot(slot, tokenizer, *, vocab_size: int | None = None, pad_id: int | None = None,
                 mask_id: int | None = None) -> SlotAutomaton | ChoiceSet:
    """The automaton or candidate set of one slot; SchemaError if no value fits its budget.

    Pad and mask default to the tokenizer's; `vocab_size` widens rows to the model's logits.
    """
    pad = tokenizer.pad_id if pad_id is None else pad_id
    if slot.kind == "choice":
        return ChoiceSet(slot, pad)
    mask = tokenizer.mask_id if mask_id is None else mask_id
    auto = SlotAutomaton(slot, _tables(slot, tokenizer, max(vocab_size or 0, tokenizer.vocab_size), pad, mask))
    need = auto.min_tokens(auto.initial)
    if need > slot.budget:
        what = "no value can be written" if need >= _FAR else f"the shortest value needs {need} tokens"
        raise SchemaError(slot.path, f"{what} but the budget is {slot.budget}; raise "
                                     f"Field(json_schema_extra={{'max_tokens': {need}}}) or relax the constraint")
    return auto


def shortest(slot, tokenizer, vocab_size: int | None, pad_id: int, mask_id: int) -> int | None:
    """Tokens of the shortest value a regex slot's pattern accepts; None if it accepts none."""
    tables = _tables(slot, tokenizer, max(vocab_size or 0, tokenizer.vocab_size), pad_id, mask_id)
    need = SlotAutomaton(slot, tables).min_tokens(tables.initial)
    return None if need >= _FAR else need


def compile_canvas(canvas, tokenizer=None, *, vocab_size: int | None = None
                   ) -> list[SlotAutomaton | ChoiceSet]:
    """One automaton or candidate set per slot, aligned with `canvas.slots`, cached per canvas.

    `vocab_size` widens the rows to the model's logits when they outnumber the tokenizer's ids.
    """
    tokenizer = tokenizer or canvas.tokenizer
    per_canvas = _COMPILED.setdefault(canvas, {})
    key = (id(tokenizer), vocab_size)
    if key not in per_canvas:
        per_canvas[key] = [compile_slot(s, tokenizer, vocab_size=vocab_size, pad_id=canvas.pad_id,
                                        mask_id=canvas.mask_id) for s in canvas.slots]
    return per_canvas[key]


def slot_value(canvas, ids, slot: int):
    """The decoded value of one filled slot and the first check it fails: (value, reason or None).

    Raises ExtractionError if the slot's text is not a JSON value of its kind.
    """
    s = canvas.slots[slot]
    value = s.value(canvas.slot_text(ids, slot))
    return value, s.violation(value)
