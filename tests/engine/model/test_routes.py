"""engine.model.routes: the kernels a forward runs through and the fusions switched off and on
give the plain model's logits and tokens. On the CPU the fused kernels do not apply (the decode
kernel needs Triton, the skinny kernel a GPU), so the switch must change nothing; through
Triton's interpreter the fused decode attention runs; tests/engine/model/test_skinny_gpu.py
switches them on a GPU."""

from __future__ import annotations

import pytest
import torch

import engine
from engine.decoding.decode import decode
from engine.model.routes import (FALLBACK, FAST_PATHS, PATHS, Fusion, Routed, Routing, default_path,
                                 path_kernels, unavailable)
from engine.types import Sampling
from tests.engine.conftest import random_model, tiny_sdar_config
from tests.engine.model.test_decode_attention import _interpreted, needs_triton

FUSIONS = [Fusion(), Fusion(step=False), Fusion(norms=False), Fusion(step=False, norms=False)]


def prompt(length: int) -> list[int]:
    return torch.randint(0, 1000, (length,), generator=torch.Generator().manual_seed(length)).tolist()


@pytest.mark.parametrize("fusion", FUSIONS)
def test_every_route_gives_the_plain_logits_on_the_cpu(fusion):
    model = random_model(tiny_sdar_config(head_dim=16))
    ids = torch.randint(0, 1000, (2, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        plain = model(ids)
        for attention in ("sdpa", "flex"):
            routed = model(ids, kernels=Routed(attention, "skinny", fusion))
            assert torch.allclose(routed, plain, atol=1e-5, rtol=1e-5), (attention, fusion)


@pytest.mark.parametrize("path", ["cached", "static", "static-flex"])
def test_the_fusion_switch_keeps_the_tokens_on_the_cpu(path):
    model = random_model(tiny_sdar_config(vocab_size=1024, mask_token_id=1023, head_dim=16))
    args = dict(n=1, max_tokens=9, sampling=Sampling(), stop_ids=[], path=path)
    on = decode(model, prompt(10), fusion=Fusion(), **args)
    off = decode(model, prompt(10), fusion=Fusion(step=False, norms=False), **args)
    assert on.tokens == off.tokens and on.steps == off.steps


def test_the_paths_and_their_fallbacks_are_consistent():
    assert set(FAST_PATHS) <= set(PATHS)
    for path, then in FALLBACK.items():
        assert path in FAST_PATHS and then in PATHS
    assert path_kernels("skinny").attention == "decode" and path_kernels("skinny").projections == "skinny"
    assert path_kernels("cached").attention == "sdpa"
    model = random_model(tiny_sdar_config())
    assert default_path(model) == "cached"
    assert "head dimension" in unavailable("static-flex", model)   # head_dim 8: no flex kernel
    assert "unknown" in unavailable("warp", model)
    assert unavailable("cached", model) is None


def test_a_local_engine_takes_its_path_from_the_routing(tiny_checkpoint):
    default = engine.load(str(tiny_checkpoint), device="cpu")
    chosen = engine.load(str(tiny_checkpoint), device="cpu", routing=Routing(path="recompute"))
    assert default.decode_path == "cached" and chosen.decode_path == "recompute"
    args = dict(n=1, max_tokens=8, temperature=0.0)
    assert [c.text for c in chosen.generate("int main", **args)] == [c.text for c in default.generate("int main",
                                                                                                     **args)]


@needs_triton
def test_the_fused_decode_step_keeps_the_tokens_through_the_interpreter():
    out = _interpreted("""
        from engine.decoding.decode import decode
        from engine.model.routes import Fusion
        from engine.types import Sampling
        from tests.engine.conftest import random_model, tiny_sdar_config
        from tests.engine.model.test_routes import prompt

        model = random_model(tiny_sdar_config(vocab_size=1024, mask_token_id=1023, head_dim=16))
        args = dict(n=1, max_tokens=9, sampling=Sampling(), stop_ids=[], path="static-decode")
        on = decode(model, prompt(10), fusion=Fusion(), **args)
        off = decode(model, prompt(10), fusion=Fusion(step=False), **args)
        print(on.tokens == off.tokens)
    """, timeout=1800.0)
    assert out.split() == ["True"], out


@pytest.fixture
def fused_kernels_in_torch(monkeypatch):
    """The GPU-only kernels stood in for by torch references (the skinny products, the fused
    norm and residual, the decode attention), so that the CPU runs every route's own code: its
    dispatch, its mask and residual types, its fallbacks. Returns the names of the stand-ins
    called, in order."""
    from engine.model import decode_attention, routes, sdar, skinny

    calls: list[str] = []

    def gated(x, w):
        gate, up = torch.nn.functional.linear(x, w).chunk(2, dim=-1)
        return torch.nn.functional.silu(gate) * up

    def norm_linear(h, part, norm_weight, w, eps, glu=False):
        x = (h.float() * torch.rsqrt(part.sum(0).reshape(*h.shape[:-1], 1) / h.shape[-1] + eps)).to(h.dtype)
        return gated(x * norm_weight, w) if glu else torch.nn.functional.linear(x * norm_weight, w)

    def residual_linear(x, w, residual):
        y = residual + torch.nn.functional.linear(x, w)
        return y, y.float().square().sum(-1).reshape(1, -1)

    stand_ins = {
        "usable": lambda x, w, glu=False: True,
        "linear": torch.nn.functional.linear,
        "glu_linear": gated,
        "norm_linear": norm_linear,
        "residual_linear": residual_linear,
    }
    for name, function in stand_ins.items():
        def counted(*args, _name=name, _function=function, **kwargs):
            calls.append(_name)
            return _function(*args, **kwargs)
        monkeypatch.setattr(skinny, name, counted)
    monkeypatch.setattr(routes.Routed, "fuses_norms", lambda self, model, x: self.fused_norms is not None and x.shape[0] == 1)
    monkeypatch.setattr(routes.Routed, "fused_attention", lambda self, *args: None)  # Triton's own test covers it

    def attention(q, k, v, mask, kv_len):
        calls.append("decode_attention")
        return sdar.grouped_attention(q, k, v, mask)

    monkeypatch.setattr(decode_attention, "decode_attention", attention)
    monkeypatch.setattr(decode_attention, "available", lambda: None)  # the kernel is stood in for
    return calls


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("fusion", FUSIONS)
def test_each_fused_route_runs_its_own_dispatch_and_gives_the_plain_logits(fused_kernels_in_torch, fusion, batch):
    from engine.model import sdar

    model = random_model(tiny_sdar_config(head_dim=16))
    ids = torch.randint(0, 1000, (batch, 8), generator=torch.Generator().manual_seed(1))
    positions = torch.arange(8, 16)
    mask = sdar.block_causal_mask(positions, torch.arange(64), 4)

    def logits(kernels):
        cache = sdar.KVCache.allocate(model.config, batch, 64, "cpu", torch.float32)
        with torch.no_grad():
            return model(ids, position_ids=positions, attn_mask=mask, cache=cache, logits_to_keep=4, kernels=kernels)

    plain = logits(sdar.PLAIN)
    for attention in ("sdpa", "decode"):
        fused_kernels_in_torch.clear()
        routed = logits(Routed(attention, "skinny", fusion))
        assert torch.allclose(routed, plain, atol=1e-5, rtol=1e-5), (attention, fusion, batch)
        assert "linear" in fused_kernels_in_torch or "norm_linear" in fused_kernels_in_torch
        assert ("decode_attention" in fused_kernels_in_torch) == (attention == "decode")
        fused_norms = fusion.step and fusion.norms and batch == 1
        assert ("norm_linear" in fused_kernels_in_torch) == fused_norms
        assert ("glu_linear" in fused_kernels_in_torch) == fusion.step


def test_the_decode_paths_give_the_cached_paths_tokens_at_a_batch_of_several(fused_kernels_in_torch):
    model = random_model(tiny_sdar_config(vocab_size=1024, mask_token_id=1023, head_dim=16))
    args = dict(n=3, max_tokens=8, sampling=Sampling(), stop_ids=[])
    expected = decode(model, prompt(12), path="cached", **args)
    for fusion in FUSIONS:
        got = decode(model, prompt(12), path="static-decode", fusion=fusion, **args)
        assert got.tokens == expected.tokens and got.steps == expected.steps, fusion
    assert "decode_attention" in fused_kernels_in_torch
