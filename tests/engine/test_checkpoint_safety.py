"""Damaged and mismatched checkpoints of both families (Clover, DiffusionGemma): each is a
CheckpointError naming the file and the tensor; loading never unpickles and never opens a
socket. The DiffusionGemma directories are written here from our own module (no transformers)."""

import json
import pickle
import re
import socket
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import clover_struct
from clover_struct import CheckpointError, extract, load_model
from clover_struct.engine.checkpoint import save_model
from clover_struct.engine.diffusion_gemma import DiffusionGemma, checkpoint_names
from clover_struct.engine.diffusion_gemma_config import DiffusionGemmaConfig
from tiny_models import tiny_model

GEMMA_TEXT = dict(vocab_size=128, hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, global_head_dim=32, num_global_key_value_heads=1,
                  sliding_window=8, num_experts=4, top_k_experts=2, moe_intermediate_size=16,
                  max_position_embeddings=512, layer_types=["sliding_attention", "full_attention"])


def save_gemma(path: Path, tokenizer=None) -> Path:
    """A random DiffusionGemma directory in transformers' layout: config.json with text_config,
    every tensor under its checkpoint name."""
    config = {"model_type": "diffusion_gemma", "text_config": dict(GEMMA_TEXT), "canvas_length": 8}
    torch.manual_seed(0)
    model = DiffusionGemma(DiffusionGemmaConfig.from_dict(config))
    tensors = {checkpoint_names(k)[0]: torch.randn_like(v) * 0.1 for k, v in model.state_dict().items()}
    path.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(config))
    if tokenizer is not None:
        tokenizer.save(path / "tokenizer.json")
    return path


@pytest.fixture(params=["clover", "gemma"])
def family(request):
    return request.param


@pytest.fixture
def saved(family, tmp_path, toy_tokenizer):
    if family == "gemma":
        return save_gemma(tmp_path / "gemma", toy_tokenizer)
    return save_model(tiny_model(toy_tokenizer), tmp_path / "clover")


def edit_config(path: Path, **changes):
    config = json.loads((path / "config.json").read_text())
    (config.get("text_config") or config).update(changes)
    (path / "config.json").write_text(json.dumps(config))


def replace_tensor(path: Path, make):
    """Replace the checkpoint's first norm weight by make(tensor); returns its name."""
    tensors = dict(load_file(path / "model.safetensors"))
    name = next(k for k in sorted(tensors) if k.endswith("norm.weight"))
    tensors[name] = make(tensors[name])
    save_file(tensors, str(path / "model.safetensors"))
    return name


def test_both_families_load(saved):
    assert load_model(saved).source == str(saved)


@pytest.mark.parametrize("cut", ["header length", "header", "data", "last byte"])
def test_truncated_weights_name_the_file(saved, cut):
    data = (saved / "model.safetensors").read_bytes()
    header = 8 + int.from_bytes(data[:8], "little")
    keep = {"header length": 5, "header": header // 2, "data": (header + len(data)) // 2, "last byte": len(data) - 1}
    (saved / "model.safetensors").write_bytes(data[:keep[cut]])
    with pytest.raises(CheckpointError, match=re.escape(str(saved / "model.safetensors"))):
        load_model(saved)


@pytest.mark.parametrize("damage", ["header bytes", "header length", "zeros"])
def test_corrupt_weights_name_the_file(saved, damage):
    data = bytearray((saved / "model.safetensors").read_bytes())
    if damage == "header bytes":
        data[8:40] = b"\xff" * 32
    elif damage == "header length":
        data[:8] = (1 << 40).to_bytes(8, "little")
    else:
        data[:] = bytes(len(data))
    (saved / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="model.safetensors: not a readable safetensors file"):
        load_model(saved)


def test_a_tensor_of_the_wrong_shape_is_named_with_its_file(saved):
    name = replace_tensor(saved, lambda t: torch.zeros(t.shape[0] + 1))
    with pytest.raises(CheckpointError, match=rf"model.safetensors: tensor {re.escape(name)} has shape"):
        load_model(saved)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.bool, torch.float8_e4m3fn])
