"""Decoding speed of the `dice` preset next to the project's default, on a model of a DICE
size's shape (benchmarks/dice_shape.py: random bf16 weights; the mask token's embedding row is
zero), and the KV cache's memory at large batches: how many candidates fit at once.

    python benchmarks/preset_speed.py                 # on the GPU machine (about 1 minute on an H200)
    python benchmarks/preset_speed.py --tiny          # any machine: a tiny shape, to check the script runs
    # throughput for `dice bench`: the dice preset, DICE's 4096-token answers, large batches
    python benchmarks/preset_speed.py --shape 4b --settings "dice dynamic 0.9" --gen 4096 --batches 32,64,128
    python benchmarks/preset_speed.py --memory-only --gen 4096 --gpu-gb 80   # the KV cache table alone, any machine

Settings, each decoding --gen tokens per candidate after a --prompt-token prompt, 4-token
blocks, 4 steps per block, at each of --batches (default 1 and 4):
- default, low_confidence_static: greedy, one token per step;
- default, low_confidence_dynamic 0.9: greedy; commits past the quota only where the (unfiltered)
  probability exceeds 0.9, rare on random weights;
- dice, low_confidence_static: DICE's evaluation decoder (temperature 1, top_k 1), one token
  per step;
- dice, low_confidence_dynamic 0.9: with top_k 1 every confidence is 1.0, so each block is
  committed in one step: 4 tokens per forward pass.

Per setting, on the engine's decoding path (engine.model.routes.GPU_DEFAULT on a GPU, `cached` on
a CPU; --path to choose): one warm-up decode (captures the graphs), then the median of --repeats decodes, timed by the
engine (wall clock around the decode, synchronised); tokens/s excludes the prefill, which the
presets share. `forward passes` are the denoising steps; `tokens per pass` = tokens / steps.

Memory: `kv GB` is the KV cache the decoding path allocates for the batch
(engine.decoding.paths.cache_bytes: on a graph path a batch bucket of rows, each a power-of-two
cache bucket long, or whole 256-position buckets where the power of two would not fit; kept for
later requests), `peak GB` what the GPU held at most during the decodes
(torch.cuda.max_memory_allocated, weights included), and `fits` the most candidates whose KV
cache (at this --gen, on this path) fits beside the weights and the headroom the engine leaves
(engine.decoding.paths.HEADROOM_FRACTION of the card) in the GPU's memory. A
batch whose cache would not fit is not run; its row says so.
Prints a table and writes $OUT/preset_speed.json (OUT defaults to ./.device-out).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.dice_shape import DICE_1_7B, SHAPES, describe, prompt, random_model  # noqa: E402  (after the path is set)
from engine.decoding.decode import decode  # noqa: E402
from engine.decoding.paths import HEADROOM_FRACTION, batch_bucket, cache_budget, cache_bytes, release_graph_paths  # noqa: E402
from engine.model.routes import FAST_PATHS, GPU_DEFAULT, PATHS  # noqa: E402
from engine.types import Sampling  # noqa: E402

TINY = replace(DICE_1_7B, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, head_dim=16)
SETTINGS = {
    "default static": Sampling(strategy="low_confidence_static", steps=4, block_size=4),
    "default dynamic 0.9": Sampling(strategy="low_confidence_dynamic", threshold=0.9, steps=4, block_size=4),
    "dice static": Sampling.for_preset("dice"),
    "dice dynamic 0.9": Sampling.for_preset("dice", strategy="low_confidence_dynamic", threshold=0.9),
}


GB = 1e9
# JetEngine's published throughput, for the same shape and batch (docs/benchmarks.md).
PUBLISHED = {("4b", 128): "JetEngine: 5000+ tokens/s for SDAR-4B at batch 128 on an H200"}


def measure(model, sampling: Sampling, path: str, batch: int, prompt_tokens: int, gen: int, repeats: int) -> dict:
    args = dict(n=batch, max_tokens=gen, sampling=sampling, stop_ids=[], path=path)
    ids = prompt(prompt_tokens)
    release_graph_paths(model)  # only this batch's cache is held
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    decode(model, ids, **args)  # warm: graphs captured
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    runs = [decode(model, ids, **args) for _ in range(repeats)]
    decode_s = statistics.median(r.seconds - r.prefill_seconds for r in runs)
    result = runs[0]
    tokens = sum(len(t) for t in result.tokens)
    return {
        "tokens": tokens, "forward_passes": result.steps, "tokens_per_pass": tokens / batch / result.steps,
        "decode_s": decode_s, "prefill_s": statistics.median(r.prefill_seconds for r in runs),
        "tokens_per_s": tokens / decode_s, "ms_per_pass": 1000 * decode_s / result.steps,
        "same_tokens_every_run": all(r.tokens == result.tokens for r in runs),
        "peak_gb": torch.cuda.max_memory_allocated() / GB if torch.cuda.is_available() else None,
    }


def sequence_length(prompt_tokens: int, gen: int, block: int) -> int:
    """The positions decode() sizes its cache for: prompt and answer, in whole blocks."""
    return -(-(prompt_tokens + gen) // block) * block


def most_that_fit(config, path: str, length: int, dtype_bytes: int, budget: float) -> int:
    """The most candidates whose KV cache fits in `budget` bytes (0: not even one)."""
    n = 0
    while cache_bytes(config, path, n + 1, length, dtype_bytes, budget) <= budget and n < 1 << 16:
        n = batch_bucket(n + 1) if path in FAST_PATHS else n + 1
    return n


def memory_table(config, path: str, length: int, batches: list[int], dtype_bytes: int, weights: int,
                 gpu_bytes: float | None) -> list[dict]:
    """Per batch: the KV cache the path allocates on a GPU of gpu_bytes holding the weights
    (engine.decoding.paths.cache_budget: the power-of-two length where it fits, else whole
    KEY_GRAIN positions), the exact length's, and whether it fits beside the headroom."""
    budget = None if gpu_bytes is None else cache_budget(gpu_bytes - weights, gpu_bytes)
    rows = []
    for batch in batches:
        kv = cache_bytes(config, path, batch, length, dtype_bytes, budget)
        rows.append({"batch": batch, "kv_gb": kv / GB, "kv_gb_exact": cache_bytes(config, "cached", batch, length,
                                                                                dtype_bytes) / GB,
                     "kv_gb_power_of_two": cache_bytes(config, path, batch, length, dtype_bytes) / GB,
                     "weights_gb": weights / GB,
                     "fits": None if budget is None else kv <= budget})
    return rows


