"""`dice fill` says what a fill needs before anything is generated: an insertion with nothing
around it, a .cu with no kernel to judge against; and a range past the end of a line is said on
stderr where it is clamped. The real CLI in a subprocess. A missing --model shows that the
refusal comes before the model is loaded: its error would otherwise be the one printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]



@pytest.mark.parametrize("text", ["", "\n\n   \n"])
def test_an_insertion_with_nothing_around_it_says_what_it_needs(dice, tmp_path: Path, text: str):
    path = tmp_path / "empty.cu"
    path.write_text(text)
    run = dice("fill", str(path), "--range", "1:1-1:1", "--model", str(tmp_path / "no-model"))
    assert run.returncode == 2
    assert run.stderr == ("dice fill: an insertion into an empty file has nothing to fill between: write the code "
                          "around it first (for a .cu file a __global__ kernel with its benchmark spec, for a .py "
                          "file a KernelBench Model), or select code to replace\n")


def test_a_fill_in_a_cu_file_without_a_kernel_says_what_it_needs(dice, tmp_path: Path):
    path = tmp_path / "helpers.cu"
    path.write_text("__device__ int twice(int x) {\n    return 2 * x;\n}\n")
    run = dice("fill", str(path), "--range", "2:5-2:18", "--model", str(tmp_path / "no-model"))
    assert run.returncode == 2
    assert run.stderr.startswith("dice fill: no __global__ kernel in this file: a fill is judged against the kernel")


def test_a_column_past_the_end_of_its_line_is_said_on_stderr(dice, tmp_path: Path):
    path = tmp_path / "saxpy.cu"
    path.write_text((REPO / "examples" / "saxpy.cu").read_text())
    run = dice("fill", str(path), "--range", "12:9-12:99", "--candidates", "1", "--max-tokens", "8",
               "--json")
    assert run.returncode == 0, run.stderr
    assert run.stderr == ("dice fill: --range 12:9-12:99: line 12 has 31 characters, so column 99 is read as 32, "
                          "the end of the line\n")
    assert json.loads(run.stdout)["range"]["end"] == {"line": 12, "column": 32}
