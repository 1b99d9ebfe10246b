"""Measured results on disk, so that reopening a file shows what was measured.

One msgpack file per source file, holding verdicts keyed by a hash of what they measured:
the kernel's text, the file's `dice:` spec lines and the GPU. A key that no longer
matches the file is a stale result; `prune` drops those when the file changes on disk.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
from pathlib import Path

import msgpack

from profiler.machine import settings
from profiler.machine.paths import cache_root
from profiler.verdict.types import Verdict

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    return settings.current().cache_dir or cache_root() / "results"


@functools.lru_cache(maxsize=16)
def _spec_digest(spec: str) -> bytes:
    return hashlib.sha256(spec.encode()).digest()


def result_key(code: str, spec: str, gpu: str | None) -> str:
    """The cache key of one measurement: content hash, spec and GPU.

    The spec is the whole file's `dice:` lines, the same for every kernel of the file: it is
    hashed once, not once per kernel (quadratic in a file of thousands of kernels)."""
    digest = hashlib.sha256()
    for part in (code.encode(), _spec_digest(spec), (gpu or "no gpu").encode()):
        digest.update(part)
        digest.update(b"\0")
    return digest.hexdigest()


class ResultCache:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root or default_cache_dir()

    def _file(self, path: str) -> Path:
        name = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:32]
        return self.root / f"{name}.msgpack"

    def _load(self, path: str) -> dict[str, dict]:
        file = self._file(path)
        try:
            data = msgpack.unpackb(file.read_bytes(), raw=False)
            return dict(data["entries"])
        except FileNotFoundError:
            return {}
        except Exception as exc:  # a corrupt cache is a cache miss, never an error for the user
            log.warning("ignoring unreadable cache file %s: %s", file, exc)
            return {}

    def _store(self, path: str, entries: dict[str, dict]) -> None:
        file = self._file(path)
        if not entries:
            file.unlink(missing_ok=True)
            return
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(msgpack.packb({"path": str(path), "entries": entries}, use_bin_type=True))
        tmp.replace(file)  # atomic: a reader never sees half a file

    def get(self, path: str, key: str) -> Verdict | None:
        return self.get_many(path, [key]).get(key)

    def get_many(self, path: str, keys: list[str]) -> dict[str, Verdict]:
        """The verdicts of `path` under those of `keys` that have one, from one read of its file."""
        entries = self._load(path)
        found = {}
        for key in keys:
            if (data := entries.get(key)) is None:
                continue
            try:
                found[key] = Verdict.from_json(data)
            except (TypeError, ValueError, KeyError) as exc:
                log.warning("ignoring cached result of another format for %s: %s", path, exc)
        return found

    def put(self, path: str, key: str, verdict: Verdict) -> None:
        entries = self._load(path)
        entries[key] = verdict.to_json()
        self._store(path, entries)

    def prune(self, path: str, live: set[str]) -> int:
        """Drop every result of `path` whose key is not in `live`; how many were dropped."""
        entries = self._load(path)
        kept = {k: v for k, v in entries.items() if k in live}
        if len(kept) != len(entries):
            self._store(path, kept)
        return len(entries) - len(kept)
