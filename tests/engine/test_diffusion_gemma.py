"""DiffusionGemma against transformers' own DiffusionGemmaForBlockDiffusion, loaded through our checkpoint code.

The reference is driven by hand as its `generate` drives it: the encoder fills a DynamicCache,
the decoder reads it, a finished canvas goes through the encoder again. Each of its rows runs
alone, unpadded. The tiny config keeps every feature of the release: sliding and full layers
(full ones with their own head dim and one KV head, values from the key projection, proportional
partial RoPE), a prompt longer than the sliding window, routed experts beside the dense MLP,
distinct encoder and decoder layer scalars, self-conditioning, soft-capped logits.
"""

import json
import shutil
import warnings

import pytest
import torch
from safetensors.torch import load_file, save_file

from clover_struct import CheckpointError, load_model
from clover_struct.engine.diffusion_gemma_config import DiffusionGemmaConfig
from clover_struct.engine.diffusion_gemma_layers import Experts, grouped_linear
from clover_struct.engine.interface import DenoisingModel

transformers = pytest.importorskip("transformers", reason="transformers is a test extra: pip install -e .[test]")
from transformers.cache_utils import DynamicCache  # noqa: E402

V, C, W = 101, 8, 8   # vocabulary, canvas length, sliding window
TEXT = dict(vocab_size=V, hidden_size=48, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, global_head_dim=32, num_global_key_value_heads=1,
            sliding_window=W, num_experts=6, top_k_experts=2, moe_intermediate_size=16, max_position_embeddings=512,
            layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"])
VISION = dict(model_type="gemma4_vision", hidden_size=8, intermediate_size=8, num_hidden_layers=1,
              num_attention_heads=1, num_key_value_heads=1, head_dim=8)


def reference_model(**text):
    torch.manual_seed(0)
    config = transformers.DiffusionGemmaConfig(text_config={**TEXT, **text}, vision_config=VISION, canvas_length=C)
    model = transformers.DiffusionGemmaForBlockDiffusion(config).eval()
    with torch.no_grad():  # move every weight off its init value; the two roles' layer scalars apart
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
        for layers in (model.model.encoder.language_model.layers, model.model.decoder.layers):
            for layer in layers:
                layer.layer_scalar.uniform_(0.5, 1.5)
    return model


def load_quietly(path, **kw):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*the vision tower is ignored")
        return load_model(path, **kw)


@pytest.fixture(scope="module")
def reference():
    return reference_model()


@pytest.fixture(scope="module")
def saved(reference, tmp_path_factory):
    path = tmp_path_factory.mktemp("diffusion_gemma")
    reference.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def ours(saved):
    return load_quietly(saved)


class Reference:
    """One row of transformers' model: encoder into a DynamicCache, decoder reading it."""

    def __init__(self, model):
        self.model = model
        self.cache = DynamicCache(config=model.config.get_text_config(decoder=True))

    @torch.no_grad()
    def encode(self, ids):  # the encoder's soft-capped logits at the last column
        h = self.model.model.encoder(input_ids=ids, cache=self.cache).last_hidden_state[:, -1]
        cap = self.model.config.text_config.final_logit_softcapping
        return torch.tanh(self.model.lm_head(h).float() / cap) * cap

    @torch.no_grad()
    def denoise(self, canvas, self_conditioning=None):
        return self.model(cache=self.cache, decoder_input_ids=canvas, self_conditioning_logits=self_conditioning).logits


def ids(*shape):
    return torch.randint(0, V, shape)


def test_interface_and_config(ours):
    assert isinstance(ours, DenoisingModel)
    assert (ours.family, ours.noise) == ("diffusion_gemma", "uniform")
    c = ours.config
    assert (c.block_size, c.mask_token_id, c.pad_token_id, c.eos_token_id, c.vocab_size) == (C, None, 0, 1, V)
    assert (c.head_dim_of("full_attention"), c.kv_heads_of("full_attention")) == (32, 1)
    assert not hasattr(ours.layers[1].self_attn, "v_proj") and hasattr(ours.layers[0].self_attn, "v_proj")


def test_prefill_step_commit_match_transformers(reference, ours, close):
    """A prompt longer than the window, a canvas's first step (no self-conditioning), its next step
    (self-conditioned on the first step's logits), the canvas committed, a second canvas."""
    torch.manual_seed(1)
    prompt, canvas, second = ids(1, 13), ids(1, C), ids(1, C)
    ref = Reference(reference)
    cache, logits = ours.prefill(prompt)
    close(logits, ref.encode(prompt), "prefill (encoder logits)", 1e-4)
    first = ref.denoise(canvas)
    close(ours.step(canvas, cache), first, "step 1, no self-conditioning", 1e-4)
    again = ref.denoise(canvas, first)
    assert (again - first).abs().max() > 0.1   # self-conditioning changes what the test compares
    close(ours.step(canvas, cache, self_conditioning=first), again, "step 2, self-conditioned", 1e-4)
    close(ours.commit(canvas, cache), ref.encode(canvas), "commit (encoder logits)", 1e-4)
    assert cache.length == 13 + C
    close(ours.step(second, cache, self_conditioning=again), ref.denoise(second, again),
          "second canvas, self-conditioned", 1e-4)
    close(ours.step(second, cache), ref.denoise(second), "second canvas, first step", 1e-4)
    ours.commit(second, cache)
    ref.encode(second)
    wide = ids(1, 12)   # a canvas wider than the sliding window, denoised and committed
    close(ours.step(wide, cache), ref.denoise(wide), "canvas wider than the window", 1e-4)
    close(ours.commit(wide, cache), ref.encode(wide), "commit of a canvas wider than the window", 1e-4)


def test_batched_left_padded_rows_match_each_row_alone(reference, ours, close):
    """Prompts of 13, 4 and 9 tokens (one within the window, two past it), left-padded to 13 with
    junk ids, their caches selected and stepped, canvases committed: each row as transformers
    computes it alone."""
    torch.manual_seed(2)
    lengths = [13, 4, 9]
    prompts = [ids(1, n) for n in lengths]
    batch = torch.cat([torch.cat([ids(1, 13 - n), p], 1) for p, n in zip(prompts, lengths)])
    canvas, second = ids(3, C), ids(3, C)
    cache, logits = ours.prefill(batch, lengths)
    refs = [Reference(reference) for _ in lengths]
    close(logits, torch.cat([r.encode(p) for r, p in zip(refs, prompts)]), "prefill, batched vs alone", 1e-4)
    first = ours.step(canvas, cache)
    close(first, torch.cat([r.denoise(canvas[i:i + 1]) for i, r in enumerate(refs)]), "step, batched vs alone", 1e-4)
    sc = torch.cat([r.denoise(canvas[i:i + 1], first[i:i + 1]) for i, r in enumerate(refs)])
    close(ours.step(canvas, cache, self_conditioning=first), sc, "self-conditioned step, batched vs alone", 1e-4)
    rows, cols = torch.tensor([2, 0, 2]), torch.tensor([0, 5, 7])
    close(ours.step(canvas, cache, at=(rows, cols)), first[rows, cols], "at=(rows, cols) vs full step", 1e-5)
    close(ours.step(canvas[[2, 1]], cache.select([2, 1])), first[[2, 1]], "selected rows vs batch", 1e-5)
    committed = ours.commit(canvas, cache)
    close(committed, torch.cat([r.encode(canvas[i:i + 1]) for i, r in enumerate(refs)]), "commit, batched", 1e-4)
    close(ours.step(second, cache), torch.cat([r.denoise(second[i:i + 1]) for i, r in enumerate(refs)]),
          "second canvas, batched vs alone", 1e-4)


def test_prefill_step_is_one_pass_of_prefill_then_step(reference, ours, close):
    torch.manual_seed(3)
    lengths = [11, 6]
    prompts = [ids(1, n) for n in lengths]
    batch = torch.cat([torch.cat([ids(1, 11 - n), p], 1) for p, n in zip(prompts, lengths)])
    canvas, second = ids(2, C), ids(2, C)
    refs = [Reference(reference) for _ in lengths]
    for r, p in zip(refs, prompts):
        r.encode(p)
    cache, first = ours.prefill_step(batch, canvas, lengths)
    close(first, torch.cat([r.denoise(canvas[i:i + 1]) for i, r in enumerate(refs)]), "prefill_step", 1e-4)
    assert cache.length == 11
    for i, r in enumerate(refs):
        r.encode(canvas[i:i + 1])
    cache, logits = ours.prefill_step(canvas, second, cache=cache, self_conditioning=first)
    close(logits, torch.cat([r.denoise(second[i:i + 1], first[i:i + 1]) for i, r in enumerate(refs)]),
          "commit + self-conditioned step in one pass", 1e-4)
    assert cache.length == 11 + C


def test_bfloat16_matches_transformers_in_bfloat16(reference, saved, close):
    """Both in bf16 on the CPU, the same rounding points (norms in float32, RoPE and attention
    in bf16, logits in float32): what remains is the order of bf16 sums."""
    ours = load_quietly(saved, dtype=torch.bfloat16)
    assert ours.embed_tokens.weight.dtype == ours.layers[0].experts.down_proj.dtype == torch.bfloat16
    theirs = transformers.DiffusionGemmaForBlockDiffusion.from_pretrained(saved, dtype=torch.bfloat16).eval()
    torch.manual_seed(4)
    prompt, canvas = ids(1, 12), ids(1, C)
    ref = Reference(theirs)
    ref.encode(prompt)
    cache, _ = ours.prefill(prompt)
    first = ref.denoise(canvas)
    close(ours.step(canvas, cache), first, "bf16 step", 0.01 * first.abs().max().item())
    close(ours.step(canvas, cache, self_conditioning=first.bfloat16()), ref.denoise(canvas, first.bfloat16()),
          "bf16 self-conditioned step", 0.01 * first.abs().max().item())


def test_experts_grouped_and_looped_match_a_per_token_loop(ours, close, monkeypatch):
    experts: Experts = ours.layers[0].experts
    torch.manual_seed(5)
    x = torch.randn(20, 48)
    expert, weight = ours.layers[0].router(x)
    expected = torch.zeros_like(x)
    for n in range(20):
        for a in range(expert.shape[1]):
            e = expert[n, a]
            gate, up = (experts.gate_up_proj[e] @ x[n]).chunk(2)
            hidden = torch.nn.functional.gelu(gate, approximate="tanh") * up
            expected[n] += weight[n, a] * (experts.down_proj[e] @ hidden)
    close(experts(x, expert, weight), expected, "grouped_mm vs per-token loop", 1e-5)
    monkeypatch.delattr(torch.nn.functional, "grouped_mm")   # the path for CUDA float32 and torch < 2.10
    close(experts(x, expert, weight), expected, "per-expert loop vs per-token loop", 1e-5)
    ends = torch.tensor([3, 3, 5], dtype=torch.int32)
    assert grouped_linear(torch.randn(5, 4), torch.randn(3, 2, 4), ends).shape == (5, 2)


def test_gemma4_spelling_of_the_full_attention_shape():
    """Gemma-4 configs say global_head_dim / num_global_key_value_heads; transformers writes a
    per_layer_config. Both read the same; absent both, full layers get transformers' head dim 512."""
    ours = DiffusionGemmaConfig.from_dict({"text_config": TEXT, "canvas_length": C})
    theirs = json.loads(transformers.DiffusionGemmaConfig(text_config=TEXT, canvas_length=C).to_json_string())
    assert "per_layer_config" in theirs["text_config"]
    with pytest.warns(UserWarning, match="vision tower is ignored"):
        assert DiffusionGemmaConfig.from_dict(theirs) == ours
    bare = {k: v for k, v in TEXT.items() if k not in ("global_head_dim", "num_global_key_value_heads")}
    c = DiffusionGemmaConfig.from_dict({"text_config": bare})
    assert (c.global_head_dim, c.num_global_key_value_heads, c.block_size) == (512, 2, 256)
    with pytest.raises(CheckpointError, match="rope_type 'yarn'"):
        DiffusionGemmaConfig.from_dict({"text_config": {**TEXT, "rope_parameters": {
            "full_attention": {"rope_type": "yarn"}, "sliding_attention": {"rope_type": "default"}}}})


def test_the_vision_tower_is_ignored_with_a_notice(saved):
    with pytest.warns(UserWarning, match="vision tower is ignored") as notices:
        load_model(saved)
    assert notices[0].filename == __file__   # the line that loaded it (it had named checkpoint.py)


def test_tokenizer_and_chat_template(saved, tmp_path):
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models

    shutil.copytree(saved, tmp_path, dirs_exist_ok=True)
    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, **{f"w{i}": i for i in range(3, 50)}}
    HFTokenizer(models.WordLevel(vocab, unk_token="<pad>")).save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    model = load_quietly(tmp_path)
    assert model.tokenizer.chat_template == "{{ messages }}" and model.tokenizer.token_to_id("w7") == 7


