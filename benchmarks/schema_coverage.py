"""Schema coverage: what `extract` makes of every JSON Schema file under a folder.

    python benchmarks/schema_coverage.py DIR [--model DIR] [--text TEXT] [--timeout S] [--json]
                                             [--layout-only] [--limit N]

Every *.json file under DIR (recursively, in path order) is read. A file that is not JSON, a
JSON array (a test-case file of some collections), a string/number/null, an object with none
of JSON Schema's keywords (a data file), or a schema its own draft's metaschema rejects is
skipped and counted under its reason; a schema object or a boolean schema is run.

Each schema is run in a worker process that loaded the model once (`--model DIR`, default the
embedded clover-mini): the file is read as `extract` reads a schema path (with the local
files its references name, schema_refs.read_schema), the canvas is built (layout), its
automata compiled, and, unless --layout-only, `clover_struct.extract(TEXT, schema)` runs and
its instance is validated. The
parent waits at most --timeout seconds per schema; a worker past it is killed (and a fresh one
started for the next schema), so nothing can hang the run. Outcomes:

  valid             an instance came back and jsonschema validates it against the ORIGINAL
                    schema (and the files it names), with the validator of its `$schema`
                    (2020-12 when there is none) and format checking on (`format_checker`:
                    the draft's FormatChecker)
  invalid           an instance came back but the validator rejects it: a silent failure,
                    the worst class (the validator's message is printed)
  refused           SchemaError (grouped by the first words of the reason)
  extraction_error  ExtractionError
  crash             any other exception (type and message printed), or the worker died
  timeout           past --timeout
  laid_out          (--layout-only) the canvas was built and its automata compiled

jsonschema checks some formats only when an optional package is installed (hostname: fqdn,
uri and uri-reference: rfc3987, duration: isoduration, date-time and time:
rfc3339-validator). Where one is missing, `format_checker()` adds a check of its own for that
format (written from RFC 1123, RFC 3986 and RFC 3339), so a format is never silently
unchecked; the run says which ones it added.

Prints a table (counts and shares per class, refusals by reason, silent failures, crashes,
seconds p50/p99/max of layout (build_canvas), automata (compile_canvas), the decode (the
extract call) and the whole extraction (all three and the validation, or as far as the
schema got: a refusal's is its layout's)) and, last, one JSON line with
the same figures. With --json, one JSON line per schema, then that summary line, no table.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import re
import sys
import time
from collections import Counter
from pathlib import Path

CLASSES = ("valid", "invalid", "refused", "extraction_error", "crash", "timeout")
LAYOUT_CLASSES = ("laid_out", "refused", "crash", "timeout")
DEFAULT_TEXT = ("Ticket 4471 from Maria Keller (maria.keller@example.org, +44 20 7946 0958), filed "
                "2024-03-18T09:30:00Z: the delivery to 12 Harbour Road, Leeds LS1 4AB, United Kingdom "
                "arrived late. Order A7-2291 had 3 items totalling 149.90 EUR; the courier was "
                "https://couriers.example.com/track/88120. Priority high, status open, tags: shipping, "
                "refund. The drone corridor over the harbour is closed from 1200 to 1500 UTC up to "
                "400 ft AGL within 2 NM of 53.79N 001.54W.")

KEYWORDS = {  # every keyword of drafts 4 to 2020-12, and the OpenAPI ones schemas in the wild carry
    "$schema", "$id", "id", "$ref", "$defs", "definitions", "$anchor", "$dynamicRef", "$dynamicAnchor",
    "$recursiveRef", "$recursiveAnchor", "$vocabulary", "$comment", "type", "enum", "const", "properties",
    "patternProperties", "additionalProperties", "required", "items", "prefixItems", "additionalItems",
    "contains", "minContains", "maxContains", "minItems", "maxItems", "uniqueItems", "minLength",
    "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minProperties", "maxProperties", "propertyNames", "dependencies", "dependentRequired",
    "dependentSchemas", "if", "then", "else", "allOf", "anyOf", "oneOf", "not", "title", "description",
    "default", "examples", "readOnly", "writeOnly", "deprecated", "contentEncoding", "contentMediaType",
    "contentSchema", "unevaluatedProperties", "unevaluatedItems", "nullable", "discriminator"}


# ---------------------------------------------------------------------------------------------
# Validation against the original schema

_HOSTNAME_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
_URI_CHARS = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?#\[\]]|%[0-9A-Fa-f]{2})*"
_URI = re.compile(rf"[A-Za-z][A-Za-z0-9+.\-]*:{_URI_CHARS}")
_URI_REFERENCE = re.compile(_URI_CHARS)
_DUR_TIME = r"T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DUR_DATE = r"(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
_DURATION = re.compile(rf"P(?:{_DUR_DATE}(?:{_DUR_TIME})?|{_DUR_TIME}|[0-9]+W)")   # RFC 3339, appendix A
_TIME = re.compile(r"([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])")


def _hostname(value) -> bool:
    if not isinstance(value, str):
        return True
    name = value[:-1] if value.endswith(".") else value
    return 0 < len(name) <= 253 and all(_HOSTNAME_LABEL.fullmatch(p) for p in name.split("."))


def _uri(value) -> bool:
    return not isinstance(value, str) or bool(_URI.fullmatch(value))


def _uri_reference(value) -> bool:
    return not isinstance(value, str) or bool(_URI_REFERENCE.fullmatch(value))


def _duration(value) -> bool:
    return not isinstance(value, str) or bool(_DURATION.fullmatch(value))


def _time(value) -> bool:   # RFC 3339 full-time: the offset is required
    return not isinstance(value, str) or bool(_TIME.fullmatch(value))


def _date_time(value) -> bool:
    import datetime

    if not isinstance(value, str):
        return True
    date, sep, rest = value[:10], value[10:11], value[11:]
    if sep not in ("T", "t", " ") or not _TIME.fullmatch(rest):
        return False
    try:
        datetime.date.fromisoformat(date)
    except ValueError:
        return False
    return True


_FALLBACKS = {"hostname": _hostname, "uri": _uri, "uri-reference": _uri_reference, "duration": _duration,
              "time": _time, "date-time": _date_time}


def format_checker(validator=None):
    """The format checker `validator` (a jsonschema validator class, 2020-12 by default)
    validates with: (checker, names of the formats this module added).

    Its draft's own FormatChecker (a bare jsonschema.FormatChecker() holds every draft's
    checks, and draft 3's `time`, which rejects an offset, overrides RFC 3339's), then
    2020-12's checks of the formats an older draft does not define (`date`, `time`, `uuid`
    are in schemas of every draft), then this module's checks for the formats whose optional
    package is not installed."""
    from jsonschema import FormatChecker
    from jsonschema.validators import Draft202012Validator

    validator = validator or Draft202012Validator
    checker = FormatChecker(formats=())
    checker.checkers = {**Draft202012Validator.FORMAT_CHECKER.checkers, **validator.FORMAT_CHECKER.checkers}
    added = [name for name in _FALLBACKS if name not in checker.checkers]
    for name in added:
        checker.checks(name)(_FALLBACKS[name])
    return checker, added


def validator_for(schema):
    """The jsonschema validator class of `schema`'s `$schema` (2020-12 when absent or unknown)."""
    from jsonschema.validators import Draft202012Validator, validator_for as find

    return find(schema, default=Draft202012Validator)


