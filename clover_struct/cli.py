"""The command line: `extract` over files, `info` about a model, `schema` to show a canvas.

Thin: it parses arguments, streams records from files and prints results.
Extraction is api.extract_many; this module knows nothing of automata or decoding
(it lays out the canvas only to check a schema before the first record). Output is
JSON lines, one write call per line, fsync'ed per batch, so a run killed at any
moment resumes (`--resume`) to exactly the records of an uninterrupted run.
"""

from __future__ import annotations

import argparse
import glob
import importlib
import itertools
import json
import os
import sys
import time
import traceback
from pathlib import Path

from .errors import CheckpointError, CloverError, ExtractionError, UsageError

SUFFIXES = (".txt", ".md", ".jsonl")   # what a directory contributes
COUNT_BYTES = 64 << 20                 # count records for an ETA only below this much JSONL
COMMANDS: dict = {}                    # name -> (function, help, arguments)


class CliError(UsageError):
    """A mistake on the command line; main prints it as one line and exits 2."""


def command(name: str, help: str, *arguments):
    """Register a subcommand: one decorated function, with arg(...) specs for its options."""
    def register(fn):
        COMMANDS[name] = (fn, help, arguments)
        return fn
    return register


def arg(*flags, **options):
    return flags, options


MODEL = arg("--model", metavar="DIR", help="model directory (default: the embedded clover-mini)")
DEVICE = arg("--device", default=None, metavar="D", help="torch device, e.g. cuda (default cpu; bf16 on CUDA)")


def load_spec(spec: str):
    """`package.module:Class` (a pydantic model) or the path of a JSON Schema file."""
    path = Path(spec)
    if path.suffix == ".json" or path.exists() or ":" not in spec:
        if not path.is_file():
            raise CliError(f"--schema {spec}: no such file; give a JSON Schema file or package.module:Class")
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CliError(f"--schema {spec}: not valid JSON ({e}); fix the file") from e
        if not isinstance(schema, dict) or not isinstance(schema.get("properties", {}), dict):
            raise CliError(f"--schema {spec}: not a JSON Schema object (expected {{\"type\": \"object\", "
                           "\"properties\": {...}}})")
        return schema
    module_name, _, name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise CliError(f"--schema {spec}: cannot import module `{e.name}`; check the spelling and that "
                       "its package is installed or on PYTHONPATH") from e
    except Exception as e:
        raise CliError(f"--schema {spec}: importing `{module_name}` failed: {type(e).__name__}: {e}") from e
    cls = getattr(module, name, None)
    is_model = lambda x: isinstance(x, type) and hasattr(x, "model_json_schema")  # noqa: E731
    if cls is None:
        models = [k for k, v in vars(module).items() if is_model(v) and v.__module__ == module.__name__]
        raise CliError(f"--schema {spec}: module `{module_name}` has no `{name}`; "
                       f"its pydantic models are: {', '.join(models) or 'none'}")
    if not is_model(cls):
        raise CliError(f"--schema {spec}: `{name}` is not a pydantic model class (a BaseModel subclass)")
    return cls


def load_model(directory: str | None, device: str | None = None):
    from .api import load_model as _load
    try:
        return _load(directory, device=device)
    except UsageError as e:
        raise CliError(f"--device {device}: {e}") from e
    except CheckpointError as e:
        if directory is None:
            raise CheckpointError(f"{e} (on the command line: --model DIR)") from e
        raise


def canvas_of(schema, model, *, fit: bool = True):
    """The schema's canvas over the model's tokenizer (SchemaError if it cannot be laid out,
    or with `fit`, if it does not fit the model's context)."""
    from .schema_walk import build_canvas

    cfg = model.config
    if model.tokenizer is None or cfg.mask_token_id is None or cfg.pad_token_id is None:
        raise CliError(f"{model.source}: the model needs tokenizer.json and mask and pad tokens to extract")
    canvas = build_canvas(schema, model.tokenizer, mask_id=cfg.mask_token_id, pad_id=cfg.pad_token_id)
    if fit:
        canvas.check_fits(cfg.max_position_embeddings)
    return canvas