def edited(saved, tmp_path, fn):
    shutil.copytree(saved, tmp_path, dirs_exist_ok=True)
    tensors = dict(load_file(tmp_path / "model.safetensors"))
    fn(tensors)
    save_file(tensors, tmp_path / "model.safetensors")
    return tmp_path


def test_missing_tensor(saved, tmp_path):
    path = edited(saved, tmp_path, lambda t: t.pop("model.decoder.layers.1.router.proj.weight"))
    with pytest.raises(CheckpointError, match=r"missing tensors \['model.decoder.layers.1.router.proj.weight'\]"):
        load_quietly(path)


def test_missing_encoder_layer_scalar(saved, tmp_path):
    path = edited(saved, tmp_path, lambda t: t.pop("model.encoder.language_model.layers.2.layer_scalar"))
    with pytest.raises(CheckpointError, match=r"missing tensors \['model.encoder.language_model.layers.2.layer_scal"):
        load_quietly(path)


def test_wrong_shape(saved, tmp_path):
    name = "model.decoder.layers.3.self_attn.k_proj.weight"
    path = edited(saved, tmp_path, lambda t: t.update({name: torch.zeros(64, 48)}))
    with pytest.raises(CheckpointError, match=rf"model.safetensors: tensor {name} has shape \(64, 48\), "
                                              r"but config.json implies \(32, 48\)"):
        load_quietly(path)


