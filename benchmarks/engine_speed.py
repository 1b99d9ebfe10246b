"""Diffusion engine speed on the GPU machine, for a model of a DICE size's shape.

    python benchmarks/engine_speed.py [--shape 1.7b|4b|8b] [--gen 128] [--paths graphs,flex,cached,compiled]
                                      [--budget-s 270] [--skip-transformers] [--skip-presets] [--skip-agreement]
                                      [--skip-kernels] [--kernel-paths cached,flex]

Model: the shape of DICE-1.7B by default (hidden 2048, 28 layers, 16/8 heads, head_dim 128,
intermediate 6144, vocab 151936, tied embeddings), DICE-4B's or DICE-8B's with --shape, random
bf16 weights (benchmarks/dice_shape.py); a 1024-token prompt; 4-token blocks.

Measured in one run, each number with how it was measured:
- copy bandwidth: device-to-device copy of 1 GiB, CUDA events, median of 20; bandwidth counts
  the bytes read and written. Weight-read floor = weight bytes / that bandwidth: no step can
  be faster than reading every weight once.
- prefill: the prompt's 1024 tokens through the model into the KV cache (eager), median of 5.
- step latency: one denoising step (one forward over [previous block ; current block]
  attending to the cache), per decoding path (cached = eager, graphs = CUDA graph of the eager
  model (the baseline the default is measured against), compiled = torch.compile'd model in a
  CUDA graph, flex = compiled with flex_attention, decode = compiled with the engine's split-KV
  decode attention (engine.model.routes.GPU_DEFAULT)), at batch 1 and 8;
  CUDA events around 50 steps after warm-up, median. setup_s: the first step's compilation
  and capture (what the engine pays at load, engine.decoding.decode.warm_up).
- tokens/s: a whole decode of --gen tokens per candidate under the static schedule (steps 4,
  block 4: one token per step and candidate), summed over the candidates, prefill excluded
  and included; ms_per_step there includes sampling and the loop, not only the forward.
- presets: tokens/s of the default path for the other settings of benchmarks/preset_speed.py
  (default low_confidence_dynamic 0.9; the dice preset, static and dynamic 0.9), batch 1.
- agreement: tokens of each path against the eager cached path, on this bf16 model (near ties
  may flip) and on an fp32 model of the same widths with 4 layers (equal expected, as
  tests/engine/decoding/test_decode_gpu.py checks on tiny models).
- transformers: Qwen3ForCausalLM with the same weights, `generate` greedy with its KV cache;
  per token = (time for 1 + K tokens - time for 1 token) / K, so prefill is excluded.
- kernels: torch.profiler over batch-1 steps of the eager path and of the default path: GPU
  busy time per step (no launch gaps) and the kernels that take it (attention's share apart).

Targets, on the default path: a batch-1 step within 2x of the floor; a batch-8 step
at most 1.3x the batch-1 step; >= 600 tokens/s at batch 1 under the static schedule; and the
baseline (graphs, `old default` in the output) against the default, step for step. Sections
run in that order of importance;
once --budget-s seconds have passed the optional ones left are skipped (and said so). Prints
a table and writes $OUT/engine_speed.json (OUT defaults to ./.device-out; engine_speed-8b.json and
so on for the other shapes) and engine_speed.md (the table), both rewritten after every section so that a partial run still leaves its numbers.
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

from benchmarks import dice_shape  # noqa: E402  (after the path is set)
from benchmarks.dice_shape import BLOCK, SHAPES  # noqa: E402
from benchmarks.preset_speed import SETTINGS, measure  # noqa: E402
from engine.decoding.decode import decode  # noqa: E402
# The engine's default on a GPU, measured against plain CUDA graphs (docs/benchmarks.md).
from engine.decoding.paths import make_forward  # noqa: E402
from engine.model.routes import FAST_PATHS, GPU_DEFAULT, Fusion  # noqa: E402
from engine.model.routes import PATHS as ENGINE_PATHS  # noqa: E402
from engine.model import skinny  # noqa: E402
from engine.model.sdar import SDARConfig, SDARForCausalLM  # noqa: E402
from engine.types import Sampling  # noqa: E402

PROMPT_TOKENS = 1024
BATCHES = (1, 8)
FUSION = Fusion()  # the steps' fusions: --no-fused-step, --no-fused-norms
OLD_DEFAULT = "graphs"  # the baseline: a CUDA graph of the eager model
PATHS = tuple(dict.fromkeys((OLD_DEFAULT, GPU_DEFAULT, "flex", "cached", "compiled")))  # in order of importance
TARGET_TOKENS_PER_S = 600


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


SHAPE_NAME = "1.7b"  # --shape
SHAPE = SHAPES[SHAPE_NAME]


def random_model(config: SDARConfig = None, dtype: torch.dtype = torch.bfloat16) -> SDARForCausalLM:
    return dice_shape.random_model(config or SHAPE, "cuda", dtype)


def weight_bytes(model: torch.nn.Module) -> int:
    unique = {p.data_ptr(): p for p in model.parameters()}  # tied weights once
    return sum(p.numel() * p.element_size() for p in unique.values())


def prompt_ids() -> list[int]:
    return dice_shape.prompt(PROMPT_TOKENS)


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
    forward = make_forward(model, path, batch, total, BLOCK, FUSION)
    x = torch.full((batch, total), SHAPE.mask_token_id, dtype=torch.long, device="cuda")
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
def decode_run(model: SDARForCausalLM, path: str, batch: int, gen: int, prompt: list[int] | None = None
               ) -> tuple[dict, list[list[int]]]:
    sampling = Sampling(strategy="low_confidence_static", steps=4)
    args = dict(n=batch, max_tokens=gen, sampling=sampling, stop_ids=[], path=path, fusion=FUSION)
    prompt = prompt_ids() if prompt is None else prompt
    decode(model, prompt, **args)  # warm: graphs captured, layers compiled
    result = decode(model, prompt, **args)
    produced = sum(len(t) for t in result.tokens)
    decode_s = result.seconds - result.prefill_seconds
    return {
        "tokens": produced, "steps": result.steps, "seconds": result.seconds, "prefill_s": result.prefill_seconds,
        "tokens_per_s": produced / decode_s, "tokens_per_s_with_prefill": produced / result.seconds,
        "ms_per_step": 1000 * decode_s / result.steps,
    }, result.tokens


def fp32_agreement(paths: list[str], gen: int) -> dict:
    """Tokens of each path against the eager cached path on an fp32 model of the shape's widths
    with 4 layers (fewer layers: less to compile), batch 1 and 3 (3 runs padded to 8 rows)."""
    from dataclasses import replace

    model = random_model(replace(SHAPE, num_hidden_layers=4), torch.float32)
    prompt = prompt_ids()[:300]
    out = {}
    for batch in (1, 3):
        _, reference = decode_run(model, "cached", batch, gen, prompt)
        for path in paths:
            if path != "cached":
                _, tokens = decode_run(model, path, batch, gen, prompt)
                out[f"{path}_b{batch}"] = {"equal": tokens == reference, "fraction": agreement(tokens, reference)}
    return out


def preset_speeds(model: SDARForCausalLM, path: str, gen: int) -> dict:
    """benchmarks/preset_speed.py's settings on `path`, batch 1, one timed decode each."""
    return {name: measure(model, sampling, path, 1, PROMPT_TOKENS, gen, repeats=1)
            for name, sampling in SETTINGS.items() if name != "default static"}  # that one: decode_*


