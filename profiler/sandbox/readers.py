"""The judge's threads on a harness's pipes: the phases it reports, the request and the GPU's
turn handed to it, the go-ahead for candidate code (PhaseReader), and its result, read to the
end (ResultReader). The formats are profiler.sandbox.channel's."""

from __future__ import annotations

import os
import threading
import time
from typing import Callable

from profiler.sandbox.channel import CANDIDATE_NEXT, GO, MAX_RESULT_BYTES, READY, TURN_NEXT
from profiler.sandbox.gpu_turn import GpuTurn

POLL_S = 0.05
# What on_phase hears once the harness has closed its phase pipe: candidate code runs (and
# everything after it: checks, timing), and no more phases come.
CANDIDATE_CODE = "candidate code"


class ResultReader(threading.Thread):
    """Reads the result pipe to its end (the judge must drain it while the harness writes)."""

    def __init__(self, fd: int):
        super().__init__(daemon=True)
        self.fd, self.data = fd, bytearray()

    def run(self) -> None:
        with os.fdopen(self.fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                self.data += chunk
                if len(self.data) > MAX_RESULT_BYTES:
                    return  # rejected as too large; the rest is not read


class PhaseReader(threading.Thread):
    """Reads the harness's phases until it says candidate code comes next, then closes the
    phase pipe and only then lets the harness go on (one byte on the control pipe). So no
    end of the phase pipe is left anywhere (not even this process's, which /proc/PID/fd
    would let a process of the same user reopen for writing) once candidate code runs.

    The request is written once hand_over() gives it: at once for a harness started for
    one request, at its claim for a pre-started one, which reports READY first (then
    `ready` is set) and waits for it.

    A .cu harness asks for its turn on the GPU (TURN_NEXT) once its kernels are built: GO is
    written when `turn` (hand_over's) is set and then the GPU's turn (`gpu`, gpu_turn) is
    taken, at once without either. Meanwhile `waiting_since` says since when it waits (this
    thread's own clock, not anything the harness says), and `turn_waits` adds up how long it
    waited. Only a run handed a turn ever waits here, and only once: code that writes
    TURN_NEXT to a phase pipe still open (a KernelBench document's torch.compile run loads the
    document) gains no time outside its limits, and a run that holds the GPU's turn already
    finds it taken by itself."""

    def __init__(self, fd: int, control: int, warm: bool):
        super().__init__(daemon=True)
        self.fd, self.control, self.warm = fd, control, warm
        self.phases: list[str] = []
        self.candidate_next = False
        self.ready = threading.Event()
        self.waiting_since: float | None = None
        self.turn_waits = 0.0
        self._request: bytes | None = None
        self._turn: threading.Event | None = None
        self._gpu: GpuTurn | None = None
        self._handed = threading.Event()
        self._abandoned = threading.Event()
        self._turned = False

    def hand_over(self, request: bytes, turn: threading.Event | None = None, gpu: GpuTurn | None = None) -> None:
        self._request, self._turn, self._gpu = request, turn, gpu
        self._handed.set()

    def abandon(self) -> None:
        """The run is over (killed or ended): stop waiting for a turn or a request."""
        self._abandoned.set()
        self._handed.set()

    def _wait_turn(self) -> None:
        if self._turn is None:  # no turn to wait for: nothing is excluded from the limits
            os.write(self.control, GO)
            return
        self.waiting_since = time.monotonic()
        try:
            while not self._turn.wait(POLL_S):
                if self._abandoned.is_set():
                    return
            if self._gpu is not None and not self._gpu.acquire(self._abandoned.is_set):
                return
        finally:
            self.turn_waits += time.monotonic() - self.waiting_since
            self.waiting_since = None
        os.write(self.control, GO)

    def _write_request(self) -> None:
        self._handed.wait()
        if self._request is None:
            return
        written = 0
        while written < len(self._request):
            written += os.write(self.control, self._request[written:])

    def run(self) -> None:
        try:
            with os.fdopen(self.fd, "rb", buffering=0) as pipe:
                if not self.warm:
                    self._write_request()
                for line in pipe:
                    if line.rstrip(b"\n") == CANDIDATE_NEXT:
                        self.candidate_next = True
                        break
                    if line.rstrip(b"\n") == TURN_NEXT:
                        if not self._turned:  # once a run: the genuine harness asks once
                            self._turned = True
                            self._wait_turn()
                        continue
                    self.phases.append(line.rstrip(b"\n").decode(errors="replace"))
                    if self.warm and self.phases[-1] == READY and not self.ready.is_set():
                        self.ready.set()
                        self._write_request()
                else:
                    return  # the harness ended without running candidate code
            os.write(self.control, GO)
        except OSError:
            pass  # the harness is gone; its exit says why
        finally:
            self.ready.set()  # nothing more to wait for
            os.close(self.control)


def tell_phases(on_phase: Callable[[str], None], phases: list[str], candidate_next: bool, heard: int) -> int:
    """Pass the phases reported since the last call to on_phase; returns how many were."""
    known = list(phases)  # the reader thread appends meanwhile
    for name in known[heard:]:
        on_phase(name)
    heard = max(heard, len(known))
    if candidate_next and heard == len(known):
        on_phase(CANDIDATE_CODE)
        heard += 1
    return heard
