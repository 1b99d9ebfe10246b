"""A 5 MB .cu of 11,813 kernels gets its lenses, actions and hovers, and while the server
works on it, other documents are still answered: the work is done once per version of the
file, off the event loop, and is linear in its size."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from .conftest import REPO, end_process, notification, start_stdio_server

pytestmark = pytest.mark.asyncio


def kernels_source(count: int) -> str:
    spec = importlib.util.spec_from_file_location("lsp_load", REPO / "benchmarks" / "lsp_load.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernels_source(count)


def did_open(path: Path, text: str) -> dict:
    return notification("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "cuda", "version": 1, "text": text}})


async def test_a_5_mb_file_is_answered_and_does_not_stop_the_server(child_env, tmp_path: Path):
    big_text = kernels_source(11813)
    assert len(big_text.encode()) > 5_000_000
    process, client = await start_stdio_server(child_env)
    try:
        await client.initialize(tmp_path)
        big, small = tmp_path / "big.cu", tmp_path / "small.cu"
        client.send(did_open(big, big_text))
        client.send(did_open(small, kernels_source(1)))
        client.send({"jsonrpc": "2.0", "id": 1, "method": "textDocument/codeLens", "params": {"textDocument": {"uri": big.as_uri()}}})
        # The big file is being analysed: a hover elsewhere is still answered at once.
        hover = await client.call(2, "textDocument/hover", {"textDocument": {"uri": small.as_uri()}, "position": {"line": 4, "character": 18}}, timeout=15)
        assert "scale_0" in hover["result"]["contents"]["value"]
        lenses = (await client.answer(1, timeout=240))["result"]
        assert len(lenses) == 11813
        assert lenses[-1]["range"]["start"]["line"] == 2 + 14 * 11812 + 2  # the last `__global__` line
        at = {"line": 2 + 14 * 9000 + 2, "character": 18}  # on the name of scale_9000
        hover = await client.call(3, "textDocument/hover", {"textDocument": {"uri": big.as_uri()}, "position": at}, timeout=30)
        assert "scale_9000" in hover["result"]["contents"]["value"]
        actions = await client.call(4, "textDocument/codeAction", {
            "textDocument": {"uri": big.as_uri()}, "range": {"start": at, "end": at}, "context": {"diagnostics": []},
        }, timeout=30)
        assert {a["title"] for a in actions["result"]} >= {"Optimize this kernel with DICE", "Profile this kernel"}
        client.send(notification("textDocument/didClose", {"textDocument": {"uri": big.as_uri()}}))
    finally:
        await end_process(process)
