"""The SDAR transformer: Qwen3 layers under block-causal attention, in plain torch.

SDAR (and DICE, fine-tuned from it) is Qwen3 (q/k RMSNorm, SwiGLU, RoPE, grouped-query
attention) whose attention is bidirectional inside a block of `block_size` tokens and causal
across blocks. Module and parameter names copy Hugging Face's Qwen3 exactly, so that a real
checkpoint's state dict loads as it is (`model.layers.N.self_attn.q_proj.weight`, ...).

Read top to bottom: config, the block-causal mask, RoPE, RMSNorm, attention (with an optional
static KV cache), MLP, decoder layer, the model.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class SDARConfig:
    """The fields of an SDAR `config.json` that the model uses (same names as Hugging Face)."""

    vocab_size: int = 151936
    hidden_size: int = 2048
    intermediate_size: int = 6144
    num_hidden_layers: int = 28
    num_attention_heads: int = 16
    num_key_value_heads: int = 8
    head_dim: int = 128
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    # Qwen3's RoPE scaling: None, or {"rope_type": "linear" | "dynamic" | "yarn", "factor": ...}
    # (rope_frequencies); other types are refused at load (unimplemented_settings).
    rope_scaling: dict[str, Any] | None = None
    max_position_embeddings: int = 32768
    tie_word_embeddings: bool = False
    block_size: int = 4
    mask_token_id: int = 151669
    bos_token_id: int | None = 151643
    eos_token_id: int | list[int] | None = 151643
    pad_token_id: int | None = 151643
    # "chat": DICE/SDAR chat prompts through the chat template; "fim": the built-in model's
    # fill-in-the-middle format (engine.prompts.fim_prompt).
    prompt_format: str = "chat"
    torch_dtype: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, source: str | Path | dict[str, Any]) -> "SDARConfig":
        """From a config dict, a config.json path or a checkpoint folder. Unknown keys are
        kept in `extra` (written back by `to_dict`) so a round trip loses nothing."""
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
        names = {f.name for f in fields(cls)} - {"extra"}
        known = {k: v for k, v in data.items() if k in names}
        extra = {k: v for k, v in data.items() if k not in names and k != "extra"}
        return cls(**known, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        extra = data.pop("extra")
        data = {**extra, **data}
        data["model_type"] = "sdar"
        data["architectures"] = ["SDARForCausalLM"]
        data.pop("auto_map", None)  # our checkpoints load without remote code
        if data["torch_dtype"] is None:
            del data["torch_dtype"]
        return data

    @property
    def eos_token_ids(self) -> list[int]:
        if self.eos_token_id is None:
            return []
        if isinstance(self.eos_token_id, int):
            return [self.eos_token_id]
        return list(self.eos_token_id)


def block_causal_mask(query_pos: torch.Tensor, key_pos: torch.Tensor, block_size: int) -> torch.Tensor:
    """True where a query may attend a key: the key's block is not after the query's block.

    query_pos [T] or [B, T], key_pos [S] -> bool [1 or B, 1, T, S]. Inside a block every token
    sees every other (bidirectional); across blocks it is causal. With a static KV cache the
    keys past the current block hold stale values, and this rule is exactly what hides them.
    """
    q_block = torch.div(query_pos, block_size, rounding_mode="floor")
    k_block = torch.div(key_pos, block_size, rounding_mode="floor")
    if q_block.dim() == 1:
        q_block = q_block[None]
    return (k_block[None, None, :] <= q_block[:, :, None])[:, None]


ROPE_TYPES = ("default", "linear", "dynamic", "yarn")


def rope_type(config: SDARConfig) -> str:
    scaling = config.rope_scaling or {}
    return scaling.get("rope_type", scaling.get("type", "default"))


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


def rope_frequencies(config: SDARConfig, position_ids: torch.Tensor) -> tuple[torch.Tensor, float]:
    """RoPE's inverse frequencies [head_dim / 2] and the factor on cos/sin, as transformers
    computes them for Qwen3 (modeling_rope_utils' _compute_{default,linear_scaling,
    dynamic_ntk,yarn}_parameters). `dynamic` depends on the longest position of the call,
    computed on the device so that a captured CUDA graph stays valid; within
    max_position_embeddings it equals the default."""
    dim, base, kind = config.head_dim, config.rope_theta, rope_type(config)
    scaling = config.rope_scaling or {}
    exponent = torch.arange(0, dim, 2, dtype=torch.int64, device=position_ids.device).float() / dim
    if kind == "dynamic":
        factor, longest = scaling["factor"], config.max_position_embeddings
        seq_len = torch.clamp(position_ids.max() + 1, min=longest).float()
        grown = base * ((factor * seq_len / longest) - (factor - 1)) ** (dim / (dim - 2))
        return 1.0 / (grown**exponent), 1.0
    inv_freq = 1.0 / (base**exponent)
    if kind == "linear":
        return inv_freq / scaling["factor"], 1.0
    if kind == "yarn":
        return yarn_frequencies(config, inv_freq)
    return inv_freq, 1.0


def yarn_frequencies(config: SDARConfig, inv_freq: torch.Tensor) -> tuple[torch.Tensor, float]:
    """YaRN: high frequencies kept, low ones interpolated by `factor`, a linear ramp between
    (over the dimensions whose wavelengths are beta_fast..beta_slow turns of the original
    context), and cos/sin scaled by 0.1 ln(factor) + 1."""
    scaling, dim, base = config.rope_scaling or {}, config.head_dim, config.rope_theta
    # As transformers: a top-level original_max_position_embeddings wins over rope_scaling's.
    original = (config.extra.get("original_max_position_embeddings") or scaling.get("original_max_position_embeddings")
                or config.max_position_embeddings)
    factor = scaling.get("factor") or config.max_position_embeddings / original

    def mscale(scale: float, weight: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * weight * math.log(scale) + 1.0

    attention = scaling.get("attention_factor")
    if attention is None:
        if scaling.get("mscale") and scaling.get("mscale_all_dim"):
            attention = mscale(factor, scaling["mscale"]) / mscale(factor, scaling["mscale_all_dim"])
        else:
            attention = mscale(factor)

    def correction_dim(turns: float) -> float:
        return (dim * math.log(original / (turns * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(scaling.get("beta_fast") or 32), correction_dim(scaling.get("beta_slow") or 1)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # no zero-width ramp
    ramp = ((torch.arange(dim // 2, dtype=torch.float32, device=inv_freq.device) - low) / (high - low)).clamp(0, 1)
    keep = 1 - ramp  # 1: the original frequency, 0: interpolated
    return (inv_freq / factor) * (1 - keep) + inv_freq * keep, float(attention)


def rotary_cos_sin(
    position_ids: torch.Tensor, config: SDARConfig, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE tables for [B, T] positions, as Qwen3 computes them (float32, then cast)."""
    inv_freq, attention = rope_frequencies(config, position_ids)
    freqs = position_ids[..., None].float() * inv_freq
    angles = torch.cat((freqs, freqs), dim=-1)
    cos, sin = angles.cos(), angles.sin()
    if attention != 1.0:
        cos, sin = cos * attention, sin * attention
    return cos.to(dtype)[:, None], sin.to(dtype)[:, None]


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(dtype)


