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
    assert disagreement([1.0, 2.0, 3.0], [1.0, 2.0], [0.1, 0.1]).startswith("3 fingerprint numbers, expected 2")
    assert "not a number" in disagreement(["x", 1.0], [1.0, 1.0], [0.1, 0.1])


def test_a_multiple_of_the_output_does_not_agree():
    """F alone is the same for x and 2 x (x / r does not change): r beside it tells them apart,
    so an output that skips a final scaling, or x for x / norm(x), is not Model's."""
    expected = _output()
    assert fingerprint([expected * 2], 4)[0] == pytest.approx(fingerprint([expected], 4)[0], abs=1e-6)
    assert "root mean square" in _agrees(expected * 2, expected)
    assert "root mean square" in _agrees(expected * 1.001, expected)
    assert _agrees(expected * (1 + 5e-5), expected) is None  # within rtol


def test_a_protocols_tolerance_is_the_one_an_agreeing_output_is_held_to():
    """Under DICE's protocol (torch.allclose, rtol = atol = 1e-2) an output off by nearly that
    much everywhere agrees, as the candidate's own comparisons say; by float32's own
    tolerance it does not."""
    from profiler.judging.protocol import DICE

    expected = _output()
    signs = torch.where(torch.rand(expected.shape, generator=torch.Generator().manual_seed(2)) < 0.5, -1.0, 1.0)
    off = expected + 0.9 * (1e-2 * expected.abs() + 1e-2) * signs
    print_of = lambda out: fingerprint([out], 99)  # noqa: E731
    assert disagreement(print_of(off), print_of(expected), tolerance([expected], DICE.tolerance)) is None
    assert disagreement(print_of(off), print_of(expected), tolerance([expected])) is not None
    wrong = expected.clone()
    wrong[::10] = 0.0
    assert disagreement(print_of(wrong), print_of(expected), tolerance([expected], DICE.tolerance)) is not None


def test_an_output_of_model_with_nan_or_infinity_is_still_checked_everywhere():
    """Model's output non-finite in a few places: its fingerprint is a number, matched by the
    same output; a NaN answered with a number, or an output wrong elsewhere, does not agree."""
    expected = _output()
    expected[5], expected[6], expected[7] = float("inf"), float("-inf"), float("nan")
    prints = fingerprint([expected], 5)
    assert all(v == v and abs(v) != float("inf") for v in prints + tolerance([expected]))
    assert _agrees(expected.clone(), expected) is None
    filled = expected.clone()
    filled[7] = 0.0
    assert _agrees(filled, expected) is not None
    assert _agrees(_output(seed=3), expected) is not None
    guessed = torch.full_like(expected, float("nan"))
    assert _agrees(guessed, expected) is not None
