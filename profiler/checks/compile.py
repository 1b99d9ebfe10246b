"""Compile CUDA C++ and turn compiler output into Diagnostics in the user's coordinates.

Two compilers, one message format: `nvcc` (found on PATH, under CUDA_HOME, or in
/usr/local/cuda/bin) does compile-only checks on any machine, GPU or not; NVRTC (through
CuPy, only inside the sandbox) builds the module that is run. Both print EDG-style
`file(line): error: message` followed by an echo of the source line and a caret; the
preprocessor prints gcc-style `file:line:col: fatal error: message`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from profiler.machine import settings
from profiler.machine.paths import cache_dir
from profiler.machine.settings import DEFAULT_COMPILER_MEMORY, describe_bytes  # noqa: F401  (also this module's names)
from profiler.source.source_files import include_problems
from profiler.verdict.types import Diagnostic

log = logging.getLogger(__name__)

NVCC_TIME_LIMIT_S = 120.0
# The address space nvcc and each process it starts (cicc, the host compiler's cc1plus,
# ptxas) may take. A load_inline source with torch's headers peaks at 3 GiB resident and
# needs 3.5 GiB of address space; a plain .cu file needs less than 0.5 GiB. Without a bound
# `#include </dev/zero>` grows cc1plus until the kernel's OOM killer stops it.
COMPILER_MEMORY_ENV = settings.COMPILER_MEMORY
# The most one file nvcc writes (a preprocessed .ii with torch's headers is some tens of MB),
# what it prints included; and the most of what it prints that is read back.
COMPILER_FILE_BYTES = 1024**3
MAX_OUTPUT_BYTES = 4 * 1024**2
MAX_LINE_CHARS = 16 * 1024
# What the compilers print when an allocation fails (cc1plus, EDG's front end, a C++ runtime).
# What a shell or nvcc prints when a process it ran got SIGXFSZ (or a write failed with EFBIG).
_FILE_TOO_LARGE = re.compile(r"file size limit exceeded|file too large|signal 25\b", re.IGNORECASE)
_OUT_OF_MEMORY = re.compile(r"out of memory|memory exhausted|std::bad_alloc|cannot allocate memory", re.IGNORECASE)
# The architecture compile-only checks target when no GPU says which one it is.
DEFAULT_ARCH = "sm_90"

_EDG_HEADER = re.compile(
    r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<severity>catastrophic error|fatal error|error|warning|remark|note)"
    r"(?: #[\w-]+)?: (?P<message>.*)$"
)
_GCC_HEADER = re.compile(
    r"^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?P<column>\d+): (?P<severity>fatal error|error|warning|note): "
    r"(?P<message>.*)$"
)
# EDG's message for what only the end of the file reveals (an unclosed brace): no line number.
_END_OF_SOURCE = re.compile(
    r"^At end of source: (?P<severity>catastrophic error|fatal error|error|warning|remark): (?P<message>.*)$"
)
_PTXAS = re.compile(r"^ptxas (?P<severity>error|warning|fatal)\s*: (?P<message>.*)$")
_CARET = re.compile(r"^\s*\^\s*$")
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\S")


class CompilerMissing(RuntimeError):
    """No nvcc on this machine: the message says where it was looked for."""


def _severity(word: str) -> str:
    if word in ("error", "catastrophic error", "fatal error", "fatal"):
        return "error"
    if word == "warning":
        return "warning"
    return "note"


def compiler_memory_limit() -> int | None:
    """Bytes of address space each compiler process may take (DICE_COMPILER_MEMORY, else
    DEFAULT_COMPILER_MEMORY, also for a value that cannot be read: a typo never leaves the
    compiler unbounded); None for none."""
    return settings.current().compiler_memory


@dataclass(frozen=True)
class CompilerRun:
    returncode: int | None  # None: stopped at the time bound
    output: str  # stdout and stderr as printed, cut as _read_printed says
    memory_limit: int | None
    time_limit: float
    printed_bytes: int = 0  # all it printed, before the cut

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def bound_hit(self) -> str | None:
        """The bound that stopped the compiler, in words, or None when it finished on its own."""
        if self.timed_out:
            return f"the compiler was stopped at its time bound of {self.time_limit:.0f} s"
        if self.returncode != 0 and (self.returncode in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ)
                                     or self.printed_bytes >= COMPILER_FILE_BYTES
                                     or _FILE_TOO_LARGE.search(self.output)):
            return (f"the compiler was stopped at its bound of {describe_bytes(COMPILER_FILE_BYTES)} for one file "
                    "(what it printed, or a file it wrote)")
        if self.returncode != 0 and self.memory_limit is not None and (
                _OUT_OF_MEMORY.search(self.output) or self.returncode < 0):
            return (f"the compiler ran out of its memory bound of {describe_bytes(self.memory_limit)} "
                    f"({COMPILER_MEMORY_ENV} sets it)")
        return None


def _bounded_child(memory: int | None, cpu_seconds: int) -> None:
    """In the compiler's process before exec; inherited by every process it starts. The CPU
    bound is a backstop for a compiler whose parent died before it could kill the group."""
    if memory is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if hard == resource.RLIM_INFINITY or hard > COMPILER_FILE_BYTES:
        resource.setrlimit(resource.RLIMIT_FSIZE, (COMPILER_FILE_BYTES, COMPILER_FILE_BYTES))
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard == resource.RLIM_INFINITY or hard > cpu_seconds:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))


# Process groups of the compilers running in this process, for kill_running_compilers.
_RUNNING: set[int] = set()


def kill_running_compilers() -> None:
    """Kill every compiler this process started that is still running, with its children: for
    a process that is itself being ended (the language server's check process, when the server
    dies); each compiler is in a session of its own, out of reach of its parent's group."""
    for group in list(_RUNNING):
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_compiler(cmd: list[str], *, cwd: str, time_limit: float | None = None) -> CompilerRun:
    """Run a compiler bounded in memory (every process of it, compiler_memory_limit()), in
    time, and in the bytes it may write to one file (COMPILER_FILE_BYTES: its intermediate
    files and what it prints), in a process group of its own that is killed as a whole at the
    time bound or when the caller is interrupted: no cc1plus is left behind under PID 1.
    What it prints goes to a file in `cwd`, of which the first MAX_OUTPUT_BYTES are read: each
    error echoes its source line, and a 6 MB line with 100 errors is 600 MB of output."""
    memory = compiler_memory_limit()
    time_limit = NVCC_TIME_LIMIT_S if time_limit is None else time_limit
    printed = Path(cwd) / "compiler-output.txt"
    with open(printed, "wb") as sink:
        process = subprocess.Popen(
            cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=functools.partial(_bounded_child, memory, int(time_limit) + 10),
        )
    _RUNNING.add(process.pid)
    try:
        returncode: int | None = process.wait(timeout=time_limit)
    except subprocess.TimeoutExpired:
        returncode = None
    finally:
        # The whole group, also after nvcc itself ended: a child it left running goes too.
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        process.wait()
        _RUNNING.discard(process.pid)
    return CompilerRun(returncode, _read_printed(printed), memory, time_limit, printed.stat().st_size)


