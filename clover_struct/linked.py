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
`rules: ClassVar[list]`, which hold beside any given. Facts code computes better
(say, from shapely) go in as `known` values: written into the canvas the model
reads, and fixed in the answer; the rest is decided from them and consistently
with them.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable

import torch

from pydantic import ValidationError

from .api import check_model, default_model, fit_prompt, internal_failure, model_lock, prepare, slot_of_path
from .decoder import Trace, score_choices
from .errors import CloverError, ExtractionError, SchemaError, UsageError
from .layout import ObjectNode, model_validated
from .validation import SchemaRejects

MAX_LINKED = 8
MAX_ASSIGNMENTS = 1 << 16


@dataclass(frozen=True)
class Rule:
    text: str
    holds: Callable[[Any], bool]
    on_instance: bool = False       # holds() takes the validated instance, not the JSON data
    terms: tuple[str, ...] = ()     # the `field` or `field=value` terms it names, checked by decide


def _test(term: str) -> Callable[[dict], bool]:
    if not isinstance(term, str):
        raise UsageError(f"a rule's terms are field names or `field=value` strings, such as 'urgent' or "
                         f"'lane=left', not {term!r}")
    field, _, value = term.partition("=")
    return (lambda r: r.get(field) is True) if not value else (lambda r: str(r.get(field)) == value)


def implies(a: str, b: str) -> Rule:
    """If term `a` holds, so does `b`. A term is a bool field (`"urgent"`) or a field's value
    (`"lane=left"`)."""
    ta, tb = _test(a), _test(b)
    return Rule(f"{a} implies {b}", lambda r: not ta(r) or tb(r), terms=(a, b))


def excludes(a: str, b: str) -> Rule:
    """Terms `a` and `b` (as for implies) do not both hold."""
    ta, tb = _test(a), _test(b)
    return Rule(f"{a} excludes {b}", lambda r: not (ta(r) and tb(r)), terms=(a, b))


def exactly_one(*terms: str) -> Rule:
    """Exactly one of two or more terms (as for implies) holds."""
    if len(terms) < 2:
        raise UsageError(f"exactly_one takes two terms or more, got {len(terms)}: exactly_one('a', 'b=x')")
    tests = [_test(t) for t in terms]
    return Rule(f"exactly one of {', '.join(terms)}", lambda r: sum(t(r) for t in tests) == 1, terms=terms)


def predicate(fn: Callable[[Any], bool], text: str | None = None) -> Rule:
    """A rule over the record: `fn` receives the validated instance (the dict for a JSON Schema)."""
    return Rule(text or getattr(fn, "__name__", "predicate"), lambda r: bool(fn(r)), on_instance=True)


def _check_terms(rule: Rule, canvas, values) -> None:
    """UsageError for a rule term naming a field the schema lacks, or a value its field cannot take."""
    for term in rule.terms:
        field, eq, value = term.partition("=")
        i = slot_of_path(canvas, field, what=f"rule `{rule.text}`")
        written = [str(v.value if hasattr(v, "value") else v) for v in values[i]]
        if eq and value not in written:
            raise UsageError(f"rule `{rule.text}`: `{field}` has no value {value!r}; its values are {written}")
        if not eq and not all(isinstance(v, bool) for v in values[i]):
            raise UsageError(f"rule `{rule.text}`: `{field}` is not a bool field; name one of its values, "
                             f"such as `{field}={written[0]}`")


def decide(text: str, schema, *, model=None, rules: list[Rule] | None = None, known: dict | None = None,
           joint: bool = True, trace: bool = False, truncate: bool = False):
    """The best assignment of `schema`'s bool/enum fields that satisfies every rule (truncate=True:
    of a text longer than the context leaves room for, its start)."""
    check_model(model)
    with model_lock(model or default_model()):
        return _decide(text, schema, model, rules, known, joint, trace, truncate)


