"""Diffusion engine speed on the GPU machine, for a model of DICE-1.7B's shape.

    python benchmarks/engine_speed.py [--gen 128] [--skip-compiled]

Model: hidden 2048, 28 layers, 16/8 heads, head_dim 128, intermediate 6144, vocab 151936, tied
embeddings, random bf16 weights; a 1024-token prompt; 4-token blocks.

Measured in one run, each number with how it was measured:
- copy bandwidth: device-to-device copy of 1 GiB, CUDA events, median of 20; bandwidth counts
  the bytes read and written. Weight-read floor = weight bytes / that bandwidth: no step can
  be faster than reading every weight once.
- prefill: the prompt's 1024 tokens through the model into the KV cache (eager), median of 5.
- step latency: one denoising step (one forward over [previous block ; current block]
  attending to the cache), per decoding path (cached = eager, graphs = CUDA graph,
  compiled = torch.compile'd layers in a CUDA graph), at batch 1 and 8; CUDA events around
  50 steps after warm-up, median.
- tokens/s: a whole decode of --gen tokens per candidate under the static schedule (steps 4,
  block 4: one token per step and candidate), summed over the candidates, prefill excluded
  and included.
- transformers: Qwen3ForCausalLM with the same weights, `generate` greedy with its KV cache;
  per token = (time for 1 + K tokens - time for 1 token) / K, so prefill is excluded.
- kernels: torch.profiler over eager batch-1 steps: GPU busy time per step (no launch gaps)
  and the kernels that take it, to aim the next optimisation.
- agreement: fraction of tokens equal between each fast path and the eager cached path on
  this random bf16 model (near ties may flip; the fp32 GPU test checks exact equality).

Targets (issue 2): a batch-1 step within 2x of the floor; a batch-8 step under 1.3x the
batch-1 step. Prints a table and writes $OUT/engine_speed.json (OUT defaults to ./.device-out),
rewritten after every section so that a partial run still leaves its numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engine.decode import decode  # noqa: E402  (after the path is set)
from engine.fast_paths import make_forward  # noqa: E402
from engine.model import SDARConfig, SDARForCausalLM  # noqa: E402
from engine.types import Sampling  # noqa: E402

PROMPT_TOKENS = 1024
BLOCK = 4
BATCHES = (1, 8)
PATHS = ("cached", "graphs", "compiled")
DICE_1_7B = SDARConfig(
    vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
    num_attention_heads=16, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
    rope_theta=1_000_000.0, max_position_embeddings=32768, tie_word_embeddings=True,
    block_size=BLOCK, mask_token_id=151669, eos_token_id=151643,
)


def cuda_ms(fn, repeats: int, warmup: int = 3) -> list[float]:
    """Per-call milliseconds of fn() measured with CUDA events, one pair per call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def copy_bandwidth() -> dict:
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    times = cuda_ms(lambda: dst.copy_(src), repeats=20)
    ms = statistics.median(times)
    return {"bytes": n, "median_ms": ms, "gb_per_s": 2 * n / ms / 1e6, "how": "1 GiB D2D copy, read+write bytes"}


def random_model() -> SDARForCausalLM:
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = SDARForCausalLM(DICE_1_7B)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.02)
    return model.to(torch.bfloat16).eval()


def weight_bytes(model: torch.nn.Module) -> int:
    unique = {p.data_ptr(): p for p in model.parameters()}  # tied weights once
    return sum(p.numel() * p.element_size() for p in unique.values())


def prompt_ids() -> list[int]:
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 150000, (PROMPT_TOKENS,), generator=g).tolist()


@torch.inference_mode()
def prefill_ms(model: SDARForCausalLM) -> dict:
    ids = torch.tensor([prompt_ids()], device="cuda")
    forward = make_forward(model, "cached", 1, PROMPT_TOKENS + 64, BLOCK)
    times = cuda_ms(lambda: forward.prefill(ids), repeats=5, warmup=1)
    return {"median_ms": statistics.median(times), "tokens": PROMPT_TOKENS, "how": "eager, into the KV cache"}


