"""Is the candidate's output the baseline's? Per-dtype tolerances, poison, constant outputs.

Works on numpy arrays (the .cu runner copies its outputs to the host), on torch tensors
where they live (the KernelBench runner: outputs of gigabytes are compared on the GPU, not
copied to the host, with kernels torch ships compiled), and on CuPy arrays (whose every
operation NVRTC compiles at its first use in a process: 8-14 s of each judging on the H200,
2026-12-03, so the runners do not pass them). bfloat16 arrives as a torch tensor, or widened
to float32 (numpy has none) with its dtype name kept, for its tolerance. Outputs are compared a
chunk at a time (CHUNK), so a comparison's memory does not grow with the output. The same rules
serve both runners and are tested on any machine with numpy and torch, each backend against
numpy's answers.
"""

from __future__ import annotations

import math
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

# Bytes written over every output before each run, one pattern per run of an input set: an
# element the candidate does not write then reads as the first pattern in one run and as the
# second in the other, and no expected value equals both. For floats, 0xFF is NaN in every
# format and 0x5A a finite sentinel (1.5e16 in float32 and bfloat16, 203.25 in float16); for
# integers, odd large values (0xFF would be -1, a common real result); for bool, true and false.
FLOAT_POISON_BYTES = (0xFF, 0x5A)
INT_POISON_BYTES = (0xA5, 0x5A)
BOOL_POISON_BYTES = (0xFF, 0x00)
FLOAT_POISON_BYTE, INT_POISON_BYTE = FLOAT_POISON_BYTES[0], INT_POISON_BYTES[0]


def is_float(dtype_name: str) -> bool:
    return dtype_name in TOLERANCES


def poison_bytes(dtype_name: str) -> tuple[int, int]:
    """The two poison patterns of a dtype (module comment above)."""
    if is_float(dtype_name):
        return FLOAT_POISON_BYTES
    return BOOL_POISON_BYTES if dtype_name == "bool" else INT_POISON_BYTES


def poison_byte(dtype_name: str, run: int = 0) -> int:
    """The poison pattern of run `run` (0 or 1) of an input set."""
    return poison_bytes(dtype_name)[run % 2]


def _int_poison(dtype) -> int:
    dtype = np.dtype(str(dtype).removeprefix("torch."))
    return int(np.frombuffer(bytes([INT_POISON_BYTE]) * dtype.itemsize, dtype=dtype)[0])


class _Torch:
    """The array functions this module uses, for torch tensors (numpy's names)."""

    def __init__(self) -> None:
        import torch

        self.float32, self.float64, self.int64 = torch.float32, torch.float64, torch.int64
        self.isnan, self.isfinite, self.abs, self.sqrt = torch.isnan, torch.isfinite, torch.abs, torch.sqrt
        self.where, self.max, self.sum = torch.where, torch.max, torch.sum

    @staticmethod
    def asarray(values, dtype=None):
        """A host tensor (one of indices here: torch indexes a GPU tensor with it)."""
        import torch

        return torch.as_tensor(values, dtype=dtype)


def _is_torch(array) -> bool:
    return type(array).__module__.startswith("torch")


def _array_module(array):
    """numpy; the torch functions for torch tensors; cupy for CuPy arrays."""
    if _is_torch(array):
        return _Torch()
    if type(array).__module__.startswith("cupy"):
        import cupy

        return cupy
    return np


def _astype(array, dtype):
    """array in dtype (itself when it is already), for numpy, CuPy and torch alike."""
    return array.to(dtype) if _is_torch(array) else array.astype(dtype, copy=False)


def _size(flat) -> int:
    return int(flat.numel()) if _is_torch(flat) else int(flat.size)


@dataclass(frozen=True)
class Mismatch:
    """Why an output is wrong, for one line of a message."""

    reason: str  # "unwritten" | "constant" | "shape" | "values"
    detail: str

    def __str__(self) -> str:
        return self.detail


def _first(mask) -> int:
    """Index of the first True (torch's argmax takes no bools; it too returns the first maximum)."""
    return int(mask.byte().argmax() if _is_torch(mask) else mask.argmax())


