"""Sandboxes in namespaces of their own (profiler.sandbox.keeper --isolate), for real on the
CPU: a KernelBench candidate's module code runs in the sandbox before any GPU is asked for,
so a hostile one can be watched here. What it saw comes back the only way a candidate's words
reach the judge: the message of its failure (the last line of its stderr).

Where the system allows no unprivileged namespaces these tests are skipped with the probe's
reason; tests/conftest.py's `unconfined` runs the keeper's own tests without namespaces.
"""

from __future__ import annotations

import importlib.util
import os
import re
import secrets
import subprocess
import time
from pathlib import Path

import pytest

import profiler
from profiler.judging.kernelbench import kernelbench_request
from profiler.machine.gpu import compute_capability
from profiler.sandbox import ISOLATION_ENV, IsolationUnavailable, isolation, isolation_problem, run_started, start_harness
from profiler.sandbox.builds import VerifiedBuilds, process_builds
from profiler.sandbox.environment import PACKAGE_ROOT
from profiler.sandbox.pool import SandboxPool, warm_kind

_spec = importlib.util.spec_from_file_location("sandbox_cases", Path(__file__).parent.parent / "sandbox_cases.py")
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

_problem = isolation_problem()
needs_namespaces = pytest.mark.skipif(_problem is not None, reason=f"no unprivileged namespaces here: {_problem}")


def _judge(module_code: str):
    (verdict,) = profiler.judge(cases.BASELINE, [cases.candidate(module_code)], "relu.py", time_limit=30.0)
    return verdict


def _alive_with(token: str) -> list[int]:
    """Host pids of live processes whose command line holds `token`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if token.encode() in cmdline.read() and cases.alive(int(entry)):
                        found.append(int(entry))
            except OSError:
                continue
    return found


@needs_namespaces
def test_a_candidate_that_kills_every_process_it_can_reaches_only_its_own():
    sentinel = subprocess.Popen(["sleep", "600"])  # a process of the same user, outside
    try:
        verdict = _judge("""
import os, signal
seen = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
# Only as the first process of a PID namespace: should a bug leave it outside one, the
# assertions fail instead of the test killing the machine's processes.
if os.getpid() == 1:
    try:
        os.kill(-1, signal.SIGKILL)  # every process this user may signal
    except ProcessLookupError:
        pass
    for pid in seen:
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
raise RuntimeError(f"pid {os.getpid()} parent {os.getppid()} saw {seen}")
""")
        assert sentinel.poll() is None, "a process outside the sandbox was killed"
    finally:
        sentinel.kill()
        sentinel.wait()
    # its module fails to load: "compile_error" on a GPU machine, "no_gpu" without one
    assert verdict.status in ("compile_error", "no_gpu") and "pid 1 parent 0 saw [1]" in verdict.message, \
        verdict.message
    assert verdict.extra["isolation"] == "namespaces"


@needs_namespaces
def test_the_file_system_is_read_only_to_a_candidate_but_its_own_folder(tmp_path):
    outside = tmp_path / "planted.txt"
    package = Path(PACKAGE_ROOT) / "profiler" / f"planted_{secrets.token_hex(4)}.py"
    verdict = _judge(f"""
import os
said = []
for path in ({str(outside)!r}, {str(package)!r}, os.path.join(os.environ["HOME"], "mine.txt"),
             os.path.join(os.getcwd(), "here.txt"), "/dev/shm/shared.txt"):
    try:
        with open(path, "w") as file:
            file.write("x")
        said.append("wrote")
    except OSError as exc:
        said.append(type(exc).__name__ + str(exc.errno))
raise RuntimeError("writes: " + " ".join(said))
""")
    assert not outside.exists() and not package.exists()
    # EROFS (30) outside; its HOME, its working folder and a /dev/shm of its own are writable
    assert "writes: OSError30 OSError30 wrote wrote wrote" in verdict.message, verdict.message
    assert not Path("/dev/shm/shared.txt").exists()


@needs_namespaces
def test_a_candidate_cannot_open_the_gpu_turns_lock_to_hold_it(tmp_path, monkeypatch):
    """A candidate that held a GPU turn's lock could stall every other judging on the GPU. The
    lock files are write-only (0200) on a file system read-only to it: opened to read, EACCES
    (13); to write, EROFS (30)."""
    from profiler.sandbox import gpu_turn

    monkeypatch.setattr(gpu_turn, "FOLDER", tmp_path)
    turn = gpu_turn.GpuTurn("0")
    assert turn.try_acquire()  # the lock file exists, as it does once any run has taken a turn
    turn.release()
    lock = gpu_turn.folder() / "0.lock"
    verdict = _judge(f"""
