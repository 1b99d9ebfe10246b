"""The JSON-RPC side of the server: every request gets an answer, in the order the LSP
lifecycle allows.

- A request whose params do not fit the method's type gets InvalidParams (pygls raises
  inside json.loads' object hook, where no one answers).
- Before `initialize`: ServerNotInitialized (-32002) for requests, notifications dropped.
- After `shutdown`: InvalidRequest for requests; a second `initialize` is InvalidRequest too.
- `exit` ends the connection (not the process: a TCP listener serves others) and leaves the
  exit code, 0 after `shutdown` and 1 without it, for whoever runs the connection.
- A message that is not a JSON-RPC request, response or notification (not an object, an `id`
  that is not a string or an integer, a `method` that is not a string) is InvalidRequest.
- No traceback reaches the client: a handler's failure is InternalError with its one-line
  message; the traceback goes to the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from lsprotocol.types import ResponseError
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcServerNotInitialized,
)
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from dice_lsp.lsp.framing import FrameFault

log = logging.getLogger(__name__)


class _AnsweredErrors(logging.Filter):
    """pygls logs every error answer with its traceback, InvalidParams for a file that is a FIFO
    included: one line for those (the client got the message); a traceback stays for the
    failures that are bugs (InternalError, or any other exception)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, JsonRpcException) and not isinstance(error, JsonRpcInternalError):
            record.msg, record.args = f"{record.getMessage()}: {type(error).__name__}: {error.message}", ()
            record.exc_info = record.exc_text = None
        return True


logging.getLogger("pygls.protocol.json_rpc").addFilter(_AnsweredErrors())


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, (int, str)) and not isinstance(value, bool))


def _not_json_rpc(data: Any) -> str | None:
    """What makes `data` something other than a JSON-RPC 2.0 message, or None."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__ if data is not None else 'null'}, not an object"
    if data.get("jsonrpc") != "2.0":
        return 'no "jsonrpc": "2.0"'
    if not _valid_id(data.get("id")):
        return "an id that is not a string or an integer"
    if "method" in data and not isinstance(data["method"], str):
        return "a method that is not a string"
    if "method" not in data and "id" not in data:
        return "neither a method nor an id"
    return None


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
        # Called with a request's id on its $/cancelRequest (the server cancels the job that
        # request started: a command's handler runs apart from the request's own task).
        self.on_cancel_request: Callable[[Any], None] | None = None

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        if isinstance(error, ResponseError) and error.data is not None:
            # pygls puts a handler's traceback in `data`; it is for the log, not the client.
            error = ResponseError(code=error.code, message=error.message)
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
            self._answer_error(data.id, JsonRpcException(code=data.code, message=data.message))
            return
        problem = _not_json_rpc(data)
        if problem is not None:
            log.warning("dice-lsp: ignored a message that is not JSON-RPC 2.0 (%s): %.200r", problem, data)
            request_id = data.get("id") if isinstance(data, dict) and _valid_id(data.get("id")) else None
            self._answer_error(request_id, JsonRpcInvalidRequest(f"not a JSON-RPC 2.0 message: {problem}"))
            return
        try:
            message = self.structure_message(data)
        except Exception as exc:  # pygls' JsonRpcException, or anything cattrs raises on odd params
            if "method" in data and "id" in data:
                error = exc if isinstance(exc, JsonRpcInvalidParams) else JsonRpcInvalidParams()
                error.message = f"invalid params for {data['method']}"
                self._answer_error(data["id"], error)
            else:
                log.warning("dice-lsp: dropped a malformed %s notification", data.get("method"))
            return
        try:
            self.handle_message(message)
        except Exception as exc:  # a bug in a handler's synchronous part: answered, and logged
            log.exception("dice-lsp: %s failed", data.get("method"))
            if "method" in data and "id" in data:
                self._answer_error(data["id"], JsonRpcInternalError(f"{data['method']}: {type(exc).__name__}: {exc}"))

    def handle_message(self, message: Any) -> None:
        method = getattr(message, "method", None)
        # pygls 2 answers $/cancelRequest inside its private _handle_notification, before any
        # registered handler, and cancels only the request's own task; handle_message is the
        # public way in that sees it first.
        if method == types.CANCEL_REQUEST and self.on_cancel_request is not None:
            self.on_cancel_request(message.params.id)
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