# Elements compared at a time. Every temporary of a comparison is of one chunk, a few hundred
# MB at most whatever the output's size: a level1 output can hold 1.6 G floats, and whole-output
# temporaries (float64: 12 GiB each) ran a correct candidate's run out of GPU memory beside other
# runs (H200, 2026-12-03): the judge's own memory must never be what fails a candidate.
CHUNK = 1 << 24


def _chunks(size: int):
    for start in range(0, size, CHUNK):
        yield start, min(size, start + CHUNK)


class _Found:
    """How many elements a mask selects over the chunks, and the first one's index."""

    def __init__(self) -> None:
        self.count, self.first = 0, None

    def add(self, mask, start: int) -> int:
        found = int(mask.sum())
        if found and self.first is None:
            self.first = start + _first(mask)
        self.count += found
        return found


class _RootMeanSquare:
    """The root mean square of the finite elements seen (0.0 when there are none), streamed
    over chunks. Kept scaled by the largest magnitude so far (LAPACK nrm2's update), so that
    squares of values past 1e154 do not overflow."""

    def __init__(self) -> None:
        self.scale, self.ssq, self.count = 0.0, 0.0, 0

    def add(self, values, xp) -> None:
        finite = xp.isfinite(values)
        count = int(finite.sum())
        if not count:
            return
        self.count += count
        values = _astype(xp.where(finite, values, 0), xp.float64)
        peak = float(xp.max(xp.abs(values)))
        if not peak:
            return
        if peak > self.scale:
            self.ssq *= (self.scale / peak) ** 2
            self.scale = peak
        self.ssq += float(xp.sum((values / self.scale) ** 2))

    def value(self) -> float:
        return self.scale * math.sqrt(self.ssq / self.count) if self.count and self.scale else 0.0


def _work_dtype(dtype_name: str, xp):
    """fp64 outputs are compared in fp64; everything narrower in fp32, which holds them exactly."""
    return xp.float64 if dtype_name == "float64" else xp.float32


def _off_tolerance(base, cand, rtol: float, atol: float, scale: float, xp):
    """(mask of the elements off by more than rtol * |base| + atol * scale, the limits):
    compare's rule, for whole outputs and for samples of them alike."""
    finite = xp.isfinite(base)
    with np.errstate(invalid="ignore", over="ignore"):
        limit = rtol * xp.abs(base) + atol * scale
        # Where the baseline is inf or NaN, only the same value on the candidate's side agrees.
        same_special = (base == cand) | (xp.isnan(base) & xp.isnan(cand))
        return xp.where(finite, ~(xp.abs(cand - base) <= limit), ~same_special), limit


def tolerance(dtype_name: str, protocol: tuple[float, float] | None = None) -> tuple[float, float, bool]:
    """(rtol, atol, whether atol is absolute) for a dtype: its own (atol scaled by the output's
    root mean square), or a protocol's (rtol, atol) as torch.allclose takes them."""
    if protocol is not None and is_float(dtype_name):
        return float(protocol[0]), float(protocol[1]), True
    rtol, atol = TOLERANCES.get(dtype_name, (0.0, 0.0))
    return rtol, atol, False


