"""The store of load_inline build folders (profiler.sandbox.builds): keyed by the document's
content and the architecture, reused by the same document in later judgings of this
process, emptied when anything changed it between two runs, one run per folder at a time.
The real judgings at the end build on this machine's CPU (C++-only load_inline)."""

from __future__ import annotations

import importlib.util
import json
import os
import threading
import time
from pathlib import Path

import pytest

import profiler
from profiler.sandbox.builds import REUSE_ENV, VerifiedBuilds, process_builds

# The judging runs list their build folder into a file of tmp_path.
pytestmark = pytest.mark.usefixtures("unconfined")

_spec = importlib.util.spec_from_file_location("sandbox_cases", Path(__file__).with_name("sandbox_cases.py"))
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)


@pytest.fixture
def store():
    builds = VerifiedBuilds(max_folders=8)
    yield builds
    builds.close()


def _run(store: VerifiedBuilds, key: str, write: dict[str, str] | None = None) -> list[str]:
    """One run in the key's folder: what it found there, then what it leaves."""
    with store.folder(key) as folder:
        found = sorted(p.name for p in folder.iterdir())
        for name, text in (write or {}).items():
            (folder / name).write_text(text)
    return found


def test_the_same_document_finds_its_build_again(store):
    key = VerifiedBuilds.key("class ModelNew: ...", "9.0")
    assert key == VerifiedBuilds.key("class ModelNew: ...", "9.0")
    assert not store.known(key)
    assert _run(store, key, {"ext.so": "library"}) == []
    assert store.known(key)  # build ahead skips it: its judging run will find the build
    assert _run(store, key) == ["ext.so"]
    assert _run(store, key) == ["ext.so"]


def test_another_text_or_architecture_is_another_folder(store):
    key = VerifiedBuilds.key("class ModelNew: ...", "9.0")
    _run(store, key, {"ext.so": "library"})
    for other in (VerifiedBuilds.key("class ModelNew: ...  # edited", "9.0"),
                  VerifiedBuilds.key("class ModelNew: ...", "8.0"), VerifiedBuilds.key("class ModelNew: ...", None)):
        assert other != key
        assert _run(store, other) == []
    assert _run(store, key) == ["ext.so"]


@pytest.mark.parametrize("tamper", ["rewrite", "add", "remove", "link"])
def test_a_folder_changed_between_runs_is_emptied(store, tamper):
    key = VerifiedBuilds.key("doc", "9.0")
    _run(store, key, {"ext.so": "library", "main.o": "object"})
    folder = store.root / key
    if tamper == "rewrite":
        (folder / "ext.so").write_text("poison")
    elif tamper == "add":
        (folder / "other.so").write_text("poison")
    elif tamper == "remove":
        (folder / "main.o").unlink()
    else:
        (folder / "ext.so").unlink()
        (folder / "ext.so").symlink_to("/tmp/elsewhere.so")
    assert _run(store, key) == []  # built again from nothing


def test_a_folder_the_store_never_saw_checked_in_is_emptied(store):
    key = VerifiedBuilds.key("doc", "9.0")
    (store.root / key).mkdir()
    (store.root / key / "ext.so").write_text("left there by someone else")
    assert _run(store, key) == []


def test_the_least_recently_used_folders_go_first(store):
    store.max_folders = 3
    keys = [VerifiedBuilds.key(f"doc {i}", "9.0") for i in range(4)]
    for key in keys[:3]:
        _run(store, key, {"ext.so": key})
    _run(store, keys[0])  # used again: now the most recent
    _run(store, keys[3], {"ext.so": keys[3]})  # a fourth folder: keys[1] goes
    assert not (store.root / keys[1]).exists()
    assert [_run(store, k) for k in (keys[0], keys[2], keys[3])] == [["ext.so"]] * 3
    assert _run(store, keys[1]) == []


def test_one_folder_serves_one_run_at_a_time(store):
    key = VerifiedBuilds.key("doc", "9.0")
    inside, release, seen = threading.Event(), threading.Event(), []

    def first():
        with store.folder(key) as folder:
            (folder / "ext.so").write_text("library")
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=first)
    thread.start()
    inside.wait(10)
    second = threading.Thread(target=lambda: seen.append(_run(store, key)))
    second.start()
    time.sleep(0.3)
    assert seen == []  # waiting for the first run to end
    release.set()
    thread.join(10)
    second.join(10)
    assert seen == [["ext.so"]]  # then finds its build, verified


