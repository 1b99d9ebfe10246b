"""Turns on the GPU (profiler.sandbox.gpu_turn): one run at a time on each GPU, across threads
and processes, and a sandboxed run waits for its turn before any candidate code runs, the
wait left out of its time limit. These run on the CPU: the turn is a lock file, and a
sandbox that sees the GPU takes it whether or not a GPU is there."""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import profiler
from profiler.sandbox import gpu_turn
from profiler.sandbox.gpu_turn import GpuTurn, device_key, torch_device_key

REPO = Path(__file__).resolve().parents[3]

_spec = importlib.util.spec_from_file_location("sandbox_cases", Path(__file__).parent.parent / "sandbox_cases.py")
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)


@pytest.fixture(autouse=True)
def own_lock_folder(tmp_path, monkeypatch):
    """Turns of this test's own (the user's real ones are in /tmp/dice-lsp-gpu-<uid>)."""
    monkeypatch.setattr(gpu_turn, "FOLDER", tmp_path)
    return tmp_path / f"dice-lsp-gpu-{os.getuid()}"


@pytest.mark.parametrize(("visible", "env", "index", "key"), [
    (None, None, 0, "0"),
    (None, None, 1, "1"),
    ("2,3", None, 0, "2"),
    ("2,3", None, 1, "3"),
    ("2", None, 1, None),  # no second device
    ("GPU-8f1c/../x", None, 0, "GPU-8f1c_.._x"),  # a name, never a path
    ("0", {"CUDA_VISIBLE_DEVICES": ""}, 0, None),  # the build sandboxes' hidden GPU
    ("-1", None, 0, None),
    ("1,-1,2", None, 2, None),  # CUDA stops reading at the first bad entry
    (None, {"CUDA_VISIBLE_DEVICES": "5"}, 0, "5"),
])
def test_a_runs_gpu_is_named_as_cuda_reads_the_variable(monkeypatch, visible, env, index, key):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert device_key(env, index) == key


@pytest.mark.parametrize(("device", "key"), [
    ("cuda", "2"), ("cuda:0", "2"), ("cuda:1", "3"), ("cuda:2", None), ("cpu", None), ("http://localhost:30000", None),
])
def test_a_torch_device_is_named_in_this_process_numbering(monkeypatch, device, key):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert torch_device_key(device) == key


def test_one_turn_at_a_time_on_a_gpu_and_none_between_gpus(own_lock_folder):
    first, second, other = GpuTurn("0"), GpuTurn("0"), GpuTurn("1")
    assert first.try_acquire() and first.held
    assert first.try_acquire()  # held already: taking it again is no wait
    assert not second.try_acquire()  # the same process, another run: it waits as another process would
    assert other.try_acquire()  # another GPU
    first.release()
    assert second.try_acquire()
    assert not first.try_acquire()  # a released turn is never taken again
    second.release()
    other.release()
    assert own_lock_folder.stat().st_mode & 0o777 == 0o700
    lock = own_lock_folder / "0.lock"
    assert lock.stat().st_mode & 0o777 == 0o200  # write-only: a sandboxed candidate cannot open it


def test_a_holder_that_wants_the_gpu_again_at_once_waits_behind_the_one_waiting():
    """Back-to-back runs (dice bench) cannot starve a waiting job: the waiter holds the place
    next in line, which the holder's next run must take too."""
    holder, waiter = GpuTurn("0"), GpuTurn("0")
    assert holder.try_acquire()
    assert not waiter.try_acquire()  # waits, next in line
    holder.release()
    again = GpuTurn("0")  # the holder's next run, at once
    assert not again.try_acquire()
    assert waiter.try_acquire()
    assert not again.try_acquire()  # now next in line itself
    waiter.release()
    assert again.try_acquire()
    again.release()


def test_a_waiter_that_gives_up_leaves_its_place_in_line():
    holder, quitter, patient = GpuTurn("0"), GpuTurn("0"), GpuTurn("0")
    assert holder.try_acquire()
    assert not quitter.acquire(lambda: True)
    assert not patient.try_acquire()  # the place in line was free: it is patient's now
    holder.release()
    assert patient.try_acquire()
    patient.release()
    quitter.release()


def test_a_waiting_turn_is_taken_when_the_holder_lets_go_and_gives_up_when_stopped():
    holder, waiter = GpuTurn("0"), GpuTurn("0")
    assert holder.try_acquire()
    taken = []
    waiting = threading.Thread(target=lambda: taken.append(waiter.acquire(lambda: False)))
    waiting.start()
    deadline = time.monotonic() + 30
    while waiter._next is None:  # in line: it holds the place next
        assert time.monotonic() < deadline, "the waiter never got in line"
        time.sleep(0.01)
    time.sleep(0.3)
    assert not waiter.held  # the holder still has it
    holder.release()
    waiting.join(30)
    assert taken == [True] and waiter.held and waiter.waited_s >= 0.3
    stopped = GpuTurn("0")
    assert not stopped.acquire(lambda: True)
    abandoned = GpuTurn("0")
    threading.Timer(0.2, abandoned.release).start()  # the run ended while it waited
    assert not abandoned.acquire(lambda: False)
    waiter.release()
    assert GpuTurn("0").try_acquire()


def test_another_process_holds_the_turn_until_it_dies(tmp_path):
    """flock across processes, let go by the kernel when the holder is killed."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, pathlib; from profiler.sandbox import gpu_turn; "
         f"gpu_turn.FOLDER = pathlib.Path({str(tmp_path)!r}); t = gpu_turn.GpuTurn('0'); "
         "assert t.try_acquire(); print('held', flush=True); sys.stdin.read()"],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        mine = GpuTurn("0")
        assert not mine.try_acquire()
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        assert mine.acquire(lambda: False)
        mine.release()
    finally:
        holder.kill()
        holder.wait()


def test_without_a_lock_folder_turns_are_free_and_say_so_once(own_lock_folder, caplog):
    own_lock_folder.write_text("")  # a file where the folder should be
    with caplog.at_level(logging.WARNING, logger=gpu_turn.__name__):
        turns = [GpuTurn("0"), GpuTurn("0")]
        assert all(t.try_acquire() for t in turns)  # nothing is excluded, nothing breaks
    assert sum("no GPU turns" in r.getMessage() and str(own_lock_folder) in r.getMessage() for r in caplog.records) == 1
    for t in turns:
        t.release()


@pytest.mark.usefixtures("unconfined")
def test_a_sandboxed_run_waits_for_the_gpu_before_candidate_code_and_the_wait_is_not_its_time(
        tmp_path, monkeypatch):
    """While another run holds the GPU, no candidate code of this one runs; once it lets go the
    candidate runs with its whole time limit (a 3 s wait against a 2 s limit is no timeout)."""
    marker = tmp_path / "ran"
    candidate = cases.candidate(f"import time\nopen({str(marker)!r}, 'a').write(f'{{time.time()}}\\n')\n")
    held = GpuTurn(device_key())
    assert held.try_acquire()
    verdicts: list = []
    judging = threading.Thread(target=lambda: verdicts.extend(
        profiler.judge(cases.BASELINE, [candidate], "relu.py", time_limit=2.0)))
    judging.start()
    time.sleep(3.0)
    released = time.time()
    assert not marker.exists()  # no candidate code ran while the GPU was another's
    held.release()
    judging.join(120)
    assert not judging.is_alive()
    (verdict,) = verdicts
    assert verdict.status != "timeout", verdict.message
    assert marker.exists() and min(float(line) for line in marker.read_text().split()) >= released
    if profiler.gpu_name() is None:
        assert verdict.status == "no_gpu", verdict.message
