"""Where the profiler keeps things between runs: $XDG_CACHE_HOME/dice-lsp or ~/.cache/dice-lsp."""

from __future__ import annotations

import fcntl
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


def lock_file(path: Path, wait: bool) -> int | None:
    """A descriptor of `path` holding its flock (None: another holds it and wait is False).
    A lock file removed meanwhile (with its folder, under the lock) is not the file now there,
    so it is opened again. Close the descriptor to let go."""
    while True:
        # Write-only, mode 0200: a sandboxed candidate (same uid, every mount but its own
        # folders read-only to it) can open it neither to write (EROFS) nor to read (EACCES),
        # so it cannot hold a lock of the judge's.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o200)
        try:
            os.fchmod(fd, 0o200)
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            now, held = os.stat(path), os.fstat(fd)
            if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                return fd
        except BlockingIOError:
            os.close(fd)
            return None
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
