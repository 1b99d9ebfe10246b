"""judge() and profile(): the parent side. Cheap checks here (spec, signature, nvcc
diagnostics), everything that runs code in a fresh sandboxed process per candidate.

Never imports torch or CuPy: the language server calls these from a thread.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Callable

from profiler.compile import CompilerMissing, check_arch, nvcc_check
from profiler.cuda_source import Kernel, find_kernel
from profiler.document import defines_model_new, is_kernelbench
from profiler.dtypes import dtype_name
from profiler.gpu import compute_capability, gpu_name
from profiler.kernelbench_check import kernelbench_cuda_diagnostics
from profiler.python_check import python_check
from profiler.paths import cache_dir, remove_tree
from profiler.protocol import DICE_LSP, Protocol
from profiler.results import Diagnostic, Verdict
from profiler.sandbox import POOL, Cancelled, SandboxOutcome, Started, pool, run_sandboxed, run_started, start_harness
from profiler.sandbox.builds import VerifiedBuilds, process_builds, reuse_builds
from profiler.sandbox.spare import DOCUMENT_SPARE
from profiler.spec import Spec, SpecError, parse_spec
from profiler.static_check import static_flags
from profiler.verdict import (
    Reference,
    against_model_alone,
    from_outcome,
    reference_facts,
    reference_ms,
    reference_samples,
    torch_compile_ms,
)

NO_SPEC_HINT = ("no benchmark spec: add `// dice:` lines above the kernel "
                "(the \"Add benchmark spec\" code action writes a template)")

# Progress: on_progress(index, total) before candidate `index` (1-based) is judged, and
# on_progress(0, total) when all of them are first built at once (KernelBench).
ProgressFn = Callable[[int, int], None]
# Environment variable: how many KernelBench candidates are built at once (default: one per
# two CPUs, since a load_inline build compiles two files).
BUILD_JOBS_ENV = "DICE_BUILD_JOBS"


def _seeds(protocol: Protocol = DICE_LSP) -> list[int]:
    """Fresh seeds for every check (the last one checked after timing), so a candidate cannot
    be tuned to known inputs."""
    return [secrets.randbits(31) for _ in range(protocol.input_sets)]


def _time_budget(time_limit: float) -> float:
    """Seconds of timing runs per candidate: a share of its limit, at most 2 s."""
    return max(0.2, min(2.0, 0.2 * time_limit))


def _each(candidates: list, on_progress: ProgressFn | None, should_cancel,
          judge_one: Callable[[str | None], Verdict]) -> list[Verdict]:
    """judge_one for each candidate in turn, reporting progress and stopping on cancel."""
    verdicts = []
    for index, candidate in enumerate(candidates, start=1):
        if should_cancel is not None and should_cancel():
            raise Cancelled("cancelled")
        if on_progress is not None:
            on_progress(index, len(candidates))
        verdicts.append(judge_one(candidate))
    return verdicts


def _peak_file():
    return cache_dir() / "peak_bandwidth.json"


def known_peak_gbs(gpu: str | None) -> float | None:
    """The GPU's peak bandwidth as a .cu run measured it before, from the judge's own cache."""
    try:
        return float(json.loads(_peak_file().read_text())[gpu])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _remember_peak(verdict: Verdict) -> None:
    """Keep a peak measured by a .cu run (whose process runs no candidate host code)."""
    if verdict.gpu is None or verdict.peak_bandwidth_gbs is None or known_peak_gbs(verdict.gpu) is not None:
        return
    path = _peak_file()
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    known[verdict.gpu] = verdict.peak_bandwidth_gbs
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")  # .cu runs end in threads of their own
    tmp.write_text(json.dumps(known, indent=1))
    tmp.replace(path)  # atomic: two judges measuring at once never leave half a file


# ------------------------------------------------------------------ .cu documents

def _resolve_params(kernel: Kernel, spec: Spec) -> list[dict]:
    """The kernel's parameters with what the spec gives them, as the runner takes them."""
    params = []
    for p in kernel.params:
        dtype = dtype_name(p.type)
        if dtype is None:
            raise ValueError(f"parameter {p.name} has type {p.type}, which the profiler cannot fill "
                             "(supported: float, double, __half, __nv_bfloat16 and integer types)")
        role = ("inout" if p.name in spec.inout else "input" if p.const else "output") if p.pointer else "scalar"
        params.append({"name": p.name, "dtype": dtype, "pointer": p.pointer, "role": role,
                       "count": spec.buffers.get(p.name), "value": spec.args.get(p.name)})
    return params


