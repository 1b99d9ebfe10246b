"""Compile diagnostics on open and save (and on change when enabled), debounced per document.

profiler.check runs nvcc (or a Python parse, and nvcc on the load_inline strings, for
KernelBench files). A compiler can take gigabytes and minutes, so each check runs in a
process of its own (`python -m dice_lsp.lsp.compile_check`, in its own process group):

- one check per document at a time: a newer edit cancels the older check and kills its
  process group, compiler included, before the next one starts;
- at most `compiler_slots()` checks at once in the whole server (every connection), one per
  COMPILER_BYTES of half the machine's memory, and no more than its cores;
- a result for an outdated version is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import json
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING

from lsprotocol import types

import profiler
from dice_lsp.core.targets import TargetError, language_of
from dice_lsp.lsp.diagnostics import DiagnosticsStore, compiler_diagnostics
from dice_lsp.lsp.lsp_text import document_key, open_document
from profiler.checks.compile import kill_running_compilers
from profiler.checks.spec import spec_errors_as_diagnostics
from profiler.verdict.types import Diagnostic

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)

# What one nvcc of a load_inline extension (torch's headers) was seen to take at its peak.
COMPILER_BYTES = 2 * 1024**3
_COMPILER_MISSING = 3  # the check process's exit code when there is no compiler


def document_diagnostics(source: str, path: str) -> list[profiler.Diagnostic]:
    """The compiler's messages for a document, and its `dice:` spec errors for CUDA."""
    found = list(profiler.check(source, path))
    if language_of(path) == "cuda":
        found += spec_errors_as_diagnostics(source)
    return found


def compiler_slots() -> int:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1, min(os.cpu_count() or 1, memory // 2 // COMPILER_BYTES))


@functools.cache
def _compilers() -> asyncio.Semaphore:
    return asyncio.Semaphore(compiler_slots())


async def check_in_process(source: str, path: str) -> list[Diagnostic]:
    """document_diagnostics in a child process, killed with its compiler when cancelled."""
    async with _compilers():
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "dice_lsp.lsp.compile_check", str(os.getpid()),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = await process.communicate(json.dumps({"source": source, "path": path}).encode())
        finally:
            if process.returncode is None:
                # SIGTERM first: the check process then kills its compiler's group (a session of
                # its own) before its own; SIGKILL for one that does not end.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
                try:
                    await asyncio.wait_for(asyncio.shield(process.wait()), 2.0)
                except asyncio.TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
    if process.returncode == _COMPILER_MISSING:
        raise profiler.CompilerMissing(err.decode(errors="replace").strip())
    if process.returncode != 0:
        # The traceback is for the log; the user gets its last line.
        detail = err.decode(errors="replace").strip()
        log.warning("the compile check of %s ended with code %s:\n%s", path, process.returncode, detail[-4000:])
        last = detail.splitlines()[-1] if detail else f"killed by signal {-process.returncode}"
        raise RuntimeError(f"the check process ended with code {process.returncode}: {last[:500]}")
    return [Diagnostic.from_json(d) for d in json.loads(out)]


class CompileChecker:
    def __init__(self, server: LanguageServer, diagnostics: DiagnosticsStore) -> None:
        self._server = server
        self._diagnostics = diagnostics
        self._pending: dict[str, asyncio.Task] = {}
        self._running: dict[str, asyncio.Lock] = {}
        self._told_missing_compiler = False

    def schedule(self, uri: str, delay_ms: int) -> None:
        key = document_key(uri)
        if (older := self._pending.pop(key, None)) is not None:
            older.cancel()
        self._pending[key] = asyncio.ensure_future(self._check(uri, delay_ms / 1000))

    def cancel(self, uri: str) -> None:
        if (task := self._pending.pop(document_key(uri), None)) is not None:
            task.cancel()

    def cancel_all(self) -> None:
        for task in self._pending.values():
            task.cancel()
        self._pending.clear()

    async def _check(self, uri: str, delay_s: float) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(delay_s)
            # The cancelled check before this one holds the lock until its compiler is dead.
            async with self._running.setdefault(document_key(uri), asyncio.Lock()):
                await self._check_now(uri)

    async def _check_now(self, uri: str) -> None:
        document = open_document(self._server.workspace, uri)
        if document is None:
            return
        version, source, path = document.version, document.source, document.path
        try:
            language_of(path)
        except TargetError:
            return
        try:
            found = await check_in_process(source, path)
        except profiler.CompilerMissing as exc:
            self._tell_missing_compiler(str(exc))
            return
        except Exception as exc:  # a checker bug must not stop the server; say so in the log
            log.warning("compile check of %s failed: %s", uri, exc)
            self._server.window_log_message(
                types.LogMessageParams(type=types.MessageType.Error, message=f"dice: compile check failed: {exc}")
            )
            return
        current = open_document(self._server.workspace, uri)
        if current is None or current.version != version:
            return  # closed or edited meanwhile: a newer check is on its way
        self._diagnostics.set_compile(current.uri, compiler_diagnostics(current, found))

    def _tell_missing_compiler(self, why: str) -> None:
        if self._told_missing_compiler:
            return
        self._told_missing_compiler = True
        self._server.window_show_message(
            types.ShowMessageParams(
                type=types.MessageType.Warning,
                message=f"dice: compile diagnostics are off: {why}",
            )
        )


def _die_with_the_server(server: int) -> None:
    """A server that is killed (SIGKILL, a crash) cannot kill its checks: have Linux tell this
    process, which then takes its process group, compiler included, down with it."""
    if not sys.platform.startswith("linux"):
        return

    def end(*_: object) -> None:
        kill_running_compilers()  # each in a process group of its own (profiler.checks.compile.run_compiler)
        os.killpg(0, signal.SIGKILL)

    signal.signal(signal.SIGTERM, end)
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != server:  # it died before the line above
        os.killpg(0, signal.SIGKILL)


def _main() -> int:
    _die_with_the_server(int(sys.argv[1]))
    request = json.load(sys.stdin)
    try:
        found = document_diagnostics(request["source"], request["path"])
    except profiler.CompilerMissing as exc:
        print(exc, file=sys.stderr)
        return _COMPILER_MISSING
    json.dump([d.to_json() for d in found], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
