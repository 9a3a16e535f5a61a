"""Records per second of `clover-struct extract`: one process, and `--ray` with 1 and 2 workers on a
local Ray cluster; and where one process's time goes (model load, prompt prefill, denoising steps,
constraints and validation, writing).

    python benchmarks/ray_throughput.py [--n 100] [--batch-size 16] [--workers 1 2]

Reads the first N real dev notices of ../shared/data/notams-dev.jsonl (read there, never copied;
the 20 demo notices where it is absent) into a temporary file; clover-mini, the Notam schema.
Each configuration is one CLI run in a subprocess, timed end to end (interpreter, model load, Ray
start included) and by the run's own clock (the CLI's --json `seconds`: from the first batch on,
Ray's start and the workers' model load included); every run's output is compared with the
single-process one. Then, in this process: one process's time by part, and a Ray run's
(cluster start, workers' start, decoding).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data" / "notams-dev.jsonl"
DEMO = ROOT / "clover_struct" / "demo" / "notices.jsonl"
SCHEMA = "clover_struct.schemas.notam:Notam"


def cli_run(feed: Path, out: Path, batch_size: int, ray: int | None) -> dict:
    command = [sys.executable, "-m", "clover_struct.cli", "extract", str(feed), "--schema", SCHEMA, "-o", str(out),
               "--batch-size", str(batch_size), "--quiet", "--json"]
    if ray is not None:
        command += ["--ray", "--workers", str(ray)]
    for attempt in range(3):   # a local Ray start can time out on a loaded machine: counted, and tried again
        t0 = time.monotonic()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
        wall = time.monotonic() - t0
        if "could not start or reach" not in done.stderr:
            break
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    summary = json.loads(done.stdout.splitlines()[-1])
    n = summary["succeeded"] + summary["failed"]
    return {"workers": ray, "failed_ray_starts": attempt, "records": n, "wall_s": round(wall, 1), "run_s": summary["seconds"],
            "rec_per_s_wall": round(n / wall, 2), "rec_per_s_run": round(n / summary["seconds"], 2)}


def where_time_goes(texts: list[str], batch_size: int) -> dict:
    """One process, in this one: the model's passes timed by wrapping its methods."""
    import torch

    from clover_struct import extract_many, load_model
    from clover_struct.batch_io import Sink
    from clover_struct.distributed import outcome
    from clover_struct.schemas.notam import Notam

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    model = load_model()
    load = time.perf_counter() - t0
    spent = {"prefill_step": 0.0, "step": 0.0, "prefill": 0.0, "commit": 0.0}
    for name in spent:
        method = getattr(model, name)

        @functools.wraps(method)
        def timed(*args, _method=method, _name=name, **kwargs):
            t = time.perf_counter()
            try:
                return _method(*args, **kwargs)
            finally:
                spent[_name] += time.perf_counter() - t
        setattr(model, name, timed)
    extract_many(texts[:2], Notam, model=model)   # the schema's automata built once, as a worker's setup does
    spent = dict.fromkeys(spent, 0.0)
    t0 = time.perf_counter()
    results = extract_many(texts, Notam, model=model, batch_size=batch_size, trace=True)
    decode = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as d:
        sink, t0 = Sink(Path(d) / "out.jsonl", None), time.perf_counter()
        for k, (value, _) in enumerate(results):
            record, why = outcome(value)
            sink.write({"source": str(k), "record": record} if why is None else {"source": str(k), "error": why})
        sink.sync()
        sink.close()
        write = time.perf_counter() - t0
    passes = sum(t.forward_passes for _, t in results)
    model_s = sum(spent.values())
    return {"records": len(texts), "model_load_s": round(load, 2), "decode_s": round(decode, 2),
            "first_pass_s (prompt prefill + a block's first step)": round(spent["prefill_step"] + spent["prefill"], 2),
            "later_steps_s": round(spent["step"], 2), "commit_s": round(spent["commit"], 2),
            "outside_the_model_s (constraints, validation, bookkeeping)": round(decode - model_s, 2),
            "forward_passes_per_record": round(passes / len(texts), 2), "write_s": round(write, 4)}


def ray_phases(texts: list[str], workers: int, batch_size: int) -> dict:
    """A --ray run's time split: the local cluster's start, the workers' start (interpreter, torch,
    model, the schema's automata: what `ready()` waits for), then decoding alone."""
    import ray

    from clover_struct.distributed import RESTARTS, Worker
    from clover_struct.schemas.notam import Notam

    t0 = time.perf_counter()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    start = time.perf_counter() - t0
    try:
        actor = ray.remote(Worker).options(num_cpus=1, max_restarts=RESTARTS, max_task_retries=RESTARTS)
        t0 = time.perf_counter()
        actors = [actor.remote(Notam, None, None, batch_size) for _ in range(workers)]
        ray.get([a.ready.remote() for a in actors])
        ready = time.perf_counter() - t0
        batches = [texts[i:i + batch_size] for i in range(0, len(texts), batch_size)]
        t0 = time.perf_counter()
        ray.get([actors[k % workers].decode.remote(b) for k, b in enumerate(batches)])
        decode = time.perf_counter() - t0
    finally:
        ray.shutdown()
    return {"workers": workers, "ray_start_s": round(start, 1), "workers_ready_s": round(ready, 1),
            "decode_s": round(decode, 1), "decode_rec_per_s": round(len(texts) / decode, 2)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=100, help="notices (default 100)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = p.parse_args(argv)
    source = DEV if DEV.is_file() else DEMO
    with open(source, encoding="utf-8") as f:
        lines = [line for _, line in zip(range(args.n), f)]
    with tempfile.TemporaryDirectory() as d:
        feed = Path(d) / "notices.jsonl"
        feed.write_text("".join(lines), encoding="utf-8")
        rows = [cli_run(feed, Path(d) / "single.jsonl", args.batch_size, None)]
        for w in args.workers:
            rows.append(cli_run(feed, Path(d) / f"ray{w}.jsonl", args.batch_size, w))
            rows[-1]["same_output"] = (Path(d) / f"ray{w}.jsonl").read_bytes() == (Path(d) / "single.jsonl").read_bytes()
        texts = [json.loads(line)["text"] for line in lines]
        profile = where_time_goes(texts, args.batch_size)
        phases = [ray_phases(texts, w, args.batch_size) for w in args.workers]
    print(json.dumps({"source": source.name, "n": len(lines), "batch_size": args.batch_size, "runs": rows,
                      "one_process": profile, "ray_phases": phases, "cpus": os.cpu_count(),
                      "date": time.strftime("%Y-%m-%d")}, indent=1))


if __name__ == "__main__":
    main()
