"""Attention of a decoding step: a few query rows over a long KV cache, split over the keys.

A denoising step attends with the current block's tokens (4 to 8) over a cache of thousands
of positions. A flash kernel tiled over queries runs one thread block per (batch, head, 128
query rows): at batch 1, a handful of blocks for the whole GPU, each reading the whole cache
(0.79 ms of each step of the DICE-1.7B shape on the H200). flex_attention's own
split-KV kernel, which it picks for a few query rows, gives wrong logits in this model with
torch 2.11 (scripts/flex_diag.py). This is the engine's own, in two Triton kernels
(engine.model.decode_attention_kernels):

- `_partial`: one program per (batch row, key/value head, split of SPLIT keys). It reads the
  query rows of every query head that shares that key/value head (GROUP x T rows, so each key
  and value is read once for the group), runs an online softmax over its keys in tiles of
  BLOCK_N under the mask, and writes the split's running max, sum and weighted values (fp32);
- `_combine`: one program per (batch row, key/value head, query row) merges the splits. (A
  merge by the last split to finish, counted with an atomic, was measured slower on the H200:
  its loop over the splits is one program's serial tail.)

Splits past the mask's last allowed key (KV_LEN, computed once a step from the mask) read
nothing, so a cache longer than the sequence costs a launch, not reads: shapes stay fixed for
CUDA graphs whatever the sequence's length. Scores and sums are fp32; in fp32 the products
are IEEE (no TF32), so the step gives the tokens the plain path gives (tests).

The fused form (`decode_step_attention`) starts from the step's qkv projection: each program
applies q's RMSNorm and RoPE to its query rows, the programs whose split holds a position of
the window compute that window's keys (RMSNorm, RoPE) and values, use them where they read the
cache, and write them to it (no other program reads those positions). That is four kernels of
a layer (q norm/RoPE, k norm/RoPE and the cache write, the split attention, the merge) in two: with the
skinny kernel's SwiGLU form, a batch-1 step of the DICE-1.7B shape took 1.727 and 1.819 ms
against 1.897 and 1.900 without them in the same calls on the H200 (docs/benchmarks.md).

`decode_attention(q, k, v, mask, kv_len)` is a torch custom op (`dice::decode_attention`), so
that torch.compile keeps it whole inside a compiled model. Needs Triton and a CUDA device;
tests run it on the CPU through Triton's interpreter (TRITON_INTERPRET=1) where Triton is
installed.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

SPLIT = 128  # keys per program
BLOCK_N = 64  # keys per tile within a program
MIN_ROWS = 16  # tl.dot's least tile side: the query rows are padded to it


def kv_lengths(mask: torch.Tensor) -> torch.Tensor:
    """int32 [B|1]: one past the last key any query row of that batch row may attend to."""
    allowed = mask[:, 0].any(dim=1)  # [B|1, S]
    positions = torch.arange(1, allowed.shape[-1] + 1, device=mask.device, dtype=torch.int32)
    return (allowed.to(torch.int32) * positions).amax(dim=-1).to(torch.int32)


def available() -> str | None:
    """Why the kernel cannot run here (None: it can)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return "the decode attention kernel needs Triton (it comes with torch's CUDA builds)"
    return None


class Window(NamedTuple):
    """What the fused kernel needs to turn a step's qkv projection into its q, k and v: the
    q/k RMSNorm weights, RoPE's cos/sin [B, 1, T, D] (engine.model.sdar.rotary_cos_sin), the
    window's positions [T] (distinct, below the cache's length) and the norms' eps."""

    q_weight: torch.Tensor
    k_weight: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor
    positions: torch.Tensor
    heads: int
    eps: float


