"""`dice-lsp --tcp`: the same server on a socket, for editors that connect rather than spawn."""

from __future__ import annotations

import asyncio
import json
import socket
import sys

import pytest

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def read_message(reader: asyncio.StreamReader) -> dict:
    length = None
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return json.loads(await reader.readexactly(length))


@pytest.mark.asyncio
async def test_initialize_over_tcp(child_env: dict[str, str]):
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dice_lsp.server", "--tcp", "--host", "127.0.0.1", "--port", str(port),
        env=child_env,
    )
    try:
        for _ in range(100):
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.1)
        else:
            raise AssertionError("the server never listened")
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}})
        writer.write(f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
        await writer.drain()
        answer = await asyncio.wait_for(read_message(reader), 30)
        assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "dice-lsp"
        assert "dice.fill" in answer["result"]["capabilities"]["executeCommandProvider"]["commands"]
        writer.close()
    finally:
        server.terminate()
        await server.wait()
