"""What a fill or optimize job comes to for the user: the outcome policy, apart from the LSP.

Every end of a job is an Outcome with a message, never an exception for the editor:

- cancelled (from the progress bar or dice.cancel): said, nothing applied;
- no model: the message says how to set one; the engine's worker died: it is restarted and
  the user asked to run the action again; the engine refused the job: said;
- the document changed while the job ran (stale): nothing applied, the verdicts shown on
  the document as it is now where the span still fits, `stale: true` in the answer;
- no GPU, or none both correct and faster: nothing applied, each candidate stays a code
  action; a candidate whose measurement proves nothing (impossible, suspicious, unstable,
  unproven) or that the profiler flagged is never `best`, so never applied by itself
  (jobs.best_candidate), and the message counts them;
- otherwise the best candidate is to be applied (`Outcome.apply`).

Each candidate's verdict is cached under the kernel it produced, whatever the outcome. The
editor side is a `Client` (the LSP adapter's, or a test's plain class).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Protocol

from dice_lsp.core.cache import ResultCache
from dice_lsp.core.engine_host import ModelUnavailable, worker_died
from dice_lsp.core.job_registry import JobCancelled, JobRegistry
from dice_lsp.core.jobs import JobResult
from dice_lsp.core.measured import measured_units, unit_key
from dice_lsp.core.slots import candidate_slot
from dice_lsp.core.targets import TargetError
from dice_lsp.core.verdict_view import candidate_title, not_proven, summary
from engine.types import EngineError

log = logging.getLogger(__name__)

INFO, WARNING, ERROR = "info", "warning", "error"


class Client(Protocol):
    """What the policy needs from the editor."""

    gpu: str | None
    cache: ResultCache

    def show(self, level: str, message: str) -> None:
        """Tell the user (level: INFO, WARNING or ERROR)."""

    def current_text(self, uri: str) -> tuple[int | None, str]:
        """The document's version and text as the editor holds them now."""

    def show_verdicts(self, result: JobResult, text: str, in_document: int | None) -> None:
        """The candidates' verdicts over the job's span of `text` (the document, or the text it
        holds once candidate `in_document` is applied)."""

    def restart_engine(self, error: Exception) -> None:
        """Start restarting the engine whose worker died (without waiting for it)."""


@dataclass
class Outcome:
    message: str
    job: str | None = None
    result: JobResult | None = None
    apply: int | None = None  # the candidate to put in the document now (the best), if any
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


def refused(client: Client, error: Exception) -> Outcome:
    """The request named nothing a job can run on (checked before any model is loaded)."""
    client.show(WARNING, str(error))
    return Outcome(str(error), error=True)


async def settle(client: Client, job_id: str, job: Awaitable[JobResult]) -> Outcome:
    """The outcome of the running job `job_id` once `job` (its result) is in.

    Raises CancelledError only when the awaiting task itself is cancelled (the request was).
    """
    try:
        result = await job
    except JobCancelled as exc:
        client.show(INFO, str(exc))
        return Outcome(str(exc), job=job_id, cancelled=True)
    except ModelUnavailable as exc:
        client.show(ERROR, str(exc))
        return Outcome(str(exc), job=job_id, error=True)
    except EngineError as exc:
        if worker_died(exc):
            message = f"the engine failed: {exc}. It is being restarted; run the action again."
            client.restart_engine(exc)
        else:
            message = f"the engine refused the job: {exc}"
        client.show(ERROR, message)
        return Outcome(message, job=job_id, error=True)
    except TargetError as exc:
        client.show(WARNING, str(exc))
        return Outcome(str(exc), job=job_id, error=True)
    except Exception as exc:  # a bug or a profiler failure: the user sees it, the server lives on
        log.exception("job %s failed", job_id)
        message = f"job {job_id} failed: {exc}"
        client.show(ERROR, message)
        return Outcome(message, job=job_id, error=True)
    return conclude(client, job_id, result)


def cache_verdicts(cache: ResultCache, result: JobResult, gpu: str | None) -> None:
    """Remember each candidate's verdict under the kernel it produced, so that applying it
    (now or later, or reopening the file) shows its measurement in lenses and hovers."""
    for _, verdict, new_text in result.candidates:
        for unit in measured_units(new_text, result.snapshot.path):
            if result.target.kernel in (None, unit.name):
                cache.put(result.snapshot.path, unit_key(new_text, unit, gpu), verdict)


def conclude(client: Client, job_id: str, result: JobResult) -> Outcome:
    """What a finished job's result comes to: applied, stale, or left as code actions."""
    cache_verdicts(client.cache, result, client.gpu)
    snapshot = result.snapshot
    version, text = client.current_text(snapshot.uri)
    unchanged = version == snapshot.version and text == snapshot.text
    n = len(result.candidates)
    if n == 0:
        return Outcome("the model returned no candidate", job=job_id, result=result)
    if not unchanged:
        # The candidates stay code actions only where they still fit the document (core/slots.py).
        still_fits = candidate_slot(result, text) is not None
        message = f"the document changed while job {job_id} ran, so no candidate was applied. " + (
            "Run it again, or pick a candidate from the code actions on the range."
            if still_fits
            else "The text around the range changed too, so its candidates no longer fit: run it again."
        )
        client.show(WARNING, message)
        client.show_verdicts(result, text, None)
        return Outcome(message, job=job_id, result=result, extra={"stale": True})
    if result.best is None:
        client.show_verdicts(result, snapshot.text, None)
        reason = "not timed: no GPU" if result.gpu is None else "none was both correct and faster"
        unproven = sum(not_proven(v) is not None for _, v, _ in result.candidates)
        if unproven:
            reason += f"; {unproven} measured but not proven (each candidate's verdict says why)"
        message = f"{n} candidate(s), none applied ({reason}); each is a code action on the range"
        client.show(INFO, message)
        return Outcome(message, job=job_id, result=result)
    client.show_verdicts(result, result.candidates[result.best][2], result.best)
    verdict = result.candidates[result.best][1]
    return Outcome(f"applied candidate {result.best + 1}: {summary(verdict)}", job=job_id, result=result, apply=result.best)


def chosen_candidate(jobs: JobRegistry, job_id: str, index: int) -> JobResult:
    """The finished job whose candidate `index` the user picked; ValueError says why not."""
    job = jobs.get(job_id)
    if job is None or job.result is None:
        raise ValueError(f"job {job_id} is unknown or has not finished (results are dropped when the file changes on disk)")
    if not 0 <= index < len(job.result.candidates):
        raise ValueError(f"job {job_id} has {len(job.result.candidates)} candidate(s), not {index + 1}")
    return job.result
