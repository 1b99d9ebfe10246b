"""`dice engine serve`: the engine over TCP, so that an editor on a laptop can use a GPU box.

The protocol is the worker's (engine.frames) after a hello: the client's first message is
{"op": "hello", "token"}; a wrong token ends the connection. Loopback by default; any other
address needs a shared token (--token or DICE_ENGINE_TOKEN), because whoever reaches the
port can make the GPU work. Connections are served side by side; jobs take the GPU in turn.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import socket
import socketserver
import sys
import threading
from dataclasses import asdict

from engine.frames import FrameError, read_frame
from engine.service import FrameWriter, error_message, serve
from engine.types import EngineError

HELLO_TIMEOUT_S = 30.0


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class EngineServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], engine, token: str | None):
        self.engine = engine
        self.token = token
        self.gpu_lock = threading.Lock()
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.address_family = family
        super().__init__(address, ConnectionHandler)


class ConnectionHandler(socketserver.StreamRequestHandler):
    server: EngineServer

    def handle(self) -> None:
        out = FrameWriter(self.wfile)
        self.connection.settimeout(HELLO_TIMEOUT_S)  # a silent client must not hold a thread
        try:
            hello = read_frame(self.rfile)
        except (FrameError, OSError) as exc:
            out.send(error_message(None, f"expected a hello frame: {exc}"))
            return
        if hello is None:
            return
        if hello.get("op") != "hello":
            out.send(error_message(None, "malformed message: the first message must be {'op': 'hello', 'token': ...}"))
            return
        expected = self.server.token
        if expected and not hmac.compare_digest(str(hello.get("token") or "").encode(), expected.encode()):
            out.send(error_message(None, "bad or missing token (dice://HOST:PORT?token=... or DICE_ENGINE_TOKEN)"))
            return
        self.connection.settimeout(None)
        out.send({"type": "ready", "info": asdict(self.server.engine.info())})
        serve(self.server.engine, self.rfile, out, self.server.gpu_lock)


def main(args) -> int:
    """`dice engine serve --host H --port P --token T --model M`."""
    token = args.token or os.environ.get("DICE_ENGINE_TOKEN")
    if not is_loopback(args.host) and not token:
        print(
            f"dice engine serve: refusing to listen on {args.host} without a token: anyone who reaches "
            "the port could run the model. Pass --token SECRET (or set DICE_ENGINE_TOKEN), or use "
            "--host 127.0.0.1 with an SSH tunnel.",
            file=sys.stderr,
        )
        return 2
    import engine

    try:
        loaded = engine.load(args.model)
    except EngineError as exc:
        print(f"dice engine serve: {exc}", file=sys.stderr)
        return 1
    try:
        server = EngineServer((args.host, args.port), loaded, token)
    except OSError as exc:
        print(f"dice engine serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    host, port = server.server_address[:2]
    print(f"dice engine: serving {args.model} on {host}:{port} (dice://{host}:{port})", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
