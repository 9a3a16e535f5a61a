"""Lay out a schema as a canvas: fixed token spans around masked value slots.

A pydantic model (or the same constructs in JSON Schema) becomes the tokens of its
JSON text in which keys, braces, commas, colons and the quotes of required strings
are fixed, and every leaf value is a *slot* of `budget` mask tokens with the regex
or the candidate texts its value must match. `Canvas.parse` reads a filled canvas
back into JSON data; `Canvas.fill` writes data into one (training data, tests).

Groups and absence. A list of at most N items lays out N "item" groups, an
`Optional[Model]` one "optional" group, a JSON Schema object's optional key one "key"
group (its separator, key and value: absent, the key is left out of the object), each
variant of a discriminated union a "variant" group. A slot is *empty* when all its
positions hold pad.
- An item, optional or key group is present iff some slot inside it (nested groups
  included) is non-empty; in an absent group every slot is empty. So a present
  item cannot consist of empty strings only: it would read as absent (an optional
  key holding "" or [] reads as left out).
- Present items come first (item k present => item k-1 present); items below
  `min_items` are `required`. Parsing drops absent items wherever they are.
- A variant is present iff its union's selector (discriminator) slot, which lies
  outside the variant groups, holds one of its tags; the other variants' slots are
  empty. A selector holding `null` makes the union null. A union told apart by a key
  only one member requires has that key as its selector's text, and its variants
  write the key's value first.
- A union marked `one_slot` (json_schema_extra={"one_slot": True} on its Field) is
  instead one slot holding its variant's whole JSON object, keys included: a
  regex over every variant's fields, as long as the longest variant rather than
  all of them side by side (`Slot.union` renders and checks the fields).
- In a present scope every slot holds a complete value; between fixed quotes an
  empty slot is the empty string.

Blocks. A canvas is one denoising block, except that a list marked `item_blocks`
(json_schema_extra={"item_blocks": True} on its Field) starts a block at each of its
items after the first (what follows the list joins the last): its items are then
decoded one after the other, each seeing the ones before as history (`Canvas.blocks`).
Their verbatim slots copy in the order of the text: each starts after what the item
before copied and after the verbatim slots before it in its own item (rows.copied_after).
A verbatim string marked `copies_before` (json_schema_extra={"verbatim": True,
"copies_before": "valid_to"}, a sibling's name) is decoded once that sibling is, and copies
a piece that starts before the sibling's (rows.sibling_copies): a start before its end.
One marked `copies_beside` is decoded once its sibling is and copies the piece right next
to the sibling's, with only separators between: the one just before it, where that one
is not what an item before copied, else the one just after ("东经121.47度、北纬31.31度"
and "253202N1355900E" alike); where neither is, any piece but the sibling's.
The list copies whole runs of the text: its first piece is not one that follows a piece
of an item with only separators between, and an item whose piece so follows the item
before is present ("5130N 00010W - 5140N 00020W, 5150N ..." is read to its end).
Plain data: knows nothing of torch, of models, or of token automata (that is
constraints.py); the tokenizer only encodes fixed text and choices, and reads
token bytes back. The JSON Schema walk that builds a canvas is schema_walk.py
(`build_canvas`).
"""

from __future__ import annotations

import datetime
import json
import operator
import re
from collections import namedtuple
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .errors import ExtractionError, SchemaError
from .patterns import FLOAT_FRACTION_DIGITS, exact
from .validation import path_of

_OPS = {"ge": operator.ge, "gt": operator.gt, "le": operator.le, "lt": operator.lt,
        "min_length": operator.ge, "max_length": operator.le}


@dataclass(frozen=True)
class Check:
    """A bound tested on the decoded value (numeric bounds: no regex expresses them)."""
    op: str  # ge gt le lt multiple_of min_length max_length format pattern
    bound: Any

    def violation(self, value: Any) -> str | None:
        """Why `value` breaks this check, or None (null always passes)."""
        if value is None:
            return None
        try:
            if self.op == "format":
                ok = _valid_date(value, self.bound)
            elif self.op == "pattern":   # one no automaton holds (look-around, \b): a search, as JSON Schema's
                ok = re.search(self.bound, value) is not None
            elif self.op == "multiple_of":   # exactly, on the numbers as written (as the final check)
                ok = (exact(value) / exact(self.bound)).denominator == 1
            else:
                ok = _OPS[self.op](len(value) if self.op.endswith("_length") else value, self.bound)
        except (TypeError, ValueError):   # (a value no number: not one of the multiples)
            ok = False
        except re.error:   # a pattern Python's re cannot read: the final check's validator answers
            ok = True
        return None if ok else f"{value!r} breaks {self.op} {self.bound}"


