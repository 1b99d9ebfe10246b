"""The SDAR transformer: Qwen3 layers under block-causal attention, in plain torch.

SDAR (and DICE, fine-tuned from it) is Qwen3 (q/k RMSNorm, SwiGLU, RoPE, grouped-query
attention) whose attention is bidirectional inside a block of `block_size` tokens and causal
across blocks. Module names copy Hugging Face's Qwen3, except that each layer's q/k/v
projections are one matrix (`qkv_proj`) and so are gate/up (`gate_up_proj`): a decoding step
then runs 4 larger matmuls per layer instead of 7. engine.model.loading maps a checkpoint's names
(`model.layers.N.self_attn.q_proj.weight`, ...) to these and back, and reads config.json.

Read top to bottom: config, the block-causal mask, RoPE, RMSNorm, attention (with an optional
static KV cache), MLP, decoder layer, the model.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, NamedTuple

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


FLEX_BLOCK = 128  # flex_attention's default tile of queries and of keys
# kernel_options of every flex_attention call. For a few query rows flex_attention picks its
# split-KV decoding kernel, which torch 2.11 gets wrong in this model on the H200 (logits 1.49
# off in fp32; the general kernel 3.1e-6, eager SDPA the reference; scripts/flex_diag.py,
# 2026-12-03), so the general kernel is forced.
FLEX_KERNEL_OPTIONS: dict | None = {"FORCE_USE_FLEX_ATTENTION": True}


def flex_block_mask(mask: torch.Tensor):
    """The bool mask [B|1, 1, T, S] as a flex_attention BlockMask: the key tiles holding an
    allowed key are listed (the others are skipped, not read), and inside them the mask
    decides key by key, so attention is exactly the masked attention. Decoding over a cache
    longer than the sequence reads only the tiles up to the current block, whatever the cache
    length (a fixed shape for torch.compile and the CUDA graph)."""
    from torch.nn.attention.flex_attention import BlockMask

    b, _, t, s = mask.shape
    q_tiles, kv_tiles = -(-t // FLEX_BLOCK), -(-s // FLEX_BLOCK)
    # Padded to whole tiles, so that the kernel's reads of the mask stay inside it.
    padded = F.pad(mask[:, 0], (0, kv_tiles * FLEX_BLOCK - s, 0, q_tiles * FLEX_BLOCK - t))
    used = padded.view(b, q_tiles, FLEX_BLOCK, kv_tiles, FLEX_BLOCK).any(4).any(2)  # [b, q_tiles, kv_tiles]
    # Tiles in use first, in order (a stable sort of "unused"): the kernel reads the first `count`.
    order = torch.argsort((~used).to(torch.int32), dim=-1, stable=True).to(torch.int32)
    count = used.sum(-1, dtype=torch.int32)
    batch_of = (lambda _: 0) if b == 1 else (lambda i: i)

    def mask_mod(batch, head, q_idx, kv_idx):
        return padded[batch_of(batch), q_idx, kv_idx]

    return BlockMask.from_kv_blocks(count[:, None], order[:, None], BLOCK_SIZE=FLEX_BLOCK, mask_mod=mask_mod,
                                    seq_lengths=(t, s), compute_q_blocks=False)


def flex_grouped_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_mask) -> torch.Tensor:
    """grouped_attention through flex_attention (under torch.compile, a Triton kernel that,
    for a few query rows, splits the keys over many thread blocks: flash-decoding), with the
    query heads of a key/value head read together (enable_gqa)."""
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention(q, k, v, block_mask=block_mask, enable_gqa=q.shape[1] != k.shape[1],
                          kernel_options=FLEX_KERNEL_OPTIONS)


ATTENTION_KERNELS = ("sdpa", "flex", "decode")
PROJECTION_KERNELS = ("linear", "skinny")


class Residual(NamedTuple):
    """A fused step's hidden state (SDARForCausalLM.fuses_norms): h [B, T, H] and its rows' sums
    of squares in parts, part [P, B * T], as the skinny kernel's residual form writes them, so
    that the next projection applies the RMSNorm itself (engine.model.skinny.norm_linear)."""

    h: torch.Tensor
    part: torch.Tensor


class Normed(NamedTuple):
    """norm(state.h), left to the projection that reads it."""

    state: Residual
    norm: "RMSNorm"


def project(layer: nn.Linear, x: "torch.Tensor | Normed", projections: str,
            residual: torch.Tensor | None = None) -> "torch.Tensor | Residual":
    """`layer(x)`, through the engine's kernel for a step's few rows (engine.model.skinny) when
    `projections` is "skinny" and it takes this product (bf16/fp16 on a GPU), else F.linear.
    In a fused step (x a Normed, or a `residual` to add; only where fuses_norms said the
    kernel takes every product) the norm or the residual add is done by the kernel too."""
    if isinstance(x, Normed):
        from engine.model import skinny

        return skinny.norm_linear(x.state.h, x.state.part, x.norm.weight, layer.weight, x.norm.eps)
    if residual is not None:
        from engine.model import skinny

        return Residual(*skinny.residual_linear(x, layer.weight, residual))
    if projections == "skinny" and layer.bias is None:
        from engine.model import skinny

        if skinny.usable(x, layer.weight):
            return skinny.linear(x, layer.weight)
    return layer(x)


# A decoding step's fused kernels: the decode attention that applies q/k RMSNorm and RoPE and
# writes the cache itself (engine.model.decode_attention.decode_step_attention), and the skinny
# kernel's SwiGLU form (engine.model.skinny.glu_linear). DICE_FUSED_STEP=0 runs those as separate
# kernels, to compare (benchmarks/engine_speed.py); read at import.
FUSED_STEP = os.environ.get("DICE_FUSED_STEP", "1") != "0"
# A batch-1 step's attention norms applied by the skinny kernel of the qkv projection, and the
# residual add before them done by the down projection's (SDARForCausalLM.fuses_norms): one
# norm kernel a layer fewer. Not the other two norms: the norm form costs each thread block
# ~0.7 us (its sums of squares, the weight's multiply), paid once for qkv's 2 waves of blocks
# but 6 times for gate_up's and ~70 times for the vocabulary's, more than the norm kernel it
# saves (H200, 2026-12-04). DICE_FUSED_NORMS=0 (or DICE_FUSED_STEP=0) runs them as their own
# kernels, to compare.
FUSED_NORMS = FUSED_STEP and os.environ.get("DICE_FUSED_NORMS", "1") != "0"
# The fused attention pays its norms and RoPE in every program before its first read of the
# cache: at batch 1 (one wave of programs) its kernels take ~0.09 ms a step less than the
# separate ones (9.2 against 12.4 us a layer), two launches a layer fewer; at batch 8 (several
# waves) the step was 0.1 ms slower (H200, 2026-12-04), so it serves batch 1.
FUSED_MAX_BATCH = 1

# Query rows (query heads per key/value head x tokens) up to which a step's attention goes
# through the engine's decode kernel (engine.model.decode_attention); past it (a long first block),
# through SDPA.
DECODE_MAX_ROWS = 128


class DecodeMask(NamedTuple):
    """The mask of a step through the decode kernel, with its key lengths (computed once for
    all layers; engine.model.decode_attention.kv_lengths)."""

    mask: torch.Tensor
    kv_len: torch.Tensor

    @property
    def shape(self) -> torch.Size:
        return self.mask.shape


def decode_grouped_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: DecodeMask) -> torch.Tensor:
    """grouped_attention through the engine's split-KV decode kernel, for a step's few query
    rows (SDPA past DECODE_MAX_ROWS)."""
    if q.shape[1] // k.shape[1] * q.shape[2] > DECODE_MAX_ROWS:
        return grouped_attention(q, k, v, mask.mask)
    from engine.model.decode_attention import decode_attention

    return decode_attention(q, k, v, mask.mask, mask.kv_len)


def flex_supported(config: "SDARConfig") -> bool:
    """flex_attention's kernels want a head dimension of at least 16, a power of two."""
    d = config.head_dim
    return d >= 16 and d & (d - 1) == 0


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

    def forward(self, x: "torch.Tensor | Normed", cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
                kv: tuple[torch.Tensor, torch.Tensor] | None = None, positions: torch.Tensor | None = None,
                projections: str = "linear") -> torch.Tensor:
        b, t, _ = (x.state.h if isinstance(x, Normed) else x).shape
        qkv = project(self.qkv_proj, x, projections)
        if (FUSED_STEP and b <= FUSED_MAX_BATCH and isinstance(mask, DecodeMask) and kv is not None
                and self.heads // self.kv_heads * t <= DECODE_MAX_ROWS):
            # The decode kernel's fused form: norms, RoPE and the cache write inside the attention.
            from engine.model.decode_attention import decode_step_attention

            out = decode_step_attention(qkv, self.q_norm.weight, self.k_norm.weight, cos, sin, positions, *kv,
                                        mask.mask, mask.kv_len, self.heads, self.q_norm.eps)
            return project(self.o_proj, out.transpose(1, 2).reshape(b, t, -1), projections)
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
            # mask.shape[-1] positions: the mask decides which of them count.
            keys, values = kv
            keys[:, :, positions] = k
            values[:, :, positions] = v
            k, v = keys[:, :, : mask.shape[-1]], values[:, :, : mask.shape[-1]]
        if isinstance(mask, DecodeMask):
            attend = decode_grouped_attention
        else:
            attend = grouped_attention if isinstance(mask, torch.Tensor) else flex_grouped_attention
        return project(self.o_proj, attend(q, k, v, mask).transpose(1, 2).reshape(b, t, -1), projections)


class MLP(nn.Module):
    def __init__(self, config: SDARConfig):
        super().__init__()
        # gate and up rows stacked in one matrix (engine.model.loading stacks a checkpoint's two).
        self.gate_up_proj = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, projections: str = "linear",
                residual: torch.Tensor | None = None) -> "torch.Tensor | Residual":
        weight = self.gate_up_proj.weight
        if FUSED_STEP and projections == "skinny" and self.gate_up_proj.bias is None:
            from engine.model import skinny

            if skinny.usable(x, weight, glu=True):  # the product and its activation in one kernel
                return project(self.down_proj, skinny.glu_linear(x, weight), projections, residual)
        gate, up = project(self.gate_up_proj, x, projections).chunk(2, dim=-1)
        return project(self.down_proj, F.silu(gate) * up, projections, residual)


