"""Which kernels compute the SDAR model's forward, and which decoding path a local engine runs.

engine.model.sdar writes the model's math once, through `sdar.Kernels` (torch's F.linear and
SDPA: the reference). `Routed` computes the same through other kernels:

- attention: "sdpa" (torch's scaled_dot_product_attention), "flex" (flex_attention over the
  same mask as a BlockMask, which skips the key tiles the mask hides) or "decode" (the
  engine's split-KV kernel for a step's few query rows, engine.model.decode_attention);
- projections: "linear" (F.linear: cuBLAS on a GPU) or "skinny" (engine.model.skinny, the
  engine's tensor-core kernel for a step's few rows, where it takes the product);
- fusions (`Fusion`), on by default, each computing what the separate kernels compute: at
  batch 1 the decode kernel applies q/k RMSNorm and RoPE and writes the KV cache itself
  (`step`, with the skinny kernel's SwiGLU form for the MLP), and the skinny kernels apply
  each layer's attention RMSNorm in its qkv product and add the MLP's residual in its down
  product (`norms`: `FusedNorms`).

The decoding paths (engine.decoding.paths runs them) pair a way of running the steps (eager,
CUDA graphs, torch.compile) with these kernels: PATH_ATTENTION and PATH_PROJECTIONS say
which, `default_path` chooses the fastest the machine runs, FALLBACK where one that fails hands
over. They give the same tokens (tests/engine/decoding/test_decode.py, and the GPU tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from engine.model import decode_attention, skinny
from engine.model.sdar import Kernels, RMSNorm, SDARConfig, SDARForCausalLM, grouped_attention

ATTENTION_KERNELS = ("sdpa", "flex", "decode")
PROJECTION_KERNELS = ("linear", "skinny")

FLEX_BLOCK = 128  # flex_attention's default tile of queries and of keys
# kernel_options of every flex_attention call. For a few query rows flex_attention picks its
# split-KV decoding kernel, which with torch 2.11 gives wrong logits in this model on the H200
# (1.49 off in fp32; the general kernel 3.1e-6; scripts/flex_diag.py), so the general kernel
# is forced.
FLEX_KERNEL_OPTIONS: dict | None = {"FORCE_USE_FLEX_ATTENTION": True}

# The fused attention pays its norms and RoPE in every program before its first read of the
# cache: at batch 1 (one wave of programs) a step is ~0.09 ms faster than with the separate
# kernels; at batch 8 (several waves) it was 0.1 ms slower (H200), so it serves batch 1.
FUSED_MAX_BATCH = 1
# Query rows (query heads per key/value head x tokens) up to which a step's attention goes
# through the decode kernel; past it (a long first block), through SDPA.
DECODE_MAX_ROWS = 128


def flex_supported(config: SDARConfig) -> bool:
    """flex_attention's kernels (and the decode kernel) want a head dimension of at least 16,
    a power of two."""
    d = config.head_dim
    return d >= 16 and d & (d - 1) == 0


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
    """sdar.grouped_attention through flex_attention, the query heads of a key/value head read
    together (enable_gqa)."""
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention(q, k, v, block_mask=block_mask, enable_gqa=q.shape[1] != k.shape[1],
                          kernel_options=FLEX_KERNEL_OPTIONS)


class DecodeMask(NamedTuple):
    """The mask of a step through the decode kernel, with its key lengths (computed once for
    all layers; decode_attention.kv_lengths)."""

    mask: torch.Tensor
    kv_len: torch.Tensor

    @property
    def shape(self) -> torch.Size:  # read like the mask it wraps (the SDPA fallback's key length)
        return self.mask.shape


class Residual(NamedTuple):
    """A fused-norms step's hidden state: h [B, T, H] and its rows' sums of squares in parts,
    part [P, B * T], as the skinny kernel's residual form writes them, so that the next
    projection applies the RMSNorm itself (skinny.norm_linear)."""

    h: torch.Tensor
    part: torch.Tensor


class Normed(NamedTuple):
    """norm(state.h), left to the projection that reads it."""

    state: Residual
    norm: RMSNorm


@dataclass(frozen=True)
class Fusion:
    """Which of a step's fused kernels run; off, the separate kernels compute the same (to
    compare them: benchmarks/engine_speed.py).

    - `step`: at batch 1 the decode kernel applies q/k RMSNorm and RoPE and writes the cache
      (decode_attention.decode_step_attention), and the MLP's gate/up product and SwiGLU are
      one skinny kernel (skinny.glu_linear);
    - `norms` (with `step`): at batch 1 each layer's attention RMSNorm is applied by its qkv
      product and the residual add before it by the down product (skinny.norm_linear,
      residual_linear): one norm kernel a layer fewer. Not the other norms: the norm form
      costs each thread block ~0.7 us, more than the kernel it would save for gate_up's and
      the vocabulary's larger grids."""

    step: bool = True
    norms: bool = True


