"""Checkpoint folders: config.json + safetensors (single or sharded) + the Qwen2 BPE tokenizer.

Everything that knows a checkpoint's layout is here, so that engine.model.sdar holds only the
math: config.json's keys (and where transformers 5 moved some), the settings the model does
not implement, and the weights' names (a checkpoint's separate q/k/v and gate/up projections
stacked into the model's `qkv_proj` and `gate_up_proj`, and split again when saving).

Real SDAR/DICE folders name custom code in `auto_map`; we never run it (no
trust_remote_code): the config is read as JSON, the weights as tensors, and the tokenizer
from tokenizer.json (by `tokenizers`, engine.model.tokenizer) or by transformers' own Qwen2
tokenizer class from vocab.json + merges.txt + added_tokens.json.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from engine.model.memory import check_weights
from engine.model.sdar import ROPE_TYPES, SDARConfig, SDARForCausalLM, rope_type
from engine.types import EngineError

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# The model's stacked weights and the checkpoint names they are stacked from, in row order.
STACKED = {"self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
           "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj")}


def config_from_json(source: str | Path | dict[str, Any]) -> SDARConfig:
    """From a config dict, a config.json path or a checkpoint folder. Unknown keys are kept in
    `extra` (written back by `config_to_json`) so a round trip loses nothing."""
    if isinstance(source, dict):
        data = dict(source)
    else:
        path = Path(source)
        if path.is_dir():
            path = path / "config.json"
        data = json.loads(path.read_text())
    # transformers 5 moved rope_theta, and the scaling that rope_scaling held, into
    # rope_parameters.
    rope = data.get("rope_parameters") or {}
    if "rope_theta" not in data and "rope_theta" in rope:
        data["rope_theta"] = rope["rope_theta"]
    scaling = {k: v for k, v in rope.items() if k != "rope_theta"}
    if data.get("rope_scaling") is None and scaling.get("rope_type", scaling.get("type", "default")) != "default":
        data["rope_scaling"] = scaling
    if data.get("head_dim") is None and "hidden_size" in data and "num_attention_heads" in data:
        data["head_dim"] = data["hidden_size"] // data["num_attention_heads"]
    if data.get("dtype") and not data.get("torch_dtype"):
        data["torch_dtype"] = data["dtype"]
    names = {f.name for f in fields(SDARConfig)} - {"extra"}
    known = {k: v for k, v in data.items() if k in names}
    extra = {k: v for k, v in data.items() if k not in names and k != "extra"}
    return SDARConfig(**known, extra=extra)


def config_to_json(config: SDARConfig) -> dict[str, Any]:
    """config.json's contents for `config`, readable by this loader and by Hugging Face."""
    data = asdict(config)
    extra = data.pop("extra")
    data = {**extra, **data}
    data["model_type"] = "sdar"
    data["architectures"] = ["SDARForCausalLM"]
    data.pop("auto_map", None)  # our checkpoints load without remote code
    if data["torch_dtype"] is None:
        del data["torch_dtype"]
    return data


def unimplemented_settings(config: SDARConfig) -> list[str]:
    """Config keys whose value would change the model's math in a way this file does not
    implement; each one is a reason to refuse the checkpoint rather than compute something
    else. (Training-only keys, such as dropout or fused losses, change nothing here.)"""
    extra = config.extra
    problems = []
    if rope_type(config) not in ROPE_TYPES:
        problems.append(f"rope_scaling.rope_type = {rope_type(config)!r} (implemented: {', '.join(ROPE_TYPES)})")
    elif rope_type(config) in ("linear", "dynamic") and not (config.rope_scaling or {}).get("factor"):
        problems.append(f"rope_scaling.rope_type = {rope_type(config)!r} without a factor")
    for key in ("partial_rotary_factor",):
        value = (config.rope_scaling or {}).get(key, extra.get(key, 1.0))
        if value != 1.0:
            problems.append(f"{key} = {value!r} (only 1.0: RoPE over the whole head)")
    if extra.get("hidden_act", "silu") != "silu":
        problems.append(f"hidden_act = {extra['hidden_act']!r} (only 'silu')")
    for key in ("attention_bias", "mlp_bias"):
        if extra.get(key):
            problems.append(f"{key} = true (the projections have no bias)")
    if extra.get("use_sliding_window"):
        problems.append(f"use_sliding_window = true (sliding_window {extra.get('sliding_window')!r}; "
                        "only full attention)")
    kinds = set(extra.get("layer_types") or ()) - {"full_attention"}
    if kinds:
        problems.append(f"layer_types holds {sorted(kinds)} (only 'full_attention')")
    return problems