@torch.inference_mode()
def transformers_generate(model: SDARForCausalLM, batch: int, new_tokens: int = 64) -> dict:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    c = SHAPE
    config = Qwen3Config(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads, head_dim=c.head_dim, rms_norm_eps=c.rms_norm_eps,
        rope_theta=c.rope_theta, max_position_embeddings=c.max_position_embeddings,
        tie_word_embeddings=c.tie_word_embeddings,
        eos_token_id=None, pad_token_id=0,
    )
    with torch.device("cuda"):
        hf = Qwen3ForCausalLM(config).to(torch.bfloat16).eval()
    from engine.model.loading import checkpoint_weights

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


# Kernel names that are attention: torch's, and the engine's decode kernel (engine.model.decode_attention_kernels).
ATTENTION_KERNELS = ("flex", "attention", "fmha", "flash", "sdpa", "attn", "_partial", "_combine")


@torch.inference_mode()
def kernel_breakdown(model: SDARForCausalLM, path: str, gen: int, batch: int = 1, steps: int = 3) -> dict:
    """Where the GPU time of a step of `path` at `batch` goes (torch.profiler, CUDA kernels only):
    the busy time per step without launch gaps, attention's share, and the kernels that take
    most of it, so that the next optimisation can aim at the right kernels."""
    from torch.profiler import ProfilerActivity, profile

    total = PROMPT_TOKENS + gen
    forward = make_forward(model, path, batch, total, BLOCK, FUSION)
    x = torch.full((batch, total), SHAPE.mask_token_id, dtype=torch.long, device="cuda")
    x[:, :PROMPT_TOKENS] = torch.tensor(prompt_ids(), device="cuda")
    forward.prefill(x[:1, :PROMPT_TOKENS])
    start = PROMPT_TOKENS + BLOCK
    forward.block_logits(x, start, start + BLOCK, commit_previous=True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            forward.block_logits(x, start, start + BLOCK, commit_previous=True)
        torch.cuda.synchronize()
    kernels = [e for e in prof.key_averages() if e.device_time_total > 0]
    busy_us = sum(e.self_device_time_total for e in kernels) / steps
    attention_us = sum(e.self_device_time_total for e in kernels
                       if any(word in e.key.lower() for word in ATTENTION_KERNELS)) / steps
    top = sorted(kernels, key=lambda e: e.self_device_time_total, reverse=True)[:15]
    return {
        "gpu_busy_ms_per_step": busy_us / 1000,
        "attention_ms_per_step": attention_us / 1000,
        "kernels_per_step": sum(e.count for e in kernels) / steps,
        "top": [{"kernel": e.key[:90], "ms_per_step": e.self_device_time_total / steps / 1000,
                 "calls_per_step": e.count / steps} for e in top],
    }


def agreement(a: list[list[int]], b: list[list[int]]) -> float:
    pairs = [(x, y) for ra, rb in zip(a, b) for x, y in zip(ra, rb)]
    return sum(x == y for x, y in pairs) / max(1, len(pairs))


COMPILED_PATHS = tuple(p for p in FAST_PATHS if p != "graphs")  # the fast paths that torch.compile the model


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gen", type=int, default=128, help="tokens generated per candidate in the decode runs")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"decoding paths, in order (default {','.join(PATHS)})")
    parser.add_argument("--skip-compiled", action="store_true",
                        help=f"leave out the torch.compile paths ({', '.join(COMPILED_PATHS)})")
    parser.add_argument("--skip-transformers", action="store_true")
    parser.add_argument("--skip-presets", action="store_true")
    parser.add_argument("--skip-agreement", action="store_true")
    parser.add_argument("--skip-kernels", action="store_true")
    parser.add_argument("--kernel-paths", default=f"cached,{GPU_DEFAULT}",
                        help="paths whose steps get a kernel breakdown (default cached and the default path)")
    parser.add_argument("--kernel-batches", type=lambda text: [int(v) for v in text.split(",")], default=[1],
                        help="batches of those breakdowns (default 1)")
    parser.add_argument("--budget-s", type=float, default=270,
                        help="after this many seconds, skip the optional sections left (paths other than the old "
                             "and new default, agreement, presets, kernels, transformers)")
    parser.add_argument("--no-fused-step", action="store_true",
                        help="run a batch-1 step's norms, RoPE, cache write and SwiGLU as separate kernels")
    parser.add_argument("--no-fused-norms", action="store_true",
                        help="run a batch-1 step's attention RMSNorms and residual adds as separate kernels")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="1.7b",
                        help="the DICE size whose shape to measure (random weights of its config); "
                             "the files are engine_speed.json for 1.7b, engine_speed-SHAPE.json for the others")
    parser.add_argument("--skinny-tuned", type=Path, metavar="JSON",
                        help="the skinny kernel's tile choices from benchmarks/decode_kernels.py's skinny_tuned.json "
                             "in place of engine.model.skinny.TUNED (taken before any path is compiled or captured)")
    args = parser.parse_args()
    if args.skinny_tuned is not None:
        skinny.use_tuned(skinny.read_tuned(args.skinny_tuned))
    global FUSION, SHAPE, SHAPE_NAME
    FUSION = Fusion(step=not args.no_fused_step, norms=not args.no_fused_norms)
    SHAPE_NAME, SHAPE = args.shape, SHAPES[args.shape]
    unknown = [p for p in args.paths.split(",") + args.kernel_paths.split(",") if p not in ENGINE_PATHS]
    if unknown:
        parser.error(f"unknown decoding paths {', '.join(unknown)} (engine.model.routes.PATHS: {', '.join(ENGINE_PATHS)})")
    began = time.perf_counter()
    out_dir = Path(os.environ.get("OUT", ".device-out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = "engine_speed" if SHAPE_NAME == "1.7b" else f"engine_speed-{SHAPE_NAME}"
    out_file = out_dir / f"{stem}.json"
    results: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                     "shape": f"DICE-{SHAPE_NAME.upper()} ({dice_shape.describe(SHAPE)}), bf16 random",
                     "prompt_tokens": PROMPT_TOKENS, "block": BLOCK, "gen": args.gen, "default_path": GPU_DEFAULT,
                     "old_default_path": OLD_DEFAULT, "fused_step": FUSION.step,
                     "fused_norms": FUSION.step and FUSION.norms, "errors": {}, "skipped": []}
    paths = [p for p in args.paths.split(",") if not (args.skip_compiled and p in COMPILED_PATHS)]

    def save() -> None:  # both files after every section: a run cut at its limit still leaves them
        summarize(results)
        out_file.write_text(json.dumps(results, indent=2) + "\n")
        (out_dir / f"{stem}.md").write_text(report(results, paths) + "\n")

    def section(name: str, fn, optional: bool = False):
        elapsed = time.perf_counter() - began
        if optional and elapsed > args.budget_s:
            results["skipped"].append(name)
            print(f"[engine_speed] {name} skipped: {elapsed:.0f}s past the budget of {args.budget_s:.0f}s", flush=True)
            save()
            return None
        started = time.perf_counter()
        print(f"[engine_speed] {name} ...", flush=True)
        try:
            value = fn()
            results[name] = value
            print(f"[engine_speed] {name}: {value} ({time.perf_counter() - started:.1f}s)", flush=True)
        except Exception as exc:  # a failed section is reported, the rest still runs
            results["errors"][name] = f"{type(exc).__name__}: {exc}"
            print(f"[engine_speed] {name} FAILED: {exc}\n{traceback.format_exc()}", flush=True)
        results.setdefault("phase_s", {})[name] = round(time.perf_counter() - started, 1)
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
        optional = path not in (OLD_DEFAULT, GPU_DEFAULT)  # the old default against the new comes first
        for batch in BATCHES:
            section(f"step_{path}_b{batch}", lambda: step_ms(model, path, batch, args.gen), optional)

            def run_decode():
                stats, produced = decode_run(model, path, batch, args.gen)
                tokens[(path, batch)] = produced
                return stats

            section(f"decode_{path}_b{batch}", run_decode, optional)
    for path in paths:
        for batch in BATCHES:
            if path != "cached" and (path, batch) in tokens and ("cached", batch) in tokens:
                results[f"agreement_{path}_b{batch}"] = agreement(tokens[(path, batch)], tokens[("cached", batch)])
    if not args.skip_agreement:
        section("agreement_fp32", lambda: fp32_agreement(paths, min(args.gen, 64)), optional=True)
    if not args.skip_presets and GPU_DEFAULT in paths:
        section(f"presets_{GPU_DEFAULT}_b1", lambda: preset_speeds(model, GPU_DEFAULT, args.gen), optional=True)
    if not args.skip_kernels:
        for path in dict.fromkeys(args.kernel_paths.split(",")):
            if path in paths:
                for batch in args.kernel_batches:
                    section(f"kernels_{path}_b{batch}", lambda: kernel_breakdown(model, path, args.gen, batch),
                            optional=True)
    if not args.skip_transformers:
        for batch in BATCHES:
            section(f"transformers_b{batch}", lambda: transformers_generate(model, batch), optional=True)
    results["total_s"] = round(time.perf_counter() - began, 1)
    save()
    print(report(results, paths))
    print(f"wrote {out_file} and {stem}.md ({results['total_s']:.0f}s)")
    return 0


def summarize(results: dict) -> None:
    """The targets, on the default path, and the old default against the new."""
    floor = results.get("floor_ms")
    steps = {key: value["median_ms"] for key, value in results.items() if key.startswith("step_")}
    b1, b8 = steps.get(f"step_{GPU_DEFAULT}_b1"), steps.get(f"step_{GPU_DEFAULT}_b8")
    run = results.get(f"decode_{GPU_DEFAULT}_b1")
    targets: dict = {"path": GPU_DEFAULT}
    if b1 and floor:
        targets.update(b1_step_over_floor=b1 / floor, b1_target_met=b1 / floor <= 2.0)
    if b1 and b8:
        targets.update(b8_over_b1=b8 / b1, b8_target_met=b8 / b1 <= 1.3)
    if run:
        targets.update(b1_tokens_per_s=run["tokens_per_s"], tokens_target_met=run["tokens_per_s"] >= TARGET_TOKENS_PER_S)
    for batch in BATCHES:
        old, new = steps.get(f"step_{OLD_DEFAULT}_b{batch}"), steps.get(f"step_{GPU_DEFAULT}_b{batch}")
        if old and new:
            targets[f"old_over_new_b{batch}"] = old / new
    results["targets"] = targets


def report(results: dict, paths: list[str]) -> str:
    """The Markdown table (and lines) printed at the end and written to engine_speed.md."""
    floor = results.get("floor_ms")
    lines = [f"{results['shape']}, {PROMPT_TOKENS}-token prompt, block {BLOCK}, on "
             f"{results['device']} (torch {results['torch']})", ""]
    if floor:
        lines.append(f"copy bandwidth {results['copy_bandwidth']['gb_per_s']:.0f} GB/s; weights "
                     f"{results['weight_bytes'] / 1e9:.2f} GB; weight-read floor {floor:.3f} ms")
    if "prefill" in results:
        lines.append(f"prefill ({PROMPT_TOKENS} tokens, eager): {results['prefill']['median_ms']:.1f} ms")
    lines += ["", "| path | batch | step ms | x floor | setup s | tok/s | tok/s +prefill | ms/step in decode | agree bf16 |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for path in paths:
        label = path + (" (default)" if path == GPU_DEFAULT else " (old default)" if path == OLD_DEFAULT else "")
        for batch in BATCHES:
            step, run = results.get(f"step_{path}_b{batch}"), results.get(f"decode_{path}_b{batch}")
            agree = results.get(f"agreement_{path}_b{batch}")
            cells = [label, str(batch)]
            cells += [f"{step['median_ms']:.3f}", f"{step['median_ms'] / floor:.2f}" if floor else "-",
                      f"{step['setup_s']:.1f}"] if step else ["-"] * 3
            cells += [f"{run['tokens_per_s']:.0f}", f"{run['tokens_per_s_with_prefill']:.0f}",
                      f"{run['ms_per_step']:.3f}"] if run else ["-"] * 3
            cells.append(f"{agree:.3f}" if agree is not None else "-")
            lines.append("| " + " | ".join(cells) + " |")
    for batch in BATCHES:
        hf = results.get(f"transformers_b{batch}")
        if hf:
            per_token = hf["ms_per_token"]
            lines.append(f"| hf-qwen3 generate (per token) | {batch} | {per_token:.3f} | "
                         f"{per_token / floor if floor else 0:.2f} | - | {1000 * batch / per_token:.0f} | - | - | - |")
    agreement32 = results.get("agreement_fp32")
    if agreement32:
        lines += ["", "fp32 tokens against the eager cached path (4-layer model of the same widths): " + ", ".join(
            f"{key} {'equal' if v['equal'] else 'DIFFER (%.3f)' % v['fraction']}" for key, v in agreement32.items())]
    presets = results.get(f"presets_{GPU_DEFAULT}_b1")
    if presets:
        lines += ["", f"presets on {GPU_DEFAULT}, batch 1: " + "; ".join(
            f"{name} {row['tokens_per_s']:.0f} tok/s ({row['tokens_per_pass']:.2f} tok/pass, {row['ms_per_pass']:.2f} "
            f"ms/pass)" for name, row in presets.items())]
    t = results.get("targets", {})
    if "b1_step_over_floor" in t:
        lines += ["", f"targets ({t['path']}): batch-1 step = {t['b1_step_over_floor']:.2f}x floor (<= 2: "
                  f"{'met' if t['b1_target_met'] else 'NOT met'})"]
    if "b8_over_b1" in t:
        lines.append(f"batch-8 step = {t['b8_over_b1']:.2f}x batch-1 (<= 1.3: {'met' if t['b8_target_met'] else 'NOT met'})")
    if "b1_tokens_per_s" in t:
        lines.append(f"batch-1 static decode {t['b1_tokens_per_s']:.0f} tok/s (>= {TARGET_TOKENS_PER_S}: "
                     f"{'met' if t['tokens_target_met'] else 'NOT met'})")
    for batch in BATCHES:
        if f"old_over_new_b{batch}" in t:
            lines.append(f"old default {OLD_DEFAULT} / default {GPU_DEFAULT}, batch {batch} step: "
                         f"{t[f'old_over_new_b{batch}']:.2f}x")
    for name, kernels in results.items():
        if name.startswith("kernels_") and isinstance(kernels, dict):
            path, batch = name[len("kernels_"):].rsplit("_b", 1)
            lines += ["", f"{path} batch-{batch} step: {kernels['gpu_busy_ms_per_step']:.3f} ms of GPU kernels "
                      f"({kernels['kernels_per_step']:.0f} kernels), attention {kernels['attention_ms_per_step']:.3f} ms;"
                      " the largest:"]
            lines += [f"    {k['ms_per_step']:8.3f} ms  x{k['calls_per_step']:<5.0f} {k['kernel']}" for k in kernels["top"][:8]]
    if results.get("phase_s"):
        lines += ["", "phases (s): " + ", ".join(f"{name} {seconds}" for name, seconds in results["phase_s"].items())]
    if results["skipped"]:
        lines += ["", "skipped (past the time budget): " + ", ".join(results["skipped"])]
    if results["errors"]:
        lines += ["", "errors: " + json.dumps(results["errors"], indent=2)]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