import fcntl, os
said = []
for flags in (os.O_RDONLY, os.O_WRONLY):
    try:
        fd = os.open({str(lock)!r}, flags)
        fcntl.flock(fd, fcntl.LOCK_EX)
        said.append("held")
    except OSError as exc:
        said.append("OSError" + str(exc.errno))
raise RuntimeError("lock: " + " ".join(said))
""")
    assert "lock: OSError13 OSError30" in verdict.message, verdict.message


@needs_namespaces
def test_a_candidate_reaches_no_socket_loopback_included(tmp_path):
    """Not TCP on 127.0.0.1, not an abstract UNIX socket, and not one bound to a path (an
    editor's IPC, tmux, the session bus: what answers whoever can open the path, whatever
    the network namespace)."""
    import socket
    import threading

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.2)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = f"dice-test-{secrets.token_hex(4)}"
    abstract.bind("\0" + name)
    abstract.listen(4)
    abstract.settimeout(0.2)
    path = tmp_path / "ipc.sock"  # outside the sandbox's folders, readable by the candidate
    named = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    named.bind(str(path))
    named.listen(4)
    named.settimeout(0.2)
    tmp_path.chmod(0o755)
    accepted: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for server, what in ((listener, "tcp"), (abstract, "unix"), (named, "unix path")):
                try:
                    conn, _ = server.accept()
                    accepted.append(what)
                    conn.close()
                except OSError:
                    pass

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        verdict = _judge(f"""
import socket
said = []
for family, address in ((socket.AF_INET, ("127.0.0.1", {listener.getsockname()[1]})),
                        (socket.AF_UNIX, "\\0{name}"), (socket.AF_UNIX, {str(path)!r})):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(address)
        said.append("connected")
    except OSError as exc:
        said.append(type(exc).__name__)
raise RuntimeError("sockets: " + " ".join(said))
""")
    finally:
        stop.set()
        watcher.join(2)
        listener.close()
        abstract.close()
        named.close()
    assert not accepted, f"a candidate connected over {accepted}"
    assert "sockets: " in verdict.message and "connected" not in verdict.message, verdict.message
    assert verdict.extra["isolation"] == "namespaces"


@needs_namespaces
def test_a_process_that_leaves_the_session_dies_with_the_namespace():
    token = f"600.{secrets.randbelow(10**6):06d}"  # sleep's argument, found in the host's /proc
    verdict = _judge(f"""
import os, subprocess, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        subprocess.Popen(["sleep", {token!r}], start_new_session=True)
        time.sleep(600)
    os._exit(0)
time.sleep(1.0)
""")
    assert verdict.extra["isolation"] == "namespaces"
    deadline = time.monotonic() + 5.0
    while _alive_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _alive_with(token)
    for pid in left:
        os.kill(pid, 9)
    assert not left, "a process the candidate started outlived its sandbox"


@pytest.mark.usefixtures("unconfined")
def test_without_namespaces_the_verdict_says_so():
    verdict = _judge("")
    assert verdict.extra["isolation"] == "none"


def test_an_unknown_isolation_setting_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(ISOLATION_ENV, "sometimes")
    with pytest.raises(IsolationUnavailable, match="expected one of auto, on, off"):
        isolation()


def test_kernelbench_runs_are_pre_started_only_in_namespaces(monkeypatch):
    monkeypatch.setenv(ISOLATION_ENV, "off")
    assert warm_kind("kernelbench") is None and warm_kind("torch_compile") is None
    assert warm_kind("cuda") == "cuda"
    monkeypatch.setenv(ISOLATION_ENV, "auto")
    assert warm_kind("kernelbench") == ("torch" if _problem is None else None)


@needs_namespaces
def test_a_pre_started_kernelbench_sandbox_runs_in_namespaces():
    pool = SandboxPool(start_harness, keep=lambda: 1)
    try:
        pool.reserve("kernelbench", 60.0, 1)
        spare = pool.claim("kernelbench", 60.0)
        assert spare is not None and spare.isolated
        request = kernelbench_request(cases.BASELINE, None, "relu.py", 60.0)
        outcome = run_started(spare, request, 60.0, None)
        spare.discard()  # its folder (run_sandboxed removes it for a run it starts)
    finally:
        pool.shutdown()
    assert outcome.isolation == "namespaces" and outcome.process["started_s_before"] > 0
    assert outcome.result is not None, outcome.stderr_tail  # Model alone ran (on a CPU: "no GPU")


@needs_namespaces
def test_the_next_candidates_sandbox_waits_out_of_the_running_candidates_reach():
    # Where sandboxes are isolated, a KernelBench candidate's sandbox is started while the step
    # before it runs (KernelBenchProblem.prestart), in its build folder. The candidate running
    # meanwhile sees the waiting one's folders and can write to none (nor, in the store on
    # disk, to the digests and locks beside them), nor signal it.
    honest = cases.candidate("")
    waiting = process_builds().root / VerifiedBuilds.key(honest, compute_capability())  # its build folder
    with process_builds().folder(VerifiedBuilds.key("another document", None)) as another:
        (another / "ext.so").write_text("a build, and its digest")
    hostile = cases.candidate(f"""
