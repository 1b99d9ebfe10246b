"""Listener tokens: made, kept in files only their user can read, and compared in constant time.

Every listener of this project (dice-lsp's TCP mode, `dice engine serve`) asks each client
for a token before anything else, loopback included: any local process, another user's too,
can reach a loopback port, and a client of either listener can make this machine run code
or the model. A listener given no token makes one, and writes the token it asks for to a
file in token_folder, where a client of the same user finds it; the file goes when the
listener ends. The token a user sets is read from the environment (environment_token) by
each listener beside the code that asks for it, not here.

A leaf: the language server imports it without the engine's heavy modules.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path


def new_token() -> str:
    return secrets.token_urlsafe(32)


def token_matches(given: object, expected: str) -> bool:
    """Whether `given` is the token, in constant time whatever the lengths: both are hashed
    first. Anything but a string (a client's JSON null, a number) never matches."""
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(hashlib.sha256(given.encode("utf-8", "replace")).digest(),
                               hashlib.sha256(expected.encode("utf-8", "replace")).digest())


def environment_token(name: str) -> str | None:
    """The token set in the variable `name`, or None where it is unset or blank."""
    return os.environ.get(name, "").strip() or None


def token_folder(listener: str) -> Path:
    """Where a listener's token files go: $XDG_RUNTIME_DIR/dice-lsp/LISTENER (a per-user tmpfs)
    where there is one, else $XDG_CACHE_HOME/dice-lsp/LISTENER or ~/.cache/dice-lsp/LISTENER: a
    folder of its own, kept 0700 (the cache folder above it is shared with the sandboxes'
    builds and keeps its mode). The clients look in the same place."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "dice-lsp" / listener


def write_token_file(path: Path, token: str) -> None:
    """The token in a file only this user can read or write, in a folder only this user can
    enter; written under a temporary name and renamed, never through a symlink."""
    path.parent.parent.mkdir(parents=True, exist_ok=True)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    folder = os.stat(path.parent, follow_symlinks=False)
    if not stat.S_ISDIR(folder.st_mode) or folder.st_uid != os.getuid():
        raise OSError(f"{path.parent} is not a folder of this user's")
    if folder.st_mode & 0o077:
        os.chmod(path.parent, 0o700)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.replace(partial, path)


def read_token_file(path: Path) -> str | None:
    """The token in `path`, if it is a file of this user's that no one else can read (a file
    another user could have written is not trusted to name the listener's token)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd) as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            return None
        return f.read().strip() or None


def remove_token_file(path: Path, token: str) -> None:
    """Only the file this listener wrote: another listener may have taken the port since."""
    try:
        if path.read_text().strip() == token:
            path.unlink()
    except OSError:
        pass
