"""`dice doctor`: what this machine gives the judge, through the installed command."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from profiler.sandbox import isolation_problem


def _doctor(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dice_lsp.cli", "doctor", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


@pytest.mark.skipif(isolation_problem() is not None, reason=f"no unprivileged namespaces here: {isolation_problem()}")
def test_doctor_names_the_namespaces_candidates_run_in_network_included():
    done = _doctor("--json")
    found = json.loads(done.stdout)
    assert found["isolated"] is True and "network (no interface up, loopback included)" in found["sandbox"]
    assert done.returncode == (0 if found["gpu"] else 1)


def test_doctor_says_when_candidates_run_without_namespaces():
    done = _doctor(DICE_SANDBOX_ISOLATION="off")
    assert "candidates run in: none (DICE_SANDBOX_ISOLATION=off)" in done.stdout
    assert done.returncode == 1, "judging without isolation is not a healthy set-up"


def test_doctor_shows_the_environment_set_hides_secrets_and_names_unreadable_values():
    done = _doctor("--json", DICE_LSP_TOKEN="hunter2", DICE_ENGINE_TOKEN="swordfish", DICE_SANDBOX_POOL="many",
                   DICE_BUILD_JOBS="3")
    found = json.loads(done.stdout)
    assert {"DICE_LSP_TOKEN": "(set)", "DICE_ENGINE_TOKEN": "(set)", "DICE_BUILD_JOBS": "3"}.items() \
        <= found["environment"].items()
    assert "DICE_SANDBOX_POOL" not in found["environment"]
    assert [p.split("=")[0] for p in found["environment_problems"]] == ["DICE_SANDBOX_POOL"]
    assert "hunter2" not in done.stdout + done.stderr and "swordfish" not in done.stdout + done.stderr
