"""`dice-lsp --tcp`: the same server on a socket, for editors that connect rather than spawn;
each connection has its own editor state, and every listener, loopback included, needs a
token, generated and written to a file only the user can read when none is given."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from ..conftest import SAXPY, connect, end_process, notification, start_tcp_server

pytestmark = pytest.mark.asyncio


def hover_saxpy(path: Path) -> dict:
    return {"textDocument": {"uri": path.as_uri()}, "position": {"line": 5, "character": 17}}


def open_saxpy(path: Path) -> dict:
    return notification(
        "textDocument/didOpen",
        {"textDocument": {"uri": path.as_uri(), "languageId": "cuda", "version": 1, "text": SAXPY}},
    )


def with_token(server, options: dict | None = None) -> dict:
    return {"token": server.token, **(options or {})}


async def test_initialize_over_tcp(child_env: dict[str, str]):
    server, port = await start_tcp_server(child_env)
    try:
        client = await connect(port)
        answer = await client.initialize(None, with_token(server))
        assert answer["result"]["serverInfo"]["name"] == "dice-lsp"
        assert "dice.fill" in answer["result"]["capabilities"]["executeCommandProvider"]["commands"]
    finally:
        await end_process(server)


async def test_connections_do_not_share_documents_or_answers(child_env, tmp_path: Path):
    """A second editor's initialize wiped the first one's documents and took its answers;
    one connect-and-close ended the server."""
    server, port = await start_tcp_server(child_env)
    try:
        for _ in range(3):  # connect and close, as a port scanner or a health check does
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
        first = await connect(port)
        await first.initialize(tmp_path, with_token(server))
        path = tmp_path / "saxpy.cu"
        first.send(open_saxpy(path))
        assert "saxpy" in (await first.call(1, "textDocument/hover", hover_saxpy(path)))["result"]["contents"]["value"]

        second = await connect(port)
        await second.initialize(tmp_path, with_token(server))
        # The second editor never opened the file: it is read from disk, where there is none.
        assert (await second.call(1, "textDocument/hover", hover_saxpy(path)))["error"]["code"] == -32602
        answer = await first.call(2, "textDocument/hover", hover_saxpy(path))
        assert "saxpy" in answer["result"]["contents"]["value"]
        assert all(m.get("id") != 2 for m in second.received)

        second.writer.close()  # the second editor goes away without a word
        await asyncio.sleep(0.5)
        assert server.returncode is None
        assert "saxpy" in (await first.call(3, "textDocument/hover", hover_saxpy(path)))["result"]["contents"]["value"]
        first.send(notification("exit"))  # exit ends one connection, not the listener
        third = await connect(port)
        assert (await third.initialize(tmp_path, with_token(server)))["result"]["serverInfo"]["name"] == "dice-lsp"
    finally:
        await end_process(server)


async def test_a_loopback_listener_needs_a_token_too_and_writes_it_for_the_user_alone(child_env, tmp_path: Path):
    """On loopback the token was optional: any local process could initialize and run Python
    through dice.profile."""
    env = {k: v for k, v in child_env.items() if k != "DICE_LSP_TOKEN"}
    server, port = await start_tcp_server(env)
    try:
        stranger = await connect(port)
        answer = await stranger.initialize(tmp_path)
        assert answer["error"]["code"] == -32600 and "token" in answer["error"]["message"]
        assert len(server.token) >= 32
        file_mode = os.stat(server.token_file).st_mode
        folder_mode = os.stat(server.token_file.parent).st_mode
        assert stat.S_IMODE(file_mode) == 0o600 and stat.S_IMODE(folder_mode) == 0o700
        editor = await connect(port)
        assert "result" in await editor.initialize(tmp_path, with_token(server))
    finally:
        await end_process(server)
    assert not server.token_file.exists()  # the listener removes its token file when it ends


async def test_idle_strangers_cannot_lock_an_editor_out(child_env, tmp_path: Path):
    """16 idle connections locked a real editor out; reconnecting ones, for seconds. 40 idle
    and 80 reconnecting strangers, more than the listener keeps from one address."""
    server, port = await start_tcp_server(child_env)
    try:
        idle = [await connect(port) for _ in range(40)]
        started = time.monotonic()
        editor = await connect(port)
        answer = await editor.initialize(tmp_path, with_token(server))
        assert answer["result"]["serverInfo"]["name"] == "dice-lsp"
        # Served, not evicted (an evicted editor gets no answer at all), and not kept waiting
        # for the strangers to time out; the bound leaves room for a busy machine.
        assert time.monotonic() - started < 10

        async def hold_a_connection_forever() -> None:
            # An idle stranger that connects again as soon as the server drops it.
            while True:
                client = await connect(port)
                while client.closed is None:
                    await asyncio.sleep(0.01)

        flood = [asyncio.ensure_future(hold_a_connection_forever()) for _ in range(80)]
        try:
            await asyncio.sleep(0.5)
            for _ in range(3):
                started = time.monotonic()
                another = await connect(port)
                answer = await another.initialize(tmp_path, with_token(server))
                assert "result" in answer, answer
                assert time.monotonic() - started < 10
        finally:
            for task in flood:
                task.cancel()
        # The first editor is served all along.
        path = tmp_path / "saxpy.cu"
        editor.send(open_saxpy(path))
        assert "saxpy" in (await editor.call(1, "textDocument/hover", hover_saxpy(path)))["result"]["contents"]["value"]
        for client in idle:
            client.writer.close()
    finally:
        await end_process(server)


async def test_a_token_is_checked_before_any_message(child_env, tmp_path: Path):
    server, port = await start_tcp_server({**child_env, "DICE_LSP_TOKEN": "s3cret"})
    try:
        stranger = await connect(port)
        stranger.send(open_saxpy(tmp_path / "saxpy.cu"))  # not an initialize: no token
        with pytest.raises((EOFError, asyncio.IncompleteReadError, ConnectionError)):
            await stranger.answer(0, timeout=15)

        wrong = await connect(port)
        answer = await wrong.initialize(tmp_path, {"token": "guess"})
        assert answer["error"]["code"] == -32600 and "token" in answer["error"]["message"]
        with pytest.raises((EOFError, asyncio.IncompleteReadError, ConnectionError)):
            await wrong.answer(1, timeout=15)  # and the connection is closed

        editor = await connect(port)
        answer = await editor.initialize(tmp_path, {"token": "s3cret", "dice": {"candidates": 2}})
        assert answer["result"]["serverInfo"]["name"] == "dice-lsp"
        path = tmp_path / "saxpy.cu"
        editor.send(open_saxpy(path))
        assert "saxpy" in (await editor.call(1, "textDocument/hover", hover_saxpy(path)))["result"]["contents"]["value"]
        # The token is not taken for a setting (no "unknown setting dice.token" warning).
        await editor.call(2, "workspace/executeCommand", {"command": "dice.showCandidates", "arguments": [{}]})
        warnings = [m for m in editor.received if m.get("method") == "window/showMessage"]
        assert not any("token" in m["params"]["message"] for m in warnings), warnings
    finally:
        await end_process(server)


async def test_a_bad_or_taken_port_is_one_line_not_a_traceback(child_env):
    server, port = await start_tcp_server(child_env)
    try:
        for bad, code in ((str(port), 1), ("70000", 2)):
            second = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "dice_lsp.server", "--tcp", "--port", bad, env=child_env, stderr=asyncio.subprocess.PIPE
            )
            _, err = await asyncio.wait_for(second.communicate(), 30)
            assert second.returncode == code and b"Traceback" not in err and bad.encode() in err, err
    finally:
        await end_process(server)


async def test_sigterm_ends_a_listener_with_editors_and_strangers_connected(child_env, tmp_path: Path):
    """A listener's close waits for every connection: SIGTERM left one with editors running."""
    server, port = await start_tcp_server(child_env)
    editor = await connect(port)
    assert "result" in await editor.initialize(tmp_path, with_token(server))
    strangers = [await connect(port) for _ in range(3)]
    server.terminate()
    try:
        await asyncio.wait_for(server.wait(), 15)
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
    assert server.returncode == 0
    assert not server.token_file.exists()
    for client in [editor, *strangers]:
        client.writer.close()


