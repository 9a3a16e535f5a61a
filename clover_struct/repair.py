"""Repair: a decoded canvas to a valid instance, or an ExtractionError that names the field.

A value that fails a check no regular expression expresses (numeric bounds, a calendar
date, a pydantic validator) is replaced by the slot's next-best complete value the model
ranked (`alternatives`, over the top tokens the decoder remembered per position; a greedy
completion where that search runs out), then by the nearest valid value, and for a JSON
Schema's whole value by the emptiest value of a type; a value breaking a pattern the layout
could not place (then/else, allOf) is searched again among the values matching it. A check
across fields (a model validator, a JSON Schema's rule on an object or a list), and a field's
check that none of its own next-best values passes (it may read a sibling), is met by the
single change the model finds least unlikely (for a JSON Schema, leaving out an optional part
is one: a key, a list item, a map entry), as is a JSON Schema's value no fallback mends; where
no single change will do, a JSON Schema's failing optional part is left out and the record
checked again. A list's repeated optional items are dropped for uniqueItems, and its last
items that match `contains` for maxContains, and a string or list inside a whole value (whose
regex counts neither past a few) is cut to its maxLength or maxItems. Knows nothing of models
or torch: a Decoded in, a value out.
"""

from __future__ import annotations

import heapq
import math
import re
from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np

from .decoder import Decoded
from .errors import ExtractionError, SchemaError
from .layout import ValidatorFailed, tagged
from .validation import path_of
from .verbatim import uncopied, widen

PLAINEST = ("{}", "[]", '""', "0", "false", "null")   # the emptiest value of each JSON type
UNRANKED = 4.0  # log-prob penalty, below the lowest remembered, of a token outside the top ones


def _slot_of(canvas, path: str) -> int | None:
    """The slot of a field path (`area<circle>.radius`); inside a one-slot union, the union's slot."""
    return next((i for i, s in enumerate(canvas.slots)
                 if path == s.path or s.union and path.startswith(s.path + ".")), None)


def _nearest(slot, value):
    """The valid value closest to `value`: the last resort for a bounded number, or a
    calendar date the regex lets through (February 29 of a common year, year 0000)."""
    if slot.union and isinstance(value, dict):   # a one-slot union: mend each field that fails
        fixed = dict(value)
        for key, sub in slot.fields(value):
            if sub.violation(value.get(key)):
                fixed[key] = _nearest(sub, value.get(key))
                if fixed[key] is None:   # (null breaks no check: nothing mends this field)
                    return None
        return fixed
    if isinstance(value, str):
        fixed = re.sub(r"^([0-9]{4})-02-29", r"\1-02-28", re.sub(r"^0000-", "0001-", value))
        return fixed if fixed != value else None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    whole = "\\." not in (slot.pattern or "")   # a float's pattern has a fraction, of up to 6 digits
    return _nearest_number(slot.checks, value, whole)


def _nearest_number(checks, value, whole: bool):
    """The number nearest `value` that keeps the bounds and multipleOf of `checks`, counted exactly
    (a bound of 1e20 has no float above it one millionth away): a whole one, or one of six
    decimals at most; None where none is."""
    exact = lambda x: Fraction(str(x)) if isinstance(x, float) else Fraction(x)   # 0.1 as written
    grid = Fraction(1) if whole else Fraction(1, 10**6)
    for c in checks:
        if c.op == "multiple_of":   # the least common multiple of the two steps
            step = exact(c.bound)
            grid = Fraction(math.lcm(grid.numerator, step.numerator), math.gcd(grid.denominator, step.denominator))
    low, high = -math.inf, math.inf   # in steps of the grid
    for c in checks:
        if c.op in ("ge", "gt", "le", "lt"):
            k = exact(c.bound) / grid
            if c.op[0] == "g":
                low = max(low, math.floor(k) + 1 if c.op == "gt" or k != math.floor(k) else k)
            else:
                high = min(high, math.ceil(k) - 1 if c.op == "lt" or k != math.ceil(k) else k)
    if low > high:
        return None
    k = min(max(round(exact(value) / grid), low), high)
    return int(k * grid) if whole else float(k * grid)


