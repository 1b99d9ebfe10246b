"""The store of load_inline build folders (profiler.sandbox.builds): keyed by the document's
content and the architecture, reused by the same document in later judgings of this
process, and of later processes where sandboxes are isolated (the store on disk), emptied
when anything changed it between two runs, one run per folder at a time. The real judgings
at the end build on this machine's CPU (C++-only load_inline)."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

import profiler
from profiler.judging.problem import KernelBenchProblem
from profiler.sandbox.builds import (CACHE_ENV, DIGESTS, LOCKS, REUSE_ENV, VerifiedBuilds, persistent_root,
                                     process_builds)
from profiler.sandbox.isolation import isolation_problem

# The judging runs list their build folder into a file of tmp_path.
pytestmark = pytest.mark.usefixtures("unconfined")

_spec = importlib.util.spec_from_file_location("sandbox_cases", Path(__file__).parent.parent / "sandbox_cases.py")
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


def _deep(folder: Path, levels: int) -> None:
    """`levels` nested folders, as a candidate can make in its build folder (deeper than a
    recursive walk or shutil.rmtree can go: RecursionError)."""
    here = os.open(folder, os.O_RDONLY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=here)
            below = os.open("d", os.O_RDONLY, dir_fd=here)
            os.close(here)
            here = below
    finally:
        os.close(here)


def _sparse(folder: Path) -> None:
    with open(folder / "huge", "wb") as file:  # no blocks on disk, 2 MB to read
        file.truncate(2 << 20)


def _odd_name(folder: Path) -> None:
    Path(os.fsdecode(bytes(folder) + b"/\xff\xfe.so")).write_text("library")


@pytest.mark.parametrize("persistent", [False, True], ids=["in memory", "on disk"])
def test_a_folder_a_candidate_shaped_is_dropped_and_fails_no_other_run(tmp_path, persistent, monkeypatch):
    """Contents a candidate can leave in its own build folder: a tree 1,500 folders deep (a
    recursive walk or shutil.rmtree raises RecursionError), a sparse file past MAX_BYTES. Each
    such folder is removed at checkin, with no digest (its next run builds again), and no
    checkin raises. A name that is not UTF-8 is digested by its bytes: that folder is kept.
    Another document's build stays."""
    import profiler.sandbox.builds as builds

    monkeypatch.setattr(builds, "MAX_BYTES", 1 << 20)
    store = VerifiedBuilds(max_folders=8, root=tmp_path / "builds" if persistent else None)
    try:
        honest = VerifiedBuilds.key("honest", "9.0")
        _run(store, honest, {"ext.so": "library"})
        for name, shape, kept in (("deep", lambda f: _deep(f, 1500), False), ("sparse", _sparse, False),
                                  ("odd name", _odd_name, True)):
            key = VerifiedBuilds.key(name, "9.0")
            with store.folder(key) as folder:
                shape(folder)
            assert store.known(key) is kept, name
            assert len(_run(store, key)) == (1 if kept else 0), name
        assert _run(store, honest) == ["ext.so"]
    finally:
        store.close()


def test_a_deep_tree_is_removed(tmp_path):
    from profiler.machine.paths import remove_tree

    folder = tmp_path / "sandbox"
    folder.mkdir()
    _deep(folder, 1500)
    (folder / "locked").mkdir()
    (folder / "locked" / "file").write_text("x")
    (folder / "locked").chmod(0)
    remove_tree(folder)
    assert not folder.exists()


def test_lock_files_are_not_readable(on_disk):
    first, _ = on_disk
    key = VerifiedBuilds.key("doc", "9.0")
    _run(first, key)
    assert (first.root / LOCKS / key).stat().st_mode & 0o777 == 0o200  # a candidate cannot open it to flock


def test_the_process_store_is_one_store():
    assert process_builds() is process_builds()


# ------------------------------------------------------------------ kept on disk, across processes

