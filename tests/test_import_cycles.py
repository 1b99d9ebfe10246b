"""No import circles among the project's packages: each module's imports (at the top or
inside functions, since a deferred import still ties the two modules together) form a graph
with no cycle. Read from the source with ast, so nothing is imported or run."""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(packages: tuple[str, ...]) -> dict[str, set[str]]:
    """module -> the project modules it imports (`from a import b` counts as a.b when a.b is a
    module, else as a). A folder of scripts without an __init__.py (benchmarks/) puts itself on
    sys.path, so there `import x` also names its sibling x.py."""
    files = {module_name(p): p for package in packages for p in (REPO / package).rglob("*.py")}
    siblings = {p.stem: module_name(p) for package in packages if not (REPO / package / "__init__.py").exists()
                for p in (REPO / package).glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base for alias in node.names]
            else:
                continue
            targets = [t if t in files else siblings.get(t.split(".")[0], t) for t in targets]
            edges |= {t for t in targets if t in files and t != name}
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_finder_sees_a_cycle(tmp_path):
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_engine_has_no_import_cycles():
    graph = import_graph(("engine",))
    assert "engine.decoding.paths" in graph["engine.decoding.decode"]  # the graph is read (a known edge)
    assert cycles(graph) == []


def test_profiler_has_no_import_cycles():
    assert cycles(import_graph(("engine", "profiler"))) == []


def test_benchmarks_have_no_import_cycles():
    """The benchmarks import the packages and each other (as benchmarks.x, or as x with the
    folder on sys.path); no two of them import each other, directly or around a circle."""
    graph = import_graph(("engine", "profiler", "dice_lsp", "benchmarks"))
    assert "benchmarks.dice_shape" in graph["benchmarks.preset_speed"]  # the graph is read (a known edge)
    assert "benchmarks.builtin_eval" in graph["benchmarks.spelling_eval"]  # a sibling imported by its bare name
    assert cycles(graph) == []


def test_dice_lsp_has_no_import_cycles():
    graph = import_graph(("engine", "profiler", "dice_lsp"))
    assert [c for c in cycles(graph) if c[0].startswith("dice_lsp")] == []


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, by its absolute name (relative imports are not used here)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{path}: relative import"
            names.add(node.module or "")
    return names


