"""load_inline builds handed from one sandbox to a later one, verified by digest.

A shared extension cache is a place where one candidate's run can leave a library for
another's to load (a poisoned build). Here each candidate document gets a build folder of
its own, named by the document's content, used only by that document's runs; after each
run the judge records the folder's digest, and before the next run of the same document it
checks the folder against it: a folder anything else changed is emptied, and the run builds
again. A digest protects only where no candidate can rewrite it, and that decides how long
the folders last:

- Where sandboxes are isolated (profiler.sandbox.isolation: namespaces of their own), a
  candidate can write its sandbox folder and its build folder and nothing else; the other
  build folders and anything beside them are read-only to it. There the process's store
  (`process_builds()`) is kept on disk, for every later process too: in $DICE_BUILD_CACHE,
  else $XDG_CACHE_HOME/dice-lsp/builds (~/.cache/dice-lsp/builds), in a folder per torch
  version and Python (what a build depends on beyond the document and the architecture),
  with the digests in its `digests/` folder, one file per document, written by the judge
  alone. A `dice profile` of a file profiled before, by another command or by the language
  server, loads its build instead of building it (tens of seconds).
- Elsewhere a candidate runs as you, beside you, and could rewrite digests on disk: the
  store is a temporary folder, its digests in the judge's memory, removed when the process
  ends (a long-lived process, the language server, still finds its builds again). So too
  with DICE_BUILD_CACHE=off, and where the folder cannot be made or written (one warning).

A candidate run without namespaces by some other process (DICE_SANDBOX_ISOLATION=off) could
rewrite the store on disk, digests included; it could as well rewrite your shell's start-up
files or the installed profiler, so the store adds nothing to its reach.

Several processes (the language server, a `dice` command) may share the store on disk: one
folder serves one run at a time, through a lock within the process and an flock of the
document's file in `locks/` from checkout to checkin. Each store keeps the MAX_FOLDERS
folders most recently given back (on disk: by the time its digest was written, whichever
process wrote it), and never removes one another run holds.

The folder keeps one absolute path for all runs of a document: torch's ninja files name
their sources by absolute path, and a moved folder would build again.
"""

from __future__ import annotations

import atexit
import fcntl
import functools
import hashlib
import importlib.metadata
import logging
import os
import stat
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from profiler.machine import settings
from profiler.machine.paths import cache_root, lock_file, remove_tree
from profiler.sandbox.isolation import IsolationUnavailable, isolation

# Build folders one store keeps (a load_inline build holds about 8 MB: two objects, the
# library; at most some hundred MB of the temporary folder, or of the cache on disk).
MAX_FOLDERS = 32
# "0": each judge() call a store of its own, profile() none (its two runs build apart), for
# whoever wants nothing kept, and to measure the difference (benchmarks/kernelbench_build.py).
REUSE_ENV = settings.REUSE_BUILDS
# Where the store is kept on disk (where sandboxes are isolated); "off": never on disk, a
# temporary store per process.
CACHE_ENV = settings.BUILD_CACHE
DIGESTS, LOCKS = "digests", "locks"  # beside the build folders, whose names are keys


# What a build folder may hold for its digest to be taken. A load_inline build is a few files
# of some 8 MB; with profile's Inductor and Triton caches, some hundreds of files and tens of
# MB. A candidate shapes its own build folder: a tree too deep for a recursive walk, sparse
# files of gigabytes to hash, names that are not UTF-8, files it may not read. Past these
# bounds, or unreadable, a folder is not kept (removed, no digest) and its next run builds.
MAX_ENTRIES = 20_000
MAX_BYTES = 4 << 30
MAX_DEPTH = 64


class Unkept(Exception):
    """A build folder whose digest is not taken (past the bounds above, or unreadable)."""


def tree_digest(folder: Path) -> str:
    """A digest of every path, link target and file's bytes under `folder` (of a FIFO, a
    socket, a device: its type alone; a FIFO opened to be read would wait for a writer).
    Walked without recursion, within MAX_ENTRIES, MAX_BYTES and MAX_DEPTH; raises Unkept."""
    digest = hashlib.sha256()
    base = os.fsencode(folder)
    entries = size = 0
    todo: list[tuple[bytes, int]] = [(b"", 0)]  # folders to read, relative to `folder`
    try:
        while todo:
            relative, depth = todo.pop()
            if depth > MAX_DEPTH:
                raise Unkept(f"folders deeper than {MAX_DEPTH}")
            with os.scandir(os.path.join(base, relative) if relative else base) as listing:
                names = sorted(entry.name for entry in listing)
            folders = []
            for name in names:
                entries += 1
                if entries > MAX_ENTRIES:
                    raise Unkept(f"more than {MAX_ENTRIES} entries")
                path = os.path.join(relative, name) if relative else name
                full = os.path.join(base, path)
                mode = os.lstat(full).st_mode
                if stat.S_ISDIR(mode):
                    digest.update(path + b"/\0")
                    folders.append(path)
                    continue
                digest.update(path + b"\0")
                if stat.S_ISLNK(mode):
                    digest.update(b"link:" + os.readlink(full) + b"\0")
                elif not stat.S_ISREG(mode):
                    digest.update(b"special:%o\0" % stat.S_IFMT(mode))
                else:
                    fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
                    with os.fdopen(fd, "rb") as file:
                        size += os.fstat(file.fileno()).st_size
                        if size > MAX_BYTES:
                            raise Unkept(f"more than {MAX_BYTES >> 30} GiB")
                        for block in iter(lambda: file.read(1 << 20), b""):
                            digest.update(block)
                    digest.update(b"\0")
            todo.extend((f, depth + 1) for f in reversed(folders))
    except OSError as exc:
        raise Unkept(f"unreadable: {exc}") from exc
    return digest.hexdigest()


