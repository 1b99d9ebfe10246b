"""Proof that engine.model.sdar is SDAR, not a look-alike: on the same random weights, written by
transformers as a (sharded) checkpoint and loaded through engine.model.loading, the logits equal
transformers' own Qwen3ForCausalLM, causal with block_size=1 and under the equivalent 4-D
block-causal mask with block_size=4."""

from __future__ import annotations

import json

import pytest
import torch

from engine.model.loading import load_checkpoint
from engine.model.sdar import block_causal_mask

from tests.engine.conftest import copy_tokenizer

# The SDAR tokenizer's 151670 tokens must fit the embedding table (engine.model.loading refuses a
# tokenizer larger than the vocabulary); the test ids stay below 512.
VOCAB = 151680


def qwen3_checkpoint(folder, sdar_tokenizer_dir, block_size: int, tied: bool):
    """A random Qwen3 saved by transformers in shards, relabelled as an SDAR config."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(1)
    config = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        rope_theta=1_000_000.0,
        max_position_embeddings=512,
        tie_word_embeddings=tied,
    )
    reference = Qwen3ForCausalLM(config).eval()
    with torch.no_grad():
        for p in reference.parameters():
            p.normal_(0.0, 0.3)
    reference.save_pretrained(folder, max_shard_size="8MB")
    data = json.loads((folder / "config.json").read_text())
    data.update(model_type="sdar", block_size=block_size, mask_token_id=151669)
    (folder / "config.json").write_text(json.dumps(data))
    copy_tokenizer(sdar_tokenizer_dir, folder)
    return reference


@pytest.mark.parametrize("tied", [False, True])
def test_block_size_1_equals_qwen3_causal(tmp_path, sdar_tokenizer_dir, tied):
    reference = qwen3_checkpoint(tmp_path, sdar_tokenizer_dir, block_size=1, tied=tied)
    assert (tmp_path / "model.safetensors.index.json").is_file()  # the sharded path was used
    model, _, config = load_checkpoint(tmp_path, "cpu", torch.float32)
    assert config.block_size == 1
    ids = torch.randint(0, 512, (2, 37), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        diff = (model(ids) - reference(ids).logits).abs().max().item()
    assert diff < 1e-4


def test_block_size_4_equals_qwen3_with_block_causal_mask(tmp_path, sdar_tokenizer_dir):
    reference = qwen3_checkpoint(tmp_path, sdar_tokenizer_dir, block_size=4, tied=False)
    model, _, _ = load_checkpoint(tmp_path, "cpu", torch.float32)
    t = 30  # not a multiple of 4: the last block is partial
    ids = torch.randint(0, 512, (2, t), generator=torch.Generator().manual_seed(0))
    positions = torch.arange(t)
    mask = block_causal_mask(positions, positions, 4).expand(2, 1, t, t)
    # The mask is the block-causal one (bidirectional inside a block), not plain causal.
    assert mask[0, 0, 0, 3] and not mask[0, 0, 3, 4] and mask[0, 0, 29, 28] and not mask[0, 0, 27, 28]
    with torch.no_grad():
        ours = model(ids)
        diff = (ours - reference(ids, attention_mask=mask).logits).abs().max().item()
        causal_diff = (ours - reference(ids).logits).abs().max().item()
    assert diff < 1e-4
    assert causal_diff > 1e-2  # the comparison can tell block-causal from causal


def test_explicit_mask_and_positions_replace_the_default(tmp_path, sdar_tokenizer_dir):
    """The trainer's interface: attn_mask [T, S] and position_ids override the defaults."""
    reference = qwen3_checkpoint(tmp_path, sdar_tokenizer_dir, block_size=4, tied=False)
    model, _, _ = load_checkpoint(tmp_path, "cpu", torch.float32)
    ids = torch.randint(0, 512, (1, 12), generator=torch.Generator().manual_seed(2))
    causal = torch.ones(12, 12, dtype=torch.bool).tril()
    with torch.no_grad():
        diff = (model(ids, attn_mask=causal) - reference(ids).logits).abs().max().item()
        shifted = model(ids, position_ids=torch.arange(5, 17))
        # Blocks follow absolute positions: 5..7 | 8..11 | 12..15 | 16.
        shifted_mask = block_causal_mask(torch.arange(5, 17), torch.arange(5, 17), 4)
        shifted_ref = reference(ids, position_ids=torch.arange(5, 17)[None], attention_mask=shifted_mask).logits
    assert diff < 1e-4
    assert (shifted - shifted_ref).abs().max().item() < 1e-4


