"""Length-prefixed msgpack frames: the engine protocol's wire format, over a pipe or TCP.

A frame is a 4-byte big-endian length, then that many bytes of msgpack encoding one map.
Messages (client -> engine): {"op": "hello", "token"} (TCP only, first), {"op": "run", "id",
"method": "infill"|"generate"|"optimize", "args"}, {"op": "cancel", "id"}, {"op": "close"}.
Engine -> client: {"type": "ready", "info"}, {"type": "progress", "id", "progress"},
{"type": "result", "id", "candidates"}, {"type": "error", "id", "message", "cancelled"}.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any, BinaryIO

import msgpack

from engine.types import EngineError

HEADER = struct.Struct(">I")
MAX_FRAME = 64 << 20  # far above any prompt; a bigger length means a corrupt stream


class FrameError(EngineError):
    """The byte stream is no longer a sequence of frames: the session cannot go on."""


class MessageError(FrameError):
    """A well-framed message that is not a msgpack map: answer it, and read on."""


def encode_frame(message: dict[str, Any]) -> bytes:
    payload = msgpack.packb(message, use_bin_type=True)
    return HEADER.pack(len(payload)) + payload


def decode_payload(payload: bytes) -> dict[str, Any]:
    try:
        message = msgpack.unpackb(payload, raw=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise MessageError(f"malformed message: not msgpack ({exc})") from exc
    if not isinstance(message, dict):
        raise MessageError(f"malformed message: expected a map, got {type(message).__name__}")
    return message


def frame_length(header: bytes, limit: int = MAX_FRAME) -> int:
    """The payload length a frame header announces, refused above `limit` before any of it is read."""
    (length,) = HEADER.unpack(header)
    if length > limit:
        raise FrameError(f"malformed message: frame of {length} bytes (limit {limit})")
    return length


def read_frame(stream: BinaryIO) -> dict[str, Any] | None:
    """The next message, or None at a clean end of stream."""
    header = stream.read(HEADER.size)
    if not header:
        return None
    if len(header) < HEADER.size:
        raise FrameError("malformed message: stream ended inside a frame header")
    length = frame_length(header)
    payload = stream.read(length)
    if len(payload) < length:
        raise FrameError("malformed message: stream ended inside a frame")
    return decode_payload(payload)


async def read_frame_async(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise FrameError("malformed message: stream ended inside a frame header") from exc
    try:
        payload = await reader.readexactly(frame_length(header))
    except asyncio.IncompleteReadError as exc:
        raise FrameError("malformed message: stream ended inside a frame") from exc
    return decode_payload(payload)
