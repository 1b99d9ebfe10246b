"""The pipes between the judge and a sandboxed harness, both ends.

Three pipes, created by the judge and inherited by the harness as numbered descriptors
(the keeper between them keeps no copy):
- control (judge -> harness): the request and a fresh random nonce, one JSON line; later
  one byte, GO, that lets the harness run candidate code, and (a .cu request) one GO that
  gives it its turn on the GPU;
- phase (harness -> judge): what the harness is doing, one name a line. Before a
  candidate's Python runs, the harness sends CANDIDATE_NEXT, closes its end and waits for
  GO, which the judge sends once it has closed its own end: from then on the pipe exists
  nowhere, and no candidate can claim to be building. A .cu harness (which runs no candidate
  host code) sends TURN_NEXT once its kernels are built and waits for GO before it touches
  the GPU again: the judge builds the next candidates while one is checked and timed, and
  gives the GPU to one at a time;
- result (harness -> judge): one JSON object, {"nonce", "measurement"}, written once at the
  end. The judge accepts the stream only if it is exactly one such object carrying the
  nonce; anything else is a crash. Nothing on disk is read back.

The nonce stops a candidate from answering for the harness without reading the harness's
memory (writing a result file, writing a forged object to the pipe it finds under
/proc/self/fd: the judge sees two objects, or none with the nonce). A candidate that reads
the nonce out of the harness's memory (gc, frames, ctypes) can forge measurements; that is
why the judge trusts measurements only as far as profiler.verdict.decision's cross-checks go.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import time
from typing import Callable

MAX_RESULT_BYTES = 64 << 20
CANDIDATE_NEXT = b"#candidate-code-next"
TURN_NEXT = b"#turn-next"
# The phase the judge records while a harness waits for its turn (profiler.sandbox.watch: that
# time counts against neither of its limits).
WAITING_FOR_TURN = "waiting for its turn"
# The phase a pre-started harness (profiler.sandbox.pool) reports once it waits for its request.
READY = "ready"
GO = b"!"


class Phase:
    """What the harness is doing now, for messages, and reported to the judge while the
    phase pipe is open (the judge counts build phases against the build allowance)."""

    current = "start-up"
    _fd: int | None = None
    _control: int | None = None
    _quiet = False
    # Called once the turn is given (profiler.run.harness: its hard deadline starts again).
    after_turn: Callable[[], None] | None = None
    # (phase, time.monotonic() it began), for the seconds each took (seconds()).
    _began: list[tuple[str, float]] = []

    @classmethod
    def open(cls, fd: int, control: int) -> None:
        cls._fd, cls._control = fd, control

    @classmethod
    def set(cls, name: str) -> None:
        if cls._quiet:
            return
        cls.current = name
        cls._began.append((name, time.monotonic()))
        if cls._fd is not None:
            os.write(cls._fd, name.encode() + b"\n")

    @classmethod
    @contextlib.contextmanager
    def quiet(cls):
        """Phases set inside are neither reported nor timed (the harness's own warm-up)."""
        cls._quiet = True
        try:
            yield
        finally:
            cls._quiet = False

    @classmethod
    def seconds(cls) -> list[list]:
        """[[phase, seconds], ...] in order, the last one up to now (its own account: for
        reading where time goes, never for a verdict)."""
        ends = [t for _, t in cls._began[1:]] + [time.monotonic()]
        return [[name, round(end - began, 4)] for (name, began), end in zip(cls._began, ends)]

    @classmethod
    def wait_turn(cls) -> None:
        """Say that the GPU work comes next and wait for the judge's GO (the run before this one
        has ended). Only before candidate code runs: the phase pipe is the harness's."""
        if cls._fd is None:
            return
        cls.set(WAITING_FOR_TURN)
        os.write(cls._fd, TURN_NEXT + b"\n")
        if os.read(cls._control, 1) != GO:
            raise RuntimeError("the judge did not give this run its turn")
        if cls.after_turn is not None:
            cls.after_turn()

    @classmethod
    def close(cls, last: str) -> None:
        """Report `last`, close the phase pipe for good and wait until the judge has closed
        its end too: candidate code runs next."""
        cls.set(last)
        if cls._fd is None:
            return
        os.write(cls._fd, CANDIDATE_NEXT + b"\n")
        os.close(cls._fd)
        cls._fd = None
        go = os.read(cls._control, 1)
        os.close(cls._control)
        cls._control = None
        if go != GO:
            raise RuntimeError("the judge did not let candidate code run")


def read_control(fd: int) -> tuple[dict, str]:
    """The harness's side: (request, nonce), one JSON line; the pipe stays open for GO
    (which the judge sends only after the harness has read the request and asked)."""
    line = bytearray()
    while not line.endswith(b"\n"):
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise EOFError("the control pipe closed before the request ended")
        line += chunk
    message = json.loads(line)
    return message["request"], message["nonce"]


def write_result(fd: int, nonce: str, measurement: dict) -> None:
    with os.fdopen(fd, "wb") as pipe:
        pipe.write(json.dumps({"nonce": nonce, "measurement": measurement}).encode())


def control_message(request: dict, nonce: str) -> bytes:
    return json.dumps({"request": request, "nonce": nonce}).encode() + b"\n"


def accept_result(data: bytes, nonce: str) -> tuple[dict | None, str]:
    """The judge's side: (measurement, "") for a genuine result, else (None, why not)."""
    if not data:
        return None, "no result"
    if len(data) > MAX_RESULT_BYTES:
        return None, f"a result of {len(data)} bytes (over {MAX_RESULT_BYTES})"
    try:
        message = json.loads(data)
    except ValueError:
        return None, "a result that is not one JSON object (written to by something else?)"
    if not isinstance(message, dict) or not isinstance(message.get("nonce"), str) \
            or not isinstance(message.get("measurement"), dict):
        return None, "a malformed result"
    if not hmac.compare_digest(message["nonce"], nonce):
        return None, "a result without this run's nonce (forged)"
    return message["measurement"], ""
