"""extract() and extract_many(): text and a schema in, validated instances out.

Builds the canvas (layout.py) and its automata (constraints.py), writes the
prompt, runs the joint decoder, then validates. A value that fails a check a
regular expression cannot express (numeric bounds, pydantic validators) is
replaced by the slot's next-best complete value; if none passes, the record
becomes an ExtractionError naming the field. Mistakes in the call itself (a
`known` path the schema lacks, a known value its field cannot hold, a model
without tokenizer or mask token) raise at once.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import torch

from .constraints import compile_canvas
from .decoder import Trace, alternatives, cost, decode
from .errors import CheckpointError, CloverError, ExtractionError, SchemaError
from .layout import build_canvas
from .verbatim import for_text


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


@cache
def default_model():
    """The embedded model, loaded once per process."""
    return load_model()


def prompt_ids(tokenizer, text: str, canvas) -> list[int]:
    """The prompt the canvas follows.

    Our models: the schema's title and the text. Checkpoints with a chat template
    (tokenizer_config.json): the template around an instruction that shows the
    schema, ending where the assistant's answer (the canvas) begins.
    """
    title = canvas.schema.get("title", "record")
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        return tokenizer.encode(f"schema: {title}\ntext:\n{text}\nrecord:\n")
    try:
        import jinja2  # only checkpoints that bring a template need it
    except ImportError:
        raise CheckpointError("this checkpoint's tokenizer_config.json has a chat template, which needs "
                              "jinja2: pip install jinja2") from None

    instruction = (f"Extract a {title} record from the text below as JSON matching this schema:\n"
                   f"{json.dumps(canvas.schema, separators=(',', ':'))}\n\nText:\n{text}")
    rendered = jinja2.Environment().from_string(template).render(
        messages=[{"role": "user", "content": instruction}], add_generation_prompt=True)
    return tokenizer.encode(rendered)


def prepare(schema, model=None, max_tokens: int | None = None):
    """The model (default: the embedded one), its canvas for `schema` and the canvas's automata."""
    model = model or default_model()
    cfg = model.config
    if model.tokenizer is None:
        raise ValueError("this model has no tokenizer.json; extraction needs one")
    if cfg.mask_token_id is None or cfg.pad_token_id is None:
        raise ValueError("this model has no mask or pad token, so it cannot denoise a canvas")
    canvas = build_canvas(schema, model.tokenizer, max_tokens=max_tokens, mask_id=cfg.mask_token_id,
                          pad_id=cfg.pad_token_id)
    canvas.check_fits(cfg.max_position_embeddings)
    return model, canvas, compile_canvas(canvas, model.tokenizer, vocab_size=cfg.vocab_size)


def encode_prompt(model, text, canvas, truncate: bool = False) -> list[int]:
    """The prompt ids for `text`; ExtractionError for an empty text or one the context cannot hold."""
    if not isinstance(text, str) or not text.strip():
        raise ExtractionError("", "the text is empty; give the notice or message to extract from")
    tok, room = model.tokenizer, model.config.max_position_embeddings - len(canvas.ids)
    ids = prompt_ids(tok, text, canvas)
    if len(ids) <= room:
        return ids
    if not truncate:
        raise ExtractionError("", f"the text takes {len(ids)} tokens but the model's context leaves "
                                  f"{room} beside the canvas; shorten it or pass truncate=True")
    keep = max(room - len(prompt_ids(tok, "", canvas)), 0)
    return prompt_ids(tok, tok.decode(tok.encode(text)[:keep]), canvas)[:room]


def _known_ids(canvas, automata, known: dict[str, Any] | None) -> dict[int, list[int]]:
    if not known:
        return {}
    by_path = {s.path: i for i, s in enumerate(canvas.slots)}
    out = {}
    for path, value in known.items():
        if path not in by_path:
            raise KeyError(f"known: no field `{path}`; fields are {', '.join(by_path)}")
        i = by_path[path]
        ids = canvas.tokenizer.encode(canvas.slots[i].render(value))
        if not automata[i].accepts(ids):
            raise ValueError(f"known: {value!r} is not a value field `{path}` can hold")
        out[i] = ids
    return out


def _slot_of(canvas, path: str) -> int | None:
    """The slot of a field path; inside a one-slot union, the union's slot."""
    return next((i for i, s in enumerate(canvas.slots)
                 if s.path == path or s.union and path.startswith(s.path + ".")), None)


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
    step = 1e-6 if "\\." in (slot.pattern or "") else 1  # a float's pattern has a fraction
    for c in slot.checks:
        if c.op == "ge":
            value = max(value, c.bound)
        elif c.op == "gt":
            value = max(value, c.bound + step)
        elif c.op == "le":
            value = min(value, c.bound)
        elif c.op == "lt":
            value = min(value, c.bound - step)
    return int(value) if step == 1 else float(value)


