"""Profile a kernel as it stands, and write a benchmark spec for it: the two actions that
need no model.

Profiling runs the profiler (sandboxed subprocesses) in a thread; its verdict becomes a
diagnostic over the kernel and is cached for the lens and hover.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

import profiler
from dice_lsp.diagnostics import verdict_diagnostic
from dice_lsp.edits import replace_edit
from dice_lsp.job_registry import JobCancelled, wait
from dice_lsp.jobs import in_thread
from dice_lsp.lsp_text import text_document
from dice_lsp.measured import MeasuredUnit, measured_units, unit_at, unit_key
from dice_lsp.progress import work_done
from dice_lsp.request_args import document_snapshot, offset_of
from dice_lsp.targets import TargetError, kernel_at, language_of
from dice_lsp.text_offsets import offset_at_point
from profiler.results import Verdict
from profiler.spec import spec_template

if TYPE_CHECKING:
    from dice_lsp.server import DiceServer

log = logging.getLogger(__name__)


async def profile(server: DiceServer, args: Any, token: types.ProgressToken | None = None) -> dict[str, Any]:
    """Compile, check and time the kernel at args' position; the verdict as JSON."""
    try:
        snapshot = document_snapshot(server, args)
        language_of(snapshot.path)
        offset = offset_of(server, snapshot, args)
        if language_of(snapshot.path) == "cuda":
            unit = unit_at(snapshot.text, snapshot.path, offset)
        else:  # the whole KernelBench file is one benchmark, wherever the cursor is in it
            unit = next(iter(measured_units(snapshot.text, snapshot.path)), None)
        if unit is None:
            raise TargetError("put the cursor inside a __global__ function (or on Model) to profile it")
    except (TargetError, ValueError) as exc:
        server.show(types.MessageType.Warning, f"DICE: {exc}")
        return {"error": str(exc)}
    job = server.jobs.start("profile", snapshot.uri, _run_profile(server, snapshot.text, snapshot.path, unit, token), server.protocol.msg_id)
    try:
        verdict: Verdict = await wait(job)
    except JobCancelled as exc:
        return {"cancelled": True, "message": str(exc)}
    except Exception as exc:  # the profiler failed itself: say so, keep serving
        log.exception("profiling failed")
        server.show(types.MessageType.Error, f"DICE: profiling failed: {exc}")
        return {"error": str(exc)}
    finally:
        if not server.jobs.running():
            server.status.update(busy=False, message="ready")
    server.cache.put(snapshot.path, unit_key(snapshot.text, unit, server.gpu), verdict)
    document = text_document(server, snapshot.uri, snapshot.text)
    server.diagnostics.set_verdicts(
        snapshot.uri,
        snapshot.text,
        [verdict_diagnostic(document, unit.name_start, unit.name_end, f"{unit.name}: {verdict.message}", verdict)],
    )
    server.refresh_lenses()
    return verdict.to_json()


async def _run_profile(server: DiceServer, text: str, path: str, unit: MeasuredUnit, token: types.ProgressToken | None) -> Verdict:
    kernel = unit.name if language_of(path) == "cuda" else None
    task = asyncio.current_task()
    async with work_done(server, f"DICE: profiling {unit.name}", on_cancel=task.cancel, token=token) as report:
        report("compiling, checking and timing", None)
        server.status.update(busy=True, message=f"profiling {unit.name}")
        return await in_thread(profiler.profile, text, path, kernel=kernel, time_limit=(await server.ready_settings()).time_limit)


def add_spec_edit(server: DiceServer, args: Any) -> types.WorkspaceEdit:
    """The `// dice:` lines for the kernel at args' position, inserted above it."""
    snapshot = document_snapshot(server, args)
    if language_of(snapshot.path) != "cuda":
        raise TargetError("benchmark specs are for .cu/.cuh files; a KernelBench file is its own benchmark")
    kernel = kernel_at(snapshot.text, offset_of(server, snapshot, args))
    if kernel is None:
        raise TargetError("put the cursor inside a __global__ function to add its benchmark spec")
    try:
        lines = spec_template(snapshot.text, kernel.name)
    except ValueError as exc:
        raise TargetError(str(exc)) from exc
    line_start = offset_at_point(snapshot.text, (kernel.start[0], 0))
    return replace_edit(server, snapshot.uri, snapshot.version, snapshot.text, line_start, line_start, lines)