def _signature_change(base: Kernel, cand: Kernel) -> str | None:
    shape = lambda k: [(p.type, p.pointer, p.const and p.pointer) for p in k.params]  # noqa: E731
    if shape(base) != shape(cand):
        def show(k):
            return ", ".join(f"{'const ' if p.const else ''}{p.type}{'*' if p.pointer else ''}" for p in k.params)
        return f"the candidate changed the signature of {base.name}: ({show(cand)}), expected ({show(base)})"
    return None


def _nvcc_diagnostics(source: str, path: str) -> list[Diagnostic] | None:
    """nvcc's messages, or None when there is no nvcc here (the sandbox's NVRTC decides)."""
    include_dirs = [os.path.dirname(os.path.abspath(path))] if path else []
    try:
        return nvcc_check(source, path, include_dirs=include_dirs)
    except CompilerMissing:
        return None


class _CudaJob:
    """The baseline side of judging a .cu document, resolved once for all its candidates."""

    def __init__(self, baseline: str, path: str, kernel: str | None):
        self.baseline, self.path = baseline, path
        self.kernel = find_kernel(baseline, kernel)  # ValueError: no such kernel
        spec = parse_spec(baseline).get(self.kernel.name)  # SpecError: a bad spec
        self.spec = spec
        self.params = _resolve_params(self.kernel, spec) if spec is not None else None

    def request(self, candidate: str | None, time_limit: float) -> dict:
        filename = os.path.basename(self.path) or "kernel.cu"
        return {
            "kind": "cuda",
            "kernel": self.kernel.name,
            "baseline": {"source": self.baseline, "filename": filename},
            "candidate": None if candidate is None else {"source": candidate, "filename": filename},
            "params": self.params,
            "grid": list(self.spec.grid),
            "block": list(self.spec.block),
            "shared": self.spec.shared,
            "flops": self.spec.flops,
            "seeds": _seeds(),
            "time_budget_s": _time_budget(time_limit),
            "include_dirs": [os.path.dirname(os.path.abspath(self.path))] if self.path else [],
            "peak_gbs": known_peak_gbs(gpu_name()),
            # On the device with the pool (milliseconds); on the host, as before it, without.
            "inputs_on": "device" if pool.enabled() else "host",
        }

    def judge(self, candidate: str | None, time_limit: float, should_cancel,
              checked: Future | None = None, turn: "_Turns | None" = None, index: int = 0) -> Verdict:
        """One candidate (None: the baseline itself, profiled). `checked`: its nvcc check,
        already under way (_checks_ahead); the sandboxed run then starts without waiting for
        it, and its outcome counts only if nvcc finds no error, as when it ran first.
        `turn`: the candidates' turns on the GPU (_pipelined); this one's is `index`, and it
        passes the turn on as soon as its run has ended."""
        source = self.baseline if candidate is None else candidate
        name = self.kernel.name
        phases: dict = {}
        started = time.monotonic()
        problem = None
        if candidate is not None:
            try:
                problem = _signature_change(self.kernel, find_kernel(candidate, name))
            except ValueError as exc:
                problem = f"the candidate has no kernel {name}: {exc}"
        runs = problem is None and self.spec is not None and gpu_name() is not None
        outcome = None
        if runs and checked is not None:
            def stop() -> bool:  # nvcc's error decides; the run is not waited for
                return (should_cancel is not None and should_cancel()) or checked.done() and _errors(checked)

            try:
                outcome = run_sandboxed(self.request(candidate, time_limit), time_limit, should_cancel=stop,
                                        turn=None if turn is None else turn.event(index))
            except Cancelled:
                if not _errors(checked):
                    raise
            finally:
                if turn is not None:
                    turn.passed(index)
            phases["sandbox_s"] = time.monotonic() - started
        diagnostics, phases["nvcc_check_s"] = checked.result() if checked is not None else _timed_check(source,
                                                                                                      self.path)
        if diagnostics and any(d.severity == "error" for d in diagnostics):
            first = next(d for d in diagnostics if d.severity == "error")
            return Verdict.failed("compile_error", f"does not compile: line {first.line}: {first.message}",
                                  diagnostics=diagnostics, kernel=name)
        compiled = diagnostics is not None  # nvcc said so; without nvcc only the sandbox can tell
        diagnostics = diagnostics or []
        if problem is not None:
            return Verdict.failed("wrong", problem, diagnostics=diagnostics, compiled=compiled, kernel=name)
        if self.spec is None:
            return Verdict.failed("no_spec", NO_SPEC_HINT, diagnostics=diagnostics, compiled=compiled,
                                  kernel=name)
        if gpu_name() is None:
            said = "compiles" if compiled else "not compiled (no nvcc)"
            return Verdict.failed("no_gpu", f"{said}; not timed: no GPU", diagnostics=diagnostics,
                                  compiled=compiled, kernel=name)
        if outcome is None:
            before = time.monotonic()
            outcome = run_sandboxed(self.request(candidate, time_limit), time_limit, should_cancel=should_cancel)
            phases["sandbox_s"] = time.monotonic() - before
        verdict = from_outcome(outcome, diagnostics=diagnostics, kernel=name)
        _remember_peak(verdict)
        phases.update(outcome.process)
        if outcome.result is not None:
            phases["harness"] = outcome.result.get("phase_seconds")  # its own account: for reading only
        phases["total_s"] = time.monotonic() - started
        verdict.extra["phases"] = phases
        return verdict


