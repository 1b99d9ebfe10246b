"""The GPU as the timing loop sees it, through CuPy (.cu kernels) or PyTorch (KernelBench).

Imported only inside the sandbox process: importing CuPy or torch here is the point.
Also the device's peak memory bandwidth, measured once per GPU with a large
device-to-device copy and kept by the judge, so that achieved bandwidth has a measured roof.
"""

from __future__ import annotations

from typing import Callable

from profiler.measure.timing import L2_FLUSH_BYTES, DeviceOps, time_one

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


# The functions the timing loop calls on torch, taken by capture_torch() before any candidate
# code runs in the process.
_CAPTURED: dict = {}


def capture_torch() -> None:
    """Take, before candidate code runs in this process, what the timing loop calls: the
    compiled CUDA event type's own methods, torch's device synchronize, the current stream
    and the clock, as the objects they are now. A candidate that later replaces any of them
    where it is looked up (torch.cuda.Event's attributes, the event type's dict written
    through ctypes, torch.cuda.synchronize, time.perf_counter) replaces what the loop no
    longer looks up. (What it does to memory beyond that, profiler.verdict.decision's cross-checks
    against the wall clock and against Model run alone answer.)"""
    import time

    import torch

    if not torch.cuda.is_available():  # nothing is timed (a CPU build's event type has no methods)
        return
    base = torch._C._CudaEventBase
    torch.cuda.init()
    reset_l2, l2_state = persisting_l2_reset(runtime_library())
    _CAPTURED.update(event_type=base, record=base.record, elapsed=base.elapsed_time,
                     synchronize=torch._C._cuda_synchronize, current_stream=torch.cuda.current_stream,
                     clock_ns=time.perf_counter_ns, reset_l2=reset_l2, l2_state=l2_state)


def l2_reset_state() -> str | None:
    """What capture_torch() found of the persisting-L2 reset: the CUDA runtime it calls, and
    whether this device took the calls (None: nothing captured, no GPU)."""
    return _CAPTURED.get("l2_state")


# cudaLimitPersistingL2CacheSize of the CUDA runtime's enum cudaLimit.
_PERSISTING_L2_LIMIT = 0x06


def runtime_library() -> str | None:
    """The path of the CUDA runtime (libcudart) loaded in this process (torch's), or None."""
    try:
        with open("/proc/self/maps") as maps:
            return next((line.split()[-1] for line in maps if "libcudart.so" in line), None)
    except OSError:
        return None


def persisting_l2_reset(path: str | None):
    """(a function that gives the L2 set-aside for persisting accesses back (its limit 0) and
    makes every persisting line normal again, through the CUDA runtime at `path`; what it found,
    for the measurement). A no-op where there is no runtime to call. A persisting line (a
    stream's or a launch's access-policy window, hitRatio 1) survives the L2 flush: a candidate
    could keep its inputs, or an answer, in L2 across runs.

    A device without the set-aside (compute capability below 8.0, MIG, a client of MPS) refuses
    the calls, and a refused runtime call is also the thread's last error, which torch's next
    kernel launch check (cudaGetLastError) would raise as that launch's: the function takes
    it back at once."""
    import ctypes

    if path is None:
        return (lambda: None), "off: no CUDA runtime in this process's memory maps"
    try:
        runtime = ctypes.CDLL(path)
        set_limit, reset, last_error = (runtime.cudaDeviceSetLimit, runtime.cudaCtxResetPersistingL2Cache,
                                        runtime.cudaGetLastError)
    except (OSError, AttributeError) as exc:
        return (lambda: None), f"off: {path}: {exc}"
    set_limit.argtypes, set_limit.restype = [ctypes.c_int, ctypes.c_size_t], ctypes.c_int
    reset.argtypes, reset.restype = [], ctypes.c_int
    last_error.argtypes, last_error.restype = [], ctypes.c_int

    def reset_l2() -> int:
        refused = set_limit(_PERSISTING_L2_LIMIT, 0), reset()
        if any(refused):
            last_error()
        return max(refused)

    refused = reset_l2()
    return reset_l2, path + (f" (the device refuses it: cudaError {refused})" if refused else "")


class _Event:
    """A timing event made and recorded through the captured functions."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = _CAPTURED["event_type"](enable_timing=True)

    def record(self) -> None:
        _CAPTURED["record"](self.event, _CAPTURED["current_stream"]())


def torch_ops() -> DeviceOps:
    import torch

    if not _CAPTURED:
        capture_torch()
    flush_buffer = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    clock_ns = _CAPTURED["clock_ns"]
    return DeviceOps(
        new_event=_Event,
        elapsed_ms=lambda start, end: _CAPTURED["elapsed"](start.event, end.event),
        synchronize=_CAPTURED["synchronize"],
        flush_l2=flush_buffer.zero_,
        clock_ms=lambda: clock_ns() / 1e6,
        reset_l2=_CAPTURED["reset_l2"],
    )


def peak_bandwidth_gbs(ops: DeviceOps, copy: Callable[[], None], known: float | None) -> float:
    """Measured device-to-device copy bandwidth (bytes read + written per second, in GB/s),
    or `known` when the judge already measured this GPU (it keeps the number: a cache the
    sandbox could write would be a cache a candidate could write). `copy` copies
    PEAK_COPY_BYTES from one buffer to another."""
    if known:
        return float(known)
    summary = time_one(copy, ops, budget_s=0.5)
    return 2 * PEAK_COPY_BYTES / (summary.median_ms * 1e-3) / 1e9


def cupy_peak_bandwidth_gbs(ops: DeviceOps, known: float | None) -> float:
    import cupy

    src = cupy.empty(PEAK_COPY_BYTES, dtype=cupy.uint8)
    dst = cupy.empty_like(src)
    return peak_bandwidth_gbs(ops, lambda: dst.data.copy_from_device_async(src.data, PEAK_COPY_BYTES), known)


def torch_peak_bandwidth_gbs(ops: DeviceOps, known: float | None) -> float:
    import torch

    src = torch.empty(PEAK_COPY_BYTES, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return peak_bandwidth_gbs(ops, lambda: dst.copy_(src), known)
