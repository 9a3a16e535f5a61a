"""One DiffusionGemma decoder step: ours against transformers' own decoder forward, same weights, same inputs.

Both models hold the same random weights (transformers' init, ours sharing its tensors), encode
the same prompt into their own caches, then run the same self-conditioned decoder step over a
canvas: canvas embeddings + self-conditioning MLP, the layer stack against the cache, soft-capped
logits [batch, canvas, vocab] in float32. Timed in one run, the two alternating, median of --repeats;
the largest logit difference between the two is printed as a check that they computed the same.

    python benchmarks/diffusion_gemma_step.py                      # small shape, CPU, float32
    python benchmarks/diffusion_gemma_step.py --shape full         # google/diffusiongemma-26B-A4B-it's
                                                                   # shape, random bf16 weights, CUDA

What random weights cannot show: a trained router sends tokens unevenly to experts, so the
grouped expert GEMMs (and a loop over experts where there is no grouped kernel) get other
shapes than the near-uniform routing of random weights; and nothing about quality, how many
steps a canvas needs or how many tokens a step accepts. The cost of one step does not depend on
the weights' values otherwise.

Last line: {"shape", "device", "dtype", "batch", "prompt", "canvas", "ours_ms", "transformers_ms",
            "ratio" (transformers / ours), "max_logit_diff", ...}
"""

import argparse
import json
import platform
import statistics
import time
import warnings

import torch
import transformers
from transformers.cache_utils import DynamicCache

from clover_struct.engine.diffusion_gemma import DiffusionGemma, checkpoint_names
from clover_struct.engine.diffusion_gemma_config import DiffusionGemmaConfig

FULL = "full_attention"
SMALL = dict(vocab_size=8192, hidden_size=256, intermediate_size=512, num_hidden_layers=6, num_attention_heads=4,
             num_key_value_heads=2, head_dim=64, global_head_dim=128, num_global_key_value_heads=1,
             num_experts=16, top_k_experts=4, moe_intermediate_size=128, sliding_window=128)
# google/diffusiongemma-26B-A4B-it (Gemma-4 26B-A4B): 25 sliding + 5 full layers, 128 experts, top 8
RELEASE = dict(vocab_size=262_144, hidden_size=2816, intermediate_size=2112, num_hidden_layers=30,
               num_attention_heads=16, num_key_value_heads=8, head_dim=256, global_head_dim=512,
               num_global_key_value_heads=2, num_experts=128, top_k_experts=8, moe_intermediate_size=704,
               sliding_window=1024, max_position_embeddings=262_144)
TINY_VISION = dict(model_type="gemma4_vision", hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                   num_attention_heads=1, num_key_value_heads=1, head_dim=8)


def reference(text: dict, canvas: int, device, dtype):
    config = transformers.DiffusionGemmaConfig(text_config=text, vision_config=TINY_VISION, canvas_length=canvas)
    with torch.device(device):
        return transformers.DiffusionGemmaForBlockDiffusion._from_config(config, dtype=dtype).eval()


def ours_sharing(theirs) -> DiffusionGemma:
    """Our model on the reference's own tensors (no copy), mapped by the loader's name table."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*vision tower is ignored")
        config = DiffusionGemmaConfig.from_dict(json.loads(theirs.config.to_json_string()))
    with torch.device("meta"):
        model = DiffusionGemma(config)
    state = theirs.state_dict()
    model.load_state_dict({k: state[next(s for s in checkpoint_names(k) if s in state)] for k in model.state_dict()},
                          assign=True)
    model.reset_buffers(theirs.device)
    return model.eval()


def interleaved_ms(first, second, repeats: int, device) -> tuple[float, float]:
    """Median ms of each of two calls, run alternately (a load that comes and goes on the machine
    falls on both alike), after two warm-up rounds."""
    def run(fn):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - t) * 1e3
    times = [[], []]
    for i in range(repeats + 2):
        for fn, out in ((first, times[0]), (second, times[1])):
            ms = run(fn)
            if i >= 2:
                out.append(ms)
    return statistics.median(times[0]), statistics.median(times[1])


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=["small", "full"], default="small")
    ap.add_argument("--layers", type=int, help="override the layer count (the last layer is full attention)")
    ap.add_argument("--device", help="default: cuda for --shape full, else cpu")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], help="default: bfloat16 on CUDA, else float32")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, help="prompt tokens (default: 256 small, 2048 full)")
    ap.add_argument("--canvas", type=int, default=256, help="canvas length (the release's: 256)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    device = torch.device(args.device or ("cuda" if args.shape == "full" else "cpu"))
    dtype = getattr(torch, args.dtype or ("bfloat16" if device.type == "cuda" else "float32"))
    text = dict(RELEASE if args.shape == "full" else SMALL)
    if args.layers:
        text["num_hidden_layers"] = args.layers
    n = text["num_hidden_layers"]
    text["layer_types"] = ["sliding_attention" if (i + 1) % 6 and i < n - 1 else FULL for i in range(n)]
    prompt_len = args.prompt or (2048 if args.shape == "full" else 256)

    torch.manual_seed(0)
    theirs = reference(text, args.canvas, device, dtype)
    ours = ours_sharing(theirs)
    V = text["vocab_size"]
    prompt = torch.randint(0, V, (args.batch, prompt_len), device=device)
    canvas = torch.randint(0, V, (args.batch, args.canvas), device=device)
    their_cache = DynamicCache(config=theirs.config.get_text_config(decoder=True))
    theirs.model.encoder(input_ids=prompt, cache=their_cache)
    our_cache, _ = ours.prefill(prompt)
    # a self-conditioned step, as every step of a canvas but its first is
    previous = theirs(cache=their_cache, decoder_input_ids=canvas).logits.to(dtype)

    def their_step():
        return theirs(cache=their_cache, decoder_input_ids=canvas, self_conditioning_logits=previous).logits

    def our_step():
        return ours.step(canvas, our_cache, self_conditioning=previous)

    diff = (our_step() - their_step()).abs().max().item()
    ours_ms, theirs_ms = interleaved_ms(our_step, their_step, args.repeats, device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else \
        f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"
    print(f"machine: {platform.platform()}; torch {torch.__version__}; transformers {transformers.__version__}; "
          f"device {device} ({name})")
    print(f"shape {args.shape}: {n} layers, hidden {text['hidden_size']}, {text['num_experts']} experts "
          f"(top {text['top_k_experts']}), vocab {V}; {dtype}; batch {args.batch}, prompt {prompt_len}, "
          f"canvas {args.canvas}; transformers attention {theirs.config._attn_implementation}, "
          f"experts {theirs.config.text_config._experts_implementation}")
    print(f"| model | ms per step |\n|---|---|\n| ours | {ours_ms:.2f} |\n| transformers | {theirs_ms:.2f} |")
    print(f"transformers / ours: {theirs_ms / ours_ms:.2f}x; largest logit difference {diff:.3g}")
    print(json.dumps({"shape": args.shape, "layers": n, "device": str(device), "device_name": name,
                      "dtype": str(dtype).removeprefix("torch."), "batch": args.batch, "prompt": prompt_len,
                      "canvas": args.canvas, "ours_ms": round(ours_ms, 3), "transformers_ms": round(theirs_ms, 3),
                      "ratio": round(theirs_ms / ours_ms, 3), "max_logit_diff": diff,
                      "platform": platform.platform(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
