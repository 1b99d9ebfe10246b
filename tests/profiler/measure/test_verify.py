"""Output comparison rules: tolerance by dtype, poison, constant output."""

from __future__ import annotations

import numpy as np

import pytest

from profiler.measure.verify import INT_POISON_BYTE, compare, output_sample, poison_byte


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
    mismatch = compare("y", base, cand, "float32")
    assert mismatch.reason == "values"
    assert "1 of 3 elements" in str(mismatch) and "index 2: 0.5, expected 1e-09" in str(mismatch)


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


def _cuda_outputs() -> list[tuple[str, np.ndarray]]:
    """Outputs of the kinds a .cu judging compares: floats with NaN and inf, an output the
    kernel left partly unwritten (NaN poison), a constant one, and ints with their poison."""
    rng = np.random.default_rng(0)
    floats = rng.standard_normal(1000).astype(np.float32)
    floats[[3, 7]] = [np.inf, np.nan]
    unwritten = floats.copy()
    unwritten[10:20] = np.frombuffer(bytes([poison_byte("float32")]) * 40, dtype=np.float32)
    ints = rng.integers(-100, 100, 1000).astype(np.int32)
    ints[5] = np.frombuffer(bytes([poison_byte("int32")]) * 4, dtype=np.int32)[0]
    return [("float32", floats), ("float32", unwritten), ("float32", np.full(1000, 2.5, np.float32)),
            ("int32", ints), ("float64", floats.astype(np.float64))]


def test_the_cuda_judge_skips_compare_only_where_compare_finds_nothing():
    """profiler.run.cuda._mismatch passes outputs of the same bits without comparing their
    values; for each kind of output, compare itself finds nothing in such a pair, and a pair
    one element apart still goes through compare and is found."""
    from profiler.run.cuda import _mismatch, _same_bits

    for dtype, values in _cuda_outputs():
        params = [{"name": "out", "dtype": dtype}]
        twin = values.copy()
        assert _same_bits(values, twin)
        assert compare("out", values, twin, dtype) is None
        assert _mismatch(params, {"out": values}, {"out": twin}) is None
        other = values.copy()
        other[500] = other[500] * 3 + 7
        assert not _same_bits(values, other)
        assert _mismatch(params, {"out": values}, {"out": other}) == str(compare("out", values, other, dtype))
        assert _mismatch(params, {"out": values}, {"out": other}) is not None


