"""The HTTP server under load: 1, 4 and 16 concurrent clients, with batching on and off.

Starts `clover-struct serve` (the embedded clover-mini, one torch thread) on a free port of
127.0.0.1, twice: with batching (--max-batch 16 --max-wait-ms W) and without (--max-batch 1).
Against each, C clients (threads with the openai client) send N requests each, one after
another, with the NoFlyZone schema and the demo notices (client k starts at notice k*N, so the
clients send different notices); then, on the server without batching, the same C*N requests
one at a time (one client). Reports
throughput (requests a second over the run's wall time), p50 and p99 latency per request, and
forward passes per request: the model's passes over the run (the server's /health counter)
divided by the requests, so a joint pass serving 16 requests counts 1/16 to each.

    python benchmarks/serve_load.py [--n 4] [--clients 1 4 16] [--max-wait-ms 20] [--max-seconds 240]

Loopback only; bounded: at most N requests per client, and no new request after --max-seconds
per setting. Last line: the rows as JSON.
"""

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai

from clover_struct.schemas.airspace import NoFlyZone

ROOT = Path(__file__).resolve().parents[1]
NOTICES = [json.loads(line)["text"] for line in (ROOT / "clover_struct" / "demo" / "notices.jsonl").open()]
FORMAT = {"type": "json_schema", "json_schema": {"name": "NoFlyZone", "schema": NoFlyZone.model_json_schema()}}


def start(max_batch: int, max_wait_ms: float) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-c", "import sys; from clover_struct.cli import main; sys.exit(main())", "serve",
         "--port", str(port), "--max-batch", str(max_batch), "--max-wait-ms", str(max_wait_ms)],
        env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            httpx.get(url + "/health")
            return server, url
        except httpx.TransportError:
            if server.poll() is not None:
                raise SystemExit(f"the server exited with code {server.returncode}")
            time.sleep(0.1)
    server.kill()
    raise SystemExit("the server did not start within a minute")


def load(url: str, clients: int, n: int, max_seconds: float) -> dict:
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    stop = time.perf_counter() + max_seconds

    def one_client(k):
        latencies = []
        for i in range(n):
            if time.perf_counter() > stop:
                break
            t = time.perf_counter()
            reply = client.chat.completions.create(model="clover-mini", response_format=FORMAT, messages=[
                {"role": "user", "content": NOTICES[(k * n + i) % len(NOTICES)]}])
            json.loads(reply.choices[0].message.content)   # (the class's validators do not travel in its JSON Schema)
            latencies.append(time.perf_counter() - t)
        return latencies

    before = httpx.get(url + "/health").json()
    t = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        latencies = sorted(x for part in pool.map(one_client, range(clients)) for x in part)
    wall = time.perf_counter() - t
    after = httpx.get(url + "/health").json()
    done = len(latencies)
    return {"clients": clients, "requests": done, "wall_s": round(wall, 2),
            "throughput_rps": round(done / wall, 2), "p50_s": round(statistics.median(latencies), 3),
            "p99_s": round(latencies[min(done - 1, round(0.99 * (done - 1)))], 3),
            "passes_per_request": round((after["forward_passes"] - before["forward_passes"]) / done, 2),
            "batches": after["batches"] - before["batches"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=4, help="requests per client (default 4)")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    p.add_argument("--max-wait-ms", type=float, default=20)
    p.add_argument("--max-seconds", type=float, default=240, help="no new request after this, per setting")
    args = p.parse_args()
    print(f"{platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}; "
          f"{args.n} requests per client", flush=True)
    rows = []
    for batching, (max_batch, wait) in (("on", (16, args.max_wait_ms)), ("off", (1, 0))):
        server, url = start(max_batch, wait)
        try:
            load(url, 1, 2, args.max_seconds)   # warm-up: the schema's layout, the first passes
            for clients in args.clients:
                for mode, (c, n) in ((batching, (clients, args.n)), ("one at a time", (1, clients * args.n))):
                    if mode == "one at a time" and (batching == "on" or clients == 1):
                        continue   # the same requests sequentially: once, on the server without batching
                    row = {"batching": mode, **load(url, c, n, args.max_seconds), "clients": clients}
                    rows.append(row)
                    print(" | ".join(f"{k} {v}" for k, v in row.items()), flush=True)
        finally:
            server.terminate()
            server.wait(60)
    rows.sort(key=lambda r: (r["clients"], r["batching"] != "on", r["batching"] == "one at a time"))
    print("| batching | clients | requests | throughput (req/s) | p50 latency (s) | p99 latency (s) | "
          "forward passes / request | batches |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['batching']} | {r['clients']} | {r['requests']} | {r['throughput_rps']} | {r['p50_s']} | "
              f"{r['p99_s']} | {r['passes_per_request']} | {r['batches']} |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
