"""The environment variables that set how this machine judges candidates, in one typed object.

The editor's settings (model, candidates, sampling) come from the client (dice_lsp.core.config);
what belongs to the machine rather than to a document (where caches live, how candidates are
isolated and built) comes from the environment, here, in every process that judges (dice-lsp,
`dice`). The listeners' tokens are named beside the code that asks for them
(dice_lsp.core.config for dice-lsp's; engine.serving.client for `dice engine serve`'s and its
clients'). The
README's table of variables is checked against VARIABLES and those two by the tests, and no
other module reads a DICE_ variable but the two dice sets for its own child processes (the
sandbox's marker, the folder where Ray's builders announce themselves; named in the README
too), so there is no switch a user cannot find.

This module is a leaf: the profiler and the language server import it, and it imports
nothing of the project.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_COMPILER_MEMORY = 6 * 1024**3  # torch's headers need about 3.5 GiB
MIN_COMPILER_MEMORY = 64 << 20
DEFAULT_SANDBOX_POOL = 4  # the editor's default number of candidates
MAX_SANDBOX_POOL = 8
ISOLATION_MODES = ("auto", "on", "off")

_SIZE = re.compile(r"(?i)\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*")
_SCALE = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def describe_bytes(count: int) -> str:
    """1073741824 -> "1 GiB", 1610612736 -> "1.5 GiB"."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count} bytes"


class Unreadable(ValueError):
    """A value that cannot be read; the variable keeps its default and the message is kept."""


def _folder(raw: str) -> Path | None:
    return Path(os.path.expanduser(raw)) if raw else None


def _build_cache(raw: str) -> str:
    return "off" if raw.lower() == "off" else raw


def _flag_on_unless_zero(raw: str) -> bool:
    return raw != "0"


def _count(raw: str) -> int | None:
    if not raw:
        return None
    if not raw.isdigit():
        raise Unreadable("expected a whole number (0 or 1: one at a time)")
    return int(raw)


def _compiler_memory(raw: str) -> int | None:
    if not raw:
        return DEFAULT_COMPILER_MEMORY
    if raw.lower() in ("off", "none", "unlimited"):
        return None
    match = _SIZE.fullmatch(raw)
    value = int(float(match.group(1)) * _SCALE[match.group(2).lower()]) if match else 0
    if value < MIN_COMPILER_MEMORY:
        raise Unreadable("expected a size of at least 64M (e.g. 6G, 4096M) or off")
    return value


def _engine_memory(raw: str) -> int | None:
    if not raw:
        return None
    match = _SIZE.fullmatch(raw)
    if not match:
        raise Unreadable("expected a size (e.g. 8G, 512M)")
    return int(float(match.group(1)) * _SCALE[match.group(2).lower()])


def _isolation(raw: str) -> str:
    # Any other word is kept, not replaced by the default: `on` is a demand, and a typo of
    # it must refuse to judge (profiler.sandbox.isolation) rather than quietly run unisolated.
    return raw.lower() or "auto"


def _pool(raw: str) -> int:
    if not raw:
        return DEFAULT_SANDBOX_POOL
    try:
        return max(0, min(MAX_SANDBOX_POOL, int(raw)))
    except ValueError:
        raise Unreadable(f"expected a whole number from 0 to {MAX_SANDBOX_POOL}") from None


CACHE_DIR = "DICE_CACHE_DIR"
SANDBOX_ISOLATION = "DICE_SANDBOX_ISOLATION"
SANDBOX_POOL = "DICE_SANDBOX_POOL"
COMPILER_MEMORY = "DICE_COMPILER_MEMORY"
ENGINE_MEMORY = "DICE_ENGINE_MEMORY"
BUILD_JOBS = "DICE_BUILD_JOBS"
BUILD_CACHE = "DICE_BUILD_CACHE"
REUSE_BUILDS = "DICE_REUSE_BUILDS"


