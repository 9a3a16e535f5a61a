"""extract() and extract_many(): text and a schema in, validated instances out.

Builds the canvas (layout.py) and its automata (constraints.py), writes the
prompt, runs the joint decoder, then validates. A value that fails a check a
regular expression cannot express (numeric bounds, pydantic validators) is
replaced by the slot's next-best complete value; if none passes, the record
becomes an ExtractionError naming the field. Mistakes in the call itself (a
`known` path the schema lacks, a known value its field cannot hold, an option out
of range, a model without tokenizer or pad token, or a mask-noise model without a mask token)
raise at once, as UsageError,
SchemaError or CheckpointError.

The boundary: no exception but a CloverError leaves extract, extract_many or decide.
A record whose text cannot be read, or whose decoding fails in any way, becomes that
record's ExtractionError (the cause chained); a batch that fails unexpectedly is
decoded again record by record, so one bad text never costs its neighbours. A
failure inside the schema walk becomes a SchemaError.

Threads: calls that share a tokenizer (every call on one model) are serialised by a
lock (`model_lock`): the model's forward passes and the tables built per tokenizer
(automata, verbatim pieces, canvases) are not shared between threads while they run.
Models with tokenizers of their own decode in parallel.

Over 400 lines because the boundary is here: each check of a call's arguments says what to
pass instead, and they sit beside the calls they guard.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import json
import numbers
import re
import threading
import weakref
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from .constraints import compile_canvas
from .decoder import SCHEDULES, Trace, decode
from .errors import CheckpointError, CloverError, ExtractionError, InternalError, SchemaError, UsageError
from .patterns import FLOAT_FRACTION_DIGITS, FLOAT_INT_DIGITS, INT_DIGITS
from .repair import failed_variants, finish, rescore
from .schema_walk import build_canvas
from .verbatim import for_text, spans, unwrapped
from .vocab import letter_tokens


EMBEDDED = Path(__file__).parent / "models" / "clover-mini"


def load_model(path=None, *, device=None, dtype=None):
    """The model in directory `path` (config.json, safetensors weights, tokenizer.json), of any
    family the engine reads; with no path, clover-mini, the model embedded in the package."""
    from .engine.checkpoint import load_model as load

    if path is None:
        if not (EMBEDDED / "config.json").is_file():
            raise CheckpointError(f"the embedded model is not in this installation ({EMBEDDED}); "
                                  "pass a model directory to load_model(path)")
        path = EMBEDDED
    return load(path, device=device, dtype=dtype)


_DEFAULT: list = []
_DEFAULT_LOCK = threading.Lock()


def default_model():
    """The embedded model, loaded once per process (once, also when threads ask at once)."""
    with _DEFAULT_LOCK:
        if not _DEFAULT:
            _DEFAULT.append(load_model())
        return _DEFAULT[0]


_LOCKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # tokenizer (or model) -> RLock
_LOCKS_GUARD = threading.Lock()


def model_lock(model) -> threading.RLock:
    """The lock that serialises extraction on `model`: one per tokenizer, since the tables the
    constraints build (plain dicts) are kept per tokenizer and shared by its models."""
    key = model.tokenizer if getattr(model, "tokenizer", None) is not None else model
    with _LOCKS_GUARD:
        if key not in _LOCKS:
            _LOCKS[key] = threading.RLock()
        return _LOCKS[key]


def internal_failure(stage: str, e: BaseException) -> ExtractionError:
    """A record's error for an unexpected exception while `stage`: an InternalError with the
    exception as its cause (an ExtractionError raised there is the record's error as it is)."""
    if isinstance(e, ExtractionError):
        return e
    err = InternalError("", f"{stage} failed ({type(e).__name__}: {e}); this is a bug in clover-struct: "
                              "please report it with the text (the other records are not affected)")
    err.__cause__ = e
    return err


def check_model(model) -> None:
    """UsageError unless `model` is a loaded model (or None, for the embedded one)."""
    if model is not None and not (hasattr(model, "config") and hasattr(model, "tokenizer")):
        hint = f"load_model({str(model)!r})" if isinstance(model, (str, Path)) else "load_model(path)"
        raise UsageError(f"model= takes a loaded model, not a {type(model).__name__}; pass {hint}, "
                         "or nothing for the embedded clover-mini")


# A NOTAM item's letter glued to what it says (B)2604270300, G)UNL): read as B) 2604270300.
_GLUED_ITEM = re.compile(r"(?<![^\s(])([A-GQa-gq]\))(?=[^\s)])")


def as_read(text: str) -> str:
    """The text as the model reads it in the prompt: line ends as "\n", none inside a coordinate
    (as its copies read it, verbatim.unwrapped) and NOTAM items spaced. Copies are still of the
    text as given (verbatim.Source)."""
    return _GLUED_ITEM.sub(r"\1 ", unwrapped(text).replace("\r\n", "\n").replace("\r", "\n"))


def prompt_ids(tokenizer, text: str, canvas) -> list[int]:
    """The prompt the canvas follows, around the text `as_read`.

    Our models: the schema's title and the text. Checkpoints with a chat template
    (chat_template.jinja or tokenizer_config.json): the template around an instruction that
    shows the schema, ending where the assistant's answer (the canvas) begins. The template is
    rendered as transformers renders it (trim_blocks, lstrip_blocks, loop controls, a sandbox,
    `raise_exception`, `strftime_now`, `tojson` unescaped, `{% generation %}`, the special
    tokens by name: Gemma's starts with bos_token). CheckpointError where it does not compile;
    ExtractionError (this text's) where it refuses the text or fails on it.
    """
    title, text = canvas.schema.get("title", "record"), as_read(text)
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        return tokenizer.encode(f"schema: {title}\ntext:\n{text}\nrecord:\n")
    try:
        from jinja2 import TemplateError  # only checkpoints that bring a template need jinja2
    except ImportError:
        raise CheckpointError("this checkpoint has a chat template, which needs jinja2: pip install jinja2") from None
    where = getattr(tokenizer, "chat_template_file", None) or "tokenizer_config.json"
    names = {f"{kind}_token": tokenizer.token_bytes(i).decode(errors="replace") for kind, i in
             (("bos", getattr(tokenizer, "bos_id", None)), ("eos", tokenizer.eos_id), ("pad", tokenizer.pad_id))
             if i is not None}
    instruction = (f"Extract a {title} record from the text below as JSON matching this schema:\n"
                   f"{json.dumps(canvas.schema, separators=(',', ':'))}\n\nText:\n{text}")
    try:
        compiled = _compiled(template)
    except TemplateError as e:
        raise CheckpointError(f"the checkpoint's chat template ({where}) does not compile: {e}; fix or remove "
                              "it") from None
    try:
        rendered = compiled.render(messages=[{"role": "user", "content": instruction}], add_generation_prompt=True,
                                   **names)
    except _Refused as e:
        raise ExtractionError("", f"the checkpoint's chat template ({where}) refused this text: {e}") from None
    except Exception as e:   # (a template's own arithmetic, a sandbox limit: on this text)
        raise ExtractionError("", f"the checkpoint's chat template ({where}) fails on this text "
                                  f"({type(e).__name__}: {e}); fix its template") from None
    return tokenizer.encode(rendered)


class _Refused(Exception):
    """A chat template's raise_exception."""


@functools.lru_cache(maxsize=8)   # (every text's prompt renders it)
def _compiled(template: str):
    """`template` compiled in a sandboxed Jinja environment as transformers renders chat templates
    in: trim_blocks, lstrip_blocks, loop controls, `raise_exception`, `strftime_now`, a `tojson`
    that neither escapes HTML nor sorts keys, and `{% generation %}` (which marks the assistant's
    part). jinja2's TemplateError where it does not compile."""
    from datetime import datetime

    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        tags = {"generation"}

        def parse(self, parser):   # its body as written
            next(parser.stream)
            return parser.parse_statements(("name:endgeneration",), drop_needle=True)

    def raise_exception(message):
        raise _Refused(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols", Generation])
    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=lambda f: datetime.now().strftime(f))
    return env.from_string(template)


def canvas_marks(model) -> tuple[int, int]:
    """(mask id, pad id) a canvas for `model` is laid out with; CheckpointError if it has
    no pad (UsageError for a model built in code).

    A mask-noise model (Clover) denoises its mask token, so the checkpoint must name one. A
    uniform-noise model (DiffusionGemma, `model.noise == "uniform"`) never sees the mask id: the
    decoder shows it random tokens at unwritten positions. Its canvas marks them with a special
    token no value can hold: the tokenizer's mask token where it has one (Gemma's `<mask>`), else
    eos or another special token that is not the pad. The pad ends values: config.json's
    pad_token_id (DiffusionGemma's is 0, `<pad>`), or tokenizer.json's pad where config.json has none.
    """
    cfg, tok, source = model.config, model.tokenizer, getattr(model, "source", None)
    name, error = (f"{source}", CheckpointError) if source else ("this model", UsageError)
    if cfg.pad_token_id is None:
        raise error(f"{name} has no pad token, which ends every value on a canvas; set pad_token_id in "
                    "its config.json")
    if getattr(model, "noise", "mask") != "uniform":
        if cfg.mask_token_id is None:
            raise error(f"{name} has no mask token, so it cannot denoise a canvas; set mask_token_id in "
                        "its config.json")
        return cfg.mask_token_id, cfg.pad_token_id
    specials = [tok.mask_id, cfg.eos_token_id, tok.eos_id, *sorted(tok.special_ids)]
    mark = next((i for i in specials if i is not None and i != cfg.pad_token_id), None)
    if mark is None:
        raise error(f"{name}'s tokenizer.json has no special token besides the pad, so a canvas cannot "
                    "mark its slots; add a mask token to it")
    return mark, cfg.pad_token_id


def prepare(schema, model=None, max_tokens: int | None = None, letter_tokens: int = 1):
    """The model (default: the embedded one), its canvas for `schema` and the canvas's automata
    (`letter_tokens`: of the texts it is for, vocab.letter_tokens)."""
    check_model(model)
    model = model or default_model()
    cfg, source = model.config, getattr(model, "source", None)
    if model.tokenizer is None:
        error = CheckpointError if source else UsageError
        raise error(f"{Path(source) / 'tokenizer.json' if source else 'this model'}: no tokenizer; extraction "
                    "needs one: put the checkpoint's tokenizer.json in its directory")
    canvas_marks(model)   # a model that cannot mark a canvas, before the schema's own errors
    if hasattr(schema, "model_json_schema") and not isinstance(schema, type):
        raise UsageError(f"schema: pass the class {type(schema).__name__} itself, not an instance of it")
    if isinstance(schema, (str, Path)) and not Path(schema).is_file():
        raise UsageError(f"schema {str(schema)!r}: no such JSON Schema file; pass a pydantic model class, "
                         "a JSON Schema dict, or the path of a .json file")
    canvas = lay_out(schema, model, max_tokens, letter_tokens=letter_tokens)
    try:   # a chat template that fails on a plain text fails on every one: no record can run
        prompt_ids(model.tokenizer, "text", canvas)
    except ExtractionError as e:
        raise CheckpointError(f"{e.reason.replace('this text', 'any text')}") from None
    try:
        automata = compile_canvas(canvas, model.tokenizer, vocab_size=cfg.vocab_size)
    except CloverError:
        raise
    except Exception as e:
        raise _our_bug(e) from e
    return model, canvas, automata


def _our_bug(e: Exception) -> SchemaError:
    """A failure inside the layout or the automata: still one kind of error for the caller."""
    return SchemaError("", f"this schema could not be laid out ({type(e).__name__}: {e}); this is a bug "
                           "in clover-struct: please report it with the schema")


def lay_out(schema, model, max_tokens: int | None = None, fit: bool = True, letter_tokens: int = 1):
    """The schema's canvas over `model`'s tokenizer, within 3/4 of its context where open parts
    allow; SchemaError if it cannot be laid out, or with `fit`, if it exceeds the context."""
    cfg = model.config
    mask, pad = canvas_marks(model)
    try:
        return build_canvas(schema, model.tokenizer, max_tokens=max_tokens, mask_id=mask, pad_id=pad,
                            room=cfg.max_position_embeddings * 3 // 4,
                            context=cfg.max_position_embeddings if fit else None, vocab_size=cfg.vocab_size,
                            letter_tokens=letter_tokens)
    except CloverError:
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SchemaError("", f"the JSON Schema file {schema} cannot be read ({e}); fix the file") from e
    except Exception as e:
        raise _our_bug(e) from e


def encode_prompt(model, text, canvas, truncate: bool = False) -> list[int]:
    """The prompt ids for `text`; ExtractionError for a text that is no str, is empty, is not
    Unicode (lone surrogates) or that the context cannot hold."""
    return fit_prompt(model, text, canvas, truncate)[0]


def fit_prompt(model, text, canvas, truncate: bool = False) -> tuple[list[int], str]:
    """encode_prompt's ids, and the text they hold (with truncate=True, the part of `text` that
    fits the context: what verbatim fields may copy from, since the model sees no more)."""
    if not isinstance(text, str):
        raise ExtractionError("", f"the text is of type {type(text).__name__}, not str; pass the text itself "
                                  "(decode bytes first)")
    if not text.strip():
        raise ExtractionError("", "the text is empty; give the notice or message to extract from")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ExtractionError("", f"the text holds a lone surrogate ({text[e.start]!r} at {e.start}), which no "
                                  "encoding can write; decode its bytes with errors='replace'") from None
    tok, room = model.tokenizer, model.config.max_position_embeddings - len(canvas.ids)
    if truncate and hasattr(tok, "longest_token"):   # what no context holds is not tokenized (6 MB: a minute)
        text = text[:(room + 16) * tok.longest_token]
    ids = prompt_ids(tok, text, canvas)
    if len(ids) <= room:
        return ids, text
    if (frame := len(prompt_ids(tok, "", canvas))) >= room:
        raise SchemaError("", f"the prompt takes {frame} tokens without the text (the instruction and the schema's "
                              f"title), and the model's context leaves {room} beside the canvas; shorten the title")
    if not truncate:
        error = ExtractionError("", f"the text takes {len(ids)} tokens but the model's context leaves "
                                    f"{room} beside the canvas; shorten it, or pass truncate=True (--truncate on the "
                                    "command line) to read its start")
        error.over = len(ids) - room   # tokens past the context
        raise error
    keep = room - frame
    while True:     # the prompt around the kept text may take more tokens than the text alone
        kept = tok.decode(tok.encode(text)[:keep])
        while kept.endswith("\ufffd") and not text.startswith(kept):   # a character cut between its byte tokens
            kept = kept[:-1]
        ids = prompt_ids(tok, kept, canvas)
        if len(ids) <= room or keep == 0:
            return ids[:room], kept
        keep = max(keep - (len(ids) - room), 0)


def field_paths(canvas) -> dict[str, list[int]]:
    """Field path -> slot indices, under the canvas's own paths (`area<circle>.radius`)
    and the paths users write, without the variant marks (`area.radius`)."""
    out: dict[str, list[int]] = {}
    for i, s in enumerate(canvas.slots):
        out.setdefault(s.path, []).append(i)
        plain = re.sub(r"<[^>]*>", "", s.path)
        if plain != s.path:
            out.setdefault(plain, []).append(i)
    return out


def _item_shape(path: str) -> str:
    """A field path with its items' indices left out: `orders[0].lines[3]` -> `orders[].lines[]`."""
    return re.sub(r"\[\d+\]", "[]", path)


def slot_of_path(canvas, path: str, what: str = "known") -> int:
    """The slot a user's field path names; UsageError listing the close matches if none does."""
    paths = field_paths(canvas)
    if not isinstance(path, str):
        raise UsageError(f"{what}: field paths are strings such as `area.radius`, not {path!r}")
    if path not in paths:
        if _item_shape(path) in {_item_shape(p) for p in paths}:
            raise UsageError(f"{what}: `{path}` is an item past those laid out (a list holds its maxItems at most, "
                             "and without one 8, 3 inside another list, 2 deeper; `clover-struct schema` prints them)")
        near = difflib.get_close_matches(path, list(paths), n=4, cutoff=0.5)
        hint = f"did you mean {', '.join(f'`{p}`' for p in near)}?" if near else \
            f"the schema's fields include {', '.join(list(paths)[:6])}{', ...' if len(paths) > 6 else ''}"
        raise UsageError(f"{what}: the schema has no field `{path}`; {hint}")
    if len(paths[path]) > 1:
        raise UsageError(f"{what}: `{path}` is a field of several variants; name one: "
                         + ", ".join(f"`{canvas.slots[i].path}`" for i in paths[path]))
    return paths[path][0]


def _known_ids(canvas, automata, known: dict[str, Any] | None) -> dict[int, list[int]]:
    """The token ids of each known field's value, by slot (an optional object known as None: its
    slots empty), with the tag of each union member a known field lies in: the member is then
    chosen, never barred. UsageError for a value the field cannot hold as given, a member
    another known tag excludes, or a list item whose earlier items are not known."""
    if not known:
        return {}
    out, given, paths = {}, {}, field_paths(canvas)
    for path, value in known.items():
        group = next((g for g in canvas.groups if g.path == path and g.kind in ("optional", "key")), None)
        if group is not None and path not in paths:   # an optional object, or key
            if value is not None:
                raise UsageError(f"known: `{path}` is an object: give its fields (`{canvas.slots[group.slots[0]].path}`"
                                 "), or None to leave it out")
            out.update((j, []) for j in group.slots)   # every slot empty: the object left out
            continue
        tag = next((g.selector for g in canvas.groups if g.kind == "variant" and g.path.startswith(f"{path}<")), None)
        if tag is not None and value is None and path not in paths:   # a union left out: its tag null
            out[tag] = _known_value(canvas.slots[tag], automata[tag], canvas.tokenizer, path, None)
            continue
        i = given[path] = slot_of_path(canvas, path)
        out[i] = _known_value(canvas.slots[i], automata[i], canvas.tokenizer, path, value)
    for path, i in given.items():
        for g in (g for g in canvas.groups if i in g.slots):
            if g.kind == "variant":
                tags = [canvas.tokenizer.encode(t) for t in g.tags]
                if out.setdefault(g.selector, tags[0]) not in tags:
                    raise UsageError(f"known: `{path}` lies in the member `{g.path}`, which the known "
                                     f"`{canvas.slots[g.selector].path}` does not choose; give one or the other")
            elif g.kind == "item" and g.prev is not None and not canvas.groups[g.prev].required \
                    and not out.keys() & set(canvas.groups[g.prev].slots):   # the items before it would shift
                raise UsageError(f"known: `{path}` needs the list item before its own, `{canvas.groups[g.prev].path}`, "
                                 "known too (a list's items are written in order): give the items before it, or "
                                 "give it at the lowest free index")
    return out


def _as_json(value, inside: bool = False):
    """A value of a Python type JSON holds as text or a number (a date, a UUID, a Decimal), in a
    list or dict too, as that JSON value; any other as it is."""
    if isinstance(value, Decimal):   # alone, written digit for digit (a float would round past 15 digits)
        return int(value) if value == value.to_integral_value() else float(value) if inside else value
    if isinstance(value, list):
        return [_as_json(x, True) for x in value]
    if isinstance(value, dict):
        return {k: _as_json(x, True) for k, x in value.items()}
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if hasattr(value, "get_secret_value"):   # a SecretStr: its secret (its JSON is the mask, ******)
        return _as_json(value.get_secret_value())
    from pydantic_core import to_jsonable_python
    return to_jsonable_python(value)


def _nested(value) -> bool:
    """Whether a list or dict holds a list or dict."""
    return any(isinstance(x, (list, dict)) for x in (value.values() if isinstance(value, dict) else value))


def _one_level(slot) -> bool:
    """Whether a slot's grammar takes lists and objects, but none inside another (a value of any type)."""
    takes = lambda text: slot.pattern is not None and re.fullmatch(slot.pattern, text) is not None  # noqa: E731
    return takes("[]") and takes("{}") and not takes("[[]]")


def _holds(slot, value, text: str) -> bool:
    """Whether a slot's grammar holds `value` (written `text`) but for its budget of tokens."""
    most = slot.length[1] if slot.length else None
    return slot.pattern is not None and all(re.fullmatch(p, text) for p in (slot.pattern, slot.also) if p) \
        and not (isinstance(value, str) and most is not None and len(value) > most)


def _known_value(slot, automaton, tokenizer, path: str, value) -> list[int]:
    """The token ids that write a known `value` in `slot`, exactly; UsageError saying why not. A
    value of a Python type JSON holds as text or a number (a date, a UUID, a Decimal) is that JSON."""
    try:
        text = slot.render(value := _as_json(value))
        ids = tokenizer.encode(text)
    except Exception as e:   # a value of a type the field's JSON cannot hold, or too long for it
        raise UsageError(f"known: {value!r} cannot be written in field `{path}` ({type(e).__name__}: {e}); "
                         "give a value of the field's type") from None
    if not automaton.accepts(ids):
        longer = len(ids) > slot.budget and _holds(slot, value, text)
        long = isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) >= 10 ** FLOAT_INT_DIGITS
        deep = isinstance(value, (list, dict)) and _nested(value) and _one_level(slot)
        raise UsageError(f"known: {value!r} is not a value field `{path}` can hold; give one its "
                         "constraint allows (clover-struct schema SPEC prints them)"
                         + ("; a value of any type is held one list or object deep" if deep else "")
                         + (f"; a number with no bound as long is written with at most {INT_DIGITS} integer "
                            f"digits ({FLOAT_INT_DIGITS} for a non-integer): give the field a maximum as long as its "
                            "values" if long else "")
                         if not longer else
                         f"known: {value!r} takes {len(ids)} tokens, more than the {slot.budget} of field `{path}`; "
                         "raise its budget with max_tokens (json_schema_extra={'max_tokens': N})")
    if broken := [why for check in slot.checks if (why := check.violation(slot.value(text)))]:   # (no grammar's)
        raise UsageError(f"known: {value!r} is not a value field `{path}` can hold ({broken[0]}); give one its "
                         "constraint allows (clover-struct schema SPEC prints them)")
    if isinstance(value, float) and slot.value(text) != value or isinstance(value, Decimal) and Decimal(text) != value:
        raise UsageError(f"known: field `{path}` writes {value!r} as {text} (numbers keep at most "
                         f"{FLOAT_FRACTION_DIGITS} decimals); give the value as it is written")
    return ids