def _fallbacks(d: Decoded, i):
    """Next-best complete values of slot i: the model's (searched best first, then completed
    greedily), then the nearest valid one, then null where the field may be null; for a JSON
    Schema's whole value (a union, any value), last the plainest values of each JSON type."""
    yield from (ids for _, ids in alternatives(d, i))
    if (ids := _greedy(d, i)) is not None:
        yield ids
    canvas, s = d.canvas, d.canvas.slots[i]
    try:
        nearest = [_nearest(s, s.value(canvas.slot_text(d.ids, i)))]
    except ExtractionError:
        nearest = []
    plainest = PLAINEST if canvas.model is None and s.json_kind == "value" and not s.union else ()
    null = ["null"] if s.nullable and s.json_kind == "value" else []   # the text may not state it
    for text in [s.render(v) for v in nearest if v is not None] + null + list(plainest):
        ids = canvas.tokenizer.encode(text)
        if d.automata[i].accepts(ids):
            yield ids + [canvas.pad_id] * (s.budget - len(ids))


def finish(d: Decoded) -> Any:
    """Validate a decoded canvas, falling back to next-best values for fields that fail."""
    canvas = d.canvas
    tried: set[int] = set()
    widen(d)
    for _ in range(2 * len(canvas.slots) + len(canvas.groups) + 1):   # a field mended, or a part dropped
        try:
            for i, s in enumerate(canvas.slots):
                if s.checked and not canvas.is_empty(d.ids, i):
                    why = s.violation(s.value(canvas.slot_text(d.ids, i)))
                    if why:
                        raise ExtractionError(s.path, why)
            _check_copies(d, d.ids)   # the model copies; it never makes a value up
            return canvas.validate(d.ids, d.text)
        except ExtractionError as e:
            i = _slot_of(canvas, e.path)
            keyword = getattr(e, "keyword", None)
            if keyword == "uniqueItems" and (ids := _kept(d, _without_repeats(d, e.path))) \
                    or keyword == "maxContains" and (ids := _kept(d, _fewer_matching(d, e.path, e.rule))):
                d.ids = ids   # a list's repeated or extra matching optional items: dropped, then check again
                continue
            if keyword in ("maxLength", "maxItems") and (ids := _kept(d, _shortened(d, e.where, e.rule))):
                d.ids = ids   # a too long string or list inside a whole value: cut, as a number is clamped
                continue
            entry = canvas.slots[i].group if i is not None and canvas.slots[i].path.endswith(":key") else None
            if entry is not None and not canvas.groups[entry].required \
                    and (ids := _kept(d, _emptied(canvas, d.ids, entry))):
                d.ids = ids   # an optional map entry whose key fails (repeats): dropped
                continue
            error = e
            if keyword == "uniqueItems" and _known_repeat(d, e.path):
                raise ExtractionError(e.path, f"{e.reason}; the items that repeat are values given in known=, which "
                                              "the record keeps: give distinct ones") from None
            if i in d.known:
                error = ExtractionError(e.path, f"{e.reason}; it is the value given in known=, which the record "
                                                "keeps: give one the schema accepts")
            elif i is not None and canvas.slots[i].kind != "choice":
                if i not in tried:   # (its mended value failing too: the same advice)
                    tried.add(i)
                    narrow = _narrowed(d, i, e.rule) if keyword == "pattern" else None
                    if (trial := _mended(narrow or d, i)) is not None:
                        d.ids = trial
                        continue
                advice = ("the text may not state it: make the field nullable or optional, or relax its check"
                          if e.path else "the text may hold no such value: relax the schema")
                if any(c.op == "pattern" for c in canvas.slots[i].checks):   # patterns.regular: held loosely
                    advice += ("; its pattern has look-around, a back-reference or a word boundary, which a "
                               "grammar holds only loosely: simplify it")
                error = ExtractionError(e.path, f"{e.reason}, and no other value the model rated likely passes; "
                                                f"{advice}")
            try:   # a check across fields, one that reads a sibling (info.data), or a JSON Schema's value:
                return _repair_record(d, error)   # any single change (an optional part left out)
            except ExtractionError:
                if i is not None and canvas.model is not None:
                    if (ids := _null_beside(d, i)) is not None:
                        d.ids = ids   # both unstated: check again
                        continue
                    raise error from None
                part = _failing_part(canvas, d.ids, e.path) if canvas.model is None else None
                if isinstance(e, ValidatorFailed):   # the model's code failing: no advice on the text
                    raise e from None
                if part is None and i is None:   # a check across fields
                    raise ExtractionError(e.path, f"{e.reason}, and no single change the model rated likely "
                                                  "passes; the text may not state what it checks: make the fields "
                                                  "it reads optional, or relax the check") from None
                if part is None or not (ids := _kept(d, _emptied(canvas, d.ids, part))):
                    raise error from None
                d.ids = ids   # more than one part fails: this one left out, then check again
    raise ExtractionError("", "could not produce a valid record")