@torch.inference_mode()
def step_ms(model: SDARForCausalLM, path: str, batch: int, gen: int) -> dict:
    """One denoising step in the middle of a decode: prefill, then time block_logits."""
    total = PROMPT_TOKENS + gen
    started = time.perf_counter()
    forward = make_forward(model, path, batch, total, BLOCK)
    x = torch.full((batch, total), DICE_1_7B.mask_token_id, dtype=torch.long, device="cuda")
    x[:, :PROMPT_TOKENS] = torch.tensor(prompt_ids(), device="cuda")
    forward.prefill(x[:1, :PROMPT_TOKENS])
    start = PROMPT_TOKENS + BLOCK * max(0, min(8, gen // BLOCK - 1))
    x[:, PROMPT_TOKENS:start] = 1000  # some generated blocks before the one timed
    forward.block_logits(x, start, start + BLOCK, commit_previous=True)  # capture / compile
    torch.cuda.synchronize()
    setup_s = time.perf_counter() - started
    times = cuda_ms(lambda: forward.block_logits(x, start, start + BLOCK, commit_previous=True), repeats=50)
    return {"median_ms": statistics.median(times), "p10_ms": sorted(times)[5], "p90_ms": sorted(times)[45],
            "setup_s": setup_s}


@torch.inference_mode()
def decode_run(model: SDARForCausalLM, path: str, batch: int, gen: int) -> tuple[dict, list[list[int]]]:
    sampling = Sampling(strategy="low_confidence_static", steps=4)
    args = dict(n=batch, max_tokens=gen, sampling=sampling, stop_ids=[], path=path)
    decode(model, prompt_ids(), **args)  # warm: graphs captured, layers compiled
    result = decode(model, prompt_ids(), **args)
    produced = sum(len(t) for t in result.tokens)
    decode_s = result.seconds - result.prefill_seconds
    return {
        "tokens": produced, "steps": result.steps, "seconds": result.seconds, "prefill_s": result.prefill_seconds,
        "tokens_per_s": produced / decode_s, "tokens_per_s_with_prefill": produced / result.seconds,
        "ms_per_step": 1000 * decode_s / result.steps,
    }, result.tokens


@torch.inference_mode()
def transformers_generate(model: SDARForCausalLM, batch: int, new_tokens: int = 64) -> dict:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    c = DICE_1_7B
    config = Qwen3Config(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads, head_dim=c.head_dim, rms_norm_eps=c.rms_norm_eps,
        rope_theta=c.rope_theta, max_position_embeddings=c.max_position_embeddings, tie_word_embeddings=True,
        eos_token_id=None, pad_token_id=0,
    )
    with torch.device("cuda"):
        hf = Qwen3ForCausalLM(config).to(torch.bfloat16).eval()
    from engine.loading import checkpoint_weights

    hf.load_state_dict(checkpoint_weights(model), strict=False)
    ids = torch.tensor([prompt_ids()] * batch, device="cuda")

    def run(k: int) -> float:
        torch.cuda.synchronize()
        t = time.perf_counter()
        hf.generate(ids, max_new_tokens=k, min_new_tokens=k, do_sample=False, use_cache=True)
        torch.cuda.synchronize()
        return time.perf_counter() - t

    run(2)
    one = statistics.median(run(1) for _ in range(3))
    many = statistics.median(run(1 + new_tokens) for _ in range(2))
    return {"ms_per_token": 1000 * (many - one) / new_tokens, "prefill_plus_one_ms": 1000 * one,
            "how": f"generate greedy, ({1 + new_tokens} tokens - 1 token) / {new_tokens}"}


@torch.inference_mode()
def kernel_breakdown(model: SDARForCausalLM, gen: int, steps: int = 3) -> dict:
    """Where the GPU time of an eager batch-1 step goes (torch.profiler, CUDA kernels only):
    the busy time per step without launch gaps, and the kernels that take most of it, so
    that the next optimisation can aim at the right kernels."""
    from torch.profiler import ProfilerActivity, profile

    total = PROMPT_TOKENS + gen
    forward = make_forward(model, "cached", 1, total, BLOCK)
    x = torch.full((1, total), DICE_1_7B.mask_token_id, dtype=torch.long, device="cuda")
    x[:, :PROMPT_TOKENS] = torch.tensor(prompt_ids(), device="cuda")
    forward.prefill(x[:, :PROMPT_TOKENS])
    start = PROMPT_TOKENS + BLOCK
    forward.block_logits(x, start, start + BLOCK, commit_previous=True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            forward.block_logits(x, start, start + BLOCK, commit_previous=True)
        torch.cuda.synchronize()
    kernels = [e for e in prof.key_averages() if e.device_time_total > 0]
    busy_us = sum(e.self_device_time_total for e in kernels) / steps
    top = sorted(kernels, key=lambda e: e.self_device_time_total, reverse=True)[:15]
    return {
        "gpu_busy_ms_per_step": busy_us / 1000,
        "kernels_per_step": sum(e.count for e in kernels) / steps,
        "top": [{"kernel": e.key[:90], "ms_per_step": e.self_device_time_total / steps / 1000,
                 "calls_per_step": e.count / steps} for e in top],
    }


def agreement(a: list[list[int]], b: list[list[int]]) -> float:
    pairs = [(x, y) for ra, rb in zip(a, b) for x, y in zip(ra, rb)]
    return sum(x == y for x, y in pairs) / max(1, len(pairs))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gen", type=int, default=128, help="tokens generated per candidate in the decode runs")
    parser.add_argument("--skip-compiled", action="store_true", help="leave out the torch.compile path")
    args = parser.parse_args()
    out_dir = Path(os.environ.get("OUT", ".device-out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    out_file = out_dir / "engine_speed.json"
    results: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                     "shape": "DICE-1.7B (2048 x 28, 16/8 heads, vocab 151936, tied), bf16 random",
                     "prompt_tokens": PROMPT_TOKENS, "block": BLOCK, "gen": args.gen, "errors": {}}
    paths = [p for p in PATHS if not (args.skip_compiled and p == "compiled")]

    def save() -> None:
        out_file.write_text(json.dumps(results, indent=2) + "\n")

    def section(name: str, fn):
        started = time.perf_counter()
        print(f"[engine_speed] {name} ...", flush=True)
        try:
            value = fn()
            results[name] = value
            print(f"[engine_speed] {name}: {value} ({time.perf_counter() - started:.1f}s)", flush=True)
        except Exception as exc:  # a failed section is reported, the rest still runs
            results["errors"][name] = f"{type(exc).__name__}: {exc}"
            print(f"[engine_speed] {name} FAILED: {exc}\n{traceback.format_exc()}", flush=True)
        save()
        return results.get(name)

    bandwidth = section("copy_bandwidth", copy_bandwidth)
    model = random_model()
    results["weight_bytes"] = weight_bytes(model)
    if bandwidth:
        results["floor_ms"] = results["weight_bytes"] / (bandwidth["gb_per_s"] * 1e6)
    section("prefill", lambda: prefill_ms(model))
    tokens: dict[tuple[str, int], list[list[int]]] = {}
    for path in paths:
        for batch in BATCHES:
            section(f"step_{path}_b{batch}", lambda: step_ms(model, path, batch, args.gen))

            def run_decode():
                stats, produced = decode_run(model, path, batch, args.gen)
                tokens[(path, batch)] = produced
                return stats

            section(f"decode_{path}_b{batch}", run_decode)
    for path in paths[1:]:
        for batch in BATCHES:
            if (path, batch) in tokens and ("cached", batch) in tokens:
                results[f"agreement_{path}_b{batch}"] = agreement(tokens[(path, batch)], tokens[("cached", batch)])
    for batch in BATCHES:
        section(f"transformers_b{batch}", lambda: transformers_generate(model, batch))
    section("kernels_eager_b1", lambda: kernel_breakdown(model, args.gen))

    floor = results.get("floor_ms")
    best = None
    for path in reversed(paths):
        if f"step_{path}_b1" in results and f"step_{path}_b8" in results:
            best = path
            break
    if best and floor:
        b1 = results[f"step_{best}_b1"]["median_ms"]
        b8 = results[f"step_{best}_b8"]["median_ms"]
        results["targets"] = {"path": best, "b1_step_over_floor": b1 / floor, "b1_target_met": b1 / floor <= 2.0,
                              "b8_over_b1": b8 / b1, "b8_target_met": b8 / b1 < 1.3}
    save()

    print(f"\nDICE-1.7B shape, bf16 random weights, {PROMPT_TOKENS}-token prompt, block {BLOCK}, on", results["device"])
    if floor:
        print(f"copy bandwidth {bandwidth['gb_per_s']:.0f} GB/s; weights {results['weight_bytes'] / 1e9:.2f} GB; "
              f"weight-read floor {floor:.3f} ms")
    if "prefill" in results:
        print(f"prefill ({PROMPT_TOKENS} tokens, eager): {results['prefill']['median_ms']:.1f} ms")
    print(f"{'path':<10}{'batch':>6}{'step ms':>10}{'x floor':>9}{'tok/s':>10}{'tok/s+prefill':>15}{'agree':>7}")
    for path in paths:
        for batch in BATCHES:
            step = results.get(f"step_{path}_b{batch}")
            run = results.get(f"decode_{path}_b{batch}")
            step_text = f"{step['median_ms']:10.3f}{step['median_ms'] / floor:9.2f}" if step and floor else f"{'-':>10}{'-':>9}"
            run_text = f"{run['tokens_per_s']:10.0f}{run['tokens_per_s_with_prefill']:15.0f}" if run else f"{'-':>10}{'-':>15}"
            agree = results.get(f"agreement_{path}_b{batch}")
            print(f"{path:<10}{batch:>6}{step_text}{run_text}{(f'{agree:7.2f}' if agree is not None else '      -')}")
    for batch in BATCHES:
        hf = results.get(f"transformers_b{batch}")
        if hf:
            per_token = hf["ms_per_token"]
            print(f"{'hf-qwen3':<10}{batch:>6}{per_token:10.3f}{(per_token / floor if floor else 0):9.2f}"
                  f"{1000 * batch / per_token:10.0f}{'':>15}      -   (generate, per token)")
    if "targets" in results:
        t = results["targets"]
        print(f"targets ({t['path']}): batch-1 step = {t['b1_step_over_floor']:.2f}x floor (target <= 2: "
              f"{'met' if t['b1_target_met'] else 'NOT met'}); batch-8 step = {t['b8_over_b1']:.2f}x batch-1 "
              f"(target < 1.3: {'met' if t['b8_target_met'] else 'NOT met'})")
    kernels = results.get("kernels_eager_b1")
    if kernels:
        print(f"eager batch-1 step: {kernels['gpu_busy_ms_per_step']:.3f} ms of GPU kernels "
              f"({kernels['kernels_per_step']:.0f} kernels); the largest:")
        for k in kernels["top"][:8]:
            print(f"  {k['ms_per_step']:8.3f} ms  x{k['calls_per_step']:<5.0f} {k['kernel']}")
    if results["errors"]:
        print("errors:", json.dumps(results["errors"], indent=2))
    print(f"wrote {out_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
