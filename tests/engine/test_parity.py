"""Causal logits against transformers' own Qwen3.5-MoE, loaded through our checkpoint code."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from clover_struct import load_model

transformers = pytest.importorskip("transformers", reason="transformers is a test extra: pip install -e .[test]")


@pytest.fixture(scope="module")
def reference():
    torch.manual_seed(0)
    config = transformers.Qwen3_5MoeTextConfig(
        vocab_size=101, hidden_size=48, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
        linear_value_head_dim=12, num_experts=6, num_experts_per_tok=2, moe_intermediate_size=16,
        shared_expert_intermediate_size=24, max_position_embeddings=512)
    assert config.layer_types.count("linear_attention") >= 2 and "full_attention" in config.layer_types
    model = transformers.Qwen3_5MoeForCausalLM(config).eval()
    with torch.no_grad():  # move every parameter off its init value (zero-centred norms, gates, A_log...)
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


def logits_of(model, ids):
    with torch.no_grad():
        return model(ids).logits


@pytest.mark.parametrize("fused", [False, True], ids=["per_expert", "fused"])
def test_causal_logits_match_transformers(reference, tmp_path, close, fused):
    reference.save_pretrained(tmp_path, save_original_format=not fused)
    names = load_file(tmp_path / "model.safetensors").keys()
    assert any(".experts.0.gate_proj." in n for n in names) != fused
    ours = load_model(tmp_path)
    assert ours.tokenizer is None
    ids = torch.randint(0, 101, (3, 75))  # more than one 64-token DeltaNet chunk
    close(ours(ids, "causal"), logits_of(reference, ids), f"logits ({'fused' if fused else 'per-expert'})", 1e-4)


def test_language_model_prefix_and_nested_config(reference, tmp_path, close):
    reference.save_pretrained(tmp_path, save_original_format=False)
    tensors = load_file(tmp_path / "model.safetensors")
    prefixed = {k.replace("model.", "model.language_model.", 1): v for k, v in tensors.items()}
    prefixed["mtp.fc.weight"] = torch.zeros(2, 2)  # multi-token-prediction weights are ignored
    save_file(prefixed, tmp_path / "model.safetensors")
    text = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "qwen3_5_moe", "text_config": text, "mask_token_id": 7}))
    ours = load_model(tmp_path)
    assert ours.config.mask_token_id == 7
    ids = torch.randint(0, 101, (2, 30))
    close(ours(ids), logits_of(reference, ids), "logits (prefixed, nested config)", 1e-4)


@pytest.mark.parametrize("layout", ["fused", "per_expert"])
def test_our_checkpoint_loads_in_transformers(tmp_path, close, layout):
    from clover_struct.engine.checkpoint import save_model
    from clover_struct.engine.config import preset
    from clover_struct.engine.model import CloverModel

    torch.manual_seed(0)
    ours = CloverModel(preset("tiny", vocab_size=90, mask_token_id=3)).init_weights(std=0.1).eval()
    save_model(ours, tmp_path, layout=layout, model_type="qwen3_5_moe_text")
    theirs = transformers.Qwen3_5MoeForCausalLM.from_pretrained(tmp_path).eval()
    ids = torch.randint(0, 90, (2, 40))
    close(logits_of(theirs, ids), ours(ids, "causal"), f"transformers on our {layout} save", 1e-4)
    assert load_model(tmp_path).config == ours.config
