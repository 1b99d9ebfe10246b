"""`dice engine serve`: the engine over TCP, so that an editor on a laptop can use a GPU box.

The protocol is the worker's (engine.serving.frames) after a hello: the client's first message is
{"op": "hello", "token"}; a wrong or missing token ends the connection. Every listener has a
token, loopback included, because whoever reaches the port (any local process, another
user's too) can make the GPU work: `--token`, else ENGINE_TOKEN, else on loopback a new one
per run. The token is written to a file only its user can read (client.token_file, keyed
by the address), where a `dice://` client of the same user finds it; any other address than
loopback needs a token given, shared with the clients elsewhere. Connections are served side
by side; jobs take the GPU in turn. Until its hello has passed, a connection gets little: a
hello of at most MAX_HELLO bytes within HELLO_TIMEOUT_S, as one of at most
MAX_UNAUTHENTICATED such connections (and MAX_UNAUTHENTICATED_PER_ADDRESS from one address;
MAX_CONNECTIONS in all); others are refused at once.
"""

from __future__ import annotations

import signal
import socket
import socketserver
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

from engine.decoding.base import report_to_stderr
from engine.serving import auth
from engine.serving.client import ENGINE_TOKEN, is_loopback, token_file
from engine.serving.frames import HEADER, FrameError, decode_payload, encode_frame, frame_length
from engine.serving.service import FrameWriter, error_message, serve

# Before the token is checked a client is a stranger: its hello must be small and arrive
# whole within a deadline, and only a few strangers are served at a time, so that strangers
# can neither take the server's memory nor hold all its threads.
MAX_HELLO = 4 << 10  # a hello is {"op": "hello", "token": ...}: a few dozen bytes
HELLO_TIMEOUT_S = 10.0  # for the whole hello, however slowly it trickles in
MAX_UNAUTHENTICATED = 32
MAX_UNAUTHENTICATED_PER_ADDRESS = 4  # so that one host cannot take every stranger's slot
MAX_CONNECTIONS = 64
TOO_MANY = "the engine is busy: too many connections, try again later"


def missing_token(path: Path | None) -> str:
    """What a client without the right token is told: where the token is, and how to send it."""
    where = f"`dice engine serve` wrote it to {path}, readable by its user only, where a dice:// client " \
            "of that user finds it; " if path else ""
    return f"bad or missing token: this engine asks every client for its token ({where}pass " \
           f"dice://HOST:PORT?token=... or set {ENGINE_TOKEN})"


def _receive(sock: socket.socket, count: int, deadline: float) -> bytes:
    """Exactly `count` bytes (fewer only at end of stream), or TimeoutError after the deadline.
    Straight from the socket, so nothing past the hello is buffered away from `serve`."""
    data = b""
    while len(data) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        sock.settimeout(left)
        chunk = sock.recv(count - len(data))
        if not chunk:
            break
        data += chunk
    return data


def read_hello(sock: socket.socket, deadline: float) -> dict | None:
    """The client's first message, at most MAX_HELLO bytes, whole before the deadline; None
    when the client closed without a word."""
    header = _receive(sock, HEADER.size, deadline)
    if not header:
        return None
    if len(header) < HEADER.size:
        raise FrameError("stream ended inside a frame header")
    length = frame_length(header, MAX_HELLO)
    payload = _receive(sock, length, deadline)
    if len(payload) < length:
        raise FrameError("stream ended inside a frame")
    return decode_payload(payload)


class EngineServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], token: str, engine=None):
        self.engine = engine  # set before serve_forever
        self.token = token
        self.token_path: Path | None = None  # where the token was written, for the refusal
        self.gpu_lock = threading.Lock()
        self._slots_lock = threading.Lock()
        self._connections: dict[socket.socket, tuple[str, bool]] = {}  # open ones: (address, authenticated)
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.address_family = family
        super().__init__(address, ConnectionHandler)

    def verify_request(self, request, client_address) -> bool:
        """Take a slot before a thread is started for the connection, or refuse it."""
        address = client_address[0]
        with self._slots_lock:
            strangers = [where for where, ok in self._connections.values() if not ok]
            if (len(self._connections) < MAX_CONNECTIONS and len(strangers) < MAX_UNAUTHENTICATED
                    and strangers.count(address) < MAX_UNAUTHENTICATED_PER_ADDRESS):
                self._connections[request] = (address, False)
                return True
        try:
            request.settimeout(1.0)
            request.sendall(encode_frame(error_message(None, TOO_MANY)))
        except OSError:
            pass
        return False

    def authenticated(self, request) -> None:
        with self._slots_lock:
            self._connections[request] = (self._connections[request][0], True)

    def shutdown_request(self, request) -> None:
        """Called once for every accepted connection, refused or served: frees its slot."""
        with self._slots_lock:
            self._connections.pop(request, None)
        super().shutdown_request(request)


class ConnectionHandler(socketserver.StreamRequestHandler):
    server: EngineServer

    def refuse(self, message: str) -> None:
        """Tell a client that did not pass the hello why, if it is still there to hear it."""
        try:
            FrameWriter(self.wfile).send(error_message(None, message))
        except OSError:
            pass  # gone already: nothing to tell, and nothing worth a traceback

    def handle(self) -> None:
        try:
            hello = read_hello(self.connection, time.monotonic() + HELLO_TIMEOUT_S)
        except TimeoutError:
            return self.refuse(f"expected a hello frame within {HELLO_TIMEOUT_S:.0f} s")
        except (FrameError, OSError) as exc:
            return self.refuse(f"expected a hello frame: {exc}")
        if hello is None:
            return
        if hello.get("op") != "hello":
            return self.refuse("malformed message: the first message must be {'op': 'hello', 'token': ...}")
        if not auth.token_matches(hello.get("token"), self.server.token):
            # Where the token file is, only to a client on this machine: a path names the user.
            local = is_loopback(self.client_address[0])
            return self.refuse(missing_token(self.server.token_path if local else None))
        out = FrameWriter(self.wfile)
        self.connection.settimeout(None)
        self.server.authenticated(self.connection)
        out.send({"type": "ready", "info": asdict(self.server.engine.info())})
        serve(self.server.engine, self.rfile, out, self.server.gpu_lock)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM ends the server as Ctrl-C does: its token file is removed


def main(args) -> int:
    """`dice engine serve --host H --port P --token T --model M`."""
    token = args.token or auth.environment_token(ENGINE_TOKEN)
    if not is_loopback(args.host) and not token:
        print(
            f"dice engine serve: refusing to listen on {args.host} without a token: anyone who reaches "
            f"the port could run the model. Pass --token SECRET (or set {ENGINE_TOKEN}), or use "
            "--host 127.0.0.1 with an SSH tunnel.",
            file=sys.stderr,
        )
        return 2
    token = token or auth.new_token()
    import engine

    # Listen first: a bad port or one in use is told at once, not after loading the model.
    try:
        server = EngineServer((args.host, args.port), token)
    except (OSError, OverflowError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"dice engine serve: cannot listen on {args.host}:{args.port}: {reason}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        try:
            server.engine = engine.load(args.model, memory=getattr(args, "memory", None))
            server.engine.warm_up(report_to_stderr)
        except Exception as exc:  # the worker's message for the same folder (engine.load_failure)
            print(f"dice engine serve: {engine.load_failure(args.model, exc)}", file=sys.stderr)
            return 1
        host, port = server.server_address[:2]
        path = token_file(args.host, port)
        try:
            auth.write_token_file(path, token)
        except OSError as exc:
            print(f"dice engine serve: cannot write the token file {path}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        server.token_path = path
        print(f"dice engine: serving {args.model} on {host}:{port} (dice://{host}:{port}); the token is in {path}",
              file=sys.stderr, flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        if server.token_path is not None:
            auth.remove_token_file(server.token_path, token)
    return 0
