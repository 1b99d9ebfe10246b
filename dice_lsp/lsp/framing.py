"""LSP base-protocol frames (`Content-Length: N\\r\\n\\r\\n` + N bytes of JSON) read from a
byte stream that may lie.

pygls' own loop trusts the stream: a frame whose Content-Length counts characters rather
than bytes leaves the rest of its body in front of the next header, which then never
matches again (the server goes deaf), and a 100 GB Content-Length is a 100 GB read. Here
every frame is bounded and every fault resynchronises on the next `Content-Length:` header;
the caller hears about each fault, so that it can answer with a JSON-RPC error instead of
silence. Only the end of the stream ends it (END_OF_STREAM: a body of `null` is a message,
for the caller to refuse).

What a body holds is bounded too: JSON nested deeper than MAX_DEPTH is a fault (json.loads
would raise RecursionError past about 1,000 levels, and every layer above recurses too), and a
lone UTF-16 surrogate in a string (`"\\ud800"`, which no file can hold as UTF-8) becomes U+FFFD,
one character for one, so that positions keep their meaning and no later encode fails.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

# A 5 MB .cu file in a didOpen, JSON-escaped, is about 6 MB; leave room for larger ones.
MAX_BODY = 64 * 1024 * 1024
MAX_HEADERS = 8 * 1024
_HEADER = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\d{1,20})[ \t]*\r?\n", re.IGNORECASE)
_END_OF_HEADERS = re.compile(rb"\r?\n\r?\n")
# LSP's deepest messages (a WorkspaceEdit in documentChanges, settings) are about 10 levels.
MAX_DEPTH = 64
# Where a body can hold a surrogate: a \uD800-\uDFFF escape, or its bytes (json.loads decodes
# with surrogatepass).
_MAY_HOLD_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class FrameFault:
    """What was wrong with the bytes skipped to find the next frame; for the log and the client."""

    message: str
    code: int = -32700  # ParseError: no request id can be read from bytes that are not a frame
    id: int | str | None = None  # the request's, where the message could be read that far


class EndOfStream:
    def __repr__(self) -> str:
        return "END_OF_STREAM"


END_OF_STREAM = EndOfStream()


def _without_surrogates(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)


def _checked(message: Any, may_hold_surrogates: bool) -> Any | FrameFault:
    """The message with lone surrogates replaced, or a fault when it is nested too deep;
    iterative, so that no depth of input can reach Python's recursion limit here."""
    if may_hold_surrogates and isinstance(message, str):
        return _without_surrogates(message)
    if not isinstance(message, (dict, list)):
        return message
    stack: list[tuple[dict | list, int]] = [(message, 1)]
    while stack:
        container, depth = stack.pop()
        if depth > MAX_DEPTH:
            request_id = message.get("id") if isinstance(message, dict) else None
            valid_id = isinstance(request_id, (int, str)) and not isinstance(request_id, bool)
            return FrameFault(f"a message nested deeper than {MAX_DEPTH} levels", -32600,
                              request_id if valid_id else None)
        if isinstance(container, dict):
            if may_hold_surrogates and any(_SURROGATE.search(k) for k in container):
                items = [(_without_surrogates(k), v) for k, v in container.items()]
                container.clear()
                container.update(items)
            entries = container.items()
        else:
            entries = enumerate(container)
        for key, value in entries:
            if isinstance(value, (dict, list)):
                stack.append((value, depth + 1))
            elif may_hold_surrogates and isinstance(value, str) and _SURROGATE.search(value):
                container[key] = _without_surrogates(value)
    return message


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # Python's json reads NaN and Infinity; JSON has neither


def parse_body(body: bytes) -> Any | FrameFault:
    """A frame's body as JSON (checked as above); ValueError when it is not JSON."""
    try:
        message = json.loads(body, parse_constant=_not_json)
    except RecursionError:
        return FrameFault(f"a message nested deeper than {MAX_DEPTH} levels")
    return _checked(message, _MAY_HOLD_SURROGATE.search(body) is not None)


ReadChunk = Callable[[], Awaitable[bytes]]


class FrameReader:
    """Frames from `read_chunk` (b"" at the end of the stream), as parsed JSON or FrameFault,
    then END_OF_STREAM."""

    def __init__(self, read_chunk: ReadChunk, max_body: int = MAX_BODY) -> None:
        self._read_chunk = read_chunk
        self._buffer = bytearray()
        self._eof = False
        self.max_body = max_body
        # Between a fault and the next header every skipped byte belongs to that one fault.
        self._resynchronising = False

    async def _fill(self) -> bool:
        if self._eof:
            return False
        chunk = await self._read_chunk()
        if not chunk:
            self._eof = True
            return False
        self._buffer += chunk
        return True

    def _fault(self, message: str) -> FrameFault:
        self._resynchronising = True
        return FrameFault(message)

    async def next(self) -> Any | FrameFault | EndOfStream:
        """The next message (a parsed JSON value, `None` for a body of `null`), a fault that was
        skipped, or END_OF_STREAM."""
        while True:
            header = _HEADER.search(self._buffer)
            if header is None:
                # Keep a tail that could be the start of a header cut between two chunks.
                skipped = bytes(self._buffer[: max(0, len(self._buffer) - 32)])
                del self._buffer[: len(skipped)]
                if skipped.strip() and not self._resynchronising:
                    return self._fault(f"skipped {len(skipped)} bytes that are not an LSP frame")
                if not await self._fill():
                    return END_OF_STREAM
                continue
            if header.start() and bytes(self._buffer[: header.start()]).strip() and not self._resynchronising:
                skipped = header.start()
                del self._buffer[:skipped]
                return self._fault(f"skipped {skipped} bytes that are not an LSP frame")
            del self._buffer[: header.start()]
            self._resynchronising = False
            end = _END_OF_HEADERS.search(self._buffer)
            if end is None:
                if len(self._buffer) > MAX_HEADERS:
                    del self._buffer[: header.end() - header.start()]
                    return self._fault(f"a header section longer than {MAX_HEADERS} bytes")
                if not await self._fill():
                    return END_OF_STREAM
                continue
            return await self._body(bytes(self._buffer[: end.start() + 2]), end.end())

    async def _body(self, headers: bytes, body_start: int) -> Any | FrameFault | EndOfStream:
        length = _LENGTH.match(headers)
        if length is None:
            del self._buffer[:body_start]
            return self._fault("a frame without a valid Content-Length")
        size = int(length.group(1))
        if size > self.max_body:
            # Not read: whatever follows is skipped up to the next header.
            del self._buffer[:body_start]
            return self._fault(f"a frame of {size} bytes, over the limit of {self.max_body}")
        while len(self._buffer) < body_start + size:
            if not await self._fill():
                return END_OF_STREAM
        body = bytes(self._buffer[body_start : body_start + size])
        del self._buffer[: body_start + size]
        try:
            return parse_body(body)
        except ValueError:
            pass
        # A client that counted characters, not bytes, sent a body longer than it said: the
        # rest is already here, up to the next header. Take the message if that completes it.
        following = _HEADER.search(self._buffer)
        rest = bytes(self._buffer[: following.start() if following else len(self._buffer)])
        try:
            message = parse_body(body + rest)
        except ValueError:
            return self._fault(f"a frame of {size} bytes that is not JSON")
        del self._buffer[: len(rest)]
        return message
