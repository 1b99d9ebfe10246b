"""Warm-ups and timed batches kept apart (profiler.sandbox.quiet), with real harness
processes warming up (torch imported, as a pre-started KernelBench sandbox is) and a real
judge's clock on real pipes."""

from __future__ import annotations

import threading
import time

from profiler.sandbox import quiet
from profiler.sandbox.clock import GRANT_PAIRS
from profiler.sandbox.start import start_harness
from tests.profiler.clock_cases import ClockPipes


def _wait_until_quiet(limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while quiet.state() != (0, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert quiet.state() == (0, 0), "an earlier test left a warm-up or a timed run open"


def test_no_batch_is_granted_while_a_sandbox_beside_it_warms_up():
    _wait_until_quiet()
    spare = start_harness(120.0, warm="torch")
    try:
        assert not spare.phase_reader.ready.is_set()
        with ClockPipes() as clock:
            asked = time.monotonic()
            grant = clock.harness.batch(4)
            granted = time.monotonic()
            # The grant came only once the spare's set-up (torch's import: seconds) had ended.
            assert spare.phase_reader.ready.is_set(), "a batch was granted while a warm-up ran beside it"
            assert grant is not None and grant["pairs"] == GRANT_PAIRS
            assert clock.judge.held() >= 0.2 and clock.judge.held() <= granted - asked + 0.05
            assert clock.judge.log[0]["go"] >= asked + clock.judge.held() - 0.05  # its window opens after the hold
            clock.harness.close({"pairs": 4})
            again = time.monotonic()
            assert clock.harness.batch(4) is not None  # nothing warming now: granted at once
            assert time.monotonic() - again < 1.0
            clock.harness.close({"pairs": 4})
    finally:
        spare.discard()
    _wait_until_quiet()


def test_a_warm_up_waits_until_no_run_has_batches_open():
    _wait_until_quiet()
    started: list = []
    with ClockPipes() as clock:
        assert clock.harness.batch(2) is not None  # the run's batches are open
        assert quiet.state() == (0, 1)
        starter = threading.Thread(target=lambda: started.append(start_harness(120.0, warm="torch")))
        starter.start()
        starter.join(1.5)
        assert starter.is_alive() and not started, "a warm-up started while a run's batches were open"
        clock.harness.close({"pairs": 2})
        assert clock.harness.batch(2) is not None  # still open: a batch after a batch
        starter.join(0.5)
        assert starter.is_alive()
        clock.harness.close({"pairs": 2})
        clock.end()
        ended = time.monotonic()
    starter.join(30)
    try:
        assert started and started[0].spawned >= ended - 0.05  # started once the run's clock had ended
        assert quiet.state()[1] == 0
    finally:
        for spare in started:
            spare.discard()
    _wait_until_quiet()


def test_a_held_start_ends_its_wait_when_told_to_stop():
    """A pool shutting down is not held by a run's open batches (SandboxPool passes stop)."""
    _wait_until_quiet()
    with ClockPipes() as clock:
        assert clock.harness.batch(1) is not None
        began = time.monotonic()
        assert quiet.hold_for_timed_runs(stop=lambda: time.monotonic() - began > 0.3) < 2.0
        clock.harness.close({"pairs": 1})
    _wait_until_quiet()


def test_a_warm_up_that_dies_holds_no_grant():
    _wait_until_quiet()
    spare = start_harness(120.0, warm="torch")
    spare.discard()  # killed in its warm-up
    with ClockPipes() as clock:
        asked = time.monotonic()
        assert clock.harness.batch(1) is not None
        assert time.monotonic() - asked < 2.0
        clock.harness.close({"pairs": 1})
    _wait_until_quiet()