SEEDS = (-2**63, 2**64 - 1)   # the seeds torch.Generator.manual_seed takes


def check_options(*, batch_size=1, threshold=0.5, temperature=0.0, seed=None, max_tokens=None,
                  schedule="joint") -> None:
    """UsageError for an option out of its range, saying what to pass."""
    def number(x, integer=False):
        ok = isinstance(x, numbers.Integral if integer else numbers.Real) and not isinstance(x, bool)
        return ok and (integer or x == x)     # x == x: not NaN
    if not number(batch_size, True) or batch_size < 1:
        raise UsageError(f"batch_size must be a whole number of at least 1, got {batch_size!r}")
    if not number(threshold) or not 0 <= threshold <= 1:
        raise UsageError(f"threshold is a probability, between 0 and 1 (default 0.9), got {threshold!r}")
    if not number(temperature) or temperature < 0:
        raise UsageError(f"temperature must be 0 (greedy, the default) or more, got {temperature!r}")
    if seed is not None and not (number(seed, True) and SEEDS[0] <= seed <= SEEDS[1]):
        raise UsageError(f"seed must be a whole number from {SEEDS[0]} to {SEEDS[1]} (what torch's generator "
                         f"takes), or None; got {seed!r}")
    if max_tokens is not None and (not number(max_tokens, True) or max_tokens < 1):
        raise UsageError(f"max_tokens (the budget of strings without max_length) must be at least 1, "
                         f"got {max_tokens!r}")
    if schedule not in SCHEDULES:
        raise UsageError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")


