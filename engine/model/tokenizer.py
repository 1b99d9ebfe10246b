"""A checkpoint's tokenizer.json read by the `tokenizers` library alone.

Serving needs only encode, decode, the vocabulary and the chat template, which the Rust
tokenizer gives as transformers' fast tokenizer class does (that class wraps the same
object, and transformers 5 skips its clean-up of decoded spaces for BPE tokenizers);
importing transformers for them costs most of a second of a CPU fill's start-up.
Folders with only vocab.json + merges.txt still go through transformers (engine.model.loading).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

CONFIG_NAME = "tokenizer_config.json"
TEMPLATE_NAME = "chat_template.jinja"


class JsonTokenizer:
    """The subset of transformers' PreTrainedTokenizerFast that the engine uses, with its
    meanings: ids without special tokens unless asked, decode that may skip special tokens,
    `len()` counting added tokens."""

    def __init__(self, backend: Tokenizer, config: dict[str, Any], chat_template: str | None) -> None:
        self.backend_tokenizer = backend
        self.config = config
        self.chat_template = chat_template
        self.mask_token = config.get("mask_token") if isinstance(config.get("mask_token"), str) else None

    @classmethod
    def from_folder(cls, folder: Path) -> JsonTokenizer:
        config_path = folder / CONFIG_NAME
        config = json.loads(config_path.read_text()) if config_path.is_file() else {}
        template_path = folder / TEMPLATE_NAME
        template = template_path.read_text() if template_path.is_file() else config.get("chat_template")
        return cls(Tokenizer.from_file(str(folder / "tokenizer.json")), config, template)

    @property
    def mask_token_id(self) -> int | None:
        return None if self.mask_token is None else self.backend_tokenizer.token_to_id(self.mask_token)

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    def __call__(self, texts: list[str], add_special_tokens: bool = True) -> dict[str, list[list[int]]]:
        encodings = self.backend_tokenizer.encode_batch(texts, add_special_tokens=add_special_tokens)
        return {"input_ids": [e.ids for e in encodings]}

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.backend_tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def get_vocab(self) -> dict[str, int]:
        return self.backend_tokenizer.get_vocab(with_added_tokens=True)

    def convert_ids_to_tokens(self, ids: int | list[int]) -> str | None | list[str | None]:
        if isinstance(ids, int):
            return self.backend_tokenizer.id_to_token(ids)
        return [self.backend_tokenizer.id_to_token(i) for i in ids]

    def convert_tokens_to_ids(self, tokens: str | list[str]) -> int | None | list[int | None]:
        if isinstance(tokens, str):
            return self.backend_tokenizer.token_to_id(tokens)
        return [self.backend_tokenizer.token_to_id(t) for t in tokens]

    def save_pretrained(self, folder: str) -> None:
        """tokenizer.json and tokenizer_config.json (the mask token as set), and the chat
        template where there is one: what `from_folder` and transformers read back."""
        target = Path(folder)
        target.mkdir(parents=True, exist_ok=True)
        self.backend_tokenizer.save(str(target / "tokenizer.json"))
        config = {**self.config, "mask_token": self.mask_token}
        (target / CONFIG_NAME).write_text(json.dumps(config, indent=2) + "\n")
        if self.chat_template is not None:
            (target / TEMPLATE_NAME).write_text(self.chat_template)
