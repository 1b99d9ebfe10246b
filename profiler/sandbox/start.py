"""Starting a harness process for one request: a fresh folder, the sandbox's environment and
limits, its pipes and its keeper, in namespaces of its own where the system allows them
(start_harness); what is started (Started); and the folders of judges killed outright,
removed by the next one."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from profiler.machine.paths import remove_tree
from profiler.sandbox import keeper as _keeper
from profiler.sandbox import quiet
from profiler.sandbox.clock import JudgeClock
from profiler.sandbox.environment import sandbox_environment
from profiler.sandbox.gpu_turn import device_key
from profiler.sandbox.isolation import isolation
from profiler.sandbox.processes import MARKER, exited, stop, sweep
from profiler.sandbox.readers import PhaseReader, ResultReader

# The build allowance of a run, beside its time limit (profiler.sandbox.watch keeps both); the
# keeper's own limit, and the harness's, is the two and a minute.
BUILD_LIMIT_S = 600.0


@dataclass
class Started:
    """A harness process behind its keeper, started for one request (given or to come)."""

    keeper: subprocess.Popen
    folder: Path
    marker: str
    phase_reader: PhaseReader
    result_reader: ResultReader
    time_limit: float
    spawned: float  # time.monotonic() when it was started
    isolated: bool = False  # in namespaces of its own (the keeper's --isolate)
    gpu: str | None = None  # the GPU it sees (gpu_turn.device_key), None where it is hidden
    clock: JudgeClock | None = None  # grants its timed batches (profiler.sandbox.clock)

    def alive(self) -> bool:
        return not exited(self.keeper.pid)

    def discard(self) -> None:
        """Kill it unused and remove its folder (a pool's spare, never handed a request)."""
        try:
            stop(self.keeper)
            sweep(self.marker)
            self.phase_reader.abandon()  # its reader may wait for a request: none comes
        finally:
            remove_tree(self.folder)


# Sandbox folders are named FOLDER_PREFIX + the judging process's pid + "-": a judge killed
# outright (SIGKILL: the language server killed by its editor, a bench worker past its hard
# deadline) cannot remove its sandboxes' folders, and its keepers die with it; the next judge
# on the machine removes the folders of judges no longer alive.
FOLDER_PREFIX = "dice-sandbox-"
_SWEPT = threading.Event()


def sweep_folders_left() -> None:
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
                  warm: str | None = None, stop: Callable[[], bool] | None = None) -> Started:
    """A harness process in a fresh folder with the sandbox's environment and limits, which
    runs one request, handed to it by run_started(). `warm` ("cuda") has it import and set
    up what that kind of request needs first, then report READY and wait; such a start waits
    until no run's timed batches are open in this process, and holds their grants back until
    its set-up ends (profiler.sandbox.quiet); stop() true ends that wait."""
    if warm is not None:
        quiet.hold_for_timed_runs(stop)
    isolated = isolation()
    sweep_folders_left()
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
    phase_reader = PhaseReader(phase_r, control_w, warm is not None)
    result_reader = ResultReader(result_r)
    judge_clock = JudgeClock(asks_r, grants_w)
    phase_reader.start()
    result_reader.start()
    judge_clock.start()
    started = Started(keeper, folder, marker, phase_reader, result_reader, time_limit, spawned, isolated,
                      device_key(env), judge_clock)
    if warm is not None:
        quiet.warm_up(started)
    return started
