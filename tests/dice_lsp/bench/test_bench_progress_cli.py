"""`dice bench` says on stderr what is happening and nothing that is not: loading solutions
(not "generating") with --solutions; without a GPU, no "waiting for GPU" and no "timing"; a
rate over the whole run's wall time. The real CLI in a subprocess, the real judge."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def test_solutions_on_this_machine_say_what_happens(child_env, tmp_path: Path, local_gpu):
    problems = tmp_path / "level1"
    problems.mkdir()
    (problems / "19_ReLU.py").write_text((REPO / "tests" / "data" / "kernelbench" / "level1" / "19_ReLU.py").read_text())
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "bench", str(tmp_path), "--solutions",
                          str(REPO / "benchmarks" / "kernelbench_controls"), "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=600, env=child_env, check=False)
    wall = time.monotonic() - started
    assert run.returncode == 0, run.stderr
    assert "[loading solutions 1/1] level1/19_ReLU" in run.stderr, run.stderr
    assert "generating" not in run.stderr
    if local_gpu is None:
        assert "waiting for GPU" not in run.stderr and "timing" not in run.stderr, run.stderr
        # Built ahead where a second CPU builds (then loaded), else built as it loads: never
        # "built" for a problem nothing built.
        built_ahead = "level1/19_ReLU: building\n" in run.stderr
        assert ("level1/19_ReLU: built\n" in run.stderr) == built_ahead, run.stderr
        assert (f"level1/19_ReLU: {'loading' if built_ahead else 'building and loading'}, not timed: no GPU"
                in run.stderr), run.stderr
    summary = re.search(r"dice bench: judged (\d+) candidate\(s\) of 1 problem\(s\); the run took (\d+) s "
                        r"\(([\d.]+) candidates/min\)", run.stderr)
    assert summary, run.stderr
    judged, took, rate = int(summary[1]), int(summary[2]), float(summary[3])
    assert judged == 2  # the correct and the wrong control
    # Over the run's wall time: what the process took, start-up aside, not the judging alone.
    assert took <= wall and took >= wall - 15, (took, wall)
    assert rate == pytest.approx(judged / (took / 60), rel=0.1, abs=0.1)
