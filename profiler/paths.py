"""Where the profiler keeps things between runs: $XDG_CACHE_HOME/dice-lsp or ~/.cache/dice-lsp."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """A folder under the profiler's cache, created on first use."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dice-lsp"
    folder = root.joinpath(*parts)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