def failed_variants(d: Decoded, decoded: list[int], outcome) -> dict[int, tuple[int, ...]]:
    """The union variants the model chose that its record could not be made valid with: per
    tag slot, the candidate as decoded (`decoded`: the ids before finish mended them). Either
    finishing changed the tag (the one change that made the record valid: null for a polygon
    of fewer than three distinct vertices) or the field that fails (`outcome`, finish's record
    or ExtractionError) lies inside the variant."""
    canvas = d.canvas

    def tag(ids, i) -> tuple[int, ...]:
        return tuple(ids[canvas.slots[i].start:canvas.slots[i].end])

    variants, keys = [g for g in canvas.groups if g.kind == "variant"], _key_slots(canvas)
    if isinstance(outcome, ExtractionError):
        failed = {g.selector for g in variants if canvas.slot_text(decoded, g.selector) in g.tags
                  and _within(outcome.path, (g.path, _data_path(canvas, d.ids, g.path, keys)))}
    else:
        failed = {g.selector for g in variants if tag(d.ids, g.selector) != tag(decoded, g.selector)}
    return {i: tag(decoded, i) for i in failed}


def _within(path: str, forms: tuple[str, ...]) -> bool:
    """Whether an error's path lies in a part of the record whose path is one of `forms`: as a
    slot names it (`area<circle>.radius`), or as a JSON Schema's final check (`area.radius`)."""
    return any(path == f or path.startswith((f + ".", f + "[")) for f in forms)


def _key_slots(canvas) -> dict[str, int]:
    """The map entries' key slots, by path."""
    return {s.path: i for i, s in enumerate(canvas.slots) if s.path.endswith(":key")}


def _failing_part(canvas, ids, path: str) -> int | None:
    """The innermost optional part present (a key, a list item, a map entry) that holds the value
    at `path` (as the final check names it: a map entry by its key), or None."""
    parts, keys = [], _key_slots(canvas)
    for g in canvas.groups:
        if g.kind == "variant" or g.required or not canvas.is_present(ids, g.index):
            continue
        where = _data_path(canvas, ids, g.path, keys)
        if path == where or path.startswith((where + ".", where + "[")):
            parts.append((len(where), g.index))
    return max(parts)[1] if parts else None


def _data_path(canvas, ids, path: str, keys: dict[str, int]) -> str:
    """A canvas path as the final check names the value there: each map entry (`{k}`) by the key
    written in it, each union member's tag left out (`jobs{0}<docker>.steps` -> `jobs.build.steps`).
    keys: the key slots by path."""
    cuts = [(len(g.path) - len(tagged("", g.tags)), len(g.path), "") for g in canvas.groups
            if g.kind == "variant" and path.startswith(g.path) and path[len(g.path):][:1] in ("", ".", "[", "{", "<")]
    for entry in re.finditer(r"\{\d+\}", path):
        if (key := keys.get(path[:entry.end()] + ":key")) is not None \
                and not any(a <= entry.start() < b for a, b, _ in cuts):   # (not a property `{0}`, nor a tag's)
            cuts.append((entry.start(), entry.end(), ("." if entry.start() else "") + canvas.slot_text(ids, key)))
    out, done = "", 0
    for start, end, text in sorted(cuts):
        out, done = out + path[done:start] + text, end
    return out + path[done:]


