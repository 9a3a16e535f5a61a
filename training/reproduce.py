"""Trains the shipped clover-mini again, stage after stage, or its autoregressive twin.

    python -m training.reproduce --out runs/mini [--device cuda] [--threads N] [--twin] [--dry-run]

The stages are those recorded beside the shipped model (training.json, which the model
card prints). Each runs `training.train` with its recorded settings into OUT-1, OUT-2, ...,
each after the first from the one before (--init), and by its step count, also where it
was recorded by minutes: the same work on any machine. Stage 1 takes the shipped
tokenizer. A finished stage is skipped and an interrupted one resumed, so the command can
simply be run again after a stop; a stage stopped by a signal ends the command (exit 1).
--twin trains the autoregressive twin that benchmarks/compare.py runs: the same stages, step
for step, with --objective causal.

It first prints how long the whole recipe takes on each kind of machine (GPU, CPU) a
recorded stage ran on: every stage's batch tokens over the rate the stages trained at there
(an estimate, not a run of the whole).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from . import train
from .model_card import SHIPPED, machine_kind, stages

SETTINGS = [k for k in train.RUN_KEYS if k not in ("steps", "minutes", "init")]   # given per stage below


def stage_argv(stage: dict, out: str, init: str | None, device: str, twin: bool, tokenizer: Path) -> list[str]:
    """training.train's arguments for one recorded stage."""
    a = stage["args"]
    argv = ["--out", out, "--steps", str(stage["steps"]), "--device", device]
    argv += ["--init", init] if init else ["--tokenizer", str(tokenizer)]
    for key in SETTINGS:
        value = "causal" if key == "objective" and twin else a.get(key)
        if value is not None:
            value = ",".join(f"{k}={v:g}" for k, v in value.items()) if isinstance(value, dict) else value
            argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


def done_steps(out: Path) -> int | None:
    state = out / "train_state.json"
    return json.loads(state.read_text())["step"] if state.is_file() else None


def estimate(recorded: list[dict]) -> str:
    """The recipe's length and, per kind of machine its stages ran on, the hours it takes there."""
    work = [(machine_kind(s), s["steps"] * s["args"]["batch_tokens"], s["minutes"] * 60) for s in recorded]
    total = sum(tokens for _, tokens, _ in work)
    line = f"{len(recorded)} stages, {sum(s['steps'] for s in recorded):,} steps, {total / 1e6:.0f}M batch tokens"
    for kind in sorted({k for k, _, _ in work}, reverse=True):
        rate = sum(t for k, t, _ in work if k == kind) / sum(sec for k, _, sec in work if k == kind)
        line += f"; about {total / rate / 3600:.1f} h on {kind} at its stages' rate ({rate:,.0f} tokens/s)"
    return line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.reproduce", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the last stage's directory; stage k goes to OUT-k before it")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads (training.train --threads)")
    ap.add_argument("--twin", action="store_true", help="the autoregressive twin (--objective causal)")
    ap.add_argument("--model", type=Path, default=SHIPPED, help="the model whose stages to repeat")
    ap.add_argument("--dry-run", action="store_true", help="print the stages' commands, train nothing")
    args = ap.parse_args(argv)
    recorded = stages(json.loads((args.model / "training.json").read_text()))
    print(estimate(recorded), flush=True)
    init = None
    for k, stage in enumerate(recorded, 1):
        out = args.out if k == len(recorded) else f"{args.out}-{k}"
        done = done_steps(Path(out))
        if done is not None and done >= stage["steps"]:
            print(f"stage {k}: done ({out}, step {done})", flush=True)
        else:
            command = (["--out", out, "--resume", "--steps", str(stage["steps"]), "--device", args.device]
                       if done is not None else
                       stage_argv(stage, out, init, args.device, args.twin, args.model / "tokenizer.json"))
            doing = f"resuming at step {done}" if done is not None else "training"
            command += ["--threads", str(args.threads)]
            print(f"stage {k}: {doing}: python -m training.train {shlex.join(command)}", flush=True)
            if not args.dry_run:
                train.main(command)
                step = done_steps(Path(out)) or 0
                if step < stage["steps"]:   # stopped (SIGTERM, Ctrl-C): the next stage must not start from it
                    print(f"stage {k}: stopped at step {step} of {stage['steps']}; run the same command again "
                          "to resume", flush=True)
                    return 1
        init = out
    return 0


if __name__ == "__main__":
    sys.exit(main())
