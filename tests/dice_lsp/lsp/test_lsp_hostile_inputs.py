"""Hostile files and frames through the real server over stdio: files that are not files,
text nested past any recursion limit, frames that are JSON but not requests. Each gets an
answer that says what was wrong, no traceback reaches the client, and the server goes on
answering."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from ..conftest import SAXPY, end_process, frame, notification, request, start_stdio_server

pytestmark = pytest.mark.asyncio

HOVER = "textDocument/hover"


def at(path: Path, line: int = 0, character: int = 0) -> dict:
    return {"textDocument": {"uri": path.as_uri()}, "position": {"line": line, "character": character}}


def whole_range(path: Path) -> dict:
    return {"textDocument": {"uri": path.as_uri()}, "context": {"diagnostics": []},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}}


def open_params(path: Path, text: str) -> dict:
    return {"textDocument": {"uri": path.as_uri(), "languageId": "cuda", "version": 1, "text": text}}


def no_traceback(messages: list[dict]) -> None:
    text = repr(messages)
    assert "Traceback" not in text and "traceback" not in text, text[-3000:]


async def still_answers(client, msg_id: int, tmp_path: Path) -> None:
    path = tmp_path / "fine.cu"
    client.send(notification("textDocument/didOpen", open_params(path, SAXPY)))
    answer = await client.call(msg_id, HOVER, at(path, 5, 17), timeout=10)
    assert "saxpy" in answer["result"]["contents"]["value"], answer


async def test_unopened_files_that_are_not_files_are_refused_at_once(child_env, tmp_path: Path):
    """A FIFO blocked the server in open(); /dev/zero was read until MemoryError."""
    os.mkfifo(tmp_path / "pipe.cu")
    (tmp_path / "zero.cu").symlink_to("/dev/zero")
    (tmp_path / "folder.cu").mkdir()
    process, client = await start_stdio_server(child_env)
    try:
        await client.initialize(tmp_path)
        cases = {"pipe.cu": "a FIFO", "zero.cu": "a character device", "folder.cu": "a folder"}
        msg_id = 1
        for name, kind in cases.items():
            path = tmp_path / name
            for method, params in ((HOVER, at(path)), ("textDocument/codeLens", {"textDocument": {"uri": path.as_uri()}}),
                                   ("textDocument/codeAction", whole_range(path))):
                started = time.monotonic()
                answer = await client.call(msg_id, method, params, timeout=10)
                assert time.monotonic() - started < 5
                assert answer["error"]["code"] == -32602, answer
                assert kind in answer["error"]["message"], answer
                msg_id += 1
            for command in ("dice.profile", "dice.addSpec"):
                args = {"uri": path.as_uri(), "position": {"line": 0, "character": 0}}
                answer = await client.call(msg_id, "workspace/executeCommand", {"command": command, "arguments": [args]})
                assert kind in answer["result"]["error"], answer
                msg_id += 1
        answer = await client.call(msg_id, HOVER, at(Path("/dev/zero")), timeout=10)
        assert "a character device" in answer["error"]["message"]
        await still_answers(client, msg_id + 1, tmp_path)
        no_traceback(client.received)
    finally:
        stderr = await end_process(process)
    assert "MemoryError" not in stderr and "Traceback" not in stderr, stderr[-3000:]


async def test_braces_nested_thousands_deep_get_answers_and_diagnostics(child_env, tmp_path: Path):
    """About 1,000 nested braces in a 2-6 KB kernel: -32603 with a RecursionError traceback."""
    depth = 3000
    text = SAXPY + "__global__ void deep(float* y) " + "{" * depth + "y[0] = 1;" + "}" * depth + "\n"
    path = tmp_path / "deep.cu"
    process, client = await start_stdio_server(child_env)
    try:
        await client.initialize(tmp_path)
        client.send(notification("textDocument/didOpen", open_params(path, text)))
        lenses = await client.call(1, "textDocument/codeLens", {"textDocument": {"uri": path.as_uri()}})
        assert "result" in lenses, lenses
        assert (await client.call(2, HOVER, at(path, 5, 17)))["result"]["contents"]["value"].startswith("**saxpy**")
        assert "result" in await client.call(3, "textDocument/codeAction", whole_range(path))
        deep_line = len(SAXPY.splitlines())
        assert "result" in await client.call(4, HOVER, at(path, deep_line, 2000))

        async def diagnostics() -> dict:
            while True:
                for m in client.received:
                    if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == path.as_uri():
                        return m
                await asyncio.sleep(0.1)

        published = await asyncio.wait_for(diagnostics(), 120)
        no_traceback([published])
        no_traceback(client.received)
    finally:
        stderr = await end_process(process)
    assert "RecursionError" not in stderr, stderr[-3000:]


async def test_frames_that_are_json_but_not_requests_are_answered_and_the_server_goes_on(child_env, tmp_path: Path):
    """A body of `null` ended the server (taken for the end of the stream); JSON nested 2,000
    deep killed it with a RecursionError; an object id got -32603 with a traceback."""
    process, client = await start_stdio_server(child_env)
    try:
        await client.initialize(tmp_path)
        client.send(frame(b"null"))
        client.send(frame(b"[" * 2000 + b"]" * 2000))
        client.send(frame(b'{"jsonrpc": "2.0", "id": 5, "method": "textDocument/hover", "params": ' + b"[" * 100
                          + b"]" * 100 + b"}"))
        for odd_id in ({"a": 1}, [1], True, 1.5):
            client.send(frame(request(0, HOVER, at(tmp_path / "x.cu")) | {"id": odd_id}))
        client.send(frame({"jsonrpc": "2.0", "id": 60, "method": 42}))
        client.send(frame(b"42"))
        client.send(frame(b'{"jsonrpc": "2.0", "id": 71, "method": "workspace/executeCommand", "params": {"v": NaN}}'))
        answer = await client.answer(5)
        assert answer["error"]["code"] == -32600 and "nested deeper" in answer["error"]["message"]
        answer = await client.answer(60)
        assert answer["error"]["code"] == -32600 and "method that is not a string" in answer["error"]["message"]
        assert (await client.call(6, "workspace/executeCommand",
                                  {"command": "dice.showCandidates", "arguments": [{}]}))["result"] == {"jobs": []}
        errors = [m for m in client.received if "error" in m and m.get("id") is None]
        # null, the 2,000-deep array, four odd ids, a number, and NaN (not JSON)
        assert len(errors) >= 8, client.received
        assert all(m.get("id") != 71 for m in client.received)
        assert all(m["error"]["code"] in (-32600, -32700) for m in errors), errors
        await still_answers(client, 7, tmp_path)
        no_traceback(client.received)
        assert process.returncode is None
    finally:
        stderr = await end_process(process)
    assert "RecursionError" not in stderr, stderr[-3000:]


async def test_lone_surrogates_are_text_like_any_other(child_env, tmp_path: Path):
    """A didOpen with lone surrogates showed "compile check failed… Traceback", and codeAction
    answered a UnicodeEncodeError traceback."""
    path = tmp_path / "odd.cu"
    text = SAXPY.replace("int i =", "int i = 0; // \ud800 \udfff\n    i =")
    process, client = await start_stdio_server(child_env)
    try:
        await client.initialize(tmp_path)
        body = frame(json.dumps(notification("textDocument/didOpen", open_params(path, text))).encode())  # escaped
        assert b"\\ud800" in body
        client.send(body)
        actions = await client.call(1, "textDocument/codeAction", whole_range(path) | {
            "range": {"start": {"line": 7, "character": 0}, "end": {"line": 8, "character": 0}}})
        assert "result" in actions, actions
        assert "saxpy" in (await client.call(2, HOVER, at(path, 5, 17)))["result"]["contents"]["value"]
        # A raw surrogate in the bytes (invalid UTF-8 that json.loads reads with surrogatepass) too.
        raw = frame(notification("textDocument/didOpen", open_params(tmp_path / "raw.cu", SAXPY + "// X\n")))
        client.send(raw.replace(b"// X", b"// \xed\xa0\x80"))
        assert "result" in await client.call(3, "textDocument/codeLens", {"textDocument": {"uri": (tmp_path / "raw.cu").as_uri()}})

        async def published() -> dict:
            while True:
                for m in client.received:
                    if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == path.as_uri():
                        return m
                if any(m.get("method") == "window/logMessage" for m in client.received):
                    return next(m for m in client.received if m.get("method") == "window/logMessage")
                await asyncio.sleep(0.1)

        message = await asyncio.wait_for(published(), 120)
        assert message["method"] == "textDocument/publishDiagnostics", message
        no_traceback(client.received)
    finally:
        stderr = await end_process(process)
    assert "UnicodeEncodeError" not in stderr, stderr[-3000:]
