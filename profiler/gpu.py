"""Facts about the local GPU that need no CUDA library: its name and its clocks.

Read through NVML (the `nvidia-ml-py` package) when it is installed, else `nvidia-smi`, so
that the language server can ask without importing torch or CuPy. CUDA_VISIBLE_DEVICES is
honoured: the first visible device is the one the sandbox runs on.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess


def _visible_index() -> str:
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    return first or "0"


def _nvidia_smi(fields: str) -> list[str] | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "-i", _visible_index(), f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    return [part.strip() for part in out.stdout.strip().splitlines()[0].split(",")]


def _nvml_handle():
    try:
        import pynvml
    except ImportError:
        return None, None
    try:
        pynvml.nvmlInit()
        index = _visible_index()
        handle = (pynvml.nvmlDeviceGetHandleByIndex(int(index)) if index.isdigit()
                  else pynvml.nvmlDeviceGetHandleByUUID(index))
        return pynvml, handle
    except Exception:  # NVML missing or no device: fall back to nvidia-smi
        return None, None


@functools.cache
def gpu_name() -> str | None:
    """The name of the GPU kernels run on ("NVIDIA H200"), or None without one."""
    nvml, handle = _nvml_handle()
    if handle is not None:
        name = nvml.nvmlDeviceGetName(handle)
        return name.decode() if isinstance(name, bytes) else name
    fields = _nvidia_smi("name")
    return fields[0] if fields else None


def clocks_mhz() -> dict[str, int] | None:
    """Current and maximum SM and memory clocks, as seen now (None without a GPU)."""
    nvml, handle = _nvml_handle()
    if handle is not None:
        return {
            "sm": nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
            "memory": nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
            "sm_max": nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM),
            "memory_max": nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM),
        }
    fields = _nvidia_smi("clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem")
    if not fields or not all(f.isdigit() for f in fields):
        return None
    return dict(zip(("sm", "memory", "sm_max", "memory_max"), map(int, fields)))


@functools.cache
def compute_capability() -> str | None:
    """The GPU's compute capability as "major.minor" ("9.0" for an H100/H200), or None."""
    nvml, handle = _nvml_handle()
    if handle is not None:
        major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
        return f"{major}.{minor}"
    fields = _nvidia_smi("compute_cap")
    return fields[0] if fields and fields[0].replace(".", "").isdigit() else None
