"""The judge's clock and the harness's, joined by real pipes as profiler.sandbox.start joins
them: for tests of the clock, of the audited timing loop and of what holds grants back."""

from __future__ import annotations

import os

from profiler.sandbox.clock import HarnessClock, JudgeClock


class ClockPipes:
    """`judge` (JudgeClock, its thread started) and `harness` (HarnessClock) on two pipes;
    end() or leaving the block closes the harness's ends, and the judge's clock ends with them."""

    def __enter__(self):
        asks_r, asks_w = os.pipe()
        grants_r, grants_w = os.pipe()
        self.judge = JudgeClock(asks_r, grants_w)
        self.judge.start()
        self.harness = HarnessClock(asks_w, grants_r)
        self._fds = [asks_w, grants_r]
        return self

    def end(self) -> None:
        """The harness ends: it says so, its pipes close, the judge's clock ends."""
        self.harness.end()
        self.close()

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        self.judge.join(10)

    def __exit__(self, *exc):
        if self._fds:
            self.close()
