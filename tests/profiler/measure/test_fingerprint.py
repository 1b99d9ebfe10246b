"""The fingerprint of a timed output (profiler.measure.fingerprint), on CPU tensors: outputs
within the element tolerance agree for every key, the worst of them included; errors spread
over every element a few times the tolerance do not, nor a few per mille of wrong elements,
a guessed or partly computed output, or a report that is not a fingerprint."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from profiler.measure.fingerprint import (  # noqa: E402
    KAPPA, PRINT_WIDTH, SUMS, TOLERANCE_WIDTH, disagreement, fingerprint, tolerance)
from profiler.measure.verify import TOLERANCES  # noqa: E402


def _output(n: int = 1 << 16, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=generator) * 3 + 1


def _signs(like, seed: int):
    return torch.where(torch.rand(like.shape, generator=torch.Generator().manual_seed(seed)) < 0.5, -1.0, 1.0)


def _edge(expected):
    """Each element's float32 tolerance (profiler.measure.verify)."""
    rtol, atol = TOLERANCES["float32"]
    finite = torch.nan_to_num(expected, nan=0.0, posinf=0.0, neginf=0.0)
    edge = rtol * finite.abs() + atol * float(finite.pow(2).mean().sqrt())
    return torch.where(torch.isfinite(expected), edge, 0.0)


def _agrees(candidate, expected, key: int = 12345, protocol=None) -> str | None:
    return disagreement(fingerprint([candidate], key), fingerprint([expected], key),
                        tolerance([expected], protocol, key=key))


def _energy(candidate, expected, key: int) -> float:
    """mean_j R_j^2 / U (the module docstring) of one output: what the energy test compares
    with KAPPA."""
    got, want, allowed = fingerprint([candidate], key), fingerprint([expected], key), tolerance([expected], key=key)
    moved = want[SUMS] / got[SUMS] - 1
    errors = [g - w - moved * s for g, w, s in zip(got[:SUMS], want[:SUMS], allowed[2:])]
    return sum(e * e for e in errors) / SUMS / allowed[0]


