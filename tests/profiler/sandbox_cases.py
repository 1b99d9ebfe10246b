"""A small KernelBench problem and helpers for the sandbox tests (CPU and GPU): candidates
built from module-level code, and whether a process is still alive."""

from __future__ import annotations

import os
import signal
import time

import pytest

BASELINE = """\
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.rand(16, 16)]

def get_init_inputs():
    return []
"""

MODEL_NEW = """
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp(x, min=0)
"""


def candidate(module_code: str, model_new: str = MODEL_NEW) -> str:
    return BASELINE + module_code + model_new


def alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie (dead, not yet reaped by its parent)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def assert_dies(pid: int, within_s: float = 5.0) -> None:
    """Fail (after killing it) when `pid` is still alive `within_s` from now."""
    deadline = time.monotonic() + within_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail("a process the candidate started outlived the sandbox")
