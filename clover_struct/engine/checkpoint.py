"""Hugging Face style model directories: load and save.

A directory holds `config.json`, `model.safetensors` (or shards listed in
`model.safetensors.index.json`) and optionally `tokenizer.json`. Only
safetensors is read (memory-mapped; nothing is unpickled, nothing downloaded).
`load_model` picks the family from config.json (`FAMILIES`, by `model_type`, else
by `architectures`) and hands the directory to that family's loader.

The Clover family's loader is here: checkpoint names map onto module names through
the tables below; experts may be stored fused or one tensor per expert, under an
optional `model.language_model.` prefix. Every key, shape and dtype is checked, and an
error names the file and tensor and says what was expected. Whatever else goes wrong
while a family's loader runs is a CheckpointError naming the directory: nothing but a
CloverError leaves `load_model`.
"""

from __future__ import annotations

import importlib
import json
import re
from collections import defaultdict
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from .config import ModelConfig
from .errors import CheckpointError, CloverError, UsageError
from .model import CloverModel
from .tokenizer import Tokenizer

# The families load_model reads: config.json's model_type (or an entry of its
# architectures) -> "module:function" under engine/, called as function(root, config
# dict, device, dtype). A new family is a module and a row.
FAMILIES = {"clover": "checkpoint:load_clover", "qwen3_5_moe_text": "checkpoint:load_clover",
            "qwen3_5_moe": "checkpoint:load_clover", "diffusion_gemma": "diffusion_gemma:load"}
ARCHITECTURES = {"Qwen3_5MoeForCausalLM": "qwen3_5_moe_text", "Qwen3_5MoeForConditionalGeneration": "qwen3_5_moe",
                 "DiffusionGemmaForBlockDiffusion": "diffusion_gemma"}

# Prefixes that official multimodal checkpoints put in front of the text model.
PREFIXES = {"model.language_model.": "model.", "language_model.model.": "model.",
            "language_model.lm_head.": "lm_head."}
# Tensors that belong to other parts of such checkpoints (vision tower, multi-token prediction).
IGNORED = re.compile(r"^(mtp\.|model\.visual\.|visual\.)")
PER_EXPERT = re.compile(r"^model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")
FUSED = "model.layers.{}.mlp.experts.{}"  # + gate_up_proj [E, 2I, D] (gate rows first) / down_proj [E, D, I]


def weight_files(root: Path) -> list[Path]:
    index = root / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            names = list(dict.fromkeys(weight_map.values()))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
            raise CheckpointError(f"{index}: not a valid index (needs a 'weight_map' object): {e}") from e
        if not names:
            raise CheckpointError(f"{index}: its weight_map names no tensors; copy the checkpoint's index again")
        for name in names:
            if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
                raise CheckpointError(f"{index} lists {name!r}, which is not a file name in {root}; an index "
                                      "names the shard files beside it")
        files = [root / name for name in names]
        for f in files:
            if not f.is_file():
                raise CheckpointError(f"{index} lists {f.name}, which is missing from {root}")
        return files
    single = root / "model.safetensors"
    if single.is_file():
        return [single]
    if any(root.glob("*.bin")) or any(root.glob("*.pt")) or any(root.glob("*.pth")):
        raise CheckpointError(f"{root}: only pickle weights (.bin/.pt) found; they are never loaded. "
                              "Convert them to safetensors (model.safetensors) first")
    raise CheckpointError(f"{root}: no model.safetensors or model.safetensors.index.json")


def open_tensors(files: list[Path]) -> dict[str, tuple[Path, object]]:
    """Checkpoint name -> (file, open handle); tensors are fetched lazily (memory-mapped)."""
    found = {}
    for f in files:
        try:
            f.open("rb").close()   # (safetensors says "No such file" of a file it may not read)
        except OSError as e:
            raise CheckpointError(f"{f}: cannot be opened ({e.strerror or e}); check that it is a file you may "
                                  "read") from e
        try:
            handle = safe_open(str(f), framework="pt", device="cpu")
        except (SafetensorError, OSError) as e:
            raise CheckpointError(f"{f}: not a readable safetensors file ({e}); "
                                  "it may be truncated or corrupt: copy or convert it again") from e
        for key in handle.keys():
            if key in found:
                raise CheckpointError(f"{f}: tensor {key} is also in {found[key][0].name}; a tensor is stored "
                                      "once: drop one copy")
            found[key] = (f, handle)
    return found


