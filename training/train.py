"""Training clover-mini: the loop and its command line.

The data is data.py's (the decoder's exact canvases, one kind per batch, a pure function
of (seed, step)); the loss is objective.py's (block diffusion, or the autoregressive twin's
causal loss). The first --warm-steps steps (600, of copy drills: --warm-mix) read the clean
canvas causally, with next-token loss on every slot token: copying out of the prompt forms
there within a few hundred steps, and the diffusion steps build on it. `--resume` continues
exactly: only weights, AdamW state and the step are saved (safetensors + JSON, no pickle).

    python -m training.train --out runs/mini --minutes 170   # writes the clover-mini dir
    python -m training.train --out runs/mini --resume         # continues a stopped run
    python -m training.train --out runs/mini2 --init runs/mini --seed 1 --warm-steps 0 --minutes 90   # a 2nd stage
    python -m training.train --out runs/zones --init clover_struct/models/clover-mini --steps 30 ...   # from the shipped weights
    python -m training.train --out runs/twin --objective causal --minutes 150   # the AR twin

DIR ends up holding config.json, model.safetensors, tokenizer.json (the model: copy these
three to clover_struct/models/clover-mini/), plus optimizer.safetensors, train_state.json
and train_log.jsonl for resuming and the model card.
"""

from __future__ import annotations

# ruff: noqa: E402  (the wait policy below must be set before torch is imported)
import os

# Other jobs share the cores: with the default wait policy, an OpenMP thread spins at
# every barrier while its partner is descheduled, and a training step took >60 s instead
# of 5 s next to one busy process (measured). Only effective before torch is loaded.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import json
import math
import platform
import signal
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from clover_struct.engine.checkpoint import save_model
from clover_struct.engine.config import PRESETS, ModelConfig, preset
from clover_struct.engine.model import CloverModel
from clover_struct.engine.tokenizer import Tokenizer

from . import data as D
from . import objective as O
from .data import DEFAULT_MIX, SCHEMAS
from .tokenizer import build as build_tokenizer

WARM_STEPS, WARM_MIX = 600, "copy=1"


