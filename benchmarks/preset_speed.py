"""Decoding speed of the `dice` preset next to the project's default, on a model of
DICE-1.7B's shape (benchmarks/dice_shape.py: random bf16 weights; the mask token's embedding
row is zero).

    python benchmarks/preset_speed.py                 # on the GPU machine (about 1 minute on an H200)
    python benchmarks/preset_speed.py --tiny          # any machine: a tiny shape, to check the script runs

Settings, each decoding --gen tokens per candidate after a --prompt-token prompt, 4-token
blocks, 4 steps per block, batch 1 (and --batch N):
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

from benchmarks.dice_shape import DICE_1_7B, prompt, random_model  # noqa: E402  (after the path is set)
from engine.decoding.decode import decode  # noqa: E402
from engine.model.routes import GPU_DEFAULT, PATHS  # noqa: E402
from engine.types import Sampling  # noqa: E402

TINY = replace(DICE_1_7B, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, head_dim=16)
SETTINGS = {
    "default static": Sampling(strategy="low_confidence_static", steps=4, block_size=4),
    "default dynamic 0.9": Sampling(strategy="low_confidence_dynamic", threshold=0.9, steps=4, block_size=4),
    "dice static": Sampling.for_preset("dice"),
    "dice dynamic 0.9": Sampling.for_preset("dice", strategy="low_confidence_dynamic", threshold=0.9),
}


def measure(model, sampling: Sampling, path: str, batch: int, prompt_tokens: int, gen: int, repeats: int) -> dict:
    args = dict(n=batch, max_tokens=gen, sampling=sampling, stop_ids=[], path=path)
    ids = prompt(prompt_tokens)
    decode(model, ids, **args)  # warm: graphs captured
    runs = [decode(model, ids, **args) for _ in range(repeats)]
    decode_s = statistics.median(r.seconds - r.prefill_seconds for r in runs)
    result = runs[0]
    tokens = sum(len(t) for t in result.tokens)
    return {
        "tokens": tokens, "forward_passes": result.steps, "tokens_per_pass": tokens / batch / result.steps,
        "decode_s": decode_s, "prefill_s": statistics.median(r.prefill_seconds for r in runs),
        "tokens_per_s": tokens / decode_s, "ms_per_pass": 1000 * decode_s / result.steps,
        "same_tokens_every_run": all(r.tokens == result.tokens for r in runs),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tiny", action="store_true", help="a tiny model shape (hidden 64, 2 layers), on any device")
    parser.add_argument("--gen", type=int, default=256, help="tokens generated per candidate")
    parser.add_argument("--prompt-tokens", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=4, help="a second batch size besides 1")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--path", choices=PATHS, help="decoding path (default: the engine's)")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    config = TINY if args.tiny else DICE_1_7B
    model = random_model(config, device, torch.bfloat16 if cuda else torch.float32)
    paths = (args.path or (GPU_DEFAULT if cuda else "cached"),)
    out_file = Path(os.environ.get("OUT", ".device-out")) / "preset_speed.json"
    out_file.parent.mkdir(parents=True, exist_ok=True)
    results = {"device": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__,
               "shape": "tiny (hidden 64, 2 layers)" if args.tiny else "DICE-1.7B (2048 x 28, 16/8 heads, vocab 151936, tied)",
               "dtype": str(next(model.parameters()).dtype), "prompt_tokens": args.prompt_tokens, "gen": args.gen,
               "runs": []}
    print(f"{'setting':<22}{'path':<8}{'batch':>6}{'tok/s':>10}{'passes':>8}{'tok/pass':>9}{'ms/pass':>9}")
    for name, sampling in SETTINGS.items():
        for path in paths:
            for batch in sorted({1, args.batch}):
                row = measure(model, sampling, path, batch, args.prompt_tokens, args.gen, args.repeats)
                results["runs"].append({"setting": name, "path": path, "batch": batch, **row})
                out_file.write_text(json.dumps(results, indent=2) + "\n")
                print(f"{name:<22}{path:<8}{batch:>6}{row['tokens_per_s']:10.0f}{row['forward_passes']:8d}"
                      f"{row['tokens_per_pass']:9.2f}{row['ms_per_pass']:9.2f}", flush=True)
    print(f"wrote {out_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
