"""The environment the product reads (profiler.machine.settings, and each listener's token beside the
listener): typed, read once, every variable documented in the README, and no DICE_ variable
read anywhere else."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from dice_lsp.core.config import LSP_TOKEN
from engine.serving.client import ENGINE_TOKEN
from profiler.machine import settings
from profiler.machine.settings import DEFAULT_COMPILER_MEMORY, Environment

REPO = Path(__file__).resolve().parents[3]
# Each token is read beside the listener that asks for it; every other variable in settings.py.
TOKEN_HOMES = {LSP_TOKEN: "dice_lsp/core/config.py", ENGINE_TOKEN: "engine/serving/client.py"}
# The engine's own (it imports nothing of the profiler): where its compilers' caches and its
# warm-up record are kept, read beside the code that keeps them.
TOKEN_HOMES |= {"DICE_COMPILE_CACHE": "engine/model/compile_cache.py", "DICE_WARM_RECORD": "engine/model/compile_cache.py"}
# Names the product sets for its own child processes, never read as a user's setting.
INTERNAL = {"DICE_SANDBOX_MARKER", "DICE_BUILDERS_DIR"}


def test_nothing_set_gives_the_defaults():
    assert Environment.read({}) == Environment()
    assert Environment.read({}).problems == ()
    assert Environment().compiler_memory == DEFAULT_COMPILER_MEMORY
    assert Environment().shown() == []


def test_values_are_typed():
    env = Environment.read({
        "DICE_CACHE_DIR": "~/verdicts", "DICE_SANDBOX_POOL": "20", "DICE_COMPILER_MEMORY": "4096M",
        "DICE_BUILD_JOBS": "3", "DICE_BUILD_CACHE": "OFF", "DICE_REUSE_BUILDS": "0",
        "DICE_SANDBOX_ISOLATION": " On ",
    })
    assert env.cache_dir == Path("~/verdicts").expanduser()
    assert env.sandbox_pool == settings.MAX_SANDBOX_POOL  # clamped
    assert env.compiler_memory == 4096 << 20
    assert env.build_jobs == 3 and env.build_cache == "off" and env.reuse_builds is False
    assert env.sandbox_isolation == "on"
    assert Environment.read({"DICE_COMPILER_MEMORY": "off"}).compiler_memory is None


def test_a_value_that_cannot_be_read_keeps_its_default_and_says_so():
    env = Environment.read({"DICE_SANDBOX_POOL": "many", "DICE_COMPILER_MEMORY": "3", "DICE_BUILD_JOBS": "two"})
    assert (env.sandbox_pool, env.compiler_memory, env.build_jobs) == (
        settings.DEFAULT_SANDBOX_POOL, DEFAULT_COMPILER_MEMORY, None)
    assert [p.split("=")[0] for p in env.problems] == ["DICE_SANDBOX_POOL", "DICE_COMPILER_MEMORY", "DICE_BUILD_JOBS"]
    assert "using the default" in env.problems[0]


def test_shown_lists_what_differs_from_the_defaults():
    env = Environment.read({"DICE_SANDBOX_POOL": "2", "DICE_REUSE_BUILDS": "1"})
    assert dict(env.shown()) == {"DICE_SANDBOX_POOL": "2"}


def test_read_once_and_again_only_when_a_variable_changes(monkeypatch):
    monkeypatch.setenv("DICE_SANDBOX_POOL", "1")
    first = settings.current()
    assert first.sandbox_pool == 1 and settings.current() is first
    monkeypatch.setenv("DICE_SANDBOX_POOL", "3")
    assert settings.current().sandbox_pool == 3


def _dice_names_read(path: Path) -> set[str]:
    """DICE_ names that a file names as string constants (an environment read goes through one)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"DICE_[A-Z0-9_]+", node.value):
            found.add(node.value)
    return found


def test_no_other_product_module_reads_a_dice_variable():
    own = {REPO / "profiler" / "machine" / "settings.py": {v.name for v in settings.VARIABLES}}
    for name, home in TOKEN_HOMES.items():
        own.setdefault(REPO / home, set()).add(name)
    elsewhere = {}
    for package in ("dice_lsp", "engine", "profiler"):
        for path in (REPO / package).rglob("*.py"):
            names = _dice_names_read(path) - INTERNAL - own.get(path, set())
            if names:
                elsewhere[str(path.relative_to(REPO))] = sorted(names)
    assert elsewhere == {}
    assert all(_dice_names_read(path) >= names for path, names in own.items())


def test_the_readme_table_lists_every_variable_and_no_other():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `(DICE_[A-Z0-9_]+)`", readme, flags=re.M))
    assert table == {v.name for v in settings.VARIABLES} | set(TOKEN_HOMES)
    assert all(f"`{name}`" in readme for name in INTERNAL)  # named, as set by dice itself
