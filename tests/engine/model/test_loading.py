"""Checkpoint folders: the real SDAR tokenizer files, save/load round trips, clear errors."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from engine.model.loading import config_from_json, config_to_json, load_checkpoint, load_config, load_tokenizer, save_checkpoint
from engine.types import EngineError

from tests.engine.conftest import random_model, tiny_sdar_config


def test_real_sdar_tokenizer_loads_with_its_mask_token(sdar_tokenizer_dir):
    config = load_config(sdar_tokenizer_dir)
    assert (config.hidden_size, config.num_hidden_layers, config.block_size) == (2560, 36, 4)
    assert config.mask_token_id == 151669
    assert 151645 in config.eos_token_ids  # <|im_end|>, from generation_config.json
    tokenizer = load_tokenizer(sdar_tokenizer_dir, config)
    assert tokenizer.mask_token_id == 151669
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") == 151645
    ids = tokenizer.encode("__global__ void k(float* x) { x[0] = 1.0f; }")
    assert tokenizer.decode(ids) == "__global__ void k(float* x) { x[0] = 1.0f; }"
    assert tokenizer.chat_template and "<|im_start|>" in tokenizer.chat_template


def test_config_round_trip_keeps_unknown_fields(sdar_tokenizer_dir):
    data = json.loads((sdar_tokenizer_dir / "config.json").read_text())
    config = config_from_json(data)
    again = config_from_json(config_to_json(config))
    assert config_to_json(again) == config_to_json(config)
    assert again.hidden_size == 2560 and again.rope_theta == 1_000_000
    assert config_to_json(config)["attention_dropout"] == 0.0
    assert "auto_map" not in config_to_json(config)
    assert config_to_json(config)["model_type"] == "sdar"


@pytest.mark.parametrize("shard_bytes", [1 << 40, 200_000])
def test_save_and_load_round_trip(tmp_path, sdar_tokenizer_dir, shard_bytes):
    config = tiny_sdar_config(tie_word_embeddings=False, mask_token_id=1000)
    model = random_model(config)
    tokenizer = load_tokenizer(sdar_tokenizer_dir, tiny_sdar_config())
    save_checkpoint(model, tokenizer, tmp_path, max_shard_bytes=shard_bytes)
    sharded = (tmp_path / "model.safetensors.index.json").is_file()
    assert sharded == (shard_bytes < 1 << 30)
    loaded, tok, loaded_config = load_checkpoint(tmp_path, "cpu", torch.float32)
    assert loaded_config.block_size == 4 and loaded_config.mask_token_id == 1000
    ids = torch.randint(0, 1024, (1, 9))
    with torch.no_grad():
        assert torch.equal(loaded(ids), model(ids))
    assert tok.encode("hello") == tokenizer.encode("hello")


def test_tied_checkpoint_omits_lm_head_and_stays_tied(tiny_checkpoint):
    from safetensors import safe_open

    with safe_open(str(tiny_checkpoint / "model.safetensors"), "pt") as f:
        assert "lm_head.weight" not in f.keys()
        assert "model.layers.1.self_attn.q_norm.weight" in f.keys()
    model, tokenizer, _ = load_checkpoint(tiny_checkpoint, "cpu")
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert tokenizer.mask_token_id == 151669


def test_bad_folders_give_clear_errors(tmp_path, tiny_checkpoint):
    with pytest.raises(EngineError, match="does not exist"):
        load_checkpoint(tmp_path / "nope")
    with pytest.raises(EngineError, match="config.json is missing"):
        load_checkpoint(tmp_path)
    (tmp_path / "config.json").write_text((tiny_checkpoint / "config.json").read_text())
    with pytest.raises(EngineError, match="no tokenizer"):
        load_checkpoint(tmp_path)
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json", "tokenizer.json"):
        if (tiny_checkpoint / name).is_file():
            (tmp_path / name).write_bytes((tiny_checkpoint / name).read_bytes())
    with pytest.raises(EngineError, match="no weights"):
        load_checkpoint(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["num_hidden_layers"] = 3
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").write_bytes((tiny_checkpoint / "model.safetensors").read_bytes())
    with pytest.raises(EngineError, match="do not fit the config"):
        load_checkpoint(tmp_path, "cpu")


def test_broken_files_are_engine_errors_naming_the_file(tmp_path, tiny_checkpoint):
    truncated = tmp_path / "truncated"
    shutil.copytree(tiny_checkpoint, truncated)
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100_000])  # a download cut short
    with pytest.raises(EngineError, match="model.safetensors: not a readable safetensors file"):
        load_checkpoint(truncated, "cpu")
    bad_tokenizer = tmp_path / "bad-tokenizer"
    shutil.copytree(tiny_checkpoint, bad_tokenizer)
    (bad_tokenizer / "tokenizer.json").write_text('{"version": ')
    with pytest.raises(EngineError, match="the tokenizer files cannot be read"):
        load_checkpoint(bad_tokenizer, "cpu")


def test_a_tokenizer_larger_than_the_vocabulary_is_refused_at_load(tmp_path, sdar_tokenizer_dir):
    # before: it loaded, and every job whose prompt held a token past 1023 died of IndexError
    config = tiny_sdar_config(vocab_size=1024, mask_token_id=1000)
    save_checkpoint(random_model(config), load_tokenizer(sdar_tokenizer_dir, tiny_sdar_config()), tmp_path)
    with pytest.raises(EngineError, match=r"tokenizer has 1516\d\d tokens but the model's vocab_size is 1024"):
        load_checkpoint(tmp_path, "cpu")
