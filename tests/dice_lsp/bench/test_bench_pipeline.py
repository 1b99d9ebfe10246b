"""The judging pipeline of `dice bench` on this machine (no GPU), on real problem files: the
order the worker builds and judges in, the reference run once per problem, the phases it
reports, builds niced and paused, and a resumed run that judges only what is left.

The pipeline runs with the real profiler; where a GPU would be needed for a step to do
anything, the step still runs (a sandbox that finds no GPU), and a recorder around the
profiler's KernelBenchProblem notes when each step starts and ends.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dice_lsp.bench.progress import JudgeProgress
from dice_lsp.bench.results import load
from dice_lsp.bench.tasks import splice_model_new
from dice_lsp.cli import main
from profiler.judging import problem as problems
from profiler.judging import schedule, worker

from .conftest import copy_problems

pytestmark = pytest.mark.timeout(600)


class RecordingProblem(problems.KernelBenchProblem):
    """The profiler's problem, each step noted (problem, step, start, end) in `log`. Without a
    GPU nothing would be built ahead: here every candidate that parses is (the build's
    sandbox then finds it cannot build, which decides nothing, as on a GPU machine)."""

    log: list[tuple[str, str, float, float]] = []   # step: "reference", or "build"/"verdict" LABEL
    build_outcomes: list[str] = []
    pause: schedule.BuildPause | None = None   # the pipeline's
    held_at_start: list[str] = []             # GPU steps that began with the builds stopped

    def _noted(self, step: str, call):
        if not step.startswith("build") and self.pause is not None and self.pause.held.is_set():
            self.held_at_start.append(step)
        start = time.monotonic()
        try:
            return call()
        finally:
            self.log.append((Path(self.path).stem, step, start, time.monotonic()))

    def buildable(self, candidates):
        return [c for c in dict.fromkeys(candidates) if not self.checks.parse_errors(c)]

    def build(self, candidate):
        outcome = self._noted(f"build {label(candidate)}", lambda: super(RecordingProblem, self).build(candidate))
        self.build_outcomes.append(outcome.status)
        return outcome

    def reference(self, candidates):
        return self._noted("reference", lambda: super(RecordingProblem, self).reference(candidates))

    def verdict(self, candidate):
        return self._noted(f"verdict {label(candidate)}", lambda: super(RecordingProblem, self).verdict(candidate))


# ModelNew answers in PyTorch alone (no load_inline): without a GPU their verdicts need no
# nvcc run over torch's headers, minutes on this machine; the pipeline is the same.
def torch_answer(label: str) -> str:
    return f"# answer {label}\nclass ModelNew(Model):\n    pass\n"


def label(document: str) -> str:
    return document.split("# answer ", 1)[1].split("\n", 1)[0]


def jobs_for(kernelbench_dir: Path, names: list[str], candidates: int) -> list[dict]:
    jobs = []
    for index, name in enumerate(names):
        path = kernelbench_dir / "level1" / f"{name}.py"
        source = path.read_text()
        documents = [splice_model_new(source, torch_answer(str(i))) for i in range(candidates)]
        jobs.append({"id": index, "baseline": source, "documents": documents, "path": str(path), "time_limit": 60.0})
    return jobs


def test_the_worker_builds_everything_ahead_in_order_and_judges_in_order(
        monkeypatch: pytest.MonkeyPatch, kernelbench_dir: Path) -> None:
    monkeypatch.setattr(problems, "KernelBenchProblem", RecordingProblem)
    monkeypatch.setenv(problems.BUILD_JOBS_ENV, "2")
    RecordingProblem.log, RecordingProblem.build_outcomes, RecordingProblem.held_at_start = [], [], []
    names = ["19_ReLU", "21_Sigmoid", "22_Tanh"]
    jobs = jobs_for(kernelbench_dir, names, candidates=2)
    stream = io.StringIO()
    pipeline = worker.Pipeline(jobs, worker.Events(stream))
    RecordingProblem.pause = pipeline.pause
    try:
        pipeline.run()
    finally:
        pipeline.close()
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    log = RecordingProblem.log

    # Every problem answered, in order, each with a verdict per candidate.
    answers = [e for e in events if "answer" in e]
    assert [e["id"] for e in answers] == [0, 1, 2]
    assert [len(e["answer"]["verdicts"]) for e in answers] == [len(j["documents"]) for j in jobs]
    # Builds started in problem order (a build never waits behind a later problem's) ...
    builds = sorted((start, name) for name, step, start, _ in log if step.startswith("build"))
    assert [name for _, name in builds] == sorted((name for _, name in builds), key=names.index)
    assert len(builds) == sum(len(j["documents"]) for j in jobs)
    # No build was left stopped after a GPU step (the GPU would wait for a build that is
    # stopped until it ran out of time).
    assert RecordingProblem.held_at_start == [] and "timeout" not in RecordingProblem.build_outcomes
    # ... and the GPU steps ran one problem after the other: the reference once per problem,
    # before its candidates, each candidate after its own build had ended.
    gpu = sorted((start, end, name, step) for name, step, start, end in log if not step.startswith("build"))
    assert [(name, step) for _, _, name, step in gpu] == [
        (name, step) for name, job in zip(names, jobs)
        for step in ["reference"] + [f"verdict {label(d)}" for d in job["documents"]]]
    assert all(a[1] <= b[0] for a, b in zip(gpu, gpu[1:])), "two GPU steps overlapped"
    built = {(name, step.split()[1]): end for name, step, _, end in log if step.startswith("build")}
    assert all(start >= built[name, step.split()[1]] for start, _, name, step in gpu if step != "reference")
    # Phases: each problem's only move forward and end in an answer.
    for index in range(len(names)):
        phases = [e["phase"] for e in events if e["id"] == index and "phase" in e]
        assert phases[-1] == "timing" and phases == sorted(phases, key=worker.Events.ORDER.index)
        # The first problem's reference run may start before its builds do; later problems
        # are built while earlier ones are judged.
        assert "building" in phases or index == 0


def test_build_threads_start_their_processes_niced() -> None:
    """The first problem's builds at FIRST_NICE, the others at NICE; a thread that built at NICE
    never goes back up (it cannot without privileges, and the order makes it never need to)."""
    seen: list[int] = []

    def child_nice() -> int:
        child = subprocess.Popen([sys.executable, "-c", "import os; print(os.nice(0))"], stdout=subprocess.PIPE,
                                 text=True)
        return int(child.communicate()[0])

    def spawn() -> None:
        for nice in (schedule.FIRST_NICE, schedule.NICE, schedule.FIRST_NICE):
            schedule.nice_this_thread(nice)
            seen.append(child_nice())

    thread = threading.Thread(target=spawn)
    thread.start()
    thread.join()
    assert seen == [schedule.FIRST_NICE, schedule.NICE, schedule.NICE]
    assert os.nice(0) not in schedule.BUILD_NICES  # the thread's priority, not the whole process's


def test_builds_at_either_niceness_are_paused() -> None:
    script = "import subprocess, sys; p = subprocess.Popen(['sleep', '60']); print(p.pid, flush=True); p.wait()"
    keepers = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                                preexec_fn=lambda nice=nice: os.setpriority(os.PRIO_PROCESS, 0, nice))
               for nice in schedule.BUILD_NICES]
    compilers = [int(k.stdout.readline()) for k in keepers]
    pause = schedule.BuildPause()
    try:
        pause.on_phase("timing")
        assert all(stopped(pid) for pid in compilers)
        pause.release()
        assert all(running(pid) for pid in compilers)
    finally:
        pause.close()
        for keeper in keepers:
            keeper.kill()
            keeper.wait()
        for pid in compilers:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


def stopped(pid: int, seconds: float = 5.0) -> bool:
    """Whether process `pid` is (within `seconds`: signals arrive when they arrive) stopped."""
    deadline = time.monotonic() + seconds
    while True:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "T" or time.monotonic() > deadline:
            return state == "T"
        time.sleep(0.05)


def running(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T":
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_measuring_gpu_run_stops_the_niced_builds_and_lets_them_go_after() -> None:
    """A build sandbox as the pool starts it: a keeper (this process's child, left running)
    with a niced compiler below it; a GPU run's process (not niced) is never stopped."""
    script = "import subprocess, sys; p = subprocess.Popen(['sleep', '60']); print(p.pid, flush=True); p.wait()"
    build_keeper = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                                    preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, schedule.NICE))
    gpu_keeper = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    compiler, gpu_run = int(build_keeper.stdout.readline()), int(gpu_keeper.stdout.readline())
    pause = schedule.BuildPause()
    try:
        pause.on_phase("start-up")  # nothing on the GPU yet: builds go on
        assert not stopped(compiler, seconds=0.5)
        pause.on_phase("candidate code")
        assert stopped(compiler)
        assert not stopped(gpu_run, seconds=0.5) and not stopped(build_keeper.pid, seconds=0.5)
        pause.release()
        assert running(compiler)
    finally:
        pause.close()
        for keeper in (build_keeper, gpu_keeper):
            keeper.kill()
            keeper.wait()
        for pid in (compiler, gpu_run):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_shows_each_problem_phase_one_line_on_a_terminal_and_log_lines_otherwise() -> None:
    names = ["level1/19_ReLU", "level1/21_Sigmoid"]
    for stream in (io.StringIO(), Terminal()):
        progress = JudgeProgress(names, stream)
        progress.phase(names[0], "building")
        progress.phase(names[1], "building")
        progress.phase(names[0], "timing")
        progress.phase(names[0], "building")  # late news of a build: the phase stays
        assert progress.phases == {names[0]: "timing", names[1]: "building"}
        progress.done(names[0], 2, "correct, 1.20x")
        progress.close()
        text = stream.getvalue()
        if isinstance(stream, Terminal):
            assert text.count("\r\x1b[K") == 4 and text.count("\n") == 2
            assert "judged 1/2 | building 1 | waiting for GPU 0 | last level1/19_ReLU: correct, 1.20x" in text
        else:
            lines = text.splitlines()
            assert [line.split("] ", 1)[1] for line in lines[:4]] == [
                "level1/19_ReLU: building", "level1/21_Sigmoid: building", "level1/19_ReLU: timing",
                "level1/19_ReLU: done, correct, 1.20x"]
        assert "judged 2 candidate(s) of 2 problem(s)" in text


def test_a_resumed_run_judges_only_the_problems_left(
        kernelbench_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    names = ("19_ReLU", "21_Sigmoid", "22_Tanh")
    problems = copy_problems(kernelbench_dir, tmp_path / "problems", tuple(f"level1/{n}.py" for n in names))
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    for name in names:
        (solutions / f"{name}.torch.py").write_text(torch_answer(name))
    out = tmp_path / "out"
    args = ["bench", str(problems), "--solutions", str(solutions), "--out", str(out), "--resume"]
    assert main([*args, "--limit", "1"]) == 0  # a run cut short after its first problem
    first = capsys.readouterr().err
    assert "level1/19_ReLU: done" in first and "21_Sigmoid" not in first
    judged = load(out).tasks["level1/19_ReLU"].candidates[0].verdict

    assert main(args) == 0
    second = capsys.readouterr().err
    assert "19_ReLU" not in second  # judged already: not even queued
    assert "level1/21_Sigmoid: done" in second and "level1/22_Tanh: done" in second
    run = load(out)
    assert [t.state for t in run.tasks.values()] == ["done"] * 3
    assert run.tasks["level1/19_ReLU"].candidates[0].verdict == judged
