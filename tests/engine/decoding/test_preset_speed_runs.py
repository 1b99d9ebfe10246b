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
    report = run(tmp_path, "--memory-only", "--shape", "4b", "--gen", "4096", "--batches", "8,128", "--gpu-gb", "80")
    assert report["path"] == "skinny" and report["runs"] == []
    small, large = report["memory"]
    # 1024 + 4096 positions take a cache of 8192; 36 layers x 8 KV heads x 128 x 2 bytes, keys and values
    per_candidate = 8192 * 2 * 36 * 8 * 128 * 2 / 1e9
    assert abs(small["kv_gb"] - 8 * per_candidate) < 1e-6 and small["fits"] is True
    assert abs(large["kv_gb"] - 128 * per_candidate) < 1e-6 and large["fits"] is False
    assert large["kv_gb_exact"] < large["kv_gb"]  # the exact 5120 positions
    assert report["most_candidates_that_fit"] == 32


def test_a_tiny_decode_runs_and_a_batch_that_cannot_fit_is_skipped(tmp_path):
    report = run(tmp_path, "--tiny", "--batches", "1,2", "--gen", "8", "--prompt-tokens", "16", "--repeats", "1",
                 "--settings", "dice dynamic 0.9")
    assert [r["batch"] for r in report["runs"]] == [1, 2]
    assert all(r["tokens_per_s"] > 0 and r["setting"] == "dice dynamic 0.9" for r in report["runs"])
    skipped = run(tmp_path, "--tiny", "--batches", "1", "--gen", "8", "--prompt-tokens", "16", "--repeats", "1",
                  "--settings", "dice static", "--gpu-gb", "0.000001")
    (row,) = skipped["runs"]
    assert "does not fit" in row["skipped"] and "tokens_per_s" not in row
