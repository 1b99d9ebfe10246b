"""On the CPU: the skinny projection kernel's source compiles for the GPUs it targets, every
instantiation the engine can ask for, and the `skinny` decoding path is wired like the other
GPU paths (tests/engine/model/test_skinny_gpu.py runs it)."""

from __future__ import annotations

import pytest
import torch

from engine.model import skinny
from engine.decoding.paths import make_forward
from engine.model.routes import FALLBACK, FAST_PATHS, PATHS, Routed
from engine.types import EngineError

from tests.engine.conftest import random_model, tiny_sdar_config


# The forms launch() asks for: plain, SwiGLU, each with the norm applied as x is read, and the
# plain one with the residual added.
FORMS = [(False, False, False), (True, False, False), (False, True, False), (True, True, False), (False, False, True)]


def instantiations(form: tuple[bool, bool, bool]) -> list[str]:
    return [skinny.kernel_name(t, w, u, b, *form) for t in (1, 2, 4, 8) for w in (1, 2, 4, 8, 16) for u in (1, 2, 4)
            for b in (True, False) if skinny.fits(t, w)]


# One compile per form (a fifth of the instantiations each), so that each stays well inside
# the compile check's time bound on a loaded 2-core machine.
@pytest.mark.parametrize("form", FORMS, ids=lambda form: "".join("1" if f else "0" for f in form))
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_instantiation_compiles_with_nvcc(tmp_path, arch, form):
    from profiler.checks.compile import CompilerMissing, nvcc_check

    explicit = "".join(f"template __global__ void {name}(const u16*, const u16*, u16*, int, int, int, int, int, "
                       "const float*, int, int, const u16*, float, const u16*, int, float*);\n"
                       for name in instantiations(form))
    try:
        diagnostics = nvcc_check(skinny.SOURCE + explicit, "skinny.cu", arch=arch, flags=("-std=c++17",))
    except CompilerMissing as exc:
        pytest.skip(str(exc))
    assert [d for d in diagnostics if d.severity == "error"] == []


def test_the_tuned_choice_always_divides_k_and_fits():
    for m in (1, 4, 8, 9, 16, 17, 32, 33, 64):
        for n, k in [(4096, 2048), (2048, 2048), (12288, 2048), (2048, 6144), (151936, 2048), (128, 32), (64, 96)]:
            warps, unroll = skinny.config_for(m, n, k)
            assert k % (32 * unroll * warps) == 0, (m, n, k, warps, unroll)
            assert skinny.fits(skinny._tiles(m), warps)


def test_the_kernel_is_only_offered_a_gpu_half_precision_product():
    w = torch.randn(64, 64, dtype=torch.bfloat16)
    assert not skinny.usable(torch.randn(4, 64, dtype=torch.bfloat16), w)  # on the CPU


def test_the_skinny_path_is_a_gpu_path_that_falls_back_to_decode():
    assert "skinny" in PATHS and "skinny" in FAST_PATHS
    assert FALLBACK["skinny"] == "decode"
    model = random_model(tiny_sdar_config(head_dim=16))
    with pytest.raises(EngineError, match="CUDA"):
        make_forward(model, "skinny", 1, 64, 4)


def test_the_model_takes_the_projections_argument_and_refuses_an_unknown_one():
    model = random_model(tiny_sdar_config())
    ids = torch.randint(0, 1000, (1, 8))
    # On the CPU "skinny" falls back to F.linear product by product: the same logits.
    assert torch.equal(model(ids, kernels=Routed(projections="skinny")), model(ids))
    with pytest.raises(ValueError, match="projections"):
        model(ids, kernels=Routed(projections="cutlass"))


def test_launch_refuses_what_the_kernel_would_misread():
    """Checked before anything reaches CuPy or the GPU: a wrong call is an error, never garbage."""
    w = torch.zeros(64, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="bf16 or fp16"):
        skinny.launch(torch.zeros(4, 64), w)
    with pytest.raises(ValueError, match="N % 16"):
        skinny.launch(torch.zeros(4, 64, dtype=torch.bfloat16), torch.zeros(40, 64, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="rows"):
        skinny.launch(torch.zeros(65, 64, dtype=torch.bfloat16), w)
    with pytest.raises(ValueError, match="do not divide"):
        skinny.launch(torch.zeros(4, 64, dtype=torch.bfloat16), w, warps=4, unroll=1)
    with pytest.raises(ValueError, match="last dimension"):
        skinny.launch(torch.zeros(4, 32, dtype=torch.bfloat16), w)
    with pytest.raises(ValueError, match="one CUDA device"):  # a valid call, on the CPU
        skinny.launch(torch.zeros(4, 64, dtype=torch.bfloat16), w)


def test_a_block_is_at_most_1024_threads_and_k_keeps_its_warps_before_its_loads():
    assert skinny.fits(1, 32) and not skinny.fits(1, 64) and not skinny.fits(8, 16)
    assert skinny.config_for(8, 4096, 384) == (4, 1)  # not one warp streaming all of K
    assert skinny.config_for(8, 4096, 2048) == (16, 2)  # TUNED
