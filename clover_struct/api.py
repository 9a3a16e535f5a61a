"""extract() and extract_many(): text and a schema in, validated instances out.

Builds the canvas (layout.py) and its automata (constraints.py), writes the
prompt, runs the joint decoder, then validates. A value that fails a check a
regular expression cannot express (numeric bounds, pydantic validators) is
replaced by the slot's next-best complete value; if none passes, the record
becomes an ExtractionError naming the field. Mistakes in the call itself (a
`known` path the schema lacks, a known value its field cannot hold, a model
without tokenizer or pad token, or a mask-noise model without a mask token) raise at once.
"""

from __future__ import annotations

import difflib
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import torch

from .constraints import compile_canvas
from .decoder import Trace, decode
from .errors import CheckpointError, CloverError, ExtractionError, UsageError
from .repair import finish
from .schema_walk import build_canvas
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
    schema, ending where the assistant's answer (the canvas) begins. The template is
    rendered as transformers renders it (trim_blocks, lstrip_blocks, loop controls, a
    sandbox, `raise_exception`, the special tokens by name: Gemma's starts with bos_token).
    """
    title = canvas.schema.get("title", "record")
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        return tokenizer.encode(f"schema: {title}\ntext:\n{text}\nrecord:\n")
    try:
        from jinja2 import TemplateError  # only checkpoints that bring a template need jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise CheckpointError("this checkpoint's tokenizer_config.json has a chat template, which needs "
                              "jinja2: pip install jinja2") from None

    def raise_exception(message):
        raise CheckpointError(f"the checkpoint's chat template refused the prompt: {message}")

    names = {f"{kind}_token": tokenizer.token_bytes(i).decode(errors="replace") for kind, i in
             (("bos", getattr(tokenizer, "bos_id", None)), ("eos", tokenizer.eos_id), ("pad", tokenizer.pad_id))
             if i is not None}
    instruction = (f"Extract a {title} record from the text below as JSON matching this schema:\n"
                   f"{json.dumps(canvas.schema, separators=(',', ':'))}\n\nText:\n{text}")
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    try:
        rendered = env.from_string(template).render(
            messages=[{"role": "user", "content": instruction}], add_generation_prompt=True, **names)
    except TemplateError as e:
        raise CheckpointError(f"the checkpoint's chat template (tokenizer_config.json) does not render: {e}; "
                              "fix or remove its chat_template") from None
    return tokenizer.encode(rendered)


def canvas_marks(model) -> tuple[int, int]:
    """(mask id, pad id) a canvas for `model` is laid out with; UsageError if it has no pad.

    A mask-noise model (Clover) denoises its mask token, so the checkpoint must name one. A
    uniform-noise model (DiffusionGemma, `model.noise == "uniform"`) never sees the mask id: the
    decoder shows it random tokens at unwritten positions. Its canvas marks them with a special
    token no value can hold: the tokenizer's mask token where it has one (Gemma's `<mask>`), else
    eos or another special token that is not the pad. The pad ends values: config.json's
    pad_token_id (DiffusionGemma's is 0, `<pad>`), or tokenizer.json's pad where config.json has none.
    """
    cfg, tok, name = model.config, model.tokenizer, getattr(model, "source", None) or "this model"
    if cfg.pad_token_id is None:
        raise UsageError(f"{name} has no pad token, which ends every value on a canvas; set pad_token_id in "
                         "its config.json")
    if getattr(model, "noise", "mask") != "uniform":
        if cfg.mask_token_id is None:
            raise UsageError(f"{name} has no mask token, so it cannot denoise a canvas; set mask_token_id in "
                             "its config.json")
        return cfg.mask_token_id, cfg.pad_token_id
    specials = [tok.mask_id, cfg.eos_token_id, tok.eos_id, *sorted(tok.special_ids)]
    mark = next((i for i in specials if i is not None and i != cfg.pad_token_id), None)
    if mark is None:
        raise UsageError(f"{name}'s tokenizer.json has no special token besides the pad, so a canvas cannot "
                         "mark its slots; add a mask token to it")
    return mark, cfg.pad_token_id


def prepare(schema, model=None, max_tokens: int | None = None):
    """The model (default: the embedded one), its canvas for `schema` and the canvas's automata."""
    model = model or default_model()
    cfg = model.config
    if model.tokenizer is None:
        raise UsageError(f"{model.source or 'this model'} has no tokenizer.json; extraction needs one: "
                         "put the checkpoint's tokenizer.json in its directory")
    mask, pad = canvas_marks(model)
    canvas = build_canvas(schema, model.tokenizer, max_tokens=max_tokens, mask_id=mask, pad_id=pad)
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


def field_paths(canvas) -> dict[str, list[int]]:
    """Field path -> slot indices, under the canvas's own paths (`area<circle>.radius_unit`)
    and the paths users write, without the variant marks (`area.radius_unit`)."""
    out: dict[str, list[int]] = {}
    for i, s in enumerate(canvas.slots):
        out.setdefault(s.path, []).append(i)
        plain = re.sub(r"<[^>]*>", "", s.path)
        if plain != s.path:
            out.setdefault(plain, []).append(i)
    return out


def slot_of_path(canvas, path: str, what: str = "known") -> int:
    """The slot a user's field path names; UsageError listing the close matches if none does."""
    paths = field_paths(canvas)
    if path not in paths:
        near = difflib.get_close_matches(path, list(paths), n=4, cutoff=0.5)
        hint = f"did you mean {', '.join(f'`{p}`' for p in near)}?" if near else \
            f"the schema's fields include {', '.join(list(paths)[:6])}{', ...' if len(paths) > 6 else ''}"
        raise UsageError(f"{what}: the schema has no field `{path}`; {hint}")
    if len(paths[path]) > 1:
        raise UsageError(f"{what}: `{path}` is a field of several variants; name one: "
                         + ", ".join(f"`{canvas.slots[i].path}`" for i in paths[path]))
    return paths[path][0]


def _known_ids(canvas, automata, known: dict[str, Any] | None) -> dict[int, list[int]]:
    if not known:
        return {}
    out = {}
    for path, value in known.items():
        i = slot_of_path(canvas, path)
        try:
            ids = canvas.tokenizer.encode(canvas.slots[i].render(value))
        except ValueError as e:
            raise UsageError(f"known: {e}") from None
        if not automata[i].accepts(ids):
            raise UsageError(f"known: {value!r} is not a value field `{path}` can hold; give one its "
                             "constraint allows (clover-struct schema SPEC prints them)")
        out[i] = ids
    return out


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
                value = finish(row)
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


__all__ = ["extract", "extract_many", "load_model"]