def roots(inputs: list[str]) -> list[Path]:
    """Each INPUT as paths (a glob expanded, sorted); FileNotFoundError for one that names nothing."""
    out = []
    for s in inputs:
        if os.path.lexists(s):
            out.append(Path(s))
        elif any(c in s for c in "*?["):
            found = sorted(glob.glob(s, recursive=True))
            if not found:
                raise FileNotFoundError(f"{s}: no file matches this pattern")
            out += map(Path, found)
        else:
            raise FileNotFoundError(f"{s}: no such file or directory")
    return out


def files(paths: list[Path], exclude=()):
    """Files in order, each once: directories walked recursively, sorted, hidden entries skipped."""
    seen = {os.path.abspath(p) for p in exclude}
    for f in itertools.chain.from_iterable(_walk(p) if p.is_dir() else [p] for p in paths):
        if os.path.abspath(f) not in seen:
            seen.add(os.path.abspath(f))
            yield f


def _walk(root: Path):
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        yield from (Path(folder, n) for n in sorted(names) if n.endswith(SUFFIXES) and not n.startswith("."))


def records(paths, text_field: str):
    """(source, text, error) for each record, streamed: one file open at a time, a line at a time."""
    for path in paths:
        try:
            if path.suffix == ".jsonl":
                with open(path, "rb") as f:
                    yield from ((f"{path}:{n}", *_line_text(raw, text_field)) for n, raw in enumerate(f, 1)
                                if raw.strip())
                continue
            data = path.read_bytes()
        except OSError as e:
            yield str(path), None, f"cannot read the file: {e.strerror or e}"
            continue
        try:
            yield str(path), data.decode("utf-8-sig"), "binary file (NUL bytes)" if b"\0" in data else None
        except UnicodeDecodeError:
            yield str(path), None, "binary file (not UTF-8 text); only text files can be read"


def _line_text(raw: bytes, field: str):
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return None, f"invalid JSON line ({e})"
    if not isinstance(obj, dict):
        return None, "the line is not a JSON object"
    if field not in obj:
        return None, f"no `{field}` field; name the text field with --text-field"
    if not isinstance(obj[field], str):
        return None, f"field `{field}` is {type(obj[field]).__name__}, not a string"
    return obj[field], None


def count(paths: list[Path], exclude) -> int | None:
    """Records in the input when that is cheap to know (for an ETA), else None."""
    n, budget = 0, COUNT_BYTES
    for f in files(paths, exclude):
        if f.suffix != ".jsonl":
            n += 1
            continue
        try:
            if (budget := budget - f.stat().st_size) < 0:
                return None
            with open(f, "rb") as h:
                n += sum(1 for line in h if line.strip())
        except OSError:
            n += 1   # an unreadable file is one (failed) record
    return n


class Sink:
    """JSON lines to a file (opened at the first line; one write call per line, fsync per
    batch) or, without a path, to a stream."""

    def __init__(self, path: Path | None, stream):
        self.path, self.stream, self.fd = path, stream, None

    def write(self, obj: dict) -> None:
        line = json.dumps(obj, ensure_ascii=False) + "\n"
        if self.path is None:
            return self.stream.write(line)
        if self.fd is None:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        data = line.encode("utf-8")
        while data:   # one call; more only after a short write
            data = data[os.write(self.fd, data):]

    def sync(self) -> None:
        if self.fd is not None:
            os.fsync(self.fd)
        elif self.path is None:
            self.stream.flush()


def done_sources(path: Path) -> tuple[set[str], int]:
    """Sources already in a JSON-lines file, and its line count; a trailing partial line
    (a write cut short by a kill) is truncated away."""
    if not path.exists():
        return set(), 0
    seen, end, lines = set(), 0, 0
    with open(path, "r+b") as f:
        for line in f:
            if not line.endswith(b"\n"):
                break
            end, lines = end + len(line), lines + 1
            try:
                seen.add(json.loads(line)["source"])
            except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
                raise CliError(f"{path}:{lines}: not a line clover-struct wrote ({e}); "
                               "resume only into the output of an earlier run") from e
        f.truncate(end)
    return seen, lines