def _shortened(d: Decoded, where: tuple, most: int) -> list[int] | None:
    """The ids with the string or list at `where` (keys and indices), inside a whole-value slot,
    cut to its first `most` characters or items (a whole value's regex counts neither past a few),
    or None where no such slot holds it or the shorter value does not fit the slot."""
    canvas = d.canvas
    keys = _key_slots(canvas)
    for i, s in enumerate(canvas.slots):
        if s.json_kind != "value" or s.union or s.kind == "choice" or canvas.is_empty(d.ids, i):
            continue
        here = _data_path(canvas, d.ids, s.path, keys)
        inner = next((where[k:] for k in range(len(where) + 1) if path_of(where[:k]) == here), None)
        if inner is None:
            continue
        top = {"": s.value(canvas.slot_text(d.ids, i))}
        holder, at = top, ""
        for part in inner:   # the container holding the value, and its key there
            holder, at = holder[at], part
        holder[at] = holder[at][:most]
        ids = canvas.tokenizer.encode(s.render(top[""]))
        if len(ids) <= s.budget and d.automata[i].accepts(ids):
            return d.ids[:s.start] + ids + [canvas.pad_id] * (s.budget - len(ids)) + d.ids[s.end:]
    return None


def _copied(d: Decoded, i) -> bool:
    """Whether slot i's value is a piece of the text, or null there (a verbatim slot that kept
    to the text): then so must every value put in its place be."""
    a = d.automata[i]
    if not hasattr(a, "left_text"):
        return False
    state = a.initial
    for t in d.ids[d.canvas.slots[i].start:d.canvas.slots[i].end]:
        state = a.next(state, t)
        if a.left_text(state):
            return False
    return True


def _greedy(d: Decoded, i) -> list[int] | None:
    """Slot i's value written token by token, each the model's best-ranked token there that
    keeps a value reachable, else the one nearest an end: a value the automaton accepts where the
    search of `alternatives` runs out (a long value made of tokens the model never ranked)."""
    s, a, pad = d.canvas.slots[i], d.automata[i], d.canvas.pad_id
    if s.kind == "choice":
        return None
    seq, state, copied = [], a.initial, _copied(d, i)
    while len(seq) < s.budget and (not seq or seq[-1] != pad):
        allowed = a.allowed(state, s.budget - len(seq))
        if not len(allowed):
            return None
        ranked, _ = _scores(d, s.start + len(seq))
        seq.append(max((t for t in allowed.tolist() if t in ranked), key=ranked.get, default=int(allowed[0])))
        state = a.next(state, seq[-1])
        if copied and a.left_text(state):
            return None
    return seq + [pad] * (s.budget - len(seq))


def _mended(d: Decoded, i) -> list[int] | None:
    """The ids with slot i's first fallback value that passes its checks, or None."""
    canvas, s = d.canvas, d.canvas.slots[i]
    for alt in _fallbacks(d, i):
        trial = d.ids[:s.start] + alt + d.ids[s.end:]
        try:
            if s.violation(s.value(canvas.slot_text(trial, i))):
                continue
            _validated(d, trial)   # also the schema's own checks of this field, and a copy's
        except ExtractionError as other:
            if _slot_of(canvas, other.path) == i:
                continue   # still this field; another field's failure is the next round's
        return trial
    return None