def _decide(text, schema, model, rules, known, joint, trace, truncate):
    model, canvas, sets = prepare(schema, model)
    slots = canvas.slots
    if not slots or all(s.path.startswith("{") for s in slots):   # nothing, or a map's entries alone
        raise SchemaError("", "the schema has no fields to decide; give it bool, Literal or Enum fields")
    top = dict(canvas.tree.fields) if isinstance(canvas.tree, ObjectNode) else {}   # key -> node
    bad = [s.path for i, s in enumerate(slots) if s.kind != "choice" or s.group is not None or i not in top.values()]
    if bad:
        raise SchemaError(bad[0], "judgments are required bool, Literal or Enum fields at the top level (not "
                                  "inside objects, lists or maps, nor optional keys); extract other values with "
                                  "extract()")
    if len(slots) > MAX_LINKED:
        raise SchemaError("", f"{len(slots)} linked fields; decide answers at most {MAX_LINKED} together")
    if math.prod(len(s.choices) for s in slots) > MAX_ASSIGNMENTS:
        raise SchemaError("", f"the fields allow more than {MAX_ASSIGNMENTS} joint answers; use fewer values")
    own = getattr(schema, "rules", []) if isinstance(schema, type) else []   # the class's rules hold too
    rules = [] if rules is None else rules
    for given, where in ((own, "the model's `rules`"), (rules, "rules=")):
        if isinstance(given, Rule) or callable(given) or not isinstance(given, (list, tuple)):
            raise UsageError(f"{where} takes a list of rules, such as [implies('urgent', 'escalate')]")
    rules = [r if isinstance(r, Rule) else predicate(r) if callable(r) else _not_a_rule(r) for r in [*own, *rules]]
    if known is not None and not isinstance(known, dict):
        raise UsageError(f"known= takes a dict of field -> value, such as {{'urgent': True}}, not a "
                         f"{type(known).__name__}")
    values = [[choice.value(i) for i in range(len(choice.texts))] for choice in sets]
    for rule in rules:
        _check_terms(rule, canvas, values)
    given = {}  # slot index -> the known value's candidate index
    for path, value in (known or {}).items():
        i = slot_of_path(canvas, path)
        want = value.value if hasattr(value, "value") else value
        at = [k for k, v in enumerate(values[i]) if v == want and type(v) is type(want)]   # 1 is not True
        if not at:
            raise UsageError(f"known: {want!r} is not a value of `{slots[i].path}`; give one of {values[i]}")
        given[i] = at[0]
    ids = list(canvas.ids)   # the known values written in, for the model to read; the rest masked
    for i, k in given.items():
        ids[slots[i].start:slots[i].end] = sets[i].ids[k].tolist()

    prompt, text = fit_prompt(model, text, canvas, truncate)   # validators read what the model reads
    try:
        scored, passes = score_choices(model, prompt, canvas, sets, ids)
    except CloverError:
        raise
    except Exception as e:
        raise internal_failure("scoring the answers", e) from e
    options = []  # per slot: [(value, score)]
    for i, scores in enumerate(scored):
        scores = scores.tolist()
        if i in given:
            scores = [0.0 if k == given[i] else float("-inf") for k in range(len(scores))]
        options.append(list(zip(values[i], map(float, scores))))

    def record(assignment):
        return {s.path: value for s, (value, _) in zip(slots, assignment)}

    keys = _rule_keys(canvas.model, top) if canvas.model else {}

    def answer(assignment):
        """The assignment as returned: the model's instance, or the JSON Schema's record once it
        passes the schema's checks (if/then, not, ...); ValidationError or SchemaRejects if not."""
        data = record(assignment)
        if canvas.model:
            return model_validated(canvas.model, data, text)
        if canvas.check is not None:
            canvas.check(data)
        return data

    def satisfies(assignment):
        try:
            instance = answer(assignment)
        except (ValidationError, SchemaRejects):   # the schema's own checks reject this combination
            return False
        # a model's values as validated (a validator may have changed one), by the rules' keys; not as
        # serialized, where an excluded field, a serializer or serialize_by_alias would hide them
        data = {keys.get(name, name): _plain(getattr(instance, name)) for name in canvas.model.model_fields} \
            if canvas.model else instance
        for r in rules:
            try:
                if not r.holds(instance if r.on_instance else data):
                    return False
            except Exception as e:
                given = f"the validated {type(instance).__name__} {instance!r}" if r.on_instance else f"the record {data}"
                raise UsageError(f"rule `{r.text}` raised {type(e).__name__}: {e}; fix the rule (it is called "
                                 f"with {given})") from e
        return True

    if joint:
        ranked = sorted(itertools.product(*options), key=lambda a: -sum(score for _, score in a))
        best = next((a for a in ranked if sum(sc for _, sc in a) > float("-inf")
                     and satisfies(a)), None)
        if best is None:
            raise ExtractionError("", "no answer satisfies every rule (" + ("; ".join(r.text for r in rules)
                                  or "none given") + ") and the schema's own checks; check the rules, the "
                                  "known values and the schema's validators")
    else:
        best = [max(o, key=lambda vs: vs[1]) for o in options]
    try:
        value = answer(best)
    except (ValidationError, SchemaRejects) as e:
        why = e.errors()[0]["msg"] if isinstance(e, ValidationError) else e.reason
        raise ExtractionError("", f"the answers break the schema's own checks ({why}); decide jointly "
                                  "(joint=True) to keep to them") from e
    if not trace:
        return value
    t = Trace(forward_passes=passes, steps=1, tokens_committed=sum(s.budget for s in slots), tokens_per_step=[])
    t.confidence = {s.path: float(torch.tensor([sc for _, sc in o]).softmax(0).max()) for s, o in zip(slots, options)}
    t.settled_at = {s.path: 1 for s in slots}
    return value, t


def _rule_keys(model, keys) -> dict[str, str]:
    """A model's field names -> the keys its records, and so rules, name them by (an alias a
    record is read under, the first of AliasChoices; a serialization alias is not)."""
    def read_as(f):
        choices = getattr(f.validation_alias, "choices", [f.validation_alias])
        return [c for c in (*choices, f.alias) if isinstance(c, str)]
    return {name: next((k for k in read_as(f) if k in keys), name) for name, f in model.model_fields.items()}


def _plain(value):
    """A field's value as a rule names it: an Enum member by its value."""
    return value.value if isinstance(value, Enum) else value


def _not_a_rule(r):
    raise UsageError(f"rules= holds {r!r}, which is no rule; use implies, excludes, exactly_one or "
                     "predicate(fn), or a function of the record")
