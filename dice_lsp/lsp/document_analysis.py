"""What codeAction, codeLens and hover need to know about a document, computed once per
version of it, in a thread, and kept until the next version.

A file of thousands of kernels takes seconds to parse; on the event loop that would stop
every other answer, and per request it would be quadratic. Here one parse gives the kernels
(or the KernelBench model), the kernels that have a spec and the line table, and each request
then costs a lookup: a bisection for the kernel at an offset, one line for a position.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import pickle
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified, JsonRpcInvalidParams
from pygls.workspace import PositionCodec, TextDocument

from dice_lsp.core.cache import result_key
from dice_lsp.core.measured import MeasuredUnit, measured_units
from dice_lsp.core.targets import TargetError, language_of
from dice_lsp.core.text_offsets import line_starts, offset_at_point
from dice_lsp.core.uri import document_key
from profiler.source.document import kernelbench_classes
from profiler.source.spec import SpecError, parse_spec, spec_lines

# A file this small is analysed in a few milliseconds: at once, rather than behind a big one.
INLINE_CHARS = 32 * 1024
# How long a request waits for an analysis: past it the request is answered ContentModified
# ("skipped: still analysing"), the analysis goes on, and the client is asked to refresh its
# code lenses once it is done. A 5 MB file of 11,813 kernels takes 5-20 s on a 2-core box.
ANSWER_WITHIN_S = 10.0
UNOPENED_KEPT = 8
PROCESS_CHARS = 1024 * 1024
# One thread: analyses queue behind each other rather than take the event loop's GIL share
# in parallel, and a burst of edits to a big file analyses only the versions still asked for.
_analyses = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dice-analysis")


@dataclass
class Analysis:
    text: str
    path: str
    language: str | None  # "cuda" | "kernelbench" | None for files DICE does not work on
    lines: tuple[str, ...]  # as pygls splits them, which is how positions count lines
    line_offsets: list[int]  # offset of each of `lines`, and the text's length last
    units: list[MeasuredUnit]
    specced: frozenset[str] | None  # kernels with a spec; None when the spec has errors
    model_classes: list[tuple[str, int, int]]  # KernelBench Model/ModelNew: name, start, end
    spec: str  # the document's `dice:` lines (profiler.source.spec.spec_lines), part of every unit's key
    _keys: dict[str | None, list[str]] = field(default_factory=dict)

    def offset(self, position: types.Position, codec: PositionCodec) -> int:
        """The offset of a client position; InvalidParams for a line past the end of the text.
        A character past its line's end is the line's end, as LSP says."""
        if position.line >= len(self.lines):
            if position.line == len(self.lines) and position.character == 0:
                return len(self.text)
            raise JsonRpcInvalidParams(f"line {position.line} is past the end of the document ({len(self.lines)} lines)")
        line = self.lines[position.line]
        server = codec.position_from_client_units((line,), types.Position(0, position.character))
        return self.line_offsets[position.line] + min(server.character, len(line.rstrip("\r\n")))

    def position(self, offset: int, codec: PositionCodec) -> types.Position:
        offset = max(0, min(offset, len(self.text)))
        row = bisect.bisect_right(self.line_offsets, offset) - 1
        if row >= len(self.lines):
            return types.Position(len(self.lines), 0)
        character = codec.position_to_client_units((self.lines[row],), types.Position(0, offset - self.line_offsets[row]))
        return types.Position(row, character.character)

    def range(self, start: int, end: int, codec: PositionCodec) -> types.Range:
        return types.Range(self.position(start, codec), self.position(end, codec))

    def unit_index_at(self, offset: int) -> int | None:
        """Which of `units` holds the offset: a kernel, or anywhere in a KernelBench model."""
        if self.language == "kernelbench":
            return 0 if self.units and self.model_class_at(offset) else None
        i = bisect.bisect_right(self._unit_starts, offset) - 1
        return i if i >= 0 and self.units[i].start <= offset <= self.units[i].end else None

    def unit_at(self, offset: int) -> MeasuredUnit | None:
        i = self.unit_index_at(offset)
        return None if i is None else self.units[i]

    @functools.cached_property
    def _unit_starts(self) -> list[int]:
        return [u.start for u in self.units]

    def model_class_at(self, offset: int) -> str | None:
        return next((name for name, start, end in self.model_classes if start <= offset <= end), None)

    def has_spec(self, kernel: str) -> bool:
        """Whether the kernel has a spec; a spec with errors counts (its diagnostic says what to fix)."""
        return self.specced is None or kernel in self.specced

    def unit_keys(self, gpu: str | None) -> list[str]:
        """The result-cache key of each unit, in order."""
        if gpu not in self._keys:
            self._keys[gpu] = [result_key(u.code, self.spec, gpu) for u in self.units]
        return self._keys[gpu]


def _model_classes(text: str) -> list[tuple[str, int, int]]:
    try:
        classes = kernelbench_classes(text)
    except SyntaxError:
        return []
    starts = line_starts(text)
    return [
        (
            node.name,
            offset_at_point(text, (node.lineno - 1, 0), starts),
            offset_at_point(text, (node.end_lineno - 1, node.end_col_offset), starts),
        )
        for node in classes
    ]


def _specced(text: str) -> frozenset[str] | None:
    try:
        return frozenset(parse_spec(text))
    except SpecError:
        return None


@dataclass(frozen=True)
class Parsed:
    """The part of an analysis that needs the parsers (tree-sitter, ast)."""

    language: str | None
    units: list[MeasuredUnit]
    specced: frozenset[str] | None
    model_classes: list[tuple[str, int, int]]
    spec: str


def parse_document(text: str, path: str) -> Parsed:
    try:
        language: str | None = language_of(path) if path else None
    except TargetError:
        language = None
    return Parsed(
        language=language,
        units=measured_units(text, path) if language else [],
        specced=_specced(text) if language == "cuda" and "dice:" in text else frozenset(),
        model_classes=_model_classes(text) if language == "kernelbench" else [],
        spec=spec_lines(text) if language else "",
    )


def assemble(text: str, path: str, parsed: Parsed) -> Analysis:
    lines = tuple(text.splitlines(True))
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    return Analysis(text, path, parsed.language, lines, offsets, parsed.units, parsed.specced, parsed.model_classes,
                    parsed.spec)


def analyse(text: str, path: str) -> Analysis:
    return assemble(text, path, parse_document(text, path))


async def parse_in_process(text: str, path: str) -> Parsed:
    """parse_document in a child process (`python -m dice_lsp.lsp.document_analysis`), killed if
    the request is cancelled; it reads the text from stdin and pickles the Parsed back."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dice_lsp.lsp.document_analysis", path,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await process.communicate(text.encode("utf-8", "surrogatepass"))
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    if process.returncode != 0:
        detail = err.decode(errors="replace").strip()
        last = detail.splitlines()[-1] if detail else f"killed by signal {-process.returncode}"
        raise RuntimeError(f"the analysis of {path} failed: {last[:500]}")
    return pickle.loads(out)


