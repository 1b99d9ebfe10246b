"""Whether sandboxes run in namespaces of their own (profiler.sandbox.keeper --isolate):
DICE_SANDBOX_ISOLATION, and what this system allows (asked of the keeper once per process)."""

from __future__ import annotations

import logging
import subprocess
import sys
import tempfile
import threading

import profiler.sandbox.keeper as _keeper
from profiler.machine import settings

ISOLATION_ENV = settings.SANDBOX_ISOLATION
PROBE_TIMEOUT_S = 20.0


class IsolationUnavailable(RuntimeError):
    """DICE_SANDBOX_ISOLATION=on, and this system cannot isolate a sandbox (the reason)."""


_probed: dict[str, str | None] = {}
_probe_lock = threading.Lock()


def isolation_problem() -> str | None:
    """Why this system cannot run a sandbox in namespaces of its own (None: it can). Asked of
    the keeper once per process (`keeper.py --probe`, which goes through the whole sequence)."""
    with _probe_lock:
        if "answer" not in _probed:
            with tempfile.TemporaryDirectory(prefix="dice-probe-") as folder:
                try:
                    done = subprocess.run([sys.executable, "-I", "-S", _keeper.__file__, "--probe"], cwd=folder,
                                          capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                                          stdin=subprocess.DEVNULL)
                    answer = None if done.returncode == 0 else (
                        done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit code {done.returncode}")
                except (OSError, subprocess.TimeoutExpired) as exc:
                    answer = f"{type(exc).__name__}: {exc}"
            _probed["answer"] = answer
        return _probed["answer"]


def isolation() -> bool:
    """Whether sandboxes run in namespaces of their own. DICE_SANDBOX_ISOLATION: `auto` (the
    default: where the system allows it), `on` (required: IsolationUnavailable otherwise),
    `off` (never; the keeper, the allowlisted environment and the limits still hold)."""
    mode = settings.current().sandbox_isolation
    if mode not in settings.ISOLATION_MODES:
        raise IsolationUnavailable(f"{ISOLATION_ENV}={mode!r}: expected one of {', '.join(settings.ISOLATION_MODES)}")
    if mode == "off":
        return False
    problem = isolation_problem()
    if problem is not None and mode == "on":
        raise IsolationUnavailable(f"{ISOLATION_ENV}=on, but this system cannot isolate a sandbox: {problem}")
    if problem is not None and not _probed.get("warned"):
        _probed["warned"] = "yes"
        logging.getLogger(__name__).warning(
            "candidates run without namespaces of their own (%s): they run as you, beside you; "
            "%s=on refuses to judge without them", problem, ISOLATION_ENV)
    return problem is None


NAMESPACES = ("namespaces of their own: PID (they see no other process), mount (read-only but their own folders), "
              "network (no interface up, loopback included)")


def describe() -> tuple[bool, str]:
    """(whether candidates run isolated, how they run, in words), for `dice doctor` and the
    editor's status: the namespaces, or why there are none."""
    try:
        if isolation():
            return True, NAMESPACES
    except IsolationUnavailable as exc:
        return False, f"refused: {exc}"
    problem = isolation_problem()
    return False, f"none ({ISOLATION_ENV}=off)" if problem is None else f"none: {problem}"
