"""Why a 5 microsecond kernel can differ by 13% between two timers: its time has modes.

Times saxpy at three sizes with three timers, alternating, three rounds each: the profiler's
timer with its usual L2 flush (CuPy's fill(0), a memset), the same timer with the flush done
by an elementwise kernel (what torch's zero_ in do_bench is), and triton.testing.do_bench.
On the H200 (2026-12-02) every timer saw the 64K-element kernel at either ~4.4 or ~5.1 us,
switching between rounds, so two timers that ran at different moments could be 13% apart
while neither is biased. The profiler's judging is not affected: it interleaves baseline
and candidate run by run, so both see the same mode. Run from the repository root on the
GPU machine:
    python benchmarks/tiny_kernel_modes.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from profiler_timing import KERNELS  # noqa: E402  (after the path is set; it sets the repository's)


def main() -> int:
    import cupy
    import numpy as np
    from triton.testing import do_bench

    from profiler.run.device import cupy_ops
    from profiler.measure.timing import L2_FLUSH_BYTES, time_one

    module = cupy.RawModule(code=KERNELS)
    memset_ops, kernel_ops = cupy_ops(), cupy_ops()
    buffer = cupy.empty(L2_FLUSH_BYTES // 4, dtype=cupy.int32)
    zero = cupy.ElementwiseKernel("", "int32 x", "x = 0", "dice_flush_zero")
    kernel_ops.flush_l2 = lambda: zero(buffer)
    x = cupy.random.standard_normal(1 << 26, dtype=cupy.float32)
    y = cupy.empty_like(x)
    saxpy = module.get_function("saxpy")
    for n in (1 << 16, 1 << 20, 1 << 24):
        def fn(n=n):
            saxpy(((n + 255) // 256,), (256,), (np.float32(2.5), x, y, np.int64(n)))

        rows: dict[str, list[float]] = {"memset": [], "kernel": [], "triton": []}
        for _ in range(3):
            rows["memset"].append(time_one(fn, memset_ops, budget_s=0.5).median_ms)
            rows["kernel"].append(time_one(fn, kernel_ops, budget_s=0.5).median_ms)
            rows["triton"].append(float(do_bench(fn, warmup=25, rep=200, return_mode="median")))
        print(n, {k: [round(v * 1000, 3) for v in vs] for k, vs in rows.items()}, "us", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
