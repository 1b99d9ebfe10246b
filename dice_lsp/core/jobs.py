"""The job pipeline shared by the language server and `dice fill` / `dice optimize`.

A job takes a snapshot of a document (uri, version, text), asks the engine for candidates
for one span of it, builds each candidate's whole new document, and has the profiler judge
every one against the document as it stands. It never touches the editor: the caller
decides what to apply, and refuses to if the document moved on from the snapshot.

The engine runs in its worker process (awaited; cancelling the task cancels the job there);
the profiler blocks, so it runs in a thread and stops through `should_cancel`. A model that
decodes on this machine's GPU holds the GPU's turn while it does (profiler.sandbox.gpu_turn),
as every judging run there does: another job's candidate is never timed beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import profiler
from dice_lsp.core.config import Settings
from dice_lsp.core.targets import Target, fill_target, optimize_target
from dice_lsp.core.text_offsets import position_at
from profiler.sandbox.gpu_turn import POLL_S, GpuTurn, torch_device_key
from profiler.source.document import kernelbench_infill_parts, kernelbench_problem
from profiler.verdict.types import Verdict

if TYPE_CHECKING:
    from engine.serving.client import AsyncEngine
    from engine.types import Candidate, Progress

T = TypeVar("T")

# (message, percentage or None): how far a job is, for a progress bar.
ReportProgress = Callable[[str, "int | None"], None]

# Generation is the first half of the bar, judging the second.
_GENERATING_SHARE = 50


@dataclass(frozen=True)
class Snapshot:
    uri: str
    version: int | None
    path: str
    text: str


@dataclass
class JobResult:
    candidates: list[tuple[Candidate, Verdict, str]]  # (candidate, verdict, new document text)
    best: int | None  # the fastest correct-and-faster candidate
    gpu: str | None
    snapshot: Snapshot
    target: Target  # the span of the snapshot every candidate replaces

    def replacement(self, index: int) -> str:
        """The text candidate `index` puts in place of the target span."""
        new_text = self.candidates[index][2]
        tail = len(self.snapshot.text) - self.target.end
        return new_text[self.target.start : len(new_text) - tail]

    def to_json(self) -> dict[str, Any]:
        """DESIGN's `--json` object for fill and optimize (lines and columns 1-based)."""
        text = self.snapshot.text
        (sl, sc), (el, ec) = position_at(text, self.target.start), position_at(text, self.target.end)
        return {
            "candidates": [
                {
                    "text": candidate.text,
                    "compiled": verdict.compiled,
                    "correct": verdict.correct,
                    "speedup": verdict.speedup,
                    "time_ms": verdict.time_ms,
                    "baseline_ms": verdict.baseline_ms,
                    "status": verdict.status,
                    "message": verdict.message,
                    "diagnostics": [d.to_json() for d in verdict.diagnostics],
                }
                for candidate, verdict, _ in self.candidates
            ],
            "best": self.best,
            "gpu": self.gpu,
            "range": {"start": {"line": sl + 1, "column": sc + 1}, "end": {"line": el + 1, "column": ec + 1}},
            "best_text": self.candidates[self.best][2] if self.best is not None else None,
        }


def best_candidate(verdicts: list[Verdict]) -> int | None:
    """Index of the largest speedup among candidates proven correct and faster (Verdict.proven).
    A verdict whose measurement proves nothing (impossible, suspicious, unstable, unproven) or
    that the profiler flagged (a cheating pattern) is never picked by itself: the user applies
    it by choice."""
    faster = [(v.speedup or 0.0, i) for i, v in enumerate(verdicts) if v.status == "faster" and v.proven]
    return max(faster)[1] if faster else None


async def in_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking profiler call in a thread without blocking the event loop.

    Cancelling the awaiting task sets the call's `should_cancel` and waits for it to stop,
    so that no sandbox process outlives the job.
    """
    stop = threading.Event()
    future = asyncio.get_running_loop().run_in_executor(
        None, functools.partial(fn, *args, should_cancel=stop.is_set, **kwargs)
    )
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        stop.set()
        with contextlib.suppress(Exception):
            await future
        raise


def _thread_safe(report: ReportProgress) -> ReportProgress:
    """`report` called on the event loop, whichever thread calls the result."""
    loop = asyncio.get_running_loop()
    return lambda message, percentage: loop.call_soon_threadsafe(report, message, percentage)


def _engine_progress(report: ReportProgress) -> Callable[[Progress], None]:
    def on_progress(p: Progress) -> None:
        if p.phase == "prefill":
            report("generating: reading the prompt", 0)
        else:
            share = _GENERATING_SHARE * (p.block - 1) // max(p.blocks, 1)
            report(f"generating: block {p.block} of {p.blocks}", share)

    return on_progress


def _engine_gpu(engine: AsyncEngine, device: str) -> str | None:
    """The GPU (gpu_turn.device_key) a started engine decodes on, if it is this machine's."""
    return torch_device_key(device) if engine.runs_here else None