def _errors(checked: Future) -> bool:
    diagnostics = checked.result()[0]
    return bool(diagnostics) and any(d.severity == "error" for d in diagnostics)


def _timed_check(source: str, path: str) -> tuple[list[Diagnostic] | None, float]:
    started = time.monotonic()
    return _nvcc_diagnostics(source, path), time.monotonic() - started


def _checks_ahead(job: _CudaJob, candidates: list[str | None], time_limit: float,
                  executor: ThreadPoolExecutor) -> list[Future]:
    """nvcc checks of every candidate at once, side by side (a second of CPU each, one core),
    and pre-started sandboxes for those that will run (profiler.sandbox.pool). Judging
    still takes the candidates one by one, each in its turn on the GPU."""
    if job.spec is not None and gpu_name() is not None:
        POOL.reserve("cuda", time_limit, len(candidates))
    check_arch()  # asked once, before the threads would all ask
    return [executor.submit(_timed_check, job.baseline if c is None else c, job.path) for c in candidates]


# Candidates of a .cu document in flight at once: one on the GPU, the next ones building
# their kernels (NVRTC) and waiting for their turn.
LOOKAHEAD = 2


class _Turns:
    """The GPU to one candidate's run at a time, in candidate order: run i gets its turn
    when every run before it has ended (a run that ends early, before its turn or without
    one, gives nothing away). on_progress(i + 1, total) is called as run i gets its turn."""

    def __init__(self, total: int, on_progress: ProgressFn | None):
        self.total, self.on_progress = total, on_progress
        self._events = [threading.Event() for _ in range(total)]
        self._ended = [False] * total
        self._next = 0  # the next turn to give
        self._lock = threading.Lock()
        self._advance()

    def event(self, index: int) -> threading.Event:
        return self._events[index]

    def passed(self, index: int) -> None:
        """Run `index` is over (or never ran)."""
        with self._lock:
            self._ended[index] = True
        self._advance()

    def _advance(self) -> None:
        with self._lock:
            while self._next < self.total and (self._next == 0 or self._ended[self._next - 1]):
                index, self._next = self._next, self._next + 1
                self._events[index].set()  # first: a progress callback that raises leaves no run waiting
                if self.on_progress is not None:
                    self.on_progress(index + 1, self.total)


