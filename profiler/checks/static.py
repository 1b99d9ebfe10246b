"""Patterns of cheating in a candidate's source, in the spirit of KernelBench's
kernel_static_checker: each found is a named flag on the verdict (profiler.verdict.decision).

A flag is a reason to look, not proof: the judge's guarantees do not rest on it (see the
docs/threat-model.md), and a determined candidate can hide from any regular expression.
It catches the plain forms: work on other streams or threads, patched timers, comparison
or library functions (Model runs in the candidate's process, so a patched torch.relu would
change the baseline's answer too), reaching into the harness's memory, reading the
environment, writing files. Only what the candidate adds counts: a pattern that the baseline document
holds as often is the user's, not the candidate's.
"""

from __future__ import annotations

import ast
import re

from profiler.source.document import parse_python

_TIMERS = r"(?:time\.(?:perf_counter|time|monotonic|process_time)(?:_ns)?|torch\.cuda\.(?:Event|synchronize|" \
          r"current_stream|default_stream)|\.elapsed_time|cupy\.cuda\.get_elapsed_time)"
_COMPARISONS = r"(?:torch\.(?:allclose|isclose|equal|testing(?:\.\w+)?)|numpy\.allclose|np\.allclose|" \
               r"np\.array_equal|assert_close)"

_LIBRARIES = r"(?:torch|nn|F|np|numpy|math|operator|builtins)"
_NOT_LIBRARY_PATCHES = r"backends\.|cuda\.|allclose|isclose|equal|testing|array_equal"

PATTERNS: dict[str, tuple[str, ...]] = {
    # Work the CUDA events on the launch stream do not see.
    "other_stream": (r"torch\.cuda\.Stream\s*\(", r"torch\.cuda\.stream\s*\(", r"cudaStreamCreate",
                     r"getStreamFromPool", r"cuda\.Stream\s*\("),
    "threads": (r"\bimport\s+threading\b", r"\bthreading\.", r"\bmultiprocessing\b", r"concurrent\.futures",
                r"std::thread", r"\bos\.(?:fork|forkpty|posix_spawnp?|spawn\w*|exec\w*|system|popen)\b",
                r"(?<![\w.])fork\s*\(", r"\bsubprocess\b", r"pthread_create"),
    "timer_patch": (rf"{_TIMERS}\s*=(?!=)", rf"setattr\s*\([^)]*['\"](?:perf_counter|time|monotonic|"
                    r"elapsed_time|synchronize|Event|record)['\"]"),
    "comparison_patch": (rf"{_COMPARISONS}\s*=(?!=)", r"setattr\s*\([^)]*['\"](?:allclose|isclose|equal|"
                         r"assert_close|compare)['\"]", r"\bprofiler\.", r"\bsys\.modules\b"),
    # Model runs in the same process: a library function patched there changes the baseline too.
    # (torch.backends: precision switches, not patches; cuda and comparisons: the two above.)
    # For a source that parses, assignments are read from its syntax tree instead
    # (_library_patches): `x: torch.Tensor = ...` is an annotation, not a patch.
    "library_patch": (rf"\b{_LIBRARIES}\.(?!{_NOT_LIBRARY_PATCHES})[\w.]+\s*=(?!=)",),
    # Reaching into the harness: its frames, its objects, raw memory.
    "introspection": (r"\bgc\.get_(?:objects|referrers|referents)\b", r"\bsys\._getframe\b", r"\bimport\s+inspect\b",
                      r"\binspect\.", r"\bctypes\b", r"/proc/self", r"\b__builtins__\b", r"\bimport\s+builtins\b",
                      r"f_back\b", r"f_locals\b", r"f_globals\b", r"/proc/",
                      r"\bsetattr\s*\((?!\s*self\b)", r"\b__dict__\b", r"\b__globals__\b",
                      r"\bvars\s*\([^)]*\)\s*\[", r"\bimportlib\b", r"\bimport_module\b", r"\b__import__\b"),
    "environment": (r"\bos\.environ\b", r"\bgetenv\s*\(", r"\benviron\b"),
    "file_write": (r"\bopen\s*\([^)]*['\"][wax]b?\+?['\"]", r"\.write_(?:text|bytes)\s*\(", r"\bos\.(?:write|open|"
                   r"remove|unlink|rename|replace|symlink|link|chmod|makedirs|mkdir)\s*\(", r"\bshutil\.",
                   r"\bfopen\s*\([^)]*\"[wa]", r"std::ofstream"),
}

_COMPILED = {name: [re.compile(p) for p in patterns] for name, patterns in PATTERNS.items()}


def _renamings(tree: ast.AST) -> dict[str, str]:
    """alias -> the full name it stands for, from every import statement (`import os as _os`,
    `from os import fork as f`), wherever it stands (inside a function, after a `;`, in
    parentheses over several lines)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update({a.asname: a.name for a in node.names if a.asname and a.asname != a.name})
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.update({a.asname: f"{node.module}.{a.name}" for a in node.names if a.asname and a.asname != a.name})
    return names


def _unaliased(source: str, names: dict[str, str]) -> str:
    """The source with each renamed import written out in full (`_os.fork` -> `os.fork`), in
    one pass, so that the patterns, written for `os.fork`, see through a renaming import."""
    if not names:
        return source
    alias = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")\b")
    return alias.sub(lambda m: names[m[1]], source)


def _count(source: str) -> dict[str, int]:
    return {name: sum(len(p.findall(source)) for p in patterns) for name, patterns in _COMPILED.items()}


def _dotted(node: ast.AST) -> str | None:
    """`a.b.c` for an attribute chain on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) and parts else None


def _library_patches(tree: ast.AST, names: dict[str, str]) -> int:
    """Assignments to (and deletions of) a library's attributes, aliases (`names`) resolved:
    `torch.relu = ...`, `G.relu = ...` after `import torch.nn.functional as G`, `del torch.relu`."""
    library = re.compile(rf"{_LIBRARIES}\.(?!{_NOT_LIBRARY_PATCHES})")
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        else:
            continue
        flat = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
        for target in flat:
            name = _dotted(target)
            if name is None:
                continue
            root, _, rest = name.partition(".")
            full = f"{names.get(root, root)}.{rest}"
            count += bool(library.match(full) or library.match(name))
    return count


def _counts(source: str) -> dict[str, int]:
    """Each pattern's count in the source as written or with its imports unaliased, whichever
    is more: a made-up alias (`import sys as os` in a string) can only add flags. Library
    patches are counted in the syntax tree, where the source parses."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return _count(source)  # it fails as "does not parse" anyway
    names = _renamings(tree)
    written, expanded = _count(source), _count(_unaliased(source, names))
    counts = {name: max(written[name], expanded[name]) for name in written}
    counts["library_patch"] = _library_patches(tree, names)
    return counts


def static_flags(candidate: str, baseline: str = "") -> list[str]:
    """The names of the patterns the candidate holds more often than the baseline does."""
    theirs, ours = _counts(candidate), _counts(baseline)
    return [name for name in PATTERNS if theirs[name] > ours[name]]
