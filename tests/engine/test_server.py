"""`dice engine serve` as a real subprocess on a real socket, used by AsyncEngine and by
engine.load("dice://...")."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys

import pytest

import engine
from engine.client import AsyncEngine
from engine.frames import encode_frame, read_frame
from engine.types import Cancelled, EngineError

pytestmark = pytest.mark.timeout(120)
TOKEN = "s3cret-for-tests"


@pytest.fixture(scope="module")
def server(tiny_checkpoint):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("DICE_ENGINE_TOKEN", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dice_lsp.cli", "engine", "serve", "--host", "127.0.0.1", "--port", "0",
         "--token", TOKEN, "--model", str(tiny_checkpoint)],
        stderr=subprocess.PIPE, text=True, env=env,
    )
    port = None
    for line in proc.stderr:
        found = re.search(r"serving .* on 127\.0\.0\.1:(\d+)", line)
        if found:
            port = int(found.group(1))
            break
    assert port, "the server never said where it listens"
    yield port
    proc.terminate()
    proc.wait(timeout=30)


def test_async_client_over_tcp_with_the_token(server):
    async def scenario():
        eng = AsyncEngine(f"dice://127.0.0.1:{server}?token={TOKEN}")
        info = await eng.start()
        progress = []
        found = await eng.infill("__global__ void k() {\n", "}\n", n=2, max_tokens=8, on_progress=progress.append)
        await eng.close()
        return info, found, progress

    info, found, progress = asyncio.run(scenario())
    assert info.block_size == 4 and len(found) == 2 and progress


def test_sync_engine_over_tcp_and_cancel(server, monkeypatch):
    monkeypatch.setenv("DICE_ENGINE_TOKEN", TOKEN)  # the other way to give the token
    remote = engine.load(f"dice://127.0.0.1:{server}")
    assert len(remote.generate("int x", n=3, max_tokens=4)) == 3
    steps = []
    with pytest.raises(Cancelled):
        remote.generate("x", max_tokens=3000, on_progress=steps.append, should_cancel=lambda: len(steps) > 2)
    assert len(remote.optimize("__global__ void k(float* x) { x[0] = 1; }", max_tokens=4)) == 1


def test_wrong_token_is_refused(server, monkeypatch):
    async def scenario():
        with pytest.raises(EngineError, match="bad or missing token"):
            await AsyncEngine(f"dice://127.0.0.1:{server}?token=wrong").start()
        with pytest.raises(EngineError, match="bad or missing token"):
            await AsyncEngine(f"dice://127.0.0.1:{server}").start()

    monkeypatch.delenv("DICE_ENGINE_TOKEN", raising=False)
    asyncio.run(scenario())


def test_garbage_instead_of_hello_gets_an_error(server):
    with socket.create_connection(("127.0.0.1", server), timeout=30) as sock:
        sock.sendall(encode_frame({"op": "run", "id": 1, "method": "generate", "args": {}}))
        reply = read_frame(sock.makefile("rb"))
    assert reply["type"] == "error" and "hello" in reply["message"]


def test_nothing_listening_is_a_clear_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]

    async def scenario():
        with pytest.raises(EngineError, match="cannot reach the engine"):
            await AsyncEngine(f"dice://127.0.0.1:{free_port}").start()

    asyncio.run(scenario())


def test_a_public_address_needs_a_token():
    env = {k: v for k, v in os.environ.items() if k != "DICE_ENGINE_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "dice_lsp.cli", "engine", "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert done.returncode == 2
    assert "without a token" in done.stderr
