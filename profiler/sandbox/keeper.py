"""`python -I -S keeper.py CPU_SECONDS -- ARGV...`: the process between the judge
and the sandboxed harness, so that nothing the candidate starts outlives the sandbox.

A process-group kill misses a child that called setsid(), and a double fork hands the
grandchild to init. The keeper is a child subreaper (Linux PR_SET_CHILD_SUBREAPER): every
orphan below it is re-parented to it instead of init, so all of the candidate's processes
stay its descendants. When the harness exits, or the judge sends SIGTERM (time limit,
cancel), the keeper kills every descendant, reaps them, and exits with the harness's
status (a signal as 128 + its number). It dies with the judge (PR_SET_PDEATHSIG).

The keeper runs no candidate code; the candidate can still kill it (same user), which the
judge notices (the keeper's exit status) and reports; see profiler.sandbox.processes for the
second net that follows. It imports nothing but the standard library, so that it starts in
milliseconds, run by path with site and the environment ignored.

With `--isolate` (profiler.sandbox.isolation decides) the harness runs in
namespaces of its own, made without privileges (a user namespace):
- a PID namespace, of which the harness is the first process: the candidate sees no process
  outside it, so it can signal none (`kill(-1, SIGKILL)` reaches its own processes only),
  trace none and read no other process's memory or pipes through /proc; when the harness
  ends, the kernel kills everything left in it;
- a network namespace of its own, whose only interface (loopback) is down: the candidate
  can reach no address, 127.0.0.1 and abstract UNIX sockets of the host included;
- every UNIX socket bound to a path when the sandbox starts (read from the host's
  /proc/net/unix: an editor's IPC, a terminal multiplexer, the session bus, ssh and gpg
  agents, a container daemon) has /dev/null mounted over it, so that connecting there finds no
  one: such a socket answers whoever can open its path, whatever the network namespace. The
  GPU driver's own (NVIDIA_SOCKETS) are left, as CUDA may need them;
- a mount namespace with a /proc of that PID namespace, and every file system read-only
  except the folders given with `--writable` (the sandbox's own folder, its build folder),
  a private /dev/shm: the candidate cannot change the installed profiler, another sandbox's
  folder, or anything the judge reads later;
- inside, the candidate runs as an unprivileged user (the caller's own uid, or nobody's when
  the caller is root), so it holds no capability to undo any of this.
The keeper itself stays in the caller's PID namespace (it must see and kill what is below
it). If the namespaces cannot be made, the keeper exits with ISOLATION_FAILED and says why on
stderr; it never runs the harness less isolated than it was asked to.
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
# Exit code of a keeper asked to isolate the harness that could not (the reason on stderr).
ISOLATION_FAILED = 125
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
SYS_MOUNT_SETATTR = 442  # the same number on every architecture (Linux >= 5.12)
AT_RECURSIVE, MOUNT_ATTR_RDONLY = 0x8000, 0x1
NOBODY = 65534  # the uid and gid a root caller's candidate gets inside
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


def _libc_call(what: str, result: int) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)


# Paths of the GPU driver's daemons (persistence, MPS), which CUDA in the harness may use.
NVIDIA_SOCKETS = ("/run/nvidia", "/var/run/nvidia", "/tmp/nvidia-mps")
MAX_MASKED_SOCKETS = 4096


def bound_socket_paths(writable: list[str]) -> list[str]:
    """(the keeper, in the host's network namespace) The paths of the UNIX sockets bound on
    this machine, from /proc/net/unix, but the GPU driver's and those below `writable`."""
    try:
        with open("/proc/net/unix", "rb") as table:
            lines = table.read().decode("utf-8", "surrogateescape").splitlines()[1:]
    except OSError:
        return []
    own = [os.path.realpath(p) for p in writable]
    found = []
    for line in lines:
        fields = line.split(None, 7)  # Num RefCount Protocol Flags Type St Inode Path
        if len(fields) < 8 or not fields[7].startswith("/"):
            continue  # unnamed, or abstract (@...): the network namespace hides those
        path = fields[7]
        if path.startswith(NVIDIA_SOCKETS) or any(path == p or path.startswith(p + "/") for p in own):
            continue
        if path not in found:
            found.append(path)
    return found[:MAX_MASKED_SOCKETS]


def enter_namespaces() -> None:
    """(the keeper, before it starts the harness) A user namespace, in which this process is
    an unprivileged user with every capability, a PID namespace that its next child is the
    first process of, and a network namespace with no interface up. Raises OSError where the
    system does not allow it."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.geteuid(), os.getegid()
    _libc_call("unshare(user, pid, net)", libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET))
    # Only one's own ids may be mapped; a root caller's become nobody's inside, so that
    # whatever runs there as that user keeps no capability across exec.
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid if uid else NOBODY} {uid} 1\n")
    _write("/proc/self/gid_map", f"{gid if gid else NOBODY} {gid} 1\n")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _mount_setattr(path: str, recursive: bool, set_: int = 0, clear: int = 0) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    attr = _MountAttr(set_, clear, 0, 0)
    result = libc.syscall(SYS_MOUNT_SETATTR, -100, path.encode(), AT_RECURSIVE if recursive else 0,
                          ctypes.byref(attr), ctypes.sizeof(attr))  # -100: AT_FDCWD
    _libc_call(f"mount_setattr({path})", result)


def confine(writable: list[str], sockets: list[str] = ()) -> None:
    """(the harness's process, first in the new PID namespace, before exec) A mount namespace
    with a /proc of this PID namespace, a private /dev/shm, /dev/null over each of `sockets`,
    and everything read-only but `writable`. Raises OSError where the system does not allow it
    (a socket that cannot be covered, one gone or out of reach, is passed over: what the
    keeper cannot reach, the candidate cannot either)."""
    libc = ctypes.CDLL(None, use_errno=True)
    mount = libc.mount
    mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    _libc_call("unshare(mount)", libc.unshare(CLONE_NEWNS))
    _libc_call("mount(/, private)", mount(None, b"/", None, MS_REC | MS_PRIVATE, None))
    _libc_call("mount(/proc)", mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None))
    shm = ["/dev/shm"] if os.path.isdir("/dev/shm") else []
    if shm:
        _libc_call("mount(/dev/shm)", mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=1777"))
    for path in sockets:
        mount(b"/dev/null", path.encode("utf-8", "surrogateescape"), None, MS_BIND, None)
    paths = [os.path.realpath(p) for p in writable]
    for path in paths:  # each its own mount, so that it can stay writable below
        _libc_call(f"mount({path}, bind)", mount(path.encode(), path.encode(), None, MS_BIND | MS_REC, None))
    _mount_setattr("/", recursive=True, set_=MOUNT_ATTR_RDONLY)
    # This PID namespace's /proc stays writable: the CUDA driver writes there (on a read-only
    # /proc it fails to start, error 304), and it holds only this namespace's processes.
    for path in [*paths, "/proc", *shm]:
        _mount_setattr(path, recursive=path != "/proc", clear=MOUNT_ATTR_RDONLY)
    # The working folder was entered before the mounts: enter it again, through them.
    os.chdir(os.getcwd())


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


def _cannot_isolate(exc: OSError) -> int:
    print(f"dice sandbox: cannot isolate the harness: {exc}", file=sys.stderr)
    return ISOLATION_FAILED


def _options(argv: list[str]) -> tuple[float, bool, list[str], list[str]]:
    """CPU_SECONDS [--isolate] [--writable PATH]... -- ARGV..."""
    ours, command = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    writable = [ours[i + 1] for i, arg in enumerate(ours) if arg == "--writable"]
    return float(ours[0]), "--isolate" in ours, writable, command


def main(argv: list[str]) -> int:
    cpu_seconds, isolate, writable, command = _options(argv)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the judge died before prctl took effect
        return 1
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGTERM, _stop)
    sockets = bound_socket_paths(writable) if isolate else []
    if isolate:
        try:
            enter_namespaces()
        except OSError as exc:
            return _cannot_isolate(exc)
    harness = os.fork()
    if harness == 0:
        code = EXEC_FAILED
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # dies with the keeper
            if isolate:
                try:
                    confine(writable, sockets)
                except OSError as exc:
                    code = _cannot_isolate(exc)
                    raise
            limit_resources(cpu_seconds)
            os.execv(command[0], command)
        finally:
            os._exit(code)
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


def probe() -> int:
    """`keeper.py --probe`: 0 if this system lets the keeper isolate a harness (the whole
    sequence, in a throwaway child), else ISOLATION_FAILED with the reason on stderr."""
    child = os.fork()
    if child == 0:
        try:
            enter_namespaces()
            grandchild = os.fork()
            if grandchild == 0:
                try:
                    confine([os.getcwd()])
                    confined = os.getpid() == 1 and not os.access("/", os.W_OK) and os.access(".", os.W_OK)
                    os._exit(0 if confined else ISOLATION_FAILED)
                except OSError as exc:
                    os._exit(_cannot_isolate(exc))
            _, status = os.waitpid(grandchild, 0)
            os._exit(os.waitstatus_to_exitcode(status))
        except OSError as exc:
            os._exit(_cannot_isolate(exc))
        finally:
            os._exit(ISOLATION_FAILED)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(probe() if sys.argv[1:] == ["--probe"] else main(sys.argv[1:]))
