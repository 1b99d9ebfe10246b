"""A job's model holds the GPU's turn (profiler.sandbox.gpu_turn) while it decodes on this
machine's GPU, and only then: the GPU is named as the judging runs name it."""

from __future__ import annotations

import pytest

from dice_lsp.core.jobs import _engine_gpu
from engine.serving.client import AsyncEngine


@pytest.mark.parametrize(("spec", "device", "visible", "key"), [
    ("builtin", "cpu", None, None),
    ("builtin", "cuda:0", None, "0"),
    ("builtin", "cuda", "3", "3"),
    ("/models/dice-8b", "cuda:1", "2,3", "3"),  # the worker's device 1 is the machine's GPU 3
    ("dice://gpu-box:7000", "cuda:0", None, None),  # decodes on another machine's GPU
    ("sglang://localhost:30000", "http://localhost:30000", None, None),  # SGLang says no device of ours
])
def test_the_gpu_a_job_waits_for(monkeypatch, spec, device, visible, key):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert _engine_gpu(AsyncEngine(spec), device) == key


@pytest.mark.gpu
@pytest.mark.asyncio
async def test_decoding_waits_for_the_gpu_and_holds_it_while_it_decodes(monkeypatch, tmp_path):
    """The built-in model on the GPU: while a timed run holds the GPU a job's decoding waits
    (and says so), then holds the GPU until its candidates are back."""
    import asyncio

    from dice_lsp.core.jobs import _decoding_turn
    from profiler.sandbox import gpu_turn
    from profiler.sandbox.gpu_turn import GpuTurn, device_key

    monkeypatch.setattr(gpu_turn, "FOLDER", tmp_path)
    engine = AsyncEngine("builtin", device="cuda")
    try:
        await engine.start()
        timed_run = GpuTurn(device_key())
        assert timed_run.try_acquire()
        said: list[str] = []

        async def decode():
            async with _decoding_turn(engine, lambda message, percent: said.append(message)):
                assert not GpuTurn(device_key()).try_acquire()  # held while it decodes
                return await engine.infill("__global__ void scale(float* x, float a, int n) {\n",
                                           "\n}\n", n=1, max_tokens=8)

        job = asyncio.ensure_future(decode())
        await asyncio.sleep(1.0)
        assert not job.done() and any("waiting for the GPU" in message for message in said)
        timed_run.release()
        assert await asyncio.wait_for(job, 300)
        after = GpuTurn(device_key())
        assert after.try_acquire()  # let go once the candidates are back
        after.release()
    finally:
        await engine.close()