def _pipelined(job: _CudaJob, candidates: list[str | None], checks: list[Future], time_limit: float,
               on_progress: ProgressFn | None, should_cancel) -> list[Verdict]:
    """Each candidate judged in its own thread, LOOKAHEAD ahead of the one on the GPU: its
    sandbox is claimed and its kernels are built while the one before is checked and
    timed, and it takes the GPU when that run has ended (_Turns). Every run is the same
    run as one judged alone; only the wait before its GPU work differs."""
    turns = _Turns(len(candidates), on_progress)

    def judge_at(index: int) -> Verdict:
        try:
            if should_cancel is not None and should_cancel():
                raise Cancelled("cancelled")
            return job.judge(candidates[index], time_limit, should_cancel, checks[index], turns, index)
        finally:
            turns.passed(index)

    with ThreadPoolExecutor(1 + LOOKAHEAD, thread_name_prefix="dice-cuda-judge") as executor:
        futures = [executor.submit(judge_at, index) for index in range(len(candidates))]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def _cuda_verdicts(baseline: str, candidates: list[str | None], path: str, kernel: str | None,
                   time_limit: float, on_progress: ProgressFn | None, should_cancel) -> list[Verdict]:
    try:
        job = _CudaJob(baseline, path, kernel)
    except SpecError as exc:
        return [Verdict.failed("error", f"bad dice spec at line {exc.line}, column {exc.column}: {exc.message}",
                               diagnostics=[Diagnostic(exc.line, exc.column, "error", f"dice spec: {exc.message}")])
                for _ in candidates]
    except ValueError as exc:
        return [Verdict.failed("error", str(exc)) for _ in candidates]
    if not pool.enabled():  # each candidate checked, started and run at its turn
        return _each(candidates, on_progress, should_cancel,
                     lambda candidate: job.judge(candidate, time_limit, should_cancel))
    executor = ThreadPoolExecutor(max(1, min(len(candidates), os.cpu_count() or 1)),
                                  thread_name_prefix="dice-nvcc-ahead")
    try:
        checks = _checks_ahead(job, candidates, time_limit, executor)
        return _pipelined(job, candidates, checks, time_limit, on_progress, should_cancel)
    finally:
        executor.shutdown(wait=False, cancel_futures=True)


# ------------------------------------------------------------------ KernelBench documents

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


def _kernelbench_request(baseline: str, candidate: str | None, path: str, time_limit: float,
                         inputs: dict | None = None, protocol: Protocol = DICE_LSP) -> dict:
    """`inputs`: {"seeds", "sample_seed"} shared by the runs whose outputs are compared (a
    candidate's and Model's alone); fresh seeds and no samples without it."""
    filename = os.path.basename(path) or "model.py"
    return {
        "kind": "kernelbench",
        "baseline": {"source": baseline, "filename": filename},
        "candidate": None if candidate is None else {"source": candidate, "filename": filename},
        "seeds": _seeds(protocol),
        **(inputs or {}),
        "protocol": protocol.to_request(),
        "time_budget_s": _time_budget(time_limit),
        # load_inline builds for this architecture also where the GPU is hidden (build ahead).
        "cuda_arch": compute_capability(),
        "peak_gbs": known_peak_gbs(gpu_name()),
    }


def _kernelbench_run(baseline: str, candidate: str | None, path: str, time_limit: float, should_cancel,
                     builds: VerifiedBuilds | None, env: dict[str, str] | None = None, inputs: dict | None = None,
                     on_phase=None, started: Started | None = None, protocol: Protocol = DICE_LSP):
    """One sandboxed run of a KernelBench request, in the candidate's own verified build
    folder when `builds` holds one (or in `started`, a sandbox already started in it)."""
    request = _kernelbench_request(baseline, candidate, path, time_limit, inputs, protocol)
    return _run_in_build_folder(request, candidate, builds, time_limit, should_cancel, env=env, on_phase=on_phase,
                                started=started)


def _run_in_build_folder(request: dict, document: str | None, builds: VerifiedBuilds | None, time_limit: float,
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


def _kernelbench_verdict(baseline: str, candidate: str | None, path: str, time_limit: float,
                         should_cancel, *, with_compile: bool, builds: VerifiedBuilds | None = None,
                         reference: Reference | None = None, on_phase=None, started: Started | None = None,
                         protocol: Protocol = DICE_LSP) -> Verdict:
    source = baseline if candidate is None else candidate
    diagnostics = python_check(source, path)
    if diagnostics:
        return Verdict.failed("compile_error", f"does not parse: line {diagnostics[0].line}: "
                                               f"{diagnostics[0].message}", diagnostics=diagnostics)
    flags = static_flags(candidate, baseline) if candidate is not None else []
    reference = reference or Reference()

    def measured(started: Started | None) -> tuple[SandboxOutcome, Verdict]:
        outcome = _kernelbench_run(baseline, candidate, path, time_limit, should_cancel, builds,
                                   inputs=reference.inputs, on_phase=on_phase, started=started, protocol=protocol)
        compiled, facts, reference_time = None, reference.facts, reference.ms
        if with_compile and outcome.status == "ok" and outcome.result.get("outcome") == "measured":
            compiled = COMPILED.get(baseline, lambda: torch_compile_baseline(baseline, path, time_limit,
                                                                             should_cancel, builds=builds))
            facts, reference_time = facts or compiled.facts, compiled.eager_ms
        verdict = from_outcome(outcome, flags=flags, facts=facts)
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


@dataclass(frozen=True)
class TorchCompileBaseline:
    """torch.compile(Model) timed against eager Model in a sandbox of its own (no candidate
    code in it): both medians, or why it could not be timed (it may be slow or fail); the
    records of the document's load_inline builds that process found or made."""

    compile_ms: float | None
    eager_ms: float | None
    why: str = ""
    builds: list | None = None
    facts: dict | None = None  # what Model alone says about the problem (profiler.verdict.reference_facts)
    # Seconds since it was measured, when it is a measurement of this process reused
    # (CompiledBaselines); 0 for one made for this verdict.
    age_s: float = 0.0


def _measured_again_if_unstable(verdict: Verdict, measure: Callable[[], Verdict]) -> Verdict:
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
               "seeds": _seeds(), "time_budget_s": _time_budget(time_limit), "cuda_arch": compute_capability()}
    outcome = _run_in_build_folder(request, baseline, builds, time_limit, should_cancel, on_phase=on_phase)
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


