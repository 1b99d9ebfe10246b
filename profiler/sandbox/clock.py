"""The judge's clock over a sandboxed run's timed runs (its "pairs": one run of each side the
process times), both ends.

Everything in a candidate's process can be read and rewritten by the candidate: its
timers, its random numbers, which runs it checks, what it reports. What it cannot touch is
this process: its clock, and what it sends and when. So a KernelBench run's timed pairs come
in batches that the judge grants:

    harness -> judge   {"want": N}                                     (N >= 1: go on)
    judge -> harness   {"batch": J, "seed": S, "key": K, "pairs": n}   (n = GRANT_PAIRS)   or {"stop": true}
    harness -> judge   {"closing": REPORT}        (the batch's pairs have run)
    ...
    harness -> judge   {"end": true}

A batch's inputs are drawn from its seed S (pair_seed), which no process knew before the
judge sent it, and its outputs are fingerprinted with its key K (profiler.measure.fingerprint).
The judge notes when it sent each grant and when the next line arrived: the batch's window.
All the candidate's process did with the batch's inputs lies inside that window, timed or not,
because the inputs did not exist before it and the report (event times and fingerprints of
every pair) closes it. profiler.verdict.decision takes the timing from these reports, as they arrived,
and checks them against the windows; a process that runs no candidate code later computes
Model's fingerprints for pairs the judge picks after the run and times Model in the same loop,
under a clock of its own (profiler.run.kernelbench's audit). A candidate may write anything to its end of the pipes; what it gains is a log in
which its claims must still fit this process's clock.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
import time

from profiler.sandbox import quiet

MAX_LINE_BYTES = 8 << 20
# Runs in every batch, whatever the harness asks for: batches of one size weigh alike in the
# judge's medians over batches and over runs (profiler.verdict.rules.clock_excess), so a
# process cannot report honest small batches beside lying large ones.
GRANT_PAIRS = 16
MAX_BATCH_PAIRS = GRANT_PAIRS
MAX_PAIRS = 5000
MAX_BATCHES = 400


def pair_seed(batch_seed: int, index: int) -> int:
    """The input seed of pair `index` of a batch (the same in every process)."""
    digest = hashlib.blake2b(f"{int(batch_seed)}:{int(index)}".encode(), digest_size=7).digest()
    return int.from_bytes(digest, "little")


class JudgeClock(threading.Thread):
    """The judge's end: grants batches, and keeps the log {"batch", "seed", "key", "pairs",
    "go", "done", "report"} (go/done: time.monotonic() of this process)."""

    def __init__(self, asks: int, grants: int):
        super().__init__(daemon=True, name="dice-judge-clock")
        self.asks, self.grants = asks, grants
        self.log: list[dict] = []
        self.problem = ""  # why the log ended early (a malformed line), if it did
        self.ended = False  # the harness said "end"
        self.held_s = 0.0  # grants held back for warm-ups beside it (profiler.sandbox.quiet)
        self._holding_since: float | None = None
        self._opened = False  # its first grant went out: its batches are open (quiet.timed_opened)
        self._lock = threading.Lock()

    def entries(self) -> list[dict]:
        with self._lock:
            return [dict(entry) for entry in self.log if "done" in entry]

    def held(self) -> float:
        """Seconds its grants have been held back so far, a hold under way included."""
        with self._lock:
            since = self._holding_since
            return self.held_s + (time.monotonic() - since if since is not None else 0.0)

    def _hold(self) -> None:
        """No batch is granted while a sandbox started beside it warms up (profiler.sandbox.quiet)."""
        with self._lock:
            self._holding_since = time.monotonic()
        waited = quiet.hold_for_warm_ups()
        with self._lock:
            self._holding_since = None
            self.held_s += waited
        if not self._opened:
            self._opened = True
            quiet.timed_opened()

    def _grant(self, want) -> bytes:
        granted = sum(entry["pairs"] for entry in self.log)
        if not isinstance(want, int) or want < 1 or granted >= MAX_PAIRS or len(self.log) >= MAX_BATCHES:
            return b'{"stop": true}\n'
        self._hold()
        entry = {"batch": len(self.log), "seed": secrets.randbits(62), "key": secrets.randbits(62),
                 "pairs": min(GRANT_PAIRS, MAX_PAIRS - granted)}
        message = json.dumps({k: entry[k] for k in ("batch", "seed", "key", "pairs")}).encode() + b"\n"
        # Before the write: the harness may read the grant before this thread runs again.
        entry["go"] = time.monotonic()
        with self._lock:
            self.log.append(entry)
        self._write(message)
        return b""

    def _write(self, data: bytes) -> None:
        written = 0
        while written < len(data):
            written += os.write(self.grants, data[written:])

    def run(self) -> None:
        try:
            with os.fdopen(self.asks, "rb", buffering=0) as pipe:
                buffer = bytearray()
                while True:
                    chunk = pipe.read(1 << 16)
                    if not chunk:
                        return
                    arrived = time.monotonic()
                    buffer += chunk
                    if len(buffer) > MAX_LINE_BYTES:
                        self.problem = "a clock line over the size limit"
                        return
                    while b"\n" in buffer:
                        line, _, rest = bytes(buffer).partition(b"\n")
                        buffer = bytearray(rest)
                        if not self._line(line, arrived):
                            return
        except OSError:
            pass
        finally:
            if self._opened:
                quiet.timed_closed()
            try:
                os.close(self.grants)
            except OSError:
                pass

    def _line(self, line: bytes, arrived: float) -> bool:
        try:
            message = json.loads(line)
            if not isinstance(message, dict):
                raise ValueError
        except ValueError:
            self.problem = "a clock line that is not one JSON object"
            return False
        with self._lock:  # any line closes the open batch: its window ends when the line arrived
            open_entry = self.log[-1] if self.log and "done" not in self.log[-1] else None
            if open_entry is not None:
                open_entry["done"] = arrived
                open_entry["report"] = message.get("closing")
        if message.get("end"):
            self.ended = True
            return False
        if "want" in message:
            reply = self._grant(message["want"])
            if reply:
                self._write(reply)
        return True


class HarnessClock:
    """The harness's end: asks for batches and closes them with their reports."""

    def __init__(self, asks: int, grants: int):
        self.asks, self.grants = asks, grants
        self._buffer = bytearray()

    def _send(self, message: dict) -> None:
        data = json.dumps(message).encode() + b"\n"
        written = 0
        while written < len(data):
            written += os.write(self.asks, data[written:])

    def _receive(self) -> dict:
        while b"\n" not in self._buffer:
            chunk = os.read(self.grants, 1 << 16)
            if not chunk:
                raise EOFError("the judge's clock closed")
            self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        return json.loads(line)

    def batch(self, want: int) -> dict | None:
        """The next batch ({"batch", "seed", "key", "pairs"}), or None when the judge stops."""
        self._send({"want": int(want)})
        grant = self._receive()
        return None if grant.get("stop") else grant

    def close(self, report: dict) -> None:
        """The batch's pairs have run: its report, at once (the window ends when it arrives)."""
        self._send({"closing": report})

    def end(self) -> None:
        self._send({"end": True})


class LocalClock:
    """Batches without a judge (a timing outside a sandbox: benchmarks, tests): seeds and keys
    from this process's own randomness, and no log."""

    def __init__(self) -> None:
        self.count = 0

    def batch(self, want: int) -> dict | None:
        self.count += 1
        return {"batch": self.count - 1, "seed": secrets.randbits(62), "key": secrets.randbits(62),
                "pairs": min(int(want), MAX_BATCH_PAIRS)}

    def close(self, report: dict) -> None:
        pass

    def end(self) -> None:
        pass


# The harness's clock, opened by profiler.run.harness before any request runs (None: a run
# outside a sandbox).
CURRENT: list[HarnessClock] = []


def current() -> HarnessClock | LocalClock:
    return CURRENT[0] if CURRENT else LocalClock()
