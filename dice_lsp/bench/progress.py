"""What `dice bench` shows on stderr while it judges: the phase of each problem.

Phases: queued, building (its candidates' extensions are being built), waiting for GPU
(built, the GPU is busy with earlier problems), timing (its runs on the GPU), then done with
its verdict. Where there is no GPU to judge on, nothing waits for one or is timed: a problem
built ahead is "built", then loaded and compile-checked ("loading, not timed: no GPU"); one
that was not (no second CPU to build ahead on) is "next to judge", then built as it loads
("building and loading, not timed: no GPU"). On a terminal one line is
rewritten in place (counts per phase, the problem on the GPU, the last verdict, the rate);
otherwise (logs) one plain line per change. The rate is over the whole run's wall time, since
`started` (generation included).
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from dice_lsp.bench.stats import counted

PHASES = ("queued", "building", "waiting for GPU", "timing", "done")
# What a phase is called where there is no GPU: nothing waits for one, nothing is timed. The
# first words are a problem's built ahead, the second one's that builds only as it loads.
NO_GPU_WORDS = {"waiting for GPU": ("built", "next to judge"),
                "timing": ("loading, not timed: no GPU", "building and loading, not timed: no GPU")}


def verdict_words(verdicts: list[dict[str, Any]], error: str | None = None) -> str:
    """A problem's outcome in a few words: its best counted candidate's, else its statuses."""
    if error is not None:
        return f"error: {error[:80]}"
    correct = [v for v in verdicts if counted(v) and v.get("correct") is True]
    if correct:
        timed = [v["speedup"] for v in correct if v.get("speedup") is not None]
        return f"correct, {max(timed):.2f}x" if timed else "correct"
    statuses = sorted({str(v.get("status")) for v in verdicts})
    return ", ".join(statuses) or "no candidate"


class JudgeProgress:
    def __init__(self, names: list[str], stream: TextIO | None = None, *, gpu: bool = True,
                 started: float | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.names = names
        self.phases = {name: "queued" for name in names}
        self.judged = 0  # candidates
        self.gpu = gpu
        self.started = time.monotonic() if started is None else started  # the run's start (time.monotonic)
        self.last = ""
        self.history: list[tuple[str, str]] = []   # (problem, phase), in the order they came

    def phase(self, name: str, phase: str) -> None:
        if PHASES.index(phase) <= PHASES.index(self.phases[name]):
            return
        self.phases[name] = phase
        self.history.append((name, phase))
        self._show(f"{name}: {self.words(name, phase)}")

    def words(self, name: str, phase: str) -> str:
        if self.gpu or phase not in NO_GPU_WORDS:
            return phase
        built_ahead, builds_as_it_loads = NO_GPU_WORDS[phase]
        return built_ahead if (name, "building") in self.history else builds_as_it_loads

    def done(self, name: str, candidates: int, words: str) -> None:
        self.phases[name] = "done"
        self.history.append((name, "done"))
        self.judged += candidates
        self.last = f"{name}: {words}"
        self._show(f"{name}: done, {words}")

    def rate(self) -> float:
        """Candidates judged per minute of the run so far."""
        minutes = (time.monotonic() - self.started) / 60
        return self.judged / minutes if minutes > 0 else 0.0

    def line(self) -> str:
        count = {p: sum(1 for v in self.phases.values() if v == p) for p in PHASES}
        on_gpu = [n for n in self.names if self.phases[n] == "timing"]
        parts = [f"judged {count['done']}/{len(self.names)}", f"building {count['building']}"]
        if self.gpu:
            parts.append(f"waiting for GPU {count['waiting for GPU']}")
            if on_gpu:
                parts.append("timing " + ", ".join(on_gpu))
        elif on_gpu:
            parts.append("loading " + ", ".join(on_gpu))
        if self.last:
            parts.append("last " + self.last)
        parts.append(f"{self.rate():.1f} candidates/min")
        return " | ".join(parts)

    def _show(self, change: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K" + self.line()[:200])
        else:
            elapsed = time.monotonic() - self.started
            self.stream.write(f"[judging {elapsed:6.0f} s] {change}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
        self.stream.write(f"dice bench: judged {self.judged} candidate(s) of {len(self.names)} problem(s); the run "
                          f"took {time.monotonic() - self.started:.0f} s ({self.rate():.1f} candidates/min)\n")
        self.stream.flush()
