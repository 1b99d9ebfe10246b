"""One request run in a harness process and watched to its end by this process's clock: the
time limit, the build allowance (BUILD_LIMIT_S) for build phases and for compilers seen under
the sandbox, the wait for the GPU's turn and grants held for warm-ups (profiler.sandbox.quiet)
left out of both; then the result accepted or not
(run_started). run_sandboxed() takes a pre-started process from POOL when it can."""

from __future__ import annotations

import atexit
import secrets
import threading
import time
from pathlib import Path
from typing import Callable

from profiler.machine.paths import remove_tree
from profiler.sandbox.channel import READY, accept_result, control_message
from profiler.sandbox.gpu_turn import GpuTurn
from profiler.sandbox.outcome import Cancelled, SandboxOutcome
from profiler.sandbox.pool import SandboxPool
from profiler.sandbox.processes import KEEPER_GRACE_S, compiler_running, exited, stop, sweep
from profiler.sandbox.readers import POLL_S, tell_phases
from profiler.sandbox.start import BUILD_LIMIT_S, Started, start_harness

SCAN_S = 0.5  # how often /proc is read for compilers once candidate code runs (a full read of /proc)
STDERR_TAIL_CHARS = 2000
# Phases (reported before any candidate code runs) that count against the build allowance.
BUILD_PHASES = ("start-up", "warm-up", READY, "compile", "compile baseline", "torch.compile")


def run_sandboxed(request: dict, time_limit: float, *,
                  should_cancel: Callable[[], bool] | None = None,
                  env: dict[str, str] | None = None,
                  extensions: Path | None = None,
                  on_phase: Callable[[str], None] | None = None,
                  turn: threading.Event | None = None) -> SandboxOutcome:
    """Run `request` through profiler.run.harness in a new process; raises Cancelled when
    should_cancel() turns true (the process is killed first). `env` adds allowlisted
    variables (CUDA_VISIBLE_DEVICES). `extensions` is the load_inline build folder to use
    (default: a fresh one inside the sandbox). A .cu request takes a pre-started process
    from the pool (POOL, profiler.sandbox.pool) when it has one: same environment, limits and
    fresh folder, started for this one request only. on_phase(name) hears each phase the
    harness reports, then CANDIDATE_CODE once candidate code runs (a scheduler's hint, e.g. to
    keep other work off the machine from then on; it decides nothing about the verdict).
    `turn`: a .cu run builds its kernels, then waits until `turn` is set before it uses the
    GPU (the judge sets it when the run before has ended); that wait counts against neither
    limit. A run that sees the GPU also holds the GPU's turn (profiler.sandbox.gpu_turn):
    from its hand-over, or from its `turn` where it has one, to its end."""
    started = None
    if env is None and extensions is None:
        started = POOL.claim(request["kind"], time_limit)
    if started is None:
        started = start_harness(time_limit, env, extensions)
    try:
        return run_started(started, request, time_limit, should_cancel, on_phase, turn)
    finally:
        remove_tree(started.folder)


def run_started(started: Started, request: dict, time_limit: float, should_cancel,
                on_phase=None, turn: threading.Event | None = None) -> SandboxOutcome:
    """Hand `request` to the harness `started` (its only one) and watch it to its end."""
    nonce = secrets.token_hex(32)
    # The harness kills itself past this, should this process die without killing it.
    request = {**request, "hard_deadline_s": time_limit + BUILD_LIMIT_S + 60.0}
    keeper, phase_reader, result_reader = started.keeper, started.phase_reader, started.result_reader
    gpu = GpuTurn(started.gpu) if started.gpu is not None else None
    try:
        if gpu is not None and turn is None and not gpu.acquire(should_cancel or (lambda: False)):
            raise Cancelled("cancelled")
        waited_for_gpu = gpu.waited_s if gpu is not None else 0.0  # before the hand-over
        claimed = time.monotonic()
        # The clock of the limits starts with the process, or at its claim for a pre-started one
        # (what it did before, it did before any request existed); the wait for the GPU is left out.
        origin = claimed if phase_reader.warm else started.spawned + waited_for_gpu
        phase_reader.hand_over(control_message(request, nonce), turn, gpu)
        phases = phase_reader.phases
        timed_out, build_s, last, last_scan, compiling = False, 0.0, origin, 0.0, False
        turn_s = 0.0  # waited for its turn (by the reader's own clock): neither building nor running
        heard = 0  # phases passed on to on_phase (one more for CANDIDATE_CODE)
        while not exited(keeper.pid):
            if should_cancel is not None and should_cancel():
                raise Cancelled("cancelled")
            if on_phase is not None:
                heard = tell_phases(on_phase, phases, phase_reader.candidate_next, heard)
            now = time.monotonic()
            if phase_reader.waiting_since is not None:  # for its turn: neither building nor running
                turn_s += now - last
                building = False
            elif phase_reader.is_alive():  # no candidate code has run yet: phases are the harness's
                building = bool(phases) and phases[-1] in BUILD_PHASES or not phases
            else:
                if now - last_scan >= SCAN_S:
                    compiling, last_scan = compiler_running(keeper.pid), now
                building = compiling
            if building:
                build_s += now - last
            last = now
            held = started.clock.held() if started.clock is not None else 0.0  # grants held for warm-ups
            if build_s > BUILD_LIMIT_S or now - origin - build_s - turn_s - held > time_limit:
                timed_out = True
                break
            exited(keeper.pid, POLL_S)  # returns as the process ends, not at the next tick (a tick is 2-5% of a warm .cu verdict)
    finally:
        try:
            # Whatever happened, nothing the candidate started outlives this call.
            stop(keeper)
            escaped = sweep(started.marker)
            phase_reader.abandon()
        finally:
            if gpu is not None:
                gpu.release()
    seconds = time.monotonic() - origin
    phase_reader.join(KEEPER_GRACE_S)
    result_reader.join(KEEPER_GRACE_S)
    stderr = (started.folder / "stderr.log").read_bytes().decode(errors="replace")[-STDERR_TAIL_CHARS:]
    phase = phases[-1] if phases else ""
    waited = {"started_s_before": claimed - started.spawned - waited_for_gpu, "run_s": seconds}
    if phase_reader.turn_waits:
        waited["turn_wait_s"] = phase_reader.turn_waits
    if started.clock is not None and started.clock.held() >= 0.01:
        waited["warm_up_hold_s"] = round(started.clock.held(), 3)  # its grants, held (profiler.sandbox.quiet)
    if gpu is not None and gpu.waited_s >= 0.01:
        waited["gpu_wait_s"] = round(gpu.waited_s, 3)
    isolation_ = "namespaces" if started.isolated else "none"
    if timed_out:
        return SandboxOutcome("timeout", None, None, stderr, seconds, phase, escaped=escaped, process=waited,
                              isolation=isolation_)
    measurement, problem = accept_result(bytes(result_reader.data), nonce)
    status = "ok" if measurement is not None and keeper.returncode == 0 else "crash"
    clock_log = []
    if started.clock is not None:
        started.clock.join(KEEPER_GRACE_S)
        clock_log = started.clock.entries()
    return SandboxOutcome(status, measurement if status == "ok" else None, keeper.returncode, stderr, seconds,
                          phase, problem, escaped, waited, isolation_, clock_log)


# The pre-started sandboxes run_sandboxed() claims from (profiler.sandbox.pool); they end
# with this process.
POOL = SandboxPool(start_harness)
atexit.register(POOL.shutdown)
