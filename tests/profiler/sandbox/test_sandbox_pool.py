"""Pre-started sandbox processes (profiler.sandbox.pool), for real on the CPU: a spare is a
sandbox like a fresh one (environment, limits, folder), runs one request and ends; a spare
that dies or never gets ready is replaced; the pool ends with its process.

The requests are KernelBench ones (their candidate's Python runs here without a GPU, so it
can report what it sees); the default pool pre-starts .cu sandboxes, whose verdicts with
and without the pool the GPU tests compare (test_gpu_cuda_judge.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profiler.judging.kernelbench import kernelbench_request
from profiler.sandbox import run_started, start_harness
from profiler.sandbox.pool import SandboxPool
from profiler.sandbox.processes import MARKER

_spec = importlib.util.spec_from_file_location("sandbox_cases", Path(__file__).parent.parent / "sandbox_cases.py")
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

# The spares report what they see in a file of tmp_path, and their host pids.
pytestmark = pytest.mark.usefixtures("unconfined")
KIND = "kernelbench"


def _only_kernelbench(kind: str) -> str | None:
    """Pool KernelBench requests, with a set-up the harness does not know (so none: these
    spares are ready in milliseconds; test_isolation.py pools the real "torch" set-up)."""
    return KIND if kind == KIND else None

LIMIT = 60.0
RECORD = """
import json, os, resource
_names = ("RLIMIT_CPU", "RLIMIT_CORE", "RLIMIT_FSIZE", "RLIMIT_NOFILE")
json.dump({{"pid": os.getpid(), "env": dict(os.environ), "cwd": os.getcwd(),
           "limits": {{n: list(resource.getrlimit(getattr(resource, n))) for n in _names}}}},
          open({path!r}, "w"))
