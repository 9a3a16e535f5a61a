"""Loading and saving model directories, and every error they can raise."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, pre_tokenizers

from clover_struct import CheckpointError, load_model
from clover_struct.engine.checkpoint import save_model
from clover_struct.engine.config import ModelConfig
from clover_struct.engine.tokenizer import Tokenizer


@pytest.fixture
def saved(tiny, tmp_path):
    save_model(tiny, tmp_path)
    return tmp_path


@pytest.mark.parametrize("layout,shard", [("fused", None), ("per_expert", None), ("fused", 4096),
                                          ("per_expert", 4096)])
def test_round_trip(tiny, tmp_path, close, layout, shard):
    save_model(tiny, tmp_path, layout=layout, max_shard_bytes=shard)
    assert (tmp_path / "model.safetensors.index.json").is_file() == bool(shard)
    loaded = load_model(tmp_path)
    ids = torch.randint(0, 64, (2, 20))
    close(loaded(ids, "block"), tiny(ids, "block"), f"{layout} reloaded", 0.0)
    assert loaded.config == tiny.config and loaded.source == str(tmp_path)


def test_dtype_and_tied_head(tiny, tmp_path):
    tiny.config.tie_word_embeddings = True
    save_model(tiny, tmp_path)
    assert "lm_head.weight" not in load_file(tmp_path / "model.safetensors")
    loaded = load_model(tmp_path, dtype=torch.bfloat16)
    assert loaded.lm_head.weight.dtype == torch.bfloat16
    assert loaded.lm_head.weight is loaded.model.embed_tokens.weight
    tensors = dict(load_file(tmp_path / "model.safetensors"))   # an output layer of its own beside tying: named
    save_file({**tensors, "lm_head.weight": tensors["model.embed_tokens.weight"].clone()},
              str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointError, match="an lm_head.weight beside tie_word_embeddings=true"):
        load_model(tmp_path)


def edit_tensors(path, fn):
    tensors = dict(load_file(path / "model.safetensors"))
    fn(tensors)
    save_file(tensors, path / "model.safetensors")


def test_missing_tensor(saved):
    edit_tensors(saved, lambda t: t.pop("model.layers.1.linear_attn.A_log"))
    with pytest.raises(CheckpointError, match=r"missing tensors \['model.layers.1.linear_attn.A_log'\]"):
        load_model(saved)


def test_unexpected_tensor(saved):
    edit_tensors(saved, lambda t: t.update({"model.layers.9.mlp.gate.weight": torch.zeros(4, 32)}))
    with pytest.raises(CheckpointError, match=r"unexpected tensors \['model.layers.9.mlp.gate.weight'\]"):
        load_model(saved)


def test_wrong_shape(saved):
    edit_tensors(saved, lambda t: t.update({"model.norm.weight": torch.zeros(31)}))
    with pytest.raises(CheckpointError, match=r"model.norm.weight has shape \(31,\).*implies \(32,\)"):
        load_model(saved)


def test_missing_expert(tiny, tmp_path):
    save_model(tiny, tmp_path, layout="per_expert")
    edit_tensors(tmp_path, lambda t: t.pop("model.layers.0.mlp.experts.3.up_proj.weight"))
    with pytest.raises(CheckpointError, match=r"experts.3.up_proj.*4 experts"):
        load_model(tmp_path)


def test_truncated_file(saved):
    data = (saved / "model.safetensors").read_bytes()
    (saved / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="model.safetensors.*truncated"):
        load_model(saved)


def test_garbage_file(saved):
    (saved / "model.safetensors").write_bytes(b"\x00" * 10)
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        load_model(saved)


def test_pickle_only_is_refused(saved):
    (saved / "model.safetensors").unlink()
    (saved / "pytorch_model.bin").write_bytes(b"whatever")
    with pytest.raises(CheckpointError, match="pickle weights.*never loaded"):
        load_model(saved)


def test_missing_shard(tiny, tmp_path):
    save_model(tiny, tmp_path, max_shard_bytes=4096)
    next(tmp_path.glob("model-00002-*.safetensors")).unlink()
    with pytest.raises(CheckpointError, match="lists model-00002.*missing"):
        load_model(tmp_path)


@pytest.mark.parametrize("text,message", [
    (None, "no config.json"),
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"model_type": "llama"}', "model_type 'llama' is not a family clover-struct reads"),
    ('{"model_type": "clover", "vocab_size": 10}', r"missing required keys \['hidden_size'"),
])
def test_bad_config(saved, text, message):
    if text is None:
        (saved / "config.json").unlink()
    else:
        (saved / "config.json").write_text(text)
    with pytest.raises(CheckpointError, match=message):
        load_model(saved)


def test_config_values_are_checked(saved):
    config = json.loads((saved / "config.json").read_text())
    for key, value, message in [("layer_types", ["linear_attention"], "layer_types has 1 entries"),
                                ("layer_types", ["mamba"] * 4, "unknown layer type 'mamba'"),
                                ("mask_token_id", 999, "mask_token_id=999 is outside the vocabulary")]:
        (saved / "config.json").write_text(json.dumps({**config, key: value}))
        with pytest.raises(CheckpointError, match=message):
            load_model(saved)


def test_not_a_directory(tmp_path):
    with pytest.raises(CheckpointError, match="not a model directory"):
        load_model(tmp_path / "nowhere")


def word_tokenizer(words):
    tok = HFTokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token=words[0]))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["<|mask|>", "<|pad|>"])
    return tok


def test_ids_come_from_the_tokenizer_when_config_has_none(tiny, tmp_path):
    tiny.config.mask_token_id = tiny.config.pad_token_id = None
    tiny.tokenizer = Tokenizer(word_tokenizer([f"w{i}" for i in range(40)]))
    save_model(tiny, tmp_path)
    loaded = load_model(tmp_path)
    assert (loaded.config.mask_token_id, loaded.config.pad_token_id) == (40, 41)
    assert loaded.tokenizer.encode("w3 w7") == [3, 7]


def test_tokenizer_larger_than_the_model(tiny, tmp_path):
    tiny.tokenizer = Tokenizer(word_tokenizer([f"w{i}" for i in range(90)]))
    save_model(tiny, tmp_path)
    with pytest.raises(CheckpointError, match="92 tokens but config.json vocab_size is 64"):
        load_model(tmp_path)


def test_bad_tokenizer_file(saved):
    (saved / "tokenizer.json").write_text("{}")
    with pytest.raises(CheckpointError, match="not a readable tokenizer.json"):
        load_model(saved)


def test_checkpoint_without_mask_token_loads_and_runs_causally(tiny, tmp_path):
    tiny.config.mask_token_id = None
    save_model(tiny, tmp_path)
    model = load_model(tmp_path)
    model(torch.zeros(1, 4, dtype=torch.long), "causal")
    with pytest.raises(ValueError, match="cannot denoise"):
        model(torch.zeros(1, 4, dtype=torch.long), "block")


def test_config_dict_round_trip(tiny):
    assert ModelConfig.from_dict(tiny.config.to_dict()) == tiny.config


def test_bad_or_missing_device(saved):
    with pytest.raises(ValueError, match="'nonsense' is not a torch device"):
        load_model(saved, device="nonsense")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="torch sees none"):
            load_model(saved, device="cuda")