class CompiledBaselines:
    """torch.compile(Model) of a document, measured once and reused by this process for
    TTL_S: profiling the same document again (the language server's warm case) costs the
    candidate's own run only, not a second process compiling Model for ~10 s. Keyed by the
    whole document (that process loads all of it, ModelNew's load_inline included) and the
    GPU. Only timed measurements are kept (a failure is measured again); DICE_REUSE_BUILDS=0
    keeps nothing. What is reused is Model's eager and compiled times, the second baseline
    and the anchor the candidate's own baseline time is checked against; every check of the
    candidate's own run is made again, and the verdict says how old the reused times are."""

    TTL_S = 600.0
    MAX = 32

    def __init__(self) -> None:
        self._kept: OrderedDict[str, tuple[float, TorchCompileBaseline]] = OrderedDict()
        self._lock = threading.Lock()
        self._measuring: dict[str, threading.Lock] = {}  # a document's second request waits for the first's

    def get(self, document: str, measure: Callable[[], TorchCompileBaseline]) -> TorchCompileBaseline:
        if not reuse_builds():
            return measure()
        key = VerifiedBuilds.key(document, f"{gpu_name()}/{compute_capability()}")
        with self._lock:
            turn = self._measuring.setdefault(key, threading.Lock())
        with turn:
            with self._lock:
                measured, kept = self._kept.get(key, (0.0, None))
                age = time.monotonic() - measured
                if kept is not None and age < self.TTL_S:
                    self._kept.move_to_end(key)
                    return replace(kept, age_s=max(age, 0.1), builds=None)  # no build of this run
            compiled = measure()
            with self._lock:
                if compiled.compile_ms is not None:
                    self._kept[key] = (time.monotonic(), compiled)
                    self._kept.move_to_end(key)
                else:  # not kept: nor its turn (a request waiting on it measures again)
                    self._measuring.pop(key, None)
                while len(self._kept) > self.MAX:
                    dropped, _ = self._kept.popitem(last=False)
                    self._measuring.pop(dropped, None)
            return compiled


COMPILED = CompiledBaselines()


