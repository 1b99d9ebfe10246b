"""Candidates read from files instead of a model: `dice bench DIR --solutions SOLDIR`.

Controls (hand-written correct and wrong ModelNew files) and answers saved from another
system are judged exactly like model candidates. A file is a candidate for the problem
whose file name it extends: `19_ReLU.py`, `19_ReLU.correct.py` and `19_ReLU.wrong.py`
(anywhere under SOLDIR) are candidates for the problem `.../19_ReLU.py`. Each holds the
code that defines ModelNew, as the engine would answer it; it is spliced into the problem.
"""

from __future__ import annotations

from pathlib import Path


def solution_files(folder: Path) -> dict[str, list[Path]]:
    """Solution files by the problem file stem they belong to (text before the first dot)."""
    by_stem: dict[str, list[Path]] = {}
    for path in sorted(Path(folder).rglob("*.py")):
        # Hidden folders and caches below FOLDER are skipped; the parts above it are the
        # user's business (a checkout under ~/.work or a .venv-style folder is fine).
        below = path.relative_to(folder).parts
        if any(part.startswith(".") or part == "__pycache__" for part in below):
            continue
        by_stem.setdefault(path.name.split(".", 1)[0], []).append(path)
    return by_stem


def candidates_for(problem_path: str, solutions: dict[str, list[Path]]) -> list[Path]:
    return solutions.get(Path(problem_path).name.split(".", 1)[0], [])


def correct_control(problem_path: str, solutions: dict[str, list[Path]]) -> Path | None:
    """The problem's first hand-written correct control (`STEM.correct.py`), if it has one."""
    return next((p for p in candidates_for(problem_path, solutions) if ".correct." in p.name), None)