def _valid_date(text: str, fmt: str) -> bool:
    parse = datetime.date.fromisoformat if fmt == "date" else datetime.datetime.fromisoformat
    text = text.upper().replace("Z", "+00:00")   # (t and z as RFC 3339 allows)
    text = re.sub(r"([+-][0-9]{2})([0-9]{2})$", r"\1:\2", text)   # (fractions, offsets as Python 3.10 reads)
    try:
        parse(re.sub(r"\.([0-9]+)", lambda m: "." + f"{m[1]:0<6}"[:6], text))
        return True
    except ValueError:
        return False


@dataclass(frozen=True)
class Slot:
    """One leaf value: `budget` positions from `start`, holding value tokens then pads."""
    path: str
    start: int
    budget: int
    kind: str                    # "regex" or "choice"
    json_kind: str               # "string": content between fixed quotes; "value": a whole JSON value
    pattern: str | None = None   # regex over the slot's exact text (regex slots)
    also: str | None = None      # a second regex the text must match too (a format beside a pattern)
    one_of: tuple[str, ...] = ()  # regexes of a oneOf's members: the text matches at most one (and `pattern`)
    choices: tuple[str, ...] = ()                   # candidate texts (choice slots)
    choice_ids: tuple[tuple[int, ...], ...] = ()    # their tokens, each at most `budget`
    group: int | None = None     # innermost group, None at the top level
    checks: tuple[Check, ...] = ()
    nullable: bool = False
    length: tuple[int, int | None] | None = None    # (min, max) string characters, for the automaton
    union: tuple | None = None   # a one-slot union: (discriminator key, ((tag text, pieces), ...)),
    #                              pieces: the variant's fixed texts and (field key, Slot) in order
    verbatim: bool = False       # a string the text holds as written (verbatim.py)
    before: str | None = None    # the verbatim field whose copy this one's precedes in the text (copies_before)
    beside: str | None = None    # the verbatim field whose copy this one's stands next to in the text (copies_beside)

    @property
    def end(self) -> int:
        return self.start + self.budget

    def value(self, text: str) -> Any:
        """The JSON value of the slot's text; ExtractionError if it is not one of its kind."""
        if self.kind == "choice" and text not in self.choices:
            raise ExtractionError(self.path, f"{text!r} is not one of {', '.join(self.choices)}")
        if self.json_kind == "value" and not text:
            raise ExtractionError(self.path, "no value (the slot is empty)")
        try:
            return json.loads(f'"{text}"' if self.json_kind == "string" else text)
        except json.JSONDecodeError:
            kind = "string content" if self.json_kind == "string" else "value"
            raise ExtractionError(self.path, f"{text!r} is not a valid JSON {kind}") from None

    @property
    def checked(self) -> bool:
        """Whether a decoded value must be checked: bounds no regex expresses, on this slot or
        on the fields of its one-slot union."""
        return bool(self.checks or self.union)

    def violation(self, value: Any) -> str | None:
        """The first check `value` fails, or None."""
        if self.union and isinstance(value, dict):   # the checks of the variant's fields
            return next((f"{key}: {r}" for key, sub in self.fields(value)
                         if (r := sub.violation(value.get(key)))), None)
        return next((r for c in self.checks if (r := c.violation(value))), None)

    def variant(self, value: dict) -> tuple:
        """A one-slot union: the pieces (fixed texts, (key, Slot)) of `value`'s variant."""
        key, members = self.union
        tag = json.dumps(value.get(key), ensure_ascii=False)
        for t, pieces in members:
            if t == tag:
                return pieces
        raise ValueError(f"field `{self.path}`: no variant has {key} {tag}")

    def fields(self, value: dict) -> list[tuple[str, "Slot"]]:
        """A one-slot union: (key, Slot) of each field of `value`'s variant."""
        return [p for p in self.variant(value) if not isinstance(p, str)]

    def render(self, value: Any) -> str:
        """The slot text that writes `value` (the inverse of `value`)."""
        if value is None and not self.nullable:
            raise ValueError(f"field `{self.path}` needs a value, got None")
        if self.union and value is not None:
            if not isinstance(value, dict):
                raise ValueError(f"field `{self.path}` needs an object, got {value!r}")
            return "".join(p if isinstance(p, str) else p[1].render(value.get(p[0])) for p in self.variant(value))
        if isinstance(value, (float, Decimal)) and self.kind != "choice":   # a choice: as its enum's JSON (8.0)
            text = f"{value:.{FLOAT_FRACTION_DIGITS}f}".rstrip("0").rstrip(".")   # no exponent
            text = "0" if text == "-0" else text
        else:
            text = json.dumps(float(value) if isinstance(value, Decimal) else value, ensure_ascii=False)
        if self.json_kind == "string":
            if not isinstance(value, str):
                raise ValueError(f"field `{self.path}` needs a string, got {value!r}")
            text = text[1:-1]
        if self.kind == "choice" and text not in self.choices:
            # a number equal to a choice's (8 for 8.0, as JSON Schema and pydantic take it) is that choice
            equal = next((c for c in self.choices if _same_number(value, c)), None)
            if equal is None:
                raise ValueError(f"field `{self.path}`: {text} is not one of {', '.join(self.choices)}")
            text = equal
        return text


