"""A JSON Schema document read for layout: references followed, compositions merged.

`Document.resolve(schema, path, base)` turns any subschema into the form the schema walk
lays out: `$ref` followed (any JSON pointer into the document, `~0`/`~1` escapes and
percent-encoding, `$id` and `$anchor` targets, `$defs` and `definitions`; `$dynamicRef` and
`$recursiveRef` as `$ref` is, to their static target), `allOf` merged where its members
merge, boolean schemas read (`true` is any value, `false` none), `nullable`, null members of
`anyOf`/`oneOf` and `"null"` in type lists turned into a flag, type lists and unions of
several shapes kept as `anyOf` of their members.

The merge is the layout's guide, not the law: every output is validated against the
original schema at the end (api.py), so a keyword the merge cannot express is enforced
there. What no value can satisfy (`false`, contradictory types, bounds or enums) and what
lies outside the document (remote references, but for the JSON Schema meta-schemas, which
the `jsonschema` package ships) is refused with a SchemaError. `read_schema` makes a schema
file one document with the local files its references name.
Knows nothing of canvases, tokenizers or models.
"""

from __future__ import annotations

import json
import math
import posixpath
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse, uses_relative

from .errors import SchemaError
from .patterns import FLOAT_FRACTION_DIGITS, exact, exact_bounds, number_bounds
from .validation import draft_validator, openapi_nullable, subschemas

_LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains")
_UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains")
_COUNTS = [k for k in _LOWER + _UPPER if "imum" not in k]
# a dynamic reference is followed as a static one: the same target where one schema resource of
# the document holds the anchor (the final check resolves it as its draft says)
REFS = ("$ref", "$dynamicRef", "$recursiveRef")
ROOT_DIR = "file:///clover-struct/"
ROOT = f"{ROOT_DIR}.this-document"   # the base URI of a document with no $id (a name no file has)
MAX_UNION = 16   # allOf of two anyOf: their pairs as one anyOf up to this many (past it, the final check's)
NULLABLE = "x-clover-nullable"   # a merged allOf member that allows null besides its schema


MAX_NESTING = 128   # JSON levels a schema may nest: jsonschema's check of a schema recurses a few frames a level


def nesting(value) -> int:
    """How many levels of lists and objects `value` nests (a scalar: 0), walked without recursion."""
    depth, level = 0, [value]
    while containers := [x for x in level if isinstance(x, (dict, list))]:
        depth += 1
        level = [v for x in containers for v in (x.values() if isinstance(x, dict) else x)]
    return depth


def check_nesting(schema) -> None:
    """SchemaError for a schema that nests past MAX_NESTING levels."""
    if (depth := nesting(schema)) > MAX_NESTING:
        raise SchemaError("", f"the schema nests {depth} levels of objects and lists deep; clover-struct reads at "
                              f"most {MAX_NESTING}: flatten it (move inner parts under $defs and refer to them)")


def join_uri(base: str, ref: str) -> str:
    """`ref` made absolute against `base`, also under a scheme urljoin leaves alone (an `$id` of
    `urn:example:zone` or `ng-cli://config/schema.json` with `#/definitions/a`)."""
    scheme = urlparse(base).scheme
    if not scheme or scheme in uses_relative or urlparse(ref).scheme:
        return urljoin(base, ref)
    if ref.startswith("#") or not ref:
        return urldefrag(base)[0] + ref
    return scheme + urljoin("http" + base[len(scheme):], ref).removeprefix("http")


def metaschema(uri: str) -> dict | None:
    """The JSON Schema meta-schema or vocabulary at `uri` (draft 3 to 2020-12), from the copies the
    `jsonschema` package ships; None for any other address."""
    from jsonschema_specifications import REGISTRY

    try:
        return REGISTRY.contents(uri)
    except LookupError:
        return None


