"""Forward passes per record on DiffusionGemma: our joint constrained decode against transformers' generate().

One tiny random DiffusionGemma (transformers' DiffusionGemmaForBlockDiffusion, canvas 256 as in the
release), saved as safetensors beside clover-mini's tokenizer and loaded by our load_model, reads the
demo's 20 airspace notices. Both sides get the same prompt ids (api.encode_prompt: the prompt our
extract writes) and write a record's worth of canvases:

- ours: `extract` into NoFlyZone, one record at a time, greedy: its canvas is cut into canvases of 256,
  every slot commits a token per step (more where the constrained probability is >= 0.9), a canvas's
  first pass also encodes the prompt or the canvas before it (prefill_step). Trace.forward_passes.
- transformers: `generate()` unconstrained with its defaults (48 denoising steps at most per canvas,
  entropy-bound acceptance, temperature 0.8 -> 0.4, stop early once the argmax is stable and the mean
  entropy below 0.005), as many canvases as our record takes (max_new_tokens; eos does not stop it, so
  both write the same length). Its decoder passes are counted by wrapping `forward`, its encoder passes
  (the prompt, each finished canvas) by a hook on the encoder.

    python benchmarks/diffusion_gemma_decode.py [--std 0.0] [--canvas 256] [--n 20]

What random weights cannot show: how sure a trained model is. Near-uniform logits (std 0, transformers'
init) reach our 0.9 threshold only where a slot's grammar leaves one token, so a slot otherwise commits
one token per step and a canvas costs about its longest slot part; they never fall below generate's
entropy bound or its stopping entropy, so generate runs all 48 steps per canvas. A trained model commits several tokens per slot per step (tokens per forward
rises; forward passes fall) and stops generate early; by how much is what only real weights can say.
`--std 1.0` moves every weight by N(0, 1): confidently wrong logits, the other extreme.

Last line: {"records", "canvas", "ours_passes_per_record", "transformers_decoder_passes_per_record",
            "transformers_passes_per_record" (decoder + encoder), "ratio" (transformers total / ours), ...}
"""

import argparse
import json
import platform
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch
import transformers

from clover_struct import extract_many, load_model
from clover_struct.api import EMBEDDED, encode_prompt, prepare
from clover_struct.demo import load_notices
from clover_struct.engine.tokenizer import Tokenizer
from clover_struct.schemas.airspace import NoFlyZone

VISION = dict(model_type="gemma4_vision", hidden_size=8, intermediate_size=8, num_hidden_layers=1,
              num_attention_heads=1, num_key_value_heads=1, head_dim=8)


def build(tokenizer: Tokenizer, root: Path, canvas: int, std: float, seed: int):
    """A tiny random DiffusionGemma over `tokenizer`: transformers' model and ours, loaded from its save."""
    text = dict(vocab_size=tokenizer.vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, global_head_dim=32,
                num_global_key_value_heads=1, sliding_window=128, num_experts=8, top_k_experts=2,
                moe_intermediate_size=32, max_position_embeddings=8192,
                layer_types=["sliding_attention"] * 3 + ["full_attention"],
                pad_token_id=tokenizer.pad_id, eos_token_id=tokenizer.eos_id, bos_token_id=tokenizer.eos_id)
    torch.manual_seed(seed)
    config = transformers.DiffusionGemmaConfig(text_config=text, vision_config=VISION, canvas_length=canvas)
    theirs = transformers.DiffusionGemmaForBlockDiffusion(config).eval()
    with torch.no_grad():
        for p in theirs.parameters():
            p.add_(torch.randn_like(p) * std)
    theirs.save_pretrained(root)
    tokenizer.save(root / "tokenizer.json")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*the vision tower is ignored")
        return theirs, load_model(root)


