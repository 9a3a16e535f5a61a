"""Joint denoising against Outlines on an autoregressive twin: one run, every variant, the same notices.

    python benchmarks/compare.py --twin DIR [--model DIR] [--n 200] [--real N] [--quick] [--schema Notam]

Variants, each run one record at a time (greedy, batch size 1) on the same notices, so seconds
per record are latencies; an untimed warm-up record first does the lazy setup of each model
(the four diffusion variants share one model and its caches: the first warms it for all):
  clover_joint        the diffusion model (--model, default the embedded one), decoder defaults
  one_token_per_step  the same, one decision per forward (schedule="one_token")
  no_prefix_cache     the same, prompt and finished blocks re-encoded every step (use_cache=False)
  fields_sequential   the same, one field after another (schedule="sequential")
  engine_ar_twin      the twin (--twin, training/causal.py) in our engine, outlines-core constrained
  outlines_ar_twin    the twin in transformers, run by Outlines with the schema as output type
(benchmarks/twin.py runs the twin both ways.) Notices: training.generate.examples with
evaluate.py's seed for the kind (the first n of its generated set), plus, for Notam, the real
dev notices of ../shared/data when present (read there, never copied; --real N of them, all by
default, none with --quick). With --quick, one_token_per_step decodes only the first 5 of
them: at ~90 full steps over the canvas per notice it would otherwise take over half the run;
its per-record figures stand beside the others' and its entry says how many it ran ("n").
Field exact match uses evaluate.py's comparisons; a record that failed (no valid instance)
matches no field.

Forward passes per record: prefill, denoising steps and block commits (decoder.Trace); one per
token for the twins. Tokens per forward: canvas positions committed per denoising step, the
pads that end a value included (Trace.tokens_per_forward); the twins commit one per forward.
Peak memory: CUDA's allocator peak, else the process's peak resident memory while the variant
ran (all models stay loaded). The last line is JSON: {"schema", "n", "real_n", "variants": {name:
{"n", "field_em", "forward_passes_per_record", "tokens_per_forward", "seconds_per_record",
"valid_rate", "peak_mb"[, "real_dev_field_em"]}}, "speedup_vs_outlines",
"forward_pass_ratio_vs_outlines", "constraint_share", "machine", "date"}: the two ratios are
outlines_ar_twin's median seconds and mean forward passes per record over clover_joint's;
constraint_share is the fraction of clover_joint's time spent on constraints
(Trace.constraint_seconds: allowed-token masks, choice scoring, automaton steps).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.twin import EngineTwin, OutlinesTwin  # noqa: E402
from clover_struct import ExtractionError, extract_many, load_model  # noqa: E402
from clover_struct.schema_walk import build_canvas  # noqa: E402
from clover_struct.schemas import DispatchMessage, NoFlyZone, Notam  # noqa: E402
from training.evaluate import (EVAL_SEED, NOTAM_FIELDS, REAL_DEV, ZONE_FIELDS, fields_of,  # noqa: E402
                               real_reference, same, same_id)
from training.generate import examples  # noqa: E402

# schema name -> (schema, generator kind, evaluate.py's seed for it, fields compared: None = every leaf)
SCHEMAS = {"Notam": (Notam, "notam", EVAL_SEED, NOTAM_FIELDS),
           "NoFlyZone": (NoFlyZone, "zone", EVAL_SEED + 2, ZONE_FIELDS),
           "DispatchMessage": (DispatchMessage, "dispatch", EVAL_SEED + 3, None)}
DIFFUSION = {"clover_joint": {}, "one_token_per_step": {"schedule": "one_token"},
             "no_prefix_cache": {"use_cache": False}, "fields_sequential": {"schedule": "sequential"}}
VARIANTS = (*DIFFUSION, "engine_ar_twin", "outlines_ar_twin")
QUICK_ONE_TOKEN = 5   # notices one_token_per_step decodes with --quick


@dataclass
class Notice:
    text: str
    want: dict                 # field -> expected value
    names: tuple | None        # the fields compared (None: every leaf of the record)
    real: bool = False


@dataclass
class Decoded:
    value: object              # a record, or the ExtractionError of a failed one
    forwards: int
    tokens: int                # tokens committed
    token_forwards: int        # forwards that committed them (denoising steps; all of a twin's)
    constraint_seconds: float = 0.0


def notices(schema_name: str, n: int, real: int | None) -> list[Notice]:
    schema, kind, seed, names = SCHEMAS[schema_name]
    out = [Notice(text, fields_of(gold, names), names) for text, gold in examples(kind, n, seed)]
    if schema is Notam and REAL_DEV.is_file() and real != 0:
        rows = [json.loads(line) for line in REAL_DEV.read_text().splitlines() if line.strip()][:real]
        out += [Notice(r["text"], want, tuple(want), True) for r in rows for want in [real_reference(r["ref"])]]
    return out


def matches(value, notice: Notice) -> list[bool]:
    if isinstance(value, ExtractionError):
        return [False] * len(notice.want)
    got = fields_of(value, notice.names)
    return [(same_id if notice.real and k == "notam_id" else same)(got.get(k), v) for k, v in notice.want.items()]


def diffusion_runner(model, schema, options: dict):
    def run(text: str) -> Decoded:
        value, trace = extract_many([text], schema, model=model, batch_size=1, trace=True, **options)[0]
        return Decoded(value, trace.forward_passes, trace.tokens_committed, trace.steps, trace.constraint_seconds)
    return run


def twin_runner(twin):
    def run(text: str) -> Decoded:
        value, forwards, tokens = twin(text)
        return Decoded(value, forwards, tokens, forwards)
    return run


class PeakMemory:
    """Peak memory while a variant runs: CUDA's allocator peak, else the process's peak resident
    set (Linux VmHWM, reset through /proc/self/clear_refs; elsewhere the peak since start)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def reset(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
            return
        try:
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            pass

    def mb(self) -> float:
        if self.cuda:
            return torch.cuda.max_memory_allocated() / 2**20
        status = Path("/proc/self/status")
        for line in status.read_text().splitlines() if status.is_file() else ():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(run, items: list[Notice], device: torch.device, warm_up: bool = True) -> dict:
    if warm_up:   # lazy setup (mask caches; outlines-core compiles its masking kernel)
        run(items[0].text)
    peak = PeakMemory(device)
    peak.reset()
    decoded, seconds = [], []
    for notice in items:
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        decoded.append(run(notice.text))
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - started)
    out = {}
    for key, real in (("field_em", False), ("real_dev_field_em", True)):
        hits = [h for d, x in zip(decoded, items) if x.real == real for h in matches(d.value, x)]
        if hits:
            out[key] = sum(hits) / len(hits)
    return {"n": len(items), **out,
            "valid_rate": sum(not isinstance(d.value, ExtractionError) for d in decoded) / len(decoded),
            "forward_passes_per_record": sum(d.forwards for d in decoded) / len(decoded),
            "tokens_per_forward": sum(d.tokens for d in decoded) / max(sum(d.token_forwards for d in decoded), 1),
            "seconds_per_record": statistics.median(seconds),
            "peak_mb": peak.mb(),
            "constraint_share": sum(d.constraint_seconds for d in decoded) / sum(seconds)}


