"""The hover, lens and summary say what was proven, what was flagged, and what a measurement
that proves nothing means; the editor's severities for them."""

from __future__ import annotations

from dataclasses import replace

from lsprotocol import types

from dice_lsp.core.verdict_view import (NOT_PROOF_MEANING, candidate_title, hover_markdown, lens_title, not_proven,
                                        summary)
from dice_lsp.lsp.diagnostics import severity
from profiler.verdict.rules import physical_bound
from profiler.verdict.types import NOT_PROOF, Verdict


def _verdict(**extra) -> Verdict:
    return Verdict("faster", True, True, 1.8, (1.7, 1.9), 0.1, 0.18, [], "1.80x faster (1.70-1.90)",
                   inputs_checked=4, gpu="NVIDIA H200", extra=extra)


def test_hover_says_the_outputs_were_checked_apart_and_names_flags():
    text = hover_markdown("ModelNew", _verdict(checked_apart=5, flags=["environment"]))
    assert "- correct: yes on 4 input sets" in text
    assert "- outputs also checked against Model run in a process of its own (5 input sets)" in text
    assert "- flagged: environment (never applied by itself)" in text
    plain = hover_markdown("ModelNew", _verdict(checked_apart=0))
    assert "process of its own" not in plain and "flagged" not in plain


def _measured(status: str, speedup: float = 1.8, **fields) -> Verdict:
    return replace(_verdict(), status=status, speedup=speedup, **fields)


def test_every_status_that_proves_nothing_has_its_meaning():
    assert set(NOT_PROOF_MEANING) == set(NOT_PROOF)


def test_an_impossible_verdict_says_what_it_implies_and_that_nothing_is_proven():
    # The profiler's own words first (profiler.verdict.decision writes them from physical_bound).
    broken = physical_bound({"input_bytes": 1 << 26, "output_bytes": 1 << 26}, 1000.0, 0.05)
    judged = Verdict("impossible", True, True, None, None, None, None, [],
                     f"impossible: {broken}; nothing proven (measured 0.0500 ms against 3.0000 ms)", inputs_checked=4)
    assert broken.startswith("0.0500 ms implies 2684 GB/s")
    assert summary(judged) == lens_title(judged) == f"impossible: {broken}; nothing proven"
    # A verdict whose message does not say it: its bandwidth against the peak.
    impossible = _measured("impossible", 40.0, bandwidth_gbs=6270.0, peak_bandwidth_gbs=3300.0, message="too fast")
    expected = "impossible: implies 190% of the GPU's memory bandwidth; nothing proven"
    assert summary(impossible) == expected and lens_title(impossible) == expected
    assert candidate_title(0, impossible) == f"Apply candidate 1: {expected}"
    hover = hover_markdown("scale", impossible)
    assert f"- **{expected}**: the numbers below are what was measured, not a speedup" in hover
    # Without a bandwidth to say it with, the meaning of the status itself.
    assert summary(_measured("impossible", 40.0, message="too fast")) == (
        "impossible: faster than the GPU's memory bandwidth or arithmetic allows: the timer did not see the work; "
        "nothing proven")


def test_each_status_that_proves_nothing_reads_plainly():
    assert summary(_measured("suspicious", 25.0)) == (
        "suspicious: 25.0x eager PyTorch, over 10x: more often a cheat than a kernel; nothing proven")
    assert summary(_measured("unstable")) == ("unstable: the timings disagree with themselves or with the baseline "
                                              "timed alone: no speedup can be read; nothing proven")
    assert lens_title(_measured("unproven")) == ("unproven: the baseline's outputs do not depend on its inputs: "
                                                 "matching them shows nothing; nothing proven")
    drifted = _measured("unstable", 1.5, message="unstable: the speedup drifted from 1.20x in the first half of the "
                                                 "runs to 1.80x in the second; 1.50x (1.1-1.9) is not a reproducible "
                                                 "number, correct on 4 input sets")
    assert summary(drifted) == ("unstable: the speedup drifted from 1.20x in the first half of the runs to 1.80x in "
                                "the second; nothing proven")
    flagged = _verdict(flags=["environment"])
    assert summary(flagged) == "flagged (environment): 1.8x faster, not proven, never applied by itself"
    assert not_proven(_verdict()) is None and summary(_verdict()) == "1.8x faster, correct on 4 inputs"
    assert not_proven(Verdict.failed("wrong", "wrong on input set 2", compiled=True)) is None


def test_severities_warn_for_every_verdict_that_proves_nothing():
    assert severity(_verdict()) == types.DiagnosticSeverity.Information
    assert severity(_verdict(flags=["environment"])) == types.DiagnosticSeverity.Warning
    for status in NOT_PROOF:
        assert severity(_measured(status)) == types.DiagnosticSeverity.Warning
    assert severity(Verdict.failed("wrong", "wrong", compiled=True)) == types.DiagnosticSeverity.Error
