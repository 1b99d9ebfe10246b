"""What a user can ask of `dice fill` is bounded, and what does not fit is refused with a message
that names the bound and what would fit, before anything is allocated; a worker that dies is
named for how it died. The real CLI in a subprocess, the built-in model, the real worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.model.system_memory import resident_bytes

REPO = Path(__file__).resolve().parents[3]
SAXPY = str(REPO / "examples" / "saxpy.cu")



def test_candidates_and_tokens_past_their_bounds_are_refused_before_the_model_loads(dice):
    run = dice("fill", SAXPY, "--range", "12:9-12:32", "--candidates", "10000")
    assert run.returncode == 2
    assert "argument --candidates: 10000 candidates: one request takes from 1 to 64 candidates" in run.stderr
    run = dice("fill", SAXPY, "--range", "12:9-12:32", "--max-tokens", "100000")
    assert run.returncode == 2
    assert "argument --max-tokens: 100000 tokens: one request takes from 1 to 8192 tokens" in run.stderr
    run = dice("optimize", SAXPY, "--candidates", "0")
    assert run.returncode == 2 and "0 candidates: one request takes from 1 to 64" in run.stderr


def test_a_request_larger_than_the_memory_it_may_use_is_refused_with_what_fits(dice, child_env):
    env = {**child_env, "DICE_ENGINE_MEMORY": "300M"}
    started = time.monotonic()
    run = dice("fill", SAXPY, "--range", "12:9-12:32", "--candidates", "64", env=env)
    assert run.returncode == 1, run.stderr
    assert "64 candidates of up to 40 tokens after a" in run.stderr, run.stderr
    assert "left of the 300 MiB allowed (DICE_ENGINE_MEMORY) beside the weights' 108 MiB: at most" in run.stderr
    fit = int(run.stderr.split("at most ")[1].split()[0])
    assert 1 <= fit < 64
    # What the message says fits does: the same fill with that many candidates runs.
    run = dice("fill", SAXPY, "--range", "12:9-12:32", "--candidates", str(fit), "--json", env=env)
    assert run.returncode == 0, run.stderr
    assert time.monotonic() - started < 240


def test_weights_that_cannot_fit_are_refused_before_they_are_read(dice, child_env):
    run = dice("fill", SAXPY, "--range", "12:9-12:32", env={**child_env, "DICE_ENGINE_MEMORY": "40M"})
    assert run.returncode == 1
    assert "the model's weights need 108 MiB in float32 on cpu, and 40 MiB is allowed (DICE_ENGINE_MEMORY)" \
        in run.stderr


def _worker_of(parent: int, deadline: float) -> int:
    """The engine worker the `dice` process `parent` started."""
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"engine.serving.worker" in command:
                return int(entry.name)
        time.sleep(0.05)
    raise AssertionError("the engine worker never started")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the worker through /proc (Linux)")
def test_a_worker_killed_by_a_signal_is_named_for_it(dice, child_env):
    """SIGKILL with no OOM kill counted (memory cgroup, /proc/vmstat): the signal, not "no
    output", and not memory."""
    process = subprocess.Popen([sys.executable, "-m", "dice_lsp.cli", "fill", SAXPY, "--range", "12:9-12:32"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env)
    try:
        worker = _worker_of(process.pid, time.monotonic() + 60)
        time.sleep(0.6)  # the client reads the worker's resident size twice a second
        os.kill(worker, signal.SIGKILL)
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 1
    assert "engine worker killed by signal 9 (SIGKILL; it held " in stderr, stderr
    assert "out of memory" not in stderr and "(no output)" not in stderr


class MemoryCgroup:
    """A memory cgroup of its own (v1 or v2), made for one test and removed after it."""

    def __init__(self, name: str) -> None:
        v1 = Path("/sys/fs/cgroup/memory")
        if v1.is_dir():
            self.folder, self.limit_file, self.usage_file = v1 / name, "memory.limit_in_bytes", "memory.usage_in_bytes"
        else:
            self.folder = Path("/sys/fs/cgroup") / name
            self.limit_file, self.usage_file = "memory.max", "memory.current"
        self.folder.mkdir()

    def limit(self, size: int) -> None:
        (self.folder / self.limit_file).write_text(str(size))

    def usage(self) -> int:
        return int((self.folder / self.usage_file).read_text())

    def enter(self) -> None:
        """Put the calling process in it (a Popen's preexec_fn: the child, before it runs)."""
        (self.folder / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        for _ in range(100):  # the killed processes leave it a moment after they are reaped
            try:
                self.folder.rmdir()
                return
            except OSError:
                time.sleep(0.05)


@pytest.fixture
def memory_cgroup():
    try:
        group = MemoryCgroup(f"dice-test-{os.getpid()}")
        group.limit(8 << 30)
    except OSError as exc:
        pytest.skip(f"no memory cgroup can be made here ({exc}): the test needs root and a writable cgroup fs")
    yield group
    group.remove()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the worker through /proc (Linux)")
def test_a_worker_the_oom_killer_ends_is_named_killed_for_memory(child_env, memory_cgroup):
    """The CLI and its worker in a memory cgroup whose limit drops, once the worker is decoding 64
    candidates, to a little over what they hold: the kernel's OOM killer ends the worker (the
    largest), and the user is told it was memory, with what to ask for instead."""
    command = [sys.executable, "-m", "dice_lsp.cli", "fill", SAXPY, "--range", "12:9-12:32",
               "--candidates", "64", "--max-tokens", "768"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env,
                               preexec_fn=memory_cgroup.enter)
    try:
        worker = _worker_of(process.pid, time.monotonic() + 60)
        deadline = time.monotonic() + 120
        # The model loaded (about 220 MiB) and the batch's decoding under way.
        while (resident_bytes(worker) or 0) < 400 << 20:
            assert process.poll() is None and time.monotonic() < deadline, "the fill ended before it was squeezed"
            time.sleep(0.05)
        memory_cgroup.limit(memory_cgroup.usage() + (16 << 20))
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 1, stderr
    assert stderr.startswith("dice fill: engine worker killed for memory (out of memory: the kernel's OOM killer "
                             "ended it; it held "), stderr
    assert "ask for fewer candidates or tokens, or free memory" in stderr