@dataclass(frozen=True)
class Variable:
    name: str
    attr: str
    read: Callable[[str], object]
    default: str  # in words, for the README and `dice doctor`
    meaning: str


VARIABLES: tuple[Variable, ...] = (
    Variable(CACHE_DIR, "cache_dir", _folder, "`$XDG_CACHE_HOME/dice-lsp/results`",
             "where verdicts are cached, keyed by kernel, spec and GPU"),
    Variable(SANDBOX_ISOLATION, "sandbox_isolation", _isolation, "`auto`",
             "`auto`: candidates run in namespaces of their own where the system allows; `on`: refuse to "
             "judge without them; `off`: never"),
    Variable(SANDBOX_POOL, "sandbox_pool", _pool, str(DEFAULT_SANDBOX_POOL),
             f"sandboxes kept started ahead of candidates (0-{MAX_SANDBOX_POOL}; 0: none)"),
    Variable(COMPILER_MEMORY, "compiler_memory", _compiler_memory, describe_bytes(DEFAULT_COMPILER_MEMORY),
             "address space of each nvcc/c++ process (`8G`, `4096M`, or `off`)"),
    Variable(ENGINE_MEMORY, "engine_memory", _engine_memory, "what the device has free",
             "memory a local model's weights and each request's KV cache and working memory may take together "
             "(`8G`, `512M`); a request that needs more is refused, saying how many candidates fit"),
    Variable(BUILD_JOBS, "build_jobs", _count, "half the CPUs",
             "KernelBench candidates built side by side before they are timed (0 or 1: none ahead)"),
    Variable(BUILD_CACHE, "build_cache", _build_cache, "`$XDG_CACHE_HOME/dice-lsp/builds`",
             "where verified extension builds are kept across processes (isolated sandboxes only); `off`: "
             "in memory for one process"),
    Variable(REUSE_BUILDS, "reuse_builds", _flag_on_unless_zero, "1",
             "`0` builds every document again instead of reusing a verified build of the same text"),
)


@dataclass(frozen=True)
class Environment:
    cache_dir: Path | None = None
    sandbox_isolation: str = "auto"
    sandbox_pool: int = DEFAULT_SANDBOX_POOL
    compiler_memory: int | None = DEFAULT_COMPILER_MEMORY
    engine_memory: int | None = None
    build_jobs: int | None = None
    build_cache: str = ""
    reuse_builds: bool = True
    problems: tuple[str, ...] = field(default=(), compare=False)  # values that could not be read

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> Environment:
        """The settings in `environ` (this process's environment by default); a value that
        cannot be read keeps its default and leaves a message in `problems`."""
        environ = os.environ if environ is None else environ
        values: dict[str, object] = {}
        problems = []
        for variable in VARIABLES:
            raw = environ.get(variable.name, "").strip()
            try:
                values[variable.attr] = variable.read(raw)
            except Unreadable as exc:
                problems.append(f"{variable.name}={raw!r}: {exc}; using the default, {variable.default}")
        return cls(**values, problems=tuple(problems))

    def shown(self) -> list[tuple[str, str]]:
        """(name, value) for each variable set to other than its default."""
        default = Environment()
        rows = []
        for variable in VARIABLES:
            value = getattr(self, variable.attr)
            if value != getattr(default, variable.attr):
                rows.append((variable.name, str(value)))
        return rows


def current() -> Environment:
    """This process's settings. Read when first asked for, and again only if one of the
    process's DICE_ variables has changed since (a test or a benchmark that sets one), so
    that every reader sees the same typed values and a value is warned about once."""
    return _read_for(tuple(os.environ.get(variable.name) for variable in VARIABLES))


@functools.lru_cache(maxsize=8)
def _read_for(values: tuple[str | None, ...]) -> Environment:
    environment = Environment.read({v.name: value for v, value in zip(VARIABLES, values) if value is not None})
    for problem in environment.problems:
        log.warning("%s", problem)
    return environment
