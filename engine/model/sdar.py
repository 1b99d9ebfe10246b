"""The SDAR transformer: Qwen3 layers under block-causal attention, in plain torch.

SDAR (and DICE, fine-tuned from it) is Qwen3 (q/k RMSNorm, SwiGLU, RoPE, grouped-query
attention) whose attention is bidirectional inside a block of `block_size` tokens and causal
across blocks. Module names copy Hugging Face's Qwen3, except that each layer's q/k/v
projections are one matrix (`qkv_proj`) and so are gate/up (`gate_up_proj`): a decoding step
then runs 4 larger matmuls per layer instead of 7. engine.model.loading maps a checkpoint's names
(`model.layers.N.self_attn.q_proj.weight`, ...) to these and back, and reads config.json.

Read top to bottom: config, the block-causal mask, RoPE, RMSNorm, the static KV cache,
grouped-query attention, `Kernels` (the products and attention every layer goes through, in
plain torch; engine.model.routes computes them with other kernels), attention, MLP, decoder
layer, the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

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
    # (rope_frequencies); other types are refused at load (engine.model.loading.unimplemented_settings).
    rope_scaling: dict[str, Any] | None = None
    max_position_embeddings: int = 32768
    tie_word_embeddings: bool = False
    block_size: int = 4
    mask_token_id: int = 151669
    bos_token_id: int | None = 151643
    eos_token_id: int | list[int] | None = 151643
    pad_token_id: int | None = 151643
    # "chat": DICE/SDAR chat prompts through the chat template; "fim": the built-in model's
    # fill-in-the-middle format (engine.decoding.prompts.fim_prompt).
    prompt_format: str = "chat"
    torch_dtype: str | None = None
    # config.json's other keys, kept so that a checkpoint written back loses nothing.
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

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

    def rows(self, n: int) -> "KVCache":
        """The first n rows, sharing this cache's storage (itself when n is all of them): the
        prompt is prefilled once, in row 0, for all rows; a batch padded to a bucket
        (engine.decoding.paths) runs some steps over the rows in use only."""
        if n == self.batch:
            return self
        return KVCache([k[:n] for k in self.keys], [v[:n] for v in self.values])

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


class Kernels:
    """The operations a forward's products and attention go through: torch's F.linear and
    SDPA, the reference. engine.model.routes.Routed computes the same with other kernels."""

    def prepare(self, model: "SDARForCausalLM", x: torch.Tensor, mask):
        """The hidden state, the mask and the kernels of one forward, in the forms they take."""
        return x, mask, self

    def hidden(self, x) -> torch.Tensor:
        """The residual stream's tensor."""
        return x

    def normed(self, norm: "RMSNorm", x):
        """norm(x), for the projection that reads it."""
        return norm(x)

    def project(self, linear: nn.Linear, x, residual: torch.Tensor | None = None):
        """linear(x), plus `residual` where given."""
        y = linear(x)
        return y if residual is None else residual + y

    def glu(self, linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        """SwiGLU: silu(gate) * up, from one product whose output is [gate ; up]."""
        gate, up = self.project(linear, x).chunk(2, dim=-1)
        return F.silu(gate) * up

    def fused_attention(self, attention: "Attention", qkv: torch.Tensor, cos, sin, mask, kv, positions):
        """The whole attention of `qkv` (norms, RoPE, cache write) by one kernel, or None."""
        return None

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask) -> torch.Tensor:
        return grouped_attention(q, k, v, mask)


PLAIN = Kernels()


