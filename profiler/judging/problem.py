"""One KernelBench problem's judging steps, for a schedule to place
(profiler.judging.schedule): builds ahead on the CPU, Model alone once, each candidate's
verdict, each in a sandbox of its own."""

from __future__ import annotations

import os
import secrets
from contextlib import ExitStack

from profiler.judging.common import seeds
from profiler.judging.kernelbench import (
    Checks,
    kernelbench_run,
    kernelbench_verdict,
    measured_again_if_unstable,
)
from profiler.judging.protocol import DICE_LSP, Protocol
from profiler.machine import settings
from profiler.machine.gpu import compute_capability, gpu_name
from profiler.sandbox import SandboxOutcome, Started, pool, start_harness
from profiler.sandbox.builds import VerifiedBuilds, process_builds, reuse_builds
from profiler.verdict.decision import Reference, reference_facts, reference_ms, reference_samples
from profiler.verdict.types import Verdict

# How many KernelBench candidates are built at once (default: one per two CPUs, since a
# load_inline build compiles two files).
BUILD_JOBS_ENV = settings.BUILD_JOBS


def half_the_cpus() -> int:
    """One per two CPUs this process may use (at least 1): the share for work that builds
    extensions, which compiles two files at once."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
    return max(1, usable // 2)


def build_jobs(count: int) -> int:
    """How many of `count` candidates to build at once: DICE_BUILD_JOBS, else half_the_cpus()."""
    configured = settings.current().build_jobs
    return max(1, min(count, half_the_cpus() if configured is None else configured))


class KernelBenchProblem:
    """Judging the candidates of one KernelBench problem, in steps a scheduler can place:
    `build` (CPU only, the GPU hidden) for each of `buildable`, then on the GPU `reference`
    once and `verdict` for each candidate (profiler.judging.schedule places them, for the
    editor's judge() and for `dice bench`). Every step runs in a sandbox of its own;
    `on_phase` hears the phases of the GPU steps' runs (run_sandboxed). python_check and
    static_flags run once per document, whichever steps ask (`checks`).

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
        self.checks = Checks(baseline, path)  # python_check and static_flags, once per document
        # Sandboxes started ahead for a candidate's verdict, each holding its build folder.
        self._ready: dict[str, tuple[ExitStack, Started]] = {}

    def buildable(self, candidates: list[str | None]) -> list[str]:
        """The candidates worth building ahead (each once); none without a GPU to build for."""
        if gpu_name() is None or compute_capability() is None:
            return []
        arch = compute_capability()
        return [c for c in dict.fromkeys(candidates)
                if c is not None and not self.builds.known(VerifiedBuilds.key(c, arch))  # judged before: built
                and not self.checks.parse_errors(c) and not self.checks.flags(c)]

    def build(self, candidate: str) -> SandboxOutcome:
        """The sandboxed run that built it (its outcome decides nothing: see above)."""
        return kernelbench_run(self.baseline, candidate, self.path, self.time_limit, self.should_cancel,
                               self.builds, env={"CUDA_VISIBLE_DEVICES": ""}, protocol=self.protocol)

    def reference(self, candidates: list[str | None]) -> Reference:
        """Model alone, run once in a process that runs no candidate code, on the input sets
        every candidate's run will use: its time and samples of its outputs are what each
        candidate's process must agree with about the baseline (profiler.verdict.decision). Not run
        when no candidate would run (none, or none that parses: their verdicts need none)."""
        if gpu_name() is None or self.checks.parse_errors(self.baseline) \
                or not any(c is not None and not self.checks.parse_errors(c) for c in candidates):
            return self.reference_run
        inputs = {"seeds": seeds(self.protocol), "sample_seed": secrets.randbits(31)}
        outcome = kernelbench_run(self.baseline, None, self.path, self.time_limit, self.should_cancel, None,
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
                or self.checks.parse_errors(candidate):
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
            return kernelbench_verdict(self.baseline, candidate, self.path, self.time_limit, self.should_cancel,
                                       with_compile=False, builds=self.builds, reference=self.reference_run,
                                       on_phase=self.on_phase, started=started, protocol=self.protocol,
                                       checks=self.checks)

        try:
            verdict = measure(started)
        finally:
            if started is not None:
                started.discard()  # ended by its run; killed if the verdict did not need it
                stack.close()  # the build folder back (its digest recorded): a second measurement needs it
        return measured_again_if_unstable(verdict, measure)

    def close(self) -> None:
        for stack, started in self._ready.values():
            started.discard()
            stack.close()
        self._ready.clear()
        if self._own_builds:
            self.builds.close()