def _kept_digest(folder: Path) -> str | None:
    """The folder's digest, or None for a folder not to be kept (Unkept: see MAX_ENTRIES)."""
    try:
        return tree_digest(folder)
    except Unkept as why:
        logging.getLogger(__name__).info("build folder %s not kept: %s", folder, why)
        return None


def _is_key(name: str) -> bool:
    return len(name) == 32 and all(c in "0123456789abcdef" for c in name)


class VerifiedBuilds:
    """Build folders of several candidates, each used by one run at a time: in a temporary
    folder with digests in memory, or (`root`) kept on disk with digests beside them."""

    def __init__(self, max_folders: int = MAX_FOLDERS, root: Path | None = None) -> None:
        self.persistent = root is not None
        self.root = Path(os.path.abspath(root)) if root is not None else Path(tempfile.mkdtemp(prefix="dice-builds-"))
        self.max_folders = max_folders
        self.digests: OrderedDict[str, str] = OrderedDict()  # in memory: least recently used first
        self._lock = threading.Lock()
        self._in_use: dict[str, threading.Lock] = {}
        if self.persistent:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._prepare()
            # Yours alone: where others may write, they could plant a build and its digest.
            owner = os.stat(self.root)
            if owner.st_uid != os.getuid() or owner.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                raise PermissionError(f"{self.root} is not yours alone to write")
            fd, probe = tempfile.mkstemp(dir=self.root / DIGESTS, prefix=".probe-")  # a read-only home
            os.close(fd)
            os.unlink(probe)

    def _prepare(self) -> None:
        """The store's folders (again, should someone have emptied the cache meanwhile)."""
        for sub in (DIGESTS, LOCKS):
            (self.root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)

    @staticmethod
    def key(document: str, arch: str | None) -> str:
        return hashlib.sha256(f"{arch}\0{document}".encode()).hexdigest()[:32]

    @contextmanager
    def folder(self, key: str, wait: bool = True) -> Iterator[Path | None]:
        """The document's build folder for one run; a second run of the same document (another
        thread, or on disk another process) waits for the first to end, so that one folder
        never serves two runs at once. With wait=False, None instead of waiting, when another
        run has it."""
        with self._lock:
            turn = self._in_use.setdefault(key, threading.Lock())
        if not turn.acquire(blocking=wait):
            yield None
            return
        try:
            held = None
            if self.persistent:
                self._prepare()
                held = lock_file(self.root / LOCKS / key, wait)
                if held is None:
                    yield None
                    return
            try:
                folder = self.checkout(key)
                try:
                    yield folder
                finally:
                    self.checkin(key)
            finally:
                if held is not None:
                    os.close(held)
        finally:
            turn.release()

    def known(self, key: str) -> bool:
        """Whether a run of this document left its folder here (to be verified when used)."""
        if self.persistent:
            return (self.root / DIGESTS / key).exists()
        with self._lock:
            return key in self.digests

    def checkout(self, key: str) -> Path:
        """The document's build folder, as it was after its last run, or empty. Its digest is
        taken away until checkin: a run that never gives the folder back leaves it unverified."""
        folder = self.root / key
        if self.persistent:
            try:
                known = (self.root / DIGESTS / key).read_text().strip()
            except (OSError, ValueError):  # none, or unreadable: the folder is not to be trusted
                known = None
            (self.root / DIGESTS / key).unlink(missing_ok=True)
        else:
            with self._lock:
                known = self.digests.pop(key, None)
        if os.path.lexists(folder) and (known is None or _kept_digest(folder) != known):
            remove_tree(folder)
        folder.mkdir(exist_ok=True)
        return folder

    def checkin(self, key: str) -> None:
        """Record the folder as the run that used it left it (its process tree is dead), and
        drop the least recently used folders past max_folders (none that a run uses). A folder
        past the bounds of tree_digest is removed instead; nothing here fails the run."""
        digest = _kept_digest(self.root / key)
        if digest is None:
            remove_tree(self.root / key)
        if self.persistent:
            try:
                if digest is not None:
                    self._write_digest(key, digest)
                self._evict_on_disk()
            except OSError as exc:  # the cache removed meanwhile: the folder stays unverified
                logging.getLogger(__name__).warning("build store %s: %s", self.root, exc)
            return
        with self._lock:
            if digest is not None:
                self.digests[key] = digest
            old = [k for k in self.digests if not self._busy(k)][:max(0, len(self.digests) - self.max_folders)]
            for k in old:
                del self.digests[k]
                self._in_use.pop(k, None)
        for k in old:
            remove_tree(self.root / k)

    def _write_digest(self, key: str, digest: str) -> None:
        """The digest file, whole or not at all (a temporary file renamed over it), its mtime
        the time of this checkin to the nanosecond: the order eviction goes by."""
        fd, temporary = tempfile.mkstemp(dir=self.root / DIGESTS, prefix=f".{key}-")
        try:
            with os.fdopen(fd, "w") as file:
                file.write(digest + "\n")
            now = time.time_ns()
            os.utime(temporary, ns=(now, now))
            os.replace(temporary, self.root / DIGESTS / key)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def _evict_on_disk(self) -> None:
        """Remove, beyond the max_folders most recently checked in by any process, the folders
        (with their digest and lock files) that no run holds: a folder with no digest (in use,
        or left by a run that never ended) counts as the oldest."""
        digests = self.root / DIGESTS

        def checked_in(key: str) -> int:
            try:
                return os.stat(digests / key).st_mtime_ns
            except FileNotFoundError:
                return -1

        keys = {name for sub in (self.root, digests, self.root / LOCKS) for name in os.listdir(sub) if _is_key(name)}
        for key in sorted(keys, key=checked_in, reverse=True)[self.max_folders:]:
            held = lock_file(self.root / LOCKS / key, wait=False)
            if held is None:
                continue  # another run's (this process's or another's)
            try:
                (digests / key).unlink(missing_ok=True)
                remove_tree(self.root / key)
                (self.root / LOCKS / key).unlink(missing_ok=True)
            except OSError as exc:  # one folder that cannot go never fails another's run
                logging.getLogger(__name__).warning("build store: %s not removed: %s", key, exc)
            finally:
                os.close(held)
            with self._lock:
                if not self._busy(key):
                    self._in_use.pop(key, None)

    def _busy(self, key: str) -> bool:
        turn = self._in_use.get(key)
        return turn is not None and turn.locked()

    def close(self) -> None:
        """Remove a temporary store (a store on disk stays for later processes)."""
        if not self.persistent:
            remove_tree(self.root)


