"""The sandbox kept for a document's next run after a profile (profiler.sandbox.spare), on
the CPU with real sandboxes in namespaces: the next run of that document takes it (started
earlier, as its process record shows), and a run whose build folder is not the directory the
spare was started on, or with another time limit, starts a fresh sandbox instead."""

from __future__ import annotations

import pytest

from profiler.judging.kernelbench import kernelbench_request, run_in_build_folder
from profiler.machine.paths import remove_tree
from profiler.sandbox import pool
from profiler.sandbox.builds import VerifiedBuilds
from profiler.sandbox.isolation import isolation_problem
from profiler.sandbox.spare import DOCUMENT_SPARE

DOCUMENT = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp_min(x, 0.0)


def get_inputs():
    return [torch.randn(1024)]


def get_init_inputs():
    return []
"""
PATH = "relu_spare.py"


@pytest.fixture
def builds(monkeypatch):
    if isolation_problem() is not None:
        pytest.skip(f"no namespaces here ({isolation_problem()}): no spares are kept")
    monkeypatch.setenv(pool.POOL_ENV, "2")
    monkeypatch.delenv("DICE_SANDBOX_ISOLATION", raising=False)
    store = VerifiedBuilds()
    yield store
    DOCUMENT_SPARE.drop()
    store.close()


def _run(builds: VerifiedBuilds, time_limit: float = 60.0):
    request = kernelbench_request(DOCUMENT, DOCUMENT, PATH, time_limit)
    return run_in_build_folder(request, DOCUMENT, builds, time_limit, None)


def _warmed(outcome) -> bool:
    """The run came from a spare: its process warmed up before its request."""
    return any(name == "warm-up" for name, _ in outcome.result.get("phase_seconds", []))


def _keep(builds: VerifiedBuilds, time_limit: float = 60.0) -> str:
    key = VerifiedBuilds.key(DOCUMENT, None)  # no GPU here: no architecture
    with builds.folder(key):
        pass  # the folder exists, as after a profile
    assert DOCUMENT_SPARE.keep(key, builds.root / key, time_limit)
    return key


def test_the_next_run_of_the_document_takes_the_spare(builds):
    _keep(builds)
    first = _run(builds)
    assert first.status == "ok" and first.isolation == "namespaces"
    assert _warmed(first)  # started at keep(), torch imported before its request
    again = _run(builds)  # nothing kept any more: a fresh sandbox
    assert again.status == "ok" and not _warmed(again)


def test_a_folder_made_again_meanwhile_is_not_run_by_the_spare(builds):
    key = _keep(builds)
    remove_tree(builds.root / key)  # as checkout does to a folder whose digest does not match
    (builds.root / key).mkdir()
    outcome = _run(builds)
    assert outcome.status == "ok" and not _warmed(outcome)


def test_a_spare_never_brings_back_a_folder_removed_under_it(builds):
    key = _keep(builds)
    remove_tree(builds.root / key)  # perhaps before the spare's thread has started its sandbox
    DOCUMENT_SPARE._kept._launched.wait(60.0)
    assert not (builds.root / key).exists()


def test_a_sandbox_is_not_started_on_a_build_folder_that_is_gone(tmp_path):
    from profiler.sandbox import start_harness

    with pytest.raises(FileNotFoundError, match="is gone"):
        start_harness(60.0, extensions=tmp_path / "removed")
    assert not (tmp_path / "removed").exists()


def test_another_time_limit_starts_fresh(builds):
    _keep(builds, time_limit=60.0)
    outcome = _run(builds, time_limit=30.0)
    assert outcome.status == "ok" and not _warmed(outcome)


def test_no_spare_without_the_pool(builds, monkeypatch):
    monkeypatch.setenv(pool.POOL_ENV, "0")
    key = VerifiedBuilds.key(DOCUMENT, None)
    with builds.folder(key):
        pass
    assert not DOCUMENT_SPARE.keep(key, builds.root / key, 60.0)