import errno, glob, os, signal
try:
    open({str(waiting / "planted.py")!r}, "w").write("x")
    planted = "planted"
except OSError as exc:
    planted = errno.errorcode[exc.errno] if os.path.isdir({str(waiting)!r}) else "not seen"
own = {{os.path.realpath(os.environ["TORCH_EXTENSIONS_DIR"]), os.path.realpath(os.getcwd())}}
folders = [f for f in glob.glob({str(waiting.parent / "*")!r}) + glob.glob("/tmp/dice-builds-*/*")
           + glob.glob("/tmp/dice-sandbox-*/work") if os.path.realpath(f) not in own]
targets = [os.path.join(f, "planted.py") for f in folders] + glob.glob({str(waiting.parent / "digests" / "*")!r})
wrote = 0
for target in targets:
    try:
        with open(target, "a") as file:
            file.write("x")
        wrote += 1
    except OSError:
        pass
if os.getpid() == 1:  # see test_a_candidate_that_kills_every_process_it_can_reaches_only_its_own
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != 1:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
raise RuntimeError(f"{{planted}}; wrote {{wrote}} of {{len(targets)}}")
""")
    first, second = profiler.judge(cases.BASELINE, [hostile, honest], "relu.py", time_limit=30.0)
    # the waiting sandbox's build folder was there (checked out for it), and read-only
    written = re.search(r"EROFS; wrote 0 of (\d+)", first.message)
    assert written, first.message
    # tried: the waiting and the other build folder, digests/, locks/ (store on disk), the digest
    assert int(written.group(1)) >= 5, first.message
    assert not (waiting / "planted.py").exists()
    assert second.extra["isolation"] == "namespaces"
    # started while the first ran (seconds, here its module's load), not at its own turn
    assert second.extra["phases"]["started_s_before"] > 1.0, second.extra["phases"]
    # it ran as any: the module loaded, and here there is no GPU to time it
    assert second.status in ("no_gpu", "not_faster", "faster"), second.message


@pytest.mark.usefixtures("unconfined")
def test_without_namespaces_no_candidate_sandbox_waits_beside_a_running_one():
    first, second = profiler.judge(cases.BASELINE, [cases.candidate(""), cases.candidate("\n")], "relu.py",
                                   time_limit=30.0)
    # each started at its turn: its start-up (a fork, milliseconds) is all that precedes its request
    assert first.extra["phases"]["started_s_before"] < 0.5 and second.extra["phases"]["started_s_before"] < 0.5


def test_folders_a_candidate_made_too_deep_to_walk_fail_nothing_but_its_own_run():
    """A candidate nests 1,500 folders in its working folder and in its build folder: deeper
    than shutil.rmtree or a recursive walk can go (RecursionError, which ignore_errors does not
    cover), once enough to make the judge raise instead of giving a verdict. Its run is a
    verdict, both folders are removed, and the next candidate is judged as usual."""
    verdict = _judge("""
import os
for top in (os.getcwd(), os.environ["TORCH_EXTENSIONS_DIR"]):
    here = os.open(top, os.O_RDONLY)
    for _ in range(1500):
        os.mkdir("d", dir_fd=here)
        below = os.open("d", os.O_RDONLY, dir_fd=here)
        os.close(here)
        here = below
    os.close(here)
raise RuntimeError("folders: " + os.getcwd() + " " + os.environ["TORCH_EXTENSIONS_DIR"])
""")
    working, build = re.search(r"folders: (\S+) (\S+)", verdict.message).groups()
    assert verdict.status in ("crash", "no_gpu"), verdict.message  # no_gpu: on a machine without one
    assert not Path(working).exists()
    assert not (Path(build) / "d").exists()  # the build folder was not kept as it was left
    assert _judge("").status in ("no_gpu", "not_faster", "faster"), "the next candidate was not judged"


def test_the_sockets_covered_are_the_hosts_but_the_sandboxs_own_and_the_gpu_drivers(tmp_path):
    import socket

    from profiler.sandbox.keeper import NVIDIA_SOCKETS, bound_socket_paths

    outside, own = tmp_path / "outside.sock", tmp_path / "own" / "inside.sock"
    own.parent.mkdir()
    with socket.socket(socket.AF_UNIX) as a, socket.socket(socket.AF_UNIX) as b:
        a.bind(str(outside))
        b.bind(str(own))
        found = bound_socket_paths([str(own.parent)])
    assert str(outside) in found and str(own) not in found
    assert not [p for p in found if p.startswith(NVIDIA_SOCKETS)]
