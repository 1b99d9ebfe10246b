"""On the GPU: the engine's kernel for a step's projections (engine.model.skinny) computes x @ W^T
as well as cuBLAS does, for every shape, tile choice and layout the engine gives it, and the
`skinny` decoding path that uses it agrees with the plain path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.decoding.decode import check_agreement, decode
from engine.model.routes import Fusion, Routed
from engine.types import Sampling

from tests.engine.conftest import random_model, tiny_sdar_config

pytestmark = pytest.mark.gpu

skinny = pytest.importorskip("engine.model.skinny")
if skinny.available() is not None:
    pytest.skip(skinny.available(), allow_module_level=True)


def errors(x: torch.Tensor, w: torch.Tensor, got: torch.Tensor) -> tuple[float, float]:
    """Max abs error of `got` and of cuBLAS's product against the fp32 product of the same inputs."""
    exact = x.float() @ w.float().t()
    return (got.float() - exact).abs().max().item(), (F.linear(x, w).float() - exact).abs().max().item()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m", [1, 3, 8, 13, 32, 64])
@pytest.mark.parametrize("n,k", [(16, 32), (4096, 2048), (2048, 6144), (144, 96)])
def test_the_kernel_rounds_as_closely_as_cublas(dtype, m, n, k):
    g = torch.Generator(device="cuda").manual_seed(m * n + k)
    x = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
    w = (torch.randn(n, k, device="cuda", dtype=dtype, generator=g) * 0.05)
    got = skinny.launch(x, w)
    assert got.shape == (m, n) and got.dtype == dtype
    ours, cublas = errors(x, w, got)
    # Both round an fp32 sum once; the sums' orders differ, so allow a little past cuBLAS.
    scale = (x.float() @ w.float().t()).abs().max().item()
    assert ours <= 1.5 * cublas + 1e-3 * scale, (ours, cublas)



@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m", [1, 3, 8, 13, 64])
@pytest.mark.parametrize("i,k", [(6144, 2048), (16, 32), (48, 96)])
@pytest.mark.parametrize("warps", [None, 1, 4])
def test_the_glu_form_is_silu_of_gate_times_up(dtype, m, i, k, warps):
    """glu_linear(x, [gate; up]) against the model's F.silu(gate) * up over cuBLAS's products,
    both measured against the fp32 computation of the same inputs."""
    g = torch.Generator(device="cuda").manual_seed(m * i + k)
    x = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
    w = torch.randn(2 * i, k, device="cuda", dtype=dtype, generator=g) * 0.05
    if warps is not None and not skinny.takes(skinny._tiles(m), k, warps, 1):
        pytest.skip("that tile choice does not divide this K")
    got = skinny.launch(x, w, warps, None if warps is None else 1, glu=True)
    assert got.shape == (m, i) and got.dtype == dtype
    gate, up = (x.float() @ w.float().t()).chunk(2, dim=-1)
    exact = F.silu(gate) * up
    cublas_gate, cublas_up = F.linear(x, w).chunk(2, dim=-1)
    model = F.silu(cublas_gate) * cublas_up
    ours, theirs = (got.float() - exact).abs().max().item(), (model.float() - exact).abs().max().item()
    assert ours <= 1.5 * theirs + 1e-3 * exact.abs().max().item(), (ours, theirs)


