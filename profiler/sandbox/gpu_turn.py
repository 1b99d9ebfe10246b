"""One run at a time on each GPU, across all of this user's dice processes.

Two runs that use one GPU at once slow each other down, unevenly and differently from one
timed pair to the next. An honest candidate then comes out flagged (work outside its timer,
CUDA events that disagree with the wall clock) or unstable, and stops counting as proof. On
an H100 with eight judgings sharing the GPU, honest candidates that are `faster` alone came
out like that. The language server runs jobs side by side (one job's candidates decoded or
judged while another job's are), and several editors, `dice profile` and `dice bench` may
share one machine.

So a sandboxed run that can see a GPU holds that GPU's turn while it runs, and a job holds it
while a model of this machine decodes there. A turn is an flock on a file named after the
device (the first of CUDA_VISIBLE_DEVICES as the run sees it) in one folder for all of the
user's processes, whatever their environment: /tmp/dice-lsp-gpu-<uid> (made 0700 and checked
to be the user's; a local file system, where flock is flock). flock belongs to an open file,
so two runs of one process exclude each other as two processes do, and the kernel lets go of
the lock of a process that dies. The file is opened close-on-exec, so a process started
meanwhile does not hold the turn after its owner lets go, and write-only with mode 0200 by
profiler.machine.paths.lock_file, so a candidate in namespaces (everything read-only to it but its
own folders) cannot open it to hold a turn of the judge's.

The wait is not the run's: it counts against neither of its limits (profiler.sandbox.watch's
run_started and profiler.sandbox.readers.PhaseReader).

Only dice's own work takes turns, and only while it runs or decodes: a harness making its
CUDA context, a model loading, a .cu run allocating its buffers before its turn, and other
programs on the GPU (a training job, another user's judge) do not wait. What they do to a
timed run's numbers is left to the verdict's checks (pairs timed in turn, the baseline timed
alone, the two halves of the run), which make such a run flagged or unstable.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from profiler.machine.paths import lock_file

log = logging.getLogger(__name__)

POLL_S = 0.02  # how often a waiting turn tries the lock again
_warned: set[str] = set()


def device_key(env: dict[str, str] | None = None, index: int = 0) -> str | None:
    """The GPU a process started with `env` added to this one's environment uses as its
    device `index`, by its name in CUDA_VISIBLE_DEVICES (an index, a GPU-/MIG- UUID); "0"
    where that variable is not set. None when the GPU is hidden from it ("" or a negative
    entry before it, as CUDA reads the variable)."""
    value = (env or {}).get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
    if value is None:
        return str(index)
    entries = [entry.strip() for entry in value.split(",")]
    for entry in entries[: index + 1]:
        if not entry or entry.startswith("-"):
            return None
    if index >= len(entries):
        return None
    return re.sub(r"[^A-Za-z0-9_.-]", "_", entries[index])[:120]


def torch_device_key(device: str) -> str | None:
    """The GPU (as device_key names it) of a torch device of this process ("cuda", "cuda:1"),
    None for any other device ("cpu", an SGLang server's address)."""
    kind, _, index = device.partition(":")
    if kind != "cuda":
        return None
    return device_key(None, int(index) if index.isdigit() else 0)


FOLDER = Path("/tmp")  # where the turns' folder is made (a test gives its own)


def folder() -> Path:
    """This user's folder of turns, made 0700 if need be; OSError where it cannot be made or
    is not a folder of this user's alone."""
    path = FOLDER / f"dice-lsp-gpu-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    found = os.stat(path, follow_symlinks=False)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        raise OSError(f"{path} is not a folder of this user's")
    if found.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


class GpuTurn:
    """One holder's turn on the GPU `key`: taken once, let go once (after release() it is
    never taken again, so a thread still waiting cannot take it for a run that ended).

    Turns are taken in order of waiting, one deep: a waiter first takes `<key>.next` (the
    place next in line), then the turn itself, and lets the place go once it has the turn. A
    holder that wants the GPU again at once (`dice bench` timing one candidate after another)
    must take that place too, so it waits behind whoever was waiting when it let go: a
    waiting editor job is not starved by back-to-back runs."""

    def __init__(self, key: str):
        self.key = key
        self.waited_s = 0.0
        self._fd: int | None = None
        self._next: int | None = None  # the place next in line, held while waiting
        self._open_failed = False
        self._released = False
        self._lock = threading.Lock()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the turn if it is free (or held already); False if another holds it, or holds
        the place next in line, or this turn was released. Where the locks cannot be made or
        taken (no such folder of the user's, a file system without flock), every turn is
        free: nothing is excluded, and a line in the log says why, once."""
        with self._lock:
            if self._released:
                return False
            if self._fd is not None or self._open_failed:
                return True
            in_line = self._next is not None
        try:
            where = folder()
            if not in_line:
                place = lock_file(where / f"{self.key}.next", wait=False)
                if place is None or not self._keep(place):
                    return False
            fd = lock_file(where / f"{self.key}.lock", wait=False)
        except OSError as exc:
            _warn_once(exc)
            with self._lock:
                self._open_failed = True
                place, self._next = self._next, None
            _close(place)
            return not self._released
        if fd is None:
            return False
        with self._lock:
            if self._released:
                _close(fd)
                return False
            self._fd = fd
            place, self._next = self._next, None
        _close(place)  # the next waiter may queue now
        return True

    def _keep(self, place: int) -> bool:
        with self._lock:
            if self._released:
                _close(place)
                return False
            self._next = place
            return True

    def acquire(self, stop: Callable[[], bool]) -> bool:
        """Wait for the turn; False if stop() turned true first or the turn was released (its
        place in line is let go then)."""
        started = time.monotonic()
        try:
            while not self.try_acquire():
                if self._released or stop():
                    self._leave_line()
                    return False
                time.sleep(POLL_S)
            return True
        finally:
            self.waited_s += time.monotonic() - started

    def _leave_line(self) -> None:
        with self._lock:
            place, self._next = self._next, None
        _close(place)

    def release(self) -> None:
        with self._lock:
            self._released = True
            fd, self._fd = self._fd, None
            place, self._next = self._next, None
        _close(fd)  # closing the only descriptor of the open file drops its flock
        _close(place)


def _close(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)


def _warn_once(exc: OSError) -> None:
    why = str(exc)
    if why not in _warned:
        _warned.add(why)
        log.warning("dice: no GPU turns (runs may share the GPU): %s", why)
