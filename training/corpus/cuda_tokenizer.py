"""The built-in model's tokenizer: a small byte-level BPE trained on the CUDA corpus.

Its pipeline (NFC, Qwen2's pre-tokenizer regex, byte-level BPE) is exactly the one that
transformers' Qwen2 tokenizer class builds around a vocabulary and merges, so the built-in
checkpoint tokenizes the same through engine.model.loading (which loads every checkpoint with
that class, as DICE's Qwen2 tokenizer needs) and through AutoTokenizer.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import (
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    trainers,
)
from transformers import PreTrainedTokenizerFast

EOS = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
MASK = "<|MASK|>"
SPECIAL_TOKENS = [EOS, FIM_PREFIX, FIM_MIDDLE, FIM_SUFFIX, MASK]   # ids 0..4

# transformers.models.qwen2.tokenization_qwen2.PRETOKENIZE_REGEX
QWEN2_PRETOKENIZE = Regex(
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def build_tokenizer(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(QWEN2_PRETOKENIZE, behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return tok


def save_tokenizer(tok: Tokenizer, folder: Path) -> None:
    """tokenizer.json + tokenizer_config.json + special_tokens_map.json, loadable with
    transformers' AutoTokenizer / PreTrainedTokenizerFast.from_pretrained(folder)."""
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOS, pad_token=EOS, mask_token=MASK,
        additional_special_tokens=[FIM_PREFIX, FIM_MIDDLE, FIM_SUFFIX],
        model_max_length=4096,
    )
    fast.save_pretrained(str(folder))