def _texts_and_known(texts, known) -> tuple[list, list]:
    if isinstance(texts, (str, bytes)):
        raise UsageError("extract_many takes a list of texts, not one text; for one, call extract(text, schema)")
    if isinstance(texts, Mapping):
        raise UsageError("extract_many takes a list of texts, not a mapping (its keys would be read as the texts); "
                         "pass list(d.values())")
    try:
        texts = list(texts)
    except TypeError:
        raise UsageError(f"extract_many takes a list of texts, not a {type(texts).__name__}") from None
    if known is None:
        return texts, [None] * len(texts)
    if isinstance(known, dict) or not isinstance(known, (list, tuple)) or len(known) != len(texts):
        raise UsageError(f"known= takes a list with one dict (or None) per text ({len(texts)} here); for the "
                         "same known values in every record, pass [known] * len(texts)")
    for k in known:
        if k is not None and not isinstance(k, dict):
            raise UsageError(f"known= holds {type(k).__name__}; each entry is a dict of field path -> value, "
                             "such as {'area.radius': '5 NM'}")
    return texts, list(known)


def decode_jobs(model, canvas, automata, jobs, options, on_step=None):
    """(record index, value or ExtractionError, Trace) for each job (index, prompt ids, known ids,
    the text the prompt holds).

    The batch is one joint decode; if it fails unexpectedly, each record is decoded alone,
    so the failure stays with the record that causes it. on_step(passes, {record index: Row})
    is called after every denoising step (decoder.decode's hook, its rows named by record),
    a record decoded again (`_settled`) included."""
    ready, bound = [], []
    for job in jobs:
        try:
            bound.append(for_text(automata, job[3], model.tokenizer))
            ready.append(job)
        except Exception as e:
            yield job[0], internal_failure("reading the text's pieces", e), Trace()
    if not ready:
        return
    hook = None if on_step is None else \
        lambda step, passes, rows: on_step(passes, {job[0]: row for job, row in zip(ready, rows)})
    try:
        rows = decode(model, [job[1] for job in ready], [canvas] * len(ready), bound,
                      known=[job[2] for job in ready], on_step=hook, **options)
    except (UsageError, CheckpointError, SchemaError):
        raise   # the call itself is wrong: every record would fail alike
    except Exception as e:
        if len(ready) == 1:
            yield ready[0][0], internal_failure("decoding", e), Trace()
        else:
            for job in ready:
                yield from decode_jobs(model, canvas, automata, [job], options, on_step)
        return
    for job, automata_bound, row in zip(ready, bound, rows):
        yield job[0], *_settled(model, canvas, automata_bound, job, row, options, on_step)


