"""Judge workers: one per GPU, bounded by a deadline, stoppable without leaving sandboxes."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from profiler.judging.pool import JudgeError, JudgeJob, LiveWorkers, run_worker, stop_workers, worker_slots

pytestmark = pytest.mark.timeout(300)


def hanging_candidate(source: str, pid_file: Path) -> str:
    """The problem, then code that writes its process id to pid_file and sleeps."""
    return source + f"\nimport os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n"


def foreground_on(cpus: set[int]) -> None:
    """In the child before exec: pinned to `cpus`, and SIGINT at its default as in a terminal's
    foreground (a pytest started with `&` hands its children SIGINT ignored, and Python then
    installs no KeyboardInterrupt: the run would rightly ignore the test's Ctrl-C)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.sched_setaffinity(0, cpus)


def pid_once_running(pid_file: Path, seconds: float = 120) -> int:
    deadline = time.monotonic() + seconds
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pid_file.exists(), "the sandbox never ran the candidate"
    return int(pid_file.read_text())


def gone(pid: int, seconds: float = 10) -> bool:
    """Whether process `pid` has ended within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_one_worker_per_visible_gpu_within_the_cpu_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,7")
    assert worker_slots(cpu_budget=8) == ["3", "5", "7"]
    assert worker_slots(cpu_budget=2) == ["3", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU visible: compile-only workers
    assert worker_slots(cpu_budget=2) == [None, None]


def test_a_judge_worker_past_its_deadline_is_stopped(monkeypatch: pytest.MonkeyPatch, kernelbench_dir: Path) -> None:
    # Shrink the margins so that the deadline (3 sandbox runs x 1 ms) cannot be met: no
    # worker process can even start in 3 ms. (Without a GPU a KernelBench candidate is not
    # run at all, so a slow candidate would not make the worker slow; the clock has to.)
    monkeypatch.setattr("profiler.judging.pool.PROBLEM_OVERHEAD_S", 0.0)
    monkeypatch.setattr("profiler.judging.pool.BUILD_LIMIT_S", 0.0)
    source = (kernelbench_dir / "level1" / "19_ReLU.py").read_text()
    job = JudgeJob(source, [source], "19_ReLU.py", time_limit=0.001)
    assert job.deadline == pytest.approx(0.003)
    with pytest.raises(JudgeError, match="longer than"):
        run_worker(job, None)


@pytest.mark.usefixtures("unconfined")  # the candidate reports its pid in a file of tmp_path
def test_stopping_a_worker_ends_the_sandbox_it_started(kernelbench_dir: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "sandbox.pid"
    source = (kernelbench_dir / "level1" / "19_ReLU.py").read_text()
    hanging = hanging_candidate(source, pid_file)
    live = LiveWorkers()
    errors: list[BaseException] = []

    def judge() -> None:
        try:
            run_worker(JudgeJob(source, [hanging], "19_ReLU.py", time_limit=120.0), None, live)
        except BaseException as exc:  # the worker is stopped: JudgeError, recorded for the check below
            errors.append(exc)

    thread = threading.Thread(target=judge)
    thread.start()
    sandbox_pid = pid_once_running(pid_file)
    stop_workers(live.stop())
    thread.join(timeout=30)
    assert not thread.is_alive() and errors and isinstance(errors[0], JudgeError)
    assert gone(sandbox_pid, 5), f"sandbox process {sandbox_pid} outlived its stopped worker"


@pytest.mark.usefixtures("unconfined")  # the candidate reports its pid in a file of tmp_path
def test_killing_dice_bench_outright_ends_its_workers_and_sandboxes(kernelbench_dir: Path, tmp_path: Path) -> None:
    """SIGKILL (or a closed terminal) gives `dice bench` no chance to stop its workers, which
    live in sessions of their own: they must die with it rather than judge on."""
    import signal
    import subprocess
    import sys

    problems, solutions = tmp_path / "problems" / "level1", tmp_path / "solutions" / "level1"
    problems.mkdir(parents=True)
    solutions.mkdir(parents=True)
    source = (kernelbench_dir / "level1" / "19_ReLU.py").read_text()
    (problems / "19_ReLU.py").write_text(source)
    pid_file = tmp_path / "sandbox.pid"
    (solutions / "19_ReLU.hang.py").write_text(hanging_candidate(source, pid_file))
    bench = subprocess.Popen([sys.executable, "-m", "dice_lsp.cli", "bench", str(tmp_path / "problems"),
                              "--solutions", str(tmp_path / "solutions"), "--out", str(tmp_path / "out")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        sandbox_pid = pid_once_running(pid_file)
    finally:
        bench.send_signal(signal.SIGKILL)
        bench.wait()
    if not gone(sandbox_pid):
        os.kill(sandbox_pid, signal.SIGKILL)
        pytest.fail(f"sandbox process {sandbox_pid} outlived the killed dice bench")


@pytest.mark.usefixtures("unconfined")  # the candidate reports its pid in a file of tmp_path
def test_ctrl_c_stops_dice_bench_within_seconds_and_starts_no_queued_problem(
        kernelbench_dir: Path, tmp_path: Path) -> None:
    """SIGINT as a terminal sends it: the running problem is stopped, and the problems still
    queued never start (before, a worker thread took the next one while the first was
    being stopped, and the run waited it out)."""
    import signal
    import subprocess
    import sys

    problems, solutions = tmp_path / "problems" / "level1", tmp_path / "solutions" / "level1"
    problems.mkdir(parents=True)
    solutions.mkdir(parents=True)
    source = (kernelbench_dir / "level1" / "19_ReLU.py").read_text()
    names = [f"{i}_ReLU" for i in range(1, 4)]
    for name in names:
        (problems / f"{name}.py").write_text(source)
        (solutions / f"{name}.hang.py").write_text(hanging_candidate(source, tmp_path / f"{name}.pid"))
    one_cpu = {sorted(os.sched_getaffinity(0))[0]}  # one CPU: one judge slot, the others queue
    bench = subprocess.Popen([sys.executable, "-m", "dice_lsp.cli", "bench", str(tmp_path / "problems"),
                              "--solutions", str(tmp_path / "solutions"), "--out", str(tmp_path / "out")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
                             preexec_fn=lambda: foreground_on(one_cpu))
    try:
        first = pid_once_running(tmp_path / f"{names[0]}.pid")
        interrupted = time.monotonic()
        bench.send_signal(signal.SIGINT)
        _, stderr = bench.communicate(timeout=30)
        took = time.monotonic() - interrupted
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    assert bench.returncode == 130 and "stopped; continue with the same command and --resume" in stderr
    assert took < 15, f"dice bench took {took:.0f} s to stop"
    assert gone(first, 5)
    assert [name for name in names[1:] if (tmp_path / f"{name}.pid").exists()] == []
