"""The engine's decode attention kernel (engine.model.decode_attention), on the CPU through Triton's
interpreter: against SDPA (engine.model.sdar.grouped_attention) for the shapes a decoding step has
(grouped query heads, a window of 4 to 16 tokens, a cache longer than the sequence and not a
whole number of tiles, a mask per batch row), and the `static-decode` path's tokens against
the eager `cached` path's. Triton comes with torch's CUDA builds; where it is not installed
(the CPU-only torch of CI) the kernel's tests are skipped, and the GPU tests (tests/engine/decoding/test_decode_gpu.py)
run the kernel compiled."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _triton() -> str | None:
    try:
        import triton  # noqa: F401
    except ImportError:
        return "Triton is not installed here (torch's CUDA builds bring it); the GPU tests run the kernel"
    return None


needs_triton = pytest.mark.skipif(_triton() is not None, reason=str(_triton()))


def _interpreted(code: str, timeout: float = 900.0) -> str:
    """Run `code` in a Python with TRITON_INTERPRET=1 (set before Triton is imported)."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(filter(None, [
        str(REPO), os.environ.get("PYTHONPATH", "")]))}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=timeout, env=env, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@needs_triton
def test_the_kernel_is_sdpa_for_every_shape_of_a_step():
    out = _interpreted("""
        import torch
        from engine.model.decode_attention import decode_attention, kv_lengths
        from engine.model.sdar import block_causal_mask, grouped_attention

        torch.manual_seed(0)
        cases = [  # (batch, query heads, kv heads, tokens, head dim, cache, first position, block, mask per row)
            (1, 4, 2, 8, 16, 300, 200, 4, False),   # the window of two 4-token blocks, group 2
            (2, 8, 2, 4, 16, 129, 64, 4, False),    # group 4, a cache one past a tile
            (2, 4, 4, 16, 32, 520, 500, 8, True),   # no grouping, a mask per batch row
            (1, 2, 1, 4, 16, 64, 0, 4, False),      # the first block: only its own keys
        ]
        for b, h, kv, t, d, s, first, block, per_row in cases:
            q = torch.randn(b, t, h, d).transpose(1, 2)  # non-contiguous, as the model's
            k, v = torch.randn(b, kv, s, d), torch.randn(b, kv, s, d)
            mask = block_causal_mask(torch.arange(first, first + t), torch.arange(s), block)
            if per_row:  # row 1 sees fewer keys: its sequence is shorter
                mask = mask.repeat(b, 1, 1, 1)
                mask[1, :, :, first - 100:] = False
                mask[1, :, :, first - 100:first - 100 + t] = True
            got = decode_attention(q, k, v, mask, kv_lengths(mask))
            want = grouped_attention(q, k, v, mask)
            print(tuple(got.shape) == tuple(want.shape), float((got - want).abs().max()))
    """)
    rows = [line.split() for line in out.strip().splitlines()]
    assert len(rows) == 4
    for same_shape, error in rows:
        assert same_shape == "True" and float(error) < 1e-5, out



@needs_triton
@pytest.mark.parametrize("dtype", ["float32", "float16"])  # bf16 is not right in Triton's interpreter
def test_the_fused_kernel_is_the_models_norms_rope_cache_write_and_attention(dtype):
    out = _interpreted(f"""
        import torch
        from tests.engine.model.fused_attention_check import mismatches

        print(mismatches("cpu", torch.{dtype}))
    """)
    assert out.strip() == "[]", out


def test_kv_lengths_is_one_past_the_last_key_any_row_may_see():
    import torch

    from engine.model.decode_attention import kv_lengths
    from engine.model.sdar import block_causal_mask

    mask = block_causal_mask(torch.arange(8, 12), torch.arange(64), 4)
    assert kv_lengths(mask).tolist() == [12]
    two = mask.repeat(2, 1, 1, 1)
    two[1, :, :, 4:] = False
    assert kv_lengths(two).tolist() == [12, 4]


@needs_triton
def test_the_static_decode_path_gives_the_cached_paths_tokens():
    out = _interpreted("""
        import torch

        from engine.decoding.decode import decode
        from engine.types import Sampling
        from tests.engine.conftest import random_model, tiny_sdar_config

        def prompt(length):
            return torch.randint(0, 1000, (length,), generator=torch.Generator().manual_seed(length)).tolist()

        model = random_model(tiny_sdar_config(vocab_size=1024, mask_token_id=1023, head_dim=16))
        for sampling in (Sampling(), Sampling(strategy="low_confidence_dynamic", threshold=0.05)):
            args = dict(n=2, max_tokens=9, sampling=sampling, stop_ids=[])
            cached = decode(model, prompt(10), path="cached", **args)
            ours = decode(model, prompt(10), path="static-decode", **args)
            print(ours.tokens == cached.tokens and ours.steps == cached.steps)
    """, timeout=1800.0)
    assert out.split() == ["True", "True"], out


@pytest.mark.skipif(_triton() is None, reason="Triton is installed here: the path runs (the tests above)")
def test_without_triton_the_decode_paths_say_why():
    from engine.decoding.paths import make_forward
    from engine.types import EngineError

    from tests.engine.conftest import random_model, tiny_sdar_config

    model = random_model(tiny_sdar_config(vocab_size=1024, mask_token_id=1023, head_dim=16))
    with pytest.raises(EngineError, match="needs Triton"):
        make_forward(model, "static-decode", 2, 64, 4)
