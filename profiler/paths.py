"""Where the profiler keeps things between runs: $XDG_CACHE_HOME/dice-lsp or ~/.cache/dice-lsp."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
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


def remove_tree(folder: Path) -> None:
    """Remove a folder a candidate may have shaped: shutil.rmtree recurses (a deep enough tree
    raises RecursionError, which ignore_errors does not cover) and cannot enter a folder
    without permissions; then chmod -R and rm -rf, which do neither and follow no links. A
    link in the folder's place (a candidate running without namespaces can make one) is
    removed itself, never followed."""
    if os.path.islink(folder):
        os.unlink(folder)
        return
    try:
        shutil.rmtree(folder)
        return
    except FileNotFoundError:
        return
    except (OSError, RecursionError):
        pass
    for command in (["chmod", "-R", "u+rwx", "--", str(folder)], ["rm", "-rf", "--", str(folder)]):
        subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
    if os.path.lexists(folder):
        logging.getLogger(__name__).warning("could not remove the folder %s", folder)
