"""Notice source files changed outside the editor (a git checkout, a build) with watchdog.

Events arrive on watchdog's thread; they are handed to the event loop, which drops the
results that no longer match the file.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from profiler.source.document import kind_of

log = logging.getLogger(__name__)


class _Forward(FileSystemEventHandler):
    def __init__(self, loop: asyncio.AbstractEventLoop, on_change: Callable[[str], None]) -> None:
        self._loop = loop
        self._on_change = on_change

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type in ("opened", "closed_no_write"):
            return
        for path in (event.src_path, getattr(event, "dest_path", "")):
            if path and kind_of(str(path)) is not None:
                self._loop.call_soon_threadsafe(self._on_change, str(path))


class FileWatcher:
    def __init__(self, on_change: Callable[[str], None]) -> None:
        self._on_change = on_change
        self._observer: Observer | None = None
        self._watched: set[str] = set()

    def watch(self, folder: str) -> None:
        if folder in self._watched or not Path(folder).is_dir():
            return
        if self._observer is None:
            self._observer = Observer()
            self._observer.daemon = True
            self._observer.start()
        handler = _Forward(asyncio.get_running_loop(), self._on_change)
        try:
            self._observer.schedule(handler, folder, recursive=True)
        except OSError as exc:  # e.g. out of inotify watches: results just stay until reopened
            log.warning("cannot watch %s: %s", folder, exc)
            return
        self._watched.add(folder)

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer = None