class Attention(nn.Module):
    def __init__(self, config: SDARConfig):
        super().__init__()
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        # q, k and v rows stacked in one matrix (engine.model.loading stacks a checkpoint's three).
        self.qkv_proj = nn.Linear(config.hidden_size, (self.heads + 2 * self.kv_heads) * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, config.hidden_size, bias=False)
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps)

    def forward(self, x, cos: torch.Tensor, sin: torch.Tensor, mask, kv: tuple[torch.Tensor, torch.Tensor] | None = None,
                positions: torch.Tensor | None = None, kernels: Kernels = PLAIN) -> torch.Tensor:
        qkv = kernels.project(self.qkv_proj, x)
        b, t, _ = qkv.shape
        out = kernels.fused_attention(self, qkv, cos, sin, mask, kv, positions)
        if out is None:
            q, k, v = qkv.split(
                [self.heads * self.head_dim, self.kv_heads * self.head_dim, self.kv_heads * self.head_dim], dim=-1
            )
            q = self.q_norm(q.view(b, t, self.heads, self.head_dim)).transpose(1, 2)
            k = self.k_norm(k.view(b, t, self.kv_heads, self.head_dim)).transpose(1, 2)
            v = v.view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            if kv is not None:
                # Write this call's keys at their positions, then attend over the cache's first
                # S positions (S: the mask's last dimension): the mask decides which of them count.
                keys, values = kv
                keys[:, :, positions] = k
                values[:, :, positions] = v
                k, v = keys[:, :, : mask.shape[-1]], values[:, :, : mask.shape[-1]]
            out = kernels.attend(q, k, v, mask)
        return kernels.project(self.o_proj, out.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, config: SDARConfig):
        super().__init__()
        # gate and up rows stacked in one matrix (engine.model.loading stacks a checkpoint's two).
        self.gate_up_proj = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, kernels: Kernels = PLAIN, residual: torch.Tensor | None = None):
        """down(silu(gate(x)) * up(x)), plus `residual` where given."""
        return kernels.project(self.down_proj, kernels.glu(self.gate_up_proj, x), residual)


class DecoderLayer(nn.Module):
    def __init__(self, config: SDARConfig):
        super().__init__()
        self.self_attn = Attention(config)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, x, cos, sin, mask, kv=None, positions=None, kernels: Kernels = PLAIN):
        h = kernels.hidden(x) + self.self_attn(kernels.normed(self.input_layernorm, x), cos, sin, mask, kv, positions,
                                               kernels)
        return self.mlp(self.post_attention_layernorm(h), kernels, residual=h)


class SDARModel(nn.Module):
    def __init__(self, config: SDARConfig):
        super().__init__()
        # On the meta device (engine.model.loading builds there, then adopts the checkpoint's
        # tensors) there are no values to draw, and drawing normal_ there imports torch._dynamo,
        # about a second of a CPU start-up: the table is left empty.
        meta = torch.get_default_device().type == "meta"
        weight = torch.empty(config.vocab_size, config.hidden_size) if meta else None
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, _weight=weight)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class SDARForCausalLM(nn.Module):
    """`model(input_ids)` -> logits [B, T, V] under block-causal attention.

    Optional arguments:
    - `position_ids` [T] or [B, T] (default 0..T-1);
    - `attn_mask` bool [T, S] or [B|1, 1, T, S] (True = may attend) replacing the block-causal
      mask of the checkpoint's block size: training's [noisy ; clean] layout, or decoding with
      another block size;
    - `cache`: a KVCache; this call's keys and values are written at `position_ids` (required)
      and attention runs over the cache's first S positions (S: the mask's last dimension;
      by default the whole cache under the block-causal rule on absolute positions);
    - `logits_to_keep`: logits for the last N positions only (0 = all); decoding needs the
      current block's, and the vocabulary projection is a large matmul;
    - `kernels`: which kernels compute the products and attention (engine.model.routes.Routed:
      flex_attention, the engine's decode and skinny kernels, fused steps); the same logits.
    """

    def __init__(self, config: SDARConfig):
        super().__init__()
        self.config = config
        self.model = SDARModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None, attn_mask=None,
                cache: KVCache | None = None, logits_to_keep: int = 0, kernels: Kernels = PLAIN) -> torch.Tensor:
        b, t = input_ids.shape
        if position_ids is None:
            if cache is not None:
                raise ValueError("a KV cache needs position_ids (where this call's tokens go)")
            position_ids = torch.arange(t, device=input_ids.device)
        if position_ids.dim() == 1:
            position_ids = position_ids[None].expand(b, t)
        if attn_mask is None:
            key_pos = torch.arange(cache.max_len, device=input_ids.device) if cache is not None else position_ids[0]
            attn_mask = block_causal_mask(position_ids, key_pos, self.config.block_size)
        elif isinstance(attn_mask, torch.Tensor) and attn_mask.dim() == 2:
            attn_mask = attn_mask[None, None]
        x = self.model.embed_tokens(input_ids)
        cos, sin = rotary_cos_sin(position_ids, self.config, x.dtype)
        x, attn_mask, kernels = kernels.prepare(self, x, attn_mask)
        for i, layer in enumerate(self.model.layers):
            kv = (cache.keys[i], cache.values[i]) if cache is not None else None
            x = layer(x, cos, sin, attn_mask, kv, position_ids[0], kernels)
        x = kernels.hidden(x)
        return kernels.project(self.lm_head, self.model.norm(x[:, -logits_to_keep:]))
