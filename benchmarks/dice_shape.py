"""Models of the DICE sizes' shapes with random weights, and a random prompt: what the decoding
speed benchmarks (engine_speed.py, preset_speed.py) run on, so that they need no checkpoint.

DICE-1.7B: hidden 2048, 28 layers, 16/8 heads, head_dim 128, intermediate 6144, tied embeddings.
DICE-4B: SDAR-4B's config (tests/data/sdar-tokenizer/config.json): hidden 2560, 36 layers,
32/8 heads, intermediate 9728, untied. DICE-8B: SDAR-8B's (Qwen3-8B's widths): hidden 4096, 36
layers, 32/8 heads, intermediate 12288, untied. All: vocab 151936, head_dim 128, 4-token
blocks, DICE's mask and end-of-text tokens.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engine.model.sdar import SDARConfig, SDARForCausalLM  # noqa: E402  (after the path is set)

BLOCK = 4
DICE_1_7B = SDARConfig(
    vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
    num_attention_heads=16, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
    rope_theta=1_000_000.0, max_position_embeddings=32768, tie_word_embeddings=True,
    block_size=BLOCK, mask_token_id=151669, eos_token_id=151643,
)
DICE_4B = replace(DICE_1_7B, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
                  tie_word_embeddings=False)
DICE_8B = replace(DICE_4B, hidden_size=4096, intermediate_size=12288)
SHAPES = {"1.7b": DICE_1_7B, "4b": DICE_4B, "8b": DICE_8B}


def describe(config: SDARConfig) -> str:
    """"2048 x 28, 16/8 heads, vocab 151936, tied" for the benchmarks' reports."""
    return (f"{config.hidden_size} x {config.num_hidden_layers}, {config.num_attention_heads}/"
            f"{config.num_key_value_heads} heads, vocab {config.vocab_size}, "
            f"{'tied' if config.tie_word_embeddings else 'untied'}")


def random_model(config: SDARConfig, device: str, dtype: torch.dtype) -> SDARForCausalLM:
    """`config`'s model on `device`, weights drawn from N(0, 0.02) with seed 0, in eval mode."""
    torch.manual_seed(0)
    with torch.device(device):
        model = SDARForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.02)
        # Random weights would now and then rank <|MASK|> first, and the dice preset, which
        # allows it as DICE does, stops with an error; a zero row (tied: a logit of exactly 0,
        # far below the best of 151936 random ones) keeps it out of the race.
        model.model.embed_tokens.weight[config.mask_token_id] = 0
    return model.to(dtype).eval()


def prompt(length: int) -> list[int]:
    """`length` random token ids below 150000, the same for every call (seed 1)."""
    return torch.randint(0, 150000, (length,), generator=torch.Generator().manual_seed(1)).tolist()
