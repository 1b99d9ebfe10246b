"""Verdicts travel as JSON (sandbox to parent, the server's cache, --json): nothing is lost."""

from __future__ import annotations

import json

import pytest

from profiler.verdict.types import Diagnostic, Verdict


def test_verdict_json_round_trip():
    verdict = Verdict("faster", True, True, 1.8, (1.7, 1.9), 0.5, 0.9, [Diagnostic(3, 7, "warning", "unused")],
                      "1.80x faster (1.70-1.90)", inputs_checked=4, gpu="NVIDIA H200", kernel="k",
                      registers=32, shared_bytes=1024, bandwidth_gbs=3000.0, peak_bandwidth_gbs=4000.0,
                      extra={"seeds": [1, 2]})
    data = json.loads(json.dumps(verdict.to_json()))
    assert data["speedup_ci"] == [1.7, 1.9]
    assert data["diagnostics"] == [{"line": 3, "column": 7, "severity": "warning", "message": "unused"}]
    assert Verdict.from_json(data) == verdict


def test_failed_verdict_has_no_numbers_and_unknown_status_is_refused():
    v = Verdict.failed("timeout", "killed")
    assert (v.correct, v.speedup, v.time_ms, v.baseline_ms, v.speedup_ci) == (None, None, None, None, None)
    assert Verdict.failed("wrong", "off").correct is False
    with pytest.raises(ValueError, match="unknown verdict status"):
        Verdict.failed("fast", "?")
