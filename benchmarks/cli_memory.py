"""Peak memory of `clover-struct extract` as the input grows: it streams, so it should stay flat.

Writes a JSONL feed of N short notices for each N, and a tiny random Clover model (two layers,
a Gated DeltaNet and an attention layer, hidden 32, over clover-mini's tokenizer; std 1.0, so
it decides each slot in a step or two) saved with save_model, then runs the CLI on each feed as
a subprocess and reads the child's peak resident set size from os.wait4. The schema is a small
JSON Schema (a copied name, an enum, a number), so the figures are the CLI's own streaming,
not a large canvas.

    python benchmarks/cli_memory.py [--lines 1000 10000 100000] [--batch-size 256]

Last line: {"lines": [...], "peak_rss_mb": [...], "seconds": [...], "records_per_s": [...], ...}
"""

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = {"title": "Zone", "type": "object", "required": ["name", "kind", "radius"],
          "properties": {"name": {"type": "string", "maxLength": 8, "verbatim": True},
                         "kind": {"enum": ["circle", "polygon", "corridor"]},
                         "radius": {"type": "integer", "minimum": 0, "maximum": 9999}}}


def tiny_model_dir(path: Path) -> Path:
    from clover_struct.engine.checkpoint import save_model
    from clover_struct.engine.config import preset
    from clover_struct.engine.model import CloverModel
    from clover_struct.engine.tokenizer import Tokenizer

    tok = Tokenizer.from_file(ROOT / "clover_struct" / "models" / "clover-mini" / "tokenizer.json")
    torch.manual_seed(0)
    config = preset("tiny", vocab_size=tok.vocab_size, mask_token_id=tok.mask_id, pad_token_id=tok.pad_id,
                    eos_token_id=tok.eos_id, block_size=64, max_position_embeddings=512, num_hidden_layers=2,
                    layer_types=["linear_attention", "full_attention"])
    return save_model(CloverModel(config, tok).init_weights(std=1.0).eval(), path)


def write_feed(path: Path, lines: int) -> Path:
    rng = random.Random(lines)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(lines):
            name = "".join(rng.choice("ABCDEFGHKLMNPRSTUVWZ") for _ in range(rng.randint(3, 6)))
            f.write(json.dumps({"id": i, "text": f"Zone {name}: {rng.choice(['circle', 'polygon'])} of "
                                                 f"{rng.randint(1, 9999)} m around {rng.randint(0, 89)}N"}) + "\n")
    return path


def run(feed: Path, schema: Path, model: Path, out: Path, batch_size: int) -> tuple[float, float, int]:
    """(peak RSS in MB, seconds, exit code) of one CLI run."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "clover_struct.cli", "extract", str(feed), "--schema", str(schema),
                             "--model", str(model), "-o", str(out), "--batch-size", str(batch_size), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    return usage.ru_maxrss / 1024, seconds, os.waitstatus_to_exitcode(status)   # ru_maxrss: KiB on Linux


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lines", type=int, nargs="+", default=[1000, 10_000, 100_000])
    p.add_argument("--batch-size", type=int, default=256)
    args = p.parse_args()
    print(f"machine: {platform.machine()} {platform.system()}, {os.cpu_count()} CPUs, python "
          f"{platform.python_version()}, torch {torch.__version__}; child runs with OMP_NUM_THREADS=1")
    result = {"lines": [], "peak_rss_mb": [], "seconds": [], "records_per_s": [], "exit_codes": [],
              "batch_size": args.batch_size}
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        model = tiny_model_dir(d / "model")
        schema = d / "zone.schema.json"
        schema.write_text(json.dumps(SCHEMA))
        for n in args.lines:
            feed = write_feed(d / f"feed-{n}.jsonl", n)
            rss, seconds, code = run(feed, schema, model, d / f"out-{n}.jsonl", args.batch_size)
            written = sum(1 for path in (d / f"out-{n}.jsonl", d / f"out-{n}.errors.jsonl") if path.exists()
                          for _ in open(path, "rb"))
            assert written == n, f"{written} lines written for {n} inputs"
            print(f"{n:>7} lines: peak RSS {rss:7.1f} MB, {seconds:7.1f} s ({n / seconds:6.0f} records/s), "
                  f"exit {code}", flush=True)
            for key, value in (("lines", n), ("peak_rss_mb", round(rss, 1)), ("seconds", round(seconds, 1)),
                               ("records_per_s", round(n / seconds)), ("exit_codes", code)):
                result[key].append(value)
            feed.unlink()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
