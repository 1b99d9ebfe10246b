"""A KernelBench sandbox kept started for the next run of a document just profiled.

A KernelBench run starts a Python with torch imported (about 3 s) before any of its own
work. `dice bench` hides that by starting a verdict's sandbox while the GPU step before it
runs; a `profile` has nothing before it, so the language server's second profile of the
same document (the warm case) paid it in full. After a profile, DOCUMENT_SPARE starts one
sandbox in that document's build folder, warmed as the pool's KernelBench spares are
(torch imported, no CUDA context: profiler.sandbox.pool.warm_kind), and the next run of that
document with the same time limit takes it.

The same rules as a pre-started verdict's sandbox (KernelBenchProblem.prestart):
- only where sandboxes are pre-started at all (DICE_SANDBOX_POOL > 0) and isolated in
  namespaces of their own (a candidate run meanwhile must not reach it);
- it is a sandbox like any other, handed exactly one request, its limits' clock starting at
  the hand-over;
- it holds no build folder while it waits (another run, in this process or another, may use
  and change the folder meanwhile). The folder is checked out by the run that takes it, and
  the spare is used only if the folder is still the directory its sandbox was started on
  (same device and inode, the directory held open meanwhile so that its inode is not
  reused): a folder found changed is removed and made again
  (VerifiedBuilds.checkout), and the spare, which sees the old one, is discarded.

One spare at a time: keeping another replaces it. Unclaimed after IDLE_S, it ends. Each is
started from a thread of its own that lives as long as it does (the keeper dies with the
thread that started it: PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import atexit
import os
import threading
from pathlib import Path

from profiler.sandbox import pool
from profiler.sandbox.start import start_harness

# Seconds an unclaimed spare waits (a process with torch imported: some hundreds of MB).
IDLE_S = 300.0


def _identity(folder: Path) -> tuple[int, int] | None:
    try:
        facts = os.stat(folder, follow_symlinks=False)
    except OSError:
        return None
    return facts.st_dev, facts.st_ino


def _open_folder(folder: Path) -> int | None:
    """A descriptor of the folder, held while the spare waits: the directory cannot be freed
    meanwhile, so a folder removed and made again never gets its device and inode."""
    try:
        return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None


class _Kept(threading.Thread):
    """One spare, from its start to its end, in a thread of its own."""

    def __init__(self, key: str, folder: Path, time_limit: float, setup: str):
        super().__init__(daemon=True, name="dice-document-spare")
        self.key, self.folder, self.time_limit, self.setup = key, folder, time_limit, setup
        self._fd = _open_folder(folder)
        self.identity = None
        if self._fd is not None:
            facts = os.fstat(self._fd)
            self.identity = facts.st_dev, facts.st_ino
        self.started = None  # profiler.sandbox.start.Started, once started
        self.state = "kept"  # -> "claimed" | "released"
        self._lock = threading.Lock()
        self._launched = threading.Event()
        self._decided = threading.Event()  # claimed or released
        self._finished = threading.Event()  # the claimer's run ended

    def run(self) -> None:
        try:
            if self.identity is not None and self._same_folder(self.folder):
                self.started = start_harness(self.time_limit, extensions=self.folder, warm=self.setup)
        except Exception:  # noqa: BLE001 - a spare decides nothing; the next run starts its own
            self.started = None
        finally:
            self._launched.set()
        try:
            if self.started is None:
                return
            self._decided.wait(IDLE_S)
            with self._lock:
                if self.state == "kept":
                    self.state = "released"
            if self.state == "claimed":
                self._finished.wait()
        finally:
            if self.started is not None:
                self.started.discard()
            if self._fd is not None:
                os.close(self._fd)

    def _same_folder(self, folder: Path) -> bool:
        """`folder` is still the directory the sandbox was started on (and not removed)."""
        return self._fd is not None and _identity(folder) == self.identity and os.fstat(self._fd).st_nlink > 0

    def claim(self, folder: Path):
        """The started sandbox, for one run in `folder` (checked out by the caller), or None
        (its thread then discards it). A spare still in its warm-up is waited for; one that
        died in it is never handed a request."""
        self._launched.wait()
        with self._lock:
            if self.state != "kept" or self.started is None:
                return None
            self.state = "claimed"
        self._decided.set()
        if self._same_folder(folder) and self.started.alive() and pool.warmed_up(self.started, pool.WARM_LIMIT_S):
            return self.started
        self._finished.set()
        return None

    def finished(self) -> None:
        """The claimer's run ended: the thread discards what is left and ends."""
        self._finished.set()

    def release(self) -> None:
        with self._lock:
            if self.state == "kept":
                self.state = "released"
        self._decided.set()


class DocumentSpare:
    """At most one kept spare (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: _Kept | None = None

    def keep(self, key: str, folder: Path, time_limit: float) -> bool:
        """Start a spare for the next run of the document `key`, whose build folder is
        `folder`; False where none is kept (see the module)."""
        setup = pool.warm_kind("kernelbench")
        if setup is None or not pool.enabled() or _identity(folder) is None:
            return False
        kept = _Kept(key, folder, time_limit, setup)
        with self._lock:
            old, self._kept = self._kept, kept
        if old is not None:
            old.release()
        kept.start()
        return True

    def take(self, key: str, time_limit: float, folder: Path) -> _Kept | None:
        """The spare kept for this document's run in `folder` (checked out by the caller),
        claimed; its thread ends once the caller says finished(). None: start a fresh one."""
        with self._lock:
            kept = self._kept
            if kept is None or kept.key != key:
                return None
            self._kept = None
        if kept.time_limit != time_limit or kept.claim(folder) is None:
            kept.release()
            return None
        return kept

    def drop(self) -> None:
        """Let the kept spare go now."""
        with self._lock:
            old, self._kept = self._kept, None
        if old is not None:
            old.release()


DOCUMENT_SPARE = DocumentSpare()


def _drop_at_exit() -> None:
    kept = DOCUMENT_SPARE._kept
    DOCUMENT_SPARE.drop()
    if kept is not None:
        kept.join(10.0)  # its sandbox killed and its folder removed before the process ends


atexit.register(_drop_at_exit)