@dataclass
class KVCache:
    """A static, preallocated key/value cache: one [B, kv_heads, max_len, head_dim] pair per
    layer. Writes go to explicit positions, so its shapes never change (CUDA-graph safe)."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]

    @classmethod
    def allocate(cls, config: SDARConfig, batch: int, max_len: int, device, dtype: torch.dtype) -> "KVCache":
        shape = (batch, config.num_key_value_heads, max_len, config.head_dim)
        layers = range(config.num_hidden_layers)
        return cls(
            [torch.zeros(shape, device=device, dtype=dtype) for _ in layers],
            [torch.zeros(shape, device=device, dtype=dtype) for _ in layers],
        )

    @property
    def batch(self) -> int:
        return self.keys[0].shape[0]

    @property
    def max_len(self) -> int:
        return self.keys[0].shape[2]

    def first_row(self) -> "KVCache":
        """A batch-1 view sharing this cache's storage: prefill a prompt once for all rows."""
        return KVCache([k[:1] for k in self.keys], [v[:1] for v in self.values])

    def copy_first_row(self, length: int) -> None:
        """Give every row the first row's first `length` positions (the shared prompt)."""
        for tensor in (*self.keys, *self.values):
            tensor[1:, :, :length] = tensor[:1, :, :length]


def grouped_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Attention for grouped-query heads: q [B, H, T, D], k/v [B, KV, S, D], mask [B|1, 1, T, S].

    Query heads that share a key/value head are stacked as extra query rows of that head
    (head h uses kv head h // (H / KV), as in Qwen3), so attention runs with KV heads and
    plain shapes: no copy of the cache per query head, and every SDPA backend that takes a
    mask applies (enable_gqa does not combine with a mask in the fused kernels)."""
    b, heads, t, d = q.shape
    kv_heads = k.shape[1]
    group = heads // kv_heads
    if group == 1:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    stacked = q.reshape(b, kv_heads, group * t, d)
    out = F.scaled_dot_product_attention(stacked, k, v, attn_mask=mask.repeat(1, 1, group, 1))
    # reshape, not view: on CUDA some SDPA backends return a non-contiguous layout here.
    return out.reshape(b, heads, t, d)


class Attention(nn.Module):
    def __init__(self, config: SDARConfig):
        super().__init__()
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.q_proj = nn.Linear(config.hidden_size, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, config.hidden_size, bias=False)
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        mask: torch.Tensor,
        kv: tuple[torch.Tensor, torch.Tensor] | None = None,
        cache_position: torch.Tensor | None = None,
        key_len: int | None = None,
    ) -> torch.Tensor:
        b, t, _ = x.shape
        if hasattr(self, "qkv_weight"):  # fuse_projections: one matmul instead of three
            q, k, v = F.linear(x, self.qkv_weight).split(
                [self.heads * self.head_dim, self.kv_heads * self.head_dim, self.kv_heads * self.head_dim], dim=-1
            )
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q = self.q_norm(q.view(b, t, self.heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(k.view(b, t, self.kv_heads, self.head_dim)).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if kv is not None:
            # Write this call's keys at their positions, then attend over the cache: the
            # mask decides which cached positions count.
            keys, values = kv
            keys[:, :, cache_position] = k
            values[:, :, cache_position] = v
            k, v = keys[:, :, :key_len], values[:, :, :key_len]
        return self.o_proj(grouped_attention(q, k, v, mask).transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, config: SDARConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if hasattr(self, "gate_up_weight"):  # fuse_projections: one matmul instead of two
            gate, up = F.linear(x, self.gate_up_weight).chunk(2, dim=-1)
        else:
            gate, up = self.gate_proj(x), self.up_proj(x)
        return self.down_proj(F.silu(gate) * up)


class DecoderLayer(nn.Module):
    def __init__(self, config: SDARConfig):
        super().__init__()
        self.self_attn = Attention(config)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, x, cos, sin, mask, kv=None, cache_position=None, key_len=None) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, kv, cache_position, key_len)
        return x + self.mlp(self.post_attention_layernorm(x))


class SDARModel(nn.Module):
    def __init__(self, config: SDARConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class SDARForCausalLM(nn.Module):
    """`model(input_ids)` -> logits [B, T, V] under block-causal attention.

    Optional arguments:
    - `position_ids` [T] or [B, T] (default 0..T-1);
    - `attn_mask` bool [T, S] or [B, 1, T, S] (True = may attend) replacing the block-causal
      mask, e.g. for training on a [noisy ; clean] layout;
    - `cache` + `cache_position` [T]: write this call's keys/values at those positions of a
      `KVCache` and attend over its first `key_len` positions (default: all of it) under the
      block-causal rule on absolute positions;
    - `block_size`: decode with another block size than the checkpoint's;
    - `logits_to_keep`: compute logits for the last N positions only (0 = all); decoding
      needs the current block's, and the vocabulary projection is a large matmul;
    - `layer_runner(layer, *args)`: runs each decoder layer instead of `layer(*args)`; the
      fast decoding path passes a torch.compile'd DecoderLayer.forward (one compiled graph
      serves every layer, since the layers differ only in their weights).
    """

    def __init__(self, config: SDARConfig):
        super().__init__()
        self.config = config
        self.model = SDARModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor | None = None,
        attn_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        cache_position: torch.Tensor | None = None,
        key_len: int | None = None,
        block_size: int | None = None,
        logits_to_keep: int = 0,
        layer_runner: Callable[..., torch.Tensor] | None = None,
    ) -> torch.Tensor:
        cfg = self.config
        b, t = input_ids.shape
        device = input_ids.device
        if position_ids is None:
            position_ids = cache_position if cache_position is not None else torch.arange(t, device=device)
        if position_ids.dim() == 1:
            position_ids = position_ids[None].expand(b, t)
        if cache is not None:
            if cache_position is None:
                raise ValueError("a KV cache needs cache_position (where this call's tokens go)")
            key_len = cache.max_len if key_len is None else key_len
            key_pos = torch.arange(key_len, device=device)
        else:
            key_pos = position_ids[0]
        if attn_mask is None:
            attn_mask = block_causal_mask(position_ids, key_pos, block_size or cfg.block_size)
        elif attn_mask.dim() == 2:
            attn_mask = attn_mask[None, None]
        x = self.model.embed_tokens(input_ids)
        cos, sin = rotary_cos_sin(position_ids, cfg, x.dtype)
        run = layer_runner or DecoderLayer.__call__
        for i, layer in enumerate(self.model.layers):
            kv = (cache.keys[i], cache.values[i]) if cache is not None else None
            x = run(layer, x, cos, sin, attn_mask, kv, cache_position, key_len)
        return self.lm_head(self.model.norm(x[:, -logits_to_keep:]))


def _fuse_rows(*linears: nn.Linear) -> torch.Tensor:
    """One tensor holding the linears' weights stacked; each weight becomes a view of it."""
    fused = torch.cat([linear.weight.detach() for linear in linears])
    row = 0
    for linear in linears:
        rows = linear.weight.shape[0]
        linear.weight = nn.Parameter(fused[row : row + rows], requires_grad=linear.weight.requires_grad)
        row += rows
    return fused


def fuse_projections(model: SDARForCausalLM) -> None:
    """Stack each layer's q/k/v and gate/up weights into one tensor (the parameters become
    views of it, so names, values and the state dict stay the same), so that a decoding step
    runs 4 larger matmuls per layer instead of 7: on a GPU, fewer and larger kernels read the
    weights faster. Idempotent."""
    with torch.inference_mode(False), torch.no_grad():
        for layer in model.model.layers:
            attn, mlp = layer.self_attn, layer.mlp
            if not hasattr(attn, "qkv_weight"):
                # Buffers, not plain attributes: torch.compile then treats them as inputs, and
                # one compiled layer serves all layers.
                attn.register_buffer("qkv_weight", _fuse_rows(attn.q_proj, attn.k_proj, attn.v_proj), persistent=False)
            if not hasattr(mlp, "gate_up_weight"):
                mlp.register_buffer("gate_up_weight", _fuse_rows(mlp.gate_proj, mlp.up_proj), persistent=False)
