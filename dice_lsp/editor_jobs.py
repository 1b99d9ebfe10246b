"""Fill and optimize as the editor sees them: snapshot the document, run the job with
cancellable progress, then turn its result into an edit, diagnostics and cached measurements.

Shared by codeAction/resolve and the `dice.fill` / `dice.optimize` commands; both get an
Outcome and only differ in how the edit reaches the client.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from dice_lsp import jobs
from dice_lsp.cache import ResultCache
from dice_lsp.diagnostics import compiler_diagnostics, first_error, verdict_diagnostic
from dice_lsp.edits import candidate_edit, candidate_slot
from dice_lsp.engine_host import ModelUnavailable, worker_died
from dice_lsp.job_registry import JobCancelled, wait
from dice_lsp.jobs import JobResult, Snapshot
from dice_lsp.lsp_text import text_document
from dice_lsp.measured import measured_units, unit_key
from dice_lsp.progress import work_done
from dice_lsp.request_args import document_snapshot, offset_of, range_offsets
from dice_lsp.targets import TargetError, fill_target, optimize_target
from dice_lsp.verdict_view import candidate_title, summary

if TYPE_CHECKING:
    from dice_lsp.server import DiceServer

log = logging.getLogger(__name__)

TITLES = {"fill": "DICE: filling the selection", "optimize": "DICE: optimizing the kernel"}


@dataclass
class Outcome:
    message: str
    job: str | None = None
    result: JobResult | None = None
    edit: types.WorkspaceEdit | None = None  # the best candidate, when it may be applied
    cancelled: bool = False
    error: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """What the dice.fill / dice.optimize commands answer (editor clients show it)."""
        candidates = []
        if self.result is not None:
            candidates = [
                {"index": i, "title": candidate_title(i, v), "status": v.status, "message": v.message}
                for i, (_, v, _) in enumerate(self.result.candidates)
            ]
        return {
            "job": self.job,
            "message": self.message,
            "best": self.result.best if self.result else None,
            "gpu": self.result.gpu if self.result else None,
            "candidates": candidates,
            "cancelled": self.cancelled,
            "error": self.error,
            **self.extra,
        }


def _show(server: DiceServer, kind: types.MessageType, message: str) -> None:
    server.show(kind, f"DICE: {message}")


def cache_verdicts(cache: ResultCache, result: JobResult, gpu: str | None) -> None:
    """Remember each candidate's verdict under the kernel it produced, so that applying it
    (now or later, or reopening the file) shows its measurement in lenses and hovers."""
    for _, verdict, new_text in result.candidates:
        for unit in measured_units(new_text, result.snapshot.path):
            if result.target.kernel in (None, unit.name):
                cache.put(result.snapshot.path, unit_key(new_text, unit, gpu), verdict)


def publish_job_diagnostics(server: DiceServer, result: JobResult, text: str, in_document: int | None) -> None:
    """One diagnostic per candidate over the job's span of `text` (the document, or the text
    it will hold once candidate `in_document` is applied); the compiler's messages of the
    candidate in the document at their own lines."""
    slot = candidate_slot(result, text)
    if slot is None:
        return
    document = text_document(server, result.snapshot.uri, text)
    found = []
    for i, (_, verdict, _) in enumerate(result.candidates):
        applied = i == in_document
        label = f"DICE candidate {i + 1}{' (applied)' if applied else ''}: {summary(verdict)}{first_error(verdict)}"
        found.append(verdict_diagnostic(document, *slot, label, verdict, in_document=applied))
    if in_document is not None:
        found += compiler_diagnostics(document, result.candidates[in_document][1].diagnostics)
    server.diagnostics.set_verdicts(result.snapshot.uri, text, found)


def _validate(server: DiceServer, kind: str, snapshot: Snapshot, args: dict) -> dict[str, Any]:
    """The job's arguments in offsets; raises TargetError before any model is loaded."""
    if kind == "fill":
        start, end = range_offsets(server, snapshot, args)
        if start == end:
            raise TargetError("select the code to fill first (the selection is the masked span)")
        fill_target(snapshot.text, snapshot.path, start, end)
        return {"start": start, "end": end}
    offset = offset_of(server, snapshot, args)
    optimize_target(snapshot.text, snapshot.path, offset=offset)
    return {"offset": offset}


