"""Run one request in a fresh harness process (`python -m profiler.run.harness`), behind a keeper.

The boundary, as the judge's side enforces it:
- the process gets an allowlisted environment (profiler.sandbox.environment), HOME and its
  caches in a temporary folder of its own, resource limits, and a keeper process
  (profiler.sandbox.keeper) that kills everything it started, setsid() or not;
- where the system allows unprivileged namespaces (DICE_SANDBOX_ISOLATION, see isolation()),
  the harness runs in PID and mount namespaces of its own: it sees and can signal no process
  outside the sandbox (the judge, the editor, the language server, other sandboxes), and every
  file system is read-only to it but its own folder and build folder. Each verdict records
  which (`extra["isolation"]`: "namespaces" or "none");
- the request goes in and the measurement comes back over pipes with a per-run nonce
  (profiler.sandbox.channel); no file the process can write is read back;
- the time limit is kept here, by this process's clock. Building is not running: a build
  phase the harness reports before any candidate code runs (interpreter start-up, NVRTC,
  torch.compile of the baseline) counts against a build allowance of its own
  (BUILD_LIMIT_S), and so does, once candidate code runs, time in which a compiler process
  (ninja, nvcc, the host compiler) runs under the sandbox, as seen in /proc. Nothing the
  candidate says can extend either limit.

A hang becomes "timeout", a death or a missing/forged result "crash" with the tail of the
process's stderr; the caller's process is never at risk.
"""

from __future__ import annotations

import atexit
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from profiler.machine.paths import remove_tree
from profiler.sandbox.clock import JudgeClock
from profiler.sandbox.channel import (CANDIDATE_NEXT, GO, MAX_RESULT_BYTES, READY, TURN_NEXT, accept_result,
                                      control_message)
from profiler.sandbox.environment import sandbox_environment
from profiler.sandbox.gpu_turn import GpuTurn, device_key
from profiler.sandbox.isolation import ISOLATION_ENV, IsolationUnavailable, isolation, isolation_problem  # noqa: F401
from profiler.sandbox import keeper as _keeper
from profiler.sandbox.keeper import descendants
from profiler.sandbox.pool import SandboxPool

POLL_S = 0.05
SCAN_S = 0.5  # how often /proc is read for compilers once candidate code runs (a full read of /proc)
BUILD_LIMIT_S = 600.0
STDERR_TAIL_CHARS = 2000
KEEPER_GRACE_S = 5.0
# Phases (reported before any candidate code runs) that count against the build allowance.
BUILD_PHASES = ("start-up", "warm-up", READY, "compile", "compile baseline", "torch.compile")
# Process names (/proc/PID/comm, at most 15 characters) of the tools a load_inline build runs.
BUILD_TOOLS = frozenset({"ninja", "nvcc", "cicc", "ptxas", "cudafe++", "fatbinary", "nvlink", "cc1plus", "cc1",
                         "c++", "g++", "gcc", "cc", "ld", "collect2", "as", "x86_64-linux-gn", "clang", "clang++"})
# The variable that marks every process of one sandbox (the second net, see _sweep).
MARKER = "DICE_SANDBOX_MARKER"
# What on_phase hears once the harness has closed its phase pipe: candidate code runs (and
# everything after it: checks, timing), and no more phases come.
CANDIDATE_CODE = "candidate code"


class Cancelled(Exception):
    """should_cancel() said stop; the sandbox process was killed."""


@dataclass
class SandboxOutcome:
    status: str  # "ok" (a genuine result came back) | "timeout" | "crash"
    result: dict | None  # the measurement
    returncode: int | None
    stderr_tail: str
    seconds: float  # wall clock of the whole process, by this process's clock
    phase: str = ""  # what the harness said it was doing last
    problem: str = ""  # why a result was not accepted
    escaped: int = 0  # processes found alive after the keeper was done (and killed)
    # By this process's clock: how long the process was started before its request
    # (started_s_before: 0 for one started for it, more for a pre-started one), and run_s.
    process: dict = field(default_factory=dict)
    isolation: str = "none"  # "namespaces": the harness ran in PID and mount namespaces of its own
    # The judge's clock over the run's timed batches (profiler.sandbox.clock.JudgeClock.log):
    # the batches it granted and closed, by this process's clock.
    clock: list[dict] = field(default_factory=list)

    def why(self) -> str:
        """One line on how the process ended, for a verdict's message."""
        if self.status == "timeout":
            return f"killed after {self.seconds:.0f} s, during {self.phase or 'start-up'} (over its time limit)"
        rc = self.returncode
        if rc is not None and rc < 0:
            how = f"the sandbox's keeper was killed by {signal.Signals(-rc).name}"
        elif rc is not None and rc > 128 and rc - 128 in signal.valid_signals():
            how = f"killed by {signal.Signals(rc - 128).name}"
        elif self.problem and self.problem != "no result":
            how = f"exited with code {rc} and {self.problem}"
        else:
            how = f"exited with code {rc} and no result"
        return how + (f": {where[:300]}" if (where := self.last_words()) else "")

    def last_words(self) -> str:
        """The line of stderr that says most: after a fatal signal, faulthandler's innermost
        frame of the thread that faulted (profiler.run.harness enables it); else the last line."""
        lines = [line.strip() for line in self.stderr_tail.strip().splitlines() if line.strip()]
        if any(line.startswith("Fatal Python error") for line in lines):
            for i, line in enumerate(lines[:-1]):  # faulthandler's "Current thread" is the one that faulted
                if line.startswith("Current thread") and lines[i + 1].startswith("File "):
                    return f"{lines[0]}; in {lines[i + 1]}"
            return lines[0]
        return lines[-1] if lines else ""


