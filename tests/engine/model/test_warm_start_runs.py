"""benchmarks/warm_start.py, run as a program on a tiny checkpoint it writes: a fresh process
loads the folder, warms up and decodes, and its timings come back in order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_a_tiny_checkpoints_process_reports_its_time_to_the_first_block(tmp_path):
    done = subprocess.run([sys.executable, "benchmarks/warm_start.py", "--shape", "tiny", "--processes", "1",
                           "--paths", "cached", "--tokens", "8", "--folder", str(tmp_path / "ckpt")], cwd=REPO,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "OUT": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "warm_start-tiny.json").read_text())
    (run,) = report["runs"]
    assert run["path"] == "cached" and run["tokens"] == 8 and "error" not in run
    s = run["seconds"]
    assert 0 < s["import"] <= s["loaded"] <= s["warm"] <= s["first_block"] <= s["decode_done"] <= run["wall_s"]
    assert report["folder_gb"] > 0 and (tmp_path / "ckpt" / "vocab.json").is_file()