class Routed(Kernels):
    """sdar.Kernels through the chosen attention and projection kernels and fusions."""

    def __init__(self, attention: str = "sdpa", projections: str = "linear", fusion: Fusion = Fusion()):
        if attention not in ATTENTION_KERNELS:
            raise ValueError(f"attention must be one of {ATTENTION_KERNELS}, not {attention!r}")
        if projections not in PROJECTION_KERNELS:
            raise ValueError(f"projections must be one of {PROJECTION_KERNELS}, not {projections!r}")
        self.attention, self.projections, self.fusion = attention, projections, fusion
        self.fused_norms = FusedNorms(self) if fusion.step and fusion.norms and projections == "skinny" else None

    def prepare(self, model: SDARForCausalLM, x: torch.Tensor, mask):
        if self.attention == "flex" and isinstance(mask, torch.Tensor):
            # Once for all layers. A caller compiling the model passes the BlockMask built
            # outside it instead: inductor cannot lower flex_attention over a mask_mod whose
            # captured tensor is computed inside the same graph (torch 2.11).
            mask = flex_block_mask(mask)
        elif self.attention == "decode":
            mask = DecodeMask(mask, decode_attention.kv_lengths(mask))
        if self.fused_norms is not None and self.fuses_norms(model, x):
            return Residual(x, x.float().square().sum(-1).reshape(1, -1)), mask, self.fused_norms
        return x, mask, self

    def fuses_norms(self, model: SDARForCausalLM, x: torch.Tensor) -> bool:
        """Whether this forward fuses its norms (Fusion.norms): only where the skinny kernel
        takes all of a layer's products (a batch-1 step's few rows in bf16 on a GPU; not fp16,
        whose range the norm's weight times an unnormalized outlier of the residual stream
        could leave)."""
        if not (self.fused_norms is not None and x.is_cuda and x.dtype == torch.bfloat16 and model.model.layers):
            return False
        layer = model.model.layers[0]
        attn, mlp = layer.self_attn, layer.mlp
        products = ((attn.qkv_proj, False), (attn.o_proj, False), (mlp.gate_up_proj, True), (mlp.down_proj, False))
        rows = x.numel() // x.shape[-1]
        return (all(linear.bias is None and skinny.takes_rows(rows, x.dtype, linear.weight, glu)
                    for linear, glu in products)
                and layer.input_layernorm.weight.dtype == x.dtype)

    def project(self, linear: nn.Linear, x, residual=None):
        if self.projections == "skinny" and linear.bias is None and skinny.usable(x, linear.weight):
            y = skinny.linear(x, linear.weight)
            return y if residual is None else residual + y
        return super().project(linear, x, residual)

    def glu(self, linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        if (self.fusion.step and self.projections == "skinny" and linear.bias is None
                and skinny.usable(x, linear.weight, glu=True)):
            return skinny.glu_linear(x, linear.weight)
        return super().glu(linear, x)

    def fused_attention(self, attn, qkv, cos, sin, mask, kv, positions):
        b, t, _ = qkv.shape
        if not (self.fusion.step and self.attention == "decode" and b <= FUSED_MAX_BATCH and kv is not None
                and attn.heads // attn.kv_heads * t <= DECODE_MAX_ROWS):
            return None
        return decode_attention.decode_step_attention(qkv, attn.q_norm.weight, attn.k_norm.weight, cos, sin,
                                                      positions, *kv, mask.mask, mask.kv_len, attn.heads,
                                                      attn.q_norm.eps)

    def attend(self, q, k, v, mask):
        if self.attention == "flex":
            return flex_grouped_attention(q, k, v, mask)
        if self.attention == "decode":
            if q.shape[1] // k.shape[1] * q.shape[2] > DECODE_MAX_ROWS:
                return grouped_attention(q, k, v, mask.mask)
            return decode_attention.decode_attention(q, k, v, mask.mask, mask.kv_len)
        return grouped_attention(q, k, v, mask)


class FusedNorms(Routed):
    """A Routed forward whose hidden state is a Residual (Fusion.norms): each layer's
    attention RMSNorm applied by its qkv product, its MLP's residual add by its down product."""

    def __init__(self, routed: Routed):
        self.attention, self.projections, self.fusion = routed.attention, routed.projections, routed.fusion
        self.fused_norms = self

    def hidden(self, x: Residual) -> torch.Tensor:
        return x.h

    def normed(self, norm: RMSNorm, x: Residual) -> Normed:
        return Normed(x, norm)

    def project(self, linear: nn.Linear, x, residual=None):
        if isinstance(x, Normed):
            return skinny.norm_linear(x.state.h, x.state.part, x.norm.weight, linear.weight, x.norm.eps)
        if residual is not None:
            return Residual(*skinny.residual_linear(x, linear.weight, residual))
        return super().project(linear, x)


# --- the decoding paths ---------------------------------------------------------------------

PATHS = ("recompute", "cached", "static", "static-flex", "static-decode", "graphs", "compiled", "flex", "decode",
         "skinny")
FAST_PATHS = ("graphs", "compiled", "flex", "decode", "skinny")  # the GPU-only ones
# The fastest path that gives the plain path's tokens on the H200 (tests/engine/decoding/
# test_decode_gpu.py). Its first use costs ~30 s of compilation for one candidate and ~20 s for
# the 8-row bucket, paid at load (engine.decoding.decode.warm_up), and kept by inductor's cache.
GPU_DEFAULT = "skinny"
# Where a fast path that fails (to compile, to capture, to run) hands over: the next fastest
# that gives the same tokens, down to the eager `cached`, which needs nothing of the stack.
FALLBACK = {"skinny": "decode", "decode": "flex", "flex": "compiled", "compiled": "cached", "graphs": "cached"}
# The attention kernel of each path that does not use SDPA, and the projections' kernel of
# each that does not use F.linear.
PATH_ATTENTION = {"flex": "flex", "static-flex": "flex", "decode": "decode", "static-decode": "decode",
                  "skinny": "decode"}
PATH_PROJECTIONS = {"skinny": "skinny"}


@dataclass(frozen=True)
class Routing:
    """How a local engine decodes: its path (None: `default_path` for the model) and the
    fusions of its steps. `engine.load(..., routing=Routing(path="flex"))` picks another path."""

    path: str | None = None
    fusion: Fusion = field(default_factory=Fusion)


def default_path(model: SDARForCausalLM) -> str:
    """GPU_DEFAULT on a GPU (`decode` where CuPy is missing or the GPU is older than compute
    capability 8.0; `graphs` where Triton is missing: inductor, so every compiled path, needs it
    too; `compiled` for a head dimension neither attention kernel takes), the eager `cached`
    elsewhere. (An fp32 model's `skinny` steps run `decode`'s products: the kernel takes bf16
    and fp16.)"""
    if model.lm_head.weight.device.type != "cuda":
        return "cached"
    if decode_attention.available() is not None:
        return "graphs"
    if not flex_supported(model.config):
        return "compiled"
    return GPU_DEFAULT if skinny.available() is None else FALLBACK[GPU_DEFAULT]


def path_kernels(path: str, fusion: Fusion = Fusion()) -> Kernels:
    """The kernels of `path`'s steps."""
    return Routed(PATH_ATTENTION.get(path, "sdpa"), PATH_PROJECTIONS.get(path, "linear"), fusion)


def unavailable(path: str, model: SDARForCausalLM) -> str | None:
    """Why `path` cannot run this model here, or None."""
    if path not in PATHS:
        return f"unknown decoding path {path!r}; choose one of {', '.join(PATHS)}"
    attention = PATH_ATTENTION.get(path, "sdpa")
    if attention != "sdpa" and not flex_supported(model.config):
        return (f"the {path!r} decoding path needs a head dimension of at least 16, a power of two "
                f"(this model's is {model.config.head_dim})")
    why = decode_attention.available() if attention == "decode" else None
    if why is None and path in FAST_PATHS and model.lm_head.weight.device.type != "cuda":
        return f"the {path!r} decoding path needs the model on a CUDA device"
    if why is None and PATH_PROJECTIONS.get(path) == "skinny":
        why = skinny.available()
    return None if why is None else f"the {path!r} decoding path cannot run here: {why}"