RETRIES = 2   # decodes of a record again, each with a failed union variant barred


def _outcome(row, text: str) -> tuple[Any, list[int]]:
    """A decoded row's record (or ExtractionError), and its ids as decoded (finish may mend them);
    `text` is what the prompt holds, which the schema's validators may read."""
    decoded, row.text = list(row.ids), text
    try:
        value = finish(row)
        rescore(row, decoded)
        row.trace.spans = spans(row)
    except ExtractionError as e:
        value = e
    except Exception as e:
        value = internal_failure("validating the decoded record", e)
    return value, decoded


def _settled(model, canvas, automata, job, row, options, on_step) -> tuple[Any, Trace]:
    """A decoded record, finished: (value or ExtractionError, trace). Where it could not be made
    valid with a union variant the model chose (repair.failed_variants), it is decoded again
    with that variant barred, so the model's next choice is decoded whole (a circle the model
    ranked second after a polygon the text cannot fill, rather than a polygon mended to null);
    again while another fails, RETRIES times at most. The last valid record stands, else the
    first error (the variant the model preferred); the trace counts every decode."""
    value, decoded = _outcome(row, job[3])
    kept, barred, traces = (value, row.trace), {}, [row.trace]
    hook = None if on_step is None else lambda step, passes, rows: on_step(passes, {job[0]: rows[0]})
    while len(traces) <= RETRIES and (bars := {i: tag for i, tag in failed_variants(row, decoded, value).items()
                                               if i not in job[2] and tag not in barred.get(i, ())}):
        for i, tag in bars.items():
            barred.setdefault(i, set()).add(tag)
        try:
            row = decode(model, [job[1]], [canvas], [automata], known=[job[2]], barred=[barred], on_step=hook,
                         **options)[0]
        except Exception:   # (the record as first decoded stands)
            break
        traces.append(row.trace)
        value, decoded = _outcome(row, job[3])
        if not isinstance(value, ExtractionError):
            kept = (value, row.trace)
    for t in traces:
        if t is not kept[1]:
            kept[1].count(t)
    return kept