class Progress:
    """A one-line bar on stderr: records, rate and (when the total is known) ETA."""

    def __init__(self, total: int | None, on: bool):
        self.total, self.on, self.t0 = total, on, time.monotonic()

    def show(self, done: int, fresh: int, text: str = "") -> None:
        """Draw `done` records, `fresh` of them this run (the rate); show(0, 0) clears the line."""
        if not self.on:
            return
        if fresh:
            rate = fresh / max(time.monotonic() - self.t0, 1e-9)
            text = f"{done} records  {rate:.1f}/s"
            if self.total:
                eta = max(self.total - done, 0) / rate
                text = (f"{done}/{self.total} ({100 * done // self.total}%)  {rate:.1f}/s  "
                        f"ETA {eta // 60:.0f}:{eta % 60:02.0f}")
        sys.stderr.write("\r\033[K" + text)
        sys.stderr.flush()


@command("extract", "extract one record per text file or JSONL line",
         arg("inputs", nargs="+", metavar="INPUT", help="files, directories (recursive: .txt .md .jsonl) or globs"),
         arg("--schema", required=True, metavar="SPEC", help="package.module:Class or a JSON Schema file"),
         arg("-o", "--output", metavar="OUT", help="output JSONL, errors beside it in OUT.errors.jsonl "
             "(default: records on stdout, errors on stderr)"),
         MODEL, DEVICE, arg("--batch-size", type=int, default=16, metavar="N", help="records decoded jointly (default 16)"),
         arg("--text-field", default="text", metavar="F", help="text field of JSONL lines (default text)"),
         arg("--resume", action="store_true", help="skip records already in OUT and its errors file"),
         arg("--quiet", action="store_true", help="no progress bar"),
         arg("--json", action="store_true", help="print the summary as a JSON object on stdout"))
def extract(args) -> int:
    from .api import extract_many

    if args.batch_size < 1:
        raise CliError("--batch-size must be at least 1")
    if args.resume and not args.output:
        raise CliError("--resume needs -o OUT (it reads what OUT already holds)")
    paths = roots(args.inputs)
    schema = load_spec(args.schema)
    model = load_model(args.model, args.device)
    canvas_of(schema, model)
    out = Path(args.output) if args.output else None
    err = (out.with_name(out.stem + ".errors.jsonl") if out.suffix else Path(f"{out}.errors.jsonl")) if out else None
    done, ok = done_sources(out) if args.resume else (set(), 0)
    failed, failed_before = done_sources(err) if args.resume else (set(), 0)
    done |= failed
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        if not args.resume:
            out.write_bytes(b"")
            err.unlink(missing_ok=True)
    sinks = Sink(out, sys.stdout), Sink(err, sys.stderr)
    exclude = [p for p in (out, err) if p]
    bar = Progress(None, sys.stderr.isatty() and not args.quiet)
    if bar.on:
        bar.total = count(paths, exclude)
    new_ok, new_failed, t0 = 0, 0, time.monotonic()
    stream = (r for r in records(files(paths, exclude), args.text_field) if r[0] not in done)
    while batch := list(itertools.islice(stream, args.batch_size)):
        texts = [text for _, text, why in batch if why is None]
        values = iter(extract_many(texts, schema, model=model, batch_size=args.batch_size) if texts else ())
        bar.show(0, 0)
        for source, _, why in batch:
            value = next(values) if why is None else None
            if why is None and not isinstance(value, ExtractionError):
                record = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
                sinks[0].write({"source": source, "record": record})
                new_ok += 1
            else:
                sinks[1].write({"source": source, "error": why or (value.reason if value.path == "" else str(value))})
                new_failed += 1
        for sink in sinks:
            sink.sync()
        bar.show(ok + failed_before + new_ok + new_failed, new_ok + new_failed)
    bar.show(0, 0)
    seconds, failed = time.monotonic() - t0, failed_before + new_failed
    if args.json:
        print(json.dumps({"succeeded": ok + new_ok, "failed": failed, "resumed": ok + failed_before,
                          "output": out and str(out), "errors": err and str(err), "seconds": round(seconds, 3)}))
    else:
        print(f"clover-struct: {ok + new_ok} succeeded, {failed} failed"
              + (f" (see {err})" if err and failed else "")
              + (f", {ok + failed_before} of them in the earlier run" if args.resume else "")
              + f"; {new_ok + new_failed} records in {seconds:.1f} s", file=sys.stderr)
    return 1 if failed else 0