def _rounded_to_tf32(x):
    """x with its mantissa rounded to TF32's 10 bits (to nearest, ties to even)."""
    bits = x.view(torch.int32)
    return ((bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF).view(torch.float32)


def test_outputs_within_the_tolerance_agree_for_every_key_the_worst_of_them_too():
    """Every element exactly at its tolerance (signs at random, all +, all -, all away from
    zero, which moves r the most), or the same output: 200 keys, no disagreement."""
    expected = _output(1 << 14)
    edge = _edge(expected)
    pushed = [expected.clone(), expected + edge, expected - edge, expected + edge * _signs(expected, 1),
              expected + edge * torch.sign(expected)]
    failures = []
    for key in range(200):
        want, allowed = fingerprint([expected], key), tolerance([expected], key=key)
        for number, candidate in enumerate(pushed):
            found = disagreement(fingerprint([candidate], key), want, allowed)
            if found is not None:
                failures.append((key, number, found))
    assert failures == []


def test_the_sums_of_an_output_at_the_edge_reach_about_their_bound_and_no_further():
    """The bound is tight: every element at its tolerance gives an error energy near U."""
    expected = _output(1 << 18)
    candidate = expected + _edge(expected) * _signs(expected, 2)
    means = [_energy(candidate, expected, key) for key in range(4)]
    assert 0.7 < sum(means) / len(means) < 1.2


def test_errors_spread_over_every_element_three_times_the_tolerance_are_caught():
    """Random signs, 3 t_i on every element: the error of a sum of random signs grows as
    sqrt(n), so most sums stay within their own bound, their energy (about 9 U) does not."""
    expected = _output()
    edge = _edge(expected)
    for key in range(20):
        off = expected + 3 * edge * _signs(expected, 100 + key)
        assert _energy(off, expected, key) > KAPPA
        assert _agrees(off, expected, key).startswith("output 0: its fingerprint")


def test_a_tf32_matrix_product_for_an_fp32_problem_is_caught():
    """Inputs rounded to TF32's mantissa, products in FP32, against the FP32 product, on
    signed inputs (where TF32's error is past the FP32 tolerance on about half the elements),
    over the 16 keys of an audit's signed pairs: caught on every one by its error energy, and the FP32 product of the
    same inputs agrees with the float64 one on every key."""
    generator = torch.Generator().manual_seed(5)
    a = torch.rand(512, 512, generator=generator) * 2 - 1
    b = torch.rand(512, 512, generator=generator) * 2 - 1
    fp32 = a @ b
    tf32 = _rounded_to_tf32(a) @ _rounded_to_tf32(b)
    exact = (a.double() @ b.double()).float()
    assert all(_energy(tf32, fp32, key) > KAPPA and _agrees(tf32, fp32, key) is not None for key in range(16))
    assert all(_agrees(fp32, exact, key) is None for key in range(16))


def test_a_few_wrong_elements_and_a_guessed_output_do_not_agree():
    """Sparse errors: r sees most (0.2% of the elements at zero moves it past its bound); a
    few elements negated leave r as it is, and one keyed sum sees them."""
    expected = _output()
    wrong = expected.clone()
    wrong[::500] = 0.0  # 0.2% of the elements left at zero
    assert _agrees(wrong, expected) is not None
    negated = expected.clone()
    largest = expected.abs().topk(3).indices
    negated[largest] = -negated[largest]
    assert "keyed sum" in _agrees(negated, expected)
    swapped = expected.clone()
    swapped[[10, 20]] = expected[[20, 10]]  # two elements' places exchanged
    if abs(float(expected[10] - expected[20])) > 1.0:
        assert "keyed sum" in _agrees(swapped, expected)
    assert _agrees(torch.zeros_like(expected), expected) is not None
    assert _agrees(_output(seed=7), expected) is not None  # another input's answer
    nan = expected.clone()
    nan[3] = float("nan")
    assert _agrees(nan, expected) is not None


def test_the_key_decides_the_signs_and_the_same_key_gives_the_same_fingerprint():
    expected = _output()
    prints = fingerprint([expected], 1)
    assert len(prints) == PRINT_WIDTH and len(tolerance([expected], key=1)) == TOLERANCE_WIDTH
    assert prints == fingerprint([expected.clone()], 1)
    assert prints != fingerprint([expected], 2)
    # Two keys' fingerprints of one output tell nothing of a third's, nor one sum of another.
    assert len({round(fingerprint([expected], k)[0], 6) for k in range(5)}) == 5
    assert len({round(value, 6) for value in prints[:SUMS]}) == SUMS
    # Each output of several has its own signs.
    both = fingerprint([expected, expected], 1)
    assert both[:PRINT_WIDTH] == prints and both[PRINT_WIDTH:2 * PRINT_WIDTH - 1] != prints[:SUMS]


def test_integer_outputs_must_match_exactly():
    expected = torch.arange(1000, dtype=torch.int64)
    assert _agrees(expected.clone(), expected) is None
    off = expected.clone()
    off[10] += 1
    assert _agrees(off, expected) is not None


def test_a_report_that_is_not_a_fingerprint_is_rejected_with_a_reason():
    """The candidate's process reports whatever it likes, through JSON: any length, any type.
    disagreement() says why it is no fingerprint and never raises."""
    expected = _output(1 << 12)
    want, allowed = fingerprint([expected], 3), tolerance([expected], key=3)
    good = fingerprint([expected.clone()], 3)
    assert disagreement(good, want, allowed) is None
    assert disagreement(good + [1.0], want, allowed).startswith(f"{PRINT_WIDTH + 1} fingerprint numbers, expected "
                                                                f"{PRINT_WIDTH}")
    assert disagreement([], want, allowed).startswith("0 fingerprint numbers")
    for report in (None, "x", 1.0, {"F": good}, (tuple(good))):
        assert "not a list" in disagreement(report, want, allowed)
    for bad in ("1.0", None, True, [1.0], {"a": 1}, 10 ** 400):
        report = list(good)
        report[5] = bad
        assert "not a number" in disagreement(report, want, allowed)
    for bad, what in ((float("nan"), "not finite"), (float("inf"), "not finite"), (1e300, "keyed sum")):
        report = list(good)
        report[0] = bad
        assert what in disagreement(report, want, allowed)
    for bad in (float("nan"), float("inf"), -1.0, 0.0):
        report = list(good)
        report[SUMS] = bad
        assert "root mean square" in disagreement(report, want, allowed)
    with pytest.raises(ValueError, match="not those of whole outputs"):
        disagreement(good, want, allowed[:-1])  # Model's side broken: the judge's own fault


def test_a_multiple_of_the_output_does_not_agree():
    """The sums alone are the same for x and 2 x (x / r does not change): r beside them tells
    them apart, so an output that skips a final scaling, or x for x / norm(x), is not Model's."""
    expected = _output()
    assert fingerprint([expected * 2], 4)[:SUMS] == pytest.approx(fingerprint([expected], 4)[:SUMS], abs=1e-6)
    assert "root mean square" in _agrees(expected * 2, expected)
    assert "root mean square" in _agrees(expected * 1.001, expected)
    assert _agrees(expected * (1 + 5e-5), expected) is None  # within rtol


def test_a_protocols_tolerance_is_the_one_an_agreeing_output_is_held_to():
    """Under DICE's protocol (torch.allclose, rtol = atol = 1e-2) an output off by nearly that
    much everywhere agrees, as the candidate's own comparisons say; by float32's own
    tolerance it does not."""
    from profiler.judging.protocol import DICE

    expected = _output()
    off = expected + 0.9 * (1e-2 * expected.abs() + 1e-2) * _signs(expected, 2)
    assert _agrees(off, expected, 99, DICE.tolerance) is None
    assert _agrees(off, expected, 99) is not None
    wrong = expected.clone()
    wrong[::10] = 0.0
    assert _agrees(wrong, expected, 99, DICE.tolerance) is not None
    dense = expected + 3 * (1e-2 * expected.abs() + 1e-2) * _signs(expected, 3)
    assert _agrees(dense, expected, 99, DICE.tolerance).startswith("output 0: its fingerprint")


def test_an_output_below_the_absolute_tolerance_is_held_to_its_root_mean_square_alone():
    """An output whose r is under twice a protocol's absolute atol: agreeing outputs may have
    any scale of their own (zeros agree, under allclose), so only r is compared."""
    expected = _output() * 1e-3
    allowed = tolerance([expected], (1e-2, 1e-2), key=8)
    assert allowed[0] == math.inf
    assert disagreement(fingerprint([torch.zeros_like(expected)], 8), fingerprint([expected], 8), allowed) is None
    assert "root mean square" in disagreement(fingerprint([expected * 10], 8), fingerprint([expected], 8), allowed)


def test_an_output_of_model_with_nan_or_infinity_is_still_checked_everywhere():
    """Model's output non-finite in a few places: its fingerprint is a number, matched by the
    same output; a NaN answered with a number, or an output wrong elsewhere, does not agree."""
    expected = _output()
    expected[5], expected[6], expected[7] = float("inf"), float("-inf"), float("nan")
    prints = fingerprint([expected], 5)
    assert all(v == v and abs(v) != float("inf") for v in prints + tolerance([expected], key=5))
    assert _agrees(expected.clone(), expected, 5) is None
    assert _agrees(expected + _edge(expected) * _signs(expected, 4), expected, 5) is None
    filled = expected.clone()
    filled[7] = 0.0
    assert _agrees(filled, expected, 5) is not None
    flipped = expected.clone()
    flipped[5] = float("-inf")
    assert _agrees(flipped, expected, 5) is not None
    assert _agrees(_output(seed=3), expected, 5) is not None
    guessed = torch.full_like(expected, float("nan"))
    assert _agrees(guessed, expected, 5) is not None


def test_the_energy_bound_is_chernoffs_for_the_chosen_number_of_sums():
    """exp(-m (kappa - 1 - ln kappa) / 2) is half the false alarm the module states."""
    assert SUMS * (KAPPA - 1 - math.log(KAPPA)) / 2 == pytest.approx(math.log(2e10), rel=1e-9)
