"""engine.load and the Engine API on a tiny checkpoint on disk."""

from __future__ import annotations

import pytest
import torch

import engine
from engine.types import Candidate, EngineError


@pytest.fixture(scope="module")
def tiny_engine(tiny_checkpoint):
    return engine.load(str(tiny_checkpoint), device="cpu")


def test_model_gives_block_causal_logits(tiny_engine):
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    logits = tiny_engine.model(ids)
    assert logits.shape == (1, 6, 151936)
    changed = ids.clone()
    changed[0, 5] = 7  # a later block cannot change an earlier block's logits...
    assert torch.equal(tiny_engine.model(changed)[0, :4], logits[0, :4])
    changed = ids.clone()
    changed[0, 3] = 7  # ...but inside a block every position sees every other
    assert not torch.equal(tiny_engine.model(changed)[0, 0], logits[0, 0])


def test_infill_generate_optimize_return_candidates(tiny_engine):
    progress = []
    found = tiny_engine.infill("__global__ void k(float* x) {\n", "}\n", n=3, max_tokens=8, on_progress=progress.append)
    assert len(found) == 3 and all(isinstance(c, Candidate) for c in found)
    assert all(c.tokens <= 8 and c.finish_reason in ("eos", "length") and c.seconds > 0 for c in found)
    assert progress[-1].phase == "decode" and progress[-1].blocks == found[0].steps // 4 + (found[0].steps % 4 > 0)
    assert len(tiny_engine.generate("int main", n=2, max_tokens=5, temperature=1.0, seed=1)) == 2
    optimized = tiny_engine.optimize("__global__ void k(float* x) { x[0] = 1; }", n=1, max_tokens=4)
    assert len(optimized) == 1 and optimized[0].text.endswith("\n")


def test_bad_sampling_and_language_are_clear_errors(tiny_engine):
    with pytest.raises(EngineError, match="unknown sampling option"):
        tiny_engine.infill("a", "b", max_tokens=4, temprature=0.5)
    with pytest.raises(EngineError, match="unknown language"):
        tiny_engine.optimize("x", language="rust")


def test_builtin_without_weights_says_how_to_point_model(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "BUILTIN_DIR", tmp_path)
    with pytest.raises(EngineError, match="--model"):
        engine.load("builtin")


def test_unknown_spec_is_a_clear_error(tmp_path):
    with pytest.raises(EngineError, match="not a checkpoint folder"):
        engine.load(str(tmp_path / "missing"))


def test_a_chat_checkpoints_fill_keeps_no_prompt_keys(tiny_engine, monkeypatch):
    """A chat checkpoint (DICE's prompts) answers a fill in one decode: nothing of its prompt is
    copied to be reused (engine.decoding.paths.PromptKeys is the FIM fills')."""
    import engine.decoding.local

    seen = []
    decode = engine.decoding.local.decode
    monkeypatch.setattr(engine.decoding.local, "decode", lambda *a, **kw: seen.append(kw["kept"]) or decode(*a, **kw))
    assert tiny_engine.config.prompt_format != "fim"
    tiny_engine.infill("__global__ void k(float* x) {\n", "}\n", n=2, max_tokens=8, temperature=1.0, seed=0)
    assert seen == [None]