def _launch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, kv_len: torch.Tensor,
            split: int = SPLIT, block_n: int = BLOCK_N, num_warps: int = 4, num_stages: int = 3,
            window: Window | None = None) -> torch.Tensor:
    """The two kernels; the tile sizes are arguments for benchmarks/decode_kernels.py. With a
    `window`, q is the step's qkv projection [B, T, (H + 2 KV) D] and k, v the whole cache."""
    import triton

    from engine.model.decode_attention_kernels import _combine, _partial

    kv_heads, d = k.shape[1], k.shape[3]
    if window is None:
        b, heads, t, _ = q.shape
        q_strides = q.stride()
        extra = (q, q, q, q, q, 0, 0, 0, 0.0)  # unused pointers and strides of the fused form
    else:
        b, t, heads = q.shape[0], q.shape[1], window.heads
        sb, st, sd = q.stride()
        q_strides = (sb, d * sd, st, sd)  # query head h at columns h*D..h*D+D-1
        cos, sin = window.cos, window.sin
        if cos.stride() != sin.stride():  # the kernel reads both with one set of strides
            cos, sin = cos.contiguous(), sin.contiguous()
        extra = (window.q_weight, window.k_weight, cos, sin, window.positions,
                 cos.stride(0), cos.stride(2), cos.stride(3), window.eps)
    group = heads // kv_heads
    block_m = max(MIN_ROWS, triton.next_power_of_2(group * t))
    nsplit = triton.cdiv(mask.shape[-1], split)
    scratch = dict(device=q.device, dtype=torch.float32)
    m = torch.empty(b * kv_heads * nsplit * block_m, **scratch)
    l_ = torch.empty_like(m)
    acc = torch.empty(b * kv_heads * nsplit * block_m * d, **scratch)
    # Written as [B, T, H, D] and handed back as its [B, H, T, D] view: the model's next step
    # (transpose back, then merge the heads) is then a view, not a copy.
    out = torch.empty(b, t, heads, d, device=q.device, dtype=k.dtype).transpose(1, 2)
    mask3 = mask[:, 0].view(torch.uint8)  # bytes: Triton's loads of bool pointers vary by version
    _partial[(b * kv_heads, nsplit)](
        q, k, v, mask3, kv_len, m, l_, acc,
        *q_strides, *k.stride(), *v.stride(), *mask3.stride(),
        d ** -0.5, *extra,
        KV_HEADS=kv_heads, GROUP=group, T=t, D=d, NSPLIT=nsplit, SPLIT_=split, BLOCK_M=block_m, BLOCK_N_=block_n,
        MASK_ROWS=mask.shape[0] != 1, IEEE=k.dtype == torch.float32, FUSED=window is not None,
        T_PAD=max(MIN_ROWS, triton.next_power_of_2(t)), num_warps=num_warps, num_stages=num_stages,
    )
    _combine[(b * kv_heads, group * t)](
        m, l_, acc, out, *out.stride(),
        KV_HEADS=kv_heads, GROUP=group, T=t, D=d, NSPLIT=nsplit, BLOCK_M=block_m,
        BLOCK_S=triton.next_power_of_2(nsplit),
    )
    return out


@torch.library.custom_op("dice::decode_attention", mutates_args=())
def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                     kv_len: torch.Tensor) -> torch.Tensor:
    """Attention of q [B, H, T, D] over k, v [B, KV, S, D] (H a multiple of KV; query head h
    reads key/value head h // (H / KV), as Qwen3 does) under the bool mask [B|1, 1, T, S],
    with kv_len = kv_lengths(mask); [B, H, T, D] in q's dtype."""
    return _launch(q, k, v, mask, kv_len)


@decode_attention.register_fake
def _(q, k, v, mask, kv_len):
    b, heads, t, d = q.shape
    return q.new_empty(b, t, heads, d).transpose(1, 2)


@torch.library.custom_op("dice::decode_step_attention", mutates_args=("keys", "values"))
def decode_step_attention(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, cos: torch.Tensor,
                          sin: torch.Tensor, positions: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                          mask: torch.Tensor, kv_len: torch.Tensor, heads: int, eps: float) -> torch.Tensor:
    """A step's attention from its qkv projection [B, T, (H + 2 KV) D] in one pass: q and k
    through their RMSNorm (q_weight, k_weight, eps) and RoPE (cos, sin [B, 1, T, D]), this
    step's keys and values written to the cache `keys`, `values` [B, KV, S_cache, D] at
    `positions` [T] (distinct, below S_cache), and attention over the cache's first S
    positions under the bool mask [B|1, 1, T, S]: what the model's Attention does with q_norm,
    k_norm, rotary, the cache write and decode_attention, in two kernels instead of four.
    [B, H, T, D] in the cache's dtype."""
    return _launch(qkv, keys, values, mask, kv_len, window=Window(q_weight, k_weight, cos, sin, positions, heads, eps))


@decode_step_attention.register_fake
def _(qkv, q_weight, k_weight, cos, sin, positions, keys, values, mask, kv_len, heads, eps):
    b, t = qkv.shape[:2]
    return keys.new_empty(b, t, heads, keys.shape[3]).transpose(1, 2)
