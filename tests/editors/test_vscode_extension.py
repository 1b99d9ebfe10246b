"""The VS Code extension without VS Code: its node unit tests, its build, and its manifest
checked against the server's own settings (names, defaults, accepted values)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from dice_lsp.core.config import _FIELDS, STRATEGIES, Settings

EXTENSION = Path(__file__).resolve().parents[2] / "editors" / "vscode"
MANIFEST = json.loads((EXTENSION / "package.json").read_text())
PROPERTIES = MANIFEST["contributes"]["configuration"]["properties"]
CLIENT_SETTINGS = {"serverPath", "interpreter", "tcp", "tokenFile"}  # the extension's own; never sent to the server


@pytest.fixture(scope="module")
def npm() -> str:
    found = shutil.which("npm")
    if found is None:
        pytest.skip("npm not found (Node 20+ runs the extension's unit tests)")
    if not (EXTENSION / "node_modules").is_dir():
        pytest.skip("editors/vscode/node_modules missing: npm ci --prefix editors/vscode")
    return found


def test_node_unit_tests_pass(npm):
    run = subprocess.run([npm, "test"], cwd=EXTENSION, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "# fail 0" in run.stdout
    tests = int(next(line for line in run.stdout.splitlines() if line.startswith("# tests ")).split()[2])
    assert tests >= 20, run.stdout[-2000:]


def test_bundle_builds(npm, tmp_path):
    run = subprocess.run([npm, "run", "build"], cwd=EXTENSION, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    bundle = (EXTENSION / "dist" / "extension.js").read_text()
    assert "exports.activate" in bundle or "activate:" in bundle
    assert 'require("vscode")' in bundle  # provided by VS Code, never bundled


def test_every_server_setting_is_contributed_with_the_server_default():
    defaults = dataclasses.asdict(Settings())
    server_keys = set(_FIELDS)
    contributed = {key.removeprefix("dice.") for key in PROPERTIES}
    assert contributed == server_keys | CLIENT_SETTINGS
    for key, field in _FIELDS.items():
        prop = PROPERTIES[f"dice.{key}"]
        assert prop["default"] == defaults[field.attr], key
        assert prop.get("description") or prop.get("markdownDescription"), key
        # VS Code's own check of the default must agree with the server's.
        assert field.valid(prop["default"]), key


def test_strategy_choices_match_the_server():
    assert PROPERTIES["dice.strategy"]["enum"] == list(STRATEGIES)


def test_bounds_in_the_manifest_are_accepted_by_the_server():
    for key, field in _FIELDS.items():
        prop = PROPERTIES[f"dice.{key}"]
        for bound in ("minimum", "maximum"):
            if bound in prop:
                value = prop[bound]
                assert field.valid(value), f"dice.{key} {bound} {value} is rejected by the server"


def test_commands_and_activation():
    commands = {c["command"]: c["title"] for c in MANIFEST["contributes"]["commands"]}
    assert commands == {
        "dice.fillSelection": "Fill Selection",
        "dice.optimizeKernel": "Optimize Kernel",
        "dice.profileKernel": "Profile Kernel",
        "dice.restartServer": "Restart Server",
        "dice.showOutput": "Show Output",
        "dice.openBenchReport": "Open bench report",
    }
    # The server's command ids are registered by the language client itself: no clash.
    assert not set(commands) & {"dice.fill", "dice.optimize", "dice.profile", "dice.applyCandidate", "dice.cancel"}
    assert set(MANIFEST["activationEvents"]) == {"onLanguage:cuda-cpp", "onLanguage:python"}
    assert MANIFEST["dependencies"]["vscode-languageclient"].startswith("^9.")
