"""Shared test fixtures and the `gpu` marker.

Tests marked `gpu` need a real CUDA device (they run on the device machine). Elsewhere they
are skipped with the reason, never faked.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _shared_dir() -> Path:
    """The project's shared/ folder: beside the checkout, or a copy carried inside it
    (`.shared/`, on the device machine), or wherever DICE_SHARED points."""
    import os

    for cand in (os.environ.get("DICE_SHARED"), REPO.parent / "shared", REPO / ".shared"):
        if cand and Path(cand).is_dir():
            return Path(cand)
    return REPO.parent / "shared"


SHARED = _shared_dir()
KERNELBENCH = SHARED / "kernelbench"
SDAR_TOKENIZER = SHARED / "sdar-tokenizer"


@functools.cache
def gpu_reason() -> str | None:
    """Why GPU tests cannot run here, or None when a CUDA device answers."""
    if shutil.which("nvidia-smi") is None:
        return "no GPU: nvidia-smi not found (GPU tests run on the device machine)"
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"no GPU: nvidia-smi failed ({exc})"
    if out.returncode != 0 or "GPU" not in out.stdout:
        return "no GPU: nvidia-smi lists no device"
    return None


def pytest_collection_modifyitems(config, items):
    reason = gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def kernelbench_dir() -> Path:
    if not KERNELBENCH.is_dir():
        pytest.skip(f"KernelBench subset not found at {KERNELBENCH}")
    return KERNELBENCH


@pytest.fixture(scope="session")
def sdar_tokenizer_dir() -> Path:
    if not SDAR_TOKENIZER.is_dir():
        pytest.skip(f"SDAR tokenizer files not found at {SDAR_TOKENIZER}")
    return SDAR_TOKENIZER
