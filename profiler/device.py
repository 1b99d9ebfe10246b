"""The GPU as the timing loop sees it, through CuPy (.cu kernels) or PyTorch (KernelBench).

Imported only inside the sandbox process: importing CuPy or torch here is the point.
Also the device's peak memory bandwidth, measured once per GPU with a large
device-to-device copy and kept on disk, so that achieved bandwidth has a measured roof.
"""

from __future__ import annotations

import json
from typing import Callable

from profiler.paths import cache_dir
from profiler.timing import L2_FLUSH_BYTES, DeviceOps, time_one

PEAK_COPY_BYTES = 1 << 30


def cupy_ops() -> DeviceOps:
    import cupy

    flush_buffer = cupy.empty(L2_FLUSH_BYTES // 4, dtype=cupy.int32)

    def new_event():
        return cupy.cuda.Event()

    return DeviceOps(
        new_event=new_event,
        elapsed_ms=cupy.cuda.get_elapsed_time,
        synchronize=cupy.cuda.runtime.deviceSynchronize,
        flush_l2=lambda: flush_buffer.fill(0),
    )


def torch_ops() -> DeviceOps:
    import torch

    flush_buffer = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

    return DeviceOps(
        new_event=lambda: torch.cuda.Event(enable_timing=True),
        elapsed_ms=lambda start, end: start.elapsed_time(end),
        synchronize=torch.cuda.synchronize,
        flush_l2=flush_buffer.zero_,
    )


def peak_bandwidth_gbs(gpu: str, ops: DeviceOps, copy: Callable[[], None]) -> float:
    """Measured device-to-device copy bandwidth (bytes read + written per second, in GB/s)
    of `gpu`, from the on-disk cache when this GPU was measured before. `copy` copies
    PEAK_COPY_BYTES from one buffer to another."""
    path = cache_dir() / "peak_bandwidth.json"
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if gpu in known:
        return float(known[gpu])
    summary = time_one(copy, ops, budget_s=0.5)
    gbs = 2 * PEAK_COPY_BYTES / (summary.median_ms * 1e-3) / 1e9
    known[gpu] = gbs
    tmp = path.with_suffix(f".{id(known)}.tmp")
    tmp.write_text(json.dumps(known, indent=1))
    tmp.replace(path)  # atomic: two sandboxes measuring at once never leave half a file
    return gbs


def cupy_peak_bandwidth_gbs(gpu: str, ops: DeviceOps) -> float:
    import cupy

    src = cupy.empty(PEAK_COPY_BYTES, dtype=cupy.uint8)
    dst = cupy.empty_like(src)
    return peak_bandwidth_gbs(gpu, ops, lambda: dst.data.copy_from_device_async(src.data, PEAK_COPY_BYTES))


def torch_peak_bandwidth_gbs(gpu: str, ops: DeviceOps) -> float:
    import torch

    src = torch.empty(PEAK_COPY_BYTES, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return peak_bandwidth_gbs(gpu, ops, lambda: dst.copy_(src))
