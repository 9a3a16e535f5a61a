"""The JSON Schema walk: a pydantic model or JSON Schema in, a Canvas (layout.py) out.

Each leaf becomes a slot (regex or choice, with its budget and checks); each list item,
map entry, optional object, JSON Schema optional key and union variant a group (a
`one_slot` union one slot); a part no fixed layout fits (an untagged union, a value of any
type) one slot holding its whole JSON text (value_regex.py). Open-ended parts get a
bounded layout: a list without maxItems or a map lays out up to `Options.items` entries,
each decoded as a block of its own after the one before (a list that ends early costs
nothing after its end); recursion is unrolled `Options.depth` times and cut where the
schema allows (an optional key left out, an empty list, null). What cannot be laid out or
satisfied is refused with a SchemaError that names the field and what to use instead.
References and compositions are read by schema_refs.py. Knows nothing of torch or models;
it compiles no automata except to size a slot that needs more tokens than its estimate
(constraints.min_tokens).

One file over 400 lines: the Builder is one walk whose methods share its state (the pieces
written so far, the open groups, the references being followed, marks to roll back to);
split across modules, that state would travel as arguments.
"""

from __future__ import annotations

import bisect
import json
import weakref
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from .errors import SchemaError, UsageError
from .layout import (Canvas, Check, Group, KeyNode, ListNode, MapNode, ObjectNode, OptionalNode, Slot, UnionNode,
                     tagged)
from .patterns import (CHAR, COUNTED_LENGTH, DEFAULT_STRING_TOKENS, STRING_TOKENS_CAP, content_pattern, literal,
                       loosened, number_pattern, regular, string_content)
from .schema_refs import Document, Unsatisfiable, check_nesting, contains_needs, merge, read_schema
from .value_regex import ValueRegex
from .vocab import per_tokenizer

VALUE_TOKENS = 48   # budget of a slot holding a whole JSON value (an untagged union, any value)
KEY_TOKENS = 12     # budget of a map's key
BOUNDED_ITEMS = 32  # a list bound up to this is laid out item for item; above it, as an open list
# Schema keys naming a verbatim sibling the field copies relative to: key -> (Slot attribute, example).
SIBLING_KEYS = {"copies_before": ("before", "valid_to"), "copies_beside": ("beside", "lat")}


@dataclass(frozen=True)
class Options:
    """How far open-ended parts of a schema are laid out."""
    default_tokens: int = DEFAULT_STRING_TOKENS   # budget of a string without max_length
    letter_tokens: int = 1                        # tokens a letter of the text may take (vocab.letter_tokens)
    items: tuple[int, ...] = (8, 3, 2)            # entries of an open list or map, by nesting depth
    depth: int = 2                                # times a recursive reference is followed again
    keys_within: int | None = None                # optional keys (a model's: those with a default) only while
                                                  # the slots laid out stay within this many positions (None: all)


# Tried in order until the canvas fits the room given (only schemas with open parts differ).
SHRINK = (Options(), Options(items=(4, 2, 1), depth=1), Options(items=(2, 1), depth=1), Options(items=(1,), depth=0),
          Options(items=(1,), depth=0, keys_within=0))


class _TooDeep(Exception):
    """Recursion reached Options.depth here: the caller cuts it off, or refuses."""