async def _run(server: DiceServer, kind: str, snapshot: Snapshot, where: dict, token: types.ProgressToken | None) -> JobResult:
    settings = await server.ready_settings()
    task = asyncio.current_task()
    async with work_done(server, TITLES[kind], on_cancel=task.cancel, token=token) as report:
        engine = await server.engines.get(settings)
        server.status.update(busy=True, message=f"{kind}: generating")

        def report_and_status(message: str, percentage: int | None) -> None:
            report(message, percentage)
            server.status.update(busy=True, message=f"{kind}: {message}")

        if kind == "fill":
            return await jobs.fill(engine, snapshot, where["start"], where["end"], settings, report_and_status)
        return await jobs.optimize(engine, snapshot, settings, report_and_status, offset=where["offset"])


async def generate(server: DiceServer, kind: str, args: dict, token: types.ProgressToken | None = None) -> Outcome:
    """Run a fill or optimize job for `args` ({uri, range} or {uri, position}).

    Raises CancelledError only when the calling request itself was cancelled; every other
    end (cancelled from the progress bar or dice.cancel, no model, a crash) is an Outcome.
    """
    from engine.types import EngineError

    try:
        snapshot = document_snapshot(server, args)
        where = _validate(server, kind, snapshot, args)
    except (TargetError, ValueError, KeyError, TypeError) as exc:
        _show(server, types.MessageType.Warning, str(exc))
        return Outcome(str(exc), error=True)

    job = server.jobs.start(kind, snapshot.uri, _run(server, kind, snapshot, where, token), server.protocol.msg_id)
    try:
        result = await wait(job)
    except JobCancelled as exc:
        _show(server, types.MessageType.Info, str(exc))
        return Outcome(str(exc), job=job.id, cancelled=True)
    except ModelUnavailable as exc:
        _show(server, types.MessageType.Error, str(exc))
        return Outcome(str(exc), job=job.id, error=True)
    except EngineError as exc:
        if worker_died(exc):
            message = f"the engine failed: {exc}. It is being restarted; run the action again."
            asyncio.ensure_future(server.engines.recover(exc))
        else:
            message = f"the engine refused the job: {exc}"
        _show(server, types.MessageType.Error, message)
        return Outcome(message, job=job.id, error=True)
    except TargetError as exc:
        _show(server, types.MessageType.Warning, str(exc))
        return Outcome(str(exc), job=job.id, error=True)
    except Exception as exc:  # a bug or a profiler failure: the user sees it, the server lives on
        log.exception("job %s failed", job.id)
        _show(server, types.MessageType.Error, f"job {job.id} failed: {exc}")
        return Outcome(f"job {job.id} failed: {exc}", job=job.id, error=True)
    finally:
        if not server.jobs.running():
            server.status.update(busy=False, message="ready")
    return _conclude(server, job.id, result)


def _conclude(server: DiceServer, job_id: str, result: JobResult) -> Outcome:
    cache_verdicts(server.cache, result, server.gpu)
    snapshot = result.snapshot
    document = server.workspace.get_text_document(snapshot.uri)
    unchanged = document.version == snapshot.version and document.source == snapshot.text
    n = len(result.candidates)
    if n == 0:
        return Outcome("the model returned no candidate", job=job_id, result=result)
    if not unchanged:
        message = (
            f"the document changed while job {job_id} ran, so no candidate was applied. "
            "Run it again, or pick a candidate from the code actions on the range if it still fits."
        )
        _show(server, types.MessageType.Warning, message)
        publish_job_diagnostics(server, result, document.source, None)
        return Outcome(message, job=job_id, result=result, extra={"stale": True})
    if result.best is None:
        publish_job_diagnostics(server, result, snapshot.text, None)
        reason = "not timed: no GPU" if result.gpu is None else "none was both correct and faster"
        message = f"{n} candidate(s), none applied ({reason}); each is a code action on the range"
        _show(server, types.MessageType.Info, message)
        return Outcome(message, job=job_id, result=result)
    best_text = result.candidates[result.best][2]
    publish_job_diagnostics(server, result, best_text, result.best)
    edit = candidate_edit(server, result, result.best, snapshot.text, snapshot.version)
    verdict = result.candidates[result.best][1]
    return Outcome(f"applied candidate {result.best + 1}: {summary(verdict)}", job=job_id, result=result, edit=edit)