def test_same_bits_compares_every_byte_whatever_the_word_it_reads():
    """_same_bits reads the bytes as the widest words their count divides into: a
    difference in any byte, the last included, is found for every size, and arrays of
    another shape or dtype are never the same."""
    from profiler.run.cuda import _same_bits

    for dtype, count in (("uint8", 7), ("uint8", 6), ("int16", 3), ("float16", 6), ("float32", 3),
                         ("float32", 1000), ("float64", 5), ("bool", 9)):
        values = np.arange(count).astype(dtype)
        assert _same_bits(values, values.copy())
        for position in {0, values.nbytes // 2, values.nbytes - 1}:
            other = values.copy()
            other.view(np.uint8)[position] ^= 1
            assert not _same_bits(values, other), (dtype, count, position)
    floats = np.arange(12, dtype=np.float32)
    assert not _same_bits(floats, floats.view(np.int32))
    assert not _same_bits(floats, floats.reshape(3, 4))
    assert _same_bits(floats.reshape(3, 4), floats.reshape(3, 4).copy())


def _kernelbench_cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(dtype, baseline, candidate) pairs of every kind compare decides, as a KernelBench run
    meets them: right, reordering noise, half precision where fp32 is due, unwritten (float
    and int poison), constant, inf and NaN, shapes that differ, huge float64, a wrong int."""
    x = rng().standard_normal(10000).astype(np.float32)
    unwritten = x.copy()
    unwritten[40:90] = np.frombuffer(b"\xff" * 4 * 50, dtype=np.float32)
    ints = np.arange(1000, dtype=np.int64)
    poisoned = ints.copy()
    poisoned[7] = np.frombuffer(bytes([INT_POISON_BYTE]) * 8, dtype=np.int64)[0]
    wrong = ints.copy()
    wrong[999] = 5
    special = np.array([np.inf, np.nan, 1.0, -2.0], dtype=np.float32)
    huge = np.full(1000, 1e200, dtype=np.float64)
    return [
        ("float32", x, x.copy()),
        ("float32", x, x * np.float32(1 + 1e-6)),
        ("float32", x, x.astype(np.float16).astype(np.float32)),
        ("float16", x.astype(np.float16), x.astype(np.float16) + np.float16(0.5)),
        ("float32", x, unwritten),
        ("int64", ints, poisoned),
        ("int64", ints, wrong),
        ("float32", x, np.zeros_like(x)),
        ("float32", special, special.copy()),
        ("float32", special, np.array([-np.inf, np.nan, 1.0, -2.0], np.float32)),
        ("float32", x.reshape(100, 100), x.reshape(50, 200)),
        ("float64", huge, huge.copy()),
        ("float64", huge, huge * 1.5),
        ("bool", ints % 3 == 0, ints % 5 == 0),
    ]


def test_kernelbench_outputs_compared_as_torch_tensors_get_numpy_s_answers():
    """The KernelBench runner compares torch tensors where they are (profiler.run.kernelbench
    ._comparable: on the GPU, with torch's compiled kernels). For every kind of pair, compare
    and output_sample give with torch (here on the CPU: the same operations) what they give
    with numpy."""
    torch = pytest.importorskip("torch")
    for dtype, base, cand in _kernelbench_cases():
        want = compare("out", base, cand, dtype)
        got = compare("out", torch.from_numpy(base.copy()), torch.from_numpy(cand.copy()), dtype)
        assert (got is None) == (want is None), (dtype, want, got)
        if want is not None:
            assert (got.reason, str(got)) == (want.reason, str(want))
        if base.shape == cand.shape:
            for array in (base, cand):
                sample, sampled = (output_sample(a, dtype, [1, 2, 3]) for a in (array, torch.from_numpy(array.copy())))
                assert sampled.keys() == sample.keys()
                assert sampled["shape"] == sample["shape"]
                np.testing.assert_array_equal(sampled["values"], sample["values"])  # NaN where NaN
                if "rms" in sample:
                    assert sampled["rms"] == pytest.approx(sample["rms"], rel=1e-6, nan_ok=True)


def test_outputs_compared_a_chunk_at_a_time_get_the_same_answers(monkeypatch):
    """compare and output_sample stream over CHUNK elements at a time (whole-output temporaries
    of a 1.6 G-float output ran a correct candidate out of GPU memory): with chunks of 7
    elements, every case (the first mismatch, its count, the worst element, the rms of values
    that grow from chunk to chunk) is decided as with one chunk, numpy and torch alike."""
    import profiler.measure.verify as verify

    torch = pytest.importorskip("torch")
    growing = np.geomspace(1e-30, 1e200, 1000)
    cases = _kernelbench_cases() + [("float64", growing, growing.copy()), ("float64", growing, growing * (1 + 1e-6))]
    whole = [(compare("out", b, c, d), output_sample(b, d, [4, 5]) if b.shape == c.shape else None)
             for d, b, c in cases]
    monkeypatch.setattr(verify, "CHUNK", 7)
    for (dtype, base, cand), (want, sample) in zip(cases, whole):
        for b, c in ((base, cand), (torch.from_numpy(base.copy()), torch.from_numpy(cand.copy()))):
            got = compare("out", b, c, dtype)
            assert (got is None) == (want is None) and str(got) == str(want), (dtype, want, got)
            if sample is not None:
                chunked = output_sample(b, dtype, [4, 5])
                np.testing.assert_array_equal(chunked["values"], sample["values"])
                if "rms" in sample:
                    assert chunked["rms"] == pytest.approx(sample["rms"], rel=1e-9)


def test_bfloat16_tensors_are_compared_without_a_widened_copy():
    """The KernelBench runner passes bfloat16 outputs as they are; compare widens a chunk at a
    time and applies bfloat16's tolerance, as for the widened copy it used to make."""
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(rng().standard_normal(5000).astype(np.float32)).to(torch.bfloat16)
    assert compare("y", x, x.clone(), "bfloat16") is None
    off = x.clone()
    off[4321] = off[4321] * 2 + 1
    got = compare("y", x, off, "bfloat16")
    want = compare("y", x.float().numpy(), off.float().numpy(), "bfloat16")
    assert got is not None and str(got) == str(want) and "index 4321" in str(got)


def test_outputs_the_same_on_every_input_set_are_constant():
    from profiler.measure.verify import constant_across, fingerprint

    zeros, ramp = np.zeros(64, np.float32), np.arange(64, dtype=np.float32)
    assert constant_across([[fingerprint(zeros)], [fingerprint(zeros)], [fingerprint(zeros)]])
    assert not constant_across([[fingerprint(zeros)], [fingerprint(ramp)]])
    assert not constant_across([[fingerprint(zeros)]])  # one set shows nothing either way
    # two outputs: constant only when both are
    assert not constant_across([[fingerprint(zeros), fingerprint(ramp)], [fingerprint(zeros), fingerprint(ramp * 2)]])
    assert constant_across([[fingerprint(np.full(3, np.nan, np.float32))]] * 2)  # NaN equals NaN here
