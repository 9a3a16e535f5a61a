"""A quick probe of whether a config and learning rate learn content-addressed copying.

    python -m training.probe_copy [--config mini] [--lr 1e-3] [--steps 1000] [--objective O] [--warm N]

Each sequence is random tokens with a 12-token segment at a random offset, a separator,
and the segment again; the loss is on the repeat, which only recall by content can
predict (all but its first token). Small models sit at chance for a while and then learn
it abruptly; the step where that happens says whether the real training (where copying
values out of a notice is most of the task) can get going within its budget. The last
line is JSON: {"learned_at": first step with accuracy >= 0.5, or null, ...}. With
--objective diffusion the repeat is a bidirectional block whose tail, after a random
kept prefix, is masked: what the decoder asks of a slot it is filling. --warm N trains the
first N steps causally; --objective mixed alternates causal and diffusion steps.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F

from clover_struct.engine.config import PRESETS, preset
from clover_struct.engine.model import CloverModel


VOCAB, SEGMENT, NOISE, BATCH, SEPARATOR = 256, 12, 40, 32, 3


def batch(generator: torch.Generator, alphabet: int = VOCAB - 10) -> torch.Tensor:
    segment = torch.randint(10, 10 + alphabet, (BATCH, SEGMENT), generator=generator)
    noise = torch.randint(10, 10 + alphabet, (BATCH, NOISE), generator=generator)
    at = int(torch.randint(0, NOISE - SEGMENT, (1,), generator=generator))
    return torch.cat([noise[:, :at], segment, noise[:, at:], torch.full((BATCH, 1), SEPARATOR), segment], 1)


def probe(config: str, lr: float, weight_decay: float, steps: int, seed: int = 0, every: int = 50,
          objective: str = "causal", warm: int = 0, alphabet: int = VOCAB - 10) -> dict:
    cfg = preset(config, vocab_size=VOCAB, mask_token_id=1, pad_token_id=0, eos_token_id=2)
    model = CloverModel(cfg).init_weights(torch.Generator().manual_seed(seed))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay)
    data = torch.Generator().manual_seed(seed + 1)
    learned_at, score, started = None, 0.0, time.time()
    for step in range(1, steps + 1):
        seq = batch(data, alphabet)
        causal = objective == "causal" or step <= warm or (objective == "mixed" and step % 2 == 1)
        if causal:
            logits = model(seq, "causal")[:, -SEGMENT - 1:-1]
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), seq[:, -SEGMENT:].reshape(-1))
        else:   # the repeat is a block: a random prefix of it kept, the rest masked (a slot mid-decode)
            kept = int(torch.randint(1, SEGMENT, (1,), generator=data))
            noised = seq.clone()
            noised[:, -SEGMENT + kept:] = cfg.mask_token_id
            logits = model(noised, "block", block_len=SEGMENT)[:, -SEGMENT + kept:]
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), seq[:, -SEGMENT + kept:].reshape(-1))
        for group in opt.param_groups:
            group["lr"] = lr * min(1.0, step / 50)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        accuracy = (logits.argmax(-1) == seq[:, -logits.shape[1]:]).float().mean().item()
        if causal == (objective == "causal"):   # the score is the objective's own (diffusion's unless causal)
            score = accuracy
            if learned_at is None and accuracy >= 0.5:
                learned_at = step
        if step % every == 0 or step == steps:
            print(json.dumps({"step": step, "loss": round(loss.item(), 3), "accuracy": round(score, 3),
                              "seconds": round(time.time() - started, 1)}), flush=True)
    return {"config": config, "objective": objective, "lr": lr, "weight_decay": weight_decay, "steps": steps, "learned_at": learned_at,
            "warm": warm, "alphabet": alphabet, "final_accuracy": round(score, 3)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.probe_copy", description=__doc__.splitlines()[0])
    p.add_argument("--config", choices=sorted(PRESETS), default="mini")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--objective", choices=("causal", "diffusion", "mixed"), default="causal",
                   help="diffusion: the repeat is a block, masked after a random kept prefix; mixed: "
                        "causal and diffusion steps alternate (scored on the diffusion steps)")
    p.add_argument("--warm", type=int, default=0, help="train causally for the first WARM steps")
    p.add_argument("--alphabet", type=int, default=VOCAB - 10,
                   help="distinct tokens the sequences draw from (notices are mostly 10 digits and 26 letters)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(json.dumps(probe(args.config, args.lr, args.weight_decay, args.steps, args.seed,
                           objective=args.objective, warm=args.warm, alphabet=args.alphabet)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
