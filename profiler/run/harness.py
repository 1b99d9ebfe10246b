"""The harness: `python -m profiler.run.harness CONTROL_FD PHASE_FD RESULT_FD [ASK_FD GRANT_FD] [--warm=KIND]`, started
only by profiler.sandbox (behind its keeper), in a fresh process per request. With --warm
(profiler.sandbox.pool) it sets up for a request of KIND before it reads its request.

It reads the request and the run's nonce from the control pipe, builds, verifies and times,
and writes a *measurement* (raw numbers: timing samples, which input set failed and how,
build records; see profiler.verdict.decision) to the result pipe. It never decides a verdict: the
judge's process does that, from the measurement and its own checks. ASK_FD and GRANT_FD are
the judge's clock (profiler.sandbox.clock), which grants a timing's batches of pairs. CUDA errors that poison
the context end the process at once after reporting where they happened.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import signal
import sys
import threading
import traceback

from profiler.sandbox import clock
from profiler.sandbox.channel import READY, Phase, read_control, write_result

# Phases in which a failure means the candidate did not build.
BUILDING = ("compile", "load candidate", "build extension")


def fault_measurement(exc: BaseException) -> dict:
    """What went wrong, as raw facts (profiler.verdict.decision decides crash or error)."""
    missing = exc.name if isinstance(exc, ModuleNotFoundError) and exc.name in ("cupy", "torch") else None
    return {"outcome": "fault", "phase": Phase.current, "building": Phase.current in BUILDING,
            "error": f"{type(exc).__name__}: {exc}".strip()[:4000], "missing_module": missing,
            "traceback": traceback.format_exc()[-3000:]}


def run(request: dict) -> dict:
    kind = request["kind"]
    if kind == "cuda":
        from profiler.run.cuda import run_cuda

        return run_cuda(request)
    if kind == "kernelbench":
        from profiler.run.kernelbench import run_kernelbench

        return run_kernelbench(request)
    if kind == "kernelbench_audit":
        from profiler.run.kernelbench import run_audit

        return run_audit(request)
    if kind == "torch_compile":
        from profiler.run.kernelbench import run_torch_compile

        return run_torch_compile(request)
    raise ValueError(f"unknown request kind {kind!r}")


def die_with_parent(deadline_s: float) -> None:
    """Never outlive the judge: die when the parent dies (Linux PR_SET_PDEATHSIG), and kill
    the whole process group (children included) at a hard deadline, in case the parent is
    alive but stuck or gone in a way the kernel does not report. The deadline starts again
    when a .cu run gets its turn on the GPU (Phase.wait_turn): the judge's limits leave the
    wait out, so this one does too."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the deadline still holds
        pass
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)
    watchdogs: list[threading.Timer] = []

    def arm() -> None:
        if watchdogs:
            watchdogs.pop().cancel()
        watchdog = threading.Timer(deadline_s, os.killpg, args=(os.getpgrp(), signal.SIGKILL))
        watchdog.daemon = True
        watchdog.start()
        watchdogs.append(watchdog)

    arm()
    Phase.after_turn = arm


def warm_up(kind: str) -> None:
    """Before the request of a pre-started harness (profiler.sandbox.pool): import and set up
    what `kind` needs, with the harness's own inputs only. Best effort: what fails here fails
    again, and is reported, when the request runs."""
    Phase.set("warm-up")
    try:
        if kind == "cuda":
            from profiler.run.cuda import warm_up as warm_cuda

            with Phase.quiet():
                warm_cuda()
        elif kind == "torch":  # a KernelBench request: torch and the runner, imported
            # No CUDA context: spares are started while another run is timed, and a context
            # made then stalls that run's device (on the H200, an honest candidate's
            # synchronize took 7 ms for 0.13 ms of work, and it was flagged as escaping its
            # timer). Its request makes the context, in about 0.3 s.
            import torch  # noqa: F401

            import profiler.run.kernelbench  # noqa: F401
    except Exception:
        traceback.print_exc()
    Phase.set(READY)


def main(argv: list[str]) -> int:
    # A fatal signal (a segfault in a library the candidate drove) leaves the Python stack of
    # every thread in stderr.log, of which the judge quotes the innermost frame.
    faulthandler.enable(all_threads=True)
    control_fd, phase_fd, result_fd = map(int, argv[:3])
    clock_fds = [int(a) for a in argv[3:5] if a.isdigit()]
    warm = next((a.split("=", 1)[1] for a in argv[3:] if a.startswith("--warm=")), None)
    for fd in (control_fd, phase_fd, result_fd, *clock_fds):
        os.set_inheritable(fd, False)  # no process this one starts holds the judge's pipes
    if len(clock_fds) == 2:
        clock.CURRENT.append(clock.HarnessClock(*clock_fds))
    Phase.open(phase_fd, control_fd)
    Phase.set("start-up")
    if warm is not None:
        warm_up(warm)
    request, nonce = read_control(control_fd)
    die_with_parent(float(request.get("hard_deadline_s", 3600)))
    try:
        measurement = run(request)
    except BaseException as exc:  # a measurement, whatever went wrong: the judge must hear of it
        measurement = fault_measurement(exc)
    measurement["phase_seconds"] = Phase.seconds()
    write_result(result_fd, nonce, measurement)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: after a GPU fault, destroying the context can hang or crash.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
