"""Profile a kernel as it stands (no model needed).

Profiling runs the profiler (sandboxed subprocesses) in a thread; its verdict becomes a
diagnostic over the kernel and is cached for the lens and hover.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types

import profiler
from dice_lsp.core.job_registry import JobCancelled
from dice_lsp.core.jobs import in_thread
from dice_lsp.core.measured import MeasuredUnit, unit_key, unit_to_profile
from dice_lsp.core.targets import TargetError, language_of
from dice_lsp.lsp.diagnostics import verdict_diagnostic
from dice_lsp.lsp.lsp_text import text_document
from dice_lsp.lsp.progress import finished, work_done
from dice_lsp.lsp.request_args import document_snapshot, offset_of
from dice_lsp.lsp.session import Session  # at run time: pygls evaluates handlers' annotations
from profiler.verdict.types import Verdict

log = logging.getLogger(__name__)


async def profile(ls: Session, args: Any, token: types.ProgressToken | None = None) -> dict[str, Any]:
    """Compile, check and time the kernel at args' position; the verdict as JSON."""
    try:
        snapshot = await document_snapshot(ls, args)
        language_of(snapshot.path)  # a file DICE does not read, before the position is checked
        unit = unit_to_profile(snapshot.text, snapshot.path, offset_of(ls, snapshot, args))
    except (TargetError, ValueError) as exc:
        ls.show(types.MessageType.Warning, f"DICE: {exc}")
        return {"error": str(exc)}
    job = ls.jobs.start("profile", snapshot.uri, _run_profile(ls, snapshot.text, snapshot.path, unit, token), ls.protocol.msg_id)
    try:
        verdict: Verdict = await finished(ls, job)
    except JobCancelled as exc:
        return {"cancelled": True, "message": str(exc)}
    except Exception as exc:  # the profiler failed itself: say so, keep serving
        log.exception("profiling failed")
        ls.show(types.MessageType.Error, f"DICE: profiling failed: {exc}")
        return {"error": str(exc)}
    ls.cache.put(snapshot.path, unit_key(snapshot.text, unit, ls.gpu), verdict)
    document = text_document(ls, snapshot.uri, snapshot.text)
    ls.diagnostics.set_verdicts(
        snapshot.uri,
        snapshot.text,
        [verdict_diagnostic(document, unit.name_start, unit.name_end, f"{unit.name}: {verdict.message}", verdict)],
    )
    ls.refresh_lenses()
    return verdict.to_json()


async def _run_profile(ls: Session, text: str, path: str, unit: MeasuredUnit, token: types.ProgressToken | None) -> Verdict:
    kernel = unit.name if language_of(path) == "cuda" else None
    task = asyncio.current_task()
    async with work_done(ls, f"DICE: profiling {unit.name}", on_cancel=task.cancel, token=token) as report:
        report("compiling, checking and timing", None)
        ls.status.update(busy=True, message=f"profiling {unit.name}")
        return await in_thread(profiler.profile, text, path, kernel=kernel, time_limit=(await ls.ready_settings()).time_limit)


async def profile_command(ls: Session, *args: Any) -> dict:
    return await profile(ls, args[0] if args else None)
