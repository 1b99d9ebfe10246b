"""Every name the docs give exists: each DICE_ environment variable in README.md and docs/*.md
is used by the code, each repository path they name (`profiler/source/spec.py`, `engine/serving/`, a
link to another page) is in the tree, and each module they name (`engine.model.sdar`, with an
attribute: `engine.model.routes.Routing`) is a module of the project that defines it. Read from
whatever the docs say and whatever the tree holds, so moving a file or a page keeps it true
as long as the docs move with it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("dice_lsp", "engine", "profiler")
CODE_SUFFIXES = {".py", ".ts", ".js", ".lua", ".sh", ".toml", ".json", ".yml", ".yaml", ".cfg", ".txt", ""}
SKIPPED_FOLDERS = {".git", "node_modules", ".venv", "docs", "__pycache__"}

_VARIABLE = re.compile(r"\bDICE_[A-Z0-9_]*[A-Z0-9]\b")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
_PATH = re.compile(r"[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+/?")
_MODULE = re.compile(r"\b(?:%s)(?:\.[A-Za-z_][A-Za-z0-9_]*)+" % "|".join(PACKAGES))


def doc_pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def code_files() -> list[Path]:
    files = []
    for path in REPO.rglob("*"):
        parts = set(path.relative_to(REPO).parts)
        # Not this file: the names in its own example would count as used.
        if path.is_file() and not parts & SKIPPED_FOLDERS and path.suffix in CODE_SUFFIXES and path != Path(__file__):
            files.append(path)
    return files


def variables_in(text: str) -> set[str]:
    return set(_VARIABLE.findall(text))


def repo_paths_in(text: str, top_level: set[str]) -> set[str]:
    """Paths in code spans whose first part is a top-level entry of the repository (so
    `$XDG_RUNTIME_DIR/dice-lsp/tcp/PORT.token` or a package-relative `model/sdar.py` is not
    one), without a trailing `:LINE` or punctuation."""
    found = set()
    for span in _CODE_SPAN.findall(text):
        for word in span.split():
            match = _PATH.fullmatch(word.rstrip(".,;:)").split(":")[0].lstrip("("))
            if match and match.group(0).split("/")[0] in top_level:
                found.add(match.group(0))
    return found


def built_here(path: str) -> bool:
    """Whether `path` is something a build makes (git ignores it): the docs say how to make it."""
    return subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO).returncode == 0


def links_in(text: str) -> set[str]:
    return {target for target in _LINK.findall(text) if "://" not in target and not target.startswith("mailto:")}


def modules_in(text: str) -> set[str]:
    return {m.rstrip(".") for span in _CODE_SPAN.findall(text) for m in _MODULE.findall(span)}


def module_problem(dotted: str) -> str | None:
    """None when `dotted` is a module of the tree, or a module and names it defines; else why not."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:cut])
        source = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if source.is_file():
            break
    else:
        return f"{dotted}: no such module"
    rest = parts[cut:]
    text = source.read_text(encoding="utf-8")
    for name in rest[:1]:  # the attribute of the module; what follows is that attribute's own
        if not re.search(rf"^\s*(?:def|class|async def)\s+{name}\b|^\s*{name}\s*[:=]|\bimport\b.*\b{name}\b|^\s+self\.{name}\b",
                         text, re.M):
            return f"{dotted}: {source.relative_to(REPO)} defines no {name}"
    return None


def test_the_finders_read_what_the_docs_write():
    text = ("Set `DICE_SANDBOX_POOL=2`; see `profiler/source/spec.py:40`, (`engine/serving/`), "
            "[the page](docs/editors.md#vs-code), `engine.model.routes.Routing`, "
            "`$XDG_RUNTIME_DIR/dice-lsp/tcp/PORT.token`, `model/sdar.py`.")
    assert variables_in(text) == {"DICE_SANDBOX_POOL"}
    assert repo_paths_in(text, {"profiler", "engine", "docs"}) == {"profiler/source/spec.py", "engine/serving/"}
    assert links_in(text) == {"docs/editors.md"}
    assert modules_in(text) == {"engine.model.routes.Routing"}
    assert module_problem("engine.model.routes.Routing") is None
    assert module_problem("engine.model.sdar") is None
    assert module_problem("engine.model.no_such_module") is not None
    assert module_problem("engine.model.routes.NoSuchName") is not None
    assert built_here("editors/vscode/dice-lsp.vsix") and not built_here("profiler/no_such_module.py")


def test_every_variable_the_docs_name_is_used_by_the_code():
    used = set()
    for path in code_files():
        used |= variables_in(path.read_text(encoding="utf-8", errors="replace"))
    missing = {f"{page.relative_to(REPO)}: {name}" for page in doc_pages()
               for name in variables_in(page.read_text(encoding="utf-8")) - used}
    assert used and sorted(missing) == []


def test_every_repository_path_the_docs_name_exists():
    top_level = {p.name for p in REPO.iterdir()}
    missing = []
    for page in doc_pages():
        text = page.read_text(encoding="utf-8")
        missing += [f"{page.relative_to(REPO)}: {p}" for p in sorted(repo_paths_in(text, top_level))
                    if not (REPO / p).exists() and not built_here(p)]
        missing += [f"{page.relative_to(REPO)}: link {t}" for t in sorted(links_in(text))
                    if not (page.parent / t).exists()]
    assert missing == []


def test_every_module_the_docs_name_exists():
    problems = [f"{page.relative_to(REPO)}: {problem}" for page in doc_pages()
                for dotted in sorted(modules_in(page.read_text(encoding="utf-8")))
                if (problem := module_problem(dotted))]
    assert problems == []
