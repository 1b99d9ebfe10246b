"""Run one request in a fresh `python -m profiler.runner` process, with a wall-clock limit.

The process gets its own temporary folder (request.json in, result.json out, and its
stdout/stderr), its own session (so a timeout kills everything it started, children
included), and nothing from the caller but the environment. A hang becomes "timeout", a
death by signal or without a result becomes "crash" with the tail of its stderr; the
caller's process is never at risk, and the next candidate starts clean.

Building is not running: time the runner reports spending in a build phase (NVRTC, a
load_inline build of a few minutes, torch.compile) does not count against the time limit,
up to BUILD_LIMIT_S of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from profiler.paths import cache_dir
from profiler.runner import BUILD_PHASES, PHASE_FILE

POLL_S = 0.05
BUILD_LIMIT_S = 600.0
STDERR_TAIL_CHARS = 2000
# The folder that holds the `profiler` package, so the child imports this same code.
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)


class Cancelled(Exception):
    """should_cancel() said stop; the sandbox process was killed."""


@dataclass
class SandboxOutcome:
    status: str  # "ok" (a result came back) | "timeout" | "crash"
    result: dict | None
    returncode: int | None
    stderr_tail: str
    seconds: float
    phase: str = ""  # what the runner said it was doing last

    def why(self) -> str:
        """One line on how the process ended, for a verdict's message."""
        if self.status == "timeout":
            return f"killed after {self.seconds:.0f} s, during {self.phase or 'start-up'} (over its time limit)"
        rc = self.returncode
        if rc is not None and rc < 0:
            how = f"killed by {signal.Signals(-rc).name}"
        else:
            how = f"exited with code {rc} and no result"
        last = self.stderr_tail.strip().splitlines()[-1:] if self.stderr_tail.strip() else []
        return how + (f": {last[0][:300]}" if last else "")


def _environment(folder: Path, overrides: dict[str, str] | None) -> dict[str, str]:
    env = {**os.environ, **(overrides or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
    # Compiled kernels are cached by content hash and architecture, across candidates.
    env.setdefault("CUPY_CACHE_DIR", str(cache_dir("cupy")))
    env.setdefault("TORCH_EXTENSIONS_DIR", str(cache_dir("torch_extensions")))
    env["DICE_SANDBOX_DIR"] = str(folder)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _phase(folder: Path) -> str:
    try:
        return (folder / PHASE_FILE).read_text()
    except OSError:
        return ""


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_sandboxed(request: dict, time_limit: float, *,
                  should_cancel: Callable[[], bool] | None = None,
                  env: dict[str, str] | None = None) -> SandboxOutcome:
    """Run `request` through profiler.runner in a new process; raises Cancelled when
    should_cancel() turns true (the process is killed first). `env` is added to this
    process's environment for the child."""
    folder = Path(tempfile.mkdtemp(prefix="dice-sandbox-"))
    try:
        # The runner kills itself past this, should this process die without killing it.
        request = {**request, "hard_deadline_s": time_limit + BUILD_LIMIT_S + 60.0}
        (folder / "request.json").write_text(json.dumps(request))
        started = time.monotonic()
        with open(folder / "stdout.log", "wb") as out, open(folder / "stderr.log", "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "profiler.runner", str(folder)],
                cwd=folder, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                env=_environment(folder, env), start_new_session=True,
            )
            timed_out = False
            build_s, last = 0.0, started
            try:
                while proc.poll() is None:
                    if should_cancel is not None and should_cancel():
                        raise Cancelled("cancelled")
                    now = time.monotonic()
                    if _phase(folder) in BUILD_PHASES:
                        build_s += now - last
                    last = now
                    if build_s > BUILD_LIMIT_S or now - started - build_s > time_limit:
                        timed_out = True
                        break
                    time.sleep(POLL_S)
            finally:
                # Whatever happened, nothing the candidate started outlives this call.
                _kill_group(proc)
                proc.wait()
        seconds = time.monotonic() - started
        stderr = (folder / "stderr.log").read_bytes().decode(errors="replace")[-STDERR_TAIL_CHARS:]
        result_path = folder / "result.json"
        phase = _phase(folder)
        if timed_out:
            return SandboxOutcome("timeout", None, None, stderr, seconds, phase)
        if result_path.is_file():
            return SandboxOutcome("ok", json.loads(result_path.read_text()), proc.returncode, stderr, seconds, phase)
        return SandboxOutcome("crash", None, proc.returncode, stderr, seconds, phase)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
