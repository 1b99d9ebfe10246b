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


def _nvml_library_numbers() -> dict[str, int] | None:
    """The maximum memory clock (MHz) and memory bus width (bits) of the visible GPU, read
    from the driver's NVML library through ctypes (pynvml is optional; the library comes with
    every NVIDIA driver). None without it."""
    import ctypes

    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() != 0:
            return None
        handle = ctypes.c_void_p()
        index = _visible_index()
        found = (nvml.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(int(index)), ctypes.byref(handle))
                 if index.isdigit() else nvml.nvmlDeviceGetHandleByUUID(index.encode(), ctypes.byref(handle)))
        clock, bus = ctypes.c_uint(), ctypes.c_uint()
        if found != 0 or nvml.nvmlDeviceGetMaxClockInfo(handle, 2, ctypes.byref(clock)) != 0 \
                or nvml.nvmlDeviceGetMemoryBusWidth(handle, ctypes.byref(bus)) != 0:  # 2: NVML_CLOCK_MEM
            return None
        return {"memory_max_mhz": clock.value, "bus_bits": bus.value}
    except (OSError, AttributeError, ValueError):
        return None


@functools.cache
def theoretical_bandwidth_gbs() -> float | None:
    """The GPU's memory bandwidth by its specification: maximum memory clock x 2 (two
    transfers a clock, as NVML counts HBM and GDDR clocks) x bus width, in GB/s (3352 for an
    H100 SXM: 2619 MHz, 5120 bits). None where NVML cannot say."""
    numbers = _nvml_library_numbers()
    if not numbers or not numbers["memory_max_mhz"] or not numbers["bus_bits"]:
        return None
    return numbers["memory_max_mhz"] * 1e6 * 2 * numbers["bus_bits"] / 8 / 1e9


@functools.cache
def max_sm_clock_mhz() -> int | None:
    """The GPU's maximum SM clock (a fact of the card: asked once per process)."""
    return (clocks_mhz() or {}).get("sm_max")