_PROCESS_BUILDS: dict[Path | None, VerifiedBuilds] = {}  # by root on disk; None: the temporary one
_PROCESS_LOCK = threading.Lock()


def reuse_builds() -> bool:
    return settings.current().reuse_builds


def persistent_root() -> Path | None:
    """Where process_builds() keeps its folders on disk, or None (a temporary store): only
    where sandboxes are isolated, unless DICE_BUILD_CACHE=off. A folder per torch version and
    Python, torch's read from its package's metadata (the judge does not import torch)."""
    setting = settings.current().build_cache
    if setting == "off":
        return None
    try:
        if not isolation():
            return None
    except IsolationUnavailable:
        return None  # DICE_SANDBOX_ISOLATION=on where it cannot be: no run will use the store
    try:
        base = os.path.expanduser(setting) if setting else cache_root() / "builds"
    except RuntimeError:  # no home folder to be found
        return None
    return Path(os.path.abspath(base)) / _builds_depend_on()


@functools.cache
def _builds_depend_on() -> str:
    """What a build depends on beyond its document and architecture: torch (its version
    names its CUDA too) and Python."""
    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch = "none"
    return f"torch-{torch}-py{sys.version_info[0]}.{sys.version_info[1]}"


def process_builds() -> VerifiedBuilds:
    """The store every judging of this process shares (made on first use): on disk at
    persistent_root(), else a temporary one removed at exit."""
    root = persistent_root()
    with _PROCESS_LOCK:
        if root in _PROCESS_BUILDS:
            return _PROCESS_BUILDS[root]
        store = None
        if root is not None:
            try:
                store = VerifiedBuilds(root=root)
            except OSError as exc:
                logging.getLogger(__name__).warning(
                    "load_inline builds are kept only while this process runs: %s cannot be used (%s); "
                    "%s=off says not to try", root, exc, CACHE_ENV)
        if store is None:
            if None not in _PROCESS_BUILDS:
                _PROCESS_BUILDS[None] = VerifiedBuilds()
                atexit.register(_PROCESS_BUILDS[None].close)
            store = _PROCESS_BUILDS[None]
        _PROCESS_BUILDS[root] = store
        return store
