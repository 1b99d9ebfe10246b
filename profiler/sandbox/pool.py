"""Pre-started sandbox processes: a harness that has already started, imported what its kind
of request needs and (for a .cu request, on a GPU) made its CUDA context, waiting for the one
request it will run (warm_kind says which requests are pre-started, with which set-up).

A spare is a sandbox like any other (profiler.sandbox.start_harness: the same allowlisted
environment, resource limits, fresh folder, keeper, pipes); it only starts earlier. It is
handed exactly one request, with that run's own nonce, and ends with it; the clock of the
time limit starts at the hand-over. A spare that dies before it is claimed, or is not ready
within WARM_LIMIT_S, is killed and replaced; spares left unclaimed for IDLE_S are let go
(their GPU memory back) until the next request.

One thread of this pool starts every spare and lives as long as they do: the keeper dies
with the thread that started it (PR_SET_PDEATHSIG), so no spare is started from a thread
that may end first. profiler.sandbox.POOL, the pool run_sandboxed()
claims from, shuts down (spares killed, folders removed) at interpreter exit.

DICE_SANDBOX_POOL sets how many spares are kept ready (default 4); 0 turns the pool off,
and with it everything that judges ahead of its turn (profiler.judge): each candidate is
then started, checked and run at its turn, as before the pool.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from profiler.machine import settings
from profiler.sandbox.isolation import isolation

POOL_ENV = settings.SANDBOX_POOL
# As many as the editor's default request has candidates (dice_lsp.core.config: 4), so that
# one *Optimize* finds every sandbox warm: on the H200 (2026-12-03) a burst of 8 candidates
# with 2 kept waited ~2 s for the spares it started (a warm-up takes 1-2 s beside 8 nvcc
# checks). Each spare is a process with a CUDA context, let go after IDLE_S unused.
DEFAULT_KEEP = settings.DEFAULT_SANDBOX_POOL
MAX_SPARES = settings.MAX_SANDBOX_POOL  # at most this many at once, however many candidates are announced
WARM_LIMIT_S = 120.0
IDLE_S = 600.0
CHECK_S = 1.0  # how often the pool's thread looks at its spares when nothing wakes it


def warm_kind(kind: str) -> str | None:
    """The set-up a spare does for a request of `kind` (profiler.run.harness.warm_up), or None:
    such requests start a fresh process.
    - "cuda": a .cu request runs no candidate host code, and its set-up (CuPy, the CUDA
      context) is the same for every candidate.
    - "torch" (torch and the runner imported; no CUDA context, see harness.warm_up):
      KernelBench requests without a build folder of their own (Model alone,
      torch.compile(Model)), and only where sandboxes run in namespaces of their own
      (profiler.sandbox.isolation): a KernelBench candidate's Python runs in its process, and
      a spare waiting beside it must be out of its reach."""
    if kind == "cuda":
        return "cuda"
    if kind in ("kernelbench", "torch_compile"):
        return "torch" if isolation() else None
    return None


def kept() -> int:
    """How many spares to keep ready, from DICE_SANDBOX_POOL (0: no pool)."""
    return settings.current().sandbox_pool


def enabled() -> bool:
    return kept() > 0


def warmed_up(spare, warm_limit_s: float) -> bool:
    """Wait for a claimed spare's warm-up to end; False if it died or took too long (it is
    then not handed its request: its death must never be the verdict of a candidate)."""
    deadline = spare.spawned + warm_limit_s
    while not spare.phase_reader.ready.is_set():
        if not spare.alive() or time.monotonic() > deadline:
            return False
        spare.phase_reader.ready.wait(0.02)
    return spare.alive()


class SandboxPool:
    """Spares of one set-up and time limit (a request that needs another starts fresh, and the
    pool turns to it)."""

    def __init__(self, start: Callable, warm_for: Callable[[str], str | None] = warm_kind,
                 keep: Callable[[], int] = kept, warm_limit_s: float = WARM_LIMIT_S, idle_s: float = IDLE_S):
        """`start(time_limit, warm=setup, stop=...)` starts a spare (profiler.sandbox.start_harness);
        `warm_for(request kind)` is the set-up a request of that kind needs, or None (not pooled)."""
        self.start, self.warm_for, self.keep = start, warm_for, keep
        self.warm_limit_s, self.idle_s = warm_limit_s, idle_s
        self.spares: list = []  # profiler.sandbox.Started, oldest first
        self.target: tuple[str, float] | None = None  # (set-up, time_limit) the spares are for
        self.pending = 0  # candidates announced by reserve() and not yet claimed
        self.last_used = time.monotonic()
        self.replaced = 0  # spares killed unused (dead, not ready in time, or of an old target)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._stale: list = []  # spares of an old target, for the thread to kill
        # reserve() waits until the thread has started what it asked for (asked: reserve()s
        # so far; tended: those the thread had seen when it last finished a round).
        self._rounds = threading.Condition()
        self._asked = self._tended = 0

    # ------------------------------------------------------------------ callers

    def reserve(self, kind: str, time_limit: float, count: int) -> None:
        """`count` requests of this kind are coming: have spares started for them now."""
        setup = self.warm_for(kind)
        if setup is None or self.keep() <= 0:
            return
        with self._lock:
            if self._closed:
                return
            self._retarget(setup, time_limit)
            self.pending = min(MAX_SPARES, self.pending + count)
            self.last_used = time.monotonic()
        self._ensure_thread()
        with self._rounds:
            self._asked += 1
            asked = self._asked
            self._wake.set()
            # Starting a process takes milliseconds (its set-up runs in it): the first claim
            # that follows finds the spares started.
            self._rounds.wait_for(lambda: self._tended >= asked or self._closed, timeout=10.0)

    def claim(self, kind: str, time_limit: float):
        """A spare for this request (the caller runs it and removes its folder), or None:
        start a fresh process. A ready spare is taken first, else the oldest still starting,
        once its warm-up has ended: a spare that dies in its warm-up (or is not ready within
        warm_limit_s) is discarded and None returned, so that its death is never the verdict
        of the candidate it was meant for."""
        setup = self.warm_for(kind)
        if setup is None or self.keep() <= 0:
            return None
        with self._lock:
            if self._closed:
                return None
            self.last_used = time.monotonic()
            self.pending = max(0, self.pending - 1)
            if self.target != (setup, time_limit):
                self._retarget(setup, time_limit)
                found = None
            else:
                alive = [s for s in self.spares if s.alive()]
                found = next((s for s in alive if s.phase_reader.ready.is_set()), alive[0] if alive else None)
                if found is not None:
                    self.spares.remove(found)
        self._ensure_thread()
        self._wake.set()  # refill
        if found is not None and not warmed_up(found, self.warm_limit_s):
            found.discard()
            return None
        return found

    def drain(self) -> None:
        """Kill every spare now; none is started again until the next reserve() or claim()."""
        with self._lock:
            self.target, self.pending = None, 0
        self._discard(self._take_all())

    def shutdown(self) -> None:
        """Kill every spare and stop the pool's thread; claims start fresh processes after."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join()
        self._discard(self._take_all())

    # ------------------------------------------------------------------ the pool's thread

    def _retarget(self, setup: str, time_limit: float) -> None:
        """(under the lock) Spares of another set-up or limit are no use: they go."""
        if self.target != (setup, time_limit):
            self.target = (setup, time_limit)
            self._stale += self.spares
            self.spares = []

    def _take_all(self) -> list:
        with self._lock:
            spares, self.spares = [*self.spares, *self._stale], []
            self._stale = []
        return spares

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._loop, name="dice-sandbox-pool", daemon=True)
                self._thread.start()

    def _discard(self, spares: list) -> None:
        for spare in spares:
            spare.discard()

    def _loop(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._closed:
                        return
                with self._rounds:
                    seen = self._asked
                self._wake.clear()
                self._tend()
                with self._rounds:
                    self._tended = seen
                    self._rounds.notify_all()
                self._wake.wait(CHECK_S)
        finally:
            self._discard(self._take_all())  # the keepers die with this thread anyway

    def _tend(self) -> None:
        """Drop dead, stuck and stale spares; start spares up to what is wanted."""
        now = time.monotonic()
        with self._lock:
            gone = [s for s in self.spares if not s.alive()
                    or (not s.phase_reader.ready.is_set() and now - s.spawned > self.warm_limit_s)]
            gone += self._stale
            self._stale = []
            self.spares = [s for s in self.spares if s not in gone]
            if now - self.last_used > self.idle_s:  # nobody asked for a while: give the GPU back
                gone += self.spares
                self.spares, self.pending = [], 0
                wanted = 0
            else:
                wanted = min(MAX_SPARES, max(self.keep(), self.pending))
            missing = wanted - len(self.spares) if self.target is not None else 0
            target = self.target
            self.replaced += len(gone)
        self._discard(gone)
        for _ in range(max(0, missing)):
            spare = self.start(target[1], warm=target[0], stop=lambda: self._closed or self.target != target)
            with self._lock:
                if self._closed or self.target != target:
                    stale = True
                else:
                    self.spares.append(spare)
                    stale = False
            if stale:
                spare.discard()
                return