def check_layers(found: dict, config: dict, source: str) -> None:
    """CheckpointError where config.json (its text_config, if any) counts more layers than the
    weights (open_tensors) hold, before its config or a model of that many is built (a count of
    100,000,000 would take minutes and gigabytes to say so)."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    layers = text.get("num_hidden_layers")
    if not isinstance(layers, int):   # (the config's own check names it)
        return
    found = {int(m[1]) for key in found if (m := re.search(r"(?:^|\.)layers\.(\d+)\.", key))}
    if layers > len(found):
        raise CheckpointError(f"{source}: num_hidden_layers is {layers}, but the weights hold {len(found)} layers; "
                              "fix num_hidden_layers")


def _canonical(key: str) -> str:
    for old, new in PREFIXES.items():
        if key.startswith(old):
            return new + key[len(old):]
    return key


def read_tensor(key: str, where) -> torch.Tensor:
    """A weight, checked to be floating point (every weight of every family is) and finite."""
    f, handle = where
    try:
        t = handle.get_tensor(key)
    except (SafetensorError, OSError, RuntimeError) as e:
        raise CheckpointError(f"{f}: tensor {key} cannot be read ({e}); the file may be truncated") from e
    if t.dtype not in (*DTYPES, torch.float64):
        raise CheckpointError(f"{f}: tensor {key} has dtype {str(t.dtype).removeprefix('torch.')}; weights are "
                              "floating point (float32, bfloat16, float16): this file holds quantized or other "
                              "data clover-struct does not read")
    # one float32 sum carries any NaN or infinity (2.3x faster than isfinite over a bfloat16 tensor);
    # only a sum that overflowed is checked value by value
    if not torch.isfinite(t.sum(dtype=torch.float32)) and not torch.isfinite(t).all():
        raise CheckpointError(f"{f}: tensor {key} holds NaN or infinite values; the file is damaged: copy or "
                              "convert it again")
    return t


def cast(key: str, t: torch.Tensor, device, dtype: torch.dtype, root: Path) -> torch.Tensor:
    """A weight moved to `device` in `dtype`, checked to stay finite (a weight of 1e5 is
    infinite in float16)."""
    out = t.to(device=device, dtype=dtype)
    if out.data_ptr() == t.data_ptr():   # still the file's mapped pages: a checkpoint copied over it would
        out = out.clone()                # change the weights of a running model, or kill it (SIGBUS)
    if out.dtype != t.dtype and not torch.isfinite(out.sum(dtype=torch.float32)) and not torch.isfinite(out).all():
        raise CheckpointError(f"{root}: tensor {key} holds values past {str(dtype).removeprefix('torch.')}'s range "
                              f"(up to {t.abs().max().item():.4g}); load the model in float32 or bfloat16")
    return out


def state_dict_from_files(files: list[Path], found: dict, model: CloverModel) -> dict[str, torch.Tensor]:
    """Read and map every tensor (`found`: open_tensors of `files`) onto the model's names, fusing
    per-expert tensors."""
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        expected.pop("lm_head.weight", None)
    out, experts, unexpected = {}, defaultdict(dict), []
    E = model.config.num_experts
    for key, where in found.items():
        name = _canonical(key)
        if IGNORED.match(name):
            continue
        if (m := PER_EXPERT.match(name)) and FUSED.format(m[1], "gate_up_proj") in expected and int(m[2]) < E:
            experts[int(m[1])][(int(m[2]), m[3])] = (key, where)
        elif name in expected:
            if name in out:   # model.embed_tokens beside model.language_model.embed_tokens
                raise CheckpointError(f"{files[0].parent}: tensors {out[name][0]} and {key} are one weight spelt "
                                      "two ways; a tensor is stored once: drop one copy")
            out[name] = (key, where)
        else:
            unexpected.append(key)
    if [_canonical(k) for k in unexpected] == ["lm_head.weight"] and model.config.tie_word_embeddings:
        raise CheckpointError(f"{files[0].parent}: an lm_head.weight beside tie_word_embeddings=true, which ties "
                              "the output to the embeddings; set tie_word_embeddings to false in config.json if "
                              "the weights hold their own output layer")
    if unexpected:
        raise CheckpointError(f"{files[0].parent}: unexpected tensors {unexpected[:5]}"
                              f"{' …' if len(unexpected) > 5 else ''}; they do not belong to a "
                              f"{model.config.num_hidden_layers}-layer model with layer types "
                              f"{sorted(set(model.config.layer_types))}")
    if both := [name for layer in experts if (name := FUSED.format(layer, "gate_up_proj")) in out]:
        raise CheckpointError(f"{files[0].parent}: {out[both[0]][0]} is stored fused and per expert too; a tensor "
                              "is stored once: drop one copy")
    tensors = {name: read_tensor(key, where) for name, (key, where) in out.items()}
    for layer, parts in experts.items():
        missing = [f"model.layers.{layer}.mlp.experts.{e}.{p}.weight" for e in range(E)
                   for p in ("gate_proj", "up_proj", "down_proj") if (e, p) not in parts]
        if missing:
            raise CheckpointError(f"{files[0].parent}: missing per-expert tensors {missing[:3]} "
                                  f"(config says {E} experts)")
        base = FUSED.format(layer, "")
        gate_up, down = expected[base + "gate_up_proj"], expected[base + "down_proj"]   # [E, 2I, D], [E, D, I]
        want = {"gate_proj": (gate_up[1] // 2, gate_up[2]), "up_proj": (gate_up[1] // 2, gate_up[2]),
                "down_proj": down[1:]}

        def get(e, p):
            key, where = parts[(e, p)]
            t = read_tensor(key, where)
            if tuple(t.shape) != want[p]:
                raise CheckpointError(f"{where[0]}: tensor {key} has shape {tuple(t.shape)}, but config.json "
                                      f"implies {want[p]}")
            return t
        tensors[base + "gate_up_proj"] = torch.stack([torch.cat([get(e, "gate_proj"), get(e, "up_proj")]) for e in range(E)])
        tensors[base + "down_proj"] = torch.stack([get(e, "down_proj") for e in range(E)])
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise CheckpointError(f"{files[0].parent}: missing tensors {missing[:5]}"
                              f"{' …' if len(missing) > 5 else ''}")
    for name, t in tensors.items():
        if tuple(t.shape) != expected[name]:   # (per-expert tensors were checked one by one)
            key, (f, _) = out[name]
            raise CheckpointError(f"{f}: tensor {key} has shape {tuple(t.shape)}, but config.json implies "
                                  f"{expected[name]}")
    return tensors


def read_config(root: Path) -> dict:
    """config.json of a model directory, as a dict; CheckpointError if missing or not JSON."""
    path = root / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{path}: no config.json; a model directory needs one "
                              "(save models with clover_struct.engine.checkpoint.save_model)")
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise CheckpointError(f"{path}: cannot be read ({e.strerror or e}); check that it is a file you may read") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path}: not valid JSON ({e}); copy the checkpoint again") from e
    if not isinstance(d, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    return d


def family_of(config: dict, source: str = "config.json") -> str:
    """The FAMILIES key of a config: its model_type, else the first architecture known."""
    model_type, architectures = config.get("model_type"), config.get("architectures")
    if isinstance(model_type, str) and model_type in FAMILIES:
        return model_type
    for arch in architectures if isinstance(architectures, list) else []:
        if isinstance(arch, str) and arch in ARCHITECTURES:
            return ARCHITECTURES[arch]
    raise CheckpointError(f"{source}: model_type {model_type!r} is not a family clover-struct reads; "
                          f"it reads {', '.join(sorted(FAMILIES))}")


DTYPES = (torch.float32, torch.bfloat16, torch.float16)   # what the engine's layers compute in


def torch_device(device=None, dtype=None) -> tuple[torch.device, torch.dtype]:
    """The device asked for (default cpu) and the dtype (default bf16 on CUDA, float32 elsewhere)."""
    try:
        device = torch.device(device or "cpu")
    except RuntimeError as e:
        raise UsageError(f"device {device!r} is not a torch device ({e}); use 'cpu' or 'cuda'") from None
    if device.type not in ("cpu", "cuda", "mps"):
        raise UsageError(f"device {device!r} cannot run a model; use 'cpu' or 'cuda'")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError("a CUDA device was asked for, but torch sees none; use the CPU (device cpu)")
    if isinstance(dtype, str):   # "bfloat16", "torch.float16"
        dtype = getattr(torch, dtype.removeprefix("torch."), dtype)
    if dtype is not None and dtype not in DTYPES:
        raise UsageError(f"dtype {dtype!r} is not one the engine computes in; use torch.float32, torch.bfloat16 "
                         "or torch.float16")
    return device, dtype or (torch.bfloat16 if device.type == "cuda" else torch.float32)


def load_model(path: str | Path, *, device=None, dtype=None):
    """The model in directory `path`, of whichever family its config.json names."""
    if not isinstance(path, (str, Path)):
        raise UsageError(f"load_model takes the path of a model directory, not a {type(path).__name__}")
    if not str(path).strip():
        raise UsageError("load_model takes the path of a model directory, not an empty one (that would be the "
                         "current folder); give the directory, or no model for the embedded clover-mini")
    root = Path(path)
    try:
        if not root.is_dir():
            raise CheckpointError(f"{root}: not a model directory (expected config.json and model.safetensors)")
        config = read_config(root)
    except OSError as e:   # a name too long, a folder one may not enter
        raise CheckpointError(f"{root}: cannot be read ({e.strerror or e}); check the path and its permissions") from e
    if config.get("quantization_config") is not None:
        method = config["quantization_config"]
        method = method.get("quant_method", "?") if isinstance(method, dict) else method
        raise CheckpointError(f"{root / 'config.json'}: a quantized checkpoint (quant_method {method}), which "
                              "clover-struct does not read; give the model's unquantized bfloat16 or float32 weights")
    family = family_of(config, str(root / "config.json"))
    config = {**config, "model_type": family}   # where only `architectures` named it
    module, _, function = FAMILIES[family].partition(":")
    load = getattr(importlib.import_module(f".{module}", __package__), function)
    device, dtype = torch_device(device, dtype)
    try:
        model = load(root, config, device, dtype)
    except CloverError:
        raise
    except OSError as e:
        raise CheckpointError(f"{root}: cannot be read ({e}); check the path and its permissions") from e
    except Exception as e:   # a config value of the wrong type, a size torch refuses, memory...
        raise CheckpointError(f"{root}: the model cannot be built from config.json and its weights "
                              f"({type(e).__name__}: {e}); check config.json's values against the weights") from e
    model.source = str(root)
    return model.eval()


def read_tokenizer(root: Path, vocab_size: int) -> Tokenizer | None:
    """The directory's tokenizer.json (None without one); CheckpointError if it has more
    tokens than the model's vocabulary."""
    if not (root / "tokenizer.json").is_file():
        return None
    tokenizer = Tokenizer.from_file(root / "tokenizer.json")
    if tokenizer.vocab_size > vocab_size:
        raise CheckpointError(f"{root}: tokenizer.json has {tokenizer.vocab_size} tokens but config.json "
                              f"vocab_size is {vocab_size}: the tokenizer belongs to another model")
    return tokenizer


