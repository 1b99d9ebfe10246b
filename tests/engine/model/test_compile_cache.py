"""engine.model.compile_cache: the compilers' caches under one persistent folder, and the
record of which fast decoding path passed its warm-up, keyed by the GPU, the model's shape,
the versions and the engine's source, read back only for the same key."""

from __future__ import annotations

import json
import os

import torch

from engine.decoding.local import LocalEngine
from engine.model import compile_cache
from engine.model.compile_cache import WarmRecords, key_digest, warm_key
from engine.model.routes import Fusion, Routing

from tests.engine.conftest import random_model, tiny_sdar_config


def key(**changes):
    config = tiny_sdar_config()
    base = warm_key(config, torch.bfloat16, "cpu", "skinny", Fusion())
    base.update(changes)
    return base


def test_an_outcome_is_read_back_for_its_key_and_no_other(tmp_path):
    records = WarmRecords(tmp_path / "warm.json")
    assert records.get(key()) is None
    records.put(key(), True, 12.5)
    assert records.get(key()) == {"ok": True, "seconds": 12.5, "reason": ""}
    # another GPU, torch version or engine source: another entry
    assert records.get(key(gpu="NVIDIA H200 sm_90")) is None
    assert records.get(key(versions={**key()["versions"], "torch": "0.0"})) is None
    assert records.get(key(source="0" * 64)) is None
    records.put(key(path="decode"), False, 3.0, "RuntimeError: x")
    assert records.get(key()) == {"ok": True, "seconds": 12.5, "reason": ""}  # kept beside the new one
    assert records.get(key(path="decode"))["ok"] is False


def test_a_corrupt_or_foreign_record_is_ignored_and_replaced(tmp_path):
    file = tmp_path / "warm.json"
    records = WarmRecords(file)
    file.write_text('{"version": 1, "entries": {')  # cut short
    assert records.get(key()) is None
    # an entry filed under this key's digest whose stored key is another's
    file.write_text(json.dumps({"version": 1, "entries": {key_digest(key()): {
        "key": key(gpu="other"), "ok": False, "seconds": 1.0, "reason": "r"}}}))
    assert records.get(key()) is None
    file.write_text(json.dumps({"version": 1, "entries": {key_digest(key()): {"key": key(), "ok": "yes",
                                                                             "seconds": 1.0, "reason": ""}}}))
    assert records.get(key()) is None  # not well formed
    file.write_text(json.dumps({"version": 99, "entries": {}}))
    assert records.get(key()) is None
    records.put(key(), True, 2.0)
    assert json.loads(file.read_text())["version"] == 1 and records.get(key())["ok"] is True


def test_the_source_hash_follows_the_kernel_source(tmp_path):
    (tmp_path / "model").mkdir()
    kernel = tmp_path / "model" / "skinny.py"
    kernel.write_text("A = 1\n")
    before = compile_cache.source_hash(("model/skinny.py",), tmp_path)
    assert compile_cache.source_hash(("model/skinny.py",), tmp_path) == before
    kernel.write_text("A = 2\n")
    assert compile_cache.source_hash(("model/skinny.py",), tmp_path) != before
    assert len(compile_cache.source_hash()) == 64  # the package's own


def test_the_compilers_caches_go_under_the_root_unless_the_user_named_them(tmp_path, monkeypatch):
    for variable in compile_cache.CACHE_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "mine"))
    in_use = compile_cache.use_persistent_caches(tmp_path / "root")
    assert in_use["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "root" / "inductor") == os.environ["TORCHINDUCTOR_CACHE_DIR"]
    assert (tmp_path / "root" / "cupy").is_dir()
    assert in_use["TRITON_CACHE_DIR"] == str(tmp_path / "mine")


def test_a_path_that_failed_here_is_not_compiled_again(tmp_path, monkeypatch):
    for variable in compile_cache.CACHE_VARIABLES:
        monkeypatch.setenv(variable, str(tmp_path / variable))
    records = WarmRecords(tmp_path / "warm.json")
    model = random_model(tiny_sdar_config())
    said: list[str] = []
    # `graphs` on a CPU fails for real (it needs a CUDA device): the engine falls back and records it
    first = LocalEngine(model, None, model.config, "tiny", Routing(path="graphs"))
    first.warm_up(said.append, records)
    assert first.decode_path == "cached" and "needs the model on a CUDA device" in said[-1]
    stored = records.get(warm_key(model.config, model.lm_head.weight.dtype, "cpu", "graphs", Fusion()))
    assert stored["ok"] is False and "CUDA device" in stored["reason"]
    said.clear()
    second = LocalEngine(model, None, model.config, "tiny", Routing(path="graphs"))
    second.warm_up(said.append, records)
    assert second.decode_path == "cached" and said == [
        f"the 'graphs' decoding path failed here before ({stored['reason']}); using 'cached'"]
