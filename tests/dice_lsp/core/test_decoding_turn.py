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
