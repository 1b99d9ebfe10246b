"""The `dice/status` notification: what the server is doing, for status bars and :checkhealth."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

STATUS_NOTIFICATION = "dice/status"


@dataclass(frozen=True)
class Status:
    model: str | None = None  # the model loaded (or being loaded)
    gpu: str | None = None  # the GPU results are timed on; None: no GPU
    busy: bool = False
    message: str = "ready"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


class StatusReporter:
    """Holds the current status and notifies the client each time it changes."""

    def __init__(self, server: LanguageServer) -> None:
        self._server = server
        self.current = Status()

    def update(self, **changes: object) -> None:
        status = dataclasses.replace(self.current, **changes)
        if status != self.current:
            self.current = status
            self._server.protocol.notify(STATUS_NOTIFICATION, status.to_json())