def _narrowed(d: Decoded, i, pattern) -> Decoded | None:
    """`d` with slot i's automaton narrowed to the values that match `pattern` too (a rule the
    layout could not place on the slot: a then/else or allOf pattern), so that its fallbacks are
    searched among those; None where that cannot be (not a plain string slot, a pattern no
    automaton holds)."""
    from .constraints import SlotAutomaton, compile_slot
    from .patterns import content_pattern, regular

    s, auto = d.canvas.slots[i], d.automata[i]
    if not (isinstance(auto, SlotAutomaton) and s.json_kind == "string" and not s.verbatim and s.also is None
            and isinstance(pattern, str) and regular(pattern)):
        return None
    try:
        auto = compile_slot(replace(s, also=content_pattern(pattern, s.path)), d.canvas.tokenizer,
                            vocab_size=auto.vocab_size, pad_id=d.canvas.pad_id, mask_id=d.canvas.mask_id)
    except SchemaError:
        return None
    return replace(d, automata=[*d.automata[:i], auto, *d.automata[i + 1:]])


def _kept(d: Decoded, ids: list[int] | None) -> list[int] | None:
    """`ids` where they leave the known slots (the values the caller gave) as they are, else None."""
    slots = [d.canvas.slots[i] for i in d.known]
    return ids if ids is not None and all(ids[s.start:s.end] == d.ids[s.start:s.end] for s in slots) else None


def _emptied(canvas, ids, group) -> list[int]:
    """`ids` with every slot of `group` empty (the group absent)."""
    ids = list(ids)
    for i in canvas.groups[group].slots:
        s = canvas.slots[i]
        ids[s.start:s.end] = [canvas.pad_id] * (s.end - s.start)
    return ids


def _items_of(canvas, path: str) -> list:
    """The item groups of the list at `path`, in order."""
    return [g for g in canvas.groups if g.kind == "item" and re.sub(r"\[\d+\]$", "", g.path) == path]


def _item_key(canvas, ids, g) -> tuple[str, ...]:
    """What item group `g` writes, slot by slot: equal keys are repeated items."""
    return tuple(canvas.slot_text(ids, i) for i in g.slots)


def _known_repeat(d: Decoded, path: str) -> bool:
    """Whether two items of the list at `path` given whole in known= are the same."""
    keys = [_item_key(d.canvas, d.ids, g) for g in _items_of(d.canvas, path)
            if d.canvas.is_present(d.ids, g.index) and set(g.slots) <= d.known]
    return len(set(keys)) < len(keys)


def _without_repeats(d: Decoded, path: str) -> list[int] | None:
    """The ids with each item of the list at `path` that repeats an earlier one dropped if
    it is optional, else given the next-best value of one of its slots that repeats none
    and passes the slot's checks; None if nothing changed. Slots given in known= stay."""
    canvas, ids, seen = d.canvas, d.ids, set()
    for g in _items_of(canvas, path):
        if not canvas.is_present(ids, g.index):
            continue
        key = list(_item_key(canvas, ids, g))
        if tuple(key) in seen and not g.required and not d.known & set(g.slots):
            ids = _emptied(canvas, ids, g.index)
            continue
        for k, i in enumerate(g.slots if tuple(key) in seen else ()):
            s = canvas.slots[i]
            for _, alt in alternatives(d, i) if i not in d.known else ():
                trial = ids[:s.start] + alt + ids[s.end:]
                text = canvas.slot_text(trial, i)
                try:
                    if (*key[:k], text, *key[k + 1:]) in seen or s.violation(s.value(text)):
                        continue
                except ExtractionError:
                    continue
                ids, key[k] = trial, text
                break
            else:
                continue
            break
        seen.add(tuple(key))
    return ids if ids is not d.ids else None


def _fewer_matching(d: Decoded, path: str, rule) -> list[int] | None:
    """The ids with the last optional items of the list at `path` that match its `contains`
    dropped, as many as maxContains is exceeded by (rule: maxContains and the indices of the
    items that match); None where too few of those are optional."""
    most, matching = rule
    canvas = d.canvas
    items = [g for g in _items_of(canvas, path) if g.required or canvas.is_present(d.ids, g.index)]   # as parsed
    if matching[-1] >= len(items):
        return None   # a list inside one slot (a whole JSON value): no items to drop
    extra = [items[k] for k in reversed(matching) if not items[k].required][:len(matching) - most]
    if len(extra) < len(matching) - most:
        return None
    ids = d.ids
    for g in extra:
        ids = _emptied(canvas, ids, g.index)
    return ids


