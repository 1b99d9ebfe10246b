"""The `dice/status` notification: what the server is doing, for status bars and :checkhealth."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

STATUS_NOTIFICATION = "dice/status"


@dataclass(frozen=True)
class Status:
    model: str | None = None  # the model loaded (or being loaded)
    gpu: str | None = None  # the GPU results are timed on; None: no GPU
    sandbox: str | None = None  # how candidates are isolated (profiler.sandbox.isolation.describe)
    busy: bool = False
    message: str = "ready"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


class StatusReporter:
    """Holds the current status and notifies the client (`notify(method, params)`) each time it changes."""

    def __init__(self, notify: Callable[[str, dict], None]) -> None:
        self._notify = notify
        self.current = Status()

    def update(self, **changes: object) -> None:
        status = dataclasses.replace(self.current, **changes)
        if status != self.current:
            self.current = status
            self._notify(STATUS_NOTIFICATION, status.to_json())
