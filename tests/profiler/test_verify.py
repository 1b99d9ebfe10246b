"""Output comparison rules: tolerance by dtype, poison, constant output."""

from __future__ import annotations

import numpy as np

import pytest

from profiler.measure.verify import INT_POISON_BYTE, compare, output_sample


def rng():
    return np.random.default_rng(0)


def test_fp32_reordering_noise_passes_but_half_precision_does_not():
    x = rng().standard_normal(10000).astype(np.float32)
    assert compare("y", x, x * np.float32(1 + 1e-6), "float32") is None
    lowered = x.astype(np.float16).astype(np.float32)
    mismatch = compare("y", x, lowered, "float32")
    assert mismatch is not None and mismatch.reason == "values"
    # the same rounding is fine when the output is half precision to begin with
    assert compare("y", x.astype(np.float16).astype(np.float32), lowered, "float16") is None


def test_elements_near_zero_get_an_absolute_floor():
    base = np.array([100.0, -100.0, 1e-9], dtype=np.float32)
    cand = np.array([100.0, -100.0, 1e-3], dtype=np.float32)
    assert compare("y", base, cand, "float32") is None
    cand[2] = 0.5
    assert compare("y", base, cand, "float32").reason == "values"


def test_unwritten_float_elements_are_found_by_their_nan_poison():
    base = rng().standard_normal(64).astype(np.float32)
    cand = base.copy()
    cand[40:] = np.frombuffer(b"\xff" * 4 * 24, dtype=np.float32)
    mismatch = compare("out", base, cand, "float32")
    assert mismatch.reason == "unwritten"
    assert "24 of 64" in str(mismatch) and "index 40" in str(mismatch)


def test_unwritten_int_elements_are_found_by_their_pattern():
    base = np.arange(10, dtype=np.int32)
    cand = base.copy()
    cand[3] = np.frombuffer(bytes([INT_POISON_BYTE]) * 4, dtype=np.int32)[0]
    assert compare("idx", base, cand, "int32").reason == "unwritten"
    cand[3] = 4
    mismatch = compare("idx", base, cand, "int32")
    assert mismatch.reason == "values" and "index 3" in str(mismatch)


def test_constant_output_where_the_baseline_varies():
    base = rng().standard_normal(100).astype(np.float32)
    mismatch = compare("y", base, np.zeros(100, np.float32), "float32")
    assert mismatch.reason == "constant"
    assert compare("y", np.zeros(100, np.float32), np.zeros(100, np.float32), "float32") is None


def test_same_inf_and_baseline_nan_agree_and_shapes_must_match():
    base = np.array([np.inf, np.nan, 1.0], dtype=np.float32)
    assert compare("y", base, base.copy(), "float32") is None
    assert compare("y", base, np.array([-np.inf, np.nan, 1.0], np.float32), "float32").reason == "values"
    assert compare("y", np.zeros((2, 3)), np.zeros((3, 2)), "float64").reason == "shape"


def test_huge_float64_outputs_keep_a_finite_scale():
    """Squares of float64 values past 1e154 overflow; the rms (the tolerance's scale, and what
    samples carry across processes) must not become inf, which would accept anything."""
    base = np.full(1000, 1e200, dtype=np.float64)
    assert compare("out", base, base.copy(), "float64") is None
    assert compare("out", base, base * 1.5, "float64") is not None
    sample = output_sample(base, "float64", [0, 1, 2])
    assert sample["rms"] == pytest.approx(1e200)