class _ResultReader(threading.Thread):
    """Reads the result pipe to its end (the judge must drain it while the harness writes)."""

    def __init__(self, fd: int):
        super().__init__(daemon=True)
        self.fd, self.data = fd, bytearray()

    def run(self) -> None:
        with os.fdopen(self.fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                self.data += chunk
                if len(self.data) > MAX_RESULT_BYTES:
                    return  # rejected as too large; the rest is not read


class _PhaseReader(threading.Thread):
    """Reads the harness's phases until it says candidate code comes next, then closes the
    phase pipe and only then lets the harness go on (one byte on the control pipe). So no
    end of the phase pipe is left anywhere (not even this process's, which /proc/PID/fd
    would let a process of the same user reopen for writing) once candidate code runs.

    The request is written once hand_over() gives it: at once for a harness started for
    one request, at its claim for a pre-started one, which reports READY first (then
    `ready` is set) and waits for it.

    A .cu harness asks for its turn on the GPU (TURN_NEXT) once its kernels are built: GO is
    written when `turn` (hand_over's) is set and then the GPU's turn (`gpu`, gpu_turn) is
    taken, at once without either. Meanwhile `waiting_since` says since when it waits (this
    thread's own clock, not anything the harness says), and `turn_waits` adds up how long it
    waited. Only a run handed a turn ever waits here, and only once: code that writes
    TURN_NEXT to a phase pipe still open (a KernelBench document's torch.compile run loads the
    document) gains no time outside its limits, and a run that holds the GPU's turn already
    finds it taken by itself."""

    def __init__(self, fd: int, control: int, warm: bool):
        super().__init__(daemon=True)
        self.fd, self.control, self.warm = fd, control, warm
        self.phases: list[str] = []
        self.candidate_next = False
        self.ready = threading.Event()
        self.waiting_since: float | None = None
        self.turn_waits = 0.0
        self._request: bytes | None = None
        self._turn: threading.Event | None = None
        self._gpu: GpuTurn | None = None
        self._handed = threading.Event()
        self._abandoned = threading.Event()
        self._turned = False

    def hand_over(self, request: bytes, turn: threading.Event | None = None, gpu: GpuTurn | None = None) -> None:
        self._request, self._turn, self._gpu = request, turn, gpu
        self._handed.set()

    def abandon(self) -> None:
        """The run is over (killed or ended): stop waiting for a turn or a request."""
        self._abandoned.set()
        self._handed.set()

    def _wait_turn(self) -> None:
        if self._turn is None:  # no turn to wait for: nothing is excluded from the limits
            os.write(self.control, GO)
            return
        self.waiting_since = time.monotonic()
        try:
            while not self._turn.wait(POLL_S):
                if self._abandoned.is_set():
                    return
            if self._gpu is not None and not self._gpu.acquire(self._abandoned.is_set):
                return
        finally:
            self.turn_waits += time.monotonic() - self.waiting_since
            self.waiting_since = None
        os.write(self.control, GO)

    def _write_request(self) -> None:
        self._handed.wait()
        if self._request is None:
            return
        written = 0
        while written < len(self._request):
            written += os.write(self.control, self._request[written:])

    def run(self) -> None:
        try:
            with os.fdopen(self.fd, "rb", buffering=0) as pipe:
                if not self.warm:
                    self._write_request()
                for line in pipe:
                    if line.rstrip(b"\n") == CANDIDATE_NEXT:
                        self.candidate_next = True
                        break
                    if line.rstrip(b"\n") == TURN_NEXT:
                        if not self._turned:  # once a run: the genuine harness asks once
                            self._turned = True
                            self._wait_turn()
                        continue
                    self.phases.append(line.rstrip(b"\n").decode(errors="replace"))
                    if self.warm and self.phases[-1] == READY and not self.ready.is_set():
                        self.ready.set()
                        self._write_request()
                else:
                    return  # the harness ended without running candidate code
            os.write(self.control, GO)
        except OSError:
            pass  # the harness is gone; its exit says why
        finally:
            self.ready.set()  # nothing more to wait for
            os.close(self.control)


def _compiling(root: int) -> bool:
    for pid in descendants(root):
        try:
            with open(f"/proc/{pid}/comm", "rb") as comm:
                if comm.read().strip().decode(errors="replace") in BUILD_TOOLS:
                    return True
        except OSError:
            continue
    return False


def _sweep(marker: str) -> int:
    """Kill every process of this user whose environment carries the sandbox's marker: the
    second net, for a candidate that killed its keeper before escaping. Returns how many."""
    needle = f"{MARKER}={marker}".encode()
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if needle not in environ.read().split(b"\0"):
                    continue
            os.kill(int(entry), signal.SIGKILL)
            killed += 1
        except OSError:
            continue
    return killed


def _tell_phases(on_phase: Callable[[str], None], phases: list[str], candidate_next: bool, heard: int) -> int:
    """Pass the phases reported since the last call to on_phase; returns how many were."""
    known = list(phases)  # the reader thread appends meanwhile
    for name in known[heard:]:
        on_phase(name)
    heard = max(heard, len(known))
    if candidate_next and heard == len(known):
        on_phase(CANDIDATE_CODE)
        heard += 1
    return heard


def _exited(pid: int, timeout: float = 0.0) -> bool:
    """Whether our child `pid` has ended, waiting up to `timeout` seconds for it, without
    reaping it: an ended keeper stays a zombie, so its pid (its process group's id) cannot be
    another process's until _stop has killed the group and reaped it."""
    deadline = time.monotonic() + timeout
    if timeout > 0:
        try:
            pidfd = os.pidfd_open(pid)  # readable once the process has ended
        except (OSError, AttributeError):  # reaped already, or no pidfd here: polled below
            pidfd = None
        if pidfd is not None:
            try:
                select.select([pidfd], [], [], timeout)
            finally:
                os.close(pidfd)
    while True:
        try:
            ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:  # reaped already
            return True
        if ended or time.monotonic() >= deadline:
            return ended
        time.sleep(0.005)


def _stop(keeper: subprocess.Popen) -> None:
    """Have the keeper kill everything below it; kill it (and its group) if it does not.

    Only this reaps a keeper (everything else asks `_exited`), and it kills the group first:
    until the keeper is reaped its pid, which is the group's id, cannot be given to another
    process, so the kill cannot reach a group that took the number over. A keeper reaped
    already (not by this module) is not signalled at all: _sweep's marker finds what is left."""
    if keeper.returncode is None:
        if not _exited(keeper.pid):
            try:
                os.kill(keeper.pid, signal.SIGTERM)  # not send_signal: it reaps an ended process first
            except ProcessLookupError:
                pass
            _exited(keeper.pid, KEEPER_GRACE_S)
        try:
            os.killpg(keeper.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    keeper.wait()


@dataclass
class Started:
    """A harness process behind its keeper, started for one request (given or to come)."""

    keeper: subprocess.Popen
    folder: Path
    marker: str
    phase_reader: _PhaseReader
    result_reader: _ResultReader
    time_limit: float
    spawned: float  # time.monotonic() when it was started
    isolated: bool = False  # in namespaces of its own (the keeper's --isolate)
    gpu: str | None = None  # the GPU it sees (gpu_turn.device_key), None where it is hidden
    clock: JudgeClock | None = None  # grants its timed batches (profiler.sandbox.clock)

    def alive(self) -> bool:
        return not _exited(self.keeper.pid)

    def discard(self) -> None:
        """Kill it unused and remove its folder (a pool's spare, never handed a request)."""
        try:
            _stop(self.keeper)
            _sweep(self.marker)
            self.phase_reader.abandon()  # its reader may wait for a request: none comes
        finally:
            remove_tree(self.folder)


# Sandbox folders are named FOLDER_PREFIX + the judging process's pid + "-": a judge killed
# outright (SIGKILL: the language server killed by its editor, a bench worker past its hard
# deadline) cannot remove its sandboxes' folders, and its keepers die with it; the next judge
# on the machine removes the folders of judges no longer alive.
FOLDER_PREFIX = "dice-sandbox-"
_SWEPT = threading.Event()


def _sweep_folders_left() -> None:
    """Once per process: remove the sandbox folders, in the temporary folder, of judging
    processes that are dead (a pid alive, even reused by another program, keeps its folders)."""
    if _SWEPT.is_set():
        return
    _SWEPT.set()
    root = Path(tempfile.gettempdir())
    try:
        entries = list(root.glob(f"{FOLDER_PREFIX}*-*"))
    except OSError:
        return
    for folder in entries:
        pid = folder.name[len(FOLDER_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or not folder.is_dir() or folder.is_symlink():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive (or someone else's: not ours to judge)
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        try:
            if folder.stat().st_uid == os.getuid():
                remove_tree(folder)
        except OSError:
            continue


def start_harness(time_limit: float, env: dict[str, str] | None = None, extensions: Path | None = None,
                  warm: str | None = None) -> Started:
    """A harness process in a fresh folder with the sandbox's environment and limits, which
    runs one request, handed to it by run_started(). `warm` ("cuda") has it import and set
    up what that kind of request needs first, then report READY and wait."""
    isolated = isolation()
    _sweep_folders_left()
    folder = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-"))
    try:
        if extensions is None:
            extensions = folder / "extensions"
            extensions.mkdir()
        elif not extensions.is_dir():  # a caller's build folder is never made again here
            raise FileNotFoundError(f"the build folder {extensions} is gone")
        confined = ["--isolate", "--writable", str(folder)] if isolated else []
        if isolated and not extensions.resolve().is_relative_to(folder.resolve()):
            confined += ["--writable", str(extensions)]
        marker = secrets.token_hex(16)
        child_env = {**sandbox_environment(folder, extensions, env), MARKER: marker}
        control_r, control_w = os.pipe()
        phase_r, phase_w = os.pipe()
        result_r, result_w = os.pipe()
        asks_r, asks_w = os.pipe()
        grants_r, grants_w = os.pipe()
        child_fds = (control_r, phase_w, result_w, asks_w, grants_r)
        work = folder / "work"
        work.mkdir()
        spawned = time.monotonic()
        with open(folder / "stderr.log", "wb") as err:
            try:
                keeper = subprocess.Popen(
                    [sys.executable, "-I", "-S", _keeper.__file__, str(time_limit + BUILD_LIMIT_S + 60.0),
                     *confined, "--", sys.executable, "-m", "profiler.run.harness", *map(str, child_fds),
                     *([f"--warm={warm}"] if warm else [])],
                    cwd=work, stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=child_env,
                    start_new_session=True, pass_fds=child_fds,
                )
            except BaseException:
                for fd in (control_w, phase_r, result_r, asks_r, grants_w):
                    os.close(fd)
                raise
            finally:
                for fd in child_fds:
                    os.close(fd)
    except BaseException:
        remove_tree(folder)
        raise
    phase_reader = _PhaseReader(phase_r, control_w, warm is not None)
    result_reader = _ResultReader(result_r)
    judge_clock = JudgeClock(asks_r, grants_w)
    phase_reader.start()
    result_reader.start()
    judge_clock.start()
    return Started(keeper, folder, marker, phase_reader, result_reader, time_limit, spawned, isolated,
                   device_key(env), judge_clock)


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
        while not _exited(keeper.pid):
            if should_cancel is not None and should_cancel():
                raise Cancelled("cancelled")
            if on_phase is not None:
                heard = _tell_phases(on_phase, phases, phase_reader.candidate_next, heard)
            now = time.monotonic()
            if phase_reader.waiting_since is not None:  # for its turn: neither building nor running
                turn_s += now - last
                building = False
            elif phase_reader.is_alive():  # no candidate code has run yet: phases are the harness's
                building = bool(phases) and phases[-1] in BUILD_PHASES or not phases
            else:
                if now - last_scan >= SCAN_S:
                    compiling, last_scan = _compiling(keeper.pid), now
                building = compiling
            if building:
                build_s += now - last
            last = now
            if build_s > BUILD_LIMIT_S or now - origin - build_s - turn_s > time_limit:
                timed_out = True
                break
            _exited(keeper.pid, POLL_S)  # returns as the process ends, not at the next tick (a tick is 2-5% of a warm .cu verdict)
    finally:
        try:
            # Whatever happened, nothing the candidate started outlives this call.
            _stop(keeper)
            escaped = _sweep(started.marker)
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
