"""Models by their Hugging Face Hub id (engine.model.hub), offline, from a cache laid out by
huggingface_hub's own functions: `dice fill --model ORG/NAME` and `engine.load("ORG/NAME")`
with HF_HUB_OFFLINE=1, and the messages for a name that is not there or not a checkpoint."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SAXPY = (REPO / "examples" / "saxpy.cu").read_text()
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def cache_repo(cache: Path, repo_id: str, folder: Path) -> None:
    """Put `folder`'s files in the Hugging Face cache `cache` as a download of `repo_id` at
    revision main would: blobs by content hash, a snapshot of links, refs/main."""
    from huggingface_hub.file_download import (
        _cache_commit_hash_for_specific_revision,
        _create_symlink,
        _get_pointer_path,
        repo_folder_name,
    )

    storage = cache / repo_folder_name(repo_id=repo_id, repo_type="model")
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        blob = storage / "blobs" / hashlib.sha256(file.read_bytes()).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(file, blob)
        pointer = Path(_get_pointer_path(str(storage), COMMIT, file.relative_to(folder).as_posix()))
        pointer.parent.mkdir(parents=True, exist_ok=True)
        _create_symlink(str(blob), str(pointer), new_blob=False)
    _cache_commit_hash_for_specific_revision(str(storage), "main", COMMIT)


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory, tiny_fim_checkpoint: Path) -> Path:
    from huggingface_hub import scan_cache_dir

    cache = tmp_path_factory.mktemp("hf-cache")
    cache_repo(cache, "dice-test/tiny-sdar", tiny_fim_checkpoint)
    llama = tmp_path_factory.mktemp("llama")
    shutil.copytree(tiny_fim_checkpoint, llama, dirs_exist_ok=True)
    config = json.loads((llama / "config.json").read_text())
    (llama / "config.json").write_text(json.dumps({**config, "model_type": "llama"}))
    cache_repo(cache, "dice-test/a-llama", llama)
    # huggingface_hub itself reads the layout back: both repositories, every file.
    repos = {r.repo_id: r for r in scan_cache_dir(cache).repos}
    assert set(repos) == {"dice-test/tiny-sdar", "dice-test/a-llama"}
    assert {f.file_name for f in next(iter(repos["dice-test/tiny-sdar"].revisions)).files} >= {"config.json", "model.safetensors"}
    return cache


@pytest.fixture
def offline_env(child_env: dict[str, str], hub_cache: Path) -> dict[str, str]:
    return {**child_env, "HF_HUB_CACHE": str(hub_cache), "HF_HUB_OFFLINE": "1"}


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)


def test_dice_fill_takes_a_hub_id_from_the_cache_offline(tmp_path: Path, offline_env):
    path = tmp_path / "saxpy.cu"
    path.write_text(SAXPY)
    done = run([sys.executable, "-m", "dice_lsp.cli", "fill", str(path), "--range", "12:9-12:32", "--candidates", "1",
                "--max-tokens", "8", "--model", "dice-test/tiny-sdar", "--json"], offline_env)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert len(answer["candidates"]) == 1 and answer["candidates"][0]["text"] is not None


def test_engine_load_takes_a_hub_id(offline_env):
    code = "import engine; print(engine.load('dice-test/tiny-sdar', device='cpu').info().name)"
    done = run([sys.executable, "-c", code], offline_env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "dice-test/tiny-sdar"


@pytest.mark.parametrize(("model", "message"), [
    ("dice-test/not-there", "dice-test/not-there: no such folder here, and not in the Hugging Face cache ("),
    ("dice-test/a-llama", "is not an SDAR/DICE checkpoint (its config.json says model_type 'llama'"),
])
def test_a_hub_id_that_cannot_be_used_says_why(tmp_path: Path, offline_env, model: str, message: str):
    path = tmp_path / "saxpy.cu"
    path.write_text(SAXPY)
    done = run([sys.executable, "-m", "dice_lsp.cli", "fill", str(path), "--range", "12:9-12:32", "--model", model],
               offline_env)
    assert done.returncode == 1
    assert message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture
def unreachable_env(child_env: dict[str, str], hub_cache: Path) -> dict[str, str]:
    """No HF_HUB_OFFLINE, and a Hub whose address refuses connections (a closed loopback port):
    a machine whose network does not reach the Hub."""
    env = {k: v for k, v in child_env.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
           and "proxy" not in k.lower()}
    return {**env, "HF_HUB_CACHE": str(hub_cache), "HF_ENDPOINT": "http://127.0.0.1:9"}


def test_an_unreachable_hub_is_one_line_and_the_cache_still_serves(tmp_path: Path, unreachable_env):
    path = tmp_path / "saxpy.cu"
    path.write_text(SAXPY)
    done = run([sys.executable, "-m", "dice_lsp.cli", "fill", str(path), "--range", "12:9-12:32",
                "--model", "dice-test/not-there"], unreachable_env)
    assert done.returncode == 1
    first = done.stderr.splitlines()[0]
    assert first == (f"dice fill: the model 'dice-test/not-there' failed: dice-test/not-there: no such folder here, "
                     f"and not in the Hugging Face cache ({unreachable_env['HF_HUB_CACHE']}), and the Hub cannot be "
                     "reached (127.0.0.1:9: Connection refused); download it once online, or pass a checkpoint folder")
    assert "Retry" not in done.stderr and len(done.stderr.splitlines()) == 2  # the message, then --model's choices
    done = run([sys.executable, "-m", "dice_lsp.cli", "fill", str(path), "--range", "12:9-12:32", "--candidates", "1",
                "--max-tokens", "8", "--model", "dice-test/tiny-sdar", "--json"], unreachable_env)
    assert done.returncode == 0, done.stderr
    assert "Retry" not in done.stderr
