"""The pipes between the judge and a sandboxed harness, both ends.

Three pipes, created by the judge and inherited by the harness as numbered descriptors:
- control (judge -> harness): the request and a fresh random nonce, read whole and closed
  by the harness before any document's code runs;
- phase (harness -> judge): what the harness is doing, one name a line; the harness closes
  it before a candidate's Python runs, so that no candidate can claim to be building;
- result (harness -> judge): one JSON object, {"nonce", "measurement"}, written once at the
  end. The judge accepts the stream only if it is exactly one such object carrying the
  nonce; anything else is a crash. Nothing on disk is read back.

The nonce stops a candidate from answering for the harness without reading the harness's
memory (writing a result file, writing a forged object to the pipe it finds under
/proc/self/fd: the judge sees two objects, or none with the nonce). A candidate that reads
the nonce out of the harness's memory (gc, frames, ctypes) can forge measurements; that is
why the judge trusts measurements only as far as profiler.verdict's cross-checks go.
"""

from __future__ import annotations

import hmac
import json
import os

MAX_RESULT_BYTES = 64 << 20


class Phase:
    """What the harness is doing now, for messages, and reported to the judge while the
    phase pipe is open (the judge counts build phases against the build allowance)."""

    current = "start-up"
    _fd: int | None = None

    @classmethod
    def open(cls, fd: int) -> None:
        cls._fd = fd

    @classmethod
    def set(cls, name: str) -> None:
        cls.current = name
        if cls._fd is not None:
            os.write(cls._fd, name.encode() + b"\n")

    @classmethod
    def close(cls, last: str) -> None:
        """Report `last` and close the phase pipe for good: candidate code runs next."""
        cls.set(last)
        if cls._fd is not None:
            os.close(cls._fd)
            cls._fd = None


def read_control(fd: int) -> tuple[dict, str]:
    """The harness's side: (request, nonce), the pipe read to its end and closed."""
    with os.fdopen(fd, "rb") as pipe:
        message = json.loads(pipe.read())
    return message["request"], message["nonce"]


def write_result(fd: int, nonce: str, measurement: dict) -> None:
    with os.fdopen(fd, "wb") as pipe:
        pipe.write(json.dumps({"nonce": nonce, "measurement": measurement}).encode())


def control_message(request: dict, nonce: str) -> bytes:
    return json.dumps({"request": request, "nonce": nonce}).encode()


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