def read_schema(path: str | Path):
    """The JSON Schema file at `path` as one document: every local file its references name,
    and theirs, embedded under its `$defs` (`definitions` before draft 2019-09), each with the
    address it was read from as its `$id`. The file's base URI is its own address where it has
    no absolute `$id` (the standard's retrieval URI). A reference to another address on the
    same site (scheme and host, http and https alike) is read from the file at the same place
    relative to this one: with an `$id` of `https://example.org/s/a.json`,
    `https://example.org/s/b.json` is `b.json` beside it, so a set of schemas saved together
    reads as it was published. Other addresses are left for the layout to refuse. SchemaError
    for a named file that cannot be read; OSError and ValueError for `path` itself."""
    path = Path(path).resolve()
    root = _read_json(path)
    if not isinstance(root, dict):
        return root
    doc = Document(root)
    sid = doc._id(root)
    if sid is None or not (sid.startswith("#") or urlparse(sid).scheme):   # none, or relative to the file
        doc = Document(root := {**root, doc.id: join_uri(path.as_uri(), sid or "")})
    home = urlparse(join_uri(doc.base, "."))   # where the file stands on its site
    defs = "definitions" if re.search(r"draft-0\d", str(root.get("$schema", ""))) else "$defs"
    todo = list(doc.refs)
    while todo:
        uri = urldefrag(todo.pop())[0]
        if uri in doc.ids or metaschema(uri) is not None:
            continue
        at = urlparse(uri)
        if not at.scheme or _site(at) != _site(home) or uri.startswith(ROOT_DIR):
            continue
        file = path.parent / unquote(posixpath.relpath(at.path, home.path))
        try:
            sub = _read_json(file)
        except (OSError, ValueError) as e:
            raise SchemaError("", f"$ref {uri}: {path.name} refers to the file {file}, which cannot be read as "
                                  f"JSON ({e}); save the referenced schema there") from None
        if isinstance(sub, bool):   # (a boolean schema holds no $id)
            sub = {"allOf": [sub]}
        if isinstance(sub, dict):   # known by the address it was read from, as its own draft names one
            key = id_keyword(sub.get("$schema", root.get("$schema")))
            sub = {key: uri, **{k: v for k, v in sub.items() if k != key}}
        root[defs] = {**(root.get(defs) or {}), uri: sub}
        known = len(doc.refs)
        doc._index(sub, uri)
        doc.ids.setdefault(uri, sub)
        todo += doc.refs[known:]
    return root


def _read_json(path: Path):
    """The JSON value in the file at `path` (ValueError where it is none)."""
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))   # a byte order mark, as editors write it
    except RecursionError:
        raise ValueError("it nests lists and objects deeper than a JSON reader goes; flatten it") from None


def _site(address) -> tuple[str, str]:
    """A parsed address's scheme and host, http and https alike (schemas name one for the other)."""
    return address.scheme.replace("https", "http"), address.netloc


def id_keyword(draft) -> str:
    """The keyword that names a schema resource's URI in the draft `$schema` names: `id` in drafts
    3 and 4 (a `$id` there is an unknown word), `$id` in later ones."""
    return "id" if isinstance(draft, str) and re.search(r"draft-0[34]/", draft) else "$id"


class Unsatisfiable(SchemaError):
    """No value satisfies the schema here: an optional key with such a schema is left out."""


@dataclass
class Resolved:
    schema: dict                      # the subschema, references followed and allOf merged
    nullable: bool = False            # null is allowed besides what `schema` describes
    refs: list[str] = field(default_factory=list)   # absolute references followed to reach it
    base: str = ""                    # the base URI its own references resolve against