@command("info", "print a model's architecture, size, vocabulary and special ids", MODEL, DEVICE)
def info(args) -> int:
    model = load_model(args.model, args.device)
    c = model.config
    family, noise = getattr(model, "family", type(model).__name__), getattr(model, "noise", "mask")
    kinds = {t: c.layer_types.count(t) for t in dict.fromkeys(c.layer_types)}
    names = {"linear_attention": "Gated DeltaNet", "full_attention": "gated attention" if family == "clover" else
             "global", "sliding_attention": f"window {getattr(c, 'sliding_window', None)}"}
    pattern = "".join({"full_attention": "A", "linear_attention": "L", "sliding_attention": "S"}[t]
                      for t in c.layer_types)
    tok = f"tokenizer: {model.tokenizer.vocab_size}" if model.tokenizer is not None else "no tokenizer.json"
    top = getattr(c, "num_experts_per_tok", None) or getattr(c, "top_k_experts", None)
    experts = f"{c.num_experts}, top-{top} per token, expert size {c.moe_intermediate_size}"
    if getattr(c, "shared_expert_intermediate_size", None):
        experts += f", shared expert {c.shared_expert_intermediate_size}"
    elif getattr(c, "intermediate_size", None):
        experts += f", beside a dense MLP of {c.intermediate_size}"
    weights = next(model.parameters())
    for key, value in [
            ("source", model.source),
            ("family", f"{family} ({noise} noise{', self-conditioning' if noise == 'uniform' else ''})"),
            ("layers", f"{c.num_hidden_layers}: " + ", ".join(
                f"{n} {t} ({names[t]})" for t, n in kinds.items()) + f"  [{pattern}]"),
            ("hidden size", c.hidden_size), ("experts", experts),
            ("parameters", f"{sum(p.numel() for p in model.parameters()):,}"),
            ("dtype", f"{str(weights.dtype).removeprefix('torch.')} on {weights.device}"),
            ("vocabulary", f"{c.vocab_size} ({tok})"),
            ("mask id", c.mask_token_id), ("pad id", c.pad_token_id), ("eos id", c.eos_token_id),
            ("block size", c.block_size if noise == "mask" else f"{c.block_size} (the canvas length)"),
            ("context", c.max_position_embeddings)]:
        print(f"{key + ':':13} {value}")
    return 0


@command("schema", "print the canvas a schema lays out over the model's tokenizer",
         arg("spec", metavar="SPEC", help="package.module:Class or a JSON Schema file"), MODEL, DEVICE)
def schema(args) -> int:
    spec, model = load_spec(args.spec), load_model(args.model, args.device)
    canvas = canvas_of(spec, model, fit=False)
    print(canvas.describe(), flush=True)
    canvas.check_fits(model.config.max_position_embeddings)   # shown first, so one can see what to shrink
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="clover-struct", description="Structured extraction with a "
                                "block-diffusion language model.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (fn, help, arguments) in COMMANDS.items():
        q = sub.add_parser(name, help=help, description=help)
        for flags, options in arguments:
            q.add_argument(*flags, **options)
        q.set_defaults(run=fn)
    return p


@command("demo", "airspace demo: 20 notices -> 3D no-fly zones, map and route check", MODEL, DEVICE,
         arg("--out", default=".", metavar="DIR", help="where zones.geojson and airspace.png go (default .)"),
         arg("--batch-size", type=int, default=20, metavar="N", help="records decoded jointly (default 20)"),
         arg("--baseline", action="store_true", help="also decode one token per step, for comparison (slow)"))
def demo(args) -> int:
    from .demo import run

    if args.batch_size < 1:
        raise CliError("--batch-size must be at least 1")
    run(load_model(args.model, args.device), out_dir=args.out, batch_size=args.batch_size, baseline=args.baseline)
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as e:   # --help, or a usage error argparse has printed
        return e.code
    try:
        return args.run(args)
    except (CloverError, FileNotFoundError) as e:
        if os.environ.get("CLOVER_DEBUG", "0") not in ("", "0"):
            traceback.print_exc()
        text = f"{e.filename}: {e.strerror}" if isinstance(e, OSError) and e.filename else str(e)
        print(f"clover-struct: error: {text}", file=sys.stderr)
        return 2
    except BrokenPipeError:   # `clover-struct extract ... | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print("\nclover-struct: interrupted; run again with --resume to continue", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
