"""The JSON Schema walk: a pydantic model or JSON Schema in, a Canvas (layout.py) out.

Resolves $ref, anyOf-with-null and discriminated unions, turns each leaf into a
slot (regex or choice, with its budget and checks) and each list item, optional
object and union variant into a group (a `one_slot` union into one slot), and
refuses what cannot be laid out with a SchemaError that names the field and what
to use instead. User patterns are
rewritten for JSON string content here too. Knows nothing of torch or models.
"""

from __future__ import annotations

import json
import weakref
from pathlib import Path
from typing import Any

from .errors import SchemaError, UsageError
from .layout import Canvas, Check, Group, ListNode, ObjectNode, OptionalNode, Slot, UnionNode
from .patterns import (CHAR, DEFAULT_STRING_TOKENS, FLOAT_FRACTION_DIGITS, FLOAT_INT_DIGITS, FORMATS, INT_DIGITS,
                       NO_FORMATS, content_pattern, literal, plain_width)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class Builder:
    """Walks a JSON Schema, emitting fixed text, slots and group markers in canvas order."""

    def __init__(self, root: dict, tokenizer, default_tokens: int):
        self.root, self.tok, self.default_tokens = root, tokenizer, default_tokens
        self.defs = {**root.get("definitions", {}), **root.get("$defs", {})}
        # ("text", str) | ("slot", i) | ("open", g) | ("close", g) | ("block", None): a block starts here
        self.pieces: list[tuple] = []
        self.slots: list[dict] = []
        self.groups: list[dict] = []
        self.group: int | None = None   # the innermost open group
        self.active: list[str] = []     # $refs being walked, to refuse recursion

    def resolve(self, s: dict, path: str) -> tuple[dict, bool, list[str]]:
        """Follow $ref, allOf of one, anyOf/oneOf with null: (schema, nullable, refs followed)."""
        nullable, refs = False, []
        while True:
            if "$ref" in s:
                ref = s["$ref"]
                if not ref.startswith("#/") or ref.rsplit("/", 1)[-1] not in self.defs:
                    raise SchemaError(path, f"$ref {ref} is not a local definition; put it under $defs")
                refs.append(ref)
                s = {**self.defs[ref.rsplit("/", 1)[-1]], **{k: v for k, v in s.items() if k != "$ref"}}
            elif "allOf" in s:
                if len(s["allOf"]) != 1:
                    raise SchemaError(path, "allOf of several schemas cannot be laid out; merge them in one model")
                s = {**s["allOf"][0], **{k: v for k, v in s.items() if k != "allOf"}}
            elif ("anyOf" in s or "oneOf" in s) and "discriminator" not in s:
                word = "anyOf" if "anyOf" in s else "oneOf"
                members = [m for m in s[word] if m.get("type") != "null"]
                nullable |= len(members) < len(s[word])
                rest = {k: v for k, v in s.items() if k != word}
                if len(members) == 1:
                    s = {**members[0], **rest}
                elif all("enum" in m or "const" in m for m in members):
                    s = {**rest, "enum": [v for m in members for v in m.get("enum", [m.get("const")])]}
                else:
                    kinds = ", ".join(str(m.get("type") or m.get("$ref", "?").rsplit("/", 1)[-1]) for m in members)
                    raise SchemaError(path, f"a union of {kinds} without a discriminator cannot be laid out; "
                                            "use one type, or models told apart by "
                                            "Annotated[Union[A, B], Field(discriminator='kind')]")
            elif isinstance(s.get("type"), list):
                types = [t for t in s["type"] if t != "null"]
                nullable |= len(types) < len(s["type"])
                if len(types) != 1:
                    raise SchemaError(path, f"a value of types {types} cannot be laid out; use one type")
                s = {**s, "type": types[0]}
            else:
                return s, nullable, refs

    def enter(self, refs: list[str], path: str) -> None:
        if any(r in self.active for r in refs):
            raise SchemaError(path, "the model refers to itself; a recursive model has no fixed layout: "
                                    "unroll it to a fixed depth with separate models")
        self.active += refs

    def value(self, s: dict, path: str, tokens: int | None = None):
        s, nullable, refs = self.resolve(s, path)
        self.enter(refs, path)
        tokens = s.get("max_tokens", tokens)
        if tokens is not None and (not isinstance(tokens, int) or tokens < 1):
            raise SchemaError(path, f"max_tokens must be a positive int, got {tokens!r}")
        node = self._value(s, path, nullable, tokens)
        del self.active[len(self.active) - len(refs):]
        return node

    def _value(self, s, path, nullable, tokens):
        t = s.get("type")
        if s.get("verbatim") and (t != "string" or "enum" in s or "const" in s):
            raise SchemaError(path, "verbatim applies to str fields only (text copied as written), "
                                    "not to numbers, choices or models")
        if s.get("item_blocks") and t != "array":
            raise SchemaError(path, "item_blocks applies to lists only (each item decoded as a block of its own)")
        if "discriminator" in s:
            return self.union(s, path, nullable)
        if "enum" in s or "const" in s:
            values = s["enum"] if "enum" in s else [s["const"]]
            if any(isinstance(v, (dict, list)) for v in values):
                raise SchemaError(path, "enum values must be strings, numbers or booleans")
            texts = [json.dumps(v, ensure_ascii=False) for v in values if v is not None]
            return self.choice(path, texts + ["null"] * (nullable or None in values), tokens)
        if t == "object" or "properties" in s:
            if not s.get("properties") or isinstance(s.get("additionalProperties"), dict):
                raise SchemaError(path, "a model without fields has nothing to lay out" if "properties" in s
                                  else "a dict / mapping has no fixed keys to lay out; use a model with named fields")
            if not nullable:
                return self.object(s, path)
            g = self.open("optional", path)
            return OptionalNode(g, self.close(g, self.object(s, path)))
        if t == "array":
            return self.array(s, path, nullable, tokens)
        if t in ("boolean", "null"):
            return self.choice(path, ["true", "false"] * (t == "boolean") + ["null"] * (nullable or t == "null"), tokens)
        if t in ("integer", "number"):
            return self.number(s, path, nullable, tokens, t == "integer")
        if t == "string":
            return self.string(s, path, nullable, tokens)
        raise SchemaError(path, f"a value of {'type ' + repr(t) if t else 'any type (Any)'} cannot be "
                                "laid out; use str, int, float, bool, a Literal, an Enum, a model or a list")

    def object(self, s, path, skip=None, lead="{", tail="}"):
        fields = []
        for key, sub in s["properties"].items():
            if key != skip:
                self.text(f"{lead}{json.dumps(key, ensure_ascii=False)}: ")
                fields.append((key, self.value(sub, _join(path, key))))
                lead = ", "
        self.text(tail)
        return ObjectNode(tuple(fields))

    def union(self, s, path, nullable):
        disc = s["discriminator"] if isinstance(s["discriminator"], dict) else {"propertyName": s["discriminator"]}
        key, by_ref = disc["propertyName"], {ref: tag for tag, ref in disc.get("mapping", {}).items()}
        variants = []
        for member in s.get("oneOf") or s.get("anyOf") or []:
            v, _, refs = self.resolve(member, path)
            if key not in v.get("properties", {}):
                raise SchemaError(path, f"every variant of the union needs the discriminator field `{key}`")
            p = self.resolve(v["properties"][key], _join(path, key))[0]
            tags = p.get("enum") or [p["const"]] if "const" in p or "enum" in p else \
                [by_ref[member["$ref"]]] if member.get("$ref") in by_ref else []
            if not tags:
                raise SchemaError(_join(path, key), "the discriminator needs a Literal value in each variant")
            variants.append((v, refs, tuple(json.dumps(t, ensure_ascii=False) for t in tags)))
        texts = [t for *_, tags in variants for t in tags]
        if len(set(texts)) < len(texts):
            raise SchemaError(_join(path, key), "two variants share a discriminator value")
        if s.get("one_slot"):
            return self.one_slot(path, key, variants, nullable)
        self.text("{" + json.dumps(key, ensure_ascii=False) + ": ")
        selector = self.choice(_join(path, key), texts + ["null"] * nullable, None)
        out = []
        for v, refs, tags in variants:
            vpath = f"{path}<{json.loads(tags[0])}>"
            self.enter(refs, vpath)
            g = self.open("variant", vpath, selector=selector, tags=tags)
            out.append((g, self.close(g, self.object(v, vpath, key, ", ", ""))))
            del self.active[len(self.active) - len(refs):]
        self.text("}")
        return UnionNode(key, selector, tuple(out))

    def one_slot(self, path, key, variants, nullable) -> int:
        """A union as one regex slot holding its variant's whole object, keys and all: the
        alternation of each variant's fields, laid out as `object` would, as one pattern;
        its budget is the longest variant's fixed tokens plus its fields' budgets."""
        members, patterns, budget = [], [], len(self.encode("null", path)) if nullable else 1
        for v, refs, tags in variants:
            vpath = f"{path}<{json.loads(tags[0])}>"
            sub = Builder(self.root, self.tok, self.default_tokens)
            sub.active = list(self.active)
            sub.enter(refs, vpath)
            sub.object(v, vpath)
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

    def array(self, s, path, nullable, tokens):
        if "prefixItems" in s or isinstance(s.get("items"), list):
            raise SchemaError(path, "a tuple cannot be laid out; use a model with named fields")
        if s.get("uniqueItems"):
            raise SchemaError(path, "a set cannot be laid out; use list[X] with Field(max_length=N)")
        if "maxItems" not in s:
            raise SchemaError(path, "a list needs a bound to be laid out: add Field(max_length=N) (maxItems)")
        if not s.get("items"):
            raise SchemaError(path, "a list of Any cannot be laid out; give the item type")
        self.text("[")
        items, prev, blocks = [], None, bool(s.get("item_blocks"))
        for k in range(s["maxItems"]):
            if blocks and k:
                self.pieces.append(("block", None))
            g = self.open("item", f"{path}[{k}]", required=k < s.get("minItems", 0), prev=prev)
            self.text(", " * (k > 0))
            items.append((g, self.close(g, self.value(s["items"], f"{path}[{k}]", tokens))))
            if not self.groups[g]["slots"]:
                raise SchemaError(path, "list items need at least one field to tell they are present")
            prev = g
        self.text("]")
        return ListNode(tuple(items), nullable)

    def string(self, s, path, nullable, tokens):
        fmt, length, lo, hi, checks = s.get("format"), None, s.get("minLength", 0), s.get("maxLength"), []
        if fmt in NO_FORMATS:
            raise SchemaError(path, NO_FORMATS[fmt])
        if fmt in FORMATS:
            content, size = FORMATS[fmt]
            checks = [Check("format", fmt)] if fmt in ("date", "date-time") else []
        elif hi is not None and hi < lo:
            raise SchemaError(path, f"min_length {lo} exceeds max_length {hi}")
        else:
            content = content_pattern(s["pattern"], path) if "pattern" in s else CHAR + "*"
            size, length = hi or max(self.default_tokens, lo), (lo, hi) if lo or hi is not None else None
            if "pattern" in s and (width := plain_width(s["pattern"])) is not None:
                size = max(min(size, width), 1)  # no value of the pattern is longer
        checks += [Check("min_length", lo)] * (lo > 0) + [Check("max_length", hi)] * (hi is not None)
        spec = dict(checks=tuple(checks), length=length, verbatim=bool(s.get("verbatim")))
        if nullable:
            return self.slot(path, "value", tokens or max(size + 2, 4), pattern=f'null|"(?:{content})"',
                             nullable=True, **spec)
        self.text('"')
        slot = self.slot(path, "string", tokens or size, pattern=content, **spec)
        self.text('"')
        return slot

    def number(self, s, path, nullable, tokens, integer):
        lo, hi, xlo, xhi = (s.get(k) for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"))
        if isinstance(xlo, bool):   # draft 4 spelling
            lo, xlo = (None, lo) if xlo else (lo, None)
        if isinstance(xhi, bool):
            hi, xhi = (None, hi) if xhi else (hi, None)
        checks = [Check(op, b) for op, b in (("ge", lo), ("gt", xlo), ("le", hi), ("lt", xhi)) if b is not None]
        checks += [Check("multiple_of", s["multipleOf"])] if s.get("multipleOf") else []
        low, high = (lo if lo is not None else xlo), (hi if hi is not None else xhi)
        sign = not ((lo is not None and lo >= 0) or (xlo is not None and xlo >= -integer))
        if low is not None and high is not None:
            digits = len(str(int(max(abs(low), abs(high)))))
        elif high is not None and not sign:
            digits = len(str(int(abs(high))))
        else:
            digits = INT_DIGITS if integer else FLOAT_INT_DIGITS
        pattern = "-?" * sign + (f"(?:0|[1-9][0-9]{{0,{digits - 1}}})" if digits > 1 else "[0-9]")
        size = sign + digits + (not integer) * (1 + FLOAT_FRACTION_DIGITS)
        pattern += "" if integer else rf"(?:\.[0-9]{{1,{FLOAT_FRACTION_DIGITS}}})?"
        if nullable:
            pattern, size = f"null|(?:{pattern})", max(size, 4)
        return self.slot(path, "value", tokens or size, pattern=pattern, checks=tuple(checks), nullable=nullable)

    def choice(self, path, texts, tokens) -> int:
        ids = tuple(tuple(self.encode(t, path)) for t in texts)
        need = max(map(len, ids))
        if tokens is not None and tokens < need:
            raise SchemaError(path, f"its longest choice needs {need} tokens but max_tokens is {tokens}; "
                                    f"raise max_tokens to {need}")
        return self.slot(path, "value", tokens or need, kind="choice", choices=tuple(texts),
                         choice_ids=ids, nullable="null" in texts)

    def slot(self, path, json_kind, budget, kind="regex", **spec) -> int:
        i = len(self.slots)
        self.slots.append(dict(path=path, json_kind=json_kind, budget=budget, kind=kind, group=self.group, **spec))
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
        s, nullable, _ = self.resolve(self.root, "")
        if nullable or not ("properties" in s or "discriminator" in s):
            raise SchemaError("", "the root of a canvas must be a model (a JSON object)")
        tree = self.value(self.root, "")
        ids, buf, stack, fixed, start, blocks = [], [], [], {}, {}, [0]
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
                self.groups[x].update(start=start[x], end=len(ids), fixed=tuple(fixed[x]), slots=tuple(
                    self.groups[x]["slots"]), children=tuple(c["index"] for c in self.groups if c["parent"] == x))
        blocks = tuple(sorted({b for b in blocks if b < len(ids)}))
        return Canvas(tuple(ids), tuple(Slot(**s) for s in self.slots), tuple(Group(**g) for g in self.groups),
                      mask_id, pad_id, self.tok, self.root, model, tree, blocks)


def _whole_pattern(slot: Slot) -> str:
    """A field's pattern inside a one-slot union: a choice as the alternation of its texts,
    a plain string's length bound (the automaton's, for a slot of its own) as a repeat."""
    if slot.kind == "choice":
        return "|".join(map(literal, slot.choices))
    if slot.length is None:
        return slot.pattern
    if slot.pattern not in (CHAR + "*", f'null|"(?:{CHAR}*)"'):
        raise SchemaError(slot.path, "in a one_slot union a string cannot have both a pattern and a length "
                                     "bound (no regex intersects them); drop one, or leave out one_slot")
    lo, hi = slot.length
    return slot.pattern.replace(CHAR + "*", f"{CHAR}{{{lo},{'' if hi is None else hi}}}")


_CACHE: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def build_canvas(schema: Any, tokenizer, *, max_tokens: int | None = None, context: int | None = None,
                 mask_id: int | None = None, pad_id: int | None = None) -> Canvas:
    """Lay out a pydantic model class or a JSON Schema (dict or .json path) over `tokenizer`.

    `max_tokens`: budget of strings without max_length (default 24). `context`: the most
    tokens the canvas may take (SchemaError beyond). Cached per (schema, tokenizer, options).
    """
    mask_id = tokenizer.mask_id if mask_id is None else mask_id
    pad_id = tokenizer.pad_id if pad_id is None else pad_id
    if mask_id is None or pad_id is None or mask_id == pad_id:
        raise UsageError("the canvas needs distinct mask and pad tokens; pass mask_id= and pad_id=")
    model = schema if isinstance(schema, type) and hasattr(schema, "model_json_schema") else None
    if isinstance(schema, (str, Path)):
        schema = json.loads(Path(schema).read_text())
    if model is None and not isinstance(schema, dict):
        raise SchemaError("", f"{schema!r} is not a pydantic model class or a JSON Schema")
    cache = _CACHE.setdefault(tokenizer, {})
    key = (model or json.dumps(schema, sort_keys=True), max_tokens, mask_id, pad_id)
    if key not in cache:
        raw = model.model_json_schema() if model else schema
        cache[key] = Builder(raw, tokenizer, max_tokens or DEFAULT_STRING_TOKENS).build(model, mask_id, pad_id)
    if context is not None:
        cache[key].check_fits(context)
    return cache[key]