def rms_norm(h: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    from engine.model.sdar import RMSNorm

    norm = RMSNorm(h.shape[-1], 1e-6).to(h.device)
    norm.weight.data = weight
    return norm(h)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m", [1, 3, 8, 13])
@pytest.mark.parametrize("n,k", [(4096, 2048), (160, 96)])
@pytest.mark.parametrize("glu", [False, True])
@pytest.mark.parametrize("parts", ["whole", "by 16"])
def test_the_norm_form_is_the_models_rmsnorm_then_the_product(dtype, m, n, k, glu, parts):
    """norm_linear(h, part, ...) against RMSNorm then the product, both measured against the fp32
    computation, with the rows' sums of squares given whole or in parts of 16 features."""
    g = torch.Generator(device="cuda").manual_seed(m * n + k + glu)
    h = torch.randn(m, k, device="cuda", dtype=dtype, generator=g) * 3
    nw = (1 + 0.2 * torch.randn(k, device="cuda", generator=g)).to(dtype)
    w = torch.randn(n, k, device="cuda", dtype=dtype, generator=g) * 0.05
    squares = h.float().square()
    part = squares.sum(-1)[None] if parts == "whole" else squares.view(m, k // 16, 16).sum(-1).t().contiguous()
    got = skinny.norm_linear(h, part, nw, w, 1e-6, glu)
    theirs = skinny.launch(rms_norm(h, nw), w, glu=glu)
    assert got.shape == theirs.shape and got.dtype == dtype
    x32 = h.float() * torch.rsqrt(squares.mean(-1, keepdim=True) + 1e-6) * nw.float()
    exact = x32 @ w.float().t()
    if glu:
        gate, up = exact.chunk(2, dim=-1)
        exact = F.silu(gate) * up
    ours, model = (got.float() - exact).abs().max().item(), (theirs.float() - exact).abs().max().item()
    assert ours <= 1.5 * model + 2e-3 * exact.abs().max().item(), (ours, model)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m", [1, 4, 8, 13])
@pytest.mark.parametrize("warps", [None, 1])
def test_the_residual_form_adds_as_torch_does_and_sums_the_squares(dtype, m, warps):
    g = torch.Generator(device="cuda").manual_seed(m)
    x = torch.randn(m, 2048, device="cuda", dtype=dtype, generator=g)
    w = torch.randn(2048, 2048, device="cuda", dtype=dtype, generator=g) * 0.02
    residual = torch.randn(m, 2048, device="cuda", dtype=dtype, generator=g) * 4
    h, part = skinny.launch(x, w, warps, None if warps is None else 1, residual=residual)
    # The same sums as the plain form, rounded, then added in the dtype as `residual + y` is.
    assert torch.equal(h, residual + skinny.launch(x, w, warps, None if warps is None else 1))
    assert part.shape == (2048 // 16, m) and part.dtype == torch.float32
    torch.testing.assert_close(part, h.float().square().view(m, 128, 16).sum(-1).t(), rtol=1e-5, atol=1e-5)
    # The parts are what the norm form reads: the next projection of the same stream.
    nw = torch.ones(2048, device="cuda", dtype=dtype)
    ours = skinny.norm_linear(h, part, nw, w, 1e-6)
    torch.testing.assert_close(ours.float(), skinny.launch(rms_norm(h, nw), w).float(), rtol=0.02, atol=0.02)


def test_every_tile_choice_gives_the_same_products():
    g = torch.Generator(device="cuda").manual_seed(6144)
    x = torch.randn(8, 6144, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randn(2048, 6144, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02
    results = {}
    for warps in (1, 2, 4, 8, 16):
        for unroll in (1, 2, 4):
            results[(warps, unroll)] = skinny.launch(x, w, warps, unroll)
    for choice, y in results.items():
        ours, cublas = errors(x, w, y)
        assert ours <= 1.5 * cublas + 1e-3, choice
    # The same choice twice: the block's partial sums are added in a fixed order.
    assert torch.equal(skinny.launch(x, w, 8, 2), results[(8, 2)])


def test_rows_with_a_stride_of_their_own_are_read_in_place():
    """x's rows further apart than K (a slice of wider rows): the kernel reads them at their stride."""
    w = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16) * 0.05
    wide = torch.randn(8, 1024, device="cuda", dtype=torch.bfloat16)
    x = wide[:, :512]
    assert x.stride(0) == 1024
    ours, cublas = errors(x, w, skinny.launch(x, w))
    assert ours <= 1.5 * cublas + 1e-3


def test_strided_and_batched_inputs_are_taken_as_rows():
    w = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16) * 0.05
    window = torch.randn(3, 8, 512, device="cuda", dtype=torch.bfloat16)
    last = window[:, -4:]  # the block's rows of each candidate: not contiguous
    assert skinny.usable(last[:1], w)  # 4 rows: a batch-1 step's vocabulary projection
    got = skinny.launch(last, w)
    assert got.shape == (3, 4, 256)
    ours, cublas = errors(last.reshape(-1, 512), w, got.reshape(-1, 256))
    assert ours <= 1.5 * cublas + 1e-3


def test_what_the_kernel_does_not_take_goes_to_f_linear(monkeypatch):
    w = torch.randn(64, 64, device="cuda")
    assert not skinny.usable(torch.randn(4, 64, device="cuda"), w)  # fp32
    w16 = w.to(torch.bfloat16)
    assert skinny.usable(torch.randn(8, 64, device="cuda", dtype=torch.bfloat16), w16)
    assert not skinny.usable(torch.randn(9, 64, device="cuda", dtype=torch.bfloat16), w16)  # rows: cuBLAS
    assert not skinny.usable(torch.randn(4, 48, device="cuda", dtype=torch.bfloat16),
                             torch.randn(64, 48, device="cuda", dtype=torch.bfloat16))  # K % 32
    assert not skinny.usable(torch.randn(4, 64, device="cuda", dtype=torch.bfloat16),
                             torch.randn(40, 64, device="cuda", dtype=torch.bfloat16))  # N % 16
    x16 = torch.randn(4, 64, device="cuda", dtype=torch.bfloat16)
    assert skinny.usable(x16, torch.randn(64, 64, device="cuda", dtype=torch.bfloat16), glu=True)
    assert not skinny.usable(x16, torch.randn(48, 64, device="cuda", dtype=torch.bfloat16), glu=True)  # N % 32
    assert not skinny.usable(torch.randn(4, 64, dtype=torch.bfloat16), w16.cpu())  # CPU
    # A shape where cuBLAS was measured faster (None in engine.model.skinny.TUNED) stays with cuBLAS.
    x, gate_up = (torch.randn(8, 2048, device="cuda", dtype=torch.bfloat16),
                  torch.randn(12288, 2048, device="cuda", dtype=torch.bfloat16))
    assert skinny.usable(x, gate_up)
    monkeypatch.setitem(skinny.TUNED, (1, 12288, 2048), None)
    assert not skinny.usable(x, gate_up)


@pytest.fixture(scope="module")
def bf16_model():
    return random_model(tiny_sdar_config(head_dim=16), std=0.1).cuda().to(torch.bfloat16)


def test_the_skinny_path_runs_the_kernel_and_agrees_with_the_plain_path(bf16_model, monkeypatch):
    calls, forms = [], []
    launch = skinny.launch

    def counted(*a, **kw):
        calls.append(tuple(a[1].shape))
        forms.append((kw.get("norm") is not None, kw.get("residual") is not None))
        return launch(*a, **kw)

    monkeypatch.setattr(skinny, "launch", counted)
    shapes = {tuple(p.shape) for name, p in bf16_model.named_parameters()
              if name.endswith(("qkv_proj.weight", "o_proj.weight", "gate_up_proj.weight", "down_proj.weight"))}
    shapes.add(tuple(bf16_model.lm_head.weight.shape))
    for n in (1, 3):
        before = len(calls)
        skinny_distance = check_agreement(bf16_model, "skinny", n, 4)
        decode_distance = check_agreement(bf16_model, "decode", n, 4)
        # bf16: other kernels round differently; the same order as the cuBLAS path's distance.
        assert skinny_distance <= max(3 * decode_distance, 0.02), (n, skinny_distance, decode_distance)
        if n == 1:  # every projection of a batch-1 step, the vocabulary's included, on the kernel
            assert set(calls[before:]) == shapes
            # ... as a fused step: each layer's attention norm in its qkv product, the residual
            # add before it in the down product.
            layers = bf16_model.config.num_hidden_layers
            kinds = set(zip(calls[before:], forms[before:]))
            attention, mlp = bf16_model.model.layers[0].self_attn, bf16_model.model.layers[0].mlp
            assert (tuple(attention.qkv_proj.weight.shape), (True, False)) in kinds
            assert (tuple(mlp.down_proj.weight.shape), (False, True)) in kinds
            norms, adds = (sum(f[i] for f in forms[before:]) for i in (0, 1))
            assert norms == adds and adds % layers == 0 and adds > 0
        else:  # 8 candidates: 64 rows, cuBLAS's
            assert calls[before:] == []


def test_a_fused_step_is_a_few_bf16_rows_on_the_skinny_path(bf16_model):
    """fuses_norms: the skinny path's few rows in bf16; not more rows (cuBLAS's), another
    path, or fp16 (whose range the norm's weight times an unnormalized outlier could leave)."""
    x = torch.zeros(1, 8, bf16_model.config.hidden_size, device="cuda", dtype=torch.bfloat16)
    assert Routed(projections="skinny").fuses_norms(bf16_model, x)
    assert not Routed(projections="linear").fuses_norms(bf16_model, x)
    assert not Routed(projections="skinny").fuses_norms(bf16_model, x.repeat(2, 1, 1))
    half = random_model(tiny_sdar_config(head_dim=16), std=0.1).cuda().half()
    assert not Routed(projections="skinny").fuses_norms(half, x.half())


def test_the_skinny_path_in_fp32_gives_the_plain_paths_tokens():
    """An fp32 model keeps F.linear in every projection: the path gives the eager tokens."""
    model = random_model(tiny_sdar_config(head_dim=16)).cuda()
    ids = torch.randint(0, 5000, (40,), generator=torch.Generator().manual_seed(1)).tolist()
    args = dict(n=3, max_tokens=32, sampling=Sampling(), stop_ids=[])
    assert decode(model, ids, path="skinny", **args).tokens == decode(model, ids, path="cached", **args).tokens


def test_the_fusions_switch_off_and_on(bf16_model, monkeypatch):
    """routes.Fusion: off, a batch-1 step runs no fused form (no norm or residual in a product,
    no SwiGLU kernel); on or off, the step agrees with the plain path, and an fp32 model's
    `decode` path (fused attention at batch 1) gives the same tokens either way."""
    forms = []
    launch = skinny.launch

    def counted(*a, **kw):
        forms.append(kw.get("norm") is not None or kw.get("residual") is not None or bool(kw.get("glu")))
        return launch(*a, **kw)

    monkeypatch.setattr(skinny, "launch", counted)
    for fusion in (Fusion(step=False), Fusion(norms=False), Fusion()):
        forms.clear()
        distance = check_agreement(bf16_model, "skinny", 1, 4, fusion=fusion)
        assert distance <= 0.05, (fusion, distance)
        assert any(forms) == fusion.step, (fusion, forms)
    model = random_model(tiny_sdar_config(head_dim=16)).cuda()
    ids = torch.randint(0, 5000, (40,), generator=torch.Generator().manual_seed(2)).tolist()
    args = dict(n=1, max_tokens=32, sampling=Sampling(), stop_ids=[], path="decode")
    assert (decode(model, ids, fusion=Fusion(), **args).tokens
            == decode(model, ids, fusion=Fusion(step=False), **args).tokens)