def _null_beside(d: Decoded, i) -> list[int] | None:
    """The ids with nullable slot i null and another nullable slot null beside it, the pair the
    model finds least unlikely that gives a valid record, else None: a check that reads two
    fields, which only their both being unstated meets (a start with no date, and an end that
    gives none)."""
    canvas = d.canvas
    null = canvas.tokenizer.encode("null")
    trial = _with_value(d, i, null)
    if trial is None:
        return None
    best, own = None, cost(d, i, trial[canvas.slots[i].start:canvas.slots[i].end])
    for j, s in enumerate(canvas.slots):
        if j == i or canvas.is_empty(d.ids, j) or (pair := _with_value(d, j, null, trial)) is None:
            continue
        change = own + cost(d, j, pair[s.start:s.end])
        if best is None or change < best[0]:
            try:
                canvas.validate(pair, d.text)
                best = (change, pair)
            except ExtractionError:
                pass
    return best and best[1]


def _with_value(d: Decoded, i, toks: list[int], ids: list[int] | None = None) -> list[int] | None:
    """`ids` (default: the decoded ones) with nullable slot i's value the tokens `toks`, where
    its automaton takes them and it is no known slot; else None."""
    s, ids = d.canvas.slots[i], d.ids if ids is None else ids
    if i in d.known or not s.nullable or len(toks) > s.budget or not d.automata[i].accepts(toks):
        return None
    return ids[:s.start] + toks + [d.canvas.pad_id] * (s.budget - len(toks)) + ids[s.end:]


def _repair_record(d: Decoded, error: ExtractionError, per_slot: int = 8, pops: int = 1024) -> Any:
    """A check across fields failed: make the single change the model finds least unlikely
    (its cost over the decoded record's) that gives a valid record, or re-raise. Candidates:
    for a JSON Schema, an optional part left out (a key, a list item, a map entry, a nullable
    object); a written slot's value made of tokens the model ranked there."""
    canvas, best = d.canvas, None
    for g in canvas.groups if canvas.model is None else ():   # (a pydantic model's repair is as it was)
        if g.kind == "variant" or g.required or not canvas.is_present(d.ids, g.index) or d.known & set(g.slots):
            continue
        trial = _emptied(canvas, d.ids, g.index)
        change = sum(cost(d, i, trial[canvas.slots[i].start:canvas.slots[i].end])
                     - cost(d, i, d.ids[canvas.slots[i].start:canvas.slots[i].end]) for i in g.slots)
        if best is None or change < best[0]:
            try:
                best = (change, trial, _validated(d, trial))
            except ExtractionError:
                pass
    for i, s in enumerate(canvas.slots):
        if canvas.is_empty(d.ids, i) or i in d.known:
            continue
        own = cost(d, i, d.ids[s.start:s.end])
        for alt_cost, alt in alternatives(d, i, limit=per_slot, pops=pops, ranked_only=True):
            if best is not None and alt_cost - own >= best[0]:
                break   # best first: nothing later in this slot can do better
            trial = d.ids[:s.start] + alt + d.ids[s.end:]
            try:
                record = _validated(d, trial)
            except ExtractionError:
                continue
            best = (alt_cost - own, trial, record)
            break
    if best is None:
        raise error
    d.ids = best[1]
    return best[2]


def _validated(d: Decoded, ids: list[int]) -> Any:
    """The record `ids` hold, validated; ExtractionError also where a verbatim value in them is
    no piece of the text (a repair's change is held to what the model copies, as its first was)."""
    record = d.canvas.validate(ids, d.text)
    _check_copies(d, ids)
    return record


def _check_copies(d: Decoded, ids: list[int]) -> None:
    """ExtractionError where a verbatim value in `ids` is no piece of the text."""
    if (stray := uncopied(replace(d, ids=ids))) is not None:
        raise ExtractionError(stray[0], f"{stray[1]} is no piece of the text, which the field copies (verbatim)")