def test_a_tensor_of_the_wrong_dtype_is_named_with_its_file(saved, dtype):
    name = replace_tensor(saved, lambda t: t.to(dtype))
    short = str(dtype).removeprefix("torch.")
    with pytest.raises(CheckpointError, match=rf"model.safetensors: tensor {re.escape(name)} has dtype {short}"):
        load_model(saved)


def test_a_tensor_of_nan_values_is_named_with_its_file(saved):
    name = replace_tensor(saved, lambda t: t.masked_fill(torch.arange(t.numel()).view(t.shape) % 7 == 3, torch.nan))
    with pytest.raises(CheckpointError, match=f"model.safetensors: tensor {re.escape(name)} holds NaN"):
        load_model(saved)


def test_a_config_that_does_not_match_the_weights(saved):
    edit_config(saved, hidden_size=64)
    with pytest.raises(CheckpointError, match=r"model.safetensors: tensor \S+ has shape .* config.json implies"):
        load_model(saved)


@pytest.mark.parametrize("key, value", [("hidden_size", "48"), ("num_experts", 2.5), ("vocab_size", None),
                                        ("num_hidden_layers", "2"), ("rms_norm_eps", "tiny"), ("layer_types", "full"),
                                        ("pad_token_id", -1), ("max_position_embeddings", 0)])
def test_a_config_value_of_the_wrong_type_is_named_at_load(saved, key, value):
    edit_config(saved, **{key: value})
    with pytest.raises(CheckpointError, match=re.escape(str(saved))) as e:
        load_model(saved)
    assert key in str(e.value) and "expected" in str(e.value) or value is None


@pytest.mark.parametrize("family, key, value", [
    ("clover", "block_size", -5), ("clover", "partial_rotary_factor", 2), ("clover", "tie_word_embeddings", "no"),
    ("gemma", "sliding_window", 0), ("gemma", "final_logit_softcapping", "x"), ("gemma", "canvas_length", -4),
    ("gemma", "canvas_length", 0), ("gemma", "rope_theta", 0), ("gemma", "rope_theta", -1.0)])
def test_a_value_no_model_can_have_is_named_at_load_not_at_the_first_record(saved, key, value):
    if key == "canvas_length":   # beside text_config
        config = json.loads((saved / "config.json").read_text())
        (saved / "config.json").write_text(json.dumps({**config, key: value}))
    elif key == "rope_theta":   # (a theta of 0 had loaded, and every logit was NaN)
        edit_config(saved, rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": value},
                                            "full_attention": {"rope_type": "default", "rope_theta": 1e4}})
    else:
        edit_config(saved, **{key: value})
    with pytest.raises(CheckpointError, match=f"{key} "):
        load_model(saved)


@pytest.mark.parametrize("given", [{"rope_type": "default", "rope_theta": 5e4},   # flat: transformers' KeyError
                                   {"sliding_attention": {"rope_type": "default", "rope_theta": 5e4}}])
def test_rope_parameters_without_an_entry_per_layer_type_are_refused(tmp_path, toy_tokenizer, given):
    """They had loaded with 10000 for the user's theta (a different network, no word said)."""
    saved = save_gemma(tmp_path / "gemma", toy_tokenizer)
    edit_config(saved, rope_parameters=given)
    with pytest.raises(CheckpointError, match="rope_parameters has no entry for the (full|sliding)_attention layers"):
        load_model(saved)


def test_a_legacy_rope_scaling_is_named_by_its_type(tmp_path, toy_tokenizer):
    saved = save_model(tiny_model(toy_tokenizer), tmp_path)
    edit_config(saved, rope_scaling={"type": "yarn", "factor": 4.0})
    with pytest.raises(CheckpointError, match="rope type 'yarn' is not supported"):
        load_model(saved)


def test_weights_past_the_range_of_the_dtype_asked_for_are_refused(saved):
    name = replace_tensor(saved, lambda t: t.clone().fill_(1e5))   # finite in float32, infinite in float16
    load_model(saved)
    with pytest.raises(CheckpointError, match=f"tensor {re.escape(name)} holds values past float16's range"):
        load_model(saved, dtype=torch.float16)


