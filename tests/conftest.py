"""Shared test fixtures and the `gpu` marker.

Tests marked `gpu` need a real CUDA device (they run on the device machine). Elsewhere they
are skipped with the reason, never faked.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


DATA = REPO / "tests" / "data"  # everything the tests read: tests/data/README.md
KERNELBENCH = DATA / "kernelbench"


def _unpack_module():
    spec = importlib.util.spec_from_file_location("test_data_unpack", DATA / "unpack.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def gpu_reason() -> str | None:
    """Why GPU tests cannot run here, or None when a CUDA device answers."""
    if shutil.which("nvidia-smi") is None:
        return "no GPU: nvidia-smi not found (GPU tests run on the device machine)"
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"no GPU: nvidia-smi failed ({exc})"
    if out.returncode != 0 or "GPU" not in out.stdout:
        return "no GPU: nvidia-smi lists no device"
    return None


def pytest_collection_modifyitems(config, items):
    reason = gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def kernelbench_dir() -> Path:
    """KernelBench level1 and level2 problems 1-50 (tests/data/kernelbench, MIT)."""
    return KERNELBENCH


@pytest.fixture(scope="session")
def sdar_tokenizer_dir(tmp_path_factory) -> Path:
    """SDAR-4B-Chat's tokenizer files and config (tests/data/sdar-tokenizer, MIT), unpacked."""
    return _unpack_module().unpack_tokenizer(tmp_path_factory.mktemp("sdar-tokenizer"))


@pytest.fixture(scope="session")
def dice_reference(tmp_path_factory, sdar_tokenizer_dir) -> Path:
    """DICE's own outputs on a tiny checkpoint (tests/data/dice-reference/README.md), with the
    checkpoint's weights drawn again and checked by sha256."""
    return _unpack_module().unpack_dice_reference(tmp_path_factory.mktemp("dice-reference"), sdar_tokenizer_dir)


def engine_test_helpers():
    """tests/engine/conftest.py's tiny-model helpers, loaded by path (conftest modules are
    not importable under --import-mode=importlib), so every suite builds the same model."""
    spec = importlib.util.spec_from_file_location("engine_test_helpers", REPO / "tests" / "engine" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_tiny_checkpoint(folder: Path, tokenizer_dir: Path, **config_extra) -> Path:
    from engine.model.loading import load_tokenizer, save_checkpoint

    helpers = engine_test_helpers()
    config = helpers.tiny_sdar_config()
    save_checkpoint(helpers.random_model(config), load_tokenizer(tokenizer_dir, config), folder)
    if config_extra:
        config_file = folder / "config.json"
        config_file.write_text(json.dumps({**json.loads(config_file.read_text()), **config_extra}))
    return folder


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory, sdar_tokenizer_dir) -> Path:
    """A tiny SDAR checkpoint folder (real tokenizer, random weights) written by
    save_checkpoint: fills are garbage, but every step runs for real, fast, on a CPU."""
    return _write_tiny_checkpoint(tmp_path_factory.mktemp("tiny-sdar"), sdar_tokenizer_dir)


@pytest.fixture(scope="session")
def tiny_fim_checkpoint(tmp_path_factory, sdar_tokenizer_dir) -> Path:
    """The same, prompted like the built-in model (fill-in-the-middle): a short prompt, so a
    CPU decodes a whole job in seconds."""
    return _write_tiny_checkpoint(tmp_path_factory.mktemp("tiny-sdar-fim"), sdar_tokenizer_dir, prompt_format="fim")


@pytest.fixture(scope="session", autouse=True)
def build_cache(tmp_path_factory):
    """load_inline builds kept on disk (where sandboxes are isolated: profiler.sandbox.builds)
    go to a folder of this test session, not to the user's cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DICE_BUILD_CACHE", str(tmp_path_factory.mktemp("build-cache")))
        yield


@pytest.fixture
def unconfined(monkeypatch):
    """Sandboxes without namespaces (DICE_SANDBOX_ISOLATION=off), for tests that watch a
    candidate from outside through what it writes (a file in tmp_path, its host pid): they
    test the keeper, the allowlisted environment and the build store, which still hold where
    a system allows no namespaces. tests/profiler/sandbox/test_isolation.py tests the namespaces."""
    monkeypatch.setenv("DICE_SANDBOX_ISOLATION", "off")
