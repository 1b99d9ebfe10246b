"""Finding KernelBench-format problems in a folder for `dice bench`.

A problem is a `.py` file that defines, at module level, `class Model`, `get_inputs()` and
`get_init_inputs()` (the format of tests/data/kernelbench and of KernelBench itself). The
file is read with `ast`, never imported: importing would run arbitrary code in the bench
process, which the profiler only does inside its sandbox.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from engine.decoding.prompts import KERNELBENCH_PROBLEM_NAMES as REQUIRED_NAMES
from profiler.document import KERNELBENCH, kind_of, module_level_names

LEVEL_FOLDER = re.compile(r"^level\d+$")


@dataclass(frozen=True)
class Problem:
    name: str    # path relative to the searched folder, without ".py": unique in one run
    level: str   # "level1", "level2", ... from the nearest such folder, else "other"
    path: Path
    source: str


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str


def level_of(path: Path) -> str:
    """The innermost folder named like `level1` on the way to the file (also above the
    searched folder: `dice bench kernelbench/level1`), else "other"."""
    for part in reversed(path.parent.parts):
        if LEVEL_FOLDER.match(part):
            return part
    return "other"


def discover(root: Path) -> tuple[list[Problem], list[Skipped]]:
    """Every KernelBench-format problem under `root` (or `root` itself when it is a file),
    sorted by level then by the problem number KernelBench puts in front of the name.

    `.py` files that look like problems but cannot be read or parsed are returned as
    Skipped with the reason, so that a run reports them instead of dying on them.
    """
    root = Path(root).resolve()  # absolute: judge workers run in their own folders
    if root.is_file():
        files, base = [root], root.parent
    else:
        files, base = sorted(p for p in root.rglob("*") if kind_of(p) == KERNELBENCH and p.is_file()), root
    problems: list[Problem] = []
    skipped: list[Skipped] = []
    for path in files:
        relative = path.relative_to(base)
        if any(part.startswith(".") or part == "__pycache__" for part in relative.parts):
            continue
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            skipped.append(Skipped(path, f"cannot read: {exc}"))
            continue
        try:
            names = module_level_names(source)
        except SyntaxError as exc:
            if "class Model" in source:
                skipped.append(Skipped(path, f"syntax error line {exc.lineno}: {exc.msg}"))
            continue
        if all(name in names for name in REQUIRED_NAMES):
            name = relative.with_suffix("").as_posix()
            problems.append(Problem(name, level_of(path), path, source))
    problems.sort(key=_problem_order)
    return problems, skipped


def _problem_order(problem: Problem) -> tuple:
    """level1 before level2 before other; inside a level, 2_x before 10_x (numeric prefix)."""
    level_number = int(problem.level[5:]) if problem.level != "other" else 1 << 30
    stem = problem.path.stem
    number = int(stem.split("_", 1)[0]) if stem.split("_", 1)[0].isdigit() else 1 << 30
    return (level_number, problem.level, number, problem.name)
