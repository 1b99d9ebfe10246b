"""Tiny random checkpoints on disk, loaded through the same path as a real one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _warm_record(tmp_path_factory):
    """The session's own record of warm-ups (engine.model.compile_cache.WarmRecords), not the
    user's: a path a test makes fail on purpose would otherwise be skipped in the next session."""
    if not os.environ.get("DICE_WARM_RECORD"):
        os.environ["DICE_WARM_RECORD"] = str(tmp_path_factory.mktemp("warm") / "warm.json")
    yield


# The tiny models here do microsecond-sized matmuls; with several threads on a busy 2-core CI
# machine torch spends far longer synchronising its threads than computing.
torch.set_num_threads(1)

TOKENIZER_FILES = ("vocab.json", "merges.txt", "added_tokens.json", "tokenizer_config.json", "special_tokens_map.json")


def copy_tokenizer(src: Path, dst: Path) -> None:
    for name in TOKENIZER_FILES:
        shutil.copy(src / name, dst / name)


def tiny_sdar_config(**overrides):
    from engine.model.sdar import SDARConfig

    fields = dict(
        vocab_size=151936,  # the real vocabulary, so <|MASK|> (151669) and EOS are real tokens
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        block_size=4,
        eos_token_id=151643,
    )
    fields.update(overrides)
    return SDARConfig(**fields)


def random_model(config, seed: int = 0, std: float = 0.5):
    """Weights large enough that greedy decoding is not one token repeated."""
    from engine.model.sdar import SDARForCausalLM

    torch.manual_seed(seed)
    model = SDARForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, std)
    return model.eval()
