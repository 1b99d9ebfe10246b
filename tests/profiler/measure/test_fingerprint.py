"""The fingerprint of a timed output (profiler.measure.fingerprint), on CPU tensors: outputs
within the element tolerance agree, a few per mille of wrong elements do not, and neither does
a guessed or partly computed output."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from profiler.measure.fingerprint import disagreement, fingerprint, tolerance  # noqa: E402
from profiler.measure.verify import TOLERANCES  # noqa: E402


def _output(n: int = 1 << 16, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=generator) * 3 + 1


def _agrees(candidate, expected, key: int = 12345) -> str | None:
    return disagreement(fingerprint([candidate], key), fingerprint([expected], key), tolerance([expected]))


def test_the_same_output_and_an_output_at_the_edge_of_the_tolerance_agree():
    expected = _output()
    assert _agrees(expected.clone(), expected) is None
    rtol, atol = TOLERANCES["float32"]
    rms = float(expected.pow(2).mean().sqrt())
    edge = rtol * expected.abs() + atol * rms
    signs = torch.where(torch.rand(expected.shape, generator=torch.Generator().manual_seed(1)) < 0.5, -1.0, 1.0)
    for pushed in (expected + 0.99 * edge, expected - 0.99 * edge, expected + 0.99 * edge * signs):
        assert _agrees(pushed, expected) is None


def test_a_few_wrong_elements_and_a_guessed_output_do_not():
    expected = _output()
    wrong = expected.clone()
    wrong[::500] = 0.0  # 0.2% of the elements left at zero
    assert "fingerprint" in _agrees(wrong, expected)
    assert _agrees(torch.zeros_like(expected), expected) is not None
    assert _agrees(_output(seed=7), expected) is not None  # another input's answer
    nan = expected.clone()
    nan[3] = float("nan")
    assert _agrees(nan, expected) is not None


def test_the_key_decides_the_signs_and_the_same_key_gives_the_same_fingerprint():
    expected = _output()
    assert fingerprint([expected], 1) == fingerprint([expected.clone()], 1)
    assert fingerprint([expected], 1) != fingerprint([expected], 2)
    # Two keys' fingerprints of one output tell nothing of a third's.
    assert len({round(fingerprint([expected], k)[0], 6) for k in range(5)}) == 5


def test_integer_outputs_must_match_exactly_and_counts_must_agree():
    expected = torch.arange(1000, dtype=torch.int64)
    assert _agrees(expected.clone(), expected) is None
    off = expected.clone()
    off[10] += 1
    assert _agrees(off, expected) is not None
    assert "2 output fingerprints, expected 1" == disagreement([1.0, 2.0], [1.0], [0.1])
    assert "not a number" in disagreement(["x"], [1.0], [0.1])