def weight_bytes(config, dtype_bytes: int) -> int:
    """The weights' bytes, counted from the config (no model needed)."""
    h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    q = config.num_attention_heads * config.head_dim
    kv = config.num_key_value_heads * config.head_dim
    per_layer = h * (q + 2 * kv) + q * h + 3 * h * i + 2 * h + 2 * config.head_dim
    embeddings = config.vocab_size * h * (1 if config.tie_word_embeddings else 2)
    return dtype_bytes * (layers * per_layer + embeddings + h)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tiny", action="store_true", help="a tiny model shape (hidden 64, 2 layers), on any device")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="1.7b", help="the DICE size's shape (default 1.7b)")
    parser.add_argument("--gen", type=int, default=256, help="tokens generated per candidate")
    parser.add_argument("--prompt-tokens", type=int, default=1024)
    parser.add_argument("--batches", type=lambda text: [int(v) for v in text.split(",")], default=[1, 4],
                        help="batch sizes, comma-separated (default 1,4)")
    parser.add_argument("--settings", type=lambda text: [v.strip() for v in text.split(",")], default=list(SETTINGS),
                        help=f"which of {', '.join(SETTINGS)} (comma-separated; default all)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--path", choices=PATHS, help="decoding path (default: the engine's)")
    parser.add_argument("--memory-only", action="store_true",
                        help="print the KV cache's memory per batch (bf16, the GPU's) and stop: no model is made")
    parser.add_argument("--gpu-gb", type=float, help="the GPU memory the table fits candidates into "
                        "(default: this GPU's; 80 for an H100, 141 for an H200)")
    args = parser.parse_args()
    unknown = [name for name in args.settings if name not in SETTINGS]
    if unknown:
        parser.error(f"unknown setting {unknown[0]!r}; the settings are: {', '.join(SETTINGS)}")
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    config = TINY if args.tiny else SHAPES[args.shape]
    dtype = torch.bfloat16 if cuda or args.memory_only else torch.float32
    dtype_bytes = torch.tensor([], dtype=dtype).element_size()
    path = args.path or (GPU_DEFAULT if cuda or args.memory_only else "cached")
    gpu_bytes = args.gpu_gb * GB if args.gpu_gb else torch.cuda.get_device_properties(0).total_memory if cuda else None
    shape = "tiny (hidden 64, 2 layers)" if args.tiny else f"DICE-{args.shape.upper()} ({describe(config)})"
    length = sequence_length(args.prompt_tokens, args.gen, config.block_size)
    weights = weight_bytes(config, dtype_bytes)
    memory = memory_table(config, path, length, args.batches, dtype_bytes, weights, gpu_bytes)
    budget = None if gpu_bytes is None else cache_budget(gpu_bytes - weights, gpu_bytes)
    fits = None if budget is None else most_that_fit(config, path, length, dtype_bytes, budget)
    print(f"{shape}, {dtype_bytes * 8}-bit, {args.prompt_tokens}-token prompt + {args.gen} tokens = {length} positions, "
          f"path {path}: weights {weights / GB:.2f} GB"
          + ("" if gpu_bytes is None else f", GPU {gpu_bytes / GB:.1f} GB: at most {fits} candidates' KV caches fit"))
    print(f"{'batch':>6}{'kv GB (' + path + ')':>16}{'kv GB (exact)':>15}{'kv GB (2^k)':>13}{'fits':>6}")
    for row in memory:
        fit = "" if row["fits"] is None else "yes" if row["fits"] else "no"
        print(f"{row['batch']:>6}{row['kv_gb']:16.2f}{row['kv_gb_exact']:15.2f}{row['kv_gb_power_of_two']:13.2f}{fit:>6}")
    out_file = Path(os.environ.get("OUT", ".device-out")) / "preset_speed.json"
    out_file.parent.mkdir(parents=True, exist_ok=True)
    results = {"device": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__,
               "shape": shape, "dtype": str(dtype), "prompt_tokens": args.prompt_tokens, "gen": args.gen,
               "path": path, "gpu_gb": None if gpu_bytes is None else gpu_bytes / GB, "most_candidates_that_fit": fits,
               "headroom_fraction": HEADROOM_FRACTION,
               "memory": memory, "runs": []}
    out_file.write_text(json.dumps(results, indent=2) + "\n")
    if args.memory_only:
        print(f"wrote {out_file}")
        return 0
    model = random_model(config, device, dtype)
    print(f"{'setting':<22}{'path':<8}{'batch':>6}{'tok/s':>10}{'passes':>8}{'tok/pass':>9}{'ms/pass':>9}{'peak GB':>9}")
    for name in args.settings:
        for batch, row_memory in zip(args.batches, memory):
            if row_memory["fits"] is False:
                results["runs"].append({"setting": name, "path": path, "batch": batch,
                                        "skipped": f"its KV cache ({row_memory['kv_gb']:.1f} GB) does not fit"})
                out_file.write_text(json.dumps(results, indent=2) + "\n")
                print(f"{name:<22}{path:<8}{batch:>6}  not run: its KV cache ({row_memory['kv_gb']:.1f} GB) "
                      f"and the weights do not fit in {gpu_bytes / GB:.0f} GB", flush=True)
                continue
            row = measure(model, SETTINGS[name], path, batch, args.prompt_tokens, args.gen, args.repeats)
            results["runs"].append({"setting": name, "path": path, "batch": batch, **row})
            out_file.write_text(json.dumps(results, indent=2) + "\n")
            peak = "" if row["peak_gb"] is None else f"{row['peak_gb']:.1f}"
            print(f"{name:<22}{path:<8}{batch:>6}{row['tokens_per_s']:10.0f}{row['forward_passes']:8d}"
                  f"{row['tokens_per_pass']:9.2f}{row['ms_per_pass']:9.2f}{peak:>9}", flush=True)
            if (args.shape, batch) in PUBLISHED and not args.tiny:
                print(f"  beside it: {PUBLISHED[(args.shape, batch)]}")
    print(f"wrote {out_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
