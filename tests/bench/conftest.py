"""Fixtures for `dice bench` tests: small problem folders copied from the KernelBench subset."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

# Problems that have hand-written controls in bench/kernelbench_controls.
CONTROL_PROBLEMS = ("level1/19_ReLU.py", "level1/21_Sigmoid.py", "level2/12_Gemm_Multiply_LeakyReLU.py")


def copy_problems(kernelbench_dir: Path, target: Path, names: tuple[str, ...]) -> Path:
    for name in names:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(kernelbench_dir / name, target / name)
    return target


@pytest.fixture
def control_problems(kernelbench_dir: Path, tmp_path: Path) -> Path:
    return copy_problems(kernelbench_dir, tmp_path / "problems", CONTROL_PROBLEMS)


@pytest.fixture
def controls_dir(repo_root: Path) -> Path:
    return repo_root / "bench" / "kernelbench_controls"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, sdar_tokenizer_dir: Path) -> Path:
    """A tiny random SDAR checkpoint (the real SDAR tokenizer and chat template), written
    with the engine's own save_checkpoint so that `--model DIR` loads it like a DICE one."""
    import torch
    from engine.loading import load_tokenizer, save_checkpoint
    from engine.model import SDARConfig, SDARForCausalLM

    config = SDARConfig(vocab_size=151936, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=8192,
                        tie_word_embeddings=True, block_size=4, eos_token_id=151643)
    torch.manual_seed(0)
    model = SDARForCausalLM(config).eval()
    folder = tmp_path_factory.mktemp("tiny-sdar")
    save_checkpoint(model, load_tokenizer(sdar_tokenizer_dir, config), folder)
    return folder


@pytest.fixture
def correct_controls(controls_dir: Path, tmp_path: Path) -> Path:
    """Only the correct controls: one candidate per problem, for tests that need no pair."""
    folder = tmp_path / "correct-controls"
    for control in controls_dir.rglob("*.correct.py"):
        (folder / control.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(control, folder / control.parent.name / control.name)
    return folder
