"""Training throughput of the built-in model on the GPU machine: the training loop of
training/train.py as it runs, with each attention of TrainSettings.attention, in one process.

    python benchmarks/train_speed.py [--settings engine/builtin/train_settings.json] [--steps 200]

For each attention ("sdpa": SDPA over the dense [B, 1, 2T, 2T] mask, eager; "flex": the model
torch.compile'd, flex_attention over the BlockMask) it runs training.train.train for --steps steps
from the settings' init weights on the corpus (the same batches and noise: same seed), and reads
its loss log: steps per second and tokens per second over the steps after the first log
(the first step compiles), and the loss of the first step (the same weights, batch and noise,
so the two attentions must agree to bf16 rounding). Sampler alone: FimSampler.batch's mean
time over 50 batches (the loop overlaps it with the GPU's queued work). Writes
$OUT/train_speed.json (OUT defaults to ./.device-out).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from training.fim_data import CorpusSplit, FimSampler  # noqa: E402
from training.train import TrainSettings, load_tokenizer, train  # noqa: E402


def loop_speed(settings: TrainSettings, steps: int, device: torch.device) -> dict:
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        train(settings, Path(out), resume=False, device=device, max_steps=steps)
        wall = time.perf_counter() - started
        with open(Path(out) / "loss.csv", newline="") as log:
            rows = list(csv.DictReader(log))
    first, second, last = rows[0], rows[1], rows[-1]
    timed_steps = int(last["step"]) - int(second["step"])
    timed_seconds = float(last["seconds"]) - float(second["seconds"])
    tokens_per_step = settings.batch_size * settings.seq_len
    return {"attention": settings.attention, "steps": int(last["step"]), "wall_s": round(wall, 1),
            "first_step_s": float(first["seconds"]),
            "steps_per_s": round(timed_steps / timed_seconds, 2),
            "tokens_per_s": round(timed_steps * tokens_per_step / timed_seconds),
            "first_loss": float(first["loss"]), "first_middle_loss": float(first["middle_loss"]),
            "last_loss": float(last["loss"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--settings", type=Path, default=Path("engine/builtin/train_settings.json"))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--attentions", default="sdpa,flex")
    args = ap.parse_args()
    out = Path(os.environ.get("OUT", ".device-out"))
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    settings = TrainSettings.load(args.settings)
    # No validation or checkpoints inside the timed loop.
    settings = replace(settings, valid_every_seconds=1e9, save_every_seconds=1e9)
    record = {"date": time.strftime("%Y-%m-%d"), "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "settings": str(args.settings), "batch_size": settings.batch_size, "seq_len": settings.seq_len,
              "runs": []}
    tokenizer = load_tokenizer(settings.tokenizer)
    sampler = FimSampler(CorpusSplit(Path(settings.data), "train"), tokenizer, settings.seq_len,
                         settings.model["block_size"], settings.max_middle, settings.seed)
    sampler.batch(settings.batch_size)
    started = time.perf_counter()
    for _ in range(50):
        sampler.batch(settings.batch_size)
    record["sampler_ms_per_batch"] = round((time.perf_counter() - started) / 50 * 1e3, 1)
    print(f"sampler: {record['sampler_ms_per_batch']} ms a batch", flush=True)
    for attention in args.attentions.split(","):
        run = loop_speed(replace(settings, attention=attention), args.steps, device)
        record["runs"].append(run)
        print(json.dumps(run), flush=True)
        (out / "train_speed.json").write_text(json.dumps(record, indent=1))
    base = record["runs"][0]
    for run in record["runs"]:
        print(f"{run['attention']:5s} {run['steps_per_s']:7.2f} steps/s {run['tokens_per_s'] / 1e3:8.0f} k tokens/s "
              f"x{run['tokens_per_s'] / base['tokens_per_s']:.2f}  first step {run['first_step_s']:.1f} s  "
              f"first loss {run['first_loss']:.4f}")


if __name__ == "__main__":
    main()
