"""Fill and optimize as the editor sees them: snapshot the document, run the job with
cancellable progress, and hand its end to the outcome policy (core/outcome.py), which this
module only translates: the candidate it says to apply becomes a WorkspaceEdit.

Shared by codeAction/resolve and the `dice.fill` / `dice.optimize` commands; both get an
Outcome and an edit, and only differ in how the edit reaches the client.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from dice_lsp.core import jobs, outcome
from dice_lsp.core.jobs import JobResult, Snapshot
from dice_lsp.core.outcome import Outcome
from dice_lsp.core.targets import TargetError, fill_target, optimize_target
from dice_lsp.lsp.edits import apply_edit, candidate_edit
from dice_lsp.lsp.lsp_text import current_text
from dice_lsp.lsp.progress import finished, work_done
from dice_lsp.lsp.request_args import document_snapshot, offset_of, range_offsets
from dice_lsp.lsp.session import Session  # at run time: pygls evaluates handlers' annotations

if TYPE_CHECKING:
    from dice_lsp.core.cache import ResultCache

TITLES = {"fill": "DICE: filling the selection", "optimize": "DICE: optimizing the kernel"}
_MESSAGE_TYPES = {
    outcome.INFO: types.MessageType.Info,
    outcome.WARNING: types.MessageType.Warning,
    outcome.ERROR: types.MessageType.Error,
}


class EditorClient:
    """The outcome policy's Client over one editor session."""

    def __init__(self, ls: Session) -> None:
        self._ls = ls

    @property
    def gpu(self) -> str | None:
        return self._ls.gpu

    @property
    def cache(self) -> ResultCache:
        return self._ls.cache

    def show(self, level: str, message: str) -> None:
        self._ls.show(_MESSAGE_TYPES[level], f"DICE: {message}")

    def current_text(self, uri: str) -> tuple[int | None, str]:
        version, text = current_text(self._ls.workspace, uri)
        return version, "" if text is None else text

    def show_verdicts(self, result: JobResult, text: str, in_document: int | None) -> None:
        self._ls.diagnostics.set_job_verdicts(result, text, in_document)

    def restart_engine(self, error: Exception) -> None:
        asyncio.ensure_future(self._ls.engines.recover(error))


def _validate(ls: Session, kind: str, snapshot: Snapshot, args: dict) -> dict[str, Any]:
    """The job's arguments in offsets; raises TargetError before any model is loaded."""
    if kind == "fill":
        start, end = range_offsets(ls, snapshot, args)
        if start == end:
            raise TargetError("select the code to fill first (the selection is the masked span)")
        fill_target(snapshot.text, snapshot.path, start, end)
        return {"start": start, "end": end}
    offset = offset_of(ls, snapshot, args)
    optimize_target(snapshot.text, snapshot.path, offset=offset)
    return {"offset": offset}


async def _run(ls: Session, kind: str, snapshot: Snapshot, where: dict, token: types.ProgressToken | None) -> JobResult:
    settings = await ls.ready_settings()
    task = asyncio.current_task()
    async with work_done(ls, TITLES[kind], on_cancel=task.cancel, token=token) as report:
        if not ls.engines.has(settings):  # the first job, or a new model: seconds before generating
            report(f"loading model {settings.model}", 0)
        engine = await ls.engines.get(settings)
        ls.status.update(busy=True, message=f"{kind}: generating")

        def report_and_status(message: str, percentage: int | None) -> None:
            report(message, percentage)
            ls.status.update(busy=True, message=f"{kind}: {message}")

        if kind == "fill":
            return await jobs.fill(engine, snapshot, where["start"], where["end"], settings, report_and_status)
        return await jobs.optimize(engine, snapshot, settings, report_and_status, offset=where["offset"])


async def generate(
    ls: Session, kind: str, args: dict, token: types.ProgressToken | None = None
) -> tuple[Outcome, types.WorkspaceEdit | None]:
    """Run a fill or optimize job for `args` ({uri, range} or {uri, position}): its outcome,
    and the edit that applies the candidate the outcome names (None: nothing to apply).

    Raises CancelledError only when the calling request itself was cancelled; every other
    end (cancelled from the progress bar or dice.cancel, no model, a crash) is an Outcome.
    """
    client = EditorClient(ls)
    try:
        snapshot = await document_snapshot(ls, args)
        where = _validate(ls, kind, snapshot, args)
    except (TargetError, ValueError, KeyError, TypeError) as exc:
        return outcome.refused(client, exc), None

    job = ls.jobs.start(kind, snapshot.uri, _run(ls, kind, snapshot, where, token), ls.protocol.msg_id)
    ended = await outcome.settle(client, job.id, finished(ls, job))
    edit = None
    if ended.apply is not None and ended.result is not None:
        edit = candidate_edit(ls, ended.result, ended.apply, snapshot.text, snapshot.version)
    return ended, edit


async def _generate_command(ls: Session, kind: str, args: tuple) -> dict:
    ended, edit = await generate(ls, kind, args[0] if args else None)
    answer = ended.to_json()
    answer["applied"] = False
    if edit is not None:
        answer["applied"] = await apply_edit(ls, edit, f"DICE {kind}")
    return answer


async def fill_command(ls: Session, *args: Any) -> dict:
    return await _generate_command(ls, "fill", args)


async def optimize_command(ls: Session, *args: Any) -> dict:
    return await _generate_command(ls, "optimize", args)
