"""A client that breaks the protocol, by accident or on purpose, gets an answer and leaves a
server that keeps answering: bad frames, bad params, requests out of the lifecycle's order."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..conftest import SAXPY, end_process, frame, notification, request, start_stdio_server

pytestmark = pytest.mark.asyncio

HOVER = "textDocument/hover"


def open_params(path: Path, text: str) -> dict:
    return {"textDocument": {"uri": path.as_uri(), "languageId": "cuda", "version": 1, "text": text}}


def hover_params(path: Path, line: int, character: int) -> dict:
    return {"textDocument": {"uri": path.as_uri()}, "position": {"line": line, "character": character}}


async def test_a_frame_counted_in_characters_is_read_and_the_next_one_too(child_env, tmp_path: Path):
    """A Content-Length that counts characters, not bytes (non-ASCII text), left the rest of
    the body before the next header, and the server never answered again."""
    process, client = await start_stdio_server(child_env)
    try:
        await client.initialize(tmp_path)
        path = tmp_path / "naïve.cu"
        text = "// größe: ünïcödé ¹²³\n" + SAXPY
        opened = notification("textDocument/didOpen", open_params(path, text))
        body = frame(opened).split(b"\r\n\r\n", 1)[1]
        client.send(frame(body, length=len(body.decode())))  # characters, not bytes
        answer = await client.call(1, HOVER, hover_params(path, 6, 17))  # on `saxpy`
        assert "saxpy" in answer["result"]["contents"]["value"], answer
        # And a request whose own length is short by its non-ASCII characters is answered too.
        call = request(2, "workspace/executeCommand", {"command": "dice.showCandidates", "arguments": [{"uri": "file:///é/ü.cu"}]})
        body = frame(call).split(b"\r\n\r\n", 1)[1]
        client.send(frame(body, length=len(body.decode())))
        assert (await client.answer(2))["result"] == {"jobs": []}
    finally:
        await end_process(process)


async def test_garbage_and_a_100_gb_frame_are_skipped_without_memory_error(child_env, tmp_path: Path):
    process, client = await start_stdio_server(child_env)
    try:
        await client.initialize(tmp_path)
        client.send(b"this is not a frame\r\n\r\n{]")
        client.send(b"Content-Length: 100000000000\r\n\r\n{\"jsonrpc\": \"2.0\"}")
        client.send(b"Content-Length: twelve\r\n\r\n{}")
        client.send(frame(b"{not json at all}"))
        answer = await client.call(7, "workspace/executeCommand", {"command": "dice.showCandidates", "arguments": [{}]})
        assert answer["result"] == {"jobs": []}
        faults = [m for m in client.received if m.get("id") is None and "error" in m]
        assert faults and all(m["error"]["code"] == -32700 for m in faults), client.received
        assert any("over the limit" in m["error"]["message"] for m in faults)
    finally:
        stderr = await end_process(process)
    assert "MemoryError" not in stderr and "Traceback" not in stderr, stderr[-3000:]


async def test_requests_with_invalid_params_get_invalid_params(child_env, tmp_path: Path):
    process, client = await start_stdio_server(child_env)
    try:
        await client.initialize(tmp_path)
        path = tmp_path / "saxpy.cu"
        client.send(notification("textDocument/didOpen", open_params(path, SAXPY)))
        uri = {"uri": path.as_uri()}
        cases = {
            10: (HOVER, {"textDocument": uri}),  # no position
            11: (HOVER, hover_params(path, -1, 0)),
            12: (HOVER, hover_params(path, 10**6, 0)),  # past the end of the file
            13: (HOVER, hover_params(path, 2**40, 0)),  # not an LSP uinteger
            14: ("textDocument/codeAction", {"textDocument": uri, "range": {"start": {"line": 0, "character": 0}}}),
            15: ("textDocument/codeAction", {"textDocument": uri, "context": {"diagnostics": []},
                                             "range": {"start": {"line": 0, "character": 0}, "end": {"line": 999999, "character": 0}}}),
            16: ("textDocument/codeLens", {}),
            17: (HOVER, None),
        }
        for msg_id, (method, params) in cases.items():
            client.send(request(msg_id, method, params))
        for msg_id in cases:
            answer = await client.answer(msg_id)
            assert answer.get("error", {}).get("code") == -32602, (msg_id, answer)
        # ...and the server still answers good ones.
        answer = await client.call(20, HOVER, hover_params(path, 5, 17))
        assert "saxpy" in answer["result"]["contents"]["value"]
    finally:
        await end_process(process)


async def test_lifecycle_order_before_initialize_and_after_shutdown(child_env, tmp_path: Path):
    process, client = await start_stdio_server(child_env)
    try:
        early = await client.call(1, HOVER, hover_params(tmp_path / "a.cu", 0, 0))
        assert early["error"]["code"] == -32002, early
        await client.initialize(tmp_path)
        again = await client.call(2, "initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        assert again["error"]["code"] == -32600, again
        assert (await client.call(3, "shutdown"))["result"] is None
        late = await client.call(4, HOVER, hover_params(tmp_path / "a.cu", 0, 0))
        assert late["error"]["code"] == -32600, late
        client.send(notification("exit"))
        assert await process.wait() == 0
    finally:
        stderr = await end_process(process)
    assert "Traceback" not in stderr, stderr[-3000:]


async def test_exit_without_shutdown_exits_1(child_env, tmp_path: Path):
    process, client = await start_stdio_server(child_env)
    try:
        await client.initialize(tmp_path)
        client.send(notification("exit"))
        assert await process.wait() == 1
    finally:
        await end_process(process)