def _read_printed(path: Path) -> str:
    """What the compiler printed, each line cut to MAX_LINE_CHARS (an echo of a 6 MB source
    line, and its caret line, say nothing more than their first part: that error gets column
    1) and all of it to MAX_OUTPUT_BYTES."""
    kept: list[bytes] = []
    total = 0
    with open(path, "rb") as f:
        for line in f:
            if len(line) > MAX_LINE_CHARS:
                line = line[:MAX_LINE_CHARS] + b"...\n"
            total += len(line)
            if total > MAX_OUTPUT_BYTES:
                kept.append(b"(the rest of the compiler's output is left out: over 4 MB)\n")
                break
            kept.append(line)
    return b"".join(kept).decode(errors="replace")


@functools.cache
def find_nvcc() -> str | None:
    """nvcc on PATH, under $CUDA_HOME/bin, or in /usr/local/cuda/bin; None when absent."""
    on_path = shutil.which("nvcc")
    if on_path:
        return on_path
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    return None


@functools.cache
def local_arch() -> str | None:
    """`sm_XY` of the first local GPU (from nvidia-smi), or None without one."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    if not re.fullmatch(r"\d+\.\d+", first.strip()):
        return None
    major, minor = first.strip().split(".")
    return f"sm_{major}{minor}"


@functools.cache
def check_arch() -> str:
    """The architecture compile-only checks use: the local GPU's, else DEFAULT_ARCH when this
    nvcc supports it, else the newest it lists."""
    arch = local_arch()
    if arch:
        return arch
    nvcc = find_nvcc()
    if nvcc is None:
        return DEFAULT_ARCH
    try:
        listed = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return DEFAULT_ARCH
    computes = [c.replace("compute_", "sm_") for c in listed.split()]
    if not computes or DEFAULT_ARCH in computes:
        return DEFAULT_ARCH
    return computes[-1]


def _column(echo: str, caret: str, source_line: str | None) -> int:
    """1-based column of the caret in the user's line.

    The compiler echoes the line after preprocessing (`__global__` becomes
    `__attribute__((global))`, tabs become spaces), so the caret's offset is only trusted
    when the echo is the line itself; otherwise the token under the caret is looked up in the
    user's line, nearest to the caret's offset.
    """
    caret_at = caret.index("^")
    indent = len(echo) - len(echo.lstrip(" "))
    if source_line is None:
        return max(caret_at - 2, 0) + 1
    if echo[2:] == source_line:
        return caret_at - 2 + 1
    token = next((m.group() for m in _TOKEN.finditer(echo) if m.start() <= caret_at < m.end()), None)
    if token is None:
        return max(caret_at - indent, 0) + len(source_line) - len(source_line.lstrip()) + 1
    pattern = rf"\b{re.escape(token)}\b" if token[0].isalnum() or token[0] == "_" else re.escape(token)
    starts = [m.start() for m in re.finditer(pattern, source_line)]
    if not starts:
        return len(source_line) - len(source_line.lstrip()) + 1
    return min(starts, key=lambda s: abs(s - (caret_at - 2))) + 1


def parse_compiler_output(text: str, filename: str, source: str, *, kernel_lines: dict[str, int] | None = None
                          ) -> list[Diagnostic]:
    """Diagnostics from nvcc/NVRTC output for the document compiled as `filename`.

    Messages about other files (an included header) are put on line 1 with the header's
    place in the message, so that nothing the compiler said is lost. ptxas messages have no
    line; they go to the line of the kernel they name (`kernel_lines`: name -> 1-based line).
    """
    lines = text.splitlines()
    source_lines = source.splitlines()
    diagnostics: list[Diagnostic] = []
    base = os.path.basename(filename)
    i = 0
    while i < len(lines):
        raw = lines[i]
        i += 1
        edg = _EDG_HEADER.match(raw)
        gcc = None if edg else _GCC_HEADER.match(raw)
        ptxas = None if edg or gcc else _PTXAS.match(raw)
        end = None if edg or gcc or ptxas else _END_OF_SOURCE.match(raw)
        if end:
            # Put it where the compiler was looking: the end of the document.
            last = max(len(source_lines), 1)
            column = len(source_lines[-1]) + 1 if source_lines else 1
            message = f"at end of file: {end.group('message').strip()}"
            diagnostics.append(Diagnostic(last, column, _severity(end.group("severity")), message))
            continue
        if ptxas:
            message = ptxas.group("message")
            line = next((ln for name, ln in (kernel_lines or {}).items() if name in message), 1)
            diagnostics.append(Diagnostic(line, 1, _severity(ptxas.group("severity")), f"ptxas: {message}"))
            continue
        match = edg or gcc
        if match is None:
            continue
        line = int(match.group("line"))
        message = match.group("message").strip()
        column = int(gcc.group("column")) if gcc else 1
        # Collect the block after an EDG header: continuation lines, then echo + caret.
        if edg:
            block: list[str] = []
            while i < len(lines) and lines[i].strip() and not _EDG_HEADER.match(lines[i]) \
                    and not _GCC_HEADER.match(lines[i]) and not _PTXAS.match(lines[i]):
                block.append(lines[i])
                i += 1
            caret_index = next((k for k, b in enumerate(block) if _CARET.match(b)), None)
            in_document = os.path.basename(match.group("file")) == base
            source_line = source_lines[line - 1] if in_document and 0 < line <= len(source_lines) else None
            if caret_index is not None and caret_index > 0:
                column = _column(block[caret_index - 1], block[caret_index], source_line)
                block = block[: caret_index - 1] + block[caret_index + 1:]
            extra = " ".join(b.strip() for b in block if b.strip())
            if extra:
                message = f"{message} ({extra})"
        if os.path.basename(match.group("file")) != base:
            message = f"{match.group('file')}({line}): {message}"
            line, column = 1, 1
        diagnostics.append(Diagnostic(line, column, _severity(match.group("severity")), message))
    return diagnostics


def nvcc_check(source: str, filename: str, *, include_dirs: list[str] | None = None,
               arch: str | None = None, flags: tuple[str, ...] = (), keep: bool = False) -> list[Diagnostic]:
    """Compile `source` to a cubin with nvcc (device code only; no GPU needed) and return
    its diagnostics. Raises CompilerMissing when there is no nvcc.

    Answers are remembered by everything that decides them: the text, the flags, nvcc, and
    the files its `#include "..."` lines name in include_dirs (their modification times).
    With keep=True they are also kept on disk, for checks whose include folders are
    installed headers (torch's), so another process or session asks nvcc only once.

    An `#include` of a FIFO, a device or a folder is an error at its line without a compile;
    every compile is bounded in memory and time (run_compiler), and a bound that stops it is
    an error that names the bound."""
    refused = include_problems(source, include_dirs or ())
    if refused:
        return [Diagnostic(line, column, "error", message) for line, column, message in refused]
    return list(_nvcc_check_cached(source, os.path.basename(filename) or "kernel.cu",
                                   tuple(include_dirs or ()), arch or check_arch(), tuple(flags), keep,
                                   _local_headers_stamp(source, include_dirs or ())))


_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def _stamp(path: str) -> str:
    try:
        status = os.stat(path)
    except OSError:
        return f"{path}:missing"
    return f"{path}:{status.st_mtime_ns}:{status.st_size}"


def _local_headers_stamp(source: str, include_dirs) -> str:
    """The state of the headers the source includes with quotes (one level deep), so that an
    edited header is not answered from what was remembered for the old one."""
    names = _LOCAL_INCLUDE.findall(source)
    return "|".join(_stamp(os.path.join(d, n)) for n in names for d in include_dirs)


@functools.lru_cache(maxsize=256)
def _nvcc_check_cached(source: str, basename: str, include_dirs: tuple[str, ...], arch: str,
                       flags: tuple[str, ...], keep: bool, headers: str) -> tuple[Diagnostic, ...]:
    # The LSP asks again on every save; an unchanged document is answered from here.
    nvcc = find_nvcc()
    if nvcc is None:
        raise CompilerMissing("nvcc not found: looked on PATH, in $CUDA_HOME/bin and /usr/local/cuda/bin")
    kept = None
    if keep:
        key = content_key(source, basename, arch, *flags, _stamp(nvcc), *map(_stamp, include_dirs), headers)
        kept = cache_dir("nvcc-checks") / f"{key}.json"
        try:
            return tuple(Diagnostic.from_json(d) for d in json.loads(kept.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            pass
    diagnostics, complete = _run_nvcc(nvcc, source, basename, include_dirs, arch, flags)
    if kept is not None and complete:
        partial = kept.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps([d.to_json() for d in diagnostics]))
        partial.replace(kept)
    return diagnostics


def _run_nvcc(nvcc: str, source: str, basename: str, include_dirs: tuple[str, ...], arch: str,
              flags: tuple[str, ...]) -> tuple[tuple[Diagnostic, ...], bool]:
    """nvcc's diagnostics, and whether nvcc finished (a timeout is not an answer to keep)."""
    if not basename.endswith(".cu"):
        basename += ".cu"  # a .cuh is checked as a translation unit of its own
    with tempfile.TemporaryDirectory(prefix="dice-check-") as tmp:
        src = Path(tmp) / basename
        # A lone surrogate (from an editor's JSON) cannot be written as UTF-8: it becomes U+FFFD,
        # one character for one, so lines and columns stay where they were.
        src.write_text(source, encoding="utf-8", errors="replace")
        cmd = [nvcc, "-cubin", f"-arch={arch}", "-std=c++17", "-o", str(Path(tmp) / "out.cubin")]
        cmd += [f"-I{d}" for d in include_dirs]
        cmd += list(flags)
        cmd.append(str(src))
        run = run_compiler(cmd, cwd=tmp)
    bound = run.bound_hit()
    if run.timed_out:
        return (Diagnostic(1, 1, "error", f"{bound}; nothing it printed is kept"),), False
    diagnostics = list(parse_compiler_output(run.output, basename, source, kernel_lines=_kernel_lines(source)))
    if bound is not None:
        tail = " ".join(run.output.strip().splitlines()[-2:])
        diagnostics.insert(0, Diagnostic(1, 1, "error", f"{bound}: {tail}" if tail else bound))
    elif run.returncode != 0 and not any(d.severity == "error" for d in diagnostics):
        tail = " ".join(run.output.strip().splitlines()[-3:]) or f"exit code {run.returncode}"
        diagnostics.append(Diagnostic(1, 1, "error", f"nvcc failed: {tail}"))
    # An answer at the memory bound depends on the bound: not one to keep on disk.
    return tuple(diagnostics), bound is None


def _kernel_lines(source: str) -> dict[str, int]:
    from profiler.source.cuda_source import find_kernels

    return {k.name: k.start[0] + 1 for k in find_kernels(source)}


def content_key(*parts: str) -> str:
    """A short hash naming a compiled artefact by everything that decides its bytes."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]