def test_a_model_whose_logits_are_nan_stops_the_run(saved, family):
    """Weights that load (finite) but overflow in the forward pass: a CheckpointError, not records
    of NaN confidence."""
    replace_tensor(saved, lambda t: t.clone().fill_(3e38))
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    with pytest.raises(CheckpointError, match="logits are NaN or infinite"):
        extract("n is 3", schema, model=load_model(saved))


def test_an_index_that_names_no_tensors_is_blamed(tmp_path, toy_tokenizer):
    path = save_model(tiny_model(toy_tokenizer), tmp_path, max_shard_bytes=4096)
    (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {}}))
    with pytest.raises(CheckpointError, match="index.json: its weight_map names no tensors"):
        load_model(path)


@pytest.mark.parametrize("config", [{"model_type": ["clover"]}, {"architectures": 5}, {"architectures": [{"a": 1}]}])
def test_a_family_named_by_a_value_of_the_wrong_kind_is_refused(saved, config):
    (saved / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="is not a family clover-struct reads"):
        load_model(saved)


def test_more_layers_than_the_weights_hold_is_refused_before_the_model_is_built(saved):
    edit_config(saved, num_hidden_layers=10**12, layer_types=None)   # (10**8 had taken minutes: a config first)
    with pytest.raises(CheckpointError, match="num_hidden_layers is 1000000000000, but the weights hold"):
        load_model(saved)


def test_a_tokenizer_larger_than_the_vocabulary(saved, family):
    edit_config(saved, vocab_size=100)    # the toy tokenizer has 105 tokens
    with pytest.raises(CheckpointError, match="tokenizer.json has 105 tokens but config.json vocab_size is 100"):
        load_model(saved)


@pytest.mark.parametrize("name, text", [("tokenizer.json", "{}"), ("tokenizer_config.json", "{not json"),
                                        ("tokenizer_config.json", '{"mask_token": {"id": 3}}')])
def test_an_unreadable_tokenizer_file(saved, name, text):
    (saved / name).write_text(text)
    with pytest.raises(CheckpointError, match=re.escape(str(saved / name))):
        load_model(saved)


def test_a_tokenizer_whose_mask_token_is_not_the_configs(tmp_path, toy_tokenizer, make_toy_tokenizer):
    path = save_model(tiny_model(toy_tokenizer), tmp_path)
    other = make_toy_tokenizer(["<|endoftext|>", "<|pad|>", "<|mask|>"])   # mask and pad swapped
    other.save(path / "tokenizer.json")
    with pytest.raises(CheckpointError, match=r"tokenizer.json: its mask token is id 104, but config.json says "
                                              r"mask_token_id=103: the tokenizer belongs to another model"):
        load_model(path)


def test_a_special_id_the_tokenizer_spells_as_text_is_refused(saved, family):
    """pad_token_id=3 ('!' in the tokenizer) had loaded, and records came out of stray text."""
    edit_config(saved, pad_token_id=3)
    with pytest.raises(CheckpointError, match=r"config.json: pad_token_id=3 is '.' in tokenizer.json, not a special "
                                              r"token: the tokenizer belongs to another model"):
        load_model(saved)


def test_a_pad_that_is_the_mask_is_refused_at_load(tmp_path, toy_tokenizer):
    path = save_model(tiny_model(toy_tokenizer), tmp_path)
    mask = json.loads((path / "config.json").read_text())["mask_token_id"]
    edit_config(path, pad_token_id=mask)   # (extract had then asked for arguments it does not take)
    with pytest.raises(CheckpointError, match=rf"pad_token_id and mask_token_id are both {mask}"):
        load_model(path)