def extract_many(texts: list[str], schema, *, model=None, batch_size: int = 16, trace: bool = False,
                 known: list[dict] | None = None, threshold: float = 0.9, temperature: float = 0.0,
                 seed: int | None = None, max_tokens: int | None = None, truncate: bool = False,
                 schedule: str = "joint", use_cache: bool = True, **unknown):
    """Decode a batch of texts jointly. Each result is an instance of `schema` or the
    ExtractionError that explains why that record failed; one failure never loses the
    others. With trace=True each result is a (value, Trace) pair. `schedule` and
    `use_cache` select the baselines benchmarks compare with (see decoder.decode)."""
    _no_other_options(unknown, "extract_many")
    check_options(batch_size=batch_size, threshold=threshold, temperature=temperature, seed=seed,
                  max_tokens=max_tokens, schedule=schedule)
    texts, known = _texts_and_known(texts, known)
    check_model(model)
    with model_lock(model or default_model()):
        model = prepare(schema, model, max_tokens)[0]   # the schema checked before any text
        options = dict(threshold=threshold, temperature=temperature, seed=seed, schedule=schedule,
                       use_cache=use_cache)
        results: list[Any] = [None] * len(texts)
        traces: list[Trace] = [Trace() for _ in texts]
        for width, ns in by_width(schema, model, max_tokens, texts, known).items():   # a canvas per width
            _, canvas, automata = prepare(schema, model, max_tokens, width)
            jobs = []
            for n in ns:
                try:
                    ids, held = fit_prompt(model, texts[n], canvas, truncate)
                except (UsageError, CheckpointError, SchemaError):
                    raise   # the call or the model is wrong (a chat template without jinja2): no record can run
                except Exception as e:
                    results[n] = internal_failure("encoding the prompt", e)
                    continue
                try:
                    jobs.append((n, ids, _known_ids(canvas, automata, known[n]), held))
                except UsageError as e:
                    raise e if len(texts) == 1 else UsageError(f"record {n}'s {e}") from None
            for b in range(0, len(jobs), batch_size):
                for n, value, t in decode_jobs(model, canvas, automata, jobs[b:b + batch_size], options):
                    results[n], traces[n] = value, t
    return list(zip(results, traces)) if trace else results