def test_dice_lsp_core_knows_nothing_of_the_protocol():
    """dice_lsp/core (jobs, spans, slots, cache, the outcome policy) imports no pygls or
    lsprotocol, not even for typing, and no part of dice_lsp outside itself, so that what it
    does is testable, and usable by the CLI, without a language server."""
    core = sorted((REPO / "dice_lsp" / "core").rglob("*.py"))
    assert any(p.name == "outcome.py" for p in core)
    outside = {}
    for path in core:
        for name in imported_modules(path):
            top = name.split(".")[0]
            if top in ("pygls", "lsprotocol") or (top == "dice_lsp" and not name.startswith("dice_lsp.core")):
                outside.setdefault(path.name, []).append(name)
    assert outside == {}
    # and what it imports from the other packages does not bring the protocol in either
    graph = import_graph(("engine", "profiler", "dice_lsp"))
    reached, todo = set(), [module_name(p) for p in core]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += graph[module]
    assert not [m for m in reached if m.startswith("dice_lsp.") and not m.startswith("dice_lsp.core")]
    for module in reached:
        path = REPO / Path(*module.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        assert not {n.split(".")[0] for n in imported_modules(path)} & {"pygls", "lsprotocol"}, module


def test_dice_lsp_layers_import_only_downwards():
    """core <- lsp, core <- bench <- cli; the features never import the state or the wiring
    that registers them (they get a Session), and nothing imports the dice-lsp entry."""
    allowed = {
        "core": {"core"},
        "lsp": {"core", "lsp"},
        "bench": {"core", "bench"},
        "cli": {"core", "bench", "cli"},
        "server": {"lsp"},
    }
    graph = import_graph(("engine", "profiler", "dice_lsp"))
    wrong = []
    for module, imports in graph.items():
        if not module.startswith("dice_lsp."):
            continue
        layer = module.split(".")[1]
        for imported in imports:
            if imported.startswith("dice_lsp.") and imported.split(".")[1] not in allowed[layer]:
                wrong.append(f"{module} -> {imported}")
            if module.startswith("dice_lsp.lsp.features.") and imported in ("dice_lsp.lsp.wiring", "dice_lsp.lsp.state"):
                wrong.append(f"{module} -> {imported}")
    assert "dice_lsp.lsp.features.generate" in graph["dice_lsp.lsp.wiring"]  # the graph is read
    assert wrong == []


def test_dice_bench_judges_through_the_profilers_surface():
    """dice_lsp/bench keeps the run, the tables and the resume; the judge pools (workers on
    this machine's GPUs, a Ray cluster) are the profiler's, reached through profiler.judge,
    never through profiler.judging's modules."""
    graph = import_graph(("engine", "profiler", "dice_lsp"))
    assert "profiler.judge" in graph["dice_lsp.bench.run"]  # the graph is read
    wrong = [f"{module} -> {imported}" for module, imports in graph.items() if module.startswith("dice_lsp.bench")
             for imported in imports if imported.startswith("profiler.judging")]
    assert wrong == []


# The profiler's rooms, lowest first: each imports only its own room and those below.
# source (reading documents: their kind, kernels, `dice:` spec and C element types) < machine
# (this machine's settings, cache folders and GPU facts) < measure (statistics, checks of
# outputs, timing) < sandbox (the sandboxed process, from outside) < verdict (what a verdict
# is, the rules of proof, the decision from a sandbox's outcome) < checks (compile-only checks,
# their Diagnostics) < run (what runs inside the sandbox) < judging (the parent side:
# protocols, requests, pipelines, the schedule, the pools). Every module of the profiler is in
# a room but the top: profiler.judge (judge(), profile(), the pools) and the package itself.
PROFILER_LAYERS = ("source", "machine", "measure", "sandbox", "verdict", "checks", "run", "judging")
PROFILER_TOP = ("profiler", "profiler.judge")
# Rooms that import nothing else of the project: the ground every other room stands on.
PROFILER_LEAVES = ("source", "machine")


def profiler_room(module: str) -> str | None:
    """The room of a profiler module (profiler.sandbox and profiler.sandbox.pool: "sandbox");
    None for the top."""
    return None if module in PROFILER_TOP else module.split(".")[1]


def test_every_profiler_module_is_in_a_room():
    graph = import_graph(("profiler",))
    assert set(PROFILER_TOP) <= set(graph) and "profiler.sandbox.watch" in graph  # the graph is read
    outside = sorted(m for m in graph if m not in PROFILER_TOP
                     and ("." not in m or m.split(".")[1] not in PROFILER_LAYERS))
    assert outside == []
    assert all((REPO / "profiler" / room / "__init__.py").is_file() for room in PROFILER_LAYERS)


def test_profiler_rooms_open_with_what_they_are():
    """Each room's __init__.py says what the room is (its docstring) and holds no code: at most
    imports of what its modules define and the __all__ that names them, so that every name of
    the profiler is defined in one module, the one its room's docstring points to."""
    code = {}
    for room in PROFILER_LAYERS:
        tree = ast.parse((REPO / "profiler" / room / "__init__.py").read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), room
        code[room] = [type(node).__name__ for node in tree.body[1:]
                      if not isinstance(node, (ast.Import, ast.ImportFrom))
                      and not (isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__")]
    assert code == {room: [] for room in PROFILER_LAYERS}


def test_profiler_rooms_import_only_downwards():
    graph = import_graph(("engine", "profiler", "dice_lsp"))
    assert "profiler.judging.problem" in graph["profiler.judging.schedule"]  # the graph is read
    assert "profiler.sandbox" in graph["profiler.verdict.decision"]  # the verdict reads a sandbox's outcome

    wrong = []
    for module, imports in graph.items():
        if module != "profiler" and not module.startswith("profiler."):
            continue
        here = profiler_room(module)
        for imported in imports:
            if imported != "profiler" and not imported.startswith("profiler."):
                continue
            there = profiler_room(imported)
            if here in PROFILER_LEAVES and there != here:
                wrong.append(f"{module} -> {imported} ({here} imports nothing else of the project)")
            elif there is None and module != "profiler":
                wrong.append(f"{module} -> {imported} (the top)")
            elif here is not None and PROFILER_LAYERS.index(there) > PROFILER_LAYERS.index(here):
                wrong.append(f"{module} -> {imported} (upwards)")
            elif here is None and there == "judging" and module != "profiler.judge":
                wrong.append(f"{module} -> {imported} (only profiler.judge stands on judging)")
    assert wrong == []


def test_profiler_imports_neither_dice_lsp_nor_engine():
    graph = import_graph(("engine", "profiler", "dice_lsp"))
    wrong = [f"{module} -> {imported}" for module, imports in graph.items() if module.startswith("profiler")
             for imported in imports if imported.split(".")[0] in ("dice_lsp", "engine")]
    assert wrong == []
    # also a deferred or optional import, by name, of a module the graph would not list
    for path in sorted((REPO / "profiler").rglob("*.py")):
        assert not {n.split(".")[0] for n in imported_modules(path)} & {"dice_lsp", "engine"}, path


def test_engine_layers_import_only_downwards():
    """engine's sub-packages (docs/architecture.md): types <- model (the SDAR math, its kernels
    and their routing, checkpoint loading) ; types <- fill (a FIM fill's text: cut, scope,
    spelling; and its policy, which draws through a Drawer it is handed and so never imports
    decoding) ; model, fill <- decoding (prompts, block-diffusion decoding, the local engine) <-
    serving (worker, server, the dice:// and sglang:// clients). `engine` itself
    (`engine.load`) may import any; only serving imports it (the worker and the server load an
    engine). The engine imports nothing of dice_lsp or profiler."""
    allowed = {
        "types": {"types"},
        "model": {"types", "model"},
        "fill": {"types", "fill"},
        "decoding": {"types", "model", "fill", "decoding"},
        "serving": {"types", "model", "decoding", "serving", ""},
        "": {"types", "model", "fill", "decoding", "serving"},
        "templates": set(),  # DICE's prompt examples, data that happens to be Python
    }
    graph = import_graph(("engine", "profiler", "dice_lsp"))
    wrong = []
    for module, imports in graph.items():
        if module != "engine" and not module.startswith("engine."):
            continue
        layer = module.split(".")[1] if "." in module else ""
        for imported in imports:
            if imported.split(".")[0] in ("dice_lsp", "profiler"):
                wrong.append(f"{module} -> {imported}")
            elif imported == "engine" or imported.startswith("engine."):
                target = imported.split(".")[1] if "." in imported else ""
                if target not in allowed[layer]:
                    wrong.append(f"{module} -> {imported}")
    assert "engine.model.routes" in graph["engine.decoding.paths"]  # the graph is read
    assert "engine.fill.repair" in graph["engine.decoding.local"]   # the local engine hands a fill to the policy
    assert {"engine.fill.names", "engine.fill.spans", "engine.fill.ranking"} <= graph["engine.fill.repair"]
    assert {m.split(".")[1] for m in graph if m.startswith("engine.")} == set(allowed) - {""}
    assert wrong == []


def test_fill_reads_brackets_in_one_place():
    """engine/fill reads C/CUDA structure through engine.fill.source (its `levels` walk and
    `owed`); no other module of it counts bracket depth by hand."""
    fill = sorted((REPO / "engine" / "fill").glob("*.py"))
    assert any(p.name == "source.py" for p in fill)
    counting = [p.name for p in fill if p.name != "source.py"
                and re.search(r"\bdepth\s*[-+]=|\{\s*\"[(\[{]\"\s*:\s*-?1", p.read_text(encoding="utf-8"))]
    assert counting == []
    graph = import_graph(("engine",))
    readers = {"engine.fill.declarations", "engine.fill.spans", "engine.fill.usage"}
    assert all("engine.fill.source" in graph[m] for m in readers)


def test_training_stands_outside_the_installed_engine():
    """training/ (corpus, FIM data, trainer) is a top-level folder of the repository, not a part
    of the package a user installs: the engine never imports it, the wheel does not include it,
    and it imports only the engine's public layers."""
    graph = import_graph(("engine", "training"))
    assert "training.fim_data" in graph["training.train"]   # the graph is read
    assert [f"{m} -> {i}" for m, imports in graph.items() if m.startswith("engine")
            for i in imports if i.split(".")[0] == "training"] == []
    assert cycles(graph) == []
    for path in sorted((REPO / "engine").rglob("*.py")):
        assert "training" not in {n.split(".")[0] for n in imported_modules(path)}, path
    found = re.search(r"\[tool\.setuptools\.packages\.find\]\s*include\s*=\s*\[([^\]]*)\]",
                      (REPO / "pyproject.toml").read_text(encoding="utf-8"))
    include = re.findall(r'"([^"]+)"', found.group(1))
    assert "engine*" in include and not any(fnmatch.fnmatch("training", pattern) for pattern in include)
    assert not (REPO / "engine" / "training").exists()