async def test_a_stranger_has_sent_from_the_moment_its_bytes_arrive_and_a_closed_one_has_not():
    """What the listener's eviction goes by (transport._has_sent), on real connections whose
    tasks never read: silent; bytes waiting in the socket (the transport not reading yet);
    bytes handed to the reader; a peer that hung up; a closed connection."""
    from dice_lsp.lsp.transport import _has_sent, _start_listener

    accepted: asyncio.Queue = asyncio.Queue()
    done = asyncio.Event()

    async def on_connect(reader, writer) -> None:
        writer.transport.pause_reading()  # bytes stay in the socket, as before a first read
        await accepted.put((reader, writer))
        await done.wait()
        writer.close()

    async def eventually(check) -> bool:
        for _ in range(100):
            if check():
                return True
            await asyncio.sleep(0.01)
        return False

    listener = await _start_listener(on_connect, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        _, client = await asyncio.open_connection("127.0.0.1", port)
        reader, writer = await accepted.get()
        await asyncio.sleep(0.05)
        assert not _has_sent(reader, writer)
        client.write(b"Content-Length: 2\r\n\r\n{}")
        await client.drain()
        assert await eventually(lambda: _has_sent(reader, writer))  # in the socket, unread
        assert not reader.received
        writer.transport.resume_reading()
        assert await eventually(lambda: reader.received) and _has_sent(reader, writer)  # handed over

        _, gone = await asyncio.open_connection("127.0.0.1", port)
        reader, writer = await accepted.get()
        gone.close()
        assert await eventually(lambda: not _has_sent(reader, writer) and bool(select_ready(writer)))
        writer.transport.abort()
        await asyncio.sleep(0.05)
        assert not _has_sent(reader, writer)  # closed: no poll of a dead descriptor
        client.close()
    finally:
        done.set()
        listener.close()
        await listener.wait_closed()


def select_ready(writer) -> list:
    """The hung-up socket polls readable (EOF): what _has_sent must not take for bytes."""
    import select

    poller = select.poll()
    poller.register(writer.get_extra_info("socket").fileno(), select.POLLIN)
    return poller.poll(0)
