"""On the GPU: the CUDA-graph paths (eager layers, torch.compile'd layers, and those with flex
attention) give the same tokens as the plain KV-cached path, across requests that reuse the
captured graphs; the compiled step compiles once per bucket, not per prompt; a step does not
wait for the device."""

from __future__ import annotations

import pytest
import torch

from engine.decoding.decode import decode
from engine.model.loading import load_checkpoint
from engine.types import Sampling

from tests.engine.conftest import random_model, tiny_sdar_config

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_model(tiny_checkpoint):
    # fp32, so that the different kernel orders of the paths cannot flip a near tie.
    model, _, _ = load_checkpoint(tiny_checkpoint, "cuda", torch.float32)
    return model


@pytest.fixture(scope="module")
def gpu_model16():
    """The tiny shape with head_dim 16, the least flex_attention takes; fp32."""
    return random_model(tiny_sdar_config(head_dim=16)).cuda()


def model_for(path: str, request):
    return request.getfixturevalue("gpu_model16" if path in ("flex", "decode", "skinny") else "gpu_model")


def prompt(length: int) -> list[int]:
    return torch.randint(0, 5000, (length,), generator=torch.Generator().manual_seed(length)).tolist()


@pytest.mark.parametrize("path", ["graphs", "compiled", "flex", "decode", "skinny"])
def test_graph_paths_give_the_plain_paths_tokens(request, path):
    gpu_model = model_for(path, request)
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
    if not (dice_reference / "tiny-sdar").is_dir():  # a device call may carry the goldens without it
        pytest.skip(f"DICE's tiny checkpoint not found at {dice_reference / 'tiny-sdar'}")
    model, _, _ = load_checkpoint(dice_reference / "tiny-sdar", "cuda", torch.float32)
    return model


@pytest.mark.parametrize("path", ["graphs", "compiled", "flex", "decode"])
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


@pytest.mark.parametrize("path", ["compiled", "flex", "decode", "skinny"])
def test_the_compiled_step_compiles_once_per_bucket_not_per_prompt(request, path):
    """Prompts of new lengths (the prompt runs eagerly) and batches within one bucket (3 and
    4 candidates run as 8) reuse the compiled step."""
    import torch._dynamo.utils

    model = model_for(path, request)
    args = dict(max_tokens=16, sampling=Sampling(), stop_ids=[], path=path)
    decode(model, prompt(33), n=4, **args)
    compiled = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for length, n in ((41, 4), (57, 3), (130, 4), (301, 3)):
        decode(model, prompt(length), n=n, **args)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == compiled


@pytest.mark.parametrize("path", ["graphs", "flex", "decode", "skinny"])
def test_a_block_waits_for_the_device_once_not_per_step(request, path):
    """CUDA's sync debug mode warns at each synchronising call: as many for 4 steps per block
    as for 1 (on the graph paths, whose forward is a replay: what is counted is the loop's)."""
    import warnings

    model = model_for(path, request)
    counts = {}
    for steps in (1, 4):
        # A stop token never committed (the mask), so that the check per block runs and all blocks do.
        args = dict(n=2, max_tokens=32, sampling=Sampling(steps=steps), stop_ids=[model.config.mask_token_id],
                    path=path)
        decode(model, prompt(20), **args)  # captured, compiled
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result = decode(model, prompt(20), **args)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert result.steps == 8 * steps
        counts[steps] = sum("synchroniz" in str(w.message) for w in caught)
    assert counts[1] == counts[4], counts


def test_the_default_path_on_a_gpu_is_skinny_and_it_gives_the_plain_paths_tokens(gpu_model16):
    """engine.model.routes.default_path: `skinny` on a GPU with Triton (as torch's CUDA builds
    bring it) and CuPy, and the engine's default decoding gives the eager path's tokens."""
    from engine.model.routes import GPU_DEFAULT, default_path

    assert default_path(gpu_model16) == GPU_DEFAULT == "skinny"
    ids = prompt(50)
    args = dict(n=2, max_tokens=24, sampling=Sampling(), stop_ids=[])
    assert decode(gpu_model16, ids, path=default_path(gpu_model16), **args).tokens == \
        decode(gpu_model16, ids, path="cached", **args).tokens


def test_the_engine_keeps_its_default_path_after_warm_up(gpu_model16):
    """LocalEngine.warm_up compiles, captures and checks the default path for 1 and 8
    candidates and keeps it (a failure there hands over to a slower path, silently fast)."""
    from engine.model.routes import GPU_DEFAULT
    from engine.decoding.local import LocalEngine

    engine = LocalEngine(gpu_model16, tokenizer=None, config=gpu_model16.config, name="tiny16")
    said = []
    engine.warm_up(said.append)
    assert engine.decode_path == GPU_DEFAULT, said
    assert not [m for m in said if "failed" in m]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_fused_decode_attention_is_the_models_norms_rope_cache_write_and_attention(dtype):
    from tests.engine.model.fused_attention_check import mismatches

    assert mismatches("cuda", dtype) == []