def violation(schema, instance) -> str | None:
    """Why `instance` is not valid against `schema` (the validator's best message), or None."""
    from jsonschema.exceptions import best_match

    cls = validator_for(schema)
    validator = cls(schema, format_checker=format_checker(cls)[0])
    try:
        error = best_match(validator.iter_errors(instance))
    except Exception as e:   # e.g. a remote $ref the validator cannot resolve (it never fetches)
        return f"the validator could not check it: {type(e).__name__}: {e}"
    if error is None:
        return None
    where = "/".join(map(str, error.absolute_path))
    return f"at /{where}: {error.message}" if where else error.message


# ---------------------------------------------------------------------------------------------
# Reading files

def read_schema(path: Path):
    """(schema, None) for a schema file, (None, why it is skipped) otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, "not JSON"
    if isinstance(data, list):
        return None, "a JSON array, not a schema (a test-case file?)"
    if isinstance(data, bool):
        return data, None
    if not isinstance(data, dict):
        return None, f"a JSON {type(data).__name__ if data is not None else 'null'}, not a schema"
    if data and not KEYWORDS & set(data):
        return None, "an object with no JSON Schema keyword (a data file?)"
    try:
        validator_for(data).check_schema(data)
    except Exception as e:
        return None, f"rejected by its draft's metaschema ({type(e).__name__})"
    return data, None


# ---------------------------------------------------------------------------------------------
# The worker: loads the model once, then runs schemas sent to it

def _worker(conn, model_dir, layout_only, text, threads):
    try:
        import torch

        if threads:
            torch.set_num_threads(threads)
        from clover_struct import ExtractionError, SchemaError, extract, load_model
        from clover_struct.constraints import compile_canvas
        from clover_struct.schema_refs import read_schema as one_document
        from clover_struct.schema_walk import build_canvas

        t = time.perf_counter()
        model = load_model(model_dir) if model_dir else load_model()
        conn.send(("ready", time.perf_counter() - t, getattr(model, "source", str(model_dir))))
    except BaseException as e:   # noqa: BLE001 - reported to the parent, which stops
        conn.send(("failed", f"{type(e).__name__}: {e}", None))
        return
    cfg, tok = model.config, model.tokenizer
    while True:
        job = conn.recv()
        if job is None:
            return
        times, start = {}, time.perf_counter()
        try:
            job = one_document(job)   # the file with the local files its references name
            canvas = build_canvas(job, tok, mask_id=cfg.mask_token_id, pad_id=cfg.pad_token_id,
                                  context=cfg.max_position_embeddings, vocab_size=cfg.vocab_size)
            times["layout"] = time.perf_counter() - start
            t = time.perf_counter()
            compile_canvas(canvas, tok, vocab_size=cfg.vocab_size)
            times["compile"] = time.perf_counter() - t
            if layout_only:
                outcome = ("laid_out", f"{len(canvas.ids)} tokens, {len(canvas.slots)} slots", None)
            else:
                t = time.perf_counter()
                value = extract(text, job, model=model)   # the canvas and automata come from the caches
                times["extract"] = time.perf_counter() - t
                why = violation(job, value)   # here, so that the time limit covers the validator too
                outcome = ("valid", None, value) if why is None else ("invalid", why, value)
        except SchemaError as e:
            outcome = ("refused", e.message, None)
        except ExtractionError as e:
            outcome = ("extraction_error", str(e), None)
        except Exception as e:   # noqa: BLE001 - a crash is an outcome
            outcome = ("crash", f"{type(e).__name__}: {e}", None)
        times["total"] = time.perf_counter() - start
        kind, detail, value = outcome
        try:
            conn.send((kind, detail, times, value))
        except Exception as e:   # noqa: BLE001 - e.g. a value that does not pickle
            conn.send(("crash", f"{type(e).__name__}: {e}", times, None))


class Worker:
    """A worker process, started on first use and again after a timeout or a death."""

    def __init__(self, model_dir, layout_only, text, threads, start_timeout=600):
        self.args, self.start_timeout = (model_dir, layout_only, text, threads), start_timeout
        self.proc = self.conn = None
        self.load_seconds, self.source = [], None

    def start(self):
        ctx = mp.get_context("spawn")   # a fresh interpreter: no state shared with the parent
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, *self.args), daemon=True)
        self.proc.start()
        child.close()
        if not self.conn.poll(self.start_timeout):
            self.stop()
            raise RuntimeError(f"the worker did not load the model within {self.start_timeout} s")
        kind, detail, source = self.conn.recv()
        if kind != "ready":
            self.stop()
            raise RuntimeError(f"the worker could not load the model: {detail}")
        self.load_seconds.append(detail)
        self.source = source

    def run(self, path: Path, timeout: float):
        """(class, message, times, instance) for one schema file; "timeout" or "crash" if the worker did not answer."""
        if self.proc is None or not self.proc.is_alive():
            self.start()
        self.conn.send(path)
        if not self.conn.poll(timeout):
            self.stop()
            return "timeout", f"no answer within {timeout:g} s", {}, None
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            code = self.proc.exitcode
            self.stop()
            return "crash", f"the worker died (exit code {code})", {}, None

    def stop(self):
        if self.proc is not None:
            if self.proc.is_alive():
                try:
                    self.conn.send(None)
                except OSError:
                    pass
                self.proc.join(0.5)
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join()
            self.conn.close()
        self.proc = self.conn = None


# ---------------------------------------------------------------------------------------------
# Figures

def reason_key(message: str, words: int = 6) -> str:
    """The first words of a refusal, with quoted names, lists ("integer, string"), numbers,
    refs and file names blanked, so that like refusals group together."""
    message = re.sub(r"`[^`]*`|'[^']*'|\"[^\"]*\"|\[[^\]]*\]?", "…", message)
    message = re.sub(r"[^\s,]+(?:, [^\s,]+)+(?= without| cannot|$)", "…", message)
    out = []
    for w in message.split():
        out.append("…" if re.search(r"[0-9/#]|\w\.\w", w) else w)
        if len(out) == words:
            break
    return " ".join(out).rstrip(",.;:")


def percentiles(values: list[float]) -> dict:
    if not values:
        return {"n": 0, "p50": None, "p99": None, "max": None}
    v = sorted(values)

    def rank(p):   # nearest rank
        return v[max(0, math.ceil(p * len(v)) - 1)]
    return {"n": len(v), "p50": round(rank(0.5), 4), "p99": round(rank(0.99), 4), "max": round(v[-1], 4)}


def _folder(rel: str) -> str:
    return rel.split("/")[0] if "/" in rel else "."


def run(args) -> dict:
    root = Path(args.dir)
    files = sorted(p for p in root.rglob("*.json") if p.is_file()) if root.is_dir() else [root]
    if args.limit:
        files = files[:args.limit]
    added = format_checker()[1]
    worker = Worker(args.model, args.layout_only, args.text, args.threads)
    records, skipped = [], Counter()
    try:
        for path in files:
            rel = str(path.relative_to(root)) if root.is_dir() else path.name
            why = read_schema(path)[1]
            if why:
                skipped[why] += 1
                if args.json:
                    print(json.dumps({"file": rel, "skipped": why}), flush=True)
                continue
            cls, message, times, value = worker.run(path, args.timeout)
            rec = {"file": rel, "class": cls, "message": message,
                   "times": {k: round(v, 4) for k, v in times.items()}}
            if args.show_values and value is not None:
                rec["value"] = value
            records.append(rec)
            if args.json:
                print(json.dumps(rec, ensure_ascii=False, default=str), flush=True)
    finally:
        worker.stop()
    classes = LAYOUT_CLASSES if args.layout_only else CLASSES
    counts = Counter(r["class"] for r in records)
    n = len(records)
    summary = {
        "dir": str(root), "mode": "layout-only" if args.layout_only else "full",
        "model": worker.source or (args.model or "embedded"), "files": len(files), "schemas": n,
        "skipped": dict(skipped.most_common()),
        "classes": {c: counts.get(c, 0) for c in classes},
        "shares": {c: round(counts.get(c, 0) / n, 4) if n else 0.0 for c in classes},
        "by_folder": {folder: {c: sum(r["class"] == c for r in records if _folder(r["file"]) == folder) for c in classes}
                      for folder in sorted({_folder(r["file"]) for r in records})},
        "refusals": dict(Counter(reason_key(r["message"]) for r in records if r["class"] == "refused").most_common()),
        "invalid": [{"file": r["file"], "message": r["message"]} for r in records if r["class"] == "invalid"],
        "extraction_errors": [{"file": r["file"], "message": r["message"]} for r in records
                              if r["class"] == "extraction_error"],
        "crashes": [{"file": r["file"], "message": r["message"]} for r in records if r["class"] == "crash"],
        "timeouts": [r["file"] for r in records if r["class"] == "timeout"],
        "times": {k: percentiles([r["times"][k] for r in records if k in r["times"]])
                  for k in ("layout", "compile", "extract", "total")},
        "model_load_seconds": [round(s, 2) for s in worker.load_seconds],
        "format_checks_added": added, "timeout_s": args.timeout,
    }
    return summary


def print_table(s: dict) -> None:
    print(f"schema coverage of {s['dir']} ({s['mode']}, model {s['model']}): {s['files']} files, "
          f"{s['schemas']} schemas run, {sum(s['skipped'].values())} skipped")
    print(f"\n{'class':18} {'count':>6} {'share':>7}")
    for c, k in s["classes"].items():
        print(f"{c:18} {k:>6} {s['shares'][c]:>7.1%}")
    print(f"{'total':18} {s['schemas']:>6}")
    if len(s["by_folder"]) > 1:
        print(f"\n{'folder':18} " + " ".join(f"{c[:10]:>10}" for c in s["classes"]))
        for folder, counts in s["by_folder"].items():
            print(f"{folder[:18]:18} " + " ".join(f"{k:>10}" for k in counts.values()))
    if s["refusals"]:
        print("\nrefusals by reason (first words)")
        for reason, k in s["refusals"].items():
            print(f"{k:>6}  {reason}")
    if s["invalid"]:
        print("\ninvalid: an instance the validator rejects (silent failures)")
        for r in s["invalid"]:
            print(f"  {r['file']}: {r['message'][:300]}")
    if s.get("extraction_errors"):
        print("\nextraction errors")
        for r in s["extraction_errors"]:
            print(f"  {r['file']}: {r['message'][:300]}")
    if s["crashes"]:
        print("\ncrashes")
        for r in s["crashes"]:
            print(f"  {r['file']}: {r['message'][:300]}")
    if s["timeouts"]:
        print(f"\ntimeouts (over {s['timeout_s']:g} s): {', '.join(s['timeouts'])}")
    print(f"\n{'seconds':18} {'n':>6} {'p50':>9} {'p99':>9} {'max':>9}")
    names = {"layout": "layout", "compile": "automata", "extract": "extract (decode)",
             "total": "whole extraction" if s["mode"] == "full" else "layout+automata"}
    for k, t in s["times"].items():
        if k == "extract" and s["mode"] != "full":
            continue
        cells = [f"{t[p]:>9.4f}" if t[p] is not None else f"{'-':>9}" for p in ("p50", "p99", "max")]
        print(f"{names[k]:18} {t['n']:>6} {' '.join(cells)}")
    if s["skipped"]:
        print("\nskipped files")
        for why, k in s["skipped"].items():
            print(f"{k:>6}  {why}")
    if s["format_checks_added"]:
        print(f"\nformat checks added here (jsonschema's optional packages missing): "
              f"{', '.join(s['format_checks_added'])}")
    print(f"model load: {', '.join(f'{x:g} s' for x in s['model_load_seconds']) or '-'}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="folder of *.json schema files (searched recursively), or one file")
    p.add_argument("--model", help="model directory (default: the embedded clover-mini)")
    p.add_argument("--text", default=DEFAULT_TEXT, help="the text every schema is extracted from")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per schema (default 60)")
    p.add_argument("--json", action="store_true", help="one JSON line per schema, then the summary line")
    p.add_argument("--layout-only", action="store_true",
                   help="only build the canvas and compile its automata (no decoding)")
    p.add_argument("--limit", type=int, default=0, help="only the first N files")
    p.add_argument("--threads", type=int, default=1, help="torch threads in the worker (default 1)")
    p.add_argument("--show-values", action="store_true", help="with --json, the instances too")
    args = p.parse_args(argv)
    summary = run(args)
    if not args.json:
        print_table(summary)
    print(json.dumps(summary, ensure_ascii=False, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
