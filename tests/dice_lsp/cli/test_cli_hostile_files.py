"""`dice check`, `dice profile` and `dice fill` on paths that are not source files: each is
refused at once with a message that says what the path is, never read without end, never a
traceback, never "no such file" for a file that is there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from profiler.source.source_files import MAX_SOURCE_BYTES

REPO = Path(__file__).resolve().parents[3]


def dice(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "dice_lsp.cli", *args], capture_output=True, text=True,
                          env=env, timeout=60, cwd=cwd)


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    os.mkfifo(tmp_path / "pipe.cu")
    (tmp_path / "zero.cu").symlink_to("/dev/zero")
    (tmp_path / "folder.cu").mkdir()
    huge = tmp_path / "huge.cu"
    with open(huge, "wb") as f:  # sparse: its size is what is refused, before any read
        f.truncate(MAX_SOURCE_BYTES + 1)
    return {
        "fifo": (tmp_path / "pipe.cu", "is a FIFO (named pipe), not a regular file"),
        "device": (tmp_path / "zero.cu", "is a character device, not a regular file"),
        "folder": (tmp_path / "folder.cu", "is a folder, not a regular file"),
        "huge": (huge, f"is {MAX_SOURCE_BYTES + 1} bytes, over the limit of {MAX_SOURCE_BYTES}"),
        "missing": (tmp_path / "missing.cu", "no such file"),
    }


@pytest.mark.parametrize("case", ["fifo", "device", "folder", "huge", "missing"])
@pytest.mark.parametrize("command", [("check",), ("profile",), ("fill", "--range", "1:1-1:2")])
def test_a_path_that_is_not_a_source_file_is_refused_saying_what_it_is(hostile, tmp_path, case, command):
    path, expected = hostile[case]
    done = dice(command[0], str(path), *command[1:], cwd=tmp_path)
    assert done.returncode == 2, done
    assert expected in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    if case != "missing":
        assert "no such file" not in done.stderr


@pytest.mark.parametrize(("name", "text"), [
    # braces, parentheses and a spec expression nested past Python's recursion limit
    ("deep.cu", "__global__ void k(float* y) " + "{" * 3000 + "y[0] = 1;" + "}" * 3000 + "\n"),
    ("open.cu", "__global__ void k(float* y) " + "{" * 3000 + "\n"),
    ("spec.cu", "// dice: let n = " + "(" * 3000 + "1" + ")" * 3000 + "\n__global__ void k(int n) {}\n"),
    # Python nested past what ast and compile() recurse through
    ("deep.py", "x = " + "-" * 5000 + "1\n"),
    ("sum.py", "x = " + "+".join(["1"] * 30000) + "\n"),
])
def test_text_nested_thousands_deep_is_a_diagnostic_not_a_recursion_error(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    for command in ("check", "profile"):
        done = dice(command, str(path), cwd=tmp_path)
        assert "RecursionError" not in done.stdout + done.stderr and "Traceback" not in done.stderr, done
        assert done.returncode in (0, 1) or "no __global__ function" in done.stderr, done  # an unclosed one is none
        if name.endswith(".py") or name == "spec.cu":
            assert "nested" in done.stdout + done.stderr, done


def test_cuda_sources_that_name_themselves_are_no_recursion(tmp_path):
    path = tmp_path / "self.py"
    path.write_text("from torch.utils.cpp_extension import load_inline\nsrc = [src]\na = [b]\nb = [a]\n"
                    "m = load_inline(name='x', cpp_sources='', cuda_sources=src)\n"
                    "n = load_inline(name='y', cpp_sources='', cuda_sources=[a, b])\n")
    done = dice("check", str(path), cwd=tmp_path)
    assert done.returncode == 0 and "RecursionError" not in done.stderr + done.stdout, done