def stack_checkpoint_weights(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A checkpoint's state dict with the model's names: each layer's q/k/v and gate/up
    weights stacked into one (the parts are freed as they are stacked). A layer missing a
    part keeps its names, so that load_state_dict reports them."""
    state = dict(state)
    for stacked, parts in STACKED.items():
        for name in [n for n in state if n.endswith(f".{parts[0]}.weight")]:
            layer = name.removesuffix(f".{parts[0]}.weight")
            part_names = [f"{layer}.{part}.weight" for part in parts]
            if all(part in state for part in part_names):
                state[f"{layer}.{stacked}.weight"] = torch.cat([state.pop(part) for part in part_names])
    return state


def checkpoint_weights(model: SDARForCausalLM) -> dict[str, torch.Tensor]:
    """The model's state dict with a checkpoint's names (Hugging Face's Qwen3): each stacked
    weight split into its parts."""
    config = model.config
    rows = {"self_attn.qkv_proj": [config.num_attention_heads * config.head_dim,
                                   config.num_key_value_heads * config.head_dim,
                                   config.num_key_value_heads * config.head_dim],
            "mlp.gate_up_proj": [config.intermediate_size] * 2}
    state = {}
    for name, tensor in model.state_dict().items():
        stacked = next((s for s in STACKED if name.endswith(f".{s}.weight")), None)
        if stacked is None:
            state[name] = tensor
            continue
        layer = name.removesuffix(f".{stacked}.weight")
        for part, piece in zip(STACKED[stacked], tensor.split(rows[stacked])):
            state[f"{layer}.{part}.weight"] = piece.clone()  # its own storage, as safetensors wants
    return state


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_dtype(dtype: torch.dtype | str | None, config: SDARConfig, device: torch.device) -> torch.dtype:
    """The checkpoint's own dtype on a GPU; float32 on a CPU, where bf16 matmuls are slow."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise EngineError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
        return DTYPES[dtype]
    if device.type == "cpu":
        return torch.float32
    return DTYPES.get(config.torch_dtype or "bfloat16", torch.bfloat16)


def load_config(folder: Path) -> SDARConfig:
    path = folder / "config.json"
    if not path.is_file():
        raise EngineError(f"{folder} is not a checkpoint folder: config.json is missing")
    try:
        config = config_from_json(path)
    except (ValueError, TypeError) as exc:
        raise EngineError(f"{path}: not a valid SDAR config ({exc})") from exc
    model_type = config.extra.get("model_type", "sdar")
    if model_type not in ("sdar", "qwen3"):
        raise EngineError(f"{path}: model_type {model_type!r} is not an SDAR/DICE checkpoint")
    unimplemented = unimplemented_settings(config)
    if unimplemented:
        raise EngineError(f"{path}: this engine does not implement {'; '.join(unimplemented)}, so it would "
                          "compute another model than the checkpoint's")
    # Chat checkpoints stop on <|im_end|> too, which only generation_config.json lists.
    gen_path = folder / "generation_config.json"
    if gen_path.is_file():
        gen_eos = json.loads(gen_path.read_text()).get("eos_token_id")
        gen_ids = [gen_eos] if isinstance(gen_eos, int) else list(gen_eos or [])
        merged = config.eos_token_ids + [i for i in gen_ids if i not in config.eos_token_ids]
        config.eos_token_id = merged
    return config


def load_tokenizer(folder: Path, config: SDARConfig):
    """The folder's tokenizer with the config's mask token set as mask_token: tokenizer.json
    exactly as written (any BPE, e.g. the built-in model's), read by `tokenizers` alone
    (engine.model.tokenizer), else Qwen2's BPE rebuilt by transformers from vocab.json + merges.txt
    + added tokens."""
    has_json = (folder / "tokenizer.json").is_file()
    if not has_json and not ((folder / "vocab.json").is_file() and (folder / "merges.txt").is_file()):
        raise EngineError(f"{folder}: no tokenizer (need tokenizer.json, or vocab.json + merges.txt)")
    try:
        if has_json:
            from engine.model.tokenizer import JsonTokenizer

            tokenizer = JsonTokenizer.from_folder(folder)
        else:
            from transformers import Qwen2TokenizerFast

            tokenizer = Qwen2TokenizerFast.from_pretrained(str(folder))
    except Exception as exc:  # transformers and tokenizers raise many kinds on a broken file
        raise EngineError(f"{folder}: the tokenizer files cannot be read ({type(exc).__name__}: {exc})") from exc
    if tokenizer.mask_token_id != config.mask_token_id:
        mask = tokenizer.convert_ids_to_tokens(config.mask_token_id)
        if mask is None:
            raise EngineError(f"{folder}: mask_token_id {config.mask_token_id} is not in the tokenizer")
        tokenizer.mask_token = mask
    return tokenizer


def weight_files(folder: Path) -> list[Path]:
    index = folder / INDEX_NAME
    if index.is_file():
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [folder / n for n in names]
    if (folder / SINGLE_NAME).is_file():
        return [folder / SINGLE_NAME]
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise EngineError(f"{folder}: no weights (model.safetensors or {INDEX_NAME})")
    return files


def load_state_dict(folder: Path, device: torch.device, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    state: dict[str, torch.Tensor] = {}
    for path in weight_files(folder):
        if not path.is_file():
            raise EngineError(f"{folder}: weight shard {path.name} listed in {INDEX_NAME} is missing")
        try:
            with safe_open(str(path), framework="pt", device=str(device)) as f:
                for name in f.keys():
                    state[name] = f.get_tensor(name).to(dtype)
        except (SafetensorError, OSError) as exc:  # a truncated or corrupt download
            raise EngineError(f"{path}: not a readable safetensors file ({exc})") from exc
    return state


def check_vocabulary(folder: Path, tokenizer, config: SDARConfig) -> None:
    """A token id past the embedding table would fail every job (IndexError); refuse it here."""
    if len(tokenizer) > config.vocab_size:
        raise EngineError(
            f"{folder}: the tokenizer has {len(tokenizer)} tokens but the model's vocab_size is "
            f"{config.vocab_size}: the tokenizer does not belong to these weights"
        )


def load_checkpoint(
    folder: str | Path, device: torch.device | str | None = None, dtype: torch.dtype | str | None = None,
    memory: int | None = None,
):
    """-> (model in eval mode, tokenizer, config). Raises EngineError with what is wrong, and
    before reading the weights when they cannot fit on the device (or in `memory` bytes:
    engine.model.memory)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise EngineError(f"checkpoint folder {folder} does not exist")
    device = torch.device(device) if device is not None else default_device()
    config = load_config(folder)
    dtype = resolve_dtype(dtype, config, device)
    tokenizer = load_tokenizer(folder, config)
    check_vocabulary(folder, tokenizer, config)
    check_weights(config, dtype, device, folder, memory)
    state = load_state_dict(folder, device, dtype)
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    for name in [n for n in state if n.endswith("rotary_emb.inv_freq")]:
        del state[name]  # some exports keep RoPE's table; we compute it from rope_theta
    state = stack_checkpoint_weights(state)
    # Build on the meta device, then adopt the loaded tensors: no time spent on random init.
    with torch.device("meta"):
        model = SDARForCausalLM(config)
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    if config.tie_word_embeddings:
        missing = [name for name in missing if name != "lm_head.weight"]
    if missing or unexpected:
        raise EngineError(
            f"{folder}: weights do not fit the config (missing {missing[:5]}, unexpected {unexpected[:5]})"
        )
    if config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    return model.eval(), tokenizer, config


def save_checkpoint(model: SDARForCausalLM, tokenizer, folder: str | Path, max_shard_bytes: int = 4 << 30) -> None:
    """Write a folder `load_checkpoint` (and Hugging Face) can read: config.json, the tokenizer,
    model.safetensors or shards + model.safetensors.index.json when larger than max_shard_bytes."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in [*folder.glob("*.safetensors"), folder / INDEX_NAME]:
        stale.unlink(missing_ok=True)  # an old index would otherwise win over new weights
    config = model.config
    state = {k: v.detach().contiguous().cpu() for k, v in checkpoint_weights(model).items()}
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)  # safetensors refuses shared storage; HF omits it too
    dtype_name = {v: k for k, v in DTYPES.items()}.get(next(iter(state.values())).dtype)
    config_dict = config_to_json(config)
    if dtype_name:
        config_dict["torch_dtype"] = dtype_name
    (folder / "config.json").write_text(json.dumps(config_dict, indent=2) + "\n")
    if tokenizer is not None:
        tokenizer.save_pretrained(str(folder))

    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, tensor in state.items():
        nbytes = tensor.numel() * tensor.element_size()
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += nbytes
    if len(shards) == 1:
        save_file(shards[0], str(folder / SINGLE_NAME), metadata={"format": "pt"})
        return
    weight_map = {}
    for i, shard in enumerate(shards, 1):
        shard_name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(folder / shard_name), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(shard, shard_name))
    total = sum(t.numel() * t.element_size() for t in state.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n")
