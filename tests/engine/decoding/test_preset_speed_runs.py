"""benchmarks/preset_speed.py, run as a program: its KV cache table (how many candidates fit)
and a tiny decode on this machine; a batch whose cache would not fit is skipped, not run into
an out-of-memory error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def run(tmp_path: Path, *args: str) -> dict:
    done = subprocess.run([sys.executable, "benchmarks/preset_speed.py", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "OUT": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((tmp_path / "preset_speed.json").read_text())


def test_the_memory_table_counts_the_buckets_a_graph_path_allocates(tmp_path):
    report = run(tmp_path, "--memory-only", "--shape", "4b", "--gen", "4096", "--batches", "8,64,128", "--gpu-gb", "80")
    assert report["path"] == "skinny" and report["runs"] == []
    small, middle, large = report["memory"]
    # 36 layers x 8 KV heads x 128 x 2 bytes, keys and values, a position
    per_position = 2 * 36 * 8 * 128 * 2 / 1e9
    # 1024 + 4096 positions: 8 candidates take the power of two, 8192 positions
    assert abs(small["kv_gb"] - 8 * 8192 * per_position) < 1e-6 and small["fits"] is True
    # 64 would not fit at 8192 (77 GB beside 8.8 GB of weights): their cache is the exact 5120 (whole 256s)
    assert abs(middle["kv_gb_power_of_two"] - 64 * 8192 * per_position) < 1e-6
    assert abs(middle["kv_gb"] - 64 * 5120 * per_position) < 1e-6 and middle["fits"] is True
    # 128 fit at no length on 80 GB
    assert abs(large["kv_gb"] - large["kv_gb_exact"]) < 1e-6 and large["fits"] is False
    assert report["most_candidates_that_fit"] == 64
    on_h200 = run(tmp_path, "--memory-only", "--shape", "4b", "--gen", "4096", "--batches", "128", "--gpu-gb", "141")
    assert on_h200["memory"][0]["fits"] is True and on_h200["most_candidates_that_fit"] == 128


def test_a_tiny_decode_runs_and_a_batch_that_cannot_fit_is_skipped(tmp_path):
    report = run(tmp_path, "--tiny", "--batches", "1,2", "--gen", "8", "--prompt-tokens", "16", "--repeats", "1",
                 "--settings", "dice dynamic 0.9")
    assert [r["batch"] for r in report["runs"]] == [1, 2]
    assert all(r["tokens_per_s"] > 0 and r["setting"] == "dice dynamic 0.9" for r in report["runs"])
    skipped = run(tmp_path, "--tiny", "--batches", "1", "--gen", "8", "--prompt-tokens", "16", "--repeats", "1",
                  "--settings", "dice static", "--gpu-gb", "0.000001")
    (row,) = skipped["runs"]
    assert "does not fit" in row["skipped"] and "tokens_per_s" not in row