def text_width(model, text) -> int:
    """The most tokens a letter of `text` takes (vocab.letter_tokens); 1 for what is no text,
    which fit_prompt refuses."""
    return letter_tokens(model.tokenizer, text) if isinstance(text, str) else 1


def laid_width(schema, model, max_tokens: int | None, width: int) -> int:
    """The letter_tokens `schema` is laid out with for texts of `width`: `width` where that lays
    it out otherwise than one token a letter does and the canvas fits the context, else 1; so
    texts share a canvas and a decode wherever their widths change nothing (NoFlyZone's: its
    strings have patterns or caps)."""
    if width == 1:
        return 1
    try:
        wide = lay_out(schema, model, max_tokens, letter_tokens=width)
        return width if wide.ids != lay_out(schema, model, max_tokens).ids else 1
    except SchemaError:   # past the context (or no layout at all, which prepare says)
        return 1


def by_width(schema, model, max_tokens: int | None, texts, known=None) -> dict[int, list[int]]:
    """The indices of `texts` by the width each is laid out with (laid_width, of the text and its
    known values: 北京市 given for a field of an English text), narrowest first."""
    out: dict[int, list[int]] = {}
    laid: dict[int, int] = {}   # a text's width -> the one it is laid out with
    for n, (text, given) in enumerate(zip(texts, known or [None] * len(texts))):
        width = max(text_width(model, text), text_width(model, " ".join(map(str, (given or {}).values()))))
        if width not in laid:
            laid[width] = laid_width(schema, model, max_tokens, width)
        out.setdefault(laid[width], []).append(n)
    return dict(sorted(out.items()))


