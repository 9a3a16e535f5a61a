"""What one denoising step costs as the prompt grows, with and without the prefix cache.

A step runs the current block (32 tokens) through the model. With the cache,
the prompt was encoded once and the step touches only the block (plus one
attention read over the cached keys per attention layer); without it, every
step re-encodes prompt + block. Small config, CPU, float32.

    python benchmarks/step_cost.py [--repeats 5]

Last line: {"prompt_lengths": [...], "step_ms_cached": [...], "step_ms_uncached": [...],
            "cached_ratio": long/short, "uncached_ratio": long/short}
"""

import argparse
import json
import platform
import statistics
import time

import torch

from clover_struct.engine.config import ModelConfig
from clover_struct.engine.model import CloverModel

CONFIG = dict(vocab_size=2048, hidden_size=128, num_hidden_layers=8, num_attention_heads=4,
              num_key_value_heads=2, head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
              linear_key_head_dim=32, linear_value_head_dim=32, num_experts=8, num_experts_per_tok=2,
              moe_intermediate_size=128, shared_expert_intermediate_size=128, block_size=32,
              mask_token_id=0, max_position_embeddings=8192)


def median_ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--prompt-lengths", type=int, nargs="+", default=[256, 4096])
    args = ap.parse_args()
    torch.manual_seed(0)
    model = CloverModel(ModelConfig(**CONFIG)).init_weights().eval()
    block = torch.randint(1, 2048, (1, 32))
    cached, uncached = [], []
    with torch.no_grad():
        for n in args.prompt_lengths:
            prompt = torch.randint(1, 2048, (1, n))
            cache, _ = model.prefill(prompt)
            cached.append(median_ms(lambda: model.step(block, cache), args.repeats))
            full = torch.cat([prompt, block], 1)
            uncached.append(median_ms(lambda: model(full, "block", block_len=32), args.repeats))
    print(f"machine: {platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    print("| prompt tokens | step ms (cached) | step ms (uncached) |\n|---|---|---|")
    for n, c, u in zip(args.prompt_lengths, cached, uncached):
        print(f"| {n} | {c:.2f} | {u:.2f} |")
    print(json.dumps({"prompt_lengths": args.prompt_lengths,
                      "step_ms_cached": [round(x, 3) for x in cached],
                      "step_ms_uncached": [round(x, 3) for x in uncached],
                      "cached_ratio": round(cached[-1] / cached[0], 3),
                      "uncached_ratio": round(uncached[-1] / uncached[0], 3)}))


if __name__ == "__main__":
    main()