def half_the_cpus() -> int:
    """One per two CPUs this process may use (at least 1): the share for work that builds
    extensions, which compiles two files at once."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
    return max(1, usable // 2)


def build_jobs(count: int) -> int:
    """How many of `count` candidates to build at once: DICE_BUILD_JOBS, else half_the_cpus()."""
    configured = os.environ.get(BUILD_JOBS_ENV, "").strip()
    jobs = int(configured) if configured.isdigit() else half_the_cpus()
    return max(1, min(count, jobs))


class KernelBenchProblem:
    """Judging the candidates of one KernelBench problem, in steps a scheduler can place:
    `build` (CPU only, the GPU hidden) for each of `buildable`, then on the GPU `reference`
    once and `verdict` for each candidate. judge() runs them in that order; `dice bench`
    builds later problems' candidates while earlier ones are timed. Every step runs in a
    sandbox of its own; `on_phase` hears the phases of the GPU steps' runs (run_sandboxed).

    Building ahead (tens of seconds of CPU each, for torch's headers) decides nothing: a
    candidate that fails to build fails again, with its diagnostics, when it is judged. Each
    build runs like any candidate code, with no GPU visible (so nothing it does disturbs a
    timing), for the architecture judging will use, into the candidate's own build folder,
    where its judging run finds it. Candidates run side by side could reach each other's
    folders while they build: one whose source the static checker flags (files, the
    environment, the harness's memory, threads) is not built ahead but alone when judged."""

    def __init__(self, baseline: str, path: str, time_limit: float, should_cancel=None, on_phase=None,
                 protocol: Protocol = DICE_LSP):
        self.baseline, self.path, self.time_limit, self.protocol = baseline, path, time_limit, protocol
        self.should_cancel, self.on_phase = should_cancel, on_phase
        # The process's store: a candidate judged again finds its build, where sandboxes are
        # isolated in a later process too (DICE_REUSE_BUILDS=0: a store for this problem
        # alone, removed with it).
        self._own_builds = not reuse_builds()
        self.builds = VerifiedBuilds() if self._own_builds else process_builds()
        self.reference_run = Reference()
        # Sandboxes started ahead for a candidate's verdict, each holding its build folder.
        self._ready: dict[str, tuple[ExitStack, Started]] = {}

    def buildable(self, candidates: list[str | None]) -> list[str]:
        """The candidates worth building ahead (each once); none without a GPU to build for."""
        if gpu_name() is None or compute_capability() is None:
            return []
        arch = compute_capability()
        return [c for c in dict.fromkeys(candidates)
                if c is not None and not self.builds.known(VerifiedBuilds.key(c, arch))  # judged before: built
                and not python_check(c, self.path) and not static_flags(c, self.baseline)]

    def build(self, candidate: str) -> SandboxOutcome:
        """The sandboxed run that built it (its outcome decides nothing: see above)."""
        return _kernelbench_run(self.baseline, candidate, self.path, self.time_limit, self.should_cancel,
                                self.builds, env={"CUDA_VISIBLE_DEVICES": ""}, protocol=self.protocol)

    def reference(self, candidates: list[str | None]) -> Reference:
        """Model alone, run once in a process that runs no candidate code, on the input sets
        every candidate's run will use: its time and samples of its outputs are what each
        candidate's process must agree with about the baseline (profiler.verdict). Not run
        when no candidate would run (none, or none that parses: their verdicts need none)."""
        runs = [c for c in candidates if c is not None and not python_check(c, self.path)]
        if gpu_name() is None or not runs or python_check(self.baseline, self.path):
            return self.reference_run
        inputs = {"seeds": _seeds(self.protocol), "sample_seed": secrets.randbits(31)}
        outcome = _kernelbench_run(self.baseline, None, self.path, self.time_limit, self.should_cancel, None,
                                   inputs=inputs, on_phase=self.on_phase, protocol=self.protocol)
        self.reference_run = Reference(reference_ms(outcome), reference_samples(outcome), inputs,
                                       reference_facts(outcome))
        return self.reference_run

    def prestart(self, candidate: str | None) -> None:
        """Start now the sandbox `candidate`'s verdict will run in (its build folder checked
        out and held until then), so that its start-up (interpreter, torch's import: about
        3 s) overlaps the GPU step before it. Only where sandboxes are pre-started at all and
        isolated (profiler.sandbox.pool.warm_kind's reason: the candidate run meanwhile must
        not reach it, nor its build folder), for a candidate that parses, whose folder no
        other run holds. Best effort: otherwise its verdict starts its sandbox at its turn."""
        setup = pool.warm_kind("kernelbench")  # the pool's rule: None without namespaces
        if candidate is None or candidate in self._ready or not pool.enabled() or setup is None \
                or python_check(candidate, self.path):
            return
        stack = ExitStack()
        try:
            folder = stack.enter_context(self.builds.folder(VerifiedBuilds.key(candidate, compute_capability()),
                                                            wait=False))
            if folder is None:
                stack.close()
                return
            started = start_harness(self.time_limit, extensions=folder, warm=setup)
        except Exception:  # noqa: BLE001 - starting ahead decides nothing; the verdict starts its own
            stack.close()
            return
        self._ready[candidate] = (stack, started)

    def verdict(self, candidate: str | None) -> Verdict:
        # torch.compile costs a process and tens of seconds: profile() does it, judge() not.
        stack, started = self._ready.pop(candidate, (None, None))

        def measure(started: Started | None = None) -> Verdict:
            return _kernelbench_verdict(self.baseline, candidate, self.path, self.time_limit, self.should_cancel,
                                        with_compile=False, builds=self.builds, reference=self.reference_run,
                                        on_phase=self.on_phase, started=started, protocol=self.protocol)

        try:
            verdict = measure(started)
        finally:
            if started is not None:
                started.discard()  # ended by its run; killed if the verdict did not need it
                stack.close()  # the build folder back (its digest recorded): a second measurement needs it
        return _measured_again_if_unstable(verdict, measure)

    def close(self) -> None:
        for stack, started in self._ready.values():
            started.discard()
            stack.close()
        self._ready.clear()
        if self._own_builds:
            self.builds.close()


def _kernelbench_verdicts(baseline: str, candidates: list[str | None], path: str, time_limit: float,
                          on_progress: ProgressFn | None, should_cancel, protocol: Protocol = DICE_LSP) -> list[Verdict]:
    """Builds of several candidates at once first (judged one after the other, 8 candidates
    would wait minutes for builds the CPUs can do side by side), then each judged."""
    problem = KernelBenchProblem(baseline, path, time_limit, should_cancel, protocol=protocol)
    try:
        todo = problem.buildable(candidates)
        jobs = build_jobs(len(todo))
        if jobs >= 2:  # one at a time is what judging does anyway
            if on_progress is not None:
                on_progress(0, len(candidates))
            with ThreadPoolExecutor(jobs, thread_name_prefix="dice-build-ahead") as executor:
                for _ in executor.map(problem.build, todo):  # re-raises Cancelled; the others see should_cancel too
                    pass
        # Each candidate's sandbox starts while the GPU step before it runs (where that is safe).
        problem.prestart(candidates[0] if candidates else None)
        problem.reference(candidates)
        upcoming = iter(candidates[1:])

        def judge_one(candidate: str | None) -> Verdict:
            problem.prestart(next(upcoming, None))
            return problem.verdict(candidate)

        return _each(candidates, on_progress, should_cancel, judge_one)
    finally:
        problem.close()


def _keep_a_spare(document: str, path: str, time_limit: float, builds: VerifiedBuilds | None) -> None:
    """After a KernelBench profile on a GPU: a sandbox started for the document's next run
    (the language server's warm profile then skips a sandbox's ~3 s start-up)."""
    if builds is None or gpu_name() is None or compute_capability() is None or python_check(document, path):
        return
    key = VerifiedBuilds.key(document, compute_capability())
    DOCUMENT_SPARE.keep(key, builds.root / key, time_limit)


# ------------------------------------------------------------------ public

def judge(baseline: str, candidates: list[str], path: str, *, kernel: str | None = None,
          time_limit: float = 60.0, on_progress: ProgressFn | None = None,
          should_cancel: Callable[[], bool] | None = None, protocol: Protocol = DICE_LSP) -> list[Verdict]:
    """A verdict for each candidate document against the baseline document, each candidate
    in a fresh sandboxed process. on_progress(index, total) is called before each
    (1-based); should_cancel() is polled and raises Cancelled when it turns true. `protocol`
    (profiler.protocol) applies to KernelBench documents; a .cu document is judged by ours."""
    if is_kernelbench(path):
        return _kernelbench_verdicts(baseline, list(candidates), path, time_limit, on_progress, should_cancel,
                                     protocol)
    return _cuda_verdicts(baseline, list(candidates), path, kernel, time_limit, on_progress, should_cancel)


def profile(source: str, path: str, *, kernel: str | None = None, time_limit: float = 60.0,
            should_cancel: Callable[[], bool] | None = None, keep_warm: bool = True) -> Verdict:
    """Compile, check and time what the document holds: a .cu kernel alone (outputs fully
    written and repeatable), or a KernelBench ModelNew against its Model (Model alone when
    there is no ModelNew), with torch.compile(Model) as a second baseline. keep_warm: after a
    KernelBench profile, keep a sandbox started for the document's next run (a process that
    profiles once and exits, as `dice profile` does, passes False)."""
    if is_kernelbench(path):
        candidate = source if defines_model_new(source) else None
        builds = process_builds() if reuse_builds() else None

        def measure() -> Verdict:
            return _kernelbench_verdict(source, candidate, path, time_limit, should_cancel, with_compile=True,
                                        builds=builds)

        verdict = _measured_again_if_unstable(measure(), measure)
        if keep_warm:
            _keep_a_spare(source, path, time_limit, builds)
        return verdict
    (verdict,) = _cuda_verdicts(source, [None], path, kernel, time_limit, None, should_cancel)
    return verdict