class Document:
    """One JSON Schema document: its subschemas indexed by `$id` and `$anchor`."""

    def __init__(self, root):
        self.root = root
        draft = root.get("$schema") if isinstance(root, dict) else None
        self.id = id_keyword(draft)
        # up to draft 7 a $ref stands alone: the keywords beside it are not read
        self.ref_alone = isinstance(draft, str) and bool(re.search(r"draft-0[3-7]/", draft))
        self.draft = draft
        self.validator = draft_validator({"$schema": draft})
        self.keywords = keywords_of(self.validator)
        self._keys: dict[int, str] = {}   # id() of a schema in a resource of another draft -> its id keyword
        self.base = join_uri(ROOT, self._id(root) or "")   # absolute: a member merged elsewhere keeps its references
        self.ids: dict[str, object] = {}
        self.refs: list[str] = []     # every reference in the document, absolute
        self.found: dict[tuple[str, str], tuple[object, str, str]] = {}   # lookup's answers
        self._index(root, self.base)
        self.ids.setdefault(urldefrag(self.base)[0], root)

    def _id_key(self, s: dict) -> str:
        """The keyword naming `s`'s URI: the draft's of the schema resource it stands in (a file
        of another draft read_schema embedded), else the document's."""
        return self._keys.get(id(s), self.id)

    def _id(self, s) -> str | None:
        return s.get(key) if isinstance(s, dict) and isinstance(s.get(key := self._id_key(s)), str) else None

    def _entered(self, s):
        """`s` without the `$id` a base already holds, so that a relative one is not joined twice
        (a target `sub/` reached by a pointer had been read at sub/sub/)."""
        if not (sid := self._id(s)) or sid.startswith("#"):
            return s
        return {k: v for k, v in s.items() if k != self._id_key(s)}

    def allowed(self, rules: dict, values: list) -> list:
        """The `values` that meet `rules` (a value's own keywords: its type, bounds, length,
        pattern, format) as the document's draft reads them; all of them where the rules cannot
        be read (the layout names what is wrong with them)."""
        check = self.validator(rules, format_checker=self.validator.FORMAT_CHECKER)
        try:
            return [v for v in values if check.is_valid(v)]
        except Exception:   # a pattern Python's re cannot compile, a bound of the wrong kind
            return values

    def _index(self, s, base: str, key: str | None = None) -> None:
        """Index `s` and the schemas in it by their `$id`s and anchors; `key` names a schema
        resource's URI where `s` stands (a file of another draft: its own draft's)."""
        if not isinstance(s, dict):
            return
        key = id_keyword(s["$schema"]) if isinstance(s.get("$schema"), str) else key or self.id
        if key != self.id:
            self._keys[id(s)] = key
        sid = self._id(s)
        if sid and sid.startswith("#"):   # drafts 4 to 7: a plain-name fragment
            self.ids.setdefault(f"{urldefrag(base)[0]}{sid}", s)
        elif sid:
            base = join_uri(base, sid)
            self.ids.setdefault(urldefrag(base)[0], s)
        for anchor in ("$anchor", "$dynamicAnchor"):
            if isinstance(s.get(anchor), str):
                self.ids.setdefault(f"{urldefrag(base)[0]}#{s[anchor]}", s)
        self.refs += [join_uri(base, s[ref]) for ref in REFS if isinstance(s.get(ref), str)]
        for _, sub in subschemas(s):
            self._index(sub, base, key)

    def lookup(self, ref: str, base: str, path: str) -> tuple[object, str, str]:
        """The subschema `ref` names, the base URI inside it, and `ref` made absolute."""
        if (ref, base) not in self.found:   # (the layout asks for the same ones many times)
            self.found[ref, base] = self._lookup(ref, base, path)
        return self.found[ref, base]

    def _lookup(self, ref: str, base: str, path: str) -> tuple[object, str, str]:
        uri = join_uri(base or self.base, ref)
        doc, fragment = urldefrag(uri)
        if doc not in self.ids and (meta := metaschema(doc)) is not None:
            self._index(meta, doc)     # a JSON Schema meta-schema: read from the copy jsonschema ships
            self.ids.setdefault(doc, meta)
        if doc not in self.ids:
            raise SchemaError(path, f"$ref {ref} points outside this schema ({doc.removeprefix(ROOT_DIR)}); "
                                    "clover-struct reads no remote schemas: copy the referenced schema under $defs "
                                    "and refer to it there, or save it as a file beside a schema given by its path "
                                    "and refer to it by file name")
        target = self.ids[doc]
        if not fragment:
            return target, doc, uri
        if not fragment.startswith("/"):
            anchor = self.ids.get(f"{doc}#{fragment}")
            if anchor is None:
                raise SchemaError(path, f"$ref {ref}: no $anchor {fragment!r} in this schema; check the name")
            return anchor, doc, uri
        for part in fragment.split("/")[1:]:
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            elif isinstance(target, dict) and part in target:
                target = target[part]
            else:
                raise SchemaError(path, f"$ref {ref}: the pointer finds no {part!r} in this schema; "
                                        "check the path (segments are JSON pointer escaped: ~0 for ~, ~1 for /)")
        if sid := self._id(target):
            doc = join_uri(doc, sid)
        return target, doc, uri

    def anchored(self, s, base: str):
        """`s` with its relative references made absolute against `base`: a member of another
        document merged into this one keeps pointing where it did."""
        if isinstance(s, list):
            return [self.anchored(x, base) for x in s]
        if not isinstance(s, dict):
            return s
        if not (sid := self._id(s) or "#").startswith("#"):
            base = join_uri(base, sid)
        out = {k: v if k in _DATA else self.anchored(v, base) for k, v in s.items()
               if not (k == self._id_key(s) and isinstance(v, str))}   # no base to move (a key named `id` stays)
        for key in REFS:
            if isinstance(s.get(key), str):
                out[key] = join_uri(base, s[key])
        return out

    def members(self, s: dict) -> list:
        """The members of the union `s` (resolved), each with what `s` says beside them."""
        rest = {k: v for k, v in s.items() if k not in (s["x-union"], "x-union")}
        return [{"allOf": [rest, m]} if rest else m for m in s[s["x-union"]]]

    def told_apart(self, s: dict, path: str, base: str) -> tuple[str | None, list[str] | None]:
        """How the members of the union `s` (resolved) are told apart, if each is an object that
        lists its properties: (the key each describes with an enum or const of its own values,
        None), else (None, per member a property it requires and no other member does, the one of
        those fewest others describe: a GitHub job requires `runs-on` or `uses`), else (None, None)."""
        shapes = []
        for m in self.members(s):
            try:
                r = self.resolve(m, path, base)
            except Unsatisfiable:
                return None, None
            if r.nullable or r.schema.get("type", "object") != "object" or "properties" not in r.schema:
                return None, None
            shapes.append((r.schema["properties"], set(r.schema.get("required", [])), r.base))
        for key in shapes[0][0] if shapes else ():
            if all(key in props for props, _, _ in shapes):
                values = [self.resolve(props[key], path, b).schema.get("enum") for props, _, b in shapes]
                flat = [json.dumps(v, sort_keys=True) for vs in values for v in vs or [None]]
                if all(values) and len(set(flat)) == len(flat):
                    return key, None
        own = []
        for i, (props, required, _) in enumerate(shapes):
            others = shapes[:i] + shapes[i + 1:]
            keys = [k for k in props if k in required and not any(k in req for _, req, _ in others)]
            if not keys:
                return None, None
            own.append(min(keys, key=lambda k: sum(k in p for p, _, _ in others)))
        return None, own or None

    def resolve(self, s, path: str, base: str = "") -> Resolved:
        """`s` in the walk's normal form (see the module docstring)."""
        out = Resolved({}, base=base or self.base)
        for _ in range(256):   # a guard against references that only point at each other
            if s is True or s == {}:
                out.schema = {}
                return out
            if s is False:
                raise Unsatisfiable(path, "the schema is `false` here: no value is valid; remove the field or "
                                          "give it a schema a value can satisfy")
            if not isinstance(s, dict):
                raise SchemaError(path, f"{s!r} is not a JSON Schema (an object or a boolean)")
            if "not" in self.keywords and (s.get("not") is True or s.get("not") == {}):
                raise Unsatisfiable(path, "`not` holds a schema every value meets (true or {}): no value is valid; "
                                          "remove the field or the not")
            if (sid := self._id(s)) and not sid.startswith("#") and s is not self.root:
                out.base = join_uri(out.base, sid)
                s = self._entered(s)
            if wholes := {k: int(v) for k in _COUNTS if isinstance(v := s.get(k), float) and v.is_integer()}:
                s = {**s, **wholes}   # (maxLength 3.0 is an integer to the metaschema)
            if key := _ref_key(s):
                here = out.base
                target, out.base, uri = self.lookup(s[key], out.base, path)
                target = self._entered(target)   # (out.base is the base inside it)
                out.refs.append(uri)
                rest = {} if self.ref_alone else {k: v for k, v in s.items() if k not in (key, self._id_key(s))}
                rest = rest if here == out.base else self.anchored(rest, here)   # its references stay its own
                s = merge(self.resolve(target, path, out.base).schema, rest, path) if rest else target
                continue
            if "allOf" in s:
                merged = {k: v for k, v in s.items() if k != "allOf"}
                for member in s["allOf"]:
                    r = self.resolve(member, path, out.base)
                    out.refs += r.refs
                    got = r.schema if r.base == out.base else self.anchored(r.schema, r.base)
                    merged = merge(merged, got if not r.nullable else {**got, NULLABLE: True}, path)
                s = merged
                continue
            if s.get(NULLABLE) is True or self.draft is None and openapi_nullable(s):
                out.nullable = True
                s = {k: v for k, v in s.items() if k not in ("nullable", "x-nullable", NULLABLE)}
                continue
            if "const" in s and "enum" not in s:
                s = {**{k: v for k, v in s.items() if k != "const"}, "enum": [s["const"]]}
                continue
            word = "anyOf" if "anyOf" in s else "oneOf" if "oneOf" in s else None
            if word and (s.get("type") == "object" or "properties" in s):
                described = {k for k, v in (s.get("properties") or {}).items() if v is not False}
                rules = [key_rule(m, described) for m in s[word]]
                own: dict = {}    # keys members describe on their own, optional there: the object's too
                for m in s[word]:
                    for k, v in (m.get("properties") or {}).items() if isinstance(m, dict) else ():
                        if k not in described and own.setdefault(k, v) != v:
                            rules.append(None)   # described two ways: the members are shapes
                if None not in rules:
                    # rules over an object's keys: the final check's; the keys of the first member the
                    # properties describe are written always (`x-written`), so that one member can hold
                    first = next((keys for keys in rules if set(keys) <= described), [])   # ([]: none needed)
                    s = {k: v for k, v in s.items() if k not in (word, "x-union")}
                    if own:
                        s["properties"] = {**s.get("properties", {}), **own}
                    if first:
                        s["x-written"] = list(dict.fromkeys([*s.get("x-written", []), *first]))
                    continue
            if word and "discriminator" not in s and not s.get("x-union"):
                members = [m for m in s[word] if not _is_null(m)]
                out.nullable |= len(members) < len(s[word])
                rest = {k: v for k, v in s.items() if k != word}
                if not members:
                    s = {**rest, "type": "null"}
                elif len(members) == 1:
                    s = merge(rest, self.resolve(members[0], path, out.base).schema, path) if rest else members[0]
                elif all(isinstance(m, dict) and ("enum" in m or "const" in m) for m in members):
                    s = {**rest, "enum": [v for m in members for v in m.get("enum", [m.get("const")])]}
                else:
                    s = {**rest, word: members, "x-union": word}
                continue
            if isinstance(s.get("type"), list):
                types = [t for t in s["type"] if t != "null"]
                out.nullable |= len(types) < len(s["type"])
                if not types:
                    s = {**s, "type": "null"}
                elif len(types) == 1:
                    s = {**s, "type": types[0]}
                else:
                    rest = {k: v for k, v in s.items() if k != "type"}
                    s = {"anyOf": [{**rest, "type": t} for t in types], "x-union": "anyOf"}
                continue
            if isinstance(s.get("not"), dict) and set(s["not"]) == {"type"} and "type" not in s:
                banned = s["not"]["type"] if isinstance(s["not"]["type"], list) else [s["not"]["type"]]
                allowed = [t for t in TYPES if t not in banned and t != "integer" or t == "integer" and
                           "number" in banned and "integer" not in banned]   # number holds the integers
                s = {**{k: v for k, v in s.items() if k != "not"}, "type": allowed}
                continue
            if s.get("enum") == []:
                raise Unsatisfiable(path, "enum is empty: no value is valid; give it a value, or leave it out")
            if s.get("type") in ("integer", "number") and not _some_number(s):
                kind = "integer" if s["type"] == "integer" else f"number of at most {FLOAT_FRACTION_DIGITS} decimals"
                raise Unsatisfiable(path, f"no {kind} meets its bounds{' and multipleOf' * ('multipleOf' in s)}; "
                                          "fix the bounds")
            if (why := _no_count_met(s, self.keywords)) is not None:
                raise Unsatisfiable(path, f"{why}: no value satisfies that; fix the counts")
            if "propertyNames" in self.keywords and s.get("type") == "object" and (why := _no_name_met(s)):
                raise Unsatisfiable(path, f"{why}: no value satisfies that; fix the names or the keys it requires")
            if "enum" in s and (rules := {k: s[k] for k in SCALAR_RULES if k in s}):
                kept = self.allowed(rules, s["enum"])
                if not kept:
                    raise Unsatisfiable(path, f"no value of enum/const {s['enum']!r} meets the {', '.join(rules)} "
                                              "beside it: no value satisfies both; fix the values or the rules")
                s = {**s, "enum": kept} if len(kept) < len(s["enum"]) else s
            if s.get("type") == "null":
                out.nullable = True
            if "enum" in s and None in s["enum"]:
                out.nullable = True
            out.schema = s
            return out
        raise SchemaError(path, "the references here lead only to each other, or on through more than 256; give "
                                "the schema a value fewer references away")


