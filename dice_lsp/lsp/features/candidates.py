"""A finished job's candidates: apply one the user picked, list them for editor pickers,
cancel running jobs."""

from __future__ import annotations

from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from dice_lsp.core.outcome import Outcome, chosen_candidate
from dice_lsp.lsp.edits import apply_edit, candidate_edit
from dice_lsp.lsp.lsp_text import read_document
from dice_lsp.lsp.request_args import job_and_index
from dice_lsp.lsp.session import Session  # at run time: pygls evaluates handlers' annotations

STALE = "the text around the range changed since the job ran; run it again"


async def apply_candidate_command(ls: Session, *args: Any) -> dict:
    try:
        job_id, index = job_and_index(args[0] if args else None)
        result = chosen_candidate(ls.jobs, job_id, index)
    except ValueError as exc:
        ls.show(types.MessageType.Warning, f"DICE: {exc}")
        return {"applied": False, "error": str(exc)}
    try:
        document = await read_document(ls.workspace, result.snapshot.uri)
    except JsonRpcInvalidParams as exc:
        ls.show(types.MessageType.Warning, f"DICE: {exc.message}")
        return {"applied": False, "error": exc.message}
    edit = candidate_edit(ls, result, index, document.source, document.version)
    if edit is None:
        ls.show(types.MessageType.Warning, f"DICE: {STALE}")
        return {"applied": False, "error": STALE}
    applied = await apply_edit(ls, edit, f"DICE candidate {index + 1}")
    if applied:
        ls.diagnostics.set_job_verdicts(result, result.candidates[index][2], index)
        ls.refresh_lenses()
    return {"applied": applied}


def show_candidates_command(ls: Session, *args: Any) -> dict:
    """Every finished job of a document and its candidates' verdicts (for editor pickers)."""
    uri = args[0].get("uri") if args and isinstance(args[0], dict) else None
    found = []
    for job in ls.jobs.finished(uri) if uri else []:
        found.append(Outcome("", job=job.id, result=job.result).to_json())
    return {"jobs": found}


def cancel_command(ls: Session, *args: Any) -> dict:
    job = args[0].get("job") if args and isinstance(args[0], dict) else None
    return {"cancelled": ls.jobs.cancel(None if job is None else str(job))}