def _fallbacks(row, i):
    """Next-best complete values of slot i: the model's, then the nearest valid one."""
    yield from (ids for _, ids in alternatives(row, i))
    canvas, s = row.canvas, row.canvas.slots[i]
    try:
        value = _nearest(s, s.value(canvas.slot_text(row.ids, i)))
    except ExtractionError:
        return
    if value is not None:
        ids = canvas.tokenizer.encode(s.render(value))
        if row.automata[i].accepts(ids):
            yield ids + [canvas.pad_id] * (s.budget - len(ids))


def _finish(row) -> Any:
    """Validate a decoded row, falling back to next-best values for fields that fail."""
    canvas = row.canvas
    tried: set[int] = set()
    for _ in range(len(canvas.slots) + 1):  # each round repairs a different field
        try:
            for i, s in enumerate(canvas.slots):
                if s.checked and not canvas.is_empty(row.ids, i):
                    why = s.violation(s.value(canvas.slot_text(row.ids, i)))
                    if why:
                        raise ExtractionError(s.path, why)
            return canvas.validate(row.ids)
        except ExtractionError as e:
            i = _slot_of(canvas, e.path)
            if i is None:   # a check across fields (a model validator)
                return _repair_record(row, e)
            if i in tried or canvas.slots[i].kind == "choice":
                raise
            tried.add(i)
            s = canvas.slots[i]
            for alt in _fallbacks(row, i):
                trial = row.ids[:s.start] + alt + row.ids[s.end:]
                try:
                    if s.violation(s.value(canvas.slot_text(trial, i))):
                        continue
                    canvas.validate(trial)   # also the schema's own checks of this field
                except ExtractionError as other:
                    if _slot_of(canvas, other.path) == i:
                        continue   # still this field; another field's failure is the next round's
                row.ids = trial
                break
            else:
                raise ExtractionError(e.path, f"{e.reason}, and no other value the model rated likely passes")
    raise ExtractionError("", "could not produce a valid record")


def _repair_record(row, error: ExtractionError, per_slot: int = 8, pops: int = 1024) -> Any:
    """A check across fields failed: make the single-field change the model finds least
    unlikely (its cost over the decoded value's) that gives a valid record, or re-raise.
    Candidates: values of written slots made of tokens the model ranked there."""
    canvas, best = row.canvas, None
    for i, s in enumerate(canvas.slots):
        if canvas.is_empty(row.ids, i):
            continue
        own = cost(row, i, row.ids[s.start:s.end])
        for alt_cost, alt in alternatives(row, i, limit=per_slot, pops=pops, ranked_only=True):
            if best is not None and alt_cost - own >= best[0]:
                break   # best first: nothing later in this slot can do better
            trial = row.ids[:s.start] + alt + row.ids[s.end:]
            try:
                record = canvas.validate(trial)
            except ExtractionError:
                continue
            best = (alt_cost - own, trial, record)
            break
    if best is None:
        raise error
    row.ids = best[1]
    return best[2]


def extract_many(texts: list[str], schema, *, model=None, batch_size: int = 16, trace: bool = False,
                 known: list[dict] | None = None, threshold: float = 0.9, temperature: float = 0.0,
                 seed: int | None = None, max_tokens: int | None = None, truncate: bool = False,
                 schedule: str = "joint", use_cache: bool = True):
    """Decode a batch of texts jointly. Each result is an instance of `schema` or the
    ExtractionError that explains why that record failed; one failure never loses the
    others. With trace=True each result is a (value, Trace) pair. `schedule` and
    `use_cache` select the baselines benchmarks compare with (see decoder.decode)."""
    model, canvas, automata = prepare(schema, model, max_tokens)
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    results: list[Any] = [None] * len(texts)
    jobs = []
    for n, text in enumerate(texts):
        try:
            ids = encode_prompt(model, text, canvas, truncate)
            jobs.append((n, ids, _known_ids(canvas, automata, (known or [None] * len(texts))[n])))
        except ExtractionError as e:
            results[n] = e
    for b in range(0, len(jobs), batch_size):
        batch = jobs[b:b + batch_size]
        bound = [for_text(automata, texts[n], model.tokenizer) for n, _, _ in batch]
        rows = decode(model, [ids for _, ids, _ in batch], [canvas] * len(batch), bound,
                      threshold=threshold, temperature=temperature, generator=generator,
                      known=[k for _, _, k in batch], schedule=schedule, use_cache=use_cache)
        for (n, _, _), row in zip(batch, rows):
            try:
                value = _finish(row)
            except ExtractionError as e:
                value = e
            results[n] = (value, row.trace) if trace else value
    if trace:
        results = [r if isinstance(r, tuple) else (r, Trace()) for r in results]
    return results


def extract(text: str, schema, *, model=None, trace: bool = False, known: dict | None = None, **options):
    """One text in, one valid instance of `schema` out (or ExtractionError naming the field).

    trace=True returns (value, trace) with forward passes, tokens committed, per-field
    confidence and the step at which each field settled. known={"path": value} fixes
    those fields; the rest is decoded conditioned on them.
    """
    result = extract_many([text], schema, model=model, trace=trace, known=[known], **options)[0]
    value = result[0] if trace else result
    if isinstance(value, CloverError):
        raise value
    return result


__all__ = ["extract", "extract_many", "SchemaError", "ExtractionError"]
