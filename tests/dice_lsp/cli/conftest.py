from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_fim_checkpoint: Path) -> Path:
    """The CLI's jobs run on the fill-in-the-middle tiny model (short prompts)."""
    return tiny_fim_checkpoint


@pytest.fixture
def dice(child_env: dict[str, str]):
    """Run `dice ARGS...` as a user would, in a subprocess (`env`: another environment than
    the tests' children get)."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "dice_lsp.cli", *args]
        return subprocess.run(command, check=False, capture_output=True, text=True, timeout=timeout,
                              env=child_env if env is None else env)

    return run
