"""Is the candidate's output the baseline's? Per-dtype tolerances, poison, constant outputs.

Works on numpy arrays on the host (bfloat16 arrives widened to float32, with its dtype name
kept), so the rules are tested on any machine and shared by the .cu and KernelBench runners.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# |candidate - baseline| <= rtol * |baseline| + atol * rms(baseline): a relative test with an
# absolute floor that scales with the output, so that elements near zero (cancellations in
# a sum) are not held to a relative standard they cannot meet.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}

# Bytes written over every output before each run. 0xFF makes every float format NaN; 0xA5
# makes integers odd large values (0xFF would be -1, a common real result).
FLOAT_POISON_BYTE = 0xFF
INT_POISON_BYTE = 0xA5


def is_float(dtype_name: str) -> bool:
    return dtype_name in TOLERANCES


def poison_byte(dtype_name: str) -> int:
    return FLOAT_POISON_BYTE if is_float(dtype_name) else INT_POISON_BYTE


def _int_poison(dtype: np.dtype) -> int:
    return int(np.frombuffer(bytes([INT_POISON_BYTE]) * dtype.itemsize, dtype=dtype)[0])


@dataclass(frozen=True)
class Mismatch:
    """Why an output is wrong, for one line of a message."""

    reason: str  # "unwritten" | "constant" | "shape" | "values"
    detail: str

    def __str__(self) -> str:
        return self.detail


def compare(name: str, baseline: np.ndarray, candidate: np.ndarray, dtype_name: str) -> Mismatch | None:
    """None when `candidate` matches `baseline` for output `name`, else why not."""
    if baseline.shape != candidate.shape:
        return Mismatch("shape", f"{name}: shape {tuple(candidate.shape)}, expected {tuple(baseline.shape)}")
    base = baseline.reshape(-1)
    cand = candidate.reshape(-1)
    if is_float(dtype_name):
        base64 = base.astype(np.float64)
        cand64 = cand.astype(np.float64)
        unwritten = np.isnan(cand64) & ~np.isnan(base64)
    else:
        poison = _int_poison(base.dtype)
        unwritten = (cand == poison) & (base != poison)
    if unwritten.any():
        count = int(unwritten.sum())
        first = int(np.argmax(unwritten))
        return Mismatch("unwritten", f"{name}: {count} of {base.size} elements not written (first at index {first})")
    if base.size > 1 and np.all(cand == cand[0]) and not np.all(base == base[0]):
        return Mismatch("constant", f"{name}: every element is {cand[0]!r}; the baseline's output varies")
    if not is_float(dtype_name):
        bad = base != cand
        if bad.any():
            first = int(np.argmax(bad))
            return Mismatch("values", f"{name}: {int(bad.sum())} of {base.size} elements differ "
                                      f"(index {first}: {cand[first]!r}, expected {base[first]!r})")
        return None
    rtol, atol = TOLERANCES[dtype_name]
    finite = np.isfinite(base64)
    scale = float(np.sqrt(np.mean(base64[finite] ** 2))) if finite.any() else 0.0
    if scale == 0.0:
        scale = 1.0
    with np.errstate(invalid="ignore"):
        error = np.abs(cand64 - base64)
        limit = rtol * np.abs(base64) + atol * scale
        # Where the baseline is inf or NaN, only the same value on the candidate's side agrees.
        same_special = (base64 == cand64) | (np.isnan(base64) & np.isnan(cand64))
        bad = np.where(finite, ~(error <= limit), ~same_special)
    if bad.any():
        first = int(np.argmax(bad))
        worst = float(np.nanmax(np.where(finite, error / np.maximum(limit, 1e-300), np.inf)))
        return Mismatch("values", f"{name}: {int(bad.sum())} of {base.size} elements off by more than "
                                  f"rtol={rtol:g}, atol={atol:g}*rms (index {first}: {cand64[first]:.6g}, "
                                  f"expected {base64[first]:.6g}; worst {worst:.3g}x the tolerance)")
    return None