def test_a_fifo_left_in_a_folder_does_not_hang_its_checkin(store):
    key = VerifiedBuilds.key("doc", "9.0")
    with store.folder(key) as folder:
        os.mkfifo(folder / "pipe")  # opened to be read, it would wait for a writer forever
    assert _run(store, key) == ["pipe"]


def test_the_process_store_is_one_store():
    assert process_builds() is process_builds()


# ------------------------------------------------------------------ through judge() and profile()

def _listing(report: Path, text: str = "") -> str:
    """A candidate that records what its build folder holds when it starts, then "builds"."""
    return cases.candidate(f"""
import json, os, pathlib
ext = pathlib.Path(os.environ.get("TORCH_EXTENSIONS_DIR", ""))
with open({str(report)!r}, "a") as report:
    report.write(json.dumps(sorted(os.listdir(ext))) + "\\n")
(ext / "built.so").write_text("built by this candidate {text}")
""")


def _listings(report: Path) -> list[list[str]]:
    found = [json.loads(line) for line in report.read_text().splitlines()]
    report.unlink()
    return found


def test_a_later_judging_of_the_same_candidate_finds_its_build(tmp_path, monkeypatch):
    monkeypatch.delenv(REUSE_ENV, raising=False)
    report = tmp_path / "listings.jsonl"
    honest = _listing(report)
    profiler.judge(cases.BASELINE, [honest], "relu.py", time_limit=30.0)
    profiler.judge(cases.BASELINE, [honest], "relu.py", time_limit=30.0)
    assert _listings(report) == [[], ["built.so"]]
    edited = _listing(report, "edited")  # new content: a new folder
    profiler.judge(cases.BASELINE, [edited, honest], "relu.py", time_limit=30.0)
    assert _listings(report) == [[], ["built.so"]]


def test_without_reuse_each_judging_starts_from_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(REUSE_ENV, "0")  # how judging behaved before the process-wide store
    report = tmp_path / "listings.jsonl"
    honest = _listing(report, "no reuse")
    profiler.judge(cases.BASELINE, [honest], "relu.py", time_limit=30.0)
    profiler.judge(cases.BASELINE, [honest, honest], "relu.py", time_limit=30.0)
    assert _listings(report) == [[], [], ["built.so"]]  # reused within one call only, as before


def test_a_poisoned_folder_is_emptied_for_a_later_judging(tmp_path, monkeypatch):
    monkeypatch.delenv(REUSE_ENV, raising=False)
    report = tmp_path / "listings.jsonl"
    honest = _listing(report, "poison target")
    profiler.judge(cases.BASELINE, [honest], "relu.py", time_limit=30.0)
    profiler.judge(cases.BASELINE, [cases.candidate(POISON_EVERY_FOLDER)], "relu.py", time_limit=30.0)
    profiler.judge(cases.BASELINE, [honest], "relu.py", time_limit=30.0)
    assert _listings(report) == [[], []]  # not ["built.so", "poison.so"]: tampered with, so emptied


POISON_EVERY_FOLDER = """
import os, pathlib
ext = pathlib.Path(os.environ.get("TORCH_EXTENSIONS_DIR", ""))
for folder in [ext, *ext.parent.iterdir()]:
    if folder.is_dir():
        (folder / "poison.so").write_text("poison")
"""

# A C++-only extension: load_inline builds it with the host compiler and ninja, no GPU.
REAL_BUILD = """
import json, os
from torch.utils.cpp_extension import load_inline
from profiler.run.kernelbench import BUILDS
ext = load_inline(name="dice_store_twice", cpp_sources="int twice(int x) { return 2 * x; }", functions=["twice"])
assert ext.twice(21) == 42
with open(REPORT, "a") as report:
    report.write(json.dumps(BUILDS) + "\\n")
"""


@pytest.mark.slow
def test_a_real_build_is_built_once_across_judgings(tmp_path, monkeypatch):
    pytest.importorskip("ninja", reason="load_inline needs ninja: pip install ninja")
    monkeypatch.delenv(REUSE_ENV, raising=False)
    report = tmp_path / "builds.jsonl"
    building = cases.candidate(REAL_BUILD.replace("REPORT", repr(str(report))))
    for _ in range(2):
        (verdict,) = profiler.judge(cases.BASELINE, [building], "relu.py", time_limit=30.0)
        assert verdict.status == "no_gpu", verdict.message
    (first,), (second,) = _listings(report)
    print(first, second, sep="\n")
    assert first["cached"] is False and {"main.o", "dice_store_twice.so"} <= set(first["steps"])
    assert second["cached"] is True and second["steps"] == {}  # ninja had nothing to do
    assert second["seconds"] < first["seconds"]
