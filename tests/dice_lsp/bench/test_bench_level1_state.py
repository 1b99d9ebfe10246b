"""benchmarks/bench_level1.py's state crosses device calls as one archive (a call brings
back at most 8 files): what a call keeps, the next restores, inputs and charts left out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
STATE_ARCHIVE = "state.tar.gz"


def bench_level1(*args: str) -> None:
    """benchmarks/bench_level1.py, run as a program."""
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_level1.py"), *args], check=True, timeout=120)


def test_the_state_kept_by_one_call_is_restored_by_the_next(tmp_path: Path):
    state = tmp_path / "state-here"
    (state / "controls").mkdir(parents=True)
    (state / "inputs" / "controls" / "level1").mkdir(parents=True)
    (state / "inputs" / "controls" / "level1" / "19_ReLU.py").write_text("problem")
    (state / "controls" / "results.json").write_text(json.dumps({"problems": [{"name": "19_ReLU"}]}))
    (state / "controls" / "speedups.png").write_bytes(b"png")
    (state / "state.json").write_text(json.dumps({"calls": 1, "seconds": {"controls": 330.6}, "complete": {}}))
    (state / "dice-bench.log").write_text("log")
    (state / "bench_level1.json").write_text("{}")
    (state / "bench_level1.md").write_text("# report")

    out = tmp_path / "out" / "bench_level1"
    bench_level1("--state", str(state), "--out", str(out), "--archive-only")
    assert sorted(p.name for p in out.iterdir()) == ["bench_level1.json", "bench_level1.md", STATE_ARCHIVE]

    restored = tmp_path / "fresh-machine" / ".bench-level1"
    restored.parent.mkdir()
    bench_level1("--state", str(restored), "--restore", str(out / STATE_ARCHIVE), "--restore-only")
    assert json.loads((restored / "state.json").read_text())["seconds"] == {"controls": 330.6}
    assert json.loads((restored / "controls" / "results.json").read_text())["problems"][0]["name"] == "19_ReLU"
    assert (restored / "dice-bench.log").read_text() == "log"
    assert not (restored / "inputs").exists()  # made again from the shared problems
    assert not (restored / "controls" / "speedups.png").exists()