def _same_number(value, choice: str) -> bool:
    """Whether `value` is a number equal to the one a choice's JSON text writes."""
    def number(x):
        return isinstance(x, (int, float)) and not isinstance(x, bool)
    try:
        return number(value) and number(c := json.loads(choice)) and c == value
    except ValueError:
        return False


@dataclass(frozen=True)
class Group:
    """Slots present or absent together: a list item, an optional object, an optional key, a union variant."""
    index: int
    path: str                    # "tasks[2]", "contact", "shape<circle>"
    kind: str                    # "item", "optional", "key" or "variant"
    parent: int | None
    start: int                   # canvas span [start, end) of its text
    end: int
    slots: tuple[int, ...]       # every slot inside, nested groups included
    fixed: tuple[int, ...]       # canvas positions of its fixed text
    children: tuple[int, ...] = ()
    required: bool = False       # item below min_items: must be present
    prev: int | None = None      # item k-1: this item present => prev present
    selector: int | None = None  # variant: the discriminator slot
    tags: tuple[str, ...] = ()   # variant: selector texts that make it present
    names: tuple[str, ...] = ()  # variant: its tags and $defs names (its model's), by which pydantic
    #                              names the member in an error's location


# The layout tree that parse and fill walk; a leaf is a slot index.
ObjectNode = namedtuple("ObjectNode", "fields extra", defaults=(None,))   # ((key, node), ...), MapNode or None
MapNode = namedtuple("MapNode", "entries")                       # ((group, key slot, value node), ...)
ListNode = namedtuple("ListNode", "items nullable")              # ((group, node), ...)
OptionalNode = namedtuple("OptionalNode", "group node")          # absent: null
KeyNode = namedtuple("KeyNode", "group node")                    # an optional key in ObjectNode.fields: absent, no key
UnionNode = namedtuple("UnionNode", "key selector variants")     # variants: ((group, ObjectNode), ...); key None: the
                                                                 # selector names the variant's own key
_EMPTY = object()   # fill: an all-pad slot


def tagged(path: str, tags: tuple[str, ...]) -> str:
    """A union variant's path: its union's, and its first tag's value in angle brackets
    (`area<circle>`; tags are the selector's JSON texts)."""
    return f"{path}<{json.loads(tags[0])}>"


def model_validated(model, data: Any, text: str | None = None):
    """`data` (JSON values) validated as the JSON it is (a strict model takes a date or a UUID as
    a string there), the model's validators given the source `text` as info.context["text"].
    A value the model rejects raises pydantic's ValidationError; a validator that raises anything
    else (the model's own code failing), ExtractionError."""
    from pydantic import ValidationError
    try:
        return model.model_validate_json(json.dumps(data), context=None if text is None else {"text": text})
    except ValidationError:
        raise
    except Exception as e:
        raise ValidatorFailed("", f"{model.__name__}'s validation raised {type(e).__name__}: {e}; a validator "
                                  "rejects a value with ValueError or AssertionError") from e