@pytest.fixture
def on_disk(tmp_path):
    """Two stores on one root: what one process leaves there, as another process finds it."""
    root = tmp_path / "builds"
    return VerifiedBuilds(max_folders=8, root=root), VerifiedBuilds(max_folders=8, root=root)


HOLD = """
import fcntl, sys, time
lock = open(sys.argv[1], "a")
fcntl.flock(lock, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(120)
"""


@contextmanager
def _held_by_another_process(lock: Path):
    """`lock` flocked by a process of its own until the block ends."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        yield
    finally:
        holder.kill()
        holder.wait()


def test_a_folder_checked_in_is_found_by_another_process(on_disk):
    first, second = on_disk
    key = VerifiedBuilds.key("class ModelNew: ...", "9.0")
    library = bytes(range(256)) * 64
    with first.folder(key) as folder:
        (folder / "ext.so").write_bytes(library)
        (folder / "build").mkdir()
        (folder / "build" / "main.o").write_bytes(b"object")
    assert second.known(key)  # build ahead skips it in the other process too
    with second.folder(key) as folder:
        assert (folder / "ext.so").read_bytes() == library and (folder / "build" / "main.o").read_bytes() == b"object"
    assert not (first.root / key / DIGESTS).exists()  # the digests lie beside the folder, out of its reach
    assert (first.root / DIGESTS / key).is_file()


@pytest.mark.parametrize("tamper", ["a byte", "a file added"])
def test_a_folder_changed_between_processes_is_emptied(on_disk, tamper):
    first, second = on_disk
    key = VerifiedBuilds.key("doc", "9.0")
    _run(first, key, {"ext.so": "library", "main.o": "object"})
    if tamper == "a byte":
        with open(first.root / key / "ext.so", "r+b") as library:
            library.seek(3)
            library.write(b"X")
    else:
        (first.root / key / "other.so").write_text("poison")
    assert _run(second, key) == []  # built again from nothing


@pytest.mark.parametrize("how", ["digest removed", "never checked in"])
def test_a_folder_without_its_digest_is_emptied(on_disk, how):
    first, second = on_disk
    key = VerifiedBuilds.key("doc", "9.0")
    _run(first, key, {"ext.so": "library"})
    if how == "digest removed":
        (first.root / DIGESTS / key).unlink()
    else:  # a process that ended between checkout and checkin: its run's leftovers unverified
        (first.checkout(key) / "half.o").write_text("half a build")
    assert not second.known(key)
    assert _run(second, key) == []


def test_a_folder_another_process_holds_is_not_waited_for(on_disk):
    first, second = on_disk
    key = VerifiedBuilds.key("doc", "9.0")
    _run(first, key, {"ext.so": "library"})
    with _held_by_another_process(first.root / LOCKS / key):
        with second.folder(key, wait=False) as folder:
            assert folder is None
    with second.folder(key, wait=False) as folder:
        assert sorted(p.name for p in folder.iterdir()) == ["ext.so"]


def test_eviction_keeps_the_newest_and_what_another_process_holds(on_disk):
    first, second = on_disk
    first.max_folders = second.max_folders = 3
    keys = [VerifiedBuilds.key(f"doc {i}", "9.0") for i in range(5)]
    for i, key in enumerate(keys[:3]):
        _run((first, second)[i % 2], key, {"ext.so": key})  # checked in by either process
    with _held_by_another_process(first.root / LOCKS / keys[0]):
        _run(second, keys[3], {"ext.so": keys[3]})  # a fourth: keys[0] is the oldest, but held
        assert all((first.root / k).exists() for k in keys[:4])
    _run(first, keys[4], {"ext.so": keys[4]})  # a fifth: keys[0] and keys[1] go
    for gone in keys[:2]:
        assert not any(p.exists() for p in (first.root / gone, first.root / DIGESTS / gone, first.root / LOCKS / gone))
    assert [_run(second, k) for k in keys[2:]] == [["ext.so"]] * 3


def test_the_process_store_is_on_disk_only_where_sandboxes_are_isolated(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    unisolated = process_builds()  # DICE_SANDBOX_ISOLATION=off (unconfined): as before the store on disk
    assert not unisolated.persistent and unisolated.root.name.startswith("dice-builds-")
    assert not (tmp_path / "cache").exists()
    monkeypatch.setattr("profiler.sandbox.builds.isolation", lambda: True)
    kept = process_builds()
    assert kept.persistent and kept is process_builds()
    assert kept.root.parent == tmp_path / "cache" and kept.root.name.startswith("torch-")
    assert kept.root.name.endswith(f"-py{sys.version_info[0]}.{sys.version_info[1]}")
    monkeypatch.setenv(CACHE_ENV, "off")
    assert process_builds() is unisolated
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert persistent_root() == tmp_path / "xdg" / "dice-lsp" / "builds" / kept.root.name


def test_without_reuse_nothing_is_kept_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr("profiler.sandbox.builds.isolation", lambda: True)
    monkeypatch.setenv(REUSE_ENV, "0")
    problem = KernelBenchProblem(cases.BASELINE, "relu.py", 30.0)
    assert not problem.builds.persistent and problem.builds.root.name.startswith("dice-builds-")
    problem.close()
    assert not problem.builds.root.exists() and not (tmp_path / "cache").exists()


def test_a_cache_folder_that_cannot_be_made_warns_once(tmp_path, monkeypatch, caplog):
    (tmp_path / "cache").write_text("a file where the folder would be")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr("profiler.sandbox.builds.isolation", lambda: True)
    with caplog.at_level(logging.WARNING, logger="profiler.sandbox.builds"):
        stores = [process_builds(), process_builds()]
    assert stores[0] is stores[1] and not stores[0].persistent  # the temporary store, as before
    assert len(caplog.records) == 1 and "kept only while this process runs" in caplog.records[0].getMessage()
    key = VerifiedBuilds.key("doc", "9.0")
    _run(stores[0], key, {"ext.so": "library"})
    assert _run(stores[0], key) == ["ext.so"]


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


ACROSS_PROCESSES = """
import json
from torch.utils.cpp_extension import load_inline
from profiler.run.kernelbench import BUILDS
ext = load_inline(name="dice_store_across", cpp_sources="int twice(int x) { return 2 * x; }", functions=["twice"])
assert ext.twice(21) == 42
raise RuntimeError("builds: " + json.dumps([{"cached": b["cached"], "steps": sorted(b["steps"])} for b in BUILDS]))
"""


@pytest.mark.slow
@pytest.mark.skipif(isolation_problem() is not None, reason=f"no unprivileged namespaces here: {isolation_problem()}")
def test_a_real_build_is_built_once_across_dice_profile_commands(tmp_path):
    # `dice profile FILE` twice from the command line, sandboxes isolated.
    # An isolated candidate writes nothing outside: it says what it found in its message.
    pytest.importorskip("ninja", reason="load_inline needs ninja: pip install ninja")
    (tmp_path / "relu.py").write_text(cases.candidate(ACROSS_PROCESSES))
    env = {**os.environ, "PYTHONPATH": str(Path(profiler.__file__).parents[1]), CACHE_ENV: str(tmp_path / "cache"),
           "DICE_SANDBOX_ISOLATION": "on"}
    env.pop(REUSE_ENV, None)
    found = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "profile", "relu.py", "--json"], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=600)
        verdict = json.loads(done.stdout)
        print(verdict["message"], verdict["extra"].get("phases"))
        assert verdict["extra"]["isolation"] == "namespaces"
        found.append(json.loads(verdict["message"].split("builds: ", 1)[1].rsplit(")", 1)[0]))
    assert found[0] == [{"cached": False, "steps": ["dice_store_across.so", "main.o"]}]
    assert found[1] == [{"cached": True, "steps": []}]  # the second command loaded the first one's build
