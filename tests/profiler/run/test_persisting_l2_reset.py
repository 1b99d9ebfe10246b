"""The persisting-L2 reset the timing loop calls before every run (profiler.run.device), with
the real CUDA runtime library on a machine without a GPU: it is found in the process's memory
maps, and a runtime that refuses the calls (here: no driver) neither raises nor stops the
function from being called again. That a refused call's error is taken back before torch's
next launch check reads it needs a GPU that refuses (compute capability below 8.0, MIG, MPS)."""

from __future__ import annotations

import glob
import json
import subprocess
import sys

import pytest

RUNTIMES = sorted(glob.glob("/usr/local/cuda*/lib64/libcudart.so.*[0-9]"))

SCRIPT = r"""
import ctypes, json, sys
from profiler.run.device import persisting_l2_reset, runtime_library
before = runtime_library()
ctypes.CDLL(sys.argv[1])
found = runtime_library()
reset, state = persisting_l2_reset(found)
print(json.dumps({"before": before, "found": found, "state": state, "again": [reset(), reset()]}))
"""


@pytest.mark.skipif(not RUNTIMES, reason="no CUDA runtime library (libcudart) under /usr/local/cuda*")
def test_the_runtime_is_found_where_it_is_loaded_and_a_refusing_device_raises_nothing():
    done = subprocess.run([sys.executable, "-c", SCRIPT, RUNTIMES[-1]], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["before"] is None  # nothing of CUDA loaded: nothing to call
    assert got["found"].endswith(RUNTIMES[-1].rsplit("/", 1)[1])
    assert got["state"].startswith(got["found"]) and "refuses it: cudaError" in got["state"]
    assert all(code != 0 for code in got["again"])


def test_without_a_runtime_the_reset_is_off_and_says_so():
    from profiler.run.device import persisting_l2_reset

    reset, state = persisting_l2_reset(None)
    assert reset() is None and state.startswith("off:")
    reset, state = persisting_l2_reset("/nonexistent/libcudart.so.13")
    assert reset() is None and state.startswith("off: /nonexistent/libcudart.so.13")