def check_special(root: Path, tokenizer: Tokenizer | None, ids: list[tuple[str, int | None]]) -> None:
    """CheckpointError where a config's pad or mask id is not a special token of the model's
    tokenizer.json (pad_token_id=3 naming '!' had decoded records of stray text), or the two
    are one id."""
    given = [(key, value) for key, value in ids if value is not None and key in ("pad_token_id", "mask_token_id")]
    for key, value in given:
        if tokenizer is not None and tokenizer.special_ids and value not in tokenizer.special_ids:
            raise CheckpointError(f"{root / 'config.json'}: {key}={value} is {tokenizer.decode([value])!r} in "
                                  "tokenizer.json, not a special token: the tokenizer belongs to another model, "
                                  "or the id is wrong")
    roles = dict(given)
    if len(roles) == 2 and len(set(roles.values())) == 1:
        raise CheckpointError(f"{root / 'config.json'}: pad_token_id and mask_token_id are both {roles['pad_token_id']}; "
                              "a masked position and padding must differ: fix config.json")


def load_clover(root: Path, config: dict, device: torch.device, dtype: torch.dtype) -> CloverModel:
    """A Clover (or Qwen3.5-MoE) directory: config, tokenizer and weights, every tensor checked."""
    files = weight_files(root)
    found = open_tensors(files)
    check_layers(found, config, str(root / "config.json"))
    config = ModelConfig.from_dict(config, source=str(root / "config.json"))
    tokenizer = read_tokenizer(root, config.vocab_size)
    if tokenizer is not None:
        for key, own in (("mask_token_id", tokenizer.mask_id), ("pad_token_id", tokenizer.pad_id),
                         ("eos_token_id", tokenizer.eos_id)):
            if getattr(config, key) is None:
                setattr(config, key, own)
    for key in ("mask_token_id", "pad_token_id", "eos_token_id"):
        value = getattr(config, key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise CheckpointError(f"{root / 'config.json'}: {key}={value!r} is not a token id (a whole number)")
        if value is not None and not 0 <= value < config.vocab_size:
            raise CheckpointError(f"{root / 'config.json'}: {key}={value} is outside the vocabulary "
                                  f"of {config.vocab_size}")
    if tokenizer is not None and tokenizer.mask_id is not None and config.mask_token_id != tokenizer.mask_id:
        raise CheckpointError(f"{root / 'tokenizer.json'}: its mask token is id {tokenizer.mask_id}, but config.json "
                              f"says mask_token_id={config.mask_token_id}: the tokenizer belongs to another model; "
                              "copy the model's own tokenizer.json")
    check_special(root, tokenizer, [(k, getattr(config, k)) for k in ("mask_token_id", "pad_token_id")])
    with torch.device("meta"):
        model = CloverModel(config, tokenizer)
    tensors = state_dict_from_files(files, found, model)
    tensors = {k: cast(k, v, device, dtype, root) for k, v in tensors.items()}
    model.load_state_dict(tensors, strict=not config.tie_word_embeddings, assign=True)
    model.reset_buffers(device)
    return model


def save_model(model: CloverModel, path: str | Path, *, layout: str = "fused",
               max_shard_bytes: int | None = None, model_type: str = "clover") -> Path:
    """Write config.json, the weights (fused or per-expert, optionally sharded) and tokenizer.json.

    model_type="qwen3_5_moe_text" makes a checkpoint transformers loads as Qwen3_5MoeForCausalLM
    (an autoregressive twin for benchmarks); load_model reads both."""
    if layout not in ("fused", "per_expert"):
        raise UsageError(f"layout must be 'fused' or 'per_expert', got {layout!r}")
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(model.config.to_dict(model_type), indent=2) + "\n")
    tensors = {}
    for name, t in model.state_dict().items():
        t = t.detach().cpu().contiguous()
        if name == "lm_head.weight" and model.config.tie_word_embeddings:
            continue
        if layout == "per_expert" and name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            base = name.rsplit(".", 1)[0]
            for e, w in enumerate(t):
                if name.endswith("gate_up_proj"):
                    gate, up = w.chunk(2)
                    tensors[f"{base}.{e}.gate_proj.weight"] = gate.clone()
                    tensors[f"{base}.{e}.up_proj.weight"] = up.clone()
                else:
                    tensors[f"{base}.{e}.down_proj.weight"] = w.clone()
        else:
            tensors[name] = t
    shards, size = [{}], 0
    for name, t in tensors.items():
        nbytes = t.numel() * t.element_size()
        if max_shard_bytes and shards[-1] and size + nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = t
        size += nbytes
    for stale in [*root.glob("model*.safetensors"), root / "model.safetensors.index.json"]:
        stale.unlink(missing_ok=True)
    if len(shards) == 1:
        save_file(shards[0], str(root / "model.safetensors"), metadata={"format": "pt"})
    else:
        weight_map = {}
        for i, shard in enumerate(shards, 1):
            fname = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
            save_file(shard, str(root / fname), metadata={"format": "pt"})
            weight_map.update(dict.fromkeys(shard, fname))
        (root / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}, indent=2))
    if model.tokenizer is not None:
        model.tokenizer.save(root / "tokenizer.json")
    return root