def keywords_of(cls) -> set[str]:
    """The keywords of a draft's jsonschema validator class: a word another draft defines is no
    rule here (draft 4 has no contains, draft 7 no minContains)."""
    counted = cls.VALIDATORS.keys() >= {"unevaluatedItems"}   # (2019-09 on: contains' counts, read inside it)
    return set(cls.VALIDATORS) | ({"minContains", "maxContains"} if counted else set())


def contains_needs(s: dict, keywords: set[str]) -> int:
    """How many items an array schema's `contains` asks for (0 where it has none)."""
    if "contains" not in keywords or s.get("contains") is None:
        return 0
    return int(s.get("minContains", 1)) if "minContains" in keywords else 1   # (2.0 is an integer)


def _no_count_met(s: dict, keywords: set[str]) -> str | None:
    """Why no array or object meets an array or object schema's counts of items and keys (None
    where one may): a least above a most, or more items or keys than the schema lets it have."""
    kind = s.get("type")
    pairs = {"array": (("minItems", "maxItems"), ("minContains", "maxContains")),
             "object": (("minProperties", "maxProperties"),)}.get(kind, ())
    for lo, hi in pairs:
        least = s.get(lo, 1 if lo == "minContains" else 0)
        if hi in keywords and (lo != "minContains" or "contains" in s) and isinstance(s.get(hi), int) \
                and least > s[hi]:
            return f"{lo} {least}{' (its default)' * (lo not in s)} exceeds {hi} {s[hi]}"
    if kind == "array" and (need := contains_needs(s, keywords)) > 0:
        if s["contains"] is False:
            default = " (its default)" * ("minContains" not in s)
            return f"contains is false, which no item matches, and minContains {need}{default} asks for items that do"
        if isinstance(s.get("maxItems"), int) and need > s["maxItems"]:
            return f"minContains {need} exceeds maxItems {s['maxItems']}"
    if kind == "array":
        prefix = s.get("prefixItems") or (s["items"] if isinstance(s.get("items"), list) else [])
        rest = s.get("additionalItems", True) if isinstance(s.get("items"), list) else s.get("items", True)
        if rest is False and s.get("minItems", 0) > len(prefix):
            closed = "additionalItems" if isinstance(s.get("items"), list) else "items"
            return f"minItems {s['minItems']} exceeds the {len(prefix)} items it allows ({closed} false)"
        values = _values_of(rest) if s.get("uniqueItems") is True and not prefix else None
        if values is not None and s.get("minItems", 0) > values:
            return f"minItems {s['minItems']} unique items (uniqueItems) exceeds the {values} values an item may take"
    if kind != "object":
        return None
    keys, required = len(s.get("properties") or {}), _required(s)
    if s.get("additionalProperties") is False and not s.get("patternProperties") and s.get("minProperties", 0) > keys:
        return f"minProperties {s['minProperties']} exceeds the {keys} keys it allows (additionalProperties false)"
    most = s.get("maxProperties") if "maxProperties" in keywords else None
    if isinstance(most, int) and len(set(required)) > most:
        return f"it requires {len(set(required))} keys, more than maxProperties {most}"
    return None