class ValidatorFailed(ExtractionError):
    """A model's validator failing with another exception than a refusal: its code's, no value's."""


@dataclass(frozen=True, eq=False)
class Canvas:
    """Fixed ids with `mask_id` at slot positions, the slots, the groups, and the way back."""
    ids: tuple[int, ...]
    slots: tuple[Slot, ...]
    groups: tuple[Group, ...]
    mask_id: int
    pad_id: int
    tokenizer: Any = field(repr=False)
    schema: dict = field(repr=False)
    model: type | None = None        # the pydantic class, for `validate`
    tree: Any = field(default=None, repr=False)
    blocks: tuple[int, ...] = (0,)   # where each denoising block starts (item_blocks lists)
    check: Any = field(default=None, repr=False)   # a JSON Schema's final check (validation.py), for `validate`
    left_out: tuple[str, ...] = ()   # optional keys not laid out for room (maxProperties, or the model's context)

    def __len__(self) -> int:
        return len(self.ids)

    def spans(self, size: int | None = None) -> list[tuple[int, int]]:
        """(start, end) of each denoising block, in order: `blocks`, each cut again every
        `size` tokens (a model's block size) when it is longer."""
        ends = self.blocks[1:] + (len(self.ids),)
        cuts = sorted({c for b, e in zip(self.blocks, ends) for c in range(b, e, size or e - b)})
        return list(zip(cuts, cuts[1:] + [len(self.ids)]))

    def check_fits(self, context: int) -> None:
        """SchemaError unless the canvas fits in `context` tokens, naming the top-level field whose
        slots take the most."""
        if len(self.ids) <= context:
            return
        taken: dict[str, int] = {}
        for s in self.slots:
            top = re.split(r"[.\[<{:]", s.path, maxsplit=1)[0]
            taken[top] = taken.get(top, 0) + s.end - s.start
        field = max(taken, key=taken.get, default="")
        raise SchemaError(field, f"the canvas needs {len(self.ids)} tokens but only {context} fit, "
                                 f"{taken.get(field, 0)} of them this field's; lower max_length of its lists "
                                 "or max_tokens of its fields, or leave some of it out")

    def is_empty(self, ids, slot: int) -> bool:
        s = self.slots[slot]
        return all(t == self.pad_id for t in ids[s.start:s.end])

    def is_present(self, ids, group: int) -> bool:
        """Whether `group` is present in filled `ids` (the rules of the module docstring)."""
        g = self.groups[group]
        if g.kind == "variant":
            return self.slot_text(ids, g.selector) in g.tags
        return not all(self.is_empty(ids, i) for i in g.slots)

    def slot_text(self, ids, slot: int) -> str:
        """A filled slot's text: its tokens up to the first pad ("" when empty)."""
        s, out, padded = self.slots[slot], bytearray(), False
        for t in ids[s.start:s.end]:
            if t == self.pad_id:
                padded = True
            elif padded:
                raise ExtractionError(s.path, "a value token follows padding")
            elif t == self.mask_id or t in self.tokenizer.special_ids:
                raise ExtractionError(s.path, "the slot was not filled" if t == self.mask_id
                                      else f"the slot holds special token {t}")
            else:
                out += self.tokenizer.token_bytes(t)
        try:
            return out.decode("utf-8")
        except UnicodeDecodeError:
            raise ExtractionError(s.path, f"{bytes(out)!r} is not UTF-8 text") from None

    def parse(self, ids) -> Any:
        """The JSON data of a filled canvas; ExtractionError names a bad slot."""
        if len(ids) != len(self.ids):
            raise ValueError(f"a canvas of {len(self.ids)} tokens, got {len(ids)}")
        ids = list(ids)

        def walk(node):
            if isinstance(node, int):
                return self.slots[node].value(self.slot_text(ids, node))
            if isinstance(node, ObjectNode):
                out = {k: walk(n.node if isinstance(n, KeyNode) else n) for k, n in node.fields
                       if not isinstance(n, KeyNode) or self.is_present(ids, n.group)}
                for g, key, n in node.extra.entries if node.extra else ():
                    if self.groups[g].required or self.is_present(ids, g):
                        name = self.slots[key].value(self.slot_text(ids, key))
                        if name in out:
                            raise ExtractionError(self.slots[key].path, f"the key {name!r} is already in the object")
                        out[name] = walk(n)
                return out
            if isinstance(node, ListNode):
                items = [walk(n) for g, n in node.items
                         if self.groups[g].required or self.is_present(ids, g)]
                return None if node.nullable and not items else items
            if isinstance(node, OptionalNode):
                return walk(node.node) if self.is_present(ids, node.group) else None
            tag, selector = self.slot_text(ids, node.selector), self.slots[node.selector]
            for g, obj in node.variants:
                if tag in self.groups[g].tags:   # (a key-less union's variant writes its own key)
                    return {node.key: selector.value(tag), **walk(obj)} if node.key else walk(obj)
            return selector.value(tag)   # null, or ExtractionError
        return walk(self.tree)

    def validate(self, ids, text: str | None = None) -> Any:
        """`parse`, then the pydantic model's validation (its validators given the source `text`
        as info.context["text"]), or the JSON Schema's final check."""
        data = self.parse(ids)
        if self.model is None:
            if self.check is not None:
                self.check(data)
            return data
        from pydantic import ValidationError
        try:
            return model_validated(self.model, data, text)
        except ValidationError as e:
            errors = e.errors()
            locs = [tuple(err["loc"]) for err in errors]
            located = ((path, err["msg"]) for loc, err in zip(locs, errors)
                       if (path := self._located(ids, loc, locs)) is not None)
            path, reason = next(located, (path_of(locs[0]), errors[0]["msg"]))
            raise ExtractionError(path, reason) from None

    def _located(self, ids, loc: tuple, locs: list[tuple]) -> str | None:
        """Where pydantic's error location `loc` lies, as the slots' paths are written
        (`zones{0}<circle>.radius` for `zones.north.circle.radius`), or None where it lies in a
        union member the record does not hold. Inside a union pydantic names the member, a
        discriminated union's by its tag and another's by its model (`area.Circle.radius`),
        and reports every member's errors (`locs`: all the errors' locations). A name no member
        goes by (a callable discriminator's Tag) is the held member's, unless some error names that one."""
        node, path = self.tree, ""
        for k, part in enumerate(loc):
            while isinstance(node, (KeyNode, OptionalNode)):
                node = node.node
            if isinstance(node, UnionNode):
                held = next((g for g, _ in node.variants if self.is_present(ids, g)), None)
                if held is None:
                    break
                named = next((g for g, _ in node.variants if part in self.groups[g].names), None)
                held_named = any(len(o) > k and o[:k] == loc[:k] and o[k] in self.groups[held].names for o in locs)
                if named not in (held, None) or named is None and held_named:
                    return None
                node, path = dict(node.variants)[held], self.groups[held].path
            elif isinstance(node, ObjectNode) and part in dict(node.fields):
                node, path = dict(node.fields)[part], f"{path}.{part}".lstrip(".")
            elif isinstance(node, ObjectNode) and node.extra and (entry := next(
                    ((g, key, n) for g, key, n in node.extra.entries if (self.groups[g].required or self.is_present(
                        ids, g)) and self.slots[key].value(self.slot_text(ids, key)) == part), None)):
                if loc[k + 1:] == ("[key]",):   # pydantic's place for a key that fails its type (dict[date, int])
                    return self.slots[entry[1]].path
                node, path = entry[2], self.groups[entry[0]].path
            elif isinstance(node, ListNode) and isinstance(part, int) and part < len(node.items):
                node, path = node.items[part][1], self.groups[node.items[part][0]].path
            else:
                break   # inside one slot's whole value, or a place the layout has no part for
        return path

    def fill(self, data: Any) -> list[int]:
        """The canvas ids that write `data` (a dict or model instance): the inverse of parse."""
        if hasattr(data, "model_dump"):
            data = data.model_dump(mode="json", by_alias=True)
        ids = list(self.ids)

        def put(i, value):
            s = self.slots[i]
            toks = [] if value is _EMPTY else self.tokenizer.encode(s.render(value))
            if len(toks) > s.budget:
                raise ValueError(f"field `{s.path}`: {value!r} needs {len(toks)} tokens, budget {s.budget}")
            ids[s.start:s.end] = toks + [self.pad_id] * (s.budget - len(toks))

        def walk(node, value, path):
            if value is _EMPTY:         # node is a group: all its slots empty
                return [put(i, _EMPTY) for i in self.groups[node].slots]
            if isinstance(node, int):
                return put(node, value)
            if isinstance(node, ObjectNode):
                if not isinstance(value, dict):
                    raise ValueError(f"field `{path}` needs an object, got {value!r}")
                for k, n in node.fields:
                    if isinstance(n, KeyNode):   # a key left out of `value` is an absent group
                        walk(n.node, value[k], f"{path}.{k}".lstrip(".")) if k in value else walk(n.group, _EMPTY, path)
                    else:
                        walk(n, value.get(k), f"{path}.{k}".lstrip("."))
                if node.extra is None:   # keys beside the properties (a union's tag) are not this node's
                    return
                extra = [k for k in value if k not in dict(node.fields)]
                entries = node.extra.entries
                if len(extra) > len(entries):
                    raise ValueError(f"field `{path}` holds at most {len(entries)} keys besides its properties")
                for j, (g, key, n) in enumerate(entries):
                    if j < len(extra):
                        put(key, extra[j])
                        walk(n, value[extra[j]], f"{path}.{extra[j]}".lstrip("."))
                    else:
                        walk(g, _EMPTY, path)
                return
            if isinstance(node, ListNode):
                value = value or []
                if len(value) > len(node.items):
                    raise ValueError(f"field `{path}` holds at most {len(node.items)} items")
                return [walk(n, value[k], f"{path}[{k}]") if k < len(value) else walk(g, _EMPTY, path)
                        for k, (g, n) in enumerate(node.items)]
            if isinstance(node, OptionalNode):
                return walk(node.node, value, path) if value is not None else walk(node.group, _EMPTY, path)
            if value is None:
                tag = None
            elif node.key:
                tag = value.get(node.key)
            else:   # the variant whose own key `value` holds
                keys = [json.loads(t) for g, _ in node.variants for t in self.groups[g].tags]
                tag = next((k for k in keys if k in value), None)
            put(node.selector, tag)
            tag = json.dumps(tag, ensure_ascii=False)
            for g, obj in node.variants:
                walk(obj, value, path) if tag in self.groups[g].tags else walk(g, _EMPTY, path)
        walk(self.tree, data, "")
        return ids

    def text(self, mark: str = "▢") -> str:
        """The canvas as text, each slot position shown as `mark`."""
        slot_at = {p for s in self.slots for p in range(s.start, s.end)}
        return b"".join(mark.encode() if i in slot_at else self.tokenizer.token_bytes(t)
                        for i, t in enumerate(self.ids)).decode("utf-8", "replace")

    def describe(self) -> str:
        """The layout: canvas text, then each group and slot with its budget and constraint."""
        blocks = f", blocks at {', '.join(map(str, self.blocks))}" if len(self.blocks) > 1 else ""
        lines = [f"canvas: {len(self.ids)} tokens, {len(self.slots)} slots, {len(self.groups)} groups{blocks}",
                 self.text(), f"{'field':32} {'kind':6} {'budget':>6}  constraint"]
        rows = [(g.start, 0, g.index, g) for g in self.groups] + [(s.start, 1, i, s) for i, s in enumerate(self.slots)]
        for *_, x in sorted(rows, key=lambda r: r[:3]):
            if isinstance(x, Group):
                rule = (f"present iff {self.slots[x.selector].path} is {' or '.join(x.tags)}"
                        if x.kind == "variant" else "required" if x.required else "present or absent")
                lines.append(f"{x.path + ':':32} {x.kind} group, {rule}")
            else:
                what = x.pattern if x.kind == "regex" else " | ".join(x.choices)
                checks = "".join(f"  {c.op} {c.bound}" for c in x.checks) + "  verbatim" * x.verbatim
                lines.append(f"{x.path:32} {x.kind:6} {x.budget:>6}  {what}{checks}")
        if self.left_out:
            lines.append(f"never written ({len(self.left_out)} optional keys past maxProperties or the room): "
                         + ", ".join(self.left_out))
        return "\n".join(lines)

    __str__ = describe