def compare(args) -> dict:
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    schema = SCHEMAS[args.schema][0]
    items = notices(args.schema, 20 if args.quick else args.n, 0 if args.quick and args.real is None else args.real)
    model = load_model(args.model, device=device)
    twin = load_model(args.twin, device=device)
    canvas = build_canvas(schema, twin.tokenizer)   # the twin's prompt names the schema as ours does
    engine = EngineTwin(twin, schema, canvas, max_tokens=len(canvas))
    outlines = OutlinesTwin(args.twin, twin.tokenizer, schema, canvas, len(canvas), device, twin.lm_head.weight.dtype)
    outlines.prepare([x.text for x in items])
    runners = {name: diffusion_runner(model, schema, options) for name, options in DIFFUSION.items()}
    runners.update(engine_ar_twin=twin_runner(engine), outlines_ar_twin=twin_runner(outlines))
    warmed = tuple(DIFFUSION)[1:]   # by clover_joint, run first
    subset = {"one_token_per_step": items[:QUICK_ONE_TOKEN]} if args.quick else {}
    results = {name: measure(runners[name], subset.get(name, items), device, warm_up=name not in warmed)
               for name in VARIANTS}
    joint, peer = results["clover_joint"], results["outlines_ar_twin"]
    constraint_share = joint["constraint_share"]
    for r in results.values():
        r.pop("constraint_share")
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "no GPU"
    return {"schema": args.schema, "n": sum(not x.real for x in items), "real_n": sum(x.real for x in items),
            "variants": results,
            "speedup_vs_outlines": peer["seconds_per_record"] / joint["seconds_per_record"],
            "forward_pass_ratio_vs_outlines": peer["forward_passes_per_record"] / joint["forward_passes_per_record"],
            "constraint_share": constraint_share,
            "machine": f"{platform.machine()}, {torch.get_num_threads()} threads, {gpu}, {device.type}, "
                       f"torch {torch.__version__}",
            "date": dt.date.today().isoformat()}


def table(report: dict) -> str:
    real = report["real_n"] > 0
    head = ["variant", "notices", "field EM", *(["real-dev field EM"] if real else []), "valid",
            "forward passes / record", "tokens / forward", "median s / record", "peak MB"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in report["variants"].items():
        cells = [name, str(r["n"]), f"{r['field_em']:.3f}", *([f"{r['real_dev_field_em']:.3f}"] if real else []),
                 f"{r['valid_rate']:.2f}", f"{r['forward_passes_per_record']:.1f}", f"{r['tokens_per_forward']:.2f}",
                 f"{r['seconds_per_record']:.3f}", f"{r['peak_mb']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", metavar="DIR", help="diffusion model directory (default: the embedded clover-mini)")
    ap.add_argument("--twin", metavar="DIR", required=True,
                    help="the autoregressive twin (python -m training.train --objective causal)")
    ap.add_argument("--n", type=int, default=200, help="generated notices (default 200)")
    ap.add_argument("--real", type=int, default=None, metavar="N",
                    help="real dev notices, when ../shared/data has them (default: all; none with --quick)")
    ap.add_argument("--quick", action="store_true",
                    help=f"20 generated notices, no real ones unless --real ({QUICK_ONE_TOKEN} one token per step)")
    ap.add_argument("--schema", choices=sorted(SCHEMAS), default="Notam")
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    return ap


def main(argv=None) -> int:
    report = compare(parser().parse_args(argv))
    print(f"{report['n']} generated + {report['real_n']} real {report['schema']} notices; "
          f"{report['machine']}; {report['date']}")
    print(table(report))
    print(f"speedup vs outlines {report['speedup_vs_outlines']:.2f}x, forward-pass ratio "
          f"{report['forward_pass_ratio_vs_outlines']:.2f}x, constraint share {report['constraint_share']:.3f}")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