def _no_name_met(s: dict) -> str | None:
    """Why no object meets an object schema's propertyNames (None where one may): a key it
    requires, or any key where it must have one, is no name the rule takes."""
    names, required = s.get("propertyNames", True), _required(s)
    if names is False and (required or s.get("minProperties", 0) > 0):
        return "propertyNames is false, which no key meets, where the object must have a key"
    if refused := [k for k in required if _refuses_name(names, k)]:
        return f"the key {refused[0]!r} it requires breaks its propertyNames"
    return None


def _required(s: dict) -> list:
    """The keys an object schema requires (draft 3's `required: true` is a property's own)."""
    return [k for k in s["required"] if isinstance(k, str)] if isinstance(s.get("required"), list) else []


def _refuses_name(names, key: str) -> bool:
    """Whether a propertyNames schema, read on its own, refuses `key` (False where it cannot tell:
    a reference)."""
    import jsonschema

    if not isinstance(names, dict) or any(k in names for k in REFS):
        return names is False
    try:
        return not jsonschema.Draft202012Validator(names).is_valid(key)
    except Exception:   # a pattern re cannot read: the metaschema check names it
        return False


def _values_of(item) -> int | None:
    """How many values an item schema allows, where it says so itself (an enum, a const, a
    boolean or null type); None otherwise."""
    if not isinstance(item, dict):
        return None
    if "const" in item:
        return 1
    if isinstance(item.get("enum"), list):
        return len({json.dumps(v, sort_keys=True) for v in item["enum"]})
    return {"boolean": 2, "null": 1}.get(item["type"]) if isinstance(item.get("type"), str) else None