def test_a_quantized_checkpoint_is_named_so(saved):
    edit_config(saved, quantization_config={"quant_method": "fp8"})
    config = json.loads((saved / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "fp8"}   # where transformers writes it: the top level
    (saved / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="a quantized checkpoint .quant_method fp8.*unquantized"):
        load_model(saved)


def test_a_family_named_only_by_its_architecture_loads(tmp_path, toy_tokenizer):
    path = save_model(tiny_model(toy_tokenizer), tmp_path, model_type="qwen3_5_moe_text")
    config = json.loads((path / "config.json").read_text())
    del config["model_type"]   # the README: the family from model_type, or architectures
    (path / "config.json").write_text(json.dumps(config))
    assert load_model(path).config.num_hidden_layers == config["num_hidden_layers"]


def test_one_weight_stored_under_two_spellings_is_refused(tmp_path, toy_tokenizer):
    """model.embed_tokens beside model.language_model.embed_tokens: one had silently won."""
    path = save_model(tiny_model(toy_tokenizer), tmp_path)
    tensors = dict(load_file(path / "model.safetensors"))
    tensors["model.language_model.embed_tokens.weight"] = tensors["model.embed_tokens.weight"] * 7
    save_file(tensors, str(path / "model.safetensors"))
    with pytest.raises(CheckpointError, match="are one weight spelt two ways"):
        load_model(path)
    fused = save_model(tiny_model(toy_tokenizer), tmp_path / "fused")
    tensors = dict(load_file(fused / "model.safetensors"))
    per_expert = dict(load_file(save_model(tiny_model(toy_tokenizer), tmp_path / "per", layout="per_expert")
                                / "model.safetensors"))
    tensors.update({k: v for k, v in per_expert.items() if ".experts.0." in k or ".experts." in k})
    save_file(tensors, str(fused / "model.safetensors"))
    with pytest.raises(CheckpointError, match="is stored fused and per expert too"):
        load_model(fused)


def test_the_weights_are_not_the_files_pages(tmp_path, toy_tokenizer):
    """A checkpoint copied over a loaded model's files had changed its weights, or killed the
    process with SIGBUS (the weights were the file's memory-mapped pages)."""
    path = save_model(tiny_model(toy_tokenizer), tmp_path)
    model = load_model(path)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    tensors = dict(load_file(path / "model.safetensors"))
    save_file({k: v + 1 for k, v in tensors.items()}, str(tmp_path / "other.safetensors"))
    with open(path / "model.safetensors", "r+b") as f:   # rewritten in place, as cp does
        f.write((tmp_path / "other.safetensors").read_bytes())
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_a_token_id_outside_the_vocabulary(saved, family):
    key = "mask_token_id" if family == "clover" else "pad_token_id"
    edit_config(saved, **{key: 500})
    with pytest.raises(CheckpointError, match=rf"config.json: {key}=500 is outside the vocabulary of \d+"):
        load_model(saved)


def test_a_model_without_tokenizer_loads_and_extraction_names_the_missing_file(tmp_path, toy_tokenizer):
    path = save_model(tiny_model(toy_tokenizer), tmp_path)
    (path / "tokenizer.json").unlink()
    model = load_model(path)
    with pytest.raises(CheckpointError, match=re.escape(str(path / "tokenizer.json")) + ": no tokenizer"):
        extract("x", {"type": "object", "properties": {"a": {"type": "boolean"}}}, model=model)


def test_experts_beyond_the_config_are_unexpected(tmp_path, toy_tokenizer):
    path = save_model(tiny_model(toy_tokenizer), tmp_path, layout="per_expert")
    tensors = dict(load_file(path / "model.safetensors"))
    up = tensors["model.layers.0.mlp.experts.0.up_proj.weight"]
    extra = {"model.layers.0.mlp.experts.4.up_proj.weight": up.clone(),   # the config says 4 experts
             "model.layers.9.mlp.experts.0.up_proj.weight": up.clone()}   # and 4 layers
    for name, t in extra.items():
        save_file({**tensors, name: t}, str(path / "model.safetensors"))
        with pytest.raises(CheckpointError, match=rf"unexpected tensors \['{re.escape(name)}'\]"):
            load_model(path)
    tensors["model.layers.1.mlp.experts.2.down_proj.weight"] = torch.zeros(3, 3)
    save_file(tensors, str(path / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"tensor model.layers.1.mlp.experts.2.down_proj.weight has shape \(3, 3\)"):
        load_model(path)


def test_shards_are_files_beside_the_index_and_hold_a_tensor_once(tmp_path, toy_tokenizer):
    path = save_model(tiny_model(toy_tokenizer), tmp_path, max_shard_bytes=4096)
    index = json.loads((path / "model.safetensors.index.json").read_text())
    first = next(iter(index["weight_map"]))
    (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {**index["weight_map"],
                                                                                  first: "../outside.safetensors"}}))
    with pytest.raises(CheckpointError, match="lists '../outside.safetensors', which is not a file name in"):
        load_model(path)
    (path / "model.safetensors.index.json").write_text(json.dumps(index))
    shards = sorted(path.glob("model-*.safetensors"))
    a, b = dict(load_file(shards[0])), dict(load_file(shards[1]))
    save_file({**b, next(iter(a)): next(iter(a.values()))}, str(shards[1]))
    with pytest.raises(CheckpointError, match=f"tensor {re.escape(next(iter(a)))} is also in {shards[0].name}"):
        load_model(path)


