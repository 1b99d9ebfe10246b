"""On the GPU: the CUDA-graph paths (eager layers, and torch.compile'd layers) give the same
tokens as the plain KV-cached path, across requests that reuse the captured graphs."""

from __future__ import annotations

import pytest
import torch

from engine.decode import decode
from engine.loading import load_checkpoint
from engine.types import Sampling

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_model(tiny_checkpoint):
    # fp32, so that the different kernel orders of the paths cannot flip a near tie.
    model, _, _ = load_checkpoint(tiny_checkpoint, "cuda", torch.float32)
    return model


def prompt(length: int) -> list[int]:
    return torch.randint(0, 5000, (length,), generator=torch.Generator().manual_seed(length)).tolist()


@pytest.mark.parametrize("path", ["graphs", "compiled"])
def test_graph_paths_give_the_plain_paths_tokens(gpu_model, path):
    cases = [
        (prompt(33), 3, Sampling()),
        (prompt(10), 3, Sampling(temperature=1.0, top_k=50, top_p=0.9, seed=11)),
        (prompt(40), 3, Sampling(strategy="low_confidence_dynamic", threshold=0.05)),
        (prompt(90), 1, Sampling(strategy="sequential", steps=2)),
    ]
    for ids, n, sampling in cases:  # one after another: graphs captured once are replayed
        args = dict(n=n, max_tokens=40, sampling=sampling, stop_ids=[])
        plain = decode(gpu_model, ids, path="cached", **args)
        fast = decode(gpu_model, ids, path=path, **args)
        assert fast.tokens == plain.tokens, (path, len(ids), sampling)
        assert fast.steps == plain.steps


@pytest.fixture(scope="module")
def tiny_sdar_gpu(dice_reference):
    model, _, _ = load_checkpoint(dice_reference / "tiny-sdar", "cuda", torch.float32)
    return model


@pytest.mark.parametrize("path", ["graphs", "compiled"])
def test_graph_paths_give_the_eager_tokens_under_the_dice_preset(tiny_sdar_gpu, dice_reference, path):
    """DICE's decoder on DICE's checkpoint, fp32: the fast paths commit what the eager path
    commits, with the same number of steps as DICE. (The tokens are compared with the GPU's
    eager path, not with the CPU goldens: with top_k 1 every confidence is 1.0, CUDA's topk
    may break those ties in another order than the CPU's, and another commit order is
    another context for the tokens after it.)"""
    import json

    cases = json.loads((dice_reference / "decode_golden.json").read_text())["cases"]
    for case in cases:  # one after another: graphs captured once are replayed
        sampling = Sampling.for_preset("dice", strategy=case["settings"]["remasking_strategy"],
                                       threshold=case["settings"]["confidence_threshold"])
        args = dict(max_tokens=32, sampling=sampling, stop_ids=[])
        eager = decode(tiny_sdar_gpu, case["prompt_ids"], path="cached", **args)
        fast = decode(tiny_sdar_gpu, case["prompt_ids"], path=path, **args)
        assert fast.tokens == eager.tokens, (path, case["name"])
        assert fast.steps == eager.steps == case["forward_passes"]["denoise"], (path, case["name"])