# the keywords that say more of a value than which keys an object has (or which values its
# properties take: `properties`, also a key rule's); any other is an annotation, as JSON Schema reads it
# a value's own keywords, which every value of an enum or const must meet besides
SCALAR_RULES = ("type", "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
                "exclusiveMaximum", "multipleOf")
VALUE_RULES = {"type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
               "maxLength", "minLength", "pattern", "format", "items", "prefixItems", "additionalItems", "contains",
               "minContains", "maxContains", "minItems", "maxItems", "uniqueItems", "unevaluatedItems",
               "additionalProperties", "patternProperties", "propertyNames", "unevaluatedProperties",
               "dependentSchemas", "dependencies", "if", "then", "else", "anyOf", "oneOf", *REFS, "discriminator",
               "nullable", "x-nullable", NULLABLE, "x-union"}


def key_rule(m, described: set[str]) -> list[str] | None:
    """The keys an anyOf/oneOf member requires where all it asks is which keys an object has and
    what the properties it `described` hold ("userId or anonymousId", also as an allOf of such
    rules): the object is laid out once and the final check holds the rule. A key the member
    describes on its own, optional there, is laid out as the object's (its caller adds it). None
    where the member says more, or requires a key of its own (it is then a shape of the union)."""
    if not isinstance(m, dict) or set(m) & VALUE_RULES - {"type"} or m.get("type", "object") != "object" \
            or set(m.get("required", [])) & (set(m.get("properties") or {}) - described):
        return None
    parts = m.get("allOf", [])
    keys = [key_rule(x, described) for x in parts]
    if None in keys or any(set(x.get("properties") or {}) - described for x in parts):
        return None   # a part's own keys: only a member's own are laid out
    return [*m.get("required", []), *(k for ks in keys for k in ks)]


TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")


def _some_number(s: dict) -> bool:
    """Whether a number the layout writes (an integer, or one of at most FLOAT_FRACTION_DIGITS
    decimals) meets a number schema's bounds and multipleOf: the least such number above the
    lower bounds stays within the upper ones."""
    lo, hi, xlo, xhi = number_bounds(s)
    m = s.get("multipleOf")
    if any(isinstance(b, float) and not math.isfinite(b) for b in (lo, hi, xlo, xhi, m)):
        return False   # NaN, which no number compares true with, a minimum of Infinity, a multiple of it
    if lo is None and xlo is None or hi is None and xhi is None:
        return True
    lo, hi, xlo, xhi = exact_bounds(s)
    step = Fraction(1) if s["type"] == "integer" else Fraction(1, 10 ** FLOAT_FRACTION_DIGITS)
    if isinstance(m, (int, float)) and m > 0:   # a multiple of both
        m = exact(m)
        step = Fraction(math.lcm(step.numerator, m.numerator), math.gcd(step.denominator, m.denominator))
    least = max(step * (math.floor(b / step) + 1 if strict else math.ceil(b / step))
                for b, strict in ((lo, False), (xlo, True)) if b is not None)
    return (hi is None or least <= hi) and (xhi is None or least < xhi)


def _ref_key(s: dict) -> str | None:
    for key in REFS:
        if isinstance(s.get(key), str):
            return key
    return None


