"""Jobs the server is running or has finished, so that each can be cancelled (by job id, by
the request that started it, or from its progress bar) and its candidates applied later."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from dice_lsp.jobs import JobResult
from dice_lsp.lsp_text import document_key

# Finished jobs kept for their "Apply candidate" actions; older ones are forgotten.
KEEP_FINISHED = 20


@dataclass
class Job:
    id: str
    kind: str  # "fill" | "optimize" | "profile"
    uri: str
    task: asyncio.Task
    request_id: object | None  # the JSON-RPC id of the request that started it
    result: Any = None  # a JobResult for fill and optimize


class JobCancelled(Exception):
    """The job was cancelled (from its progress bar, or by dice.cancel), not the request waiting for it."""


async def wait(job: Job) -> Any:
    """The job's result; CancelledError only if the awaiting task itself is being cancelled."""
    try:
        return await job.task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
        raise JobCancelled(f"job {job.id} cancelled") from None


class JobRegistry:
    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._ids = itertools.count(1)

    def start(self, kind: str, uri: str, work: Coroutine[Any, Any, Any], request_id: object | None) -> Job:
        job = Job(str(next(self._ids)), kind, uri, asyncio.ensure_future(work), request_id)
        self._jobs[job.id] = job
        job.task.add_done_callback(lambda _: self._finish(job))
        return job

    def _finish(self, job: Job) -> None:
        if job.task.cancelled() or job.task.exception() is not None:
            self._jobs.pop(job.id, None)
            return
        job.result = job.task.result()
        finished = [j for j in self._jobs.values() if j.task.done()]
        for old in finished[:-KEEP_FINISHED]:
            self._jobs.pop(old.id, None)

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(str(job_id))

    def running(self) -> list[Job]:
        return [j for j in self._jobs.values() if not j.task.done()]

    def finished(self, uri: str) -> list[Job]:
        key = document_key(uri)
        return [j for j in self._jobs.values() if document_key(j.uri) == key and isinstance(j.result, JobResult)]

    def forget(self, uri: str) -> None:
        """Drop the finished jobs of a document whose text changed outside the editor."""
        for job in self.finished(uri):
            self._jobs.pop(job.id, None)

    def cancel(self, job_id: str | None = None) -> list[str]:
        """Cancel one running job, or all of them; the ids cancelled."""
        jobs = self.running() if job_id is None else [j for j in self.running() if j.id == str(job_id)]
        for job in jobs:
            job.task.cancel()
        return [j.id for j in jobs]

    def cancel_request(self, request_id: object) -> None:
        for job in self.running():
            if job.request_id == request_id:
                job.task.cancel()
