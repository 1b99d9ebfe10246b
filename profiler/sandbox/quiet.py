"""Warm-ups and timed batches kept apart in one judging process.

A sandbox started ahead of its request (a pool's spare, a verdict's pre-started sandbox)
spends its first seconds starting an interpreter and importing torch, and for a "cuda"
set-up making a CUDA context: seconds of CPU, memory traffic and, for the context, work on
the GPU. Beside a run whose batches are open, that cost lands in the time the judge's clock
sees outside the run's timed calls, and an honest kernel is charged for it
(profiler.verdict.rules.clock_excess flags `escaped_clock`). So, within this process:
- a timed batch is granted (profiler.sandbox.clock.JudgeClock) only once no warm-up started
  here is under way; the clock adds the wait to its `held_s`, which the time limit leaves out
  (profiler.sandbox.watch), and the batch's window opens after it;
- a warm-up (start_harness with a set-up) starts only while no run's batches are open: from
  a clock's first grant to its end.
A warm-up that takes longer than WARM_HOLD_S holds no grant past it (its own pool discards a
spare that slow); a start that waits longer than TIMED_HOLD_S goes ahead. Neither waits on
the other, so neither can wait for ever. Other judging processes (one `dice bench` worker per
GPU) are not seen: each is the only judge on its GPU, and shares the CPUs as it would anyway.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

WARM_HOLD_S = 120.0  # profiler.sandbox.pool.WARM_LIMIT_S: no warm-up runs longer unnoticed
TIMED_HOLD_S = 600.0  # beyond the longest run's time limit
_POLL_S = 0.02
_STOP_POLL_S = 0.25  # how often a held start looks at its stop()

_changed = threading.Condition()
_warming: list = []  # profiler.sandbox.Started whose set-up has not ended
_timed = 0  # clocks whose batches are open


def _still_warming(now: float) -> list:
    """(under _changed) The warm-ups under way: not ready, alive, and younger than WARM_HOLD_S."""
    _warming[:] = [s for s in _warming if not s.phase_reader.ready.is_set() and s.alive()
                   and now - s.spawned < WARM_HOLD_S]
    return _warming


def warm_up(started) -> None:
    """`started` (a harness with a set-up) has begun its warm-up: grants wait for its end."""
    with _changed:
        _warming.append(started)


def hold_for_warm_ups() -> float:
    """Wait until no warm-up is under way; the seconds waited."""
    began = time.monotonic()
    with _changed:
        while _still_warming(time.monotonic()):
            _changed.wait(_POLL_S)  # a warm-up's end is its reader's event: looked at, not notified
    return time.monotonic() - began


def hold_for_timed_runs(stop: Callable[[], bool] | None = None) -> float:
    """Wait (at most TIMED_HOLD_S, or until stop() is true) until no run's batches are open;
    the seconds waited."""
    began = time.monotonic()
    with _changed:
        while _timed and time.monotonic() - began < TIMED_HOLD_S and not (stop is not None and stop()):
            _changed.wait(_STOP_POLL_S)
    return time.monotonic() - began


def timed_opened() -> None:
    global _timed
    with _changed:
        _timed += 1


def timed_closed() -> None:
    global _timed
    with _changed:
        _timed -= 1
        _changed.notify_all()


def state() -> tuple[int, int]:
    """(warm-ups under way, runs with batches open): for tests and diagnostics."""
    with _changed:
        return len(_still_warming(time.monotonic())), _timed
