"""The hover's lines say what was proven and what was flagged."""

from __future__ import annotations

from dice_lsp.core.verdict_view import hover_markdown
from profiler.results import Verdict


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
