"""Where the profiler keeps things between runs: $XDG_CACHE_HOME/dice-lsp or ~/.cache/dice-lsp."""

from __future__ import annotations

import os
from pathlib import Path


class CacheFolderError(Exception):
    """The cache folder cannot be made (a file in its place, no permission): a one-line message."""


def cache_root() -> Path:
    """The profiler's cache (not made here)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dice-lsp"


def cache_dir(*parts: str) -> Path:
    """A folder under the profiler's cache, created on first use."""
    folder = cache_root().joinpath(*parts)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in [folder, *folder.parents] if p.exists() and not p.is_dir()), None)
        why = f"{blocker} is a file, not a folder" if blocker else (exc.strerror or str(exc))
        raise CacheFolderError(f"cannot use the cache folder {folder}: {why} (set XDG_CACHE_HOME to a "
                               "writable folder)") from exc
    return folder
