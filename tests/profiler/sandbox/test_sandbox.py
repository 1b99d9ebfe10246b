"""Process isolation on the CPU side: a candidate that hangs, segfaults or leaves children
behind is contained, gives a verdict, and the next candidate is judged in a fresh process.

KernelBench candidates are Python, so they can misbehave while their module loads; this
runs for real on a machine without a GPU (the well-behaved one then reads "no_gpu").
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from pathlib import Path

import pytest

import profiler

_spec = importlib.util.spec_from_file_location("sandbox_cases", Path(__file__).parent.parent / "sandbox_cases.py")
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)
BASELINE, candidate, _alive = cases.BASELINE, cases.candidate, cases.alive


@pytest.mark.usefixtures("unconfined")
def test_hang_segfault_and_next_candidate(tmp_path):
    pid_file = tmp_path / "child.pid"
    hanging = candidate(
        "import subprocess\n"
        f"open({str(pid_file)!r}, 'w').write(str(subprocess.Popen(['sleep', '600']).pid))\n"
        "while True:\n    pass\n"
    )
    segfault = candidate("import ctypes\nctypes.string_at(0)\n")
    fine = candidate("")
    progress = []
    started = time.monotonic()
    verdicts = profiler.judge(BASELINE, [hanging, segfault, fine], "relu.py", time_limit=4.0,
                              on_progress=lambda i, n: progress.append((i, n)))
    # Four sandboxes (torch imported in each) and a 4 s limit: a minute or so on a busy
    # machine, where the hang alone (its child sleeps 600 s) would never end.
    assert time.monotonic() - started < 120
    assert progress == [(1, 3), (2, 3), (3, 3)]
    hang, crash, ok = verdicts
    assert hang.status == "timeout" and "time limit" in hang.message
    # the child the hanging candidate started died with it (the whole process group is killed)
    assert not _alive(int(pid_file.read_text()))
    assert crash.status == "crash" and "SIGSEGV" in crash.message
    # where it happened, from faulthandler's stack in the sandbox's stderr: the candidate's line
    assert "Fatal Python error: Segmentation fault; in File" in crash.message and "string_at" in crash.message
    if profiler.gpu_name() is None:
        assert ok.status == "no_gpu" and ok.time_ms is None and ok.speedup is None
    else:
        assert ok.status in ("faster", "not_faster") and ok.correct


def test_syntax_error_never_reaches_a_process():
    (verdict,) = profiler.judge(BASELINE, [BASELINE + "\nclass ModelNew(:\n"], "relu.py")
    assert verdict.status == "compile_error"
    assert verdict.diagnostics[0].line == BASELINE.count("\n") + 2


def test_cancel_kills_the_running_candidate():
    hanging = candidate("while True:\n    pass\n")
    started = time.monotonic()
    deadline = started + 2.0
    with pytest.raises(profiler.Cancelled):
        profiler.judge(BASELINE, [hanging], "relu.py", time_limit=60.0,
                       should_cancel=lambda: time.monotonic() > deadline)
    assert time.monotonic() - started < 20  # cancelled at 2 s, far inside its 60 s time limit


@pytest.mark.usefixtures("unconfined")
def test_a_runner_does_not_outlive_a_killed_judge(tmp_path):
    # The judge's process is killed (as a test timeout or a crashed server would): the
    # hanging candidate it started must die with it.
    import signal
    import subprocess
    import sys

    pid_file = tmp_path / "runner.pid"
    hanging = candidate(f"import os\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\nwhile True:\n    pass\n")
    script = (f"import profiler\nprofiler.judge({BASELINE!r}, [{hanging!r}], 'relu.py', time_limit=600.0)\n")
    judge_process = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pid_file.exists(), "the candidate never started"
    time.sleep(0.3)
    runner_pid = int(pid_file.read_text())
    assert _alive(runner_pid)
    judge_process.send_signal(signal.SIGKILL)
    judge_process.wait()
    deadline = time.monotonic() + 10
    while _alive(runner_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(runner_pid)


def test_the_folders_of_a_killed_judge_are_removed_by_the_next(tmp_path, monkeypatch):
    """A judge killed outright (SIGKILL) cannot remove its sandboxes' folders; the next judge
    on the machine removes them at its first sandbox, and leaves those of live judges."""
    import subprocess
    import sys
    import tempfile

    from profiler.sandbox import start

    script = ("import os, signal\nfrom profiler.sandbox import start_harness\n"
              "print(start_harness(30.0).folder, flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n")
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env={**os.environ, "TMPDIR": str(tmp_path)}, timeout=120)
    left = Path(killed.stdout.strip())
    assert killed.returncode == -9 and left.parent == tmp_path and left.is_dir(), killed.stderr
    live = subprocess.Popen(["sleep", "60"])
    try:
        alive = tmp_path / f"{start.FOLDER_PREFIX}{live.pid}-kept"
        alive.mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        monkeypatch.setattr(start, "_SWEPT", threading.Event())
        started = start.start_harness(30.0)
        started.discard()
        assert not left.exists() and alive.is_dir()
    finally:
        live.kill()
        live.wait()


def _harness_side(phase_w: int, control_r: int, log: list) -> None:
    """What a .cu harness does with the real channel: its phases, then its turn."""
    from profiler.sandbox.channel import Phase, read_control

    Phase.open(phase_w, control_r)
    Phase.after_turn = lambda: log.append(("deadline armed again", time.monotonic()))
    try:
        Phase.set("compile")
        request, _ = read_control(control_r)
        log.append(("request", request["kind"]))
        Phase.wait_turn()
        log.append(("turn", time.monotonic()))
        Phase.set("timing")
    finally:
        Phase._fd = Phase._control = None
        Phase.after_turn = None
        os.close(phase_w)


def test_a_run_waits_for_its_turn_and_the_wait_is_measured_by_the_judge():
    """The harness asks for its turn once built; the judge's reader writes GO only when the
    turn is given, and times the wait by its own clock (it counts against no limit)."""
    from profiler.sandbox.channel import WAITING_FOR_TURN, control_message
    from profiler.sandbox.readers import PhaseReader

    control_r, control_w = os.pipe()
    phase_r, phase_w = os.pipe()
    reader = PhaseReader(phase_r, control_w, warm=False)
    turn, log = threading.Event(), []
    reader.hand_over(control_message({"kind": "cuda"}, "nonce"), turn)
    reader.start()
    harness = threading.Thread(target=_harness_side, args=(phase_w, control_r, log))
    harness.start()
    deadline = time.monotonic() + 10
    while reader.waiting_since is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reader.waiting_since is not None and reader.phases[-1] == WAITING_FOR_TURN
    time.sleep(0.3)
    assert log == [("request", "cuda")]  # no GO before its turn
    given = time.monotonic()
    turn.set()
    harness.join(10)
    reader.join(10)
    os.close(control_r)
    # The harness's own hard deadline starts again at its turn (the wait is outside its limits).
    assert [entry[0] for entry in log[1:]] == ["deadline armed again", "turn"] and log[1][1] >= given
    assert reader.waiting_since is None and reader.turn_waits >= 0.3
    assert reader.phases[-1] == "timing"


def test_an_abandoned_run_stops_waiting_for_its_turn():
    """A run killed while it waits (cancelled, or its time is up) leaves no reader waiting."""
    from profiler.sandbox.channel import TURN_NEXT, control_message
    from profiler.sandbox.readers import PhaseReader

    control_r, control_w = os.pipe()
    phase_r, phase_w = os.pipe()
    reader = PhaseReader(phase_r, control_w, warm=False)
    reader.hand_over(control_message({"kind": "cuda"}, "nonce"), threading.Event())
    reader.start()
    os.write(phase_w, TURN_NEXT + b"\n")
    deadline = time.monotonic() + 10
    while reader.waiting_since is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reader.waiting_since is not None
    reader.abandon()
    os.close(phase_w)
    reader.join(5)
    assert not reader.is_alive()
    os.close(control_r)


def test_turn_requests_of_a_run_without_a_turn_exclude_no_time():
    """Code that writes TURN_NEXT to a phase pipe still open (a KernelBench document's
    torch.compile run loads the document) gets one GO and no time outside its limits; a run
    with a turn waits once, however often it asks."""
    from profiler.sandbox.channel import TURN_NEXT, control_message
    from profiler.sandbox.readers import PhaseReader

    for turn in (None, threading.Event()):
        control_r, control_w = os.pipe()
        phase_r, phase_w = os.pipe()
        reader = PhaseReader(phase_r, control_w, warm=False)
        reader.hand_over(control_message({"kind": "torch_compile"}, "nonce"), turn)
        reader.start()
        os.read(control_r, 1 << 16)  # the request
        for _ in range(3):
            os.write(phase_w, TURN_NEXT + b"\n")
        since = given = None
        if turn is not None:
            deadline = time.monotonic() + 30
            while (since := reader.waiting_since) is None:
                assert time.monotonic() < deadline, "the reader never began to wait for its turn"
                time.sleep(0.01)
            time.sleep(0.2)
            given = time.monotonic()
            turn.set()
        assert os.read(control_r, 1) == b"!"
        time.sleep(0.2)
        os.set_blocking(control_r, False)
        with pytest.raises(BlockingIOError):
            os.read(control_r, 1)  # one GO, not three
        os.close(phase_w)
        reader.join(5)
        ended = time.monotonic()
        assert not reader.is_alive() and reader.waiting_since is None
        # The wait counted is from the reader's first wait to the turn given, once.
        assert (reader.turn_waits == 0.0) if turn is None else (given - since <= reader.turn_waits <= ended - since)
        os.close(control_r)


def test_stopping_a_keeper_that_ignores_sigterm_kills_its_group_then_reaps_it(tmp_path, monkeypatch):
    """profiler.sandbox.processes.stop: a keeper deaf to SIGTERM and a child of its group are killed
    after the grace, the keeper reaped (not left a zombie), and the child gone."""
    import signal
    import subprocess
    import sys

    from profiler.sandbox import processes

    child_pid = tmp_path / "child.pid"
    code = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "c = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
        f"open({str(child_pid)!r}, 'w').write(str(c.pid))\n"
        "time.sleep(60)\n"
    )
    keeper = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    deadline = time.monotonic() + 30
    while not (child_pid.exists() and child_pid.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(child_pid.read_text())
    states = []
    real_killpg = os.killpg

    def killpg(pgid, sig):  # the state of the keeper when its group is killed
        states.append(Path(f"/proc/{keeper.pid}/stat").read_text().rsplit(")", 1)[1].split()[0])
        real_killpg(pgid, sig)

    monkeypatch.setattr(processes, "KEEPER_GRACE_S", 0.3)
    monkeypatch.setattr(os, "killpg", killpg)
    started = time.monotonic()
    processes.stop(keeper)
    took = time.monotonic() - started
    assert states == ["S"] or states == ["R"]  # still running: deaf to SIGTERM, killed with its group
    assert keeper.returncode == -signal.SIGKILL  # reaped, killed after the grace
    assert 0.25 < took < 10
    for _ in range(100):  # the child is re-parented and reaped by init: it vanishes
        if not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the keeper's child {child} outlived stop")


def test_a_keeper_that_ended_on_its_own_is_reaped_only_after_its_group_is_killed(monkeypatch):
    """Nothing but stop reaps a keeper: one that ended by itself stays a zombie through
    `alive()` and the judge's polling, so the group id stop kills is still the keeper's."""
    import subprocess
    import sys

    from profiler.sandbox import processes

    keeper = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    assert processes.exited(keeper.pid, timeout=30)  # waits for the end, without reaping it
    assert keeper.returncode is None and Path(f"/proc/{keeper.pid}").exists()  # a zombie, pid held
    states = []
    real_killpg = os.killpg

    def killpg(pgid, sig):
        states.append(Path(f"/proc/{keeper.pid}/stat").read_text().rsplit(")", 1)[1].split()[0])
        real_killpg(pgid, sig)

    monkeypatch.setattr(os, "killpg", killpg)
    processes.stop(keeper)
    assert states == ["Z"]  # killed while the zombie held the group's id
    assert keeper.returncode == 0 and not Path(f"/proc/{keeper.pid}").exists()


def test_waiting_for_a_keeper_without_pidfd_returns_when_it_ends_not_at_the_timeout(monkeypatch):
    """On a kernel without pidfd_open (before Linux 5.3) exited polls: it returns once the
    process has ended, not after the whole timeout (the keeper's 5 s grace at every stop)."""
    import subprocess
    import sys

    from profiler.sandbox import processes

    def no_pidfd(pid, flags=0):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    keeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    started = time.monotonic()
    assert processes.exited(keeper.pid, timeout=20)
    assert time.monotonic() - started < 10
    assert keeper.returncode is None  # not reaped
    keeper.wait()
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not processes.exited(running.pid, timeout=0.2)  # still running: False at the timeout
    finally:
        running.kill()
        running.wait()
