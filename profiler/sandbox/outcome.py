"""What one sandboxed run hands back to the judge (SandboxOutcome: "ok" with the measurement,
"timeout" or "crash", with the process's stderr and the judge's own clock of it), and the
exception a cancelled run raises."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field


class Cancelled(Exception):
    """should_cancel() said stop; the sandbox process was killed."""


@dataclass
class SandboxOutcome:
    status: str  # "ok" (a genuine result came back) | "timeout" | "crash"
    result: dict | None  # the measurement
    returncode: int | None
    stderr_tail: str
    seconds: float  # wall clock of the whole process, by this process's clock
    phase: str = ""  # what the harness said it was doing last
    problem: str = ""  # why a result was not accepted
    escaped: int = 0  # processes found alive after the keeper was done (and killed)
    # By this process's clock: how long the process was started before its request
    # (started_s_before: 0 for one started for it, more for a pre-started one), and run_s.
    process: dict = field(default_factory=dict)
    isolation: str = "none"  # "namespaces": the harness ran in PID and mount namespaces of its own
    # The judge's clock over the run's timed batches (profiler.sandbox.clock.JudgeClock.log):
    # the batches it granted and closed, by this process's clock.
    clock: list[dict] = field(default_factory=list)

    def why(self) -> str:
        """One line on how the process ended, for a verdict's message."""
        if self.status == "timeout":
            return f"killed after {self.seconds:.0f} s, during {self.phase or 'start-up'} (over its time limit)"
        rc = self.returncode
        if rc is not None and rc < 0:
            how = f"the sandbox's keeper was killed by {signal.Signals(-rc).name}"
        elif rc is not None and rc > 128 and rc - 128 in signal.valid_signals():
            how = f"killed by {signal.Signals(rc - 128).name}"
        elif self.problem and self.problem != "no result":
            how = f"exited with code {rc} and {self.problem}"
        else:
            how = f"exited with code {rc} and no result"
        return how + (f": {where[:300]}" if (where := self.last_words()) else "")

    def last_words(self) -> str:
        """The line of stderr that says most: after a fatal signal, faulthandler's innermost
        frame of the thread that faulted (profiler.run.harness enables it); else the last line."""
        lines = [line.strip() for line in self.stderr_tail.strip().splitlines() if line.strip()]
        if any(line.startswith("Fatal Python error") for line in lines):
            for i, line in enumerate(lines[:-1]):  # faulthandler's "Current thread" is the one that faulted
                if line.startswith("Current thread") and lines[i + 1].startswith("File "):
                    return f"{lines[0]}; in {lines[i + 1]}"
            return lines[0]
        return lines[-1] if lines else ""