class Analyses:
    """The latest analysis of each document, computed off the event loop; requests for the
    same version share one computation, and a version that is no longer the latest by the
    time its turn comes is not analysed (its requests get ContentModified)."""

    def __init__(self, on_late: Callable[[], None] = lambda: None) -> None:
        self._latest: dict[str, tuple[int | None, str, asyncio.Future[Analysis]]] = {}
        self._on_late = on_late  # an analysis a request gave up waiting for is done

    async def of(self, document: TextDocument) -> Analysis:
        key = document_key(document.uri)
        try:
            text = document.source  # read from disk when the editor has not opened it
        except (OSError, UnicodeDecodeError) as exc:
            raise JsonRpcInvalidParams(f"{document.uri} is not open here and cannot be read: {exc}") from exc
        held = self._latest.get(key)
        # An open document's version names its text; one read from disk has none, so compare.
        if held is None or held[0] != document.version or (document.version is None and held[1] != text):
            if len(text) <= INLINE_CHARS:
                future = asyncio.get_running_loop().create_future()
                future.set_result(analyse(text, document.path))
            else:
                future = asyncio.ensure_future(self._analyse_aside(key, document.version, text, document.path))
            held = (document.version, text, future)
            self._latest.pop(key, None)
            self._latest[key] = held  # last in the dict: the most recent
            self._forget_unopened_beyond(UNOPENED_KEPT)
        future = held[2]
        try:
            return await asyncio.wait_for(asyncio.shield(future), ANSWER_WITHIN_S)
        except asyncio.TimeoutError:
            future.add_done_callback(lambda done: None if done.cancelled() or done.exception() else self._on_late())
            raise JsonRpcContentModified(
                f"skipped: {document.path or document.uri} ({len(text) / 1e6:.1f} MB) is still being analysed after "
                f"{ANSWER_WITHIN_S:.0f} s; code lenses are refreshed when it is done") from None

    async def _analyse_aside(self, key: str, version: int | None, text: str, path: str) -> Analysis:
        loop = asyncio.get_running_loop()
        async with _big_files():
            if self._latest.get(key, (version,))[0] != version:
                raise JsonRpcContentModified(f"{path} changed before it was analysed")
            # tree-sitter holds the GIL while it parses (a second for 5 MB): in a thread that
            # would stop the event loop all the same, so large files are parsed in a process.
            if len(text) > PROCESS_CHARS:
                parsed = await parse_in_process(text, path)
            else:
                parsed = await loop.run_in_executor(_analyses, parse_document, text, path)
            return await loop.run_in_executor(_analyses, assemble, text, path, parsed)

    def _forget_unopened_beyond(self, count: int) -> None:
        """Files read from disk (no version: the editor has not opened them) are kept for the
        next request, but only the `count` most recent: a client asking about one large file
        after another must not fill the memory with their texts."""
        unopened = [key for key, (version, _, _) in self._latest.items() if version is None]
        for key in unopened[: max(0, len(unopened) - count)]:
            del self._latest[key]

    def forget(self, uri: str) -> None:
        self._latest.pop(document_key(uri), None)


@functools.cache
def _big_files() -> asyncio.Semaphore:
    return asyncio.Semaphore(1)


if __name__ == "__main__":
    # The module as the server imports it, so that what is pickled names its classes there.
    from dice_lsp.lsp import document_analysis

    source = sys.stdin.buffer.read().decode("utf-8", "surrogatepass")
    parsed = document_analysis.parse_document(source, sys.argv[1])
    sys.stdout.buffer.write(pickle.dumps(parsed, protocol=pickle.HIGHEST_PROTOCOL))
