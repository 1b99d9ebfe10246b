"""What the judge asks Model alone to check after a candidate's timing (audit_request), from
a clock log and a candidate's measurement shaped as a sandboxed run returns them: only the
judge's own log and request decide it, never the candidate's measurement."""

from __future__ import annotations

from profiler.judging.kernelbench import AUDITED_PAIRS, audit_request, kernelbench_request
from profiler.judging.protocol import DICE
from profiler.sandbox import SandboxOutcome
from profiler.sandbox.clock import pair_seed
from profiler.verdict.decision import Audit

def _outcome(batches: list[int], extra: dict) -> SandboxOutcome:
    log = [{"batch": j, "seed": 1000 + j, "key": 2000 + j, "pairs": n, "go": 1.0, "done": 2.0, "report": {}}
           for j, n in enumerate(batches)]
    measurement = {"outcome": "measured", "extra": extra}
    return SandboxOutcome("ok", measurement, 0, "", 10.0, clock=log)


def test_the_pairs_seeds_keys_and_signs_come_from_the_judges_log_and_the_tolerance_from_the_protocol(
        kernelbench_dir):
    baseline = (kernelbench_dir / "level1" / "19_ReLU.py").read_text()
    request = kernelbench_request(baseline, "class ModelNew: pass", "model.py", 60.0, protocol=DICE)
    # The candidate's process says its timing used no signed inputs: the audit does not ask it.
    chosen, audit = audit_request(baseline, "model.py", request, _outcome([20, 20, 32, 8], {"signed_inputs": False}))
    assert len(chosen) == AUDITED_PAIRS == len(audit["pairs"]) and chosen == sorted(set(chosen))
    flat = [(1000 + j, 2000 + j, i) for j, n in enumerate([20, 20, 32, 8]) for i in range(n)]
    for index, pair in zip(chosen, audit["pairs"]):
        seed, key, within = flat[index]
        assert pair == {"seed": pair_seed(seed, within), "key": key, "signed": index % 2 == 1}
    assert audit["signed_timing"] is None  # no Model alone said: run_audit finds out itself
    assert audit["tolerance"] == [1e-2, 1e-2]
    assert audit["kind"] == "kernelbench_audit" and "ModelNew" not in audit["baseline"]["source"]
    signed = kernelbench_request(baseline, "class ModelNew: pass", "model.py", 60.0, signed_timing=True)
    _, audit = audit_request(baseline, "model.py", signed, _outcome([4], {"signed_inputs": False}))
    assert audit["signed_timing"] is True and audit["tolerance"] is None and len(audit["pairs"]) == 4


def test_no_batch_or_a_model_new_inside_the_problem_leaves_nothing_to_audit(kernelbench_dir):
    baseline = (kernelbench_dir / "level1" / "19_ReLU.py").read_text()
    request = kernelbench_request(baseline, "class ModelNew: pass", "model.py", 60.0)
    found = audit_request(baseline, "model.py", request, _outcome([], {}))
    assert isinstance(found, Audit) and "no batch" in found.problem
    inside = baseline.replace("def get_inputs():", "class ModelNew(Model):\n    pass\n\ndef get_inputs():")
    found = audit_request(inside, "model.py", request, _outcome([3], {}))
    assert isinstance(found, Audit) and "cannot run apart" in found.problem