"""


def _request(record: Path) -> dict:
    return kernelbench_request(cases.BASELINE, cases.candidate(RECORD.format(path=str(record))), "relu.py", LIMIT)


def _wait(condition, within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def _ready(pool: SandboxPool, count: int) -> list:
    _wait(lambda: len([s for s in pool.spares if s.alive() and s.phase_reader.ready.is_set()]) >= count)
    return list(pool.spares)


def _run(started, record: Path):
    try:
        return run_started(started, _request(record), LIMIT, None), json.loads(record.read_text())
    finally:
        import shutil

        shutil.rmtree(started.folder, ignore_errors=True)


def test_a_spare_is_a_fresh_sandbox_that_started_earlier(tmp_path):
    pool = SandboxPool(start_harness, warm_for=_only_kernelbench, keep=lambda: 1)
    try:
        pool.reserve(KIND, LIMIT, 1)
        (spare,) = _ready(pool, 1)
        assert pool.claim(KIND, LIMIT) is spare
        pooled_outcome, pooled = _run(spare, tmp_path / "pooled.json")
    finally:
        pool.shutdown()
    fresh_outcome, fresh = _run(start_harness(LIMIT), tmp_path / "fresh.json")
    assert pooled_outcome.process["started_s_before"] > 0 and fresh_outcome.process["started_s_before"] < 1
    assert pooled["limits"] == fresh["limits"]
    assert pooled["env"].keys() == fresh["env"].keys()
    pooled_folder, fresh_folder = Path(pooled["cwd"]).parent, Path(fresh["cwd"]).parent
    assert pooled_folder != fresh_folder and not pooled_folder.exists() and not fresh_folder.exists()
    for name, value in pooled["env"].items():
        if name != MARKER:  # each sandbox's own; the folders differ by name only
            assert value.replace(str(pooled_folder), "F") == fresh["env"][name].replace(str(fresh_folder), "F"), name
    assert pooled["env"][MARKER] != fresh["env"][MARKER]


def test_a_spare_runs_one_request_and_ends(tmp_path):
    pool = SandboxPool(start_harness, warm_for=_only_kernelbench, keep=lambda: 1)
    try:
        pool.reserve(KIND, LIMIT, 1)
        first = pool.claim(KIND, LIMIT)
        _, seen_first = _run(first, tmp_path / "first.json")
        assert first.keeper.returncode is not None and not cases.alive(seen_first["pid"])
        assert first not in pool.spares
        second = pool.claim(KIND, LIMIT)
        assert second is not None and second is not first
        _, seen_second = _run(second, tmp_path / "second.json")
        assert seen_second["pid"] != seen_first["pid"]
        # Another time limit is another sandbox: no spare of the old one is handed out.
        assert pool.claim(KIND, LIMIT + 1) is None
    finally:
        pool.shutdown()


def test_a_killed_spare_is_replaced(tmp_path):
    pool = SandboxPool(start_harness, warm_for=_only_kernelbench, keep=lambda: 1)
    try:
        pool.reserve(KIND, LIMIT, 1)
        (spare,) = _ready(pool, 1)
        os.killpg(spare.keeper.pid, signal.SIGKILL)
        _wait(lambda: pool.replaced >= 1 and spare not in pool.spares)
        (replacement,) = _ready(pool, 1)
        assert replacement is not spare and not spare.folder.exists()
        claimed = pool.claim(KIND, LIMIT)
        assert claimed is replacement
        outcome, _ = _run(claimed, tmp_path / "after.json")
        assert outcome.status == "ok", outcome.why()
    finally:
        pool.shutdown()


def test_a_spare_that_never_gets_ready_is_replaced():
    stuck = []

    def start(time_limit, warm=None, stop=None):
        started = start_harness(time_limit, warm=warm, stop=stop)
        if not stuck:  # the first one hangs before it could say it is ready, long past the limit
            os.killpg(started.keeper.pid, signal.SIGSTOP)
            started.spawned -= 3600.0
            stuck.append(started)
        return started

    # A limit no honest spare nears on a busy machine: only the stuck one is past it.
    pool = SandboxPool(start, warm_for=_only_kernelbench, keep=lambda: 1, warm_limit_s=60.0)
    try:
        pool.reserve(KIND, LIMIT, 1)
        _wait(lambda: bool(stuck))
        _wait(lambda: stuck[0].keeper.returncode is not None)
        (replacement,) = _ready(pool, 1)
        assert replacement is not stuck[0] and not stuck[0].folder.exists()
    finally:
        pool.shutdown()


def test_shutdown_kills_every_spare_and_removes_its_folder():
    pool = SandboxPool(start_harness, warm_for=_only_kernelbench, keep=lambda: 2)
    pool.reserve(KIND, LIMIT, 2)
    spares = _ready(pool, 2)
    pool.shutdown()
    assert all(s.keeper.returncode is not None and not s.folder.exists() for s in spares)
    assert not pool._thread.is_alive()
    assert pool.claim(KIND, LIMIT) is None


def test_the_default_pool_ends_with_its_process(tmp_path):
    # A CLI or server process that exits (without calling shutdown) leaves no spare behind.
    script = (
        "import json, sys, time\n"
        "from profiler.sandbox import POOL\n"
        "from profiler.sandbox.keeper import descendants\n"
        "POOL.reserve('cuda', 60.0, 2)\n"
        "deadline = time.monotonic() + 60\n"
        "while sum(s.phase_reader.ready.is_set() for s in POOL.spares) < 2 and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "spares = POOL.spares\n"
        "print(json.dumps({'pids': [p for s in spares for p in [s.keeper.pid, *descendants(s.keeper.pid)]],\n"
        "                  'folders': [str(s.folder) for s in spares]}))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "DICE_SANDBOX_POOL": "2"})
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert len(seen["folders"]) == 2 and len(seen["pids"]) >= 4  # two keepers, two harnesses
    for pid in seen["pids"]:
        cases.assert_dies(pid)
    assert not any(Path(f).exists() for f in seen["folders"])


def test_pool_off_starts_nothing(monkeypatch):
    monkeypatch.setenv("DICE_SANDBOX_POOL", "0")
    pool = SandboxPool(start_harness)
    pool.reserve("cuda", LIMIT, 4)
    assert pool.claim("cuda", LIMIT) is None and pool._thread is None


def test_a_spare_that_never_ends_its_warm_up_is_not_handed_a_request():
    """A spare that dies in its warm-up must not make that death a candidate's verdict (on the
    H200, a warm-up fault became a hanging candidate's "crash"): a claim waits for the warm-up
    to end, and gets no spare if it does not."""
    stopped = []

    def start(time_limit, warm=None, stop=None):
        started = start_harness(time_limit, warm=warm, stop=stop)
        os.killpg(started.keeper.pid, signal.SIGSTOP)  # never gets to say it is ready
        stopped.append(started)
        return started

    pool = SandboxPool(start, warm_for=_only_kernelbench, keep=lambda: 1, warm_limit_s=2.0)
    try:
        pool.reserve(KIND, LIMIT, 1)
        _wait(lambda: bool(stopped) and bool(pool.spares))
        assert pool.claim(KIND, LIMIT) is None  # a fresh process for this one
        assert stopped[0].keeper.returncode is not None and not stopped[0].folder.exists()
    finally:
        pool.shutdown()  # SIGKILL ends stopped processes too


def test_the_warm_up_kernel_is_launched_with_every_parameter_it_takes():
    from profiler.run.cuda import WARM_PARAMS, WARM_SOURCE
    from profiler.source.cuda_source import find_kernels

    (kernel,) = find_kernels(WARM_SOURCE)
    assert [(p["name"], p["pointer"]) for p in WARM_PARAMS] == [(p.name, p.pointer) for p in kernel.params]


def test_turns_go_to_one_run_at_a_time_in_candidate_order():
    """The .cu judge's turns (profiler.judging.cuda._Turns): run i's turn comes when every run before
    it has ended, whatever order the runs end in, each once, with its progress."""
    from profiler.judging.cuda import _Turns

    progress: list[tuple[int, int]] = []
    turns = _Turns(4, lambda index, total: progress.append((index, total)))
    given = lambda: [turns.event(i).is_set() for i in range(4)]  # noqa: E731
    assert given() == [True, False, False, False]
    turns.passed(2)  # ended early (it never ran): run 0 still has the GPU
    turns.passed(1)
    assert given() == [True, False, False, False]
    turns.passed(0)
    assert given() == [True, True, True, True]
    turns.passed(0)
    turns.passed(3)
    assert progress == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_a_turn_is_given_even_when_reporting_its_progress_fails():
    """A progress callback that raises (the editor gone) cannot leave a run waiting for a
    turn that was already its own: the turn is given before its progress is reported."""
    from profiler.judging.cuda import _Turns

    def report(index: int, total: int) -> None:
        if index > 1:
            raise BrokenPipeError("the editor is gone")

    turns = _Turns(3, report)
    with pytest.raises(BrokenPipeError):
        turns.passed(0)
    assert turns.event(1).is_set()