def test_unexpected_tensor(saved, tmp_path):
    path = edited(saved, tmp_path, lambda t: t.update({"model.decoder.layers.7.mlp.up_proj.weight": torch.zeros(2)}))
    with pytest.raises(CheckpointError, match=r"unexpected tensors \['model.decoder.layers.7.mlp.up_proj.weight'\]"):
        load_quietly(path)


def test_eos_outside_the_vocabulary(saved, tmp_path):
    shutil.copytree(saved, tmp_path, dirs_exist_ok=True)
    config = json.loads((tmp_path / "config.json").read_text())
    config["text_config"]["eos_token_id"] = [1, 99, V]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=rf"config.json: eos_token_id={V} is outside the vocabulary of {V}"):
        load_quietly(tmp_path)


def test_corrupt_file(saved, tmp_path):
    shutil.copytree(saved, tmp_path, dirs_exist_ok=True)
    data = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"model.safetensors: not a readable safetensors file"):
        load_quietly(tmp_path)


def test_encoder_spelling_of_the_shared_weights(saved, tmp_path, ours, close):
    """The shared stack stored under the encoder's names instead of the decoder's loads alike."""
    def respell(t):
        for k in [k for k in t if k.startswith("model.decoder.") and "self_conditioning" not in k
                  and not k.endswith("layer_scalar")]:
            t[k.replace("model.decoder.", "model.encoder.language_model.")] = t.pop(k)
    model = load_quietly(edited(saved, tmp_path, respell))
    prompt, canvas = ids(1, 10), ids(1, C)
    close(model.step(canvas, model.prefill(prompt)[0]), ours.step(canvas, ours.prefill(prompt)[0]),
          "encoder-spelled checkpoint", 1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_the_cpu_float32_reference(tmp_path, close, no_tf32):
    """Run with `pytest -m gpu tests/engine/test_diffusion_gemma.py` on a machine with CUDA.

    float32 on CUDA (TF32 off; grouped_mm is bf16-only there, so the per-expert loop runs) is the
    CPU computation; bf16 on CUDA stays near transformers' float32 CPU logits. Top-k routing is a
    step function that bf16 rounding can flip outright, so this checkpoint routes every token
    through all its experts."""
    reference = reference_model(top_k_experts=TEXT["num_experts"])
    reference.save_pretrained(tmp_path)
    torch.manual_seed(6)
    lengths = [13, 5]
    batch, canvas = ids(2, 13), ids(2, C)
    refs = [Reference(reference) for _ in lengths]
    for i, (r, n) in enumerate(zip(refs, lengths)):
        r.encode(batch[i:i + 1, 13 - n:])
    first = torch.cat([r.denoise(canvas[i:i + 1]) for i, r in enumerate(refs)])
    again = torch.cat([r.denoise(canvas[i:i + 1], first[i:i + 1]) for i, r in enumerate(refs)])
    scale = first.abs().max().item()
    # bf16 on the CPU, same inputs: max diff 0.099 of logits up to 3.1 (mean 0.02)
    for dtype, atol in ((torch.float32, 1e-4), (torch.bfloat16, 0.1 * scale)):
        model = load_quietly(tmp_path, device="cuda", dtype=dtype)
        cache, _ = model.prefill(batch.cuda(), lengths)
        close(model.step(canvas.cuda(), cache).cpu(), first, f"CUDA {dtype} step vs CPU float32 transformers", atol)
        sc = first.cuda().to(dtype)
        close(model.step(canvas.cuda(), cache, self_conditioning=sc).cpu(), again,
              f"CUDA {dtype} self-conditioned step vs CPU float32 transformers", atol)
