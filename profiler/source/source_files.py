"""Reading a source file that someone else named: only a regular file, only up to a size.

A path can name a FIFO (opening it waits for a writer forever), a device (/dev/zero never
ends; opening some devices does something), a socket or a folder, directly or through a
symlink. Each is refused with a message that says what it is, before it is opened; the file
is then opened without blocking and checked again, so that a file swapped for a FIFO in
between is refused too, and read up to MAX_SOURCE_BYTES.
"""

from __future__ import annotations

import os
import re
import stat

# A 6 MB one-line file is the largest the language server was measured with; a kernel file
# ten times that is not one anybody edits by hand.
MAX_SOURCE_BYTES = 64 * 1024 * 1024

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


class SourceFileError(OSError):
    """The file cannot be read as source; str() is one line that says why."""


def kind_of(mode: int) -> str:
    """What a file of this st_mode is, in words: "a regular file", "a FIFO (named pipe)", ..."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def not_regular(path: str | os.PathLike) -> str | None:
    """Why `path` (symlinks followed) is not a regular file, or None when it is one or is missing."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else kind_of(mode)


def read_source_bytes(path: str | os.PathLike, max_bytes: int = MAX_SOURCE_BYTES) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; SourceFileError says why not."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise SourceFileError(f"cannot read {os.fspath(path)}: no such file") from None
    except OSError as exc:
        raise SourceFileError(f"cannot read {os.fspath(path)}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise SourceFileError(f"{os.fspath(path)} is {kind_of(mode)}, not a regular file: only files are read")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise SourceFileError(f"cannot read {os.fspath(path)}: {exc.strerror or exc}") from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise SourceFileError(f"{os.fspath(path)} is {kind_of(status.st_mode)}, not a regular file: "
                                  "only files are read")
        if status.st_size > max_bytes:
            raise SourceFileError(f"{os.fspath(path)} is {status.st_size} bytes, over the limit of {max_bytes}")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # it grew while it was read
                raise SourceFileError(f"{os.fspath(path)} is over the limit of {max_bytes} bytes")
        return b"".join(chunks)
    except OSError as exc:
        if isinstance(exc, SourceFileError):
            raise
        raise SourceFileError(f"cannot read {os.fspath(path)}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_source_text(path: str | os.PathLike, max_bytes: int = MAX_SOURCE_BYTES) -> str:
    """The file as UTF-8 (SourceFileError for a file that is not UTF-8, or not readable as above)."""
    data = read_source_bytes(path, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceFileError(f"{os.fspath(path)} is not UTF-8 (byte 0x{data[exc.start]:02x} at offset "
                              f"{exc.start})") from None


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.MULTILINE)


def include_problems(source: str, include_dirs: list[str] | tuple[str, ...]) -> list[tuple[int, int, str]]:
    """(1-based line, column, message) for each `#include` of the source that names something
    other than a regular file: an absolute path, or a quoted name found in `include_dirs`. The
    compiler would wait on a FIFO until its time bound, or read a device until its memory bound;
    this says what the file is at once. Headers the included headers include are the bounds'."""
    found = []
    for match in _INCLUDE.finditer(source):
        name = match.group(2).strip()
        places = [name] if os.path.isabs(name) else (
            [os.path.join(d, name) for d in include_dirs] if match.group(1) == '"' else [])
        for place in places:
            if not os.path.lexists(place):
                continue
            kind = not_regular(place)
            if kind is not None:
                line = source.count("\n", 0, match.start()) + 1
                column = match.start(2) - (source.rfind("\n", 0, match.start()) + 1) + 1
                found.append((line, column, f"#include names {place}, which is {kind}: only regular files "
                                            "can be included"))
            break
    return found
