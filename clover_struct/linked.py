"""Linked judgments: up to 8 related bool/enum answers decided in one generation.

`decide(text, Judgments, rules=[...])` lays the answers out as a canvas of choice
slots, runs one forward over the whole canvas, scores every candidate of every
slot from it, and returns the assignment with the highest joint score (the sum
of the chosen candidates' log-probabilities) among those that satisfy every
rule — so the answers never contradict each other. Answering each question on
its own (`joint=False`) is the baseline that can.

Rules name fields, optionally with a value (`"action=reroute"`; a bare name
means True): `implies(a, b)`, `excludes(a, b)`, `exactly_one(a, b, ...)`, or
`predicate(fn)` over the record. A model class may carry its rules as a
`rules: ClassVar[list]`. Facts code computes better (say, from shapely) go in
as `known` values: written into the canvas the model reads, and fixed in the
answer; the rest is decided from them and consistently with them.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from .api import encode_prompt, prepare
from .decoder import Trace, score_choices
from .errors import ExtractionError, SchemaError, UsageError

MAX_LINKED = 8
MAX_ASSIGNMENTS = 1 << 16


@dataclass(frozen=True)
class Rule:
    text: str
    holds: Callable[[Any], bool]
    on_instance: bool = False       # holds() takes the validated instance, not the JSON data


def _test(term: str) -> Callable[[dict], bool]:
    field, _, value = term.partition("=")
    return (lambda r: r.get(field) is True) if not value else (lambda r: str(r.get(field)) == value)


def implies(a: str, b: str) -> Rule:
    ta, tb = _test(a), _test(b)
    return Rule(f"{a} implies {b}", lambda r: not ta(r) or tb(r))


def excludes(a: str, b: str) -> Rule:
    ta, tb = _test(a), _test(b)
    return Rule(f"{a} excludes {b}", lambda r: not (ta(r) and tb(r)))


def exactly_one(*terms: str) -> Rule:
    tests = [_test(t) for t in terms]
    return Rule(f"exactly one of {', '.join(terms)}", lambda r: sum(t(r) for t in tests) == 1)


def predicate(fn: Callable[[Any], bool], text: str | None = None) -> Rule:
    """A rule over the record: `fn` receives the validated instance (the dict for a JSON Schema)."""
    return Rule(text or getattr(fn, "__name__", "predicate"), lambda r: bool(fn(r)), on_instance=True)


def decide(text: str, schema, *, model=None, rules: list[Rule] | None = None, known: dict | None = None,
           joint: bool = True, trace: bool = False):
    """The best assignment of `schema`'s bool/enum fields that satisfies every rule."""
    model, canvas, sets = prepare(schema, model)
    slots = canvas.slots
    bad = [s.path for s in slots if s.kind != "choice" or s.group is not None]
    if bad:
        raise SchemaError(bad[0], "judgments are bool, Literal or Enum fields at the top level; "
                                  "extract other values with extract()")
    if len(slots) > MAX_LINKED:
        raise SchemaError("", f"{len(slots)} linked fields; decide answers at most {MAX_LINKED} together")
    if math.prod(len(s.choices) for s in slots) > MAX_ASSIGNMENTS:
        raise SchemaError("", f"the fields allow more than {MAX_ASSIGNMENTS} joint answers; use fewer values")
    if rules is None:
        rules = list(getattr(schema, "rules", []))
    rules = [r if isinstance(r, Rule) else predicate(r) for r in rules]
    known = known or {}
    unknown = set(known) - {s.path for s in slots}
    if unknown:
        raise UsageError(f"known: no field {', '.join(sorted(unknown))}; the fields are "
                         f"{', '.join(s.path for s in slots)}")

    values = [[choice.value(i) for i in range(len(choice.texts))] for choice in sets]
    given = {}  # slot index -> the known value's candidate index
    for i, s in enumerate(slots):
        if s.path in known:
            want = known[s.path].value if hasattr(known[s.path], "value") else known[s.path]
            if want not in values[i]:
                raise UsageError(f"known: {want!r} is not a value of `{s.path}`; give one of {values[i]}")
            given[i] = values[i].index(want)
    ids = list(canvas.ids)   # the known values written in, for the model to read; the rest masked
    for i, k in given.items():
        ids[slots[i].start:slots[i].end] = sets[i].ids[k].tolist()

    scored, passes = score_choices(model, encode_prompt(model, text, canvas), canvas, sets, ids)
    options = []  # per slot: [(value, score)]
    for i, scores in enumerate(scored):
        scores = scores.tolist()
        if i in given:
            scores = [0.0 if k == given[i] else float("-inf") for k in range(len(scores))]
        options.append(list(zip(values[i], map(float, scores))))

    def record(assignment):
        return {s.path: value for s, (value, _) in zip(slots, assignment)}

    def satisfies(assignment):
        data = record(assignment)
        instance = canvas.model.model_validate(data) if canvas.model else data
        return all(r.holds(instance if r.on_instance else data) for r in rules)

    if joint:
        ranked = sorted(itertools.product(*options), key=lambda a: -sum(score for _, score in a))
        best = next((a for a in ranked if sum(sc for _, sc in a) > float("-inf")
                     and satisfies(a)), None)
        if best is None:
            raise ExtractionError("", "no assignment satisfies every rule (" + "; ".join(r.text for r in rules)
                                  + "); check the rules and the known values")
    else:
        best = [max(o, key=lambda vs: vs[1]) for o in options]
    value = canvas.model.model_validate(record(best)) if canvas.model else record(best)
    if not trace:
        return value
    t = Trace(forward_passes=passes, steps=1, tokens_committed=sum(s.budget for s in slots), tokens_per_step=[])
    t.confidence = {s.path: float(torch.tensor([sc for _, sc in o]).softmax(0).max()) for s, o in zip(slots, options)}
    t.settled_at = {s.path: 1 for s in slots}
    return value, t
