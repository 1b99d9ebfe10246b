"""The JSON-RPC side of the server: every request gets an answer, in the order the LSP
lifecycle allows.

- A request whose params do not fit the method's type gets InvalidParams (pygls raises
  inside json.loads' object hook, where no one answers).
- Before `initialize`: ServerNotInitialized (-32002) for requests, notifications dropped.
- After `shutdown`: InvalidRequest for requests; a second `initialize` is InvalidRequest too.
- `exit` ends the connection (not the process: a TCP listener serves others) and leaves the
  exit code, 0 after `shutdown` and 1 without it, for whoever runs the connection.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcServerNotInitialized,
)
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from dice_lsp.framing import FrameFault

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JsonResult:
    """A request's result already in its JSON shape (built off the event loop), sent as it
    is: cattrs takes about 70 us per code lens to unstructure, a second for a file of
    10,000 kernels, on the event loop."""

    value: Any


class DiceProtocol(LanguageServerProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initialized = False
        self.exit_code: int | None = None  # set by `exit`: the connection is over

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        """pygls cancels a request's own task on $/cancelRequest, but a command's handler runs
        as a separate task; cancel the job started by that request too."""
        jobs = getattr(self._server, "jobs", None)
        if jobs is not None:
            jobs.cancel_request(msg_id)
        super()._handle_cancel_notification(msg_id)

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        if isinstance(result, JsonResult) and error is None:
            self._result_types.pop(msg_id, None)
            self._send_data({"jsonrpc": self.VERSION, "id": msg_id, "result": result.value})
            return
        super()._send_response(msg_id, result, error)

    def _answer_error(self, msg_id: Any, error: JsonRpcException) -> None:
        self._send_response(msg_id, error=error.to_response_error())

    def receive(self, data: Any) -> None:
        """One message from the client, parsed JSON or what the framing layer skipped."""
        if isinstance(data, FrameFault):
            log.warning("dice-lsp: %s", data.message)
            self._answer_error(None, JsonRpcException(code=data.code, message=data.message))
            return
        if not isinstance(data, dict) or data.get("jsonrpc") != self.VERSION:
            log.warning("dice-lsp: ignored a message that is not JSON-RPC 2.0: %.200r", data)
            request_id = data.get("id") if isinstance(data, dict) else None
            self._answer_error(request_id, JsonRpcInvalidRequest("not a JSON-RPC 2.0 message"))
            return
        try:
            message = self.structure_message(data)
        except JsonRpcException as exc:
            if "method" in data and "id" in data:
                error = exc if isinstance(exc, JsonRpcInvalidParams) else JsonRpcInvalidParams()
                error.message = f"invalid params for {data['method']}"
                self._answer_error(data["id"], error)
            else:
                log.warning("dice-lsp: dropped a malformed %s notification", data.get("method"))
            return
        self.handle_message(message)

    def handle_message(self, message: Any) -> None:
        method = getattr(message, "method", None)
        is_request = method is not None and getattr(message, "id", None) is not None
        refusal: JsonRpcException | None = None
        if method == types.EXIT:
            pass
        elif self._shutdown:
            refusal = JsonRpcInvalidRequest(f"{method}: the server is shutting down")
        elif method == types.INITIALIZE:
            if self.initialized:
                refusal = JsonRpcInvalidRequest("initialize may only be sent once")
            self.initialized = True
        elif method is not None and not self.initialized:
            refusal = JsonRpcServerNotInitialized(f"{method}: send initialize first")
        if refusal is None:
            super().handle_message(message)
        elif is_request:
            self._answer_error(message.id, refusal)
        else:
            log.info("dice-lsp: dropped %s (%s)", method, refusal.message)

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> None:
        self.exit_code = 0 if self._shutdown else 1