def rescore(d: Decoded, decoded: list[int]) -> None:
    """The confidence of each field `finish` changed from `decoded`: its new value's tokens as the
    model rated them (their mean probability, a token outside its top few below the least of
    those), so a value taken after the model's first was refused is no surer than the model was."""
    pad = d.canvas.pad_id
    for s in d.canvas.slots:
        seq = d.ids[s.start:s.end]
        if seq == decoded[s.start:s.end]:
            continue
        probs = []
        for k, t in enumerate(seq[:seq.index(pad) + 1] if pad in seq else seq):
            ranked, floor = _scores(d, s.start + k)
            probs.append(math.exp(ranked.get(t, floor)))
        d.trace.confidence[s.path] = sum(probs) / len(probs)


def _scores(d: Decoded, position: int) -> tuple[dict[int, float], float]:
    """The remembered log-probs at a position, and the score of a token not among them."""
    values, ids = d.top.get(position, ([], []))
    ranked = {t: v for v, t in zip(values, ids) if math.isfinite(v)}
    return ranked, min(ranked.values(), default=0.0) - UNRANKED


def cost(d: Decoded, i, seq) -> float:
    """How unlikely the model rated `seq` as slot i's tokens (minus its summed log-probs),
    on the scale `alternatives` orders by; pads after the first count nothing."""
    total, pad = 0.0, d.canvas.pad_id
    for k, t in enumerate(seq):
        ranked, floor = _scores(d, d.canvas.slots[i].start + k)
        total -= ranked.get(t, floor)
        if t == pad:
            break
    return total


def alternatives(d: Decoded, i, limit: int = 64, pops: int = 4096, ranked_only: bool = False):
    """Other complete token sequences for slot i, best first, as (cost, tokens), each accepted
    by the slot's automaton: the fallbacks tried when the decoded value fails a check a regex
    cannot express. A token scores its remembered log-prob at that position; tokens the
    model did not rank in its top few score below all of those (UNRANKED), so every
    value the automaton accepts is reachable, likely ones first; ranked_only: only the
    tokens the model ranked, where it ranked any, and the end of the value (a much smaller search)."""
    s, a, pad = d.canvas.slots[i], d.automata[i], d.canvas.pad_id
    if s.kind == "choice":  # its other candidates
        current = d.ids[s.start:s.end]
        yield from sorted((cost(d, i, c), c) for c in a.candidates().tolist() if c != current)[:limit]
        return
    # Entries hold the state BEFORE their last token: the automaton steps only for the
    # sequences popped, not for every token pushed. A position's unranked tokens, all scored
    # alike, are one entry that hands out one of them at a time (`rest`, from `at`).
    heap = [(0.0, (), a.initial, (), 0)]
    found, copied = 0, _copied(d, i)   # a copied value's alternatives are copies too
    while heap and found < limit and pops > 0:
        total, seq, state, rest, at = heapq.heappop(heap)
        if len(rest):
            heapq.heappush(heap, (total, seq + (int(rest[at]),), state, (), 0))
            if at + 1 < len(rest):
                heapq.heappush(heap, (total, seq, state, rest, at + 1))
            continue
        pops -= 1
        k = len(seq)
        if seq:
            state = a.next(state, seq[-1])
            if copied and a.left_text(state):
                continue
        if k == s.budget or (seq and seq[-1] == pad):
            out = list(seq) + [pad] * (s.budget - k)
            if out != d.ids[s.start:s.end]:
                found += 1
                yield total, out
            continue
        ranked, floor = _scores(d, s.start + k)
        tokens = a.allowed(state, s.budget - k)
        if ranked_only and ranked:   # a position never scored keeps every token
            tokens = tokens[np.isin(tokens, [*ranked, pad])]
        known = np.isin(tokens, list(ranked))
        for t in tokens[known].tolist():
            heapq.heappush(heap, (total - ranked[t], seq + (t,), state, (), 0))
        if len(unranked := tokens[~known]):
            heapq.heappush(heap, (total - floor, seq, state, unranked, 0))