def _is_null(s) -> bool:
    return isinstance(s, dict) and (s.get("type") == "null" or s.get("enum") == [None] or s.get("const", 0) is None)


_DATA = ("enum", "const", "default", "examples")   # values, not schemas: no reference in them


def merge(a: dict, b: dict, path: str) -> dict:
    """Two schemas every value must satisfy, as one: what the layout follows (allOf)."""
    out = dict(a)
    for key, value in b.items():
        if key not in out:
            out[key] = value
        elif key == "properties":
            out[key] = {**out[key], **{k: merge(out[key][k], v, f"{path}.{k}") if k in out[key]
                                       and isinstance(v, dict) and isinstance(out[key][k], dict) else v
                                       for k, v in value.items()}}
        elif key == "required":
            out[key] = list(dict.fromkeys([*out[key], *value]))
        elif key == "type":
            kinds = lambda t: set(t) if isinstance(t, list) else {t}   # noqa: E731
            both = kinds(out[key]) & kinds(value) | ({"integer"} if "number" in kinds(out[key]) | kinds(value)
                                                     and "integer" in kinds(out[key]) | kinds(value) else set())
            if not both:
                raise Unsatisfiable(path, f"allOf asks for a {out[key]} and a {value} at once: no value is both; "
                                          "fix the conflicting types")
            out[key] = sorted(both) if len(both) > 1 else both.pop()
        elif key == "enum":
            keep = [v for v in out[key] if v in value]
            if not keep:
                raise Unsatisfiable(path, f"allOf allows {out[key]} and {value}: no value is in both; fix the enums")
            out[key] = keep
        elif key in _LOWER and isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = max(out[key], value)
        elif key in _UPPER and isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = min(out[key], value)
        elif key == "anyOf" and len(out[key]) * len(value) <= MAX_UNION:   # (a or b) and (c or d): each pair
            out[key] = [{"allOf": [x, y]} for x in out[key] for y in value]
        elif key in ("items", "additionalProperties") and isinstance(value, dict) and isinstance(out[key], dict):
            out[key] = merge(out[key], value, path)
        elif key == "additionalProperties" and value is False:
            out[key] = False
    for closed in (a, b):   # a member closed to other keys drops the other's (required ones cannot go)
        if closed.get("additionalProperties") is False and not closed.get("patternProperties"):
            allowed = set(closed.get("properties") or {})
            if (lost := [k for k in out.get("required", []) if k not in allowed]):
                raise Unsatisfiable(path, f"allOf: one member requires {lost[0]!r}, another allows no key but "
                                          f"{sorted(allowed)} (additionalProperties false): no object is both; "
                                          "add the key to the closed member's properties")
            out["properties"] = {k: v for k, v in (out.get("properties") or {}).items() if k in allowed}
    for lo, hi in (("minimum", "maximum"), ("minLength", "maxLength"), ("minItems", "maxItems"),
                   ("minProperties", "maxProperties")):
        if isinstance(out.get(lo), (int, float)) and isinstance(out.get(hi), (int, float)) and out[lo] > out[hi]:
            raise Unsatisfiable(path, f"{lo} {out[lo]} exceeds {hi} {out[hi]}: no value satisfies both; fix the bounds")
    return out
