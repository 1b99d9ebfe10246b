"""One KernelBench run and its verdict: the request, the sandboxed run in the candidate's own
verified build folder, the checks made before it (each once per document: Checks), and
torch.compile(Model) as a second baseline. The schedule of a problem's runs is
profiler.judging.schedule's."""

from __future__ import annotations

import os
import secrets
import threading
from typing import Callable

from profiler.checks.kernelbench import kernelbench_cuda_diagnostics
from profiler.checks.python import python_check
from profiler.checks.static import static_flags
from profiler.judging.caches import COMPILED, TorchCompileBaseline, known_peak_gbs
from profiler.judging.common import seeds, time_budget
from profiler.judging.protocol import DICE_LSP, Protocol
from profiler.machine.gpu import compute_capability, gpu_name
from profiler.machine.paths import remove_tree
from profiler.sandbox import SandboxOutcome, Started, run_sandboxed, run_started
from profiler.sandbox.builds import VerifiedBuilds
from profiler.sandbox.clock import pair_seed
from profiler.sandbox.spare import DOCUMENT_SPARE
from profiler.source.document import defines_model_new, kernelbench_problem
from profiler.verdict.decision import (Audit, Reference, against_model_alone, from_outcome, reference_facts,
                                       torch_compile_ms)
from profiler.verdict.types import Diagnostic, Verdict

# Timed runs of a candidate whose fingerprints a run of Model alone checks, picked after the
# timing ended; a candidate wrong on a share f of its runs passes with (1 - f)^64 (0.1% at
# f = 10%). Nothing else checks a timed run's output: the candidate's process may skip any
# comparison of its own.
AUDITED_PAIRS = 64


class Checks:
    """python_check and static_flags of a problem's documents, each run once per document
    however many steps ask (which candidates to build ahead, whether Model alone runs, which
    sandboxes to pre-start, the verdict itself). Documents are compared by their text."""

    def __init__(self, baseline: str, path: str) -> None:
        self.baseline, self.path = baseline, path
        self._parsed: dict[str, list[Diagnostic]] = {}
        self._flags: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def parse_errors(self, document: str) -> list[Diagnostic]:
        """python_check(document): why it does not parse (nothing when it does)."""
        with self._lock:
            if document not in self._parsed:
                self._parsed[document] = python_check(document, self.path)
            return self._parsed[document]

    def flags(self, candidate: str) -> list[str]:
        """static_flags(candidate, baseline): what the static checker flags in it."""
        with self._lock:
            if candidate not in self._flags:
                self._flags[candidate] = static_flags(candidate, self.baseline)
            return self._flags[candidate]


def _compile_only(candidate: str, path: str) -> Verdict | None:
    """Without a GPU, a candidate's load_inline CUDA is compiled (nvcc, not built) as a .cu
    candidate's is: "compiles; not timed", or its errors. None when there is no CUDA to
    check or nothing to check it with (the sandbox's verdict stands)."""
    diagnostics = kernelbench_cuda_diagnostics(candidate, path)
    if diagnostics is None:
        return None
    errors = [d for d in diagnostics if d.severity == "error"]
    if errors:
        return Verdict.failed("compile_error", f"does not compile: line {errors[0].line}: {errors[0].message}",
                              diagnostics=diagnostics)
    return Verdict.failed("no_gpu", "compiles; not timed: no GPU", diagnostics=diagnostics, compiled=True)


def kernelbench_request(baseline: str, candidate: str | None, path: str, time_limit: float,
                        inputs: dict | None = None, protocol: Protocol = DICE_LSP,
                        signed_timing: bool | None = None) -> dict:
    """`inputs`: {"seeds", "sample_seed"} shared by the runs whose outputs are compared (a
    candidate's and Model's alone); fresh seeds and no samples without it. `signed_timing`:
    whether Model takes signed inputs, as Model alone said (None: the candidate's process finds
    out for itself)."""
    filename = os.path.basename(path) or "model.py"
    return {
        "signed_timing": signed_timing,
        "kind": "kernelbench",
        "baseline": {"source": baseline, "filename": filename},
        "candidate": None if candidate is None else {"source": candidate, "filename": filename},
        "seeds": seeds(protocol),
        **(inputs or {}),
        "protocol": protocol.to_request(),
        "time_budget_s": time_budget(time_limit),
        # load_inline builds for this architecture also where the GPU is hidden (build ahead).
        "cuda_arch": compute_capability(),
        "peak_gbs": known_peak_gbs(gpu_name()),
    }


def kernelbench_run(baseline: str, candidate: str | None, path: str, time_limit: float, should_cancel,
                    builds: VerifiedBuilds | None, env: dict[str, str] | None = None, inputs: dict | None = None,
                    on_phase=None, started: Started | None = None, protocol: Protocol = DICE_LSP):
    """One sandboxed run of a KernelBench request, in the candidate's own verified build
    folder when `builds` holds one (or in `started`, a sandbox already started in it)."""
    request = kernelbench_request(baseline, candidate, path, time_limit, inputs, protocol)
    return run_in_build_folder(request, candidate, builds, time_limit, should_cancel, env=env, on_phase=on_phase,
                               started=started)