class _TooBig(Exception):
    """The canvas outgrew the room while SHRINK can still make it smaller: the next Options."""


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class Builder:
    """Walks a JSON Schema, emitting fixed text, slots and group markers in canvas order."""

    def __init__(self, doc: Document, tokenizer, options: Options, strict: bool, budgets: dict | None = None,
                 room: int | None = None, unfillable: frozenset = frozenset()):
        self.doc, self.tok, self.options, self.strict = doc, tokenizer, options, strict
        self.room = room                # stop (_TooBig) once the slots alone outgrow it, if SHRINK can help
        self.values = ValueRegex(doc, strict)
        self.budgets = budgets or {}    # slot path -> tokens it needs (raised after a first build)
        self.unfillable = unfillable    # slot paths no value of whose grammar a first build could fill
        self.fixed: set[str] = set()    # slot paths whose budget the schema sets (max_tokens)
        # ("text", str) | ("slot", i) | ("open", g) | ("close", g) | ("block", None): a block starts here
        self.pieces: list[tuple] = []
        self.slots: list[dict] = []
        self.groups: list[dict] = []
        self.group: int | None = None   # the innermost open group
        self.active: list[str] = []     # $refs being walked (recursion depth)
        self.lists = 0                  # open lists and maps around the current value
        self.open_parts = False         # whether an open part or recursion was laid out (SHRINK helps)
        self.size = 0                   # positions of the slots laid out (the canvas is longer)
        self.left_out: list[str] = []   # optional keys left out for room (maxProperties, or the context)
        self.key_groups = strict        # a JSON Schema's optional keys as "key" groups (not in one_slot unions)

    def resolve(self, s, path: str, base: str = ""):
        r = self.doc.resolve(s, path, base)
        return r.schema, r.nullable, r.refs, r.base

    def enter(self, refs: list[str], path: str) -> None:
        for ref in refs:
            if self.active.count(ref) > self.options.depth:
                self.open_parts = True
                raise _TooDeep(path)
        self.active += refs

    def leave(self, refs: list[str]) -> None:
        del self.active[len(self.active) - len(refs):]

    def value(self, s, path: str, tokens: int | None = None, base: str = ""):
        schema, nullable, refs, base = self.resolve(s, path, base)
        mark = self.mark()
        try:
            self.enter(refs, path)
        except _TooDeep:
            if not nullable:
                raise
            return self.choice(path, ["null"], None)
        try:
            tokens = schema.get("max_tokens", tokens)
            if tokens is not None and (not isinstance(tokens, int) or tokens < 1):
                raise SchemaError(path, f"max_tokens must be a positive int, got {tokens!r}")
            return self._value(schema, path, nullable, tokens, base)
        except _TooDeep:
            if not nullable:
                raise
            self.rollback(mark)
            return self.choice(path, ["null"], None)
        finally:
            self.leave(refs)

    def _value(self, s, path, nullable, tokens, base):
        t = s.get("type")
        if t is None and "properties" in s:
            t = "object"
        if s.get("verbatim") and (t != "string" or "enum" in s):
            raise SchemaError(path, "verbatim applies to str fields only (text copied as written), "
                                    "not to numbers, choices or models")
        for key, (_, example) in SIBLING_KEYS.items():
            if s.get(key) and not (s.get("verbatim") and isinstance(s[key], str)):
                raise SchemaError(path, f"{key} applies to verbatim str fields and names a verbatim sibling "
                                        f'(json_schema_extra={{"verbatim": True, "{key}": "{example}"}})')
        if s.get("item_blocks") and t != "array":
            raise SchemaError(path, "item_blocks applies to lists only (each item decoded as a block of its own)")
        if "discriminator" in s and not s.get("x-union"):
            return self.union(s, path, nullable, base)
        if s.get("x-union"):   # objects told apart by a key's values or by a key only one requires, else whole
            tag, own = self.doc.told_apart(s, path, base)
            if tag or own:
                return self.union({"oneOf": self.doc.members(s)}, path, nullable, base, tag, own)
            return self.whole(s, path, nullable, tokens, base)
        if "enum" in s:
            texts = [json.dumps(v, ensure_ascii=False) for v in s["enum"] if v is not None]
            return self.choice(path, texts + ["null"] * (nullable or None in s["enum"]), tokens)
        if t == "object":
            if not nullable:
                return self.object(s, path, base)
            g = self.open("optional", path)
            return OptionalNode(g, self.close(g, self.object(s, path, base)))
        if t == "array":
            return self.array(s, path, nullable, tokens, base)
        if t in ("boolean", "null"):
            return self.choice(path, ["true", "false"] * (t == "boolean") + ["null"] * (nullable or t == "null"), tokens)
        if t in ("integer", "number"):
            return self.number(s, path, nullable, tokens, t == "integer")
        if t == "string":
            return self.string(s, path, nullable, tokens)
        if t is None:   # a value of any type
            return self.whole(s, path, nullable, tokens, base)
        raise SchemaError(path, f"type {t!r} is not a JSON Schema type; use string, number, integer, boolean, "
                                "object, array or null")

    def whole(self, s, path, nullable, tokens, base) -> int:
        """One slot holding the value's whole JSON text (value_regex.py); a oneOf's matches at
        most one of the members a regex tells apart."""
        if self.marks_verbatim(s, base):
            raise SchemaError(path, "a verbatim field inside a union of members no key tells apart is not held as "
                                    "a copy (the union is one pattern): drop verbatim, or make the members "
                                    "models a tag tells apart")
        pattern, told = self.values.slot(s, path, base), self.values.told(s, path, base)
        if nullable:
            pattern = f"null|(?:{pattern})"
        return self.slot(path, "value", tokens or VALUE_TOKENS, pattern=pattern, nullable=nullable,
                         user_budget=tokens is not None, one_of=told + ("null",) * bool(told and nullable))

    def marks_verbatim(self, s, base, seen=None) -> bool:
        """Whether a schema or any part of it, through its references, marks a field verbatim."""
        seen = set() if seen is None else seen
        if isinstance(s, list):
            return any(self.marks_verbatim(x, base, seen) for x in s)
        if not isinstance(s, dict):
            return False
        if s.get("verbatim") is True:
            return True
        if isinstance(ref := s.get("$ref"), str) and (ref, base) not in seen:
            seen.add((ref, base))
            try:
                target, where, _ = self.doc.lookup(ref, base, "")
            except SchemaError:
                target = None
            if target is not None and self.marks_verbatim(target, where, seen):
                return True
        return any(self.marks_verbatim(v, base, seen) for k, v in s.items() if k not in ("$defs", "definitions"))

    def object(self, s, path, base, skip=None, lead="{", tail="}"):
        """The properties in schema order (the keys always written, then optional ones that fit
        maxProperties and do not recurse past Options.depth), then the map entries the schema
        allows. In a JSON Schema an optional key is a "key" group the model writes or leaves out."""
        props = dict(s.get("properties") or {})
        required = [k for k in s.get("required", []) if k != skip]
        extra = s.get("additionalProperties", True)
        patterns = s.get("patternProperties") or {}
        for extra_schema in _conditional(s) if extra in (True, {}) else ():
            for k, v in (extra_schema.get("properties") or {}).items():
                props.setdefault(k, v)   # conditional properties: laid out, checked at the end
        for k in dict.fromkeys([*required, *_asked(s)]):   # a key a rule requires that no properties
            if k not in props and k != skip:              # describe: its value as the map's
                matching = [v for p, v in patterns.items() if _search(p, k)]
                if not matching and extra is False:
                    if k not in required:
                        continue   # (the rule's condition then may not hold: the final check says)
                    raise Unsatisfiable(_join(path, k), "required, but no property describes it and "
                                                        "additionalProperties is false: no object is valid; add "
                                                        "it to properties")
                props[k] = {} if matching or not isinstance(extra, dict) else extra
        for k, v in props.items():   # a key patternProperties match is held to their schemas too
            if v is not False and (matching := [m for p, m in patterns.items() if _search(p, k)]):
                props[k] = {"allOf": [v, *matching]}
        written = _written(s, props, required, skip) if self.strict else required
        room = s.get("maxProperties")
        if room is not None:   # the keys always written first, the optional ones while there is room
            props = {k: props[k] for k in sorted(props, key=lambda k: k not in written)}
        fields = []
        within = self.options.keys_within
        for key, sub in props.items():
            if key == skip or (sub is False and key not in required):   # a key no value may have
                continue
            if key not in written and (room is not None and len(fields) >= room - (skip is not None)
                                       or within is not None and self.size >= within):
                self.left_out.append(_join(path, key))
                continue
            self.open_parts |= key not in written   # leaving it out would shrink the canvas (a model: its default)
            optional = self.key_groups and key not in written and not self.null_default(sub, _join(path, key), base)
            if optional and lead == "{":
                self.text(lead)   # the brace outside the key's group
                lead = ""
            mark = self.mark()
            try:
                node = self.field(key, sub, _join(path, key), base, lead, optional)
            except (_TooDeep, Unsatisfiable):
                if key in required:
                    raise
                node = None
            if node is None or key not in written and within is not None and self.size > within:
                self.rollback(mark)   # optional, and past the recursion depth, unsatisfiable, nothing to
                if node is not None:  # decide, or past the positions left for optional keys
                    self.left_out.append(_join(path, key))
                continue
            fields.append((key, node))
            lead = ", "
        if lead == "{":   # no key laid out took the brace (a map, or an object left empty)
            self.text(lead)
        entries = []
        need = s.get("minProperties", 0) - sum(not isinstance(node, KeyNode) for _, node in fields)
        left = None if room is None else room - len(fields) - (skip is not None)
        if left is None or left > 0:   # entries written until minProperties is met, the first map's first
            fixed = bool(fields) or skip is not None
            for p, sub in patterns.items():
                key = dict(pattern=content_key(p, path), length=None, also=None, budget=KEY_TOKENS)
                entries += self.entries(path, sub, key, fixed or bool(entries), base, left, need - len(entries),
                                        first=len(entries))
            if isinstance(extra, dict) or (extra is True and not props and not patterns and skip is None):
                names = s.get("propertyNames") if isinstance(s.get("propertyNames"), dict) else {}
                key = self.key_of(self.doc.resolve(names, path, base).schema, path)
                entries += self.entries(path, extra if isinstance(extra, dict) else {}, key, fixed or bool(entries),
                                        base, left, need - len(entries), first=len(entries))
        self.text(tail)
        return ObjectNode(tuple(fields), MapNode(tuple(entries)) if entries else None)

    def null_default(self, sub, path, base) -> bool:
        """Whether a property is nullable with `default: null` (a pydantic model's optional field, as
        exported): null says absent, so it is written, as the model's own canvas writes it."""
        return isinstance(sub, dict) and sub.get("default", 0) is None and self.resolve(sub, path, base)[1]

    def field(self, key, sub, path, base, lead, optional):
        """`lead"key": value`; an optional key as a "key" group holding all of it, separator
        included, or None where its value leaves the model nothing to decide (`{}`, or `[]` where
        recursion was cut): the caller rolls it back."""
        g = self.open("key", path) if optional else None
        self.text(f"{lead}{json.dumps(key, ensure_ascii=False)}: ")
        node = self.value(sub, path, base=base)
        if g is None:
            return node
        return KeyNode(g, self.close(g, node)) if self.groups[g]["slots"] else None

    def key_of(self, names: dict, path: str) -> dict:
        """A map key's slot (pattern, length, also, budget) under `propertyNames`: its enum, else
        a string of its pattern, format and lengths (dict[date, int]: a date), never empty."""
        if isinstance(names.get("enum"), list) and all(isinstance(k, str) for k in names["enum"]):
            texts = [json.dumps(k, ensure_ascii=False)[1:-1] for k in names["enum"]]
            return dict(pattern="|".join(map(literal, texts)), length=None, also=None, budget=KEY_TOKENS)
        content, size, length, _, also = string_content(
            {**names, "minLength": max(names.get("minLength", 0), 1)}, f"{path}:key", self.strict)
        bounded = {"pattern", "format", "maxLength"} & names.keys()   # else no longer than KEY_TOKENS
        return dict(pattern=content, length=length, also=also, budget=min(size, STRING_TOKENS_CAP) if bounded
                    else KEY_TOKENS)

    def entries(self, path, sub, key, after_fixed, base, room=None, least=0, first=0) -> list:
        """Up to Options.items map entries `"key": value`, each a group (an optional item), numbered
        from `first` (a map's entries of each key pattern after those of the patterns before)."""
        self.open_parts = True
        cap = self.cap(room, least)
        out, prev = [], None
        self.lists += 1
        for k in range(cap):
            epath, mark = f"{path}{{{first + k}}}", self.mark()
            g = self.open("item", epath, required=k < least, prev=prev)
            self.text((", " if after_fixed or k else "") + '"')
            key_slot = self.slot(f"{epath}:key", "string", key["budget"], user_budget=False, pattern=key["pattern"],
                                 length=key["length"], also=key["also"])
            self.text('": ')
            try:
                value = self.value(sub, epath, base=base)
            except (_TooDeep, Unsatisfiable):
                if k < least:
                    raise
                self.rollback(mark)   # past the recursion depth, or no value fits: the map ends here, as a
                break                 # list does
            out.append((g, key_slot, self.close(g, value)))
            prev = g
        self.lists -= 1
        return out

    def cap(self, most=None, least=0) -> int:
        """Entries an open list or map lays out at the current depth (at least `least`)."""
        caps = self.options.items
        cap = caps[min(self.lists, len(caps) - 1)] if self.lists < len(caps) else 0
        cap = max(cap, least)
        return cap if most is None else min(cap, max(most, 0))

    def union(self, s, path, nullable, base, tag_key=None, own=None):
        """A union whose selector, written first, picks one variant group: the value of its tag
        key (the discriminator, or `tag_key`), or with `own` the key each member alone requires,
        whose value the variant then writes first."""
        members = s.get("oneOf") or s.get("anyOf") or []
        if own:
            resolved = [self.resolve(m, path, base) for m in members]
            key, variants = None, [(v, refs, (json.dumps(k, ensure_ascii=False),), vbase)
                                   for k, (v, _, refs, vbase) in zip(own, resolved)]
        else:
            key, variants = self.tagged(s, path, base, members, tag_key)
        texts = [t for _, _, tags, _ in variants for t in tags]
        if len(set(texts)) < len(texts):
            raise SchemaError(_join(path, key), "two variants share a discriminator value")
        if s.get("one_slot"):
            return self.one_slot(path, key, variants, nullable)
        start = self.mark()
        while True:   # a variant past the recursion depth is left out
            self.text("{" if own else "{" + json.dumps(key, ensure_ascii=False) + ": ")
            selector = self.choice(path if own else _join(path, key), texts + ["null"] * nullable, None)
            self.text(": " * bool(own))
            out = []
            for n, (v, refs, tags, vbase) in enumerate(variants):
                vpath = tagged(path, tags)
                try:
                    out.append(self.variant(v, vpath, vbase, refs, key or json.loads(tags[0]), selector, tags, own))
                except _TooDeep:
                    if len(variants) == 1:
                        raise
                    self.rollback(start)
                    dropped = variants.pop(n)[2]
                    texts = [t for t in texts if t not in dropped]
                    break
            else:
                self.text("}")
                return UnionNode(key, selector, tuple(out))

    def tagged(self, s, path, base, members, tag_key) -> tuple:
        """The tag key and (schema, refs, tag texts, base) of each member of a union told apart by
        that key's values."""
        disc = {"propertyName": tag_key} if tag_key else s["discriminator"]
        disc = disc if isinstance(disc, dict) else {"propertyName": disc}
        key, by_ref = disc["propertyName"], {ref: tag for tag, ref in disc.get("mapping", {}).items()}
        variants = []
        for member in members:
            v, _, refs, vbase = self.resolve(member, path, base)
            if key not in v.get("properties", {}):
                raise SchemaError(path, f"every variant of the union needs the discriminator field `{key}`")
            p = self.resolve(v["properties"][key], _join(path, key), vbase)[0]
            ref = member.get("$ref") if isinstance(member, dict) else None
            # its values as written, the mapping's, else OpenAPI's implicit one: the $ref's name
            tags = p["enum"] if "enum" in p else [by_ref[ref]] if ref in by_ref else \
                [ref.rsplit("/", 1)[-1]] if isinstance(ref, str) else []
            if not tags:
                raise SchemaError(_join(path, key), "the discriminator needs the value of each variant: a Literal "
                                                    "(an enum or const in the variant), or a $ref to it and a "
                                                    "discriminator mapping")
            variants.append((v, refs, tuple(json.dumps(t, ensure_ascii=False) for t in tags), vbase))
        return key, variants

    def variant(self, v, vpath, base, refs, key, selector, tags, own=False) -> tuple:
        """One member of a union: its object but for the tag key (with `own`, that key's value
        first), as a group the selector picks."""
        self.enter(refs, vpath)
        try:
            names = {json.loads(t) for t in tags} | {r.rsplit("/", 1)[-1] for r in refs}
            g = self.open("variant", vpath, selector=selector, tags=tags,
                          names=tuple(sorted(n for n in names if isinstance(n, str))))
            first = ((key, self.value(v["properties"][key], _join(vpath, key), base=base)),) if own else ()
            obj = self.object(v, vpath, base, key, ", ", "")
            return g, self.close(g, obj._replace(fields=first + obj.fields))
        finally:
            self.leave(refs)

    def one_slot(self, path, key, variants, nullable) -> int:
        """A union as one regex slot holding its variant's whole object, keys and all: the
        alternation of each variant's fields, laid out as `object` would, as one pattern;
        its budget is the longest variant's fixed tokens plus its fields' budgets."""
        members, patterns, budget = [], [], len(self.encode("null", path)) if nullable else 1
        for v, refs, tags, base in variants:
            vpath = tagged(path, tags)
            sub = Builder(self.doc, self.tok, self.options, self.strict)
            sub.active, sub.key_groups = list(self.active), False
            sub.enter(refs, vpath)
            sub.object(v, vpath, base)
            if any(slot.get("verbatim") for slot in sub.slots):
                raise SchemaError(vpath, "a one_slot union's fields are one pattern, not copies: drop one_slot "
                                         "(each field then a slot of its own) or verbatim")
            if sub.groups:
                raise SchemaError(vpath, "a one_slot union needs variants of plain fields: no lists, "
                                         "no nested or optional models")
            pieces = []   # fixed texts (adjacent ones joined) and (key, Slot), in order
            for kind, x in sub.pieces:   # ("text", str) or ("slot", i): no groups here
                if kind == "slot":
                    pieces.append((sub.slots[x]["path"].rsplit(".", 1)[-1], Slot(start=0, **sub.slots[x])))
                elif pieces and isinstance(pieces[-1], str):
                    pieces[-1] += x
                else:
                    pieces.append(x)
            members += [(tag, tuple(pieces)) for tag in tags]
            patterns.append("".join(literal(p) if isinstance(p, str) else f"(?:{_whole_pattern(p[1])})"
                                    for p in pieces))
            budget = max(budget, sum(len(self.encode(p, vpath)) if isinstance(p, str) else p[1].budget
                                     for p in pieces))
        pattern = "null|" * nullable + "|".join(f"(?:{p})" for p in patterns)
        return self.slot(path, "value", budget, pattern=pattern, nullable=nullable, union=(key, tuple(members)))

    def _both(self, item, contains, path, base, strict=False) -> dict | None:
        """The schema of an item that is `item` and meets `contains`: None where the two do not
        merge, or (not `strict`) where no item is both."""
        try:
            both = merge(self.doc.resolve(item, path, base).schema, self.doc.resolve(contains, path, base).schema, path)
            self.doc.resolve(both, path, base)   # (a const that breaks the type beside it)
            return both
        except Unsatisfiable:
            if strict:
                raise
            return None
        except SchemaError:
            return None

    def array(self, s, path, nullable, tokens, base):
        """Up to maxItems items (or Options.items for an open list), prefixItems first; items past
        minItems are optional (absent ones cost one decision in the block's first step)."""
        prefix = s.get("prefixItems") or (s["items"] if isinstance(s.get("items"), list) else [])
        rest = s.get("additionalItems", True) if isinstance(s.get("items"), list) else s.get("items", True)
        if ("additionalItems" if isinstance(s.get("items"), list) else "items") not in s:
            rest = s.get("unevaluatedItems", rest)   # the items past prefixItems no other keyword evaluates
        least, most = s.get("minItems", 0), s.get("maxItems")
        need = contains_needs(s, self.doc.keywords)
        # minContains items are ones `contains` asks for: the first prefix item that may be one (it
        # and those before it written), else as many right after the prefix where maxItems and
        # maxContains leave them room, else first (the check counts the rest)
        first = next(((k, both) for k, item in enumerate(prefix)
                      if (both := self._both(item, s["contains"], path, base)) is not None), None) if need else None
        if first is not None:
            k, both = first
            prefix, least = [*prefix[:k], both, *prefix[k + 1:]], max(least, k + 1)
        elif need and rest is not False and (not prefix or "maxContains" not in s
                                             and (most is None or len(prefix) + need <= most)):
            try:
                if (held := self._both(rest, s["contains"], path, base, strict=True)) is not None:
                    prefix, least = [*prefix, *[held] * need], max(least, len(prefix) + need)
            except Unsatisfiable:   # no item past the prefix is both
                if not prefix:
                    raise Unsatisfiable(path, f"no item meets both its items and its contains schema, and "
                                              f"minContains {need} asks for such items; fix the two schemas") from None
        if rest is False:
            most = len(prefix) if most is None else min(most, len(prefix))
        open_list = most is None or most > BOUNDED_ITEMS   # a long bound is laid out as an open list's cap
        count = min(len(prefix) + self.cap(None, least - len(prefix)), most or 1 << 30) if open_list else most
        blocks = s.get("item_blocks", False)
        self.text("[")
        items, prev = [], None
        self.lists += 1
        self.open_parts |= open_list
        for k in range(count):
            if blocks and k:
                self.pieces.append(("block", None))
            mark = self.mark()
            item, item_path = prefix[k] if k < len(prefix) else rest, f"{path}[{k}]"
            g = self.open("item", item_path, required=k < least, prev=prev)
            self.text(", " * (k > 0))
            try:
                node = self.value(item, item_path, tokens, base)
            except (_TooDeep, Unsatisfiable):
                if k < least:
                    raise
                self.rollback(mark)   # past the recursion depth: the list ends here
                break
            if not self.groups[g]["slots"]:   # nothing in the item tells it is there (a list of lists, an
                self.rollback(mark)           # object of optional keys): its whole value as one slot
                g = self.open("item", item_path, required=k < least, prev=prev)
                self.text(", " * (k > 0))
                schema, nullable, _, item_base = self.resolve(item, item_path, base)
                node = self.whole(schema, item_path, nullable, tokens, item_base)
            items.append((g, self.close(g, node)))
            prev = g
        self.lists -= 1
        self.text("]")
        return ListNode(tuple(items), nullable)

    def string(self, s, path, nullable, tokens):
        if not self.strict and s.get("contentMediaType") == "application/json":   # pydantic's Json[...]
            raise SchemaError(path, "a Json[...] field holds its value as a string of JSON text, which the model "
                                    "would have to write with its quotes escaped; declare the field as its inner "
                                    "type (Json[list[int]] -> list[int])")
        content, size, length, checks, also = string_content(s, path, self.strict, self.options.default_tokens,
                                                             quoted=nullable, letter_tokens=self.options.letter_tokens,
                                                             copied=bool(s.get("verbatim")))
        parent, _, _ = path.rpartition(".")
        before, beside = (s.get(key) and (f"{parent}.{s[key]}" if parent else s[key]) for key in SIBLING_KEYS)
        size = min(size, STRING_TOKENS_CAP)
        spec = dict(checks=tuple(Check(*c) for c in checks), length=self.counted(length, tokens or size, path),
                    verbatim=bool(s.get("verbatim")), before=before, beside=beside, user_budget=tokens is not None)
        if nullable:
            return self.slot(path, "value", tokens or max(size + 2, 4), pattern=f'null|"(?:{content})"',
                             also=also and f'null|"(?:{also})"', nullable=True, **spec)
        self.text('"')
        slot = self.slot(path, "string", tokens or size, pattern=content, also=also, **spec)
        self.text('"')
        return slot

    def counted(self, length: tuple | None, budget: int, path: str) -> tuple | None:
        """The (min, max) length a string slot of `budget` tokens counts (its counter grows with
        them): a max its tokens cannot reach, even raised to the min's, or past COUNTED_LENGTH is
        left to the check; a min past COUNTED_LENGTH is refused."""
        if length is None:
            return None
        (lo, hi), per = length, per_tokenizer(self.tok)
        if lo > COUNTED_LENGTH:
            raise SchemaError(path, f"min_length {lo} asks for more than the {COUNTED_LENGTH} characters a string "
                                    f"slot is laid out for; lower min_length")
        if "longest" not in per:
            per["longest"] = max(map(len, self.tok.vocabulary_map()))   # bytes: at least its characters
        most = max(budget, -(-lo // per["longest"])) * per["longest"]
        hi = hi if hi is not None and hi < min(most, COUNTED_LENGTH + 1) else None
        return (lo, hi) if lo or hi is not None else None

    def number(self, s, path, nullable, tokens, integer):
        pattern, size, checks = number_pattern(s, integer)
        if nullable:
            pattern, size = f"null|(?:{pattern})", max(size, 4)
        return self.slot(path, "value", tokens or size, pattern=pattern, checks=tuple(Check(*c) for c in checks),
                         nullable=nullable, user_budget=tokens is not None)

    def choice(self, path, texts, tokens) -> int:
        ids = tuple(tuple(self.encode(t, path)) for t in texts)
        need = max(map(len, ids))
        if tokens is not None and tokens < need:
            raise SchemaError(path, f"its longest choice needs {need} tokens but max_tokens is {tokens}; "
                                    f"raise max_tokens to {need}")
        return self.slot(path, "value", tokens or need, kind="choice", choices=tuple(texts),
                         choice_ids=ids, nullable="null" in texts)

    def slot(self, path, json_kind, budget, kind="regex", user_budget=True, **spec) -> int:
        if path in self.unfillable:   # an optional part's parent leaves it out; a required one's, refused
            raise Unsatisfiable(path, "no value meets this field's pattern, length and bounds together: loosen "
                                      "one of them")
        i = len(self.slots)
        if user_budget:
            self.fixed.add(path)
        else:
            budget = max(budget, self.budgets.get(path, 0))   # raised where a first build fell short
        self.slots.append(dict(path=path, json_kind=json_kind, budget=budget, kind=kind, group=self.group, **spec))
        self.size += budget
        if self.room is not None and self.size > self.room and self.open_parts:
            raise _TooBig
        self.pieces.append(("slot", i))
        g = self.group
        while g is not None:
            self.groups[g]["slots"].append(i)
            g = self.groups[g]["parent"]
        return i

    def text(self, text: str) -> None:
        self.pieces.append(("text", text))

    def open(self, kind, path, **extra) -> int:
        g = len(self.groups)
        self.groups.append(dict(index=g, path=path, kind=kind, parent=self.group, slots=[], **extra))
        self.pieces.append(("open", g))
        self.group = g
        return g

    def mark(self) -> tuple:
        return len(self.pieces), len(self.slots), len(self.groups), len(self.left_out), self.group

    def rollback(self, mark: tuple) -> None:
        """Forget everything laid out since `mark` (a part cut off past the recursion depth)."""
        pieces, slots, groups, left_out, self.group = mark
        self.size -= sum(s["budget"] for s in self.slots[slots:])
        del self.pieces[pieces:], self.slots[slots:], self.groups[groups:], self.left_out[left_out:]
        g = self.group
        while g is not None:   # only the groups open at the mark can hold slots laid out since
            held = self.groups[g]["slots"]   # (ascending: slots join their groups as they are laid out)
            del held[bisect.bisect_left(held, slots):]
            g = self.groups[g]["parent"]

    def close(self, g, node):
        self.pieces.append(("close", g))
        self.group = self.groups[g]["parent"]
        return node

    def encode(self, text: str, path: str) -> list[int]:
        ids = self.tok.encode(text)
        if b"".join(self.tok.token_bytes(i) for i in ids) != text.encode():
            raise SchemaError(path, f"the tokenizer cannot write {text!r} exactly; "
                                    "use field names and values it can write")
        return ids

    def build(self, model, mask_id: int, pad_id: int) -> Canvas:
        tree = self.value(self.doc.root, "", base=self.doc.base)
        ids, buf, stack, fixed, start, blocks = [], [], [], {}, {}, [0]
        children: dict[int, list[int]] = {}
        for g in self.groups:
            children.setdefault(g["parent"], []).append(g["index"])
        for kind, x in self.pieces + [("end", None)]:
            if kind == "text":
                buf.append(x)
                continue
            new = self.encode("".join(buf), "") if buf else []   # fixed text between markers, once
            for g in stack:
                fixed[g] += range(len(ids), len(ids) + len(new))
            ids += new
            buf.clear()
            if kind == "slot":
                self.slots[x]["start"] = len(ids)
                ids += [mask_id] * self.slots[x]["budget"]
            elif kind == "block":
                blocks.append(len(ids))
            elif kind == "open":
                stack.append(x)
                fixed[x], start[x] = [], len(ids)
            elif kind == "close":
                stack.pop()
                self.groups[x].update(start=start[x], end=len(ids), fixed=tuple(fixed[x]),
                                      slots=tuple(self.groups[x]["slots"]), children=tuple(children.get(x, ())))
        blocks = tuple(sorted({b for b in blocks if b < len(ids)}))
        _check_order(self.slots, blocks)
        return Canvas(tuple(ids), tuple(Slot(**s) for s in self.slots), tuple(Group(**g) for g in self.groups),
                      mask_id, pad_id, self.tok, self.doc.root, model, tree, blocks, left_out=tuple(self.left_out))


def _check_order(slots: list[dict], blocks: tuple[int, ...]) -> None:
    """copies_before and copies_beside name a verbatim sibling decoded no later than the field
    (a field waits for it)."""
    at = {s["path"]: s for s in slots}
    for s in slots:
        for name, (key, _) in SIBLING_KEYS.items():
            other = at.get(s.get(key))
            if s.get(key) and not (other and other.get("verbatim")):
                raise SchemaError(s["path"], f"{name} names {s[key]!r}, which is no verbatim str field "
                                             "beside this one: name a sibling marked verbatim, by its JSON name "
                                             "(its alias where it has one)")
            if other and (other.get("before") or other.get("beside")
                          or bisect.bisect(blocks, other["start"]) > bisect.bisect(blocks, s["start"])):
                raise SchemaError(s["path"], f"{name} {s[key]!r}: that field is decoded after this one or "
                                             "waits for another itself; name one in the same block that names none")


def _whole_pattern(slot: Slot) -> str:
    """A field's pattern inside a one-slot union: a choice as the alternation of its texts,
    a plain string's length bound (the automaton's, for a slot of its own) as a repeat."""
    if slot.kind == "choice":
        return "|".join(map(literal, slot.choices))
    if slot.also is not None:
        raise SchemaError(slot.path, "in a one_slot union a string cannot have both a pattern and a format "
                                     "(no regex intersects them); drop one, or leave out one_slot")
    if slot.length is None:
        return slot.pattern
    if slot.pattern not in (CHAR + "*", f'null|"(?:{CHAR}*)"'):
        raise SchemaError(slot.path, "in a one_slot union a string cannot have both a pattern and a length "
                                     "bound (no regex intersects them); drop one, or leave out one_slot")
    lo, hi = slot.length
    return slot.pattern.replace(CHAR + "*", f"{CHAR}{{{lo},{'' if hi is None else hi}}}")



_CACHE: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def build_canvas(schema: Any, tokenizer, *, max_tokens: int | None = None, context: int | None = None,
                 mask_id: int | None = None, pad_id: int | None = None, room: int | None = None,
                 vocab_size: int | None = None, letter_tokens: int = 1) -> Canvas:
    """Lay out a pydantic model class or a JSON Schema (dict, boolean or .json path) over `tokenizer`.

    `max_tokens`: budget of strings without max_length (default 24). `letter_tokens`: tokens a
    letter of the text may take (vocab.letter_tokens), which a free string's max_length counts.
    `room`: the tokens the canvas should stay within (default: 3/4 of `context`, the rest left to
    the prompt); open lists, maps and recursion are laid out smaller until it does (SHRINK).
    `context`: the most tokens it may take (SchemaError beyond). `vocab_size`: the model's
    logits, when they outnumber the tokenizer's ids. Cached per (schema, tokenizer, options).
    """
    mask_id = tokenizer.mask_id if mask_id is None else mask_id
    pad_id = tokenizer.pad_id if pad_id is None else pad_id
    if mask_id is None or pad_id is None or mask_id == pad_id:
        raise UsageError("the canvas needs distinct mask and pad tokens; pass mask_id= and pad_id=")
    model = schema if isinstance(schema, type) and hasattr(schema, "model_json_schema") else None
    if model is not None and (model.__module__, model.__qualname__) == ("pydantic.main", "BaseModel"):
        raise SchemaError("", "BaseModel itself has no fields; give a model of your own (class Record(BaseModel): ...)")
    if isinstance(schema, (str, Path)):
        try:
            schema = read_schema(schema)
        except (OSError, ValueError) as e:
            raise SchemaError("", f"{schema}: not a readable JSON Schema file ({e})") from None
    if model is None and not isinstance(schema, (dict, bool)):
        hint = ("; for a dataclass or a TypedDict, make it a field of a pydantic model, or pass "
                "TypeAdapter(it).json_schema()") if isinstance(schema, type) else ""
        raise SchemaError("", f"{schema!r} is not a pydantic model class or a JSON Schema{hint}")
    if room is None and context is not None:
        room = context * 3 // 4
    try:
        text = None if model else json.dumps(schema, ensure_ascii=False, default=_json_number)   # key order and all
        key = (model or text, max_tokens, mask_id, pad_id, room, vocab_size, letter_tokens)
    except RecursionError:
        key = None   # past what the JSON writer nests: check_nesting says so
    except (TypeError, ValueError) as e:   # a set, an object, a dict that holds itself
        raise SchemaError("", f"the schema holds what JSON has no value for ({e}); give it as JSON data: dicts, "
                              "lists, strings, numbers, booleans and None") from None
    cache = _CACHE.setdefault(tokenizer, {})
    if key not in cache:
        if model is None:
            check_nesting(schema)
            _check_unicode(text)
            raw = json.loads(text)   # (a Decimal read as its number)
        else:
            from .model_schema import model_schema   # (pydantic is imported only for a model)
            raw = model_schema(model)
            _check_unicode(json.dumps(raw, ensure_ascii=False))
        options = Options(default_tokens=max_tokens or DEFAULT_STRING_TOKENS, letter_tokens=letter_tokens)
        cache[key] = _lay_out(raw, model, tokenizer, options, mask_id, pad_id, room, vocab_size)
    if context is not None:
        cache[key].check_fits(context)
    return cache[key]


def _check_unicode(text: str) -> None:
    """SchemaError where the schema's JSON `text` holds a lone surrogate (an escape such as
    \\ud800 without its pair), which no text holds: the title, a key or a value no prompt or
    output could write."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise SchemaError("", f"a string of the schema holds a lone surrogate ({e.object[e.start]!r}), which no text "
                              "holds; fix that string") from None


def _json_number(value) -> float:
    """A Decimal in a schema (json.loads(parse_float=Decimal) reads one so) as the number it is."""
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"{type(value).__name__} {value!r} is not JSON")


def _lay_out(raw, model, tokenizer, base: Options, mask_id, pad_id, room, vocab_size) -> Canvas:
    """The canvas of the largest Options in SHRINK (with `base`'s string budgets) that fits `room`,
    each slot with the tokens its shortest value needs at least (a second build raises the
    estimates that fall short)."""
    from .validation import checker, valid_schema

    if model is not None:
        valid_schema(raw)   # a model's schema keeps to its draft too (Field(multiple_of=0) had panicked pydantic)
    check = None if model is not None else checker(raw)
    if raw is False:
        raise SchemaError("", "the schema is `false`: no value is valid; give a schema a value can satisfy")
    doc = Document(raw if isinstance(raw, dict) else {})
    budgets: dict[str, int] = {}
    for k, options in enumerate(SHRINK):
        options = replace(options, default_tokens=base.default_tokens, letter_tokens=base.letter_tokens)
        if k == len(SHRINK) - 1:
            return replace(_keys_within(doc, model, tokenizer, options, budgets, mask_id, pad_id, vocab_size, room),
                           check=check)
        try:
            canvas, open_parts = _build(doc, model, tokenizer, options, budgets, mask_id, pad_id, vocab_size, room)
        except _TooBig:
            continue
        if room is None or len(canvas) <= room or not open_parts:
            break
    return replace(canvas, check=check)


def _keys_within(doc, model, tokenizer, options, budgets, mask_id, pad_id, vocab_size, room) -> Canvas:
    """SHRINK's last canvas: optional keys, in schema order, while the slots stay within a share
    of the room, the largest share whose canvas (fixed text included) fits it; built whole at the
    smallest (no optional keys), where a canvas too big for the room then says so."""
    for share in (1, 3 / 4, 1 / 2, 1 / 4, 0):
        canvas, _ = _build(doc, model, tokenizer, replace(options, keys_within=int(room * share)), budgets, mask_id,
                           pad_id, vocab_size, None)
        if len(canvas) <= room:
            break
    return canvas


def _build(doc, model, tokenizer, options, budgets, mask_id, pad_id, vocab_size, room) -> tuple[Canvas, bool]:
    """(canvas, whether it has open parts) under `options`, built again while a slot's budget
    is short of its shortest value (`budgets` keeps the raised ones) or no value fills it (an
    optional part left out, a required one refused); _TooBig past `room`."""
    from .constraints import shortest

    unfillable: frozenset = frozenset()
    for _ in range(4):
        builder = Builder(doc, tokenizer, options, strict=model is None, budgets=budgets, room=room,
                          unfillable=unfillable)
        try:
            canvas = builder.build(model, mask_id, pad_id)
        except _TooDeep as e:
            raise SchemaError(str(e), "the schema refers to itself here with no way to stop: make the "
                                      "recursive field optional, nullable or a list without minItems") from None
        needs = {s.path: shortest(s, tokenizer, vocab_size, pad_id, mask_id)
                 for s in canvas.slots if s.kind == "regex" and s.path not in builder.fixed}
        if empty := {path for path, need in needs.items() if need is None}:
            unfillable |= empty   # built again without them, or refused where they are required
            continue
        short = {s.path: needs[s.path] for s in canvas.slots if needs.get(s.path, 0) > s.budget}
        if not short:
            break
        budgets.update(short)
    if empty:
        raise SchemaError(min(empty), "no value meets this field's pattern, length and bounds together: loosen one "
                                      "of them")
    return canvas, builder.open_parts


def _conditional(s) -> list[dict]:
    """The subschemas that apply to an object on a condition: then, else, and those of
    dependentSchemas (draft 7: a `dependencies` schema)."""
    dependent = [*(s.get("dependentSchemas") or {}).values(), *(s.get("dependencies") or {}).values()]
    return [w for w in (s.get("then"), s.get("else"), *dependent) if isinstance(w, dict)]


def _forbids(w, key: str) -> bool:
    """Whether subschema `w` says an object may not hold `key` (not: {required: [key]}, or key: false)."""
    banned = w.get("not") if isinstance(w, dict) else None
    return isinstance(w, dict) and ((w.get("properties") or {}).get(key) is False
                                    or isinstance(banned, dict) and key in (banned.get("required") or []))


def _written(s, props, required, skip) -> list[str]:
    """The keys of a JSON Schema object written always (no key group): those a rule may ask for
    that the repair, which can only leave keys out, could not add. The required ones; the
    `required` of then (else) unless else (then) forbids the key, and of the first key-rule
    anyOf/oneOf member that the properties describe (schema_refs' `x-written`); those a written
    key's dependentRequired, or its dependentSchemas' required, names (draft 7: `dependencies`);
    then the first optional keys while minProperties asks for more. (Under unevaluatedProperties
    false, a key a branch alone describes is one the other branch forbids.)"""
    branches = s.get("then"), s.get("else")
    closed, own = s.get("unevaluatedProperties") is False, set(s.get("properties") or {})

    def forbidden(other, k) -> bool:
        described = own | set((other.get("properties") or {}) if isinstance(other, dict) else ())
        return _forbids(other, k) or closed and k not in described

    rules = [[k for k in w.get("required", []) if not forbidden(other, k)]
             for w, other in (branches, branches[::-1]) if isinstance(w, dict)]
    keys = [k for k in dict.fromkeys([*required, *s.get("x-written", []), *(k for r in rules for k in r)])
            if k in props and k != skip]
    needs = _needs(s)
    for k in keys:   # (keys grows as it is walked)
        keys += [d for d in needs.get(k, []) if d in props and d != skip and d not in keys]
    more = s.get("minProperties", 0) - len(keys)
    keys += [k for k, v in props.items() if k not in keys and k != skip and v is not False][:max(more, 0)]
    return keys


def _needs(s) -> dict[str, list[str]]:
    """Key -> the keys its presence requires: dependentRequired, dependentSchemas' required
    (draft 7: `dependencies`, either kind)."""
    needs = {k: v.get("required", []) if isinstance(v, dict) else v if isinstance(v, list) else []
             for k, v in {**(s.get("dependencies") or {}), **(s.get("dependentSchemas") or {})}.items()}
    return {**needs, **(s.get("dependentRequired") or {})}


def _asked(s) -> list[str]:
    """The keys a rule of object schema `s` may require besides `required`: then's and else's,
    the dependencies', the first key-rule member's (x-written)."""
    branches = [w.get("required", []) for w in (s.get("then"), s.get("else")) if isinstance(w, dict)]
    return [k for keys in (s.get("x-written", []), *branches, *_needs(s).values()) for k in keys
            if isinstance(k, str)]


def content_key(pattern: str | None, path: str) -> str:
    """A map key's content regex: the key pattern's (a search, as JSON Schema reads it), not empty;
    loosened where no automaton holds it (the final check matches keys to the pattern itself)."""
    if not pattern:
        return f"{CHAR}+"
    return f"(?:{content_pattern(pattern if regular(pattern) else loosened(pattern), path)})"


def _search(pattern: str, text: str) -> bool:
    import re
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False