OPTIONS = [name for name, p in inspect.signature(extract_many).parameters.items()
           if p.kind == p.KEYWORD_ONLY and name not in ("model", "trace", "known")]


def _no_other_options(options, caller: str) -> None:
    """UsageError naming an option `caller` lacks, with the close matches."""
    for name in options:
        if name not in OPTIONS:
            near = difflib.get_close_matches(name, OPTIONS, n=2)
            raise UsageError(f"{caller}() has no option `{name}`; "
                             + (f"did you mean {' or '.join(f'`{n}`' for n in near)}?" if near
                                else f"its options are {', '.join(OPTIONS)}"))


def extract(text: str, schema, *, model=None, trace: bool = False, known: dict | None = None, **options):
    """One text in, one valid instance of `schema` out (or ExtractionError naming the field).

    `schema`: a pydantic model class, a JSON Schema dict, or the path of a JSON Schema file
    (read with the local files its references name). trace=True returns (value, trace) with
    forward passes, tokens committed, per-field confidence, the step at which each field
    settled and, per verbatim field, where in `text` its piece stands (`trace.spans[path]`:
    start and end characters). known={"path": value} fixes those fields; the rest is decoded
    conditioned on them. `options` are extract_many's (threshold, temperature, seed,
    max_tokens, truncate, schedule, use_cache).
    """
    _no_other_options(options, "extract")
    if known is not None and not isinstance(known, dict):
        raise UsageError(f"known= takes a dict of field path -> value, such as {{'area.radius': '5 NM'}}, "
                         f"not a {type(known).__name__}")
    result = extract_many([text], schema, model=model, trace=trace, known=[known], **options)[0]
    value = result[0] if trace else result
    if isinstance(value, CloverError):
        raise value
    return result


__all__ = ["extract", "extract_many", "load_model"]