def test_stacked_projections_change_nothing_but_the_matmuls(tmp_path, sdar_tokenizer_dir):
    """The model's qkv_proj and gate_up_proj hold the checkpoint's q/k/v and gate/up rows, and
    give them back under the checkpoint's names (what save_checkpoint writes)."""
    from engine.model.loading import checkpoint_weights

    reference = qwen3_checkpoint(tmp_path, sdar_tokenizer_dir, block_size=1, tied=False)
    model, _, _ = load_checkpoint(tmp_path, "cpu", torch.float32)
    before = reference.state_dict()
    after = checkpoint_weights(model)
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)
    attn = reference.model.layers[0].self_attn
    stacked = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
    assert torch.equal(model.model.layers[0].self_attn.qkv_proj.weight, stacked)
    ids = torch.randint(0, 512, (2, 21), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (model(ids) - reference(ids).logits).abs().max().item() < 1e-4


@pytest.mark.parametrize(
    "scaling, length",
    [
        ({"rope_type": "linear", "factor": 4.0}, 37),
        ({"rope_type": "dynamic", "factor": 2.0}, 37),  # past max_position_embeddings (32): the base grows
        ({"rope_type": "dynamic", "factor": 2.0}, 20),  # within it: plain RoPE
        ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8}, 37),
        ({"rope_type": "yarn", "factor": 8.0, "beta_fast": 16, "beta_slow": 2, "attention_factor": 0.9}, 37),
    ],
)
def test_rope_scaling_equals_qwen3(tmp_path, sdar_tokenizer_dir, scaling, length):
    """Each rope_scaling type against transformers' Qwen3 with that config, on the same
    random weights loaded through engine.model.loading (logits far apart without the scaling)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(2)
    config = Qwen3Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=32,
                         rope_parameters={"rope_theta": 10_000.0, **scaling})
    reference = Qwen3ForCausalLM(config).eval()
    with torch.no_grad():
        for p in reference.parameters():
            p.normal_(0.0, 0.3)
    reference.save_pretrained(tmp_path)
    data = json.loads((tmp_path / "config.json").read_text())
    data.update(model_type="sdar", block_size=1, mask_token_id=151669)
    (tmp_path / "config.json").write_text(json.dumps(data))
    copy_tokenizer(sdar_tokenizer_dir, tmp_path)
    model, _, loaded = load_checkpoint(tmp_path, "cpu", torch.float32)
    assert loaded.rope_scaling["rope_type"] == scaling["rope_type"]
    ids = torch.randint(0, 512, (1, length), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = reference(ids).logits
        assert (model(ids) - expected).abs().max().item() < 1e-4
        loaded.rope_scaling = None  # the same weights without the scaling: far off
        unscaled = (model(ids) - expected).abs().max().item()
    assert unscaled > 1e-2 or (scaling["rope_type"] == "dynamic" and length <= 32)


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("rope_scaling", {"rope_type": "llama3", "factor": 8.0}, "rope_type = 'llama3'"),
        ("rope_scaling", {"rope_type": "linear"}, "without a factor"),
        ("hidden_act", "gelu", "hidden_act = 'gelu'"),
        ("attention_bias", True, "attention_bias"),
        ("use_sliding_window", True, "use_sliding_window"),
        ("layer_types", ["full_attention", "sliding_attention"], "layer_types"),
    ],
)
def test_config_keys_the_model_does_not_implement_are_refused(tmp_path, sdar_tokenizer_dir, key, value, message):
    from engine.types import EngineError

    qwen3_checkpoint(tmp_path, sdar_tokenizer_dir, block_size=4, tied=True)
    data = json.loads((tmp_path / "config.json").read_text())
    data[key] = value
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(EngineError, match=message.replace("(", r"\(")):
        load_checkpoint(tmp_path, "cpu", torch.float32)
