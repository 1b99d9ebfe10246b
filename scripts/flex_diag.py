"""Where the `flex` decoding path goes wrong, on the GPU machine (from the repository root):

    python3 scripts/flex_diag.py [--part all|attention|model]

Part 1, attention alone: one decoding window's attention (8 query rows of 8 candidates; 4 query
heads over 2 key/value heads at head dimension 16, as part 2's model, 16 over 8 at 128 as
DICE-1.7B, 8 over 2 at 128; a 2048-position cache, the block-causal mask) through the
torch.compile'd flex_attention in several variants, against torch's SDPA with the bool mask:
the engine's BlockMask (a mask_mod reading a captured mask buffer), the same mask as
arithmetic on a captured offset, without grouped heads (keys and values repeated), and each
with `kernel_options={"FORCE_USE_FLEX_ATTENTION": True}` (the general kernel instead of the
split-KV decoding one). fp32, and bf16 for DICE-1.7B's shape.

Part 2, the model: one decoding window of a tiny fp32 SDAR model (head_dim 16) through each way
the engine can run attention, against the eager SDPA path, for each kernel_options variant
(engine.model.routes.FLEX_KERNEL_OPTIONS).

On the H200 with torch 2.11 (2026-12-03; docs/device-runs/2026-12-03/8c34212/flex_diag.log):
part 1 is right in every variant (fp32 at most 6e-7 off, bf16 8e-4); in part 2 compiled flex is
1.49 off with the kernel flex picks (its split-KV decoding kernel) and 3.1e-6 with the general
kernel forced, which engine.model.routes.FLEX_KERNEL_OPTIONS now does (eager flex 4.2e-6, compiled
SDPA 2.1e-6). Part 1 had contiguous queries; the model's come out of a transpose. 456c64a
(docs/device-runs/2026-12-03/456c64a/flex_diag.log): the "q-transposed" variants of part 1 are
right through the decoding kernel too, so the layout alone is not what it gets wrong; the
model with its query made contiguous (now part 2's first case, `--part model`) did not run
before the call's limit.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.getcwd())

import engine.model.routes as engine_model  # noqa: E402
from engine.decoding.paths import GraphForward, StaticForward, block_mask  # noqa: E402
from engine.model.routes import FLEX_BLOCK, flex_block_mask  # noqa: E402
from engine.model.sdar import KVCache  # noqa: E402
from tests.engine.conftest import random_model, tiny_sdar_config  # noqa: E402

FORCE = {"FORCE_USE_FLEX_ATTENTION": True}


def arithmetic_block_mask(first: torch.Tensor, t: int, s: int, block_size: int, key_len: int):
    """The block-causal mask of queries first..first+t-1 as arithmetic on a captured 0-d offset."""
    from torch.nn.attention.flex_attention import BlockMask

    kv_tiles = -(-s // FLEX_BLOCK)
    last = (first + t - 1) // block_size * block_size + block_size  # keys below this may be seen
    count = torch.clamp((last + FLEX_BLOCK - 1) // FLEX_BLOCK, max=kv_tiles).to(torch.int32).reshape(1, 1, 1)
    order = torch.arange(kv_tiles, device=first.device, dtype=torch.int32).reshape(1, 1, 1, kv_tiles)

    def mask_mod(batch, head, q_idx, kv_idx):
        return (kv_idx // block_size <= (first + q_idx) // block_size) & (kv_idx < key_len)

    return BlockMask.from_kv_blocks(count, order, BLOCK_SIZE=FLEX_BLOCK, mask_mod=mask_mod, seq_lengths=(t, s),
                                    compute_q_blocks=False)


def attention_part(device: torch.device) -> None:
    from torch.nn.attention.flex_attention import flex_attention

    torch._dynamo.config.recompile_limit = 64  # each variant is a compilation of its own
    compiled = torch.compile(flex_attention, fullgraph=True, dynamic=False)
    n, t, s, bs, first = 8, 8, 2048, 4, 1020
    # Part 2's model (4 heads over 2), the DICE-1.7B attention (16 over 8), and 8 over 2.
    for d, dtype, heads, kv_heads in ((16, torch.float32, 4, 2), (128, torch.bfloat16, 16, 8),
                                      (128, torch.float32, 8, 2)):
        g = torch.Generator().manual_seed(0)
        q = torch.randn(n, heads, t, d, generator=g).to(device, dtype)
        k = torch.randn(n, kv_heads, s, d, generator=g).to(device, dtype)
        v = torch.randn(n, kv_heads, s, d, generator=g).to(device, dtype)
        positions = torch.arange(first, first + t, device=device)
        mask = block_mask(positions, s, bs)  # [1, 1, t, s]
        kr, vr = k.repeat_interleave(heads // kv_heads, 1), v.repeat_interleave(heads // kv_heads, 1)
        reference = F.scaled_dot_product_attention(q.float(), kr.float(), vr.float(), attn_mask=mask)
        # The model's layout: q comes out of a transpose ([n, t, heads, d] in memory).
        qt = q.transpose(1, 2).contiguous().transpose(1, 2)
        variants = {
            "buffer-mask gqa": lambda o: compiled(q, k, v, block_mask=flex_block_mask(mask), enable_gqa=True,
                                                  kernel_options=o),
            "buffer-mask gqa q-transposed": lambda o: compiled(qt, k, v, block_mask=flex_block_mask(mask),
                                                               enable_gqa=True, kernel_options=o),
            "buffer-mask repeated-heads": lambda o: compiled(q, kr, vr, block_mask=flex_block_mask(mask),
                                                             kernel_options=o),
            "arith-mask gqa": lambda o: compiled(q, k, v, enable_gqa=True, kernel_options=o,
                                                 block_mask=arithmetic_block_mask(torch.tensor(first, device=device),
                                                                                  t, s, bs, s)),
        }
        for name, run in variants.items():
            for label, options in (("decoding kernel", None), ("FORCE_USE_FLEX_ATTENTION", FORCE)):
                try:
                    got = run(options).float()
                    print(f"attention {heads}/{kv_heads} heads d={d:<3} {str(dtype)[6:]:8} {name:28} {label:25} max abs diff "
                          f"{(got - reference).abs().max().item():.3g}", flush=True)
                except Exception as exc:  # noqa: BLE001 - a diagnosis prints every failure and goes on
                    print(f"attention {heads}/{kv_heads} heads d={d:<3} {str(dtype)[6:]:8} {name:28} {label:25} ERROR {type(exc).__name__} "
                          f"{str(exc)[:200]}", flush=True)


def model_part(device: torch.device) -> None:
    model = random_model(tiny_sdar_config(vocab_size=1024, mask_token_id=1023, head_dim=16)).to(device).float()
    ids = torch.randint(0, 1000, (8, 40), generator=torch.Generator().manual_seed(0)).to(device)

    def window(cls, **kwargs) -> torch.Tensor:
        cache = KVCache.allocate(model.config, 8, 2048, device, torch.float32)
        forward = cls(model, cache, 4, **kwargs)
        forward.prefill(ids[:1, :32])
        return forward.window_logits(ids, 28, 36, 2048)

    plain_attention = engine_model.flex_grouped_attention

    def contiguous_attention(q, k, v, block_mask):
        return plain_attention(q.contiguous(), k, v, block_mask)

    with torch.no_grad():
        reference = window(StaticForward)
        # The open question first (456c64a ran out of time before it): the decoding kernel
        # with the query made contiguous.
        for options, attend in ((None, contiguous_attention), (None, plain_attention), (FORCE, plain_attention)):
            engine_model.FLEX_KERNEL_OPTIONS = options
            engine_model.flex_grouped_attention = attend
            label = f"{options}{', q made contiguous' if attend is contiguous_attention else ''}"
            torch._dynamo.reset()
            for name, cls, kwargs in [("eager-flex", StaticForward, dict(attention="flex")),
                                      ("compiled-sdpa", StaticForward, dict(compiled=True)),
                                      ("compiled-flex", StaticForward, dict(compiled=True, attention="flex")),
                                      ("graph-flex", GraphForward, dict(compiled=True, attention="flex"))]:
                try:
                    print(f"model kernel_options={label} {name} max abs diff",
                          (window(cls, **kwargs) - reference).abs().max().item(), flush=True)
                except Exception as exc:  # noqa: BLE001 - a diagnosis prints every failure and goes on
                    print(f"model kernel_options={label} {name} ERROR", type(exc).__name__, str(exc)[:300],
                          flush=True)
    engine_model.FLEX_KERNEL_OPTIONS = FORCE
    engine_model.flex_grouped_attention = plain_attention


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Where the flex decoding path goes wrong.")
    parser.add_argument("device", nargs="?", default="cuda")
    parser.add_argument("--part", choices=("all", "attention", "model"), default="all",
                        help="part 1 (attention alone), part 2 (the model), or both")
    args = parser.parse_args()
    device = torch.device(args.device)
    print("torch", torch.__version__, torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu", flush=True)
    if args.part in ("all", "attention"):
        attention_part(device)
    if args.part in ("all", "model"):
        model_part(device)


if __name__ == "__main__":
    main()