def compare(name: str, baseline, candidate, dtype_name: str,
            protocol: tuple[float, float] | None = None) -> Mismatch | None:
    """None when `candidate` matches `baseline` for output `name`, else why not. Two passes
    over the outputs, a chunk at a time (CHUNK). `protocol`: (rtol, atol) replacing the
    dtype's tolerance (profiler.judging.protocol)."""
    if tuple(baseline.shape) != tuple(candidate.shape):
        return Mismatch("shape", f"{name}: shape {tuple(candidate.shape)}, expected {tuple(baseline.shape)}")
    xp = _array_module(baseline)
    base_all = baseline.reshape(-1)
    cand_all = candidate.reshape(-1)
    size = _size(base_all)
    floating = is_float(dtype_name)

    def pair(start: int, stop: int):
        base, cand = base_all[start:stop], cand_all[start:stop]
        if floating:
            work = _work_dtype(dtype_name, xp)
            return _astype(base, work), _astype(cand, work)
        return base, cand

    # Pass 1: unwritten elements, constant outputs, the baseline's root mean square.
    poison = None if floating else _int_poison(base_all.dtype)
    unwritten, rms = _Found(), _RootMeanSquare()
    first_base, first_cand = pair(0, 1) if size else (None, None)
    cand_varies = base_varies = False
    for start, stop in _chunks(size):
        base, cand = pair(start, stop)
        unwritten.add(xp.isnan(cand) & ~xp.isnan(base) if floating else (cand == poison) & (base != poison), start)
        if size > 1:
            cand_varies = cand_varies or not bool((cand == first_cand[0]).all())
            base_varies = base_varies or not bool((base == first_base[0]).all())
        if floating:
            rms.add(base, xp)
    if unwritten.count:
        return Mismatch("unwritten", f"{name}: {unwritten.count} of {size} elements not written "
                                     f"(first at index {unwritten.first})")
    if size > 1 and not cand_varies and base_varies:
        return Mismatch("constant", f"{name}: every element is {first_cand[0].item()!r}; the baseline's output varies")

    # Pass 2: the values.
    bad, worst = _Found(), 0.0
    rtol, atol, absolute = tolerance(dtype_name, protocol)
    scale = 1.0 if absolute else rms.value() or 1.0
    for start, stop in _chunks(size):
        base, cand = pair(start, stop)
        if not floating:
            bad.add(base != cand, start)
            continue
        off, limit = _off_tolerance(base, cand, rtol, atol, scale, xp)
        if bad.add(off, start):
            with np.errstate(invalid="ignore", over="ignore"):
                ratio = xp.where(xp.isfinite(base) & off, xp.abs(cand - base) / limit, 0)
                worst = max(worst, float(ratio.max()))
    if not bad.count:
        return None
    first = bad.first
    if not floating:
        return Mismatch("values", f"{name}: {bad.count} of {size} elements differ "
                                  f"(index {first}: {cand_all[first].item()!r}, expected {base_all[first].item()!r})")
    want, got = pair(first, first + 1)
    return Mismatch("values", f"{name}: {bad.count} of {size} elements off by more than "
                              f"rtol={rtol:g}, atol={atol:g}{'' if absolute else '*rms'} (index {first}: {float(got[0]):.6g}, "
                              f"expected {float(want[0]):.6g}; worst {worst:.3g}x the tolerance)")


# Elements of each output a run reports for comparison with another process's run.
OUTPUT_SAMPLES = 512


def _positions(size: int, positions_seed: list[int]) -> np.ndarray:
    """OUTPUT_SAMPLES distinct positions (all when fewer), the first and last among them."""
    if size <= OUTPUT_SAMPLES:
        return np.arange(size)
    drawn = np.random.default_rng(positions_seed).choice(size - 2, OUTPUT_SAMPLES - 2, replace=False) + 1
    return np.concatenate(([0], np.sort(drawn), [size - 1]))


def fingerprint(array) -> tuple[int, float, float]:
    """(size, sum, sum of squares) of an output in float64, a chunk at a time: equal for two
    outputs only when they are (all but certainly) the same tensor. NaN reads as NaN, and two
    NaN fingerprints are equal (same_fingerprints)."""
    xp = _array_module(array)
    flat = array.reshape(-1)
    total = squares = 0.0
    for start, stop in _chunks(_size(flat)):
        part = _astype(flat[start:stop], xp.float64)
        total += float(xp.sum(part))
        squares += float(xp.sum(part * part))
    return _size(flat), total, squares


def same_fingerprints(a: tuple, b: tuple) -> bool:
    return all(x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y)) for x, y in zip(a, b))


