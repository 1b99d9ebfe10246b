"""The engine worker as a real subprocess, through AsyncEngine and through raw frames."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import pytest

from engine.serving.client import AsyncEngine
from engine.serving.frames import HEADER, encode_frame, read_frame
from engine.types import EngineError, EngineGone

pytestmark = pytest.mark.timeout(120)


def worker_env() -> dict[str, str]:
    # One torch thread: the tiny model gains nothing from more on a busy 2-core machine.
    return {**os.environ, "OMP_NUM_THREADS": "1"}


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def test_loads_once_serves_many_requests_cancels_and_survives_a_crash(tiny_checkpoint):
    async def scenario():
        eng = AsyncEngine(str(tiny_checkpoint), device="cpu")
        info = await eng.start()
        assert info.block_size == 4 and info.device == "cpu" and info.prompt_format == "chat"
        pid = eng._process.pid
        progress = []
        first = await eng.infill("__global__ void k() {\n", "}\n", n=2, max_tokens=8, on_progress=progress.append)
        second = await eng.generate("int x", max_tokens=4, temperature=1.0, seed=3)
        third = await eng.optimize("__global__ void k(float* x) { x[0] = 1; }", max_tokens=4)

        # Cancelling the awaiting task stops the job between steps; the worker goes on.
        started = asyncio.Event()
        long_steps = []

        def on_progress(p):
            long_steps.append(p)
            started.set()

        job = asyncio.create_task(eng.generate("x", max_tokens=3000, on_progress=on_progress))
        await asyncio.wait_for(started.wait(), 60)
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job
        after = await asyncio.wait_for(eng.generate("y", max_tokens=4), 60)  # not stuck behind it
        assert eng._process.pid == pid  # the same worker all along: the model loaded once

        # A worker that dies mid-job is an EngineGone (an EngineError) naming the signal; the
        # next call starts a fresh worker.
        started.clear()
        job = asyncio.create_task(eng.generate("x", max_tokens=3000, on_progress=lambda p: started.set()))
        await asyncio.wait_for(started.wait(), 60)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(EngineGone, match=r"engine worker killed by signal 9 \(SIGKILL"):
            await asyncio.wait_for(job, 60)
        restarted = await asyncio.wait_for(eng.generate("y", max_tokens=4), 60)
        assert eng._process.pid != pid and len(restarted) == 1
        await eng.close()
        return first, second, third, progress, long_steps, after

    first, second, third, progress, long_steps, after = asyncio.run(scenario())
    assert len(first) == 2 and all(c.tokens <= 8 for c in first)
    assert len(second) == 1 and len(third) == 1 and len(after) == 1
    assert progress[0].phase == "prefill" and progress[-1].phase == "decode" and progress[-1].step >= 1
    assert len(long_steps) < 3000  # it stopped long before the 3000 steps of the whole job


def test_missing_model_is_a_clear_error_not_a_hang(tmp_path):
    async def scenario():
        eng = AsyncEngine(str(tmp_path / "no-such-model"))
        with pytest.raises(EngineError, match="not a checkpoint folder"):
            await asyncio.wait_for(eng.start(), 60)

    asyncio.run(scenario())


def test_malformed_messages_get_errors_and_the_worker_keeps_serving(tiny_checkpoint):
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.serving.worker", "--model", str(tiny_checkpoint), "--device", "cpu"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=worker_env(),
    )
    try:
        assert read_frame(proc.stdout)["type"] == "ready"

        def ask(data: bytes):
            proc.stdin.write(data)
            proc.stdin.flush()
            return read_frame(proc.stdout)

        not_a_map = b"\x93\x01\x02\x03"  # a msgpack array
        reply = ask(HEADER.pack(len(not_a_map)) + not_a_map)
        assert reply["type"] == "error" and "expected a map" in reply["message"]
        reply = ask(encode_frame({"op": "run", "id": 5, "method": "rm -rf", "args": {}}))
        assert reply == {"type": "error", "id": 5, "message": reply["message"], "cancelled": False}
        assert "unknown op/method" in reply["message"]
        reply = ask(encode_frame({"op": "run", "id": 6, "method": "infill", "args": {"prefix": "a"}}))
        assert reply["type"] == "error" and "bad arguments for infill" in reply["message"]
        reply = ask(encode_frame({"op": "run", "id": 7, "method": "generate", "args": {"prompt": "a", "max_tokens": 4}}))
        while reply["type"] == "progress":
            reply = read_frame(proc.stdout)
        assert reply["type"] == "result" and len(reply["candidates"]) == 1
        # A length no frame can have: the stream is no longer framed, so the session ends.
        reply = ask(HEADER.pack(0xFFFFFFFF))
        assert reply["type"] == "error" and "limit" in reply["message"]
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