def run_in_build_folder(request: dict, document: str | None, builds: VerifiedBuilds | None, time_limit: float,
                        should_cancel, env: dict[str, str] | None = None, on_phase=None,
                        started: Started | None = None) -> SandboxOutcome:
    """run_sandboxed, in `document`'s own verified build folder when there is a store (and a
    document: Model alone builds nothing of a candidate's). `started`: a sandbox started
    earlier in that folder (KernelBenchProblem.prestart, which holds the folder meanwhile)."""
    if started is not None:
        try:
            return run_started(started, request, time_limit, should_cancel, on_phase)
        finally:
            remove_tree(started.folder)
    if builds is None or document is None:
        return run_sandboxed(request, time_limit, should_cancel=should_cancel, env=env, on_phase=on_phase)
    key = VerifiedBuilds.key(document, request["cuda_arch"])
    with builds.folder(key) as folder:
        # A sandbox kept started for this document since its last profile (profiler.sandbox.spare).
        kept = DOCUMENT_SPARE.take(key, time_limit, folder) if env is None else None
        if kept is not None:
            try:
                return run_started(kept.started, request, time_limit, should_cancel, on_phase)
            finally:
                kept.finished()
        return run_sandboxed(request, time_limit, should_cancel=should_cancel, env=env, extensions=folder,
                             on_phase=on_phase)


def kernelbench_verdict(baseline: str, candidate: str | None, path: str, time_limit: float,
                        should_cancel, *, with_compile: bool, builds: VerifiedBuilds | None = None,
                        reference: Reference | None = None, on_phase=None, started: Started | None = None,
                        protocol: Protocol = DICE_LSP, checks: Checks | None = None) -> Verdict:
    """`checks`: the problem's (python_check and static_flags made once per document); a
    fresh one without it."""
    checks = checks or Checks(baseline, path)
    diagnostics = checks.parse_errors(baseline if candidate is None else candidate)
    if diagnostics:
        return Verdict.failed("compile_error", f"does not parse: line {diagnostics[0].line}: "
                                               f"{diagnostics[0].message}", diagnostics=diagnostics)
    flags = checks.flags(candidate) if candidate is not None else []
    reference = reference or Reference()

    def measured(started: Started | None) -> tuple[SandboxOutcome, Verdict]:
        signed = (reference.facts or {}).get("signed_ok")
        request = kernelbench_request(baseline, candidate, path, time_limit, reference.inputs, protocol,
                                      None if signed is None else bool(signed))
        outcome = run_in_build_folder(request, candidate, builds, time_limit, should_cancel, on_phase=on_phase,
                                      started=started)
        audit = None
        if candidate is not None and outcome.status == "ok" and outcome.result.get("outcome") == "measured":
            audit = audit_timing(baseline, path, request, outcome, time_limit, should_cancel, on_phase)
        compiled, facts, reference_time = None, reference.facts, reference.ms
        if with_compile and outcome.status == "ok" and outcome.result.get("outcome") == "measured":
            compiled = COMPILED.get(baseline, lambda: torch_compile_baseline(baseline, path, time_limit,
                                                                             should_cancel, builds=builds))
            facts, reference_time = facts or compiled.facts, compiled.eager_ms
        verdict = from_outcome(outcome, flags=flags, facts=facts, audit=audit)
        if compiled is not None:
            with_torch_compile(verdict, compiled)
        return outcome, against_model_alone(verdict, outcome, reference_time,
                                            reference.samples if reference.inputs is not None else None)

    outcome, verdict = measured(started)
    if candidate is not None and verdict.status == "no_gpu":
        # The problem loaded (else the verdict says why); what the sandbox could not build
        # without a GPU, nvcc can at least compile.
        ran = verdict
        verdict = _compile_only(candidate, path) or verdict
        if flags:
            verdict.extra["flags"] = flags
        verdict.extra.setdefault("isolation", ran.extra.get("isolation"))  # how its module ran
    # started_s_before (0: started at its turn; more: pre-started) and run_s, by the judge's clock
    verdict.extra.setdefault("phases", {}).update(outcome.process)
    return verdict


def audit_timing(baseline: str, path: str, request: dict, outcome: SandboxOutcome, time_limit: float,
                 should_cancel, on_phase=None) -> Audit:
    """Model alone, where no candidate code runs, on AUDITED_PAIRS of the candidate's timed
    runs picked now that its timing has ended (its process could not know which), then Model
    in the candidate's timing loop, by the same rule for how many runs: the baseline's times
    (profiler.run.kernelbench.run_audit).
    Model runs from the file's problem part only (profiler.source.document), never beside the
    file's ModelNew."""
    planned = audit_request(baseline, path, request, outcome)
    if isinstance(planned, Audit):
        return planned
    chosen, audit = planned
    ran = run_sandboxed(audit, time_limit, should_cancel=should_cancel, on_phase=on_phase)
    if ran.status != "ok" or ran.result.get("outcome") != "audit":
        why = ran.why() if ran.status != "ok" else from_outcome(ran).message
        return Audit(outcome.clock, problem=f"Model alone could not check the candidate's timed runs: {why}")
    return Audit(outcome.clock, ran.clock, chosen, ran.result["fingerprints"], ran.result["tolerances"])


