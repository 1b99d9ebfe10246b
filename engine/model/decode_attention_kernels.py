"""The Triton kernels of engine.model.decode_attention (imported only where Triton is: a CPU-only
torch has none). Triton resolves a kernel's helpers among its module's globals, so they live
at a module's top level. Read engine.model.decode_attention first."""

import triton
import triton.language as tl


@triton.jit
def _norm_rope(X, rows, ok, d, W, Cos, Sin, cos_rows, eps, sxd, scd, D: tl.constexpr):
    """RMSNorm then RoPE of the rows of X at offsets `rows` (fp32): x * rsqrt(mean(x^2) + eps),
    rounded to X's dtype, times the norm's weight, then x * cos + rotate_half(x) * sin. The
    model rounds to X's dtype after the weight and after each RoPE product too; this rounds
    once at the end, as torch.compile's fused kernels do (in fp32 the two are the same)."""
    half: tl.constexpr = D // 2
    d2 = (d + half) % D  # rotate_half: element d takes -x[d + half] below half, x[d - half] above
    x = tl.load(X + rows[:, None] + d[None, :] * sxd, mask=ok[:, None], other=0.0).to(tl.float32)
    x2 = tl.load(X + rows[:, None] + d2[None, :] * sxd, mask=ok[:, None], other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, 1) / D + eps)
    dtype = X.dtype.element_ty
    w = tl.load(W + d).to(tl.float32)
    w2 = tl.load(W + d2).to(tl.float32)
    xn = (x * rstd[:, None]).to(dtype).to(tl.float32) * w[None, :]
    xn2 = (x2 * rstd[:, None]).to(dtype).to(tl.float32) * w2[None, :]
    cos = tl.load(Cos + cos_rows[:, None] + d[None, :] * scd, mask=ok[:, None], other=0.0).to(tl.float32)
    sin = tl.load(Sin + cos_rows[:, None] + d[None, :] * scd, mask=ok[:, None], other=0.0).to(tl.float32)
    sign = tl.where(d < half, -1.0, 1.0)
    return xn * cos + (sign[None, :] * xn2) * sin

@triton.jit
def _partial(Q, K, V, Mask, KVLen, Mo, Lo, Acc,
             sqb, sqh, sqt, sqd, skb, skh, sks, skd, svb, svh, svs, svd, smb, smt, sms,
             scale,
             QW, KW, Cos, Sin, Pos, scb, sct, scd, eps,
             KV_HEADS: tl.constexpr, GROUP: tl.constexpr, T: tl.constexpr, D: tl.constexpr,
             NSPLIT: tl.constexpr, SPLIT_: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N_: tl.constexpr,
             MASK_ROWS: tl.constexpr, IEEE: tl.constexpr, FUSED: tl.constexpr, T_PAD: tl.constexpr):
    pid_bh = tl.program_id(0)
    pid_s = tl.program_id(1)
    b = pid_bh // KV_HEADS
    kvh = pid_bh % KV_HEADS
    rows = tl.arange(0, BLOCK_M)  # row r: query head kvh * GROUP + r // T, token r % T
    row_ok = rows < GROUP * T
    head = kvh * GROUP + rows // T
    t = rows % T
    d = tl.arange(0, D)
    q_rows = b * sqb + head * sqh + t * sqt
    lo = pid_s * SPLIT_
    if FUSED:
        # Q is the qkv projection [B, T, (H + 2 KV) D]: q's norm and RoPE are applied here,
        # and this step's keys and values (rows j of the window, at positions Pos[j]) are
        # taken from it where the cache is read, then written to the cache by the program
        # whose split holds their position (no other program reads those keys).
        heads = KV_HEADS * GROUP
        q = _norm_rope(Q, q_rows, row_ok, d, QW, Cos, Sin, b * scb + t * sct, eps, sqd, scd, D)
        q = q.to(K.dtype.element_ty)
        j = tl.arange(0, T_PAD)
        j_ok = j < T
        pos = tl.load(Pos + j, mask=j_ok, other=-1)
        first = tl.min(tl.where(j_ok, pos, 2147483647))
        last = tl.max(pos)
        # Only the programs whose split holds a window position (one or two of a row's splits;
        # the last split also writes positions past the mask's keys) compute its keys and
        # values, and only their tiles that hold one pick them.
        upper = tl.where(pid_s == NSPLIT - 1, 2147483647, lo + SPLIT_)  # one past the positions it writes
        touches = (first < upper) & (last >= lo)
        fresh_k = tl.zeros([T_PAD, D], K.dtype.element_ty)
        fresh_v = tl.zeros([T_PAD, D], V.dtype.element_ty)
        if touches:
            fresh_rows = b * sqb + j * sqt
            fresh_k = _norm_rope(Q, fresh_rows + (heads + kvh) * D * sqd, j_ok, d, KW, Cos, Sin, b * scb + j * sct,
                                 eps, sqd, scd, D).to(K.dtype.element_ty)
            fresh_v = tl.load(Q + fresh_rows[:, None] + ((heads + KV_HEADS + kvh) * D + d[None, :]) * sqd,
                              mask=j_ok[:, None], other=0.0).to(V.dtype.element_ty)
    else:
        q = tl.load(Q + q_rows[:, None] + d[None, :] * sqd, mask=row_ok[:, None], other=0.0)
    mb = b if MASK_ROWS else 0
    kv_len = tl.load(KVLen + mb)
    hi = tl.minimum(lo + SPLIT_, kv_len)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(lo, hi, BLOCK_N_):
        n = start + tl.arange(0, BLOCK_N_)
        n_ok = n < hi
        k = tl.load(K + b * skb + kvh * skh + n[:, None] * sks + d[None, :] * skd, mask=n_ok[:, None], other=0.0)
        v = tl.load(V + b * svb + kvh * svh + n[:, None] * svs + d[None, :] * svd, mask=n_ok[:, None], other=0.0)
        if FUSED:
            if (first < start + BLOCK_N_) & (last >= start):
                # Key n is window row j where n == Pos[j]: a one-hot product picks that row
                # (exact: one term), the cache's row elsewhere.
                pick = n[:, None] == pos[None, :]
                fresh = tl.max(pick.to(tl.int32), 1) > 0
                if IEEE:
                    k_new = tl.dot(pick.to(k.dtype), fresh_k, input_precision="ieee")
                    v_new = tl.dot(pick.to(v.dtype), fresh_v, input_precision="ieee")
                else:
                    k_new = tl.dot(pick.to(k.dtype), fresh_k)
                    v_new = tl.dot(pick.to(v.dtype), fresh_v)
                k = tl.where(fresh[:, None], k_new.to(k.dtype), k)
                v = tl.where(fresh[:, None], v_new.to(v.dtype), v)
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
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    at = (pid_bh * NSPLIT + pid_s) * BLOCK_M + rows
    tl.store(Mo + at, m_i)
    tl.store(Lo + at, l_i)
    tl.store(Acc + at[:, None] * D + d[None, :], acc)
    if FUSED:
        if touches:
            mine = j_ok & (pos >= lo) & (pos < upper)
            tl.store(K + b * skb + kvh * skh + pos[:, None] * sks + d[None, :] * skd, fresh_k, mask=mine[:, None])
            tl.store(V + b * svb + kvh * svh + pos[:, None] * svs + d[None, :] * svd, fresh_v, mask=mine[:, None])


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