def lr_at(progress: float, step: int, args) -> float:
    """Linear warmup over `warmup` steps, then cosine from lr to lr/10 over the run."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    return args.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * min(progress, 1.0))))


def make_optimizer(model, args):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "norm" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "norm" not in n)]
    return torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                              {"params": rest, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95))


def save_checkpoint(model, opt, out: Path, state: dict, model_type: str = "clover") -> None:
    """Weights (save_model), AdamW state (safetensors) and the JSON state, each file replaced atomically."""
    tmp = out / ".tmp"
    save_model(model, tmp, model_type=model_type)
    names = {p: n for n, p in model.named_parameters()}
    flat = {f"{names[p]}.{k}": v.detach().cpu().clone().contiguous() for p, s in opt.state.items() for k, v in s.items()}
    save_file(flat, str(tmp / "optimizer.safetensors"))
    (tmp / "train_state.json").write_text(json.dumps(state, indent=2) + "\n")
    for f in ("config.json", "model.safetensors", "tokenizer.json", "optimizer.safetensors", "train_state.json"):
        os.replace(tmp / f, out / f)
    tmp.rmdir()


def load_weights(out: Path, device=torch.device("cpu")):
    """The model saved in run directory `out`, and the run's state (for a shipped model's
    directory, which keeps no run state, the training record beside it: training.json)."""
    record = out / "train_state.json"
    state = json.loads((record if record.is_file() else out / "training.json").read_text())
    tok = Tokenizer.from_file(out / "tokenizer.json")
    model = CloverModel(ModelConfig.from_file(out / "config.json"), tok)
    model.load_state_dict(load_file(str(out / "model.safetensors")))
    return model.to(device), state


def load_checkpoint(out: Path, args, device=torch.device("cpu")):
    model, state = load_weights(out, device)
    opt = make_optimizer(model, args)
    flat = load_file(str(out / "optimizer.safetensors"))
    for n, p in model.named_parameters():   # AdamW keeps `step` on the CPU, the moments beside the weight
        s = {k: flat[f"{n}.{k}"].to(p.device if k != "step" else "cpu")
             for k in ("step", "exp_avg", "exp_avg_sq") if f"{n}.{k}" in flat}
        if s:
            opt.state[p] = s
    return model, opt, state


def build(args, out: Path, device=torch.device("cpu")):
    tok_path = out / "tokenizer.json"
    if args.tokenizer:
        hf_tok = Tokenizer.from_file(args.tokenizer)._tok
    elif tok_path.is_file():
        hf_tok = Tokenizer.from_file(tok_path)._tok
    else:
        hf_tok = build_tokenizer()
    tok = Tokenizer(hf_tok)
    cfg = preset(args.config, vocab_size=tok.vocab_size, mask_token_id=tok.mask_id, pad_token_id=tok.pad_id,
                 eos_token_id=tok.eos_id)
    cfg.block_size = args.block_size or cfg.max_position_embeddings   # default: one block per canvas
    torch.manual_seed(args.seed)
    model = CloverModel(cfg, tok).init_weights(torch.Generator().manual_seed(args.seed)).to(device)
    return model, make_optimizer(model, args)


def machine() -> str:
    """The training machine in words, for the model card."""
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    return f"{os.cpu_count()} CPU cores ({platform.machine()}, {platform.system()}), {gpu}, torch {torch.__version__}"


RUN_KEYS = ("config", "block_size", "mix", "batch_tokens", "lr", "warmup", "weight_decay", "clip", "seed", "steps", "minutes",
            "objective", "warm_steps", "warm_mix", "init", "loss_on", "full_mask", "choice_weight")


def train(args) -> Path:
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.resume:
        saved = json.loads((out / "train_state.json").read_text())["args"]
        saved.setdefault("objective", "diffusion")   # runs saved before --objective existed
        saved.setdefault("warm_steps", 0)             # ... and before --warm-steps
        for k in RUN_KEYS:   # the run's own settings, except stop criteria given again
            if not (k in ("steps", "minutes") and getattr(args, k) is not None):
                setattr(args, k, saved.get(k, getattr(args, k)))
        model, opt, state = load_checkpoint(out, args, torch.device(args.device))
        step, elapsed, before = state["step"], state["elapsed"], state.get("before")
    elif args.init:   # a new stage: the earlier run's weights, a fresh optimizer and schedule
        model, before = load_weights(Path(args.init), torch.device(args.device))
        log_path = Path(args.init) / "train_log.jsonl"
        if log_path.is_file():   # a shipped model's record already holds its last log line
            log = log_path.read_text().splitlines()
            before["last_log"] = json.loads(log[-1]) if log else None
        opt, step, elapsed = make_optimizer(model, args), 0, 0.0
    else:
        model, opt = build(args, out, torch.device(args.device))
        step, elapsed, before = 0, 0.0, None
    if args.steps is None and args.minutes is None:
        raise SystemExit("give --steps and/or --minutes")
    mix = as_mix(args.mix)
    stream, loss_name, model_type = O.OBJECTIVES[args.objective]
    data_class, loss_of = getattr(D, stream), getattr(O, loss_name)
    settings = (args.batch_tokens, args.seed, args.loss_on, model.config.block_size, args.full_mask,
                args.choice_weight)
    data = data_class(model.tokenizer, mix, *settings)
    warm_mix = None
    if args.objective != "causal":
        warm_mix = as_mix(args.warm_mix) or mix
        warm_data = D.Data(model.tokenizer, warm_mix, *settings)

        def loss_of(model, balance, data, step, seed):
            warm = step < args.warm_steps
            return O.step_loss(model, balance, warm_data if warm else data, step, seed, causal=warm)
    n = sum(p.numel() for p in model.parameters())
    print(f"clover-{args.config}: {n:,} parameters ({n * 4 / 1e6:.1f} MB float32), vocab {model.config.vocab_size}, "
          f"canvases {', '.join(f'{k} {len(c)}' for k, c in data.canvases.items())}", flush=True)
    balance, log = O.Balance(model), (out / "train_log.jsonl").open("a")
    model.train()
    stop = {"signal": False}
    # SIGTERM / Ctrl-C: finish the step in progress, save, stop
    previous = {sig: signal.signal(sig, lambda *_: stop.update(signal=True)) for sig in (signal.SIGTERM, signal.SIGINT)}

    def snapshot():
        save_checkpoint(model, opt, out, {"step": step, "elapsed": elapsed, "skipped": data.skipped, "machine": machine(),
                                          "device": args.device, "before": before,
                                          "args": {**{k: getattr(args, k) for k in RUN_KEYS}, "mix": mix,
                                                   "warm_mix": warm_mix}},
                        model_type)

    def progress():
        if args.steps is not None:
            return step / args.steps
        return elapsed / (args.minutes * 60)

    t0, last_save, done_here = time.time() - elapsed, time.time(), 0
    acc = dict(loss=0.0, n=0, tokens=0, masked=0, hit=0, value=0, value_hit=0, t=time.time(), kinds={})
    while not stop["signal"]:
        if args.steps is not None and step >= args.steps:
            break
        if args.minutes is not None and elapsed >= args.minutes * 60:
            break
        if args.stop_after is not None and done_here >= args.stop_after:
            break
        lr = lr_at(progress(), step, args)
        for group in opt.param_groups:
            group["lr"] = lr
        loss, ce, st = loss_of(model, balance, data, step, args.seed)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        step, done_here, elapsed = step + 1, done_here + 1, time.time() - t0
        acc["loss"] += float(ce)
        acc["n"] += 1
        acc["kinds"][st["kind"]] = acc["kinds"].get(st["kind"], 0) + 1
        for k in ("tokens", "masked", "hit", "value", "value_hit"):
            acc[k] += st[k]
        if step % args.log_every == 0 or step == args.steps:
            now = time.time()
            row = dict(step=step, loss=round(acc["loss"] / acc["n"], 4),
                       acc=round(acc["hit"] / max(acc["masked"], 1), 4),
                       acc_value=round(acc["value_hit"] / max(acc["value"], 1), 4),
                       tok_s=round(acc["tokens"] / (now - acc["t"]), 1), elapsed=round(elapsed, 1),
                       lr=round(lr, 6), kinds=acc["kinds"], warm=step <= args.warm_steps)
            print(json.dumps(row), flush=True)
            log.write(json.dumps(row) + "\n")
            log.flush()
            acc = dict(loss=0.0, n=0, tokens=0, masked=0, hit=0, value=0, value_hit=0, t=now, kinds={})
        if time.time() - last_save >= args.save_minutes * 60:
            snapshot()
            last_save = time.time()
    for sig, handler in previous.items():
        signal.signal(sig, handler)
    snapshot()
    log.close()
    print(f"saved step {step} to {out} ({elapsed / 60:.1f} min, {data.skipped} examples over budget skipped)",
          flush=True)
    return out


def as_mix(value: str | dict | None) -> dict[str, float]:
    """A mix as given on the command line, or as a saved run already holds it."""
    return value if isinstance(value, dict) else parse_mix(value or "")


def parse_mix(text: str) -> dict[str, float]:
    mix = {}
    for part in filter(None, text.split(",")):
        kind, _, w = part.partition("=")
        if kind.strip() not in SCHEMAS:
            raise SystemExit(f"--mix: unknown kind {kind!r}; kinds are {', '.join(SCHEMAS)}")
        mix[kind.strip()] = float(w)
    return mix


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m training.train", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="run directory (model, optimizer state, log)")
    p.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    p.add_argument("--init", default=None,
                   help="start from the weights (and tokenizer) of the run in this directory (or of a shipped model's "
                        "directory), with a new optimizer and lr schedule: a second training stage (give a new --seed "
                        "for new examples)")
    p.add_argument("--minutes", type=float, default=None, help="stop after this much training time (all runs)")
    p.add_argument("--steps", type=int, default=None,
                   help="stop at this step; also the lr schedule's horizon (else --minutes is)")
    p.add_argument("--stop-after", type=int, default=None, help="stop after this many steps in this invocation")
    p.add_argument("--config", choices=sorted(PRESETS), default="mini")
    p.add_argument("--objective", choices=("diffusion", "causal"), default="diffusion",
                   help="causal: the autoregressive twin for benchmarks (objective.causal_loss), saved as a "
                        "Qwen3.5-MoE checkpoint transformers loads")
    # Copying a value out of the prompt is most of the task. Under the diffusion loss alone
    # the mini config had not learned it after 3,000+ steps (values at ~43%, copied fields
    # 0/10). On training/probe_copy.py it learned causally in ~650 steps, and a diffusion
    # phase after 800 causal steps reached 0.96 within 500 more, while alternating the two
    # from the start had not learned by step 1,300. On the real mix, causal steps did not
    # learn it either (values ~49% at step 1,440; fir and location tokens 0-4%), but on
    # copy drills (--mix copy=1) causal steps did: values 0.41 at step 150, 0.93 at 500.
    # So diffusion training starts with causal copy drills. (Tied input and output embeddings
    # learned the drills more slowly: values 0.41 against 0.81 at step 300, same recipe.)
    p.add_argument("--warm-steps", type=int, default=WARM_STEPS,
                   help="diffusion objective: train the first N steps causally on the clean canvas (next-token "
                        "loss on its slot tokens), so copying out of the prompt forms first")
    p.add_argument("--warm-mix", default=WARM_MIX, help="the kinds of the warm steps")
    # 80 dispatch-only steps from the shipped clover-mini (seed 2, lr 5e-4, 16k-token batches),
    # same batches and masks, measured on 24 of evaluate.py's dispatch messages with every slot
    # masked: value tokens 0.18 before, 0.22 after with "all", 0.50 with "decisions"; the pad
    # ending a value 0.99, 0.99, 0.91. Decoded field EM on 40 messages stayed 0.22, 0.25, 0.26:
    # the miss is each task's kind tag (nearly always waypoint_changed), which 80 steps do not
    # teach. (Without whole choice slots, an absent item's empty tag, scored over the tag's
    # whole span, lost its trailing pads and every message got eight items.) The shipped model's
    # stages 1-6 used "all", its stages 7-17 "decisions".
    p.add_argument("--loss-on", choices=("all", "decisions"), default="all",
                   help="diffusion objective: the masked positions the loss reads: all, or only the value "
                        "tokens, the pad ending each value and whole choice slots (the decoder writes the "
                        "other pads itself)")
    p.add_argument("--full-mask", type=float, default=0.0,
                   help="diffusion objective: share of rows with every slot position masked, the state in which "
                        "the decoder's first step settles choices (union tags, enums) from the text alone")
    p.add_argument("--choice-weight", type=float, default=1.0,
                   help="diffusion objective: weight of choice-slot positions (enums, booleans, union tags) in "
                        "the loss's mean, against 1 for the others")
    p.add_argument("--block-size", type=int, default=None,
                   help="denoising block (default: the config's, one block per canvas); longer canvases "
                        "train one noised block after clean earlier ones")
    p.add_argument("--tokenizer", default=None, help="tokenizer.json to use (default: train one)")
    p.add_argument("--mix", default=",".join(f"{k}={v}" for k, v in DEFAULT_MIX.items()))
    p.add_argument("--batch-tokens", type=int, default=4000, help="tokens per batch (prompts + canvases)")
    # 1e-3: on training/probe_copy.py (recall a 12-token segment seen earlier in a sequence)
    # the mini config learned to copy after ~650 steps at 1e-3 and not within 1,000 at 3e-3,
    # and a 3e-3 run on the real data sat at ~43% on masked value tokens for 3,000 steps.
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2,
                   help="CPU threads; on a machine other jobs share, 1 avoids stalls at OpenMP barriers")
    p.add_argument("--device", default="cpu", help="cpu or cuda (weights are saved in float32 either way)")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--save-minutes", type=float, default=10.0)
    return p


def main(argv: list[str] | None = None) -> int:
    train(parser().parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
