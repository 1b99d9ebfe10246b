"""`python -I -S keeper.py CPU_SECONDS -- ARGV...`: the process between the judge
and the sandboxed harness, so that nothing the candidate starts outlives the sandbox.

A process-group kill misses a child that called setsid(), and a double fork hands the
grandchild to init. The keeper is a child subreaper (Linux PR_SET_CHILD_SUBREAPER): every
orphan below it is re-parented to it instead of init, so all of the candidate's processes
stay its descendants. When the harness exits, or the judge sends SIGTERM (time limit,
cancel), the keeper kills every descendant, reaps them, and exits with the harness's
status (a signal as 128 + its number). It dies with the judge (PR_SET_PDEATHSIG).

The keeper runs no candidate code; the candidate can still kill it (same user), which the
judge notices (the keeper's exit status) and reports; see profiler.sandbox for the second
net that follows. It imports nothing but the standard library, so that it starts in
milliseconds, run by path with site and the environment ignored.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
# Exit code of a keeper whose harness could not be started.
EXEC_FAILED = 127
# Bytes one file may reach (a load_inline build writes object files of some hundred MB).
FILE_SIZE_LIMIT = 8 << 30
OPEN_FILES_LIMIT = 4096


def limit_resources(cpu_seconds: float) -> None:
    """Set in the harness before it starts. No address-space limit: a CUDA context reserves
    far more virtual memory than it uses, and RLIMIT_AS breaks it. No process limit:
    RLIMIT_NPROC counts every process of the user, not only the sandbox's."""
    cpu = int(cpu_seconds) + 1
    for which, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, FILE_SIZE_LIMIT),
                         (resource.RLIMIT_NOFILE, OPEN_FILES_LIMIT), (resource.RLIMIT_CPU, cpu)):
        _, hard = resource.getrlimit(which)
        soft = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (soft, soft if which == resource.RLIMIT_CPU else hard))


def _prctl(option: int, value: int) -> None:
    if ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def descendants(root: int) -> list[int]:
    """Every live process whose chain of parents reaches `root` (read from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                # The command name is in parentheses and may hold spaces: split after it.
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
    found, frontier = [], [root]
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    while frontier:
        below = children.get(frontier.pop(), [])
        found += below
        frontier += below
    return found


def kill_all_below(root: int) -> None:
    """SIGKILL every descendant of `root` (this process must be their subreaper, so that none
    escapes between two scans), reaping as they die, until none is left."""
    while True:
        pids = descendants(root)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _reap(block=False)


def _reap(block: bool) -> list[tuple[int, int]]:
    reaped = []
    while True:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped.append((pid, status))
        if block:
            return reaped


class _Stop(Exception):
    """The judge said stop (SIGTERM)."""


def _stop(*_) -> None:
    raise _Stop


def main(argv: list[str]) -> int:
    cpu_seconds = float(argv[0])
    command = argv[argv.index("--") + 1:]
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the judge died before prctl took effect
        return 1
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGTERM, _stop)
    harness = os.fork()
    if harness == 0:
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the keeper
            limit_resources(cpu_seconds)
            os.execv(command[0], command)
        finally:
            os._exit(EXEC_FAILED)
    # Only the harness holds the pipes to the judge: a copy here could be reopened through
    # /proc/KEEPER/fd by the candidate, after the harness closed its own.
    for fd in map(int, os.listdir("/proc/self/fd")):
        if fd > 2:
            try:
                os.close(fd)
            except OSError:
                pass
    status = None
    try:
        while status is None:
            for pid, code in _reap(block=True):
                if pid == harness:
                    status = code
    except _Stop:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kill_all_below(os.getpid())
    if status is None:  # told to stop: the harness was killed above
        return 128 + signal.SIGKILL
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
