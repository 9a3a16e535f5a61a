"""The command line: `extract` over files, `info` about a model, `schema` to show a canvas,
`serve` an HTTP server (serve.py), `demo` the airspace demo.

Thin: it parses arguments, runs batches through api.extract_many and prints results;
reading inputs and writing outputs is batch_io.py. This module knows nothing of automata
or decoding (it prepares the schema once to check it before the first record).

`extract` accounts for every input: each is a record in OUT or a row in OUT.errors.jsonl,
written a line per call and fsync'ed per batch, so a run stopped at any moment (a signal,
a kill, a power cut) resumes (`--resume`) to exactly the records of an uninterrupted run.
SIGINT and SIGTERM stop it after the batch in hand; a lock file keeps a second run off
the same OUT. The exit codes are EXIT_CODES.

Over 400 lines: one table of commands (COMMANDS) with each command's function; the file
I/O is batch_io.py's, the Ray driver distributed.py's.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import hashlib
import importlib
import itertools
import json
import os
import re
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from .batch_io import CliError, OutputLock, Sink, count, done_sources, files, records, roots, written_here
from .distributed import decode_batch, outcome
from .errors import CheckpointError, CloverError, UsageError
from .schema_refs import read_schema

COMMANDS: dict = {}                    # name -> (function, help, arguments)
EXIT_CODES = """exit codes:
  0    every input was extracted
  1    the run finished, but some inputs failed: each is a row in OUT.errors.jsonl
       (stderr without -o) with its reason; the records of the others are written
  2    the run could not start or stopped on an error of the setup (arguments, schema,
       model, an output another run holds, a full disk): the message says which
  130  stopped by SIGINT (Ctrl-C) after the batch in hand: what is written is
       complete, and the same command with --resume goes on from there
  143  stopped by SIGTERM, the same way"""


def command(name: str, help: str, *arguments, epilog: str | None = None):
    """Register a subcommand: one decorated function, with arg(...) specs for its options."""
    def register(fn):
        COMMANDS[name] = (fn, help, arguments, epilog)
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
        if path.is_dir():
            raise CliError(f"--schema {spec}: a folder; give a JSON Schema file or package.module:Class")
        if not path.is_file():
            raise CliError(f"--schema {spec}: no such file; give a JSON Schema file or package.module:Class")
        try:
            schema = read_schema(path)
        except ValueError as e:   # not JSON, not UTF-8, nested too deep
            raise CliError(f"--schema {spec}: not valid JSON ({e}); fix the file") from e
        if isinstance(schema, bool):   # true: any value; false: none (refused at layout)
            return schema
        if not isinstance(schema, dict) or not isinstance(schema.get("properties", {}), dict):
            raise CliError(f"--schema {spec}: not a JSON Schema (expected an object such as "
                           '{"type": "object", "properties": {...}}, or true or false)')
        return schema
    module_name, _, name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise CliError(f"--schema {spec}: cannot import module `{e.name}`; check the spelling and that "
                       "its package is installed or on PYTHONPATH") from e
    except (Exception, SystemExit) as e:   # (a module that calls sys.exit on import)
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
    from .api import lay_out

    if model.tokenizer is None:
        raise CliError(f"{model.source}: the model needs tokenizer.json to extract")
    return lay_out(schema, model, fit=fit)


class Stop:
    """SIGINT and SIGTERM while extracting: the batch in hand is finished and written, then the
    run stops (`signal` says which came). A second SIGINT stops at once (KeyboardInterrupt)."""

    def __init__(self):
        self.signal, self.before = None, {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():   # signals reach the main thread only
            for s in (signal.SIGINT, signal.SIGTERM):
                self.before[s] = signal.signal(s, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.signal is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum)
        message = f"\nclover-struct: {self.signal.name}: stopping after this batch (Ctrl-C again stops at once)\n"
        try:   # a raw write: the handler may run while the main thread is inside sys.stderr's own write
            os.write(sys.stderr.fileno(), message.encode())
        except (OSError, ValueError, AttributeError):
            pass

    def __exit__(self, *exc):
        for s, handler in self.before.items():
            signal.signal(s, handler)


def progress_bar(total: int | None, done: int, on: bool):
    """A bar on stderr that advances per record written (tqdm: count, rate, ETA), or None when off."""
    if not on:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=done, unit="rec", file=sys.stderr, dynamic_ncols=True, leave=False,
                smoothing=0.05)


def local_decode(batches, schema, model, batch_size: int, truncate: bool):
    """(batch, outcomes) for each batch of (source, text, why) records: an outcome per readable text."""
    for batch in batches:
        texts = [text for _, text, why in batch if why is None]
        yield batch, [outcome(v) for v in decode_batch(texts, schema, model, batch_size, truncate)] if texts else []


def check_ray(args) -> None:
    """CliError for --ray/--workers given wrongly, or --ray without Ray installed."""
    if args.ray is None:
        if args.workers is not None:
            raise CliError("--workers needs --ray (a single process has one worker)")
        return
    if args.workers is not None and args.workers < 1:
        raise CliError("--workers must be at least 1")
    if args.ray and os.path.lexists(args.ray):
        raise CliError(f"--ray took `{args.ray}` as the cluster's address, but it is a file; put --ray after the "
                       "inputs, or write --ray=ADDRESS")
    from .distributed import import_ray
    try:
        import_ray()
    except UsageError as e:
        raise CliError(str(e)) from None


def _file_of(source: str) -> str:
    """The file of a source (a text file, or a JSONL file's line: `x.jsonl:3`)."""
    return re.sub(r":\d+$", "", source)


def _real(source: str) -> str:
    """A source as one path, whatever folder or link it was read through (its line kept)."""
    file = _file_of(source)
    return os.path.realpath(file) + source[len(file):]


def _astray(sources: set[str]) -> dict[str, str]:
    """Where none of an earlier run's sources is a path from this folder (they are paths from the
    folder it ran in), its sources by their last part (a file's name, and its line); else nothing."""
    if any(os.path.lexists(_file_of(s)) for s in itertools.islice(sources, 4096)):
        return {}
    return {os.path.basename(s): s for s in sources}


def _met_before(source: str, astray: dict[str, str], out) -> bool:
    """CliError where a record's source is, by its file's name and line, one an earlier run wrote
    from another folder (reading it again would write it twice); else False."""
    if (seen := astray.get(os.path.basename(source))) is not None:
        raise CliError(f"--resume: {out} holds {seen}, a path from the folder the earlier run ran in, where this "
                       f"run reads {source}; run it there")
    return False


def run_settings(args, schema) -> dict:
    """What decides a run's records, which a --resume must share: the schema (a digest of its
    JSON Schema), the model, --text-field, --truncate and --min-confidence."""
    as_json = schema.model_json_schema() if hasattr(schema, "model_json_schema") else schema
    digest = hashlib.sha256(json.dumps(as_json, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return {"--schema": digest, "--model": str(Path(args.model).resolve()) if args.model
            else "the embedded clover-mini", "--text-field": args.text_field, "--truncate": args.truncate,
            "--min-confidence": args.min_confidence}


def keep_settings(out: Path, settings: dict, resume: bool) -> None:
    """The run's settings kept beside OUT (OUT.settings); CliError where a --resume's differ from
    those OUT was written with (its lines would mix two runs' records)."""
    path = settings_path(out)
    try:
        earlier = json.loads(path.read_text()) if resume and path.is_file() else settings
    except (OSError, ValueError):
        earlier = settings
    if changed := [k for k in settings if k in earlier and earlier[k] != settings[k]]:
        def shown(v) -> str:
            return "none" if v is None else ("on" if v else "off") if isinstance(v, bool) else str(v)
        said = ["another --schema" if k == "--schema" else f"{k} {shown(earlier[k])} (this run: {shown(settings[k])})"
                for k in changed]
        raise CliError(f"--resume: {out} was written with {', '.join(said)}; resume with the same settings, or "
                       "write to another -o OUT")
    try:
        path.write_text(json.dumps(settings, indent=1) + "\n")
    except OSError as e:
        raise CliError(f"-o {out}: cannot write {path.name} beside it ({e.strerror or e}); free some space or give "
                       "another -o OUT") from e


def error_path(out: Path) -> Path:
    return out.with_name(out.stem + ".errors.jsonl") if out.suffix else Path(f"{out}.errors.jsonl")


def settings_path(out: Path) -> Path:
    return out.with_name(out.name + ".settings")


def written_by_a_run(out: Path) -> list[Path]:
    """OUT, its errors file and what a run keeps beside them (settings, locks): no folder or glob
    among the inputs reads these."""
    err = error_path(out)
    return [out, err, settings_path(out), OutputLock.of(out), OutputLock.of(err)]


def _sharing_errors(out: Path) -> Path | None:
    """Another output whose run wrote the errors file OUT's would empty (x.json beside x.jsonl)."""
    err = error_path(out)
    for kept in out.parent.glob(glob.escape(out.stem) + "*.settings"):
        other = kept.with_name(kept.name.removesuffix(".settings"))
        if other.name != out.name and error_path(other) == err and other.exists():
            return other
    return None


@command("extract", "extract one record per text file or JSONL line",
         arg("inputs", nargs="+", metavar="INPUT",
             help="files, directories (recursive: .txt .md .jsonl .ndjson) or globs"),
         arg("--schema", required=True, metavar="SPEC", help="package.module:Class or a JSON Schema file"),
         arg("-o", "--output", metavar="OUT", help="output JSONL, errors beside it in OUT.errors.jsonl "
             "(default, or -: records on stdout, errors on stderr)"),
         MODEL, DEVICE, arg("--batch-size", type=int, default=16, metavar="N", help="records decoded jointly (default 16)"),
         arg("--text-field", default="text", metavar="F", help="text field of JSONL lines (default text)"),
         arg("--resume", action="store_true", help="skip records already in OUT and its errors file"),
         arg("--truncate", action="store_true", help="read the start of a text longer than the model's context "
             "holds beside the schema (default: such a text is an error row)"),
         arg("--quiet", action="store_true", help="no progress bar"),
         arg("--json", action="store_true", help="print the summary as a JSON object (on stdout with -o OUT, else "
             "on stderr, after the error rows)"),
         arg("--min-confidence", type=float, metavar="P", help="a record whose least sure field the model gave "
             "a confidence below P (0-1) goes to the errors, named; every record line carries its `confidence`"),
         arg("--ray", nargs="?", const="", metavar="ADDRESS", help="decode on a Ray cluster (the one at ADDRESS, "
             "else a local one; pip install 'clover-struct[ray]'); the output is the same"),
         arg("--workers", type=int, metavar="N", help="with --ray: decoding workers, a model each (default: one "
             "per CPU of the cluster, or per GPU with --device cuda)"),
         epilog=EXIT_CODES)
def extract(args) -> int:
    from .api import model_lock, prepare

    if args.batch_size < 1:
        raise CliError("--batch-size must be at least 1")
    if args.output is not None and not args.output.strip():
        raise CliError("-o takes a file name (or - for stdout), not an empty one")
    args.output = None if args.output == "-" else args.output
    if args.resume and not args.output:
        raise CliError("--resume needs -o OUT (it reads what OUT already holds)")
    if args.min_confidence is not None and not 0 <= args.min_confidence <= 1:
        raise CliError(f"--min-confidence is a probability, 0 to 1; got {args.min_confidence}")
    check_ray(args)
    paths = roots(args.inputs)
    schema = load_spec(args.schema)
    if args.ray is None:
        model = load_model(args.model, args.device)
        with model_lock(model):
            prepare(schema, model)   # the schema checked, and its automata built, before the first record
    out = Path(args.output) if args.output else None
    err = error_path(out) if out else None
    if out is not None:
        if (blocked := next((p for p in out.parents if p.exists() and not p.is_dir()), None)) is not None:
            raise CliError(f"-o {out}: {blocked} is a file, not a folder; give OUT in a folder")
        if out.is_dir():
            raise CliError(f"-o {out} is a folder; give a file in it, e.g. -o {out / 'records.jsonl'}")
        for named in args.inputs:   # a folder or glob holding the output skips it; a named file is refused
            if os.path.isfile(named) and any(p.exists() and os.path.samefile(named, p) for p in (out, err)):
                raise CliError(f"{named} is also the output ({out}) or its errors file ({err}): writing them would "
                               f"empty it first; write to another -o OUT")
        out.parent.mkdir(parents=True, exist_ok=True)
    if args.ray is None:
        workers = contextlib.nullcontext()
    else:   # started, and its mistakes said, before OUT is emptied
        from .distributed import ray_workers
        workers = ray_workers(schema, address=args.ray, workers=args.workers, device=args.device,
                              model=args.model and str(Path(args.model).resolve()), batch_size=args.batch_size,
                              truncate=args.truncate)
    # OUT and its errors file each locked: `-o x.jsonl` and `-o x.json` share x.errors.jsonl
    with OutputLock(out) if out else contextlib.nullcontext(), OutputLock(err) if err else contextlib.nullcontext(), \
            Stop() as stop, workers as ray_decode:
        if out is not None and not args.resume:
            if out.is_file() and not written_here(out):   # an input a folder or glob holds, say
                raise CliError(f"-o {out} holds lines clover-struct did not write (an input?), which writing would "
                               "empty; give another -o OUT, or delete it first")
            if err.exists() and (other := _sharing_errors(out)) is not None:
                raise CliError(f"-o {out}: its errors file {err} holds the errors of the run that wrote {other}, "
                               f"which this run would empty; give -o another name")
        if out is not None:
            keep_settings(out, run_settings(args, schema), args.resume)
        done, ok = done_sources(out) if args.resume else (set(), 0)
        failed, failed_before = done_sources(err) if args.resume else (set(), 0)
        astray = _astray(done | failed)
        done = {_real(d) for d in done | failed}   # however the inputs are spelt this time, links too
        if out is not None and not args.resume:
            out.write_bytes(b"")
            err.unlink(missing_ok=True)
        sinks = Sink(out, sys.stdout), Sink(err, sys.stderr)
        exclude = written_by_a_run(out) if out else []
        on = sys.stderr.isatty() and not args.quiet
        bar = progress_bar(count(paths, exclude) if on else None, ok + failed_before, on)
        new_ok, new_failed, t0 = 0, 0, time.monotonic()
        stream = (r for r in records(files(paths, exclude), args.text_field, args.truncate)
                  if _real(r[0]) not in done and not _met_before(r[0], astray, out))
        # the next batch, or [] (the end) once the input is read or a signal came
        batches = iter(lambda: [] if stop.signal else list(itertools.islice(stream, args.batch_size)), [])
        decoded = local_decode(batches, schema, model, args.batch_size, args.truncate) if args.ray is None \
            else ray_decode(batches)
        try:
            for batch, outcomes in decoded:
                outcomes = iter(outcomes)
                if bar is not None:
                    bar.clear()
                for source, _, why in batch:
                    record, reason, low = next(outcomes) if why is None else (None, why, None)
                    line = {"source": source, "record": record} if reason is None else {"source": source}
                    if low is not None:
                        line["confidence"] = sure = round(low[1], 4)   # what is written is what is compared
                        if args.min_confidence is not None and sure < args.min_confidence:   # kept, beside why
                            reason = (f"the model's confidence in field `{low[0]}` is {sure}, below "
                                      f"--min-confidence {args.min_confidence}")
                    if reason is None:
                        sinks[0].write(line)
                        new_ok += 1
                    else:
                        sinks[1].write({**line, "error": reason})
                        new_failed += 1
                    if bar is not None:
                        bar.update(1)
                for sink in sinks:
                    sink.sync()
        finally:
            decoded.close()   # the Ray workers stopped, and a local cluster shut down
            if bar is not None:
                bar.close()
            for sink in sinks:
                sink.close()
    seconds, failed = time.monotonic() - t0, failed_before + new_failed
    stopped = f"; stopped by {stop.signal.name}: run again with --resume to go on" if stop.signal else ""
    if args.json:
        print(json.dumps({"succeeded": ok + new_ok, "failed": failed, "resumed": ok + failed_before,
                          "output": out and str(out), "errors": err and str(err), "seconds": round(seconds, 3),
                          "stopped_by": stop.signal and stop.signal.name}),
              file=sys.stdout if out else sys.stderr)   # (without -o the records are on stdout)
    else:
        print(f"clover-struct: {ok + new_ok} succeeded, {failed} failed"
              + (f" (see {err})" if err and failed else "")
              + (f", {ok + failed_before} of them in the earlier run" if args.resume else "")
              + f"; {new_ok + new_failed} records in {seconds:.1f} s" + stopped, file=sys.stderr)
    if stop.signal:
        return 128 + stop.signal.value
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


@command("serve", "an OpenAI-compatible HTTP server for structured output (response_format json_schema)",
         MODEL, DEVICE,
         arg("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)"),
         arg("--port", type=int, default=8000, help="port (default 8000)"),
         arg("--max-batch", type=int, default=16, metavar="N", help="requests decoded jointly (default 16)"),
         arg("--max-wait-ms", type=float, default=10, metavar="M",
             help="how long the first request of a batch waits for others (default 10)"),
         arg("--api-key", default=os.environ.get("CLOVER_API_KEY"), metavar="KEY",
             help="answer only requests with `Authorization: Bearer KEY` (default: $CLOVER_API_KEY, else no key)"),
         arg("--max-pending", type=int, default=256, metavar="N",
             help="requests in flight before the server answers 503 (default 256)"),
         arg("--max-body", type=int, default=1 << 20, metavar="BYTES", help="largest request body (default 1 MiB)"))
def serve(args) -> int:
    for name in ("max_batch", "max_pending", "max_body"):
        if getattr(args, name) < 1:
            raise CliError(f"--{name.replace('_', '-')} must be at least 1")
    if not 0 <= args.max_wait_ms <= 60_000:   # (inf had made a lone request wait for ever, nan as 0)
        raise CliError(f"--max-wait-ms must be 0 to 60000 (how long a batch waits to fill), got {args.max_wait_ms}")
    if not 0 <= args.port <= 65535:
        raise CliError(f"--port must be 0 to 65535 (0: any free port), got {args.port}")
    try:
        from .serve import run
    except ImportError as e:
        raise CliError(f"serve needs the serve extra ({e.name} is missing): pip install 'clover-struct[serve]'") from e
    run(load_model(args.model, args.device), args.host, args.port, max_batch=args.max_batch,
        max_wait_ms=args.max_wait_ms, api_key=args.api_key, max_pending=args.max_pending, max_body=args.max_body)
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="clover-struct", description="Structured extraction with a "
                                "block-diffusion language model.", epilog="extract: " + EXIT_CODES,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (fn, help, arguments, epilog) in COMMANDS.items():
        q = sub.add_parser(name, help=help, description=help, epilog=epilog,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
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
    except BrokenPipeError:   # `clover-struct extract ... | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print("\nclover-struct: interrupted; run again with --resume to continue", file=sys.stderr)
        return 130
    except Exception as e:   # one line, never a traceback (CLOVER_DEBUG=1 shows it)
        if os.environ.get("CLOVER_DEBUG", "0") not in ("", "0"):
            traceback.print_exc()
        if isinstance(e, OSError) and e.filename:
            text = f"{e.filename}: {e.strerror}"
        elif isinstance(e, (CloverError, OSError)):
            text = str(e)
        else:
            text = (f"{type(e).__name__}: {e}; this is a bug in clover-struct: please report it "
                    "(CLOVER_DEBUG=1 shows the traceback)")
        print(f"clover-struct: error: {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
