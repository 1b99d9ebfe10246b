"""The kernels of a decoding step, alone, on the GPU machine: the step's projections and its
attention at the DICE-1.7B shape, each way they could run.

    python benchmarks/decode_kernels.py [--rows 8,64] [--skip-attention]

How: every variant runs 28 times in one CUDA graph (one call per layer, as in a step), each
call on a weight (or KV cache) of its own, so that nothing is served from the 50 MB L2 that
a step would have to read from memory; the graph replayed 20 times after a warm-up, CUDA
events, median; per call = graph / 28. GB/s counts the weight (or cache) bytes a call must
read. Projections (DICE-1.7B's four per layer and the vocabulary's): cuBLAS as the engine
calls it (F.linear), cuBLAS on the transposed product, and engine.model.skinny (the engine's own
kernel for a step's few rows) over its grid of tile choices (warps per block x loads in
flight); the fastest skinny choice per shape, or null where cuBLAS was faster, goes to
$OUT/skinny_tuned.json in engine.model.skinny.TUNED's format (engine_speed.py --skinny-tuned takes it). (A
Triton kernel for the same products, tried in the run at 2ade610, was not faster than cuBLAS:
docs/benchmarks.md.) Attention: the engine's decode kernel (engine.model.decode_attention) with
other split and tile sizes. Writes $OUT/decode_kernels.json (OUT defaults to ./.device-out).
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

from engine.model import decode_attention as attention_kernel  # noqa: E402
from engine.model import skinny  # noqa: E402
from engine.model.sdar import block_causal_mask, grouped_attention  # noqa: E402

LAYERS = 28
MAX_ERR = 0.05  # bf16 against the reference (F.linear, SDPA): a variant past it is wrong, never "best"
HIDDEN, INTERMEDIATE, HEADS, KV_HEADS, HEAD_DIM = 2048, 6144, 16, 8, 128
PROJECTIONS = {  # name: (out features, in features), DICE-1.7B
    "qkv": ((HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN),
    "o": (HEADS * HEAD_DIM, HIDDEN),
    "gate_up": (2 * INTERMEDIATE, HIDDEN),
    "down": (HIDDEN, INTERMEDIATE),
    "vocab": (151936, HIDDEN),  # the lm_head, over the block's rows only
}


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


def projections(rows: int) -> dict:
    out = {}
    for name, (n, k) in PROJECTIONS.items():
        # The vocabulary's 622 MB is past any cache: two copies alternate (28 would not fit).
        copies = 2 if name == "vocab" else LAYERS
        distinct = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(copies)]
        weights = [distinct[i % copies] for i in range(LAYERS)]
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
            except Exception as exc:  # a tile choice a kernel refuses is reported, the rest still run
                row[label] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}

        record("cublas F.linear", lambda w: F.linear(x, w))
        record("cublas mm(W, x^T)^T", lambda w: torch.mm(w, x.t()).t())
        choices = {}  # label: (warps, unroll)
        if skinny.available() is None:
            for warps in (1, 2, 4, 8, 16):
                for unroll in (1, 2, 4):
                    if skinny.takes(skinny._tiles(rows), k, warps, unroll):
                        label = f"skinny w{warps} u{unroll}"
                        choices[label] = (warps, unroll)
                        record(label, lambda w, nw=warps, u=unroll: skinny.launch(x, w, nw, u))
            record("skinny (engine's choice)", lambda w: skinny.linear(x, w))
        ok = {label: v for label, v in row.items() if "us" in v and v["max_err"] <= MAX_ERR}
        best = min(ok, key=lambda label: ok[label]["us"])
        out[name] = {"shape": [rows, n, k], "variants": row, "best": best}
        tried = [label for label in choices if label in ok]
        if tried:
            fastest = min(tried, key=lambda label: ok[label]["us"])
            cublas = ok.get("cublas F.linear", {}).get("us", float("inf"))
            # null: cuBLAS stays (engine.model.skinny.TUNED)
            out[name]["skinny_best"] = list(choices[fastest]) if ok[fastest]["us"] < cublas else None
        print(f"[projections rows={rows}] {name} {n}x{k}: cublas {row['cublas F.linear'].get('us', 0):.2f} us, "
              f"best {best} {ok[best]['us']:.2f} us ({ok[best]['gb_per_s']:.0f} GB/s)", flush=True)
        weights = distinct = None  # free the weights before the next shape's
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
    parser.add_argument("--skip-projections", action="store_true")
    parser.add_argument("--skip-attention", action="store_true")
    args = parser.parse_args()
    out_dir = Path(os.environ.get("OUT", ".device-out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "layers": LAYERS}
    began = time.perf_counter()
    for rows in [] if args.skip_projections else map(int, args.rows.split(",")):
        results[f"projections_rows{rows}"] = projections(rows)
        (out_dir / "decode_kernels.json").write_text(json.dumps(results, indent=2) + "\n")
        # The skinny kernel's fastest tiles per shape, as engine.model.skinny.TUNED (skinny.read_tuned reads it).
        tuned = {f"{skinny._tiles(v['shape'][0])},{v['shape'][1]},{v['shape'][2]}": v["skinny_best"]
                 for key, r in results.items() if key.startswith("projections_rows")
                 for v in r.values() if "skinny_best" in v and v["shape"][0] <= skinny.KERNEL_ROWS}
        (out_dir / "skinny_tuned.json").write_text(json.dumps(tuned, indent=1) + "\n")
    for batch, seq in [] if args.skip_attention else ((1, 1088), (1, 2040), (8, 1088)):
        results[f"attention_b{batch}_seq{seq}"] = attention(batch, seq)
        (out_dir / "decode_kernels.json").write_text(json.dumps(results, indent=2) + "\n")
    results["seconds"] = round(time.perf_counter() - began, 1)
    (out_dir / "decode_kernels.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
