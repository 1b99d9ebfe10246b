"""Work-done progress for one job, cancellable from the editor, and the status once it ends.

The client may hand a token with the request; otherwise the server creates one when the
client supports window/workDoneProgress. A `window/workDoneProgress/cancel` for the token
cancels the job's task (pygls cancels a Future it keeps per token).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from dice_lsp.core.job_registry import Job, wait

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

    from dice_lsp.lsp.session import Session


def _client_shows_progress(server: LanguageServer) -> bool:
    window = server.client_capabilities.window
    return bool(window and window.work_done_progress)


@contextlib.asynccontextmanager
async def work_done(
    server: LanguageServer,
    title: str,
    on_cancel: Callable[[], object],
    token: types.ProgressToken | None = None,
) -> AsyncIterator[Callable[[str, int | None], None]]:
    """Yield `report(message, percentage)`; `on_cancel` runs if the user cancels."""
    progress = server.work_done_progress
    if token is None and _client_shows_progress(server):
        token = f"dice-{uuid.uuid4()}"
        try:
            await progress.create_async(token)
        except Exception:  # a client that refuses progress still gets the job done
            token = None
    if token is None:
        yield lambda message, percentage: None
        return

    progress.begin(token, types.WorkDoneProgressBegin(title=title, cancellable=True, percentage=0))
    cancelled = progress.tokens[token]
    cancelled.add_done_callback(lambda f: on_cancel() if f.cancelled() else None)
    last: list[tuple[str, int | None]] = []

    def report(message: str, percentage: int | None) -> None:
        if last and last[0] == (message, percentage):
            return  # engines report every step; the editor needs only changes
        last[:] = [(message, percentage)]
        progress.report(token, types.WorkDoneProgressReport(message=message, percentage=percentage))

    end_message = "done"
    try:
        yield report
    except asyncio.CancelledError:
        end_message = "cancelled"
        raise
    except Exception:
        end_message = "failed"
        raise
    finally:
        progress.tokens.pop(token, None)
        progress.end(token, types.WorkDoneProgressEnd(message=end_message))


async def finished(ls: Session, job: Job) -> Any:
    """The job's result (job_registry.wait); the status says "ready" once no job runs."""
    try:
        return await wait(job)
    finally:
        if not ls.jobs.running():
            ls.status.update(busy=False, message="ready")
