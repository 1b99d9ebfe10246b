"""Judging the candidates of a .cu document: the baseline's kernel and spec resolved once,
nvcc checks of every candidate side by side, and each candidate's sandboxed run in its turn
on the GPU, the next ones building their kernels meanwhile."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from profiler.checks.compile import CompilerMissing, check_arch, nvcc_check
from profiler.judging.caches import known_peak_gbs, remember_peak
from profiler.judging.common import ProgressFn, check_cancel, each, seeds, time_budget
from profiler.machine.gpu import gpu_name
from profiler.sandbox import POOL, Cancelled, pool, run_sandboxed
from profiler.source.cuda_source import Kernel, find_kernel
from profiler.source.dtypes import dtype_name
from profiler.source.spec import Spec, SpecError, parse_spec
from profiler.verdict.decision import from_outcome
from profiler.verdict.types import Diagnostic, Verdict

NO_SPEC_HINT = ("no benchmark spec: add `// dice:` lines above the kernel "
                "(the \"Add benchmark spec\" code action writes a template)")


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
            "seeds": seeds(),
            "time_budget_s": time_budget(time_limit),
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
        remember_peak(verdict)
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
            check_cancel(should_cancel)
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


def cuda_verdicts(baseline: str, candidates: list[str | None], path: str, kernel: str | None,
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
        return each(candidates, on_progress, should_cancel,
                     lambda candidate: job.judge(candidate, time_limit, should_cancel))
    executor = ThreadPoolExecutor(max(1, min(len(candidates), os.cpu_count() or 1)),
                                  thread_name_prefix="dice-nvcc-ahead")
    try:
        checks = _checks_ahead(job, candidates, time_limit, executor)
        return _pipelined(job, candidates, checks, time_limit, on_progress, should_cancel)
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