def constant_across(fingerprints: list[list[tuple]]) -> bool:
    """Whether the outputs fingerprinted on each input set (a list of fingerprints per set,
    at least two sets) were the same on every set: then matching them shows nothing."""
    first = fingerprints[0] if fingerprints else []
    return len(fingerprints) >= 2 and all(
        len(prints) == len(first) and all(same_fingerprints(a, b) for a, b in zip(prints, first))
        for prints in fingerprints)


def output_sample(array, dtype_name: str, positions_seed: list[int],
                  protocol: tuple[float, float] | None = None) -> dict:
    """What two processes can compare of one output without moving it whole: its shape and
    dtype; for float outputs the root mean square of the whole output (finite elements) and
    the scale of its tolerance; its values at OUTPUT_SAMPLES positions drawn from
    `positions_seed` (the same in both processes, different for each input set and output)."""
    xp = _array_module(array)
    flat = array.reshape(-1)
    size = _size(flat)
    values = flat[xp.asarray(_positions(size, positions_seed), dtype=xp.int64)]
    sample = {"shape": [int(d) for d in array.shape], "dtype": dtype_name,
              "positions_seed": [int(p) for p in positions_seed]}
    if is_float(dtype_name):
        rms = _RootMeanSquare()
        for start, stop in _chunks(size):
            rms.add(_astype(flat[start:stop], _work_dtype(dtype_name, xp)), xp)
        sample["rms"] = rms.value()
        rtol, atol, absolute = tolerance(dtype_name, protocol)
        sample["tolerance"] = [rtol, atol]
        sample["scale"] = 1.0 if absolute else sample["rms"] or 1.0
        sample["values"] = [float(v) for v in _astype(values, xp.float64).tolist()]
    else:
        sample["values"] = [int(v) for v in values.tolist()]
    return sample


def compare_samples(name: str, reference: dict, candidate: dict) -> Mismatch | None:
    """None when the candidate's sample of output `name` matches the reference's by compare's
    rules (the reference's scale, the dtype's tolerances), else why not. Besides the sampled
    elements, the root mean squares of the whole outputs must agree as elementwise agreement
    implies: |rms(c) - rms(b)| <= rms(c - b) <= rtol * rms(b) + atol * scale(b)."""
    dtype = reference["dtype"]
    if candidate.get("dtype") != dtype:
        return Mismatch("dtype", f"{name}: dtype {candidate.get('dtype')}, expected {dtype}")
    if list(candidate.get("shape", ())) != list(reference["shape"]):
        return Mismatch("shape", f"{name}: shape {tuple(candidate.get('shape', ()))}, "
                                 f"expected {tuple(reference['shape'])}")
    want, got = list(reference["values"]), list(candidate.get("values", []))
    if candidate.get("positions_seed") != reference["positions_seed"] or len(got) != len(want):
        return Mismatch("sample", f"{name}: the sample is not of the reference's positions")
    if not is_float(dtype):
        bad = [i for i, (w, g) in enumerate(zip(want, got)) if int(w) != int(g)]
        if bad:
            return Mismatch("values", f"{name}: {len(bad)} of {len(want)} sampled elements differ "
                                      f"({got[bad[0]]!r}, expected {want[bad[0]]!r})")
        return None
    # The reference's own tolerance (the protocol its run was made under), else the dtype's.
    rtol, atol = (float(t) for t in reference.get("tolerance") or TOLERANCES[dtype])
    base, cand = np.asarray(want, dtype=np.float64), np.asarray(got, dtype=np.float64)
    scale = float(reference["scale"])
    bad, _ = _off_tolerance(base, cand, rtol, atol, scale, np)
    if bool(bad.any()):
        first = _first(bad)
        return Mismatch("values", f"{name}: {int(bad.sum())} of {base.size} sampled elements differ "
                                  f"({cand[first].item()!r}, expected {base[first].item()!r})")
    rms_b, rms_c = float(reference["rms"]), float(candidate["rms"])
    if not abs(rms_c - rms_b) <= (rtol * rms_b + atol * scale) * 1.001 + 1e-30:
        return Mismatch("values", f"{name}: the root mean square of the whole output is {rms_c:.6g}, "
                                  f"expected {rms_b:.6g}")
    return None
