"""Connections: stdio, or a TCP listener that serves each editor with a server of its own.

Over TCP every connection gets a fresh DiceServer (documents, settings, jobs, diagnostics),
so a second editor's `initialize` cannot wipe the first one's documents or take its answers,
and a connection that ends (with `exit`, or just closing) releases only its own server.

A listener on an address other than loopback needs a token: its first frame must be an
`initialize` whose initializationOptions carry `"token": "<the token>"`; anything else is
answered with an error and the connection closed, before any LSP message is handled. Until
then a client gets small frames, a few seconds and a bounded number of connections.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from dice_lsp.framing import MAX_BODY, FrameReader

if TYPE_CHECKING:
    from dice_lsp.server import DiceServer

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
MAX_CONNECTIONS = 16
AUTH_TIMEOUT_S = 10.0
AUTH_MAX_BODY = 1024 * 1024
TOKEN_FIELD = "token"


def is_loopback(host: str) -> bool:
    """Whether every address `host` names is a loopback one ("" and 0.0.0.0 are every interface)."""
    try:
        infos = socket.getaddrinfo(host or None, None, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE)
    except OSError:
        return False
    addresses = {info[4][0].split("%")[0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


async def serve_connection(server: DiceServer, frames: FrameReader, first: Any = None) -> int:
    """Feed one client's messages to its server until `exit` or the end of the stream; the
    exit code the LSP lifecycle gives (1 when the client left without `shutdown`)."""
    protocol = server.protocol
    message = first if first is not None else await frames.next()
    while message is not None:
        protocol.receive(message)
        if protocol.exit_code is not None:
            return protocol.exit_code
        message = await frames.next()
    log.info("dice-lsp: the client closed the connection")
    return 0 if protocol._shutdown else 1


class _StdoutWriter:
    def close(self) -> None:
        sys.stdout.buffer.flush()

    def write(self, data: bytes) -> None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def _stdin_chunks(loop: asyncio.AbstractEventLoop) -> Callable[[], asyncio.Future]:
    """Chunks of stdin, read by a daemon thread (a read blocked on an idle editor must not
    keep the process alive after `exit`)."""
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    fd = sys.stdin.fileno()

    def pump() -> None:
        while True:
            try:
                # os.read, not sys.stdin.buffer: a daemon thread blocked inside the buffered
                # reader holds its lock, and the interpreter aborts on it at exit.
                chunk = os.read(fd, CHUNK)
            except OSError:
                chunk = b""
            loop.call_soon_threadsafe(queue.put_nowait, chunk)
            if not chunk:
                return

    threading.Thread(target=pump, name="dice-lsp-stdin", daemon=True).start()
    return queue.get


def serve_stdio(make_server: Callable[[], DiceServer]) -> int:
    async def run() -> int:
        server = make_server()
        server.protocol.set_writer(_StdoutWriter())
        try:
            return await serve_connection(server, FrameReader(_stdin_chunks(asyncio.get_running_loop())))
        finally:
            await server.release()

    try:
        return asyncio.run(run())
    except (BrokenPipeError, KeyboardInterrupt):
        return 1


async def _authenticate(frames: FrameReader, writer: asyncio.StreamWriter, token: str) -> Any | None:
    """The first frame, if it is an `initialize` carrying the token (taken out of it); else None."""
    try:
        first = await asyncio.wait_for(frames.next(), AUTH_TIMEOUT_S)
    except asyncio.TimeoutError:
        return None
    if not isinstance(first, dict):
        return None
    params = first.get("params") if first.get("method") == types.INITIALIZE else None
    options = params.get("initializationOptions") if isinstance(params, dict) else None
    given = options.pop(TOKEN_FIELD, None) if isinstance(options, dict) else None
    if isinstance(given, str) and hmac.compare_digest(given.encode(), token.encode()):
        return first
    request_id = first.get("id")
    refusal = {
        "jsonrpc": "2.0",
        "id": request_id if isinstance(request_id, (int, str)) else None,
        "error": {"code": -32600, "message": "dice-lsp: this listener needs initializationOptions.token"},
    }
    body = json.dumps(refusal).encode()
    writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    return None


def serve_tcp(make_server: Callable[[], DiceServer], host: str, port: int, token: str | None) -> int:
    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if slots.locked():
            writer.close()
            return
        async with slots:
            peer = writer.get_extra_info("peername")
            frames = FrameReader(lambda: reader.read(CHUNK))
            first = None
            try:
                if token is not None:
                    frames.max_body = AUTH_MAX_BODY
                    first = await _authenticate(frames, writer, token)
                    if first is None:
                        log.warning("dice-lsp: refused %s: no valid token in its first frame", peer)
                        return
                    frames.max_body = MAX_BODY
                server = make_server()
                server.protocol.set_writer(writer)
                try:
                    await serve_connection(server, frames, first)
                finally:
                    await server.release()
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                log.info("dice-lsp: connection %s lost: %s", peer, exc)
            finally:
                writer.close()

    async def listen() -> None:
        listener = await asyncio.start_server(on_connect, host, port)
        log.info("dice-lsp: listening on %s", ", ".join(str(s.getsockname()) for s in listener.sockets))
        async with listener:
            await listener.serve_forever()

    slots = asyncio.Semaphore(MAX_CONNECTIONS)
    try:
        asyncio.run(listen())
    except KeyboardInterrupt:
        pass
    except OSError as exc:  # the port is taken, the address is not this machine's
        print(f"dice-lsp: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0
