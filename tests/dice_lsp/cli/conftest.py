from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_fim_checkpoint: Path) -> Path:
    """The CLI's jobs run on the fill-in-the-middle tiny model (short prompts)."""
    return tiny_fim_checkpoint
