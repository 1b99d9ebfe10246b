"""Prompts: the built-in model's fill-in-the-middle format and DICE's chat prompts."""

from __future__ import annotations

FIM_PREFIX = "<|fim_prefix|>"
FIM_SUFFIX = "<|fim_suffix|>"
FIM_MIDDLE = "<|fim_middle|>"
END_OF_TEXT = "<|endoftext|>"


def fim_prompt(prefix: str, suffix: str) -> str:
    """The one place the FIM format is written (suffix first, so that a block-causal model has
    read the right-hand context before it writes the middle); training imports it. The model
    answers the middle, then <|endoftext|>."""
    return f"{FIM_SUFFIX}{suffix}{FIM_PREFIX}{prefix}{FIM_MIDDLE}"