class DecoderLayer(nn.Module):
    def __init__(self, config: SDARConfig):
        super().__init__()
        self.self_attn = Attention(config)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, x, cos, sin, mask, kv=None, positions=None, projections="linear"):
        if isinstance(x, Residual):
            # A fused step: the attention's norm in its qkv projection, the MLP's residual add in
            # its down projection (engine.model.sdar.FUSED_NORMS says why only those).
            x = x.h + self.self_attn(Normed(x, self.input_layernorm), cos, sin, mask, kv, positions, projections)
            return self.mlp(self.post_attention_layernorm(x), projections, residual=x)
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, kv, positions, projections)
        return x + self.mlp(self.post_attention_layernorm(x), projections)


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
    - `attention`: "sdpa" (torch's scaled_dot_product_attention), "flex" (flex_attention
      over the same mask as a BlockMask) or "decode" (the engine's split-KV kernel for a
      step's few query rows, engine.model.decode_attention; needs Triton): the same attention,
      computed by another kernel;
    - `projections`: "linear" (F.linear: cuBLAS on a GPU) or "skinny" (engine.model.skinny, the
      engine's kernel for a step's few rows, where it applies): the same products.
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
        attn_mask: "torch.Tensor | BlockMask | None" = None,
        cache: KVCache | None = None,
        logits_to_keep: int = 0,
        attention: str = "sdpa",
        projections: str = "linear",
    ) -> torch.Tensor:
        if attention not in ATTENTION_KERNELS:
            raise ValueError(f"attention must be one of {ATTENTION_KERNELS}, not {attention!r}")
        if projections not in PROJECTION_KERNELS:
            raise ValueError(f"projections must be one of {PROJECTION_KERNELS}, not {projections!r}")
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
        if attention == "flex" and isinstance(attn_mask, torch.Tensor):
            # Once for all layers. A caller compiling this model passes the BlockMask built
            # outside it instead: inductor cannot lower flex_attention over a mask_mod whose
            # captured tensor is computed inside the same graph ("'function' object has no
            # attribute 'graph'", torch 2.11 on the H200; no valid choice on the CPU).
            attn_mask = flex_block_mask(attn_mask)
        elif attention == "decode" and isinstance(attn_mask, torch.Tensor):
            from engine.model.decode_attention import kv_lengths

            attn_mask = DecodeMask(attn_mask, kv_lengths(attn_mask))
        x = self.model.embed_tokens(input_ids)
        cos, sin = rotary_cos_sin(position_ids, self.config, x.dtype)
        if self.fuses_norms(x, projections):
            x = Residual(x, x.float().square().sum(-1).reshape(1, -1))
        for i, layer in enumerate(self.model.layers):
            kv = (cache.keys[i], cache.values[i]) if cache is not None else None
            x = layer(x, cos, sin, attn_mask, kv, position_ids[0], projections)
        if isinstance(x, Residual):
            x = x.h
        return project(self.lm_head, self.model.norm(x[:, -logits_to_keep:]), projections)

    def fuses_norms(self, x: torch.Tensor, projections: str) -> bool:
        """Whether this call runs its layers as a fused step: each layer's first RMSNorm applied
        by its qkv projection and its last residual add done by its down projection (the skinny
        kernel's norm and residual forms), one norm kernel a layer fewer. Only where that kernel
        takes all of a layer's products (a batch-1 step's few rows in bf16 on a GPU; not fp16,
        whose range the norm's weight times an unnormalized outlier of the residual stream could
        leave, where the model multiplies the weight by the normalized value)."""
        if not (FUSED_NORMS and projections == "skinny" and x.is_cuda and x.dtype == torch.bfloat16
                and self.model.layers):
            return False
        from engine.model import skinny

        layer = self.model.layers[0]
        attn, mlp = layer.self_attn, layer.mlp
        products = ((attn.qkv_proj, False), (attn.o_proj, False), (mlp.gate_up_proj, True), (mlp.down_proj, False))
        rows = x.numel() // x.shape[-1]
        return (all(linear.bias is None and skinny.takes_rows(rows, x.dtype, linear.weight, glu)
                    for linear, glu in products)
                and layer.input_layernorm.weight.dtype == x.dtype)