@contextlib.asynccontextmanager
async def _decoding_turn(engine: AsyncEngine, report: ReportProgress):
    """Hold the GPU's turn while `engine` decodes on this machine's GPU."""
    info = await engine.start()
    key = _engine_gpu(engine, info.device)
    turn = GpuTurn(key) if key is not None else None
    try:
        if turn is not None and not turn.try_acquire():
            report("waiting for the GPU: another job is timing candidates on it", 0)
            while not turn.try_acquire():
                await asyncio.sleep(POLL_S)
        yield
    finally:
        if turn is not None:
            turn.release()


def _judge_progress(report: ReportProgress) -> Callable[[int, int], None]:
    def on_progress(index: int, total: int) -> None:
        if index == 0:  # the profiler builds them all at once first
            report(f"judging: building {total} candidates", _GENERATING_SHARE)
            return
        share = _GENERATING_SHARE + (100 - _GENERATING_SHARE) * (index - 1) // max(total, 1)
        report(f"judging: candidate {index} of {total}", share)

    return on_progress


def _line_ending(text: str) -> str:
    """The document's line ending: CRLF when its first line ends so, else LF."""
    first = text.find("\n")
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


def _in_document_style(candidate: Candidate, eol: str) -> Candidate:
    """The candidate with the document's line endings. Editors rewrite every line ending of
    an inserted text to the buffer's own (Neovim turns CR and CRLF into LF, VS Code into the
    document's EOL), so the text judged is the text the editor will hold once applied."""
    text = re.sub(r"\r\n|\r|\n", eol, candidate.text)
    return candidate if text == candidate.text else dataclasses.replace(candidate, text=text)


def _unique(candidates: list[Candidate], eol: str) -> list[Candidate]:
    """One candidate per distinct text, in the document's line endings: judging the same
    code twice proves nothing new."""
    seen: set[str] = set()
    unique = []
    for candidate in (_in_document_style(c, eol) for c in candidates):
        if candidate.text not in seen:
            seen.add(candidate.text)
            unique.append(candidate)
    return unique


async def judge(
    snapshot: Snapshot,
    target: Target,
    candidates: list[Candidate],
    settings: Settings,
    report: ReportProgress,
) -> JobResult:
    """Build each candidate's document and have the profiler judge them all."""
    candidates = _unique(candidates, _line_ending(snapshot.text))
    before, after = snapshot.text[: target.start], snapshot.text[target.end :]
    documents = [before + target.lead + c.text + target.trail + after for c in candidates]
    verdicts: list[Verdict] = []
    if documents:
        report(f"judging: candidate 1 of {len(documents)}", _GENERATING_SHARE)
        verdicts = await in_thread(
            profiler.judge,
            snapshot.text,
            documents,
            snapshot.path,
            kernel=target.kernel,
            time_limit=settings.time_limit,
            on_progress=_judge_progress(_thread_safe(report)),
        )
    gpu = next((v.gpu for v in verdicts if v.gpu), None)
    if gpu is None and verdicts and not any(v.status == "no_gpu" for v in verdicts):
        # Judged on a GPU although no candidate reached it (none compiled, say): the answer
        # names the GPU rather than telling the user there is none.
        gpu = await asyncio.to_thread(profiler.gpu_name)
    return JobResult(
        candidates=list(zip(candidates, verdicts, documents)),
        best=best_candidate(verdicts),
        gpu=gpu,
        snapshot=snapshot,
        target=target,
    )


async def fill(
    engine: AsyncEngine, snapshot: Snapshot, start: int, end: int, settings: Settings, report: ReportProgress
) -> JobResult:
    """Candidates for the text between offsets start and end, judged."""
    target = fill_target(snapshot.text, snapshot.path, start, end)
    if target.language == "kernelbench":
        reference, prefix, suffix = kernelbench_infill_parts(snapshot.text, start, end)
    else:
        reference, prefix, suffix = None, snapshot.text[:start], snapshot.text[end:]
    async with _decoding_turn(engine, report):
        report("generating", 0)
        candidates = await engine.infill(
            prefix,
            suffix,
            reference=reference,
            n=settings.candidates,
            max_tokens=settings.max_tokens,
            on_progress=_engine_progress(report),
            **settings.sampling(),
        )
    return await judge(snapshot, target, candidates, settings, report)


async def optimize(
    engine: AsyncEngine,
    snapshot: Snapshot,
    settings: Settings,
    report: ReportProgress,
    *,
    offset: int | None = None,
    kernel: str | None = None,
) -> JobResult:
    """Rewrites of the kernel at `offset` (or named `kernel`), or a ModelNew, judged."""
    target = optimize_target(snapshot.text, snapshot.path, offset=offset, kernel=kernel)
    code = snapshot.text[target.start : target.end] if target.language == "cuda" else kernelbench_problem(snapshot.text)
    async with _decoding_turn(engine, report):
        report("generating", 0)
        candidates = await engine.optimize(
            code,
            language=target.language,
            n=settings.candidates,
            max_tokens=settings.optimize_tokens,
            on_progress=_engine_progress(report),
            **settings.sampling(),
        )
    return await judge(snapshot, target, candidates, settings, report)