class Counted:
    """Counts transformers' decoder passes (generate calls `self.forward`, bound, so no hook sees them)
    and encoder passes (a forward hook on the encoder)."""

    def __init__(self, model):
        self.decoder = self.encoder = 0
        forward = model.forward

        def counting(*args, **kw):
            self.decoder += 1
            return forward(*args, **kw)
        model.forward = counting
        model.model.encoder.register_forward_hook(lambda *_: setattr(self, "encoder", self.encoder + 1))


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--std", type=float, default=0.0, help="move every weight by N(0, std) (0: transformers' init)")
    ap.add_argument("--canvas", type=int, default=256, help="canvas length (the release's: 256)")
    ap.add_argument("--n", type=int, default=20, help="notices (the demo's, at most 20)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(min(2, torch.get_num_threads()))
    texts = [n["text"] for n in load_notices()][:args.n]
    tokenizer = Tokenizer.from_file(EMBEDDED / "tokenizer.json")
    with tempfile.TemporaryDirectory() as tmp:
        theirs, ours = build(tokenizer, Path(tmp), args.canvas, args.std, args.seed)
    _, canvas, _ = prepare(NoFlyZone, ours)
    canvases = len(canvas.spans(args.canvas))
    prompts = [encode_prompt(ours, t, canvas) for t in texts]

    rows, started = [], time.perf_counter()
    for text in texts:   # one record at a time: its passes are its own
        t = time.perf_counter()
        (value, trace), = extract_many([text], NoFlyZone, model=ours, trace=True, seed=args.seed)
        rows.append((trace, time.perf_counter() - t, isinstance(value, NoFlyZone)))
        if not rows[-1][2]:
            print(f"ours, not valid: {value}", flush=True)
    ours_seconds = time.perf_counter() - started

    counted, theirs_rows = Counted(theirs), []
    torch.manual_seed(args.seed)
    started = time.perf_counter()
    for ids in prompts:
        before = (counted.decoder, counted.encoder)
        t = time.perf_counter()
        out = theirs.generate(torch.tensor([ids]), max_new_tokens=canvases * args.canvas, eos_token_id=None)
        theirs_rows.append((counted.decoder - before[0], counted.encoder - before[1], time.perf_counter() - t,
                            out.sequences.shape[1] - len(ids), float(out.tokens_per_forward[0])))
    theirs_seconds = time.perf_counter() - started

    ours_passes = statistics.mean(r[0].forward_passes for r in rows)
    ours_tpf = statistics.mean(r[0].tokens_per_forward for r in rows)
    dec = statistics.mean(r[0] for r in theirs_rows)
    enc = statistics.mean(r[1] for r in theirs_rows)
    their_tpf = statistics.mean(r[4] for r in theirs_rows)
    slots = len(canvas.slots)
    print(f"machine: {platform.platform()}; {platform.processor() or platform.machine()}, "
          f"{torch.get_num_threads()} threads; torch {torch.__version__}; transformers {transformers.__version__}")
    print(f"model: tiny random DiffusionGemma (4 layers, hidden 64, 8 experts, vocab {tokenizer.vocab_size}, "
          f"weights + N(0, {args.std})), {sum(p.numel() for p in ours.parameters()):,} parameters, canvas "
          f"{args.canvas}; {len(texts)} demo notices -> NoFlyZone ({len(canvas)} canvas tokens, {slots} slots, "
          f"{canvases} canvases); longest slot {max(s.budget for s in canvas.slots)} tokens")
    # seconds: the two sides run one after the other, so only a quiet machine makes them comparable
    print("| decoder | forward passes / record | of them encoder-only | tokens / forward | valid records | s / record |")
    print("|---|---|---|---|---|---|")
    print(f"| ours, joint constrained | {ours_passes:.1f} | 0 (in each canvas's first pass) | {ours_tpf:.2f} | "
          f"{sum(r[2] for r in rows)} of {len(rows)} | {ours_seconds / len(rows):.3f} |")
    print(f"| transformers generate(), 48 steps, unconstrained | {dec + enc:.1f} | {enc:.1f} | {their_tpf:.2f} | "
          f"not constrained | {theirs_seconds / len(rows):.3f} |")
    print(f"transformers / ours, forward passes per record: {(dec + enc) / ours_passes:.1f}x "
          f"(decoder passes alone: {dec / ours_passes:.1f}x)")
    print(json.dumps({"records": len(texts), "canvas": args.canvas, "canvases_per_record": canvases, "std": args.std,
                      "canvas_tokens": len(canvas), "ours_passes_per_record": round(ours_passes, 2),
                      "ours_tokens_per_forward": round(ours_tpf, 2),
                      "ours_valid": sum(r[2] for r in rows),
                      "transformers_decoder_passes_per_record": round(dec, 2),
                      "transformers_encoder_passes_per_record": round(enc, 2),
                      "transformers_passes_per_record": round(dec + enc, 2),
                      "transformers_tokens_per_forward": round(their_tpf, 2),
                      "ratio": round((dec + enc) / ours_passes, 2), "ratio_decoder_only": round(dec / ours_passes, 2),
                      "ours_s_per_record": round(ours_seconds / len(rows), 4),
                      "transformers_s_per_record": round(theirs_seconds / len(rows), 4),
                      "platform": platform.platform(), "torch": torch.__version__,
                      "transformers": transformers.__version__}))


if __name__ == "__main__":
    main()
