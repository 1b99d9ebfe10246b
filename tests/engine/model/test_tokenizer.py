"""engine.model.tokenizer reads tokenizer.json without transformers and must encode and decode as
transformers' fast tokenizer does on the same file."""

from __future__ import annotations

from pathlib import Path

from engine.model.loading import load_config, load_tokenizer
from engine.model.tokenizer import JsonTokenizer

BUILTIN = Path(__file__).resolve().parents[3] / "engine" / "builtin"


def _texts(repo_root: Path) -> list[str]:
    files = sorted((repo_root / "examples").rglob("*.cu")) + sorted((repo_root / "tests" / "data" / "kernelbench").rglob("*.py"))
    return [f.read_text() for f in files] + ["", " \t\n", "日本語 <|MASK|> <|fim_prefix|>x<|endoftext|>"]


def test_the_builtin_tokenizer_is_read_without_transformers():
    tokenizer = load_tokenizer(BUILTIN, load_config(BUILTIN))
    assert isinstance(tokenizer, JsonTokenizer)
    assert tokenizer.mask_token == "<|MASK|>" and tokenizer.mask_token_id == load_config(BUILTIN).mask_token_id


def test_it_encodes_and_decodes_as_transformers_does(repo_root):
    from transformers import PreTrainedTokenizerFast

    ours, theirs = JsonTokenizer.from_folder(BUILTIN), PreTrainedTokenizerFast.from_pretrained(str(BUILTIN))
    assert len(ours) == len(theirs) and ours.get_vocab() == theirs.get_vocab()
    assert ours.chat_template == theirs.chat_template
    assert [ours.decode([i]) for i in range(len(ours))] == [theirs.decode([i]) for i in range(len(theirs))]
    texts = _texts(repo_root)
    assert len(texts) > 100
    for text in texts:
        ids = ours.encode(text, add_special_tokens=False)
        assert ids == theirs.encode(text, add_special_tokens=False)
        assert ours.decode(ids, skip_special_tokens=True) == theirs.decode(ids, skip_special_tokens=True)
        assert ours.decode(ids) == theirs.decode(ids)
    lines = texts[0].splitlines()
    assert ours(lines, add_special_tokens=False)["input_ids"] == theirs(lines, add_special_tokens=False)["input_ids"]
    names = ["<|endoftext|>", "<|fim_prefix|>", "<|MASK|>"]
    assert ours.convert_tokens_to_ids(names) == theirs.convert_tokens_to_ids(names)


def test_save_pretrained_round_trips(tmp_path):
    tokenizer = JsonTokenizer.from_folder(BUILTIN)
    tokenizer.save_pretrained(str(tmp_path))
    again = JsonTokenizer.from_folder(tmp_path)
    assert again.get_vocab() == tokenizer.get_vocab() and again.mask_token == tokenizer.mask_token
    text = "__global__ void k(float* x) { x[threadIdx.x] = 0; }"
    assert again.encode(text) == tokenizer.encode(text)
