"""The fused decode attention (engine.model.decode_attention.decode_step_attention) against the
model's own steps (q/k RMSNorm, RoPE, the cache write, grouped_attention), for the shapes a
decoding step has. Run by tests/engine/model/test_decode_attention.py on the CPU (Triton's
interpreter) and by tests/engine/decoding/test_decode_gpu.py on a GPU."""

from __future__ import annotations

import torch

from engine.model.decode_attention import decode_step_attention, kv_lengths
from engine.model.sdar import Attention, SDARConfig, block_causal_mask, grouped_attention, rotary_cos_sin, rotate_half

# (batch, query heads, kv heads, tokens, head dim, cache, key length, first position, mask per row)
CASES = [
    (1, 4, 2, 8, 16, 300, 212, 204, False),  # two 4-token blocks, a cache past the mask
    (2, 8, 2, 4, 32, 200, 132, 128, True),   # group 4, the window at a split's start, a mask per row
    (1, 2, 1, 4, 16, 64, 4, 0, False),       # the first block
    (2, 16, 8, 8, 128, 1100, 1032, 1024, False),  # DICE-1.7B's heads
    (1, 4, 2, 8, 16, 300, 132, 124, False),  # the window across a split's and a tile's edge
    (1, 4, 2, 4, 16, 300, 200, 258, False),  # positions past the mask's keys: written, not read
]


def mismatches(device: str, dtype: torch.dtype) -> list[str]:
    """What differs, case by case (empty: the fused kernel is the model's steps). bf16/fp16: the
    model rounds after each product, the kernel once at the end (as torch.compile's fused
    kernels do), so a few units in the last place are allowed."""
    torch.manual_seed(0)
    tolerance = {torch.float32: 1e-5, torch.float16: 3 * 2.0 ** -11, torch.bfloat16: 3 * 2.0 ** -8}[dtype]

    def close(a, b):
        return bool(((a.float() - b.float()).abs() <= tolerance * (1 + b.float().abs())).all())

    found = []
    for case in CASES:
        b, h, kv, t, d, cache_len, s, first, per_row = case
        config = SDARConfig(hidden_size=h * d, num_attention_heads=h, num_key_value_heads=kv, head_dim=d,
                            rope_scaling={"rope_type": "yarn", "factor": 4.0}, max_position_embeddings=256)
        layer = Attention(config).to(device, dtype)
        with torch.no_grad():
            layer.q_norm.weight.uniform_(0.5, 1.5)
            layer.k_norm.weight.uniform_(0.5, 1.5)
        qkv = torch.randn(b, t, (h + 2 * kv) * d, dtype=dtype, device=device)
        positions = torch.arange(first, first + t, device=device)
        cos, sin = rotary_cos_sin(positions[None].expand(b, t), config, dtype)
        keys = torch.randn(b, kv, cache_len, d, dtype=dtype, device=device)
        values = torch.randn(b, kv, cache_len, d, dtype=dtype, device=device)
        mask = block_causal_mask(positions, torch.arange(s, device=device), 4)
        if per_row:
            mask = mask.repeat(b, 1, 1, 1)
            mask[1, :, :, : first - 50] = False
        with torch.no_grad():
            q, k, v = qkv.split([h * d, kv * d, kv * d], dim=-1)
            q = layer.q_norm(q.view(b, t, h, d)).transpose(1, 2)
            k = layer.k_norm(k.view(b, t, kv, d)).transpose(1, 2)
            v = v.view(b, t, kv, d).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            want_keys, want_values = keys.clone(), values.clone()
            want_keys[:, :, positions] = k
            want_values[:, :, positions] = v
            want = grouped_attention(q, want_keys[:, :, :s], want_values[:, :, :s], mask)
            got = decode_step_attention(qkv, layer.q_norm.weight, layer.k_norm.weight, cos, sin, positions, keys,
                                        values, mask, kv_lengths(mask), h, layer.q_norm.eps)
        if tuple(got.shape) != tuple(want.shape):
            found.append(f"{case}: shape {tuple(got.shape)} != {tuple(want.shape)}")
        elif not close(got, want):
            found.append(f"{case}: output off by {float((got.float() - want.float()).abs().max())}")
        if not close(keys, want_keys):
            found.append(f"{case}: keys off by {float((keys.float() - want_keys.float()).abs().max())}")
        if not torch.equal(values, want_values):
            found.append(f"{case}: values differ")
    return found
