"""`dice bench --protocol`: which protocol judged a run, DICE's extraction as a failure under
`dice`, one protocol per results folder, and the summary's list of what was not counted."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from dice_lsp.bench import results as bench_results
from dice_lsp.bench.extraction import fail_rejected
from dice_lsp.bench.results import CandidateRecord, RunRecord, TaskRecord, load
from dice_lsp.bench.run import Plan, human_report, summarize
from dice_lsp.bench.tasks import OptimizeTask
from dice_lsp.cli import build_parser, main
from engine.decoding.prompts import PYTHON_LANGUAGES, extract_dice_answer
from profiler.judging.protocol import DICE, DICE_LSP, PROTOCOLS
from profiler.verdict.types import Verdict

pytestmark = pytest.mark.timeout(300)

FENCED = "Here it is:\n```python\nclass ModelNew(Model):\n    pass\n```\n"
UNCLOSED = "```python\nclass ModelNew(Model):\n    pass\n"  # decoding stopped at max_tokens


def generated(answer: str) -> CandidateRecord:
    """A candidate as `dice bench` records a chat model's answer."""
    code, extraction = extract_dice_answer(answer, PYTHON_LANGUAGES)
    return CandidateRecord(code, {"tokens": 20, "finish_reason": "eos", "extraction": extraction})


def test_the_cli_offers_the_profilers_protocols(capsys: pytest.CaptureFixture) -> None:
    parser = build_parser()
    assert parser.parse_args(["bench", "problems"]).protocol == DICE_LSP.name
    for name in PROTOCOLS:
        assert parser.parse_args(["bench", "problems", "--protocol", name]).protocol == name
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "problems", "--protocol", "kernelbench"])
    assert "invalid choice: 'kernelbench' (choose from 'dice-lsp', 'dice')" in capsys.readouterr().err


def test_under_dices_protocol_an_answer_its_extraction_rejects_fails_unjudged() -> None:
    candidates = [generated(FENCED), generated(UNCLOSED), CandidateRecord("class ModelNew: ...", {"file": "s.py"})]
    assert [c.generation.get("extraction") for c in candidates] == ["dice", "lenient", None]
    assert fail_rejected(candidates, DICE_LSP) == 0 and all(c.verdict is None for c in candidates)
    assert fail_rejected(candidates, DICE) == 1
    judged, rejected, solution = candidates
    assert judged.verdict is None and solution.verdict is None  # left to the judge
    verdict = Verdict.from_json(rejected.verdict)
    assert verdict.status == "compile_error" and not verdict.compiled and verdict.correct is None
    assert verdict.speedup is None and "DICE's extraction finds no closed ``` block" in verdict.message
    assert "protocol dice" in verdict.message


def test_a_dice_run_records_its_protocol_and_fails_what_dice_rejects(
    control_problems: Path, tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "out"
    code = main(["bench", str(control_problems), "--model", str(tiny_checkpoint), "--candidates", "2",
                 "--max-tokens", "8", "--limit", "1", "--out", str(out), "--protocol", "dice", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    assert summary["protocol"] == "dice"
    run = load(out)
    assert run.settings["protocol"] == "dice" and run.summary["protocol"] == "dice"
    (record,) = run.tasks.values()
    assert record.state == "done" and len(record.candidates) == 2
    for candidate in record.candidates:
        # A random model's 8 tokens: DICE's extraction decides whether it is judged at all.
        assert candidate.generation["extraction"] in ("dice", "lenient")
        if candidate.generation["extraction"] == "lenient":
            assert candidate.verdict["status"] == "compile_error"
            assert "DICE's extraction" in candidate.verdict["message"]
        else:
            assert "DICE's extraction" not in candidate.verdict["message"]

    # Its results folder takes only this protocol's verdicts.
    assert main(["bench", str(control_problems), "--model", str(tiny_checkpoint), "--candidates", "2",
                 "--max-tokens", "8", "--limit", "1", "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "judged under protocol 'dice', not 'dice-lsp'" in err and "--protocol dice" in err


def test_a_run_from_before_protocols_resumes_only_under_ours(
    control_problems: Path, correct_controls: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "out"
    bench_results.save(RunRecord({"mode": "optimize", "model": None, "solutions": str(correct_controls.resolve()),
                                  "candidates": None}), out)
    assert main(["bench", str(control_problems), "--solutions", str(correct_controls), "--out", str(out),
                 "--resume", "--protocol", "dice"]) == 2
    assert "judged under protocol 'dice-lsp', not 'dice'" in capsys.readouterr().err


def test_the_summary_and_report_list_what_was_not_counted(tmp_path: Path) -> None:
    proven = Verdict("faster", True, True, 1.5, (1.4, 1.6), 1.0, 1.5, [], "1.50x faster", inputs_checked=5,
                     gpu="NVIDIA H100")
    suspicious = replace(proven, status="suspicious", speedup=40.0,
                         message="suspicious: 40.0x eager PyTorch; nothing proven")
    flagged = replace(proven, extra={"flags": ["environment"]})
    records = [
        TaskRecord("level1/1_a", "level1", "1_a.py", "done",
                   [CandidateRecord("a", {}, suspicious.to_json()), CandidateRecord("b", {}, proven.to_json())]),
        TaskRecord("level1/2_b", "level1", "2_b.py", "done", [CandidateRecord("c", {}, flagged.to_json())]),
    ]
    plan = Plan([OptimizeTask(r.name, r.level, r.path, "") for r in records],
                {"mode": "optimize", "source": "problems", "model": "m", "solutions": None, "candidates": 2,
                 "protocol": "dice"}, tmp_path, [])
    run = RunRecord(plan.settings, {r.name: r for r in records})
    summary, tables = summarize(plan, run)
    assert summary["protocol"] == "dice" and summary["gpu"] == "NVIDIA H100"
    assert summary["not_counted"] == [
        {"name": "level1/1_a", "candidate": 0, "reason": "suspicious", "message": suspicious.message},
        {"name": "level1/2_b", "candidate": 0, "reason": "flagged", "message": "1.50x faster"},
    ]
    everything = summary["tables"][0]["rows"][-1]
    assert everything["correct"] == 1 and everything["not_counted"] == {"suspicious": 1, "flagged": 1}
    text = human_report(summary, tables)
    assert "protocol: dice" in text
    assert "2 candidate(s) not counted (their measurement proves nothing):" in text
    assert "  level1/1_a candidate 1: suspicious: suspicious: 40.0x eager PyTorch; nothing proven" in text
