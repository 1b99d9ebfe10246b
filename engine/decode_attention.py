"""Attention of a decoding step: a few query rows over a long KV cache, split over the keys.

A denoising step attends with the current block's tokens (4 to 8) over a cache of thousands
of positions. A flash kernel tiled over queries runs one thread block per (batch, head, 128
query rows): at batch 1, a handful of blocks for the whole GPU, each reading the whole cache
(0.79 ms of each step of the DICE-1.7B shape on the H200, 2026-12-02). flex_attention's own
split-KV kernel, which it picks for a few query rows, gives wrong logits in this model with
torch 2.11 (scripts/flex_diag.py). This is the engine's own, in two Triton kernels:

- `_partial`: one program per (batch row, key/value head, split of SPLIT keys). It reads the
  query rows of every query head that shares that key/value head (GROUP x T rows, so each key
  and value is read once for the group), runs an online softmax over its keys in tiles of
  BLOCK_N under the mask, and writes the split's running max, sum and weighted values (fp32);
- `_combine`: one program per (batch row, key/value head, query row) merges the splits.

Splits past the mask's last allowed key (KV_LEN, computed once a step from the mask) read
nothing, so a cache longer than the sequence costs a launch, not reads: shapes stay fixed for
CUDA graphs whatever the sequence's length. Scores and sums are fp32; in fp32 the products
are IEEE (no TF32), so the step gives the tokens the plain path gives (tests).

`decode_attention(q, k, v, mask, kv_len)` is a torch custom op (`dice::decode_attention`), so
that torch.compile keeps it whole inside a compiled model. Needs Triton and a CUDA device;
tests run it on the CPU through Triton's interpreter (TRITON_INTERPRET=1) where Triton is
installed.
"""

from __future__ import annotations

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


def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def _partial(Q, K, V, Mask, KVLen, Mo, Lo, Acc,
                 sqb, sqh, sqt, sqd, skb, skh, sks, skd, svb, svh, svs, svd, smb, smt, sms,
                 scale,
                 KV_HEADS: tl.constexpr, GROUP: tl.constexpr, T: tl.constexpr, D: tl.constexpr,
                 NSPLIT: tl.constexpr, SPLIT_: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N_: tl.constexpr,
                 MASK_ROWS: tl.constexpr, IEEE: tl.constexpr):
        pid_bh = tl.program_id(0)
        pid_s = tl.program_id(1)
        b = pid_bh // KV_HEADS
        kvh = pid_bh % KV_HEADS
        rows = tl.arange(0, BLOCK_M)  # row r: query head kvh * GROUP + r // T, token r % T
        row_ok = rows < GROUP * T
        head = kvh * GROUP + rows // T
        t = rows % T
        d = tl.arange(0, D)
        q = tl.load(Q + b * sqb + head[:, None] * sqh + t[:, None] * sqt + d[None, :] * sqd,
                    mask=row_ok[:, None], other=0.0)
        mb = b if MASK_ROWS else 0
        kv_len = tl.load(KVLen + mb)
        lo = pid_s * SPLIT_
        hi = tl.minimum(lo + SPLIT_, kv_len)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, D], tl.float32)
        for start in range(lo, hi, BLOCK_N_):
            n = start + tl.arange(0, BLOCK_N_)
            n_ok = n < hi
            k = tl.load(K + b * skb + kvh * skh + n[:, None] * sks + d[None, :] * skd, mask=n_ok[:, None], other=0.0)
            if IEEE:
                s = tl.dot(q, tl.trans(k), input_precision="ieee")
            else:
                s = tl.dot(q, tl.trans(k))
            s = s * scale
            allowed = tl.load(Mask + mb * smb + t[:, None] * smt + n[None, :] * sms,
                              mask=row_ok[:, None] & n_ok[None, :], other=0)
            s = tl.where(allowed != 0, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with nothing allowed yet
            p = tl.exp(s - m_safe[:, None])
            alpha = tl.exp(m_i - m_safe)
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(V + b * svb + kvh * svh + n[:, None] * svs + d[None, :] * svd, mask=n_ok[:, None], other=0.0)
            if IEEE:
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
            else:
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        at = (pid_bh * NSPLIT + pid_s) * BLOCK_M + rows
        tl.store(Mo + at, m_i)
        tl.store(Lo + at, l_i)
        tl.store(Acc + at[:, None] * D + d[None, :], acc)

    @triton.jit
    def _combine(Mo, Lo, Acc, O, sob, soh, sot, sod,
                 KV_HEADS: tl.constexpr, GROUP: tl.constexpr, T: tl.constexpr, D: tl.constexpr,
                 NSPLIT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr):
        pid_bh = tl.program_id(0)
        r = tl.program_id(1)
        b = pid_bh // KV_HEADS
        kvh = pid_bh % KV_HEADS
        s = tl.arange(0, BLOCK_S)
        s_ok = s < NSPLIT
        d = tl.arange(0, D)
        at = (pid_bh * NSPLIT + s) * BLOCK_M + r
        m = tl.load(Mo + at, mask=s_ok, other=float("-inf"))
        l_ = tl.load(Lo + at, mask=s_ok, other=0.0)
        top = tl.max(m, 0)
        top = tl.where(top == float("-inf"), 0.0, top)
        w = tl.exp(m - top)
        acc = tl.load(Acc + at[:, None] * D + d[None, :], mask=s_ok[:, None], other=0.0)
        out = tl.sum(acc * w[:, None], 0) / tl.sum(w * l_, 0)
        head = kvh * GROUP + r // T
        t = r % T
        tl.store(O + b * sob + head * soh + t * sot + d * sod, out.to(O.dtype.element_ty))

    return _partial, _combine


_compiled = None


def _launch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, kv_len: torch.Tensor,
            split: int = SPLIT, block_n: int = BLOCK_N, num_warps: int = 4, num_stages: int = 3) -> torch.Tensor:
    """The two kernels; the tile sizes are arguments for benchmarks/decode_kernels.py."""
    import triton

    global _compiled
    if _compiled is None:
        _compiled = _kernels()
    partial, combine = _compiled
    b, heads, t, d = q.shape
    kv_heads, s = k.shape[1], k.shape[2]
    group = heads // kv_heads
    block_m = max(MIN_ROWS, triton.next_power_of_2(group * t))
    nsplit = triton.cdiv(s, split)
    scratch = dict(device=q.device, dtype=torch.float32)
    m = torch.empty(b * kv_heads * nsplit * block_m, **scratch)
    l_ = torch.empty_like(m)
    acc = torch.empty(b * kv_heads * nsplit * block_m * d, **scratch)
    # Written as [B, T, H, D] and handed back as its [B, H, T, D] view: the model's next step
    # (transpose back, then merge the heads) is then a view, not a copy.
    out = torch.empty(b, t, heads, d, device=q.device, dtype=q.dtype).transpose(1, 2)
    mask3 = mask[:, 0].view(torch.uint8)  # bytes: Triton's loads of bool pointers vary by version
    partial[(b * kv_heads, nsplit)](
        q, k, v, mask3, kv_len, m, l_, acc,
        *q.stride(), *k.stride(), *v.stride(), *mask3.stride(),
        d ** -0.5,
        KV_HEADS=kv_heads, GROUP=group, T=t, D=d, NSPLIT=nsplit, SPLIT_=split, BLOCK_M=block_m, BLOCK_N_=block_n,
        MASK_ROWS=mask.shape[0] != 1, IEEE=q.dtype == torch.float32, num_warps=num_warps, num_stages=num_stages,
    )
    combine[(b * kv_heads, group * t)](
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
