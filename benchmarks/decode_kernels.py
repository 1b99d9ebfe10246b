"""The kernels of a decoding step, alone, on the GPU machine: the step's projections and its
attention at the DICE-1.7B shape, each way they could run.

    python benchmarks/decode_kernels.py [--rows 8,64] [--quick]

How: every variant runs 28 times in one CUDA graph (one call per layer, as in a step), each
call on a weight (or KV cache) of its own, so that nothing is served from the 50 MB L2 that
a step would have to read from memory; the graph replayed 20 times after a warm-up, CUDA
events, median; per call = graph / 28. GB/s counts the weight (or cache) bytes a call must
read. Projections: cuBLAS as the engine calls it (F.linear), cuBLAS on the transposed
product, and `skinny`, a Triton kernel tiled for a step's few rows (one program per few
output features, so that even the 2048-feature projections spread over every
multiprocessor) over a grid of tile sizes; it was tried for issue 17 and was not faster than
cuBLAS (docs/benchmarks.md, 2026-12-04), so the engine does not use it. Attention: the
engine's decode kernel (engine.decode_attention) with other split and tile sizes. Writes
$OUT/decode_kernels.json (OUT defaults to ./.device-out).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engine import decode_attention as attention_kernel  # noqa: E402
from engine.model import block_causal_mask, grouped_attention  # noqa: E402

LAYERS = 28
MAX_ERR = 0.05  # bf16 against the reference (F.linear, SDPA): a variant past it is wrong, never "best"
HIDDEN, INTERMEDIATE, HEADS, KV_HEADS, HEAD_DIM = 2048, 6144, 16, 8, 128
PROJECTIONS = {  # name: (out features, in features), DICE-1.7B
    "qkv": ((HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN),
    "o": (HEADS * HEAD_DIM, HIDDEN),
    "gate_up": (2 * INTERMEDIATE, HIDDEN),
    "down": (HIDDEN, INTERMEDIATE),
}


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def _skinny(X, W, Y, M, N, K, sxm, sxk, swn, swk, sym, syn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, IEEE: tl.constexpr):
        pid = tl.program_id(0)
        rm = tl.arange(0, BLOCK_M)
        rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        m_ok = rm < M
        n_ok = rn < N
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for k0 in range(0, K, BLOCK_K):
            kk = k0 + rk
            k_ok = kk < K
            x = tl.load(X + rm[:, None] * sxm + kk[None, :] * sxk, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
            w = tl.load(W + rn[:, None] * swn + kk[None, :] * swk, mask=n_ok[:, None] & k_ok[None, :], other=0.0)
            if IEEE:
                acc += tl.dot(x, tl.trans(w), input_precision="ieee")
            else:
                acc += tl.dot(x, tl.trans(w))
        tl.store(Y + rm[:, None] * sym + rn[None, :] * syn, acc.to(Y.dtype.element_ty),
                 mask=m_ok[:, None] & n_ok[None, :])

    return _skinny


_compiled = None


def skinny(x: torch.Tensor, weight: torch.Tensor, block_n: int, block_k: int, num_warps: int,
           num_stages: int) -> torch.Tensor:
    """x [m <= 16, k] times weight [n, k]^T: one program per block_n output features, reading
    its rows of the weight once in block_k-wide tiles against all of x's rows (padded to 16)."""
    import triton

    global _compiled
    if _compiled is None:
        _compiled = _kernel()
    m, k = x.shape
    n = weight.shape[0]
    y = torch.empty(m, n, device=x.device, dtype=x.dtype)
    _compiled[(triton.cdiv(n, block_n),)](
        x, weight, y, m, n, k, *x.stride(), *weight.stride(), *y.stride(),
        BLOCK_M=max(16, triton.next_power_of_2(m)), BLOCK_N=block_n, BLOCK_K=block_k,
        IEEE=x.dtype == torch.float32, num_warps=num_warps, num_stages=num_stages,
    )
    return y