def every_kind(tmp_path, tokenizer):
    """A directory of each kind load_model reads: Clover fused, per-expert, sharded, tied; DiffusionGemma;
    the embedded clover-mini."""
    model = tiny_model(tokenizer)
    dirs = [save_model(model, tmp_path / "fused"), save_model(model, tmp_path / "experts", layout="per_expert"),
            save_model(model, tmp_path / "shards", max_shard_bytes=4096), save_gemma(tmp_path / "gemma", tokenizer)]
    model.config.tie_word_embeddings = True
    dirs.append(save_model(model, tmp_path / "tied"))
    return dirs + [Path(clover_struct.__file__).parent / "models" / "clover-mini"]


def test_loading_never_unpickles(tmp_path, toy_tokenizer, monkeypatch):
    dirs = every_kind(tmp_path, toy_tokenizer)

    def refuse(*args, **kwargs):
        raise AssertionError("something tried to unpickle")
    for owner, name in [(pickle, "load"), (pickle, "loads"), (pickle, "Unpickler"), (torch, "load"),
                        (torch.serialization, "load"), (np, "load")]:
        monkeypatch.setattr(owner, name, refuse)
    for path in dirs:
        load_model(path)


def test_the_package_has_no_unpickling_code():
    root = Path(clover_struct.__file__).parent
    code = re.compile(r"\bimport pickle\b|\bfrom pickle\b|pickle\.loads?\(|torch\.load\(|Unpickler|"
                      r"allow_pickle=True|weights_only=False|\bimport dill\b|\bjoblib\b")
    hits = [f"{f.relative_to(root)}:{n}" for f in root.rglob("*.py")
            for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if code.search(line)]
    assert hits == []


def test_loading_and_extracting_never_open_a_socket(tmp_path, toy_tokenizer, monkeypatch):
    dirs = every_kind(tmp_path, toy_tokenizer)

    class NoSocket(socket.socket):
        def __init__(self, *args, **kwargs):
            raise AssertionError("something tried to open a socket")

    def refuse(*args, **kwargs):
        raise AssertionError("something tried to reach the network")
    monkeypatch.setattr(socket, "socket", NoSocket)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    models = [load_model(path) for path in dirs]
    schema = {"type": "object", "properties": {"kind": {"enum": ["circle", "polygon"]}}, "required": ["kind"]}
    assert set(extract("a circle", schema, model=models[0])) == {"kind"}
    assert set(extract("a circle", schema, model=models[-1])) == {"kind"}


@pytest.mark.parametrize("path, options, message", [
    (123, {}, "takes the path of a model directory, not a int"),
    ("", {}, "not an empty one"),   # Path("") is the current folder
    (None, {"dtype": torch.int8}, "not one the engine computes in"),
    (None, {"dtype": "int8"}, "not one the engine computes in"),
    (None, {"dtype": 5}, "not one the engine computes in"),
    (None, {"dtype": torch.float64}, "not one the engine computes in"),   # (had failed at the first record)
    (None, {"dtype": torch.float8_e4m3fn}, "not one the engine computes in"),
    (None, {"device": "meta"}, "cannot run a model"),
])
def test_load_model_arguments_are_usage_errors(path, options, message):
    with pytest.raises(clover_struct.UsageError, match=message):
        load_model(path, **options)


def test_a_path_the_system_cannot_read_is_a_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="cannot be read .*check the path"):
        load_model(tmp_path / ("a" * 300))   # a name too long (a raw OSError before)


def test_a_dtype_may_be_named():
    assert load_model(dtype="bfloat16").lm_head.weight.dtype == torch.bfloat16
