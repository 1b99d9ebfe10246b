"""load_inline builds handed from one sandbox to a later one, verified by digest.

A shared extension cache is a place where one candidate's run can leave a library for
another's to load (a poisoned build). Here each candidate document gets a build folder of
its own, named by the document's content, used only by that document's runs; after each
run the judge records the folder's digest in its own memory, and before the next run of
the same document it checks the folder against it: a folder anything else changed is
emptied, and the run builds again. The digests never touch the disk, so no candidate can
rewrite them; they last as long as the store.

One store serves every judging of this process (`process_builds()`): the language server
judging a candidate it judged before, or profiling a file again, finds the build ready
(a warm judgement is then interpreter start-up, torch's import, ninja finding nothing to
do, the library's load, the checks and the timing). It ends with the process (its folder
is removed at exit), and keeps the most recently used MAX_FOLDERS folders.

The folder keeps one absolute path for all runs of a document: torch's ninja files name
their sources by absolute path, and a moved folder would build again.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import stat
import tempfile
import threading
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

# Build folders one store keeps (a load_inline build holds about 8 MB: two objects, the
# library; at most some hundred MB of the temporary folder).
MAX_FOLDERS = 32
# Environment variable: "0" restores the judging before the process-wide store: each judge()
# call a store of its own, profile() none (its two runs build apart). Kept to measure the
# difference (benchmarks/kernelbench_build.py) and for whoever wants nothing kept.
REUSE_ENV = "DICE_REUSE_BUILDS"


def tree_digest(folder: Path) -> str:
    """A digest of every path, link target and file's bytes under `folder` (of a FIFO, a
    socket, a device: its type alone; a FIFO opened to be read would wait for a writer)."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, folder).encode() + b"\0")
            if os.path.islink(path):
                digest.update(b"link:" + os.readlink(path).encode() + b"\0")
                continue
            mode = os.lstat(path).st_mode
            if not stat.S_ISREG(mode):
                digest.update(b"special:%o\0" % stat.S_IFMT(mode))
                continue
            with open(path, "rb") as file:
                for block in iter(lambda: file.read(1 << 20), b""):
                    digest.update(block)
            digest.update(b"\0")
    return digest.hexdigest()


class VerifiedBuilds:
    """Build folders of several candidates, each used by one run at a time."""

    def __init__(self, max_folders: int = MAX_FOLDERS) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="dice-builds-"))
        self.max_folders = max_folders
        self.digests: OrderedDict[str, str] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()
        self._in_use: dict[str, threading.Lock] = {}

    @staticmethod
    def key(document: str, arch: str | None) -> str:
        return hashlib.sha256(f"{arch}\0{document}".encode()).hexdigest()[:32]

    @contextmanager
    def folder(self, key: str, wait: bool = True) -> Iterator[Path | None]:
        """The document's build folder for one run; a second run of the same document (another
        thread) waits for the first to end, so that one folder never serves two runs at once.
        With wait=False, None instead of waiting, when another run has it."""
        with self._lock:
            turn = self._in_use.setdefault(key, threading.Lock())
        if not turn.acquire(blocking=wait):
            yield None
            return
        try:
            folder = self.checkout(key)
            try:
                yield folder
            finally:
                self.checkin(key)
        finally:
            turn.release()

    def known(self, key: str) -> bool:
        """Whether a run of this document left its folder here (to be verified when used)."""
        with self._lock:
            return key in self.digests

    def checkout(self, key: str) -> Path:
        """The document's build folder, as it was after its last run, or empty."""
        folder = self.root / key
        with self._lock:
            known = self.digests.pop(key, None)
        if folder.exists() and (known is None or tree_digest(folder) != known):
            shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(exist_ok=True)
        return folder

    def checkin(self, key: str) -> None:
        """Record the folder as the run that used it left it (its process tree is dead), and
        drop the least recently used folders past max_folders (none that a run uses)."""
        digest = tree_digest(self.root / key)
        with self._lock:
            self.digests[key] = digest
            old = [k for k in self.digests if not self._busy(k)][:max(0, len(self.digests) - self.max_folders)]
            for k in old:
                del self.digests[k]
                self._in_use.pop(k, None)
        for k in old:
            shutil.rmtree(self.root / k, ignore_errors=True)

    def _busy(self, key: str) -> bool:
        turn = self._in_use.get(key)
        return turn is not None and turn.locked()

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


_PROCESS_BUILDS: VerifiedBuilds | None = None
_PROCESS_LOCK = threading.Lock()


def reuse_builds() -> bool:
    return os.environ.get(REUSE_ENV, "1").strip() != "0"


def process_builds() -> VerifiedBuilds:
    """The store every judging of this process shares (made on first use, removed at exit)."""
    global _PROCESS_BUILDS
    with _PROCESS_LOCK:
        if _PROCESS_BUILDS is None:
            _PROCESS_BUILDS = VerifiedBuilds()
            atexit.register(_PROCESS_BUILDS.close)
        return _PROCESS_BUILDS
