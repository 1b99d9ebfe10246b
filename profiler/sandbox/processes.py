"""A sandbox's processes as the judge sees them: whether its keeper has ended (without reaping
it), stopping the keeper and its process group, the second net for what escaped both (every
process of this user carrying the sandbox's MARKER), and whether a compiler runs under it."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time

from profiler.sandbox.keeper import descendants

KEEPER_GRACE_S = 5.0
# Process names (/proc/PID/comm, at most 15 characters) of the tools a load_inline build runs.
BUILD_TOOLS = frozenset({"ninja", "nvcc", "cicc", "ptxas", "cudafe++", "fatbinary", "nvlink", "cc1plus", "cc1",
                         "c++", "g++", "gcc", "cc", "ld", "collect2", "as", "x86_64-linux-gn", "clang", "clang++"})
# The variable that marks every process of one sandbox (the second net, see sweep).
MARKER = "DICE_SANDBOX_MARKER"


def compiler_running(root: int) -> bool:
    """Whether one of the build tools (BUILD_TOOLS) runs among the processes under `root`."""
    for pid in descendants(root):
        try:
            with open(f"/proc/{pid}/comm", "rb") as comm:
                if comm.read().strip().decode(errors="replace") in BUILD_TOOLS:
                    return True
        except OSError:
            continue
    return False


def sweep(marker: str) -> int:
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


def exited(pid: int, timeout: float = 0.0) -> bool:
    """Whether our child `pid` has ended, waiting up to `timeout` seconds for it, without
    reaping it: an ended keeper stays a zombie, so its pid (its process group's id) cannot be
    another process's until stop has killed the group and reaped it."""
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


def stop(keeper: subprocess.Popen) -> None:
    """Have the keeper kill everything below it; kill it (and its group) if it does not.

    Only this reaps a keeper (everything else asks `exited`), and it kills the group first:
    until the keeper is reaped its pid, which is the group's id, cannot be given to another
    process, so the kill cannot reach a group that took the number over. A keeper reaped
    already (not by this module) is not signalled at all: sweep's marker finds what is left."""
    if keeper.returncode is None:
        if not exited(keeper.pid):
            try:
                os.kill(keeper.pid, signal.SIGTERM)  # not send_signal: it reaps an ended process first
            except ProcessLookupError:
                pass
            exited(keeper.pid, KEEPER_GRACE_S)
        try:
            os.killpg(keeper.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    keeper.wait()
