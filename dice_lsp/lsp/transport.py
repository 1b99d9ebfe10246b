"""Connections: stdio, or a TCP listener that serves each editor with a server of its own.

Over TCP every connection gets a fresh DiceServer (documents, settings, jobs, diagnostics),
so a second editor's `initialize` cannot wipe the first one's documents or take its answers,
and a connection that ends (with `exit`, or just closing) releases only its own server.

Every listener, loopback included, needs a token: any local process (another user's too)
can reach a loopback port, and a client of dice-lsp can run code on this machine through
dice.profile. The first frame must be an `initialize` whose initializationOptions carry
`"token": "<the token>"`; anything else is answered with an error and the connection closed,
before any LSP message is handled. When none is given (`--token`, LSP_TOKEN) one is generated, and
the listener writes the token to a file only its user can read (token_file, through
engine.serving.auth), where the editor clients look for it.

Until it has passed the token a connection is a stranger: it gets small frames and
AUTH_TIMEOUT_S, as one of at most MAX_STRANGERS (MAX_STRANGERS_PER_ADDRESS from one address).
A stranger past those caps takes the place of the oldest one (from its address, else of
all) that has sent nothing yet: an editor sends its initialize at once, so idle or
reconnecting strangers cannot keep it out, and none of them holds an editor's place
(MAX_CONNECTIONS counts editors only). Whether a stranger has sent anything is known from
the moment its bytes reach this machine (_has_sent: the reader has had bytes, or the socket
has some waiting), not when its task reads them: one accept can take in a hundred
reconnecting strangers before that task runs, or before the transport first reads.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import select
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from dice_lsp.core.config import LSP_TOKEN
from dice_lsp.lsp.framing import END_OF_STREAM, MAX_BODY, FrameReader
from engine.serving import auth

if TYPE_CHECKING:
    from dice_lsp.lsp.state import DiceServer

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
MAX_CONNECTIONS = 16  # editors that passed the token
MAX_STRANGERS = 128
MAX_STRANGERS_PER_ADDRESS = 64  # on loopback every client has one address: this is the cap there
AUTH_TIMEOUT_S = 5.0
SHUTDOWN_GRACE_S = 10.0
AUTH_MAX_BODY = 1024 * 1024
TOKEN_FIELD = "token"
TOO_MANY = "dice-lsp: too many editors are connected; close one and try again"


async def serve_connection(server: DiceServer, frames: FrameReader, first: Any = None) -> int:
    """Feed one client's messages to its server until `exit` or the end of the stream; the
    exit code the LSP lifecycle gives (1 when the client left without `shutdown`)."""
    protocol = server.protocol
    message = first if first is not None else await frames.next()
    while message is not END_OF_STREAM:
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


def _refusal(request_id: Any, message: str) -> bytes:
    body = json.dumps({
        "jsonrpc": "2.0",
        "id": request_id if isinstance(request_id, (int, str)) and not isinstance(request_id, bool) else None,
        "error": {"code": -32600, "message": message},
    }).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


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
    if auth.token_matches(given, token):
        return first
    writer.write(_refusal(first.get("id"), "dice-lsp: this listener needs initializationOptions.token "
                                           "(dice-lsp --tcp wrote it to its token file)"))
    return None


def configured_token() -> str | None:
    """The token a user set for this listener (LSP_TOKEN), if any."""
    return auth.environment_token(LSP_TOKEN)


def token_file(port: int) -> Path:
    """Where the listener on `port` writes its token; the editor clients read it there."""
    return auth.token_folder("tcp") / f"{port}.token"


class _MarkingReader(asyncio.StreamReader):
    """A StreamReader that records that bytes came, as soon as the transport hands them over."""

    received = False

    def feed_data(self, data: bytes) -> None:
        if data:
            self.received = True
        super().feed_data(data)


def _has_sent(reader: _MarkingReader, writer: asyncio.StreamWriter) -> bool:
    """Whether bytes came from this connection and it is still open: handed to its reader, or
    waiting in its socket. A connection that is closing, or whose peer hung up, has sent
    nothing worth its place: it goes first."""
    if writer.transport.is_closing():
        return False
    if reader.received:
        return True
    sock = writer.get_extra_info("socket")
    fd = sock.fileno() if sock is not None else -1
    if fd < 0:
        return False
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLRDHUP)
    events = poller.poll(0)
    gone = select.POLLHUP | select.POLLERR | select.POLLRDHUP | select.POLLNVAL
    return bool(events) and not events[0][1] & gone


async def _start_listener(on_connect: Callable[[Any, asyncio.StreamWriter], Any],
                          host: str, port: int) -> asyncio.AbstractServer:
    """asyncio.start_server, with a _MarkingReader for each connection."""
    loop = asyncio.get_running_loop()

    def factory() -> asyncio.StreamReaderProtocol:
        return asyncio.StreamReaderProtocol(_MarkingReader(loop=loop), on_connect, loop=loop)

    return await loop.create_server(factory, host, port)


def serve_tcp(make_server: Callable[[], DiceServer], host: str, port: int, token: str | None,
              token_path: Path | None = None) -> int:
    """Listen until interrupted. Without a token one is generated; the token is written to
    `token_path` (default: token_file(the port listened on)) for the editor clients."""
    token = token or auth.new_token()
    # Connections that have not passed the token, in the order they came, with their address
    # and reader: a stranger past the caps takes the place of the oldest one that has sent
    # nothing (an editor sends its initialize at once), else of the oldest.
    strangers: dict[asyncio.StreamWriter, tuple[str, _MarkingReader]] = {}
    editors = 0
    connections: set[asyncio.StreamWriter] = set()

    def make_room(address: str) -> None:
        same = [w for w, (a, _) in strangers.items() if a == address]
        crowd = same if len(same) >= MAX_STRANGERS_PER_ADDRESS else (
            list(strangers) if len(strangers) >= MAX_STRANGERS else [])
        if not crowd:
            return
        oldest = next((w for w in crowd if not _has_sent(strangers[w][1], w)), crowd[0])
        log.info("dice-lsp: dropped a connection from %s that sent no token (a newer one came)", strangers[oldest][0])
        strangers.pop(oldest)
        oldest.transport.abort()

    async def on_connect(reader: _MarkingReader, writer: asyncio.StreamWriter) -> None:
        nonlocal editors
        peer = writer.get_extra_info("peername")
        address = peer[0] if isinstance(peer, tuple) else str(peer)
        make_room(address)
        strangers[writer] = (address, reader)
        connections.add(writer)

        frames = FrameReader(functools.partial(reader.read, CHUNK), max_body=AUTH_MAX_BODY)
        try:
            try:
                first = await _authenticate(frames, writer, token)
            finally:
                strangers.pop(writer, None)
            if first is None:
                log.warning("dice-lsp: refused %s: no valid token in its first frame", peer)
                return
            if editors >= MAX_CONNECTIONS:
                writer.write(_refusal(first.get("id"), TOO_MANY))
                return
            editors += 1
            try:
                frames.max_body = MAX_BODY
                server = make_server()
                server.protocol.set_writer(writer)
                try:
                    await serve_connection(server, frames, first)
                finally:
                    await server.release()
            finally:
                editors -= 1
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            log.info("dice-lsp: connection %s lost: %s", peer, exc)
        except asyncio.CancelledError:
            pass  # the listener is ending (SIGTERM, Ctrl-C): its server was released above
        finally:
            connections.discard(writer)
            writer.close()

    written: list[Path] = []

    async def listen() -> None:
        listener = await _start_listener(on_connect, host, port)
        bound = listener.sockets[0].getsockname()[1]
        path = token_path or token_file(bound)
        try:
            auth.write_token_file(path, token)
        except OSError as exc:
            print(f"dice-lsp: cannot write the token file {path}: {exc.strerror or exc}", file=sys.stderr)
            raise SystemExit(1) from None
        written.append(path)
        # SIGTERM ends the listener as Ctrl-C does, so that its token file is removed. The
        # connections are closed first: the listener's close waits for every one of them.
        main = asyncio.current_task()

        def stop() -> None:
            for writer in list(connections):
                writer.transport.abort()
            main.cancel()
            # Ending a connection's server waits on what it started; past a grace period the
            # process ends regardless (a SIGTERM that does not end the listener is worse).
            asyncio.get_running_loop().call_later(SHUTDOWN_GRACE_S, exit_now)

        def exit_now() -> None:
            log.warning("dice-lsp: the connections did not end within %.0f s of SIGTERM; exiting", SHUTDOWN_GRACE_S)
            for written_path in written:
                auth.remove_token_file(written_path, token)
            os._exit(0)

        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop)
        addresses = ", ".join(str(s.getsockname()[:2]) for s in listener.sockets)
        print(f"dice-lsp: listening on {addresses}; the token is in {path}", file=sys.stderr, flush=True)
        async with listener:
            await listener.serve_forever()

    try:
        asyncio.run(listen())
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    except OSError as exc:  # the port is taken, the address is not this machine's
        print(f"dice-lsp: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    finally:
        for path in written:
            auth.remove_token_file(path, token)
    return 0
