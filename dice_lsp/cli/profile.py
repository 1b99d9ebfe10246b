"""`dice check FILE [--json]` and `dice profile FILE [--kernel NAME] [--json]`, through the
profiler's public functions (profiler.check, profiler.profile).

Exit codes: 0 fine (profiled with a proven verdict, or compiled with nothing to time on this
machine), 1 the code has a problem (compile errors, wrong results, crash, timeout, no spec)
or its measurement proves nothing (impossible, suspicious, unstable, unproven, flagged), 2 a
usage problem (no such file or kernel, no compiler, a file neither can judge: not CUDA or
Python, a .py without `Model`, a .cu without a `__global__` kernel).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

import profiler
from dice_lsp.core.verdict_view import diagnostic_row, verdict_table
from profiler.source.cuda_source import find_kernel, find_kernels
from profiler.source.document import not_judgeable
from profiler.source.source_files import SourceFileError, read_source_bytes
from profiler.verdict.types import Diagnostic, Verdict

# Besides a proven verdict (Verdict.proven): nothing to time on this machine. A verdict whose
# measurement proves nothing (impossible, suspicious, unstable, unproven, flagged) is not fine.
FINE_STATUSES = ("no_gpu",)


def _usage_error(message: str) -> int:
    print(f"dice: {message}", file=sys.stderr)
    return 2


def _diagnostic_rows(diagnostics: list[Diagnostic], path: str) -> list[str]:
    return [diagnostic_row(d, path) for d in diagnostics]


def read_source(path: Path) -> tuple[str, Diagnostic | None]:
    """The file's text, and where it is not UTF-8: a file with a stray Latin-1 byte in a
    comment still compiles, so it is read with U+FFFD in place of each bad byte (the file on
    disk is never written) and the first bad byte becomes a warning. Only a regular file is
    read, up to MAX_SOURCE_BYTES (SourceFileError says what else it is)."""
    data = read_source_bytes(path)
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line_start = before.rfind(b"\n") + 1
        column = len(before[line_start:].decode("utf-8", errors="replace")) + 1
        message = (f"not UTF-8: byte 0x{data[exc.start]:02x} here (and any others) read as U+FFFD; "
                   "save the file as UTF-8")
        return data.decode("utf-8", errors="replace"), Diagnostic(before.count(b"\n") + 1, column, "warning", message)


def _read_argument(name: str, compile_only: bool) -> tuple[Path, str, Diagnostic | None] | int:
    """The file named on the command line, its text and its encoding problem; or the exit
    code of the usage error that says why it cannot be read (missing, a FIFO, a device...) or
    judged (profiler.source.document.not_judgeable)."""
    path = Path(name)
    try:
        path, source, problem = path, *read_source(path)
    except SourceFileError as exc:
        return _usage_error(str(exc))
    why = not_judgeable(path, source, compile_only)
    if why is not None:
        return _usage_error(why)
    return path, source, problem


def check_command(args: argparse.Namespace) -> int:
    read = _read_argument(args.file, compile_only=True)
    if isinstance(read, int):
        return read
    path, source, encoding_problem = read
    try:
        diagnostics = profiler.check(source, str(path))
    except profiler.CompilerMissing as exc:
        return _usage_error(str(exc))
    if not profiler.is_kernelbench(str(path)):
        diagnostics = profiler.spec_errors_as_diagnostics(source) + diagnostics
    if encoding_problem is not None:
        diagnostics = [encoding_problem] + diagnostics
    errors = any(d.severity == "error" for d in diagnostics)
    if not errors and path.suffix.lower() == ".cu" and not find_kernels(source):
        # nvcc compiled it, but a .cu is judged by its kernels: there is nothing to fill,
        # optimize, profile or check a spec of (a .cuh header of device code is fine as it is).
        if diagnostics:
            print("\n".join(_diagnostic_rows(diagnostics, str(path))))
        return _usage_error(f"{path.name}: no __global__ kernel: nvcc compiled it, but dice has nothing in it to "
                            "check a spec of, profile, fill or optimize")
    if args.json:
        print(json.dumps({"diagnostics": [d.to_json() for d in diagnostics]}))
    elif diagnostics:
        print("\n".join(_diagnostic_rows(diagnostics, str(path))))
    else:
        print(f"{path}: compiles, no diagnostics")
    return 1 if errors else 0


def profile_command(args: argparse.Namespace) -> int:
    read = _read_argument(args.file, compile_only=False)
    if isinstance(read, int):
        return read
    path, source, encoding_problem = read
    if encoding_problem is not None:
        print(_diagnostic_rows([encoding_problem], str(path))[0], file=sys.stderr)
    if not profiler.is_kernelbench(str(path)):
        try:
            find_kernel(source, args.kernel)
        except ValueError as exc:
            return _usage_error(str(exc))
    verdict = profiler.profile(source, str(path), kernel=args.kernel, keep_warm=False)  # it exits next
    if args.json:
        print(json.dumps(verdict.to_json()))
    else:
        print(verdict_table(verdict, str(path)))
    return exit_code(verdict)


def exit_code(verdict: Verdict) -> int:
    """0 for a proven verdict or one with nothing to time here, else 1."""
    return 0 if verdict.proven or verdict.status in FINE_STATUSES else 1


def _exit_on_signal(signum: int, frame: object) -> None:
    # SystemExit unwinds through profiler.checks.compile.run_compiler, which then kills nvcc's
    # process group: nvcc runs in a session of its own, out of reach of a signal to ours.
    raise SystemExit(128 + signum)


def main(args: argparse.Namespace) -> int:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit_on_signal)
    if args.command == "check":
        return check_command(args)
    return profile_command(args)