def audit_request(baseline: str, path: str, request: dict, outcome: SandboxOutcome) -> tuple[list[int], dict] | Audit:
    """(the candidate's pairs picked for the audit, the request of run_audit), or an Audit that
    says why there is none. Nothing in it comes from the candidate's process but the judge's
    own clock log: where no run of Model alone said whether Model takes signed inputs
    (signed_timing None), the audit finds out itself, as a candidate's checks do; the
    tolerance is the protocol's, as in the candidate's own comparisons."""
    log = outcome.clock
    pairs = [(entry, index) for entry in log for index in range(int(entry["pairs"]))]
    if not pairs:
        return Audit(log, problem="the candidate's timing went by no batch of the judge's clock")
    problem_part = kernelbench_problem(baseline)
    if defines_model_new(problem_part):
        return Audit(log, problem="ModelNew comes before the end of the problem (Model, get_inputs, "
                                  "get_init_inputs) in this file, so Model cannot run apart from it")
    chosen = sorted(secrets.SystemRandom().sample(range(len(pairs)), min(AUDITED_PAIRS, len(pairs))))
    # "signed": the pair's inputs are shifted to [-1, 1) where Model takes signed inputs (every
    # other pair, as profiler.run.kernelbench.TimedInputs has them).
    audited = [{"seed": pair_seed(int(pairs[i][0]["seed"]), pairs[i][1]), "signed": i % 2 == 1,
                "key": int(pairs[i][0]["key"])} for i in chosen]
    return chosen, {"kind": "kernelbench_audit",
                    "baseline": {"source": problem_part, "filename": os.path.basename(path) or "model.py"},
                    "seeds": request["seeds"], "pairs": audited, "signed_timing": request.get("signed_timing"),
                    "tolerance": (request.get("protocol") or {}).get("tolerance"),
                    "timed_runs": (request.get("protocol") or {}).get("timed_runs"), "cuda_arch": request.get("cuda_arch"),
                    "time_budget_s": request.get("time_budget_s")}


def measured_again_if_unstable(verdict: Verdict, measure: Callable[[], Verdict]) -> Verdict:
    """`verdict`, or where it is unstable a second measurement in a fresh process (its own
    verdict, unstable again or not), which keeps the first one's message."""
    if verdict.status != "unstable":
        return verdict
    second = measure()
    second.extra["first_measurement"] = verdict.message
    return second


def torch_compile_baseline(baseline: str, path: str, time_limit: float, should_cancel=None,
                           on_phase=None, builds: VerifiedBuilds | None = None) -> TorchCompileBaseline:
    """The second baseline of a KernelBench problem, measured once for any of its candidates.

    That process loads the whole document, so its load_inline calls run there too: with
    `builds`, in the document's own build folder, where the document's judging run left its
    build (profile(): one document, one build)."""
    filename = os.path.basename(path) or "model.py"
    request = {"kind": "torch_compile", "baseline": {"source": baseline, "filename": filename},
               "seeds": seeds(), "time_budget_s": time_budget(time_limit), "cuda_arch": compute_capability()}
    outcome = run_in_build_folder(request, baseline, builds, time_limit, should_cancel, on_phase=on_phase)
    records = outcome.result.get("extra", {}).get("builds") if outcome.status == "ok" else None
    return TorchCompileBaseline(*torch_compile_ms(outcome), builds=records or None, facts=reference_facts(outcome))


def with_torch_compile(verdict: Verdict, compiled: TorchCompileBaseline) -> Verdict:
    """`verdict` (a timed candidate) against torch.compile(Model) too, or saying why not; its
    eager comparison stays as it is."""
    if compiled.builds:
        verdict.extra["torch_compile_builds"] = compiled.builds
    if compiled.compile_ms is None:
        verdict.extra["torch_compile"] = f"not timed: {compiled.why}"
        return verdict
    verdict.extra["compile_ms"] = compiled.compile_ms
    verdict.extra["speedup_vs_compile"] = compiled.compile_ms / verdict.time_ms
    when = ""
    if compiled.age_s:
        verdict.extra["torch_compile_age_s"] = round(compiled.age_s, 1)
        when = f", {compiled.age_s:.0f} s ago"
    verdict.message += (f"; vs torch.compile(Model) {compiled.compile_ms / verdict.time_ms:.2f}x "
                        f"(timed in another process{when})")
    return verdict


def keep_a_spare(document: str, path: str, time_limit: float, builds: VerifiedBuilds | None,
                 checks: Checks) -> None:
    """After a KernelBench profile on a GPU: a sandbox started for the document's next run
    (the language server's warm profile then skips a sandbox's ~3 s start-up)."""
    if builds is None or gpu_name() is None or compute_capability() is None or checks.parse_errors(document):
        return
    key = VerifiedBuilds.key(document, compute_capability())
    DOCUMENT_SPARE.keep(key, builds.root / key, time_limit)