def graph_ms(calls) -> float:
    """Milliseconds per call of `calls` (a list of zero-argument functions) replayed in one graph."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for fn in calls:  # warm-up: Triton compiles, cuBLAS picks, outside the capture
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for fn in calls:
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times) / len(calls)


def projections(rows: int, quick: bool) -> dict:
    out = {}
    for name, (n, k) in PROJECTIONS.items():
        weights = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(LAYERS)]
        x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
        reference = F.linear(x, weights[0])
        bytes_per_call = n * k * 2
        row = {}

        def record(label, fn):
            try:
                got = fn(weights[0])
                err = (got.float() - reference.float()).abs().max().item()
                ms = graph_ms([lambda w=w: fn(w) for w in weights])
                row[label] = {"us": 1000 * ms, "gb_per_s": bytes_per_call / ms / 1e6, "max_err": err}
            except Exception as exc:  # a config Triton refuses is reported, the rest still runs
                row[label] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}

        record("cublas F.linear", lambda w: F.linear(x, w))
        record("cublas mm(W, x^T)^T", lambda w: torch.mm(w, x.t()).t())
        if rows <= 16:
            grid = [(bn, bk, nw, ns) for bn in (16, 32, 64) for bk in (128, 256, 512)
                    for nw, ns in (((4, 4),) if quick else ((4, 3), (4, 5), (8, 4)))]
            for bn, bk, nw, ns in grid:
                record(f"skinny n{bn} k{bk} w{nw} s{ns}",
                       lambda w, bn=bn, bk=bk, nw=nw, ns=ns: skinny(x, w, bn, bk, nw, ns))
        ok = {label: v for label, v in row.items() if "us" in v and v["max_err"] <= MAX_ERR}
        best = min(ok, key=lambda label: ok[label]["us"])
        out[name] = {"shape": [rows, n, k], "variants": row, "best": best}
        print(f"[projections rows={rows}] {name} {n}x{k}: cublas {row['cublas F.linear'].get('us', 0):.2f} us, "
              f"best {best} {ok[best]['us']:.2f} us ({ok[best]['gb_per_s']:.0f} GB/s)", flush=True)
        del weights
        torch.cuda.empty_cache()
    return out


def attention(batch: int, seq: int, cache: int = 2048, window: int = 8) -> dict:
    """The step's attention: `window` query rows at positions seq-window.. over a `cache`-long
    KV cache of which `seq` positions are filled."""
    caches = [(torch.randn(batch, KV_HEADS, cache, HEAD_DIM, device="cuda", dtype=torch.bfloat16),
               torch.randn(batch, KV_HEADS, cache, HEAD_DIM, device="cuda", dtype=torch.bfloat16))
              for _ in range(LAYERS)]
    q = torch.randn(batch, window, HEADS, HEAD_DIM, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    positions = torch.arange(seq - window, seq, device="cuda")
    mask = block_causal_mask(positions, torch.arange(cache, device="cuda"), 4)  # [1, 1, T, S]
    kv_len = attention_kernel.kv_lengths(mask)
    reference = grouped_attention(q, *caches[0], mask).float()
    bytes_per_call = 2 * batch * KV_HEADS * seq * HEAD_DIM * 2
    row = {}
    for split in (32, 64, 128, 256):
        for block_n in (32, 64):
            if block_n > split:
                continue
            for nw in (4, 8):
                label = f"split {split} n{block_n} w{nw}"
                try:
                    got = attention_kernel._launch(q, *caches[0], mask, kv_len, split, block_n, nw)
                    ms = graph_ms([lambda kv=kv, s=split, bn=block_n, w=nw: attention_kernel._launch(
                        q, kv[0], kv[1], mask, kv_len, s, bn, w) for kv in caches])
                    row[label] = {"us": 1000 * ms, "gb_per_s": bytes_per_call / ms / 1e6,
                                  "max_err": (got.float() - reference).abs().max().item()}
                except Exception as exc:
                    row[label] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    ok = {label: v for label, v in row.items() if "us" in v and v["max_err"] <= MAX_ERR}
    current = f"split {attention_kernel.SPLIT} n{attention_kernel.BLOCK_N} w4"
    best = min(ok, key=lambda label: ok[label]["us"]) if ok else None
    print(f"[attention b={batch} seq={seq}] current {current} {ok.get(current, {}).get('us', float('nan')):.2f} us, "
          f"best {best} {ok[best]['us'] if best else float('nan'):.2f} us"
          + ("" if ok else f" (all failed: {next(iter(row.values()))})"), flush=True)
    return {"batch": batch, "seq": seq, "cache": cache, "window": window, "variants": row, "best": best,
            "current": current}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="8,64", help="rows of the projections (batch x 8 tokens)")
    parser.add_argument("--quick", action="store_true", help="fewer tile sizes")
    parser.add_argument("--skip-projections", action="store_true")
    args = parser.parse_args()
    out_dir = Path(os.environ.get("OUT", ".device-out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "layers": LAYERS}
    began = time.perf_counter()
    for rows in [] if args.skip_projections else map(int, args.rows.split(",")):
        results[f"projections_rows{rows}"] = projections(rows, args.quick)
        (out_dir / "decode_kernels.json").write_text(json.dumps(results, indent=2) + "\n")
    for batch, seq in ((1, 1088), (1, 2040), (8, 1088)):
        results[f"attention_b{batch}_seq{seq}"] = attention(batch, seq)
        (out_dir / "decode_kernels.json").write_text(json.dumps(results, indent=2) + "\n")
    results["seconds"] = round(time.perf_counter() - began, 1)
    (out_dir / "decode_kernels.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
