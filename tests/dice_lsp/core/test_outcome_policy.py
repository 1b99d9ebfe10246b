"""The outcome policy (dice_lsp/core/outcome.py) without a language server: what a fill or
optimize job comes to (applied, stale, not timed, none faster, flagged, cancelled, no model,
worker died), driven through a plain client that records what the editor would be told.
The same rules end to end, through a real server and editor, are in test_lsp_jobs.py and
test_lsp_no_model.py."""

from __future__ import annotations

import asyncio

import pytest

from dice_lsp.core import outcome
from dice_lsp.core.cache import ResultCache
from dice_lsp.core.engine_host import ModelUnavailable
from dice_lsp.core.job_registry import JobCancelled, JobRegistry
from dice_lsp.core.jobs import JobResult, Snapshot, best_candidate
from dice_lsp.core.measured import measured_units, unit_key
from dice_lsp.core.targets import optimize_target
from engine.types import Candidate, EngineError, EngineGone
from profiler.checks.compile import find_nvcc
from profiler.verdict.types import Verdict

PATH = "/work/k.cu"
SOURCE = """\
__global__ void scale(float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 2.0f * x[i];
}
"""


class RecordingClient:
    """The editor as the policy sees it: a document held at some version, and a record of
    everything the user is shown."""

    def __init__(self, cache: ResultCache, gpu: str | None, version: int = 1, text: str = SOURCE) -> None:
        self.cache = cache
        self.gpu = gpu
        self.version, self.text = version, text
        self.shown: list[tuple[str, str]] = []
        self.verdicts_shown: list[tuple[str, int | None]] = []
        self.restarted: list[Exception] = []

    def show(self, level: str, message: str) -> None:
        self.shown.append((level, message))

    def current_text(self, uri: str) -> tuple[int | None, str]:
        return self.version, self.text

    def show_verdicts(self, result: JobResult, text: str, in_document: int | None) -> None:
        self.verdicts_shown.append((text, in_document))

    def restart_engine(self, error: Exception) -> None:
        self.restarted.append(error)


def verdict(status: str, speedup: float | None = None, **extra) -> Verdict:
    timed = speedup is not None
    return Verdict(
        status=status, compiled=status != "compile_error", correct=True if timed else None, speedup=speedup,
        speedup_ci=None, time_ms=1.0 if timed else None, baseline_ms=speedup if timed else None, diagnostics=[],
        message=f"{status} {speedup}", gpu="Test GPU" if timed else None, extra=extra,
    )


def job_result(verdicts: list[Verdict], gpu: str | None) -> JobResult:
    """An optimize job of SOURCE's kernel whose i-th candidate multiplies by i + 3."""
    target = optimize_target(SOURCE, PATH, kernel="scale")
    candidates = []
    for i, v in enumerate(verdicts):
        new_kernel = SOURCE[target.start:target.end].replace("2.0f", f"{i + 3}.0f")
        new_text = SOURCE[: target.start] + new_kernel + SOURCE[target.end :]
        candidates.append((Candidate(new_kernel, 10, 4, 0.1, "eos"), v, new_text))
    return JobResult(candidates, best_candidate(verdicts), gpu, Snapshot("file:///work/k.cu", 1, PATH, SOURCE), target)


@pytest.fixture
def cache(tmp_path) -> ResultCache:
    return ResultCache(tmp_path / "cache")


def test_the_best_candidate_is_applied_and_shown_in_the_document(cache):
    result = job_result([verdict("not_faster", 0.9), verdict("faster", 1.5), verdict("faster", 2.5)], "Test GPU")
    client = RecordingClient(cache, "Test GPU")
    ended = outcome.conclude(client, "7", result)
    assert ended.apply == 2 and not ended.error and not ended.cancelled
    assert ended.message.startswith("applied candidate 3: ")
    assert client.verdicts_shown == [(result.candidates[2][2], 2)]
    assert client.shown == []
    assert ended.to_json()["best"] == 2 and "stale" not in ended.to_json()


def test_a_document_changed_while_the_job_ran_gets_nothing(cache):
    result = job_result([verdict("faster", 2.0)], "Test GPU")
    edited = SOURCE + "// the user typed this\n"
    client = RecordingClient(cache, "Test GPU", version=2, text=edited)
    ended = outcome.conclude(client, "3", result)
    assert ended.apply is None and ended.extra == {"stale": True} and ended.to_json()["stale"] is True
    assert [level for level, _ in client.shown] == [outcome.WARNING]
    assert "changed while job 3 ran" in client.shown[0][1]
    assert client.verdicts_shown == [(edited, None)]  # on the document as it is now


def test_the_same_text_at_a_newer_version_is_stale_too(cache):
    client = RecordingClient(cache, "Test GPU", version=5)
    assert outcome.conclude(client, "1", job_result([verdict("faster", 2.0)], "Test GPU")).extra == {"stale": True}


def test_without_a_gpu_nothing_is_applied(cache):
    result = job_result([verdict("no_gpu"), verdict("no_gpu")], None)
    client = RecordingClient(cache, None)
    ended = outcome.conclude(client, "1", result)
    assert ended.apply is None and not ended.error
    assert ended.message == "2 candidate(s), none applied (not timed: no GPU); each is a code action on the range"
    assert client.shown == [(outcome.INFO, ended.message)]
    assert client.verdicts_shown == [(SOURCE, None)]


def test_when_none_is_faster_nothing_is_applied(cache):
    client = RecordingClient(cache, "Test GPU")
    ended = outcome.conclude(client, "1", job_result([verdict("not_faster", 0.8), verdict("wrong")], "Test GPU"))
    assert ended.apply is None
    assert "none was both correct and faster" in ended.message


def test_a_flagged_candidate_is_never_applied_by_itself(cache):
    flagged = verdict("faster", 40.0, flags=["suspiciously fast"])
    client = RecordingClient(cache, "Test GPU")
    alone = outcome.conclude(client, "1", job_result([flagged], "Test GPU"))
    assert alone.apply is None and "none was both correct and faster" in alone.message
    beside = outcome.conclude(client, "2", job_result([flagged, verdict("faster", 1.2)], "Test GPU"))
    assert beside.apply == 1  # the honest one, though slower


@pytest.mark.parametrize("status", ["impossible", "suspicious", "unstable", "unproven"])
def test_a_measurement_that_proves_nothing_is_never_applied_by_itself(cache, status):
    fast = verdict(status, 50.0)
    assert best_candidate([fast]) is None
    client = RecordingClient(cache, "Test GPU")
    alone = outcome.conclude(client, "1", job_result([fast], "Test GPU"))
    assert alone.apply is None and "none was both correct and faster" in alone.message
    assert "1 measured but not proven (each candidate's verdict says why)" in alone.message
    beside = outcome.conclude(client, "2", job_result([fast, verdict("faster", 1.2)], "Test GPU"))
    assert beside.apply == 1 and beside.message.startswith("applied candidate 2: 1.2x faster")


def test_no_candidate_at_all(cache):
    client = RecordingClient(cache, "Test GPU")
    ended = outcome.conclude(client, "1", job_result([], "Test GPU"))
    assert ended.message == "the model returned no candidate" and ended.apply is None


def test_every_verdict_is_cached_under_the_kernel_it_produced(cache):
    result = job_result([verdict("faster", 2.0), verdict("wrong")], "Test GPU")
    outcome.conclude(RecordingClient(cache, "Test GPU", version=9), "1", result)  # stale: cached all the same
    for _, v, new_text in result.candidates:
        (unit,) = measured_units(new_text, PATH)
        assert cache.get(PATH, unit_key(new_text, unit, "Test GPU")) == v


async def ends_with(error: BaseException) -> JobResult:
    raise error


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("error", "level", "fields"),
    [
        (JobCancelled("job 4 cancelled"), outcome.INFO, {"cancelled": True, "error": False}),
        (ModelUnavailable("Could not load the model 'x'"), outcome.ERROR, {"cancelled": False, "error": True}),
        (EngineError("the prompt is longer than the context"), outcome.ERROR, {"cancelled": False, "error": True}),
        (RuntimeError("a bug"), outcome.ERROR, {"cancelled": False, "error": True}),
    ],
)
async def test_a_job_that_ends_without_a_result_is_a_message(cache, error, level, fields):
    client = RecordingClient(cache, "Test GPU")
    ended = await outcome.settle(client, "4", ends_with(error))
    assert {k: ended.to_json()[k] for k in fields} == fields
    assert ended.job == "4" and ended.result is None and ended.apply is None
    assert client.shown == [(level, ended.message)]
    assert client.restarted == []
    if isinstance(error, EngineError):
        assert ended.message == "the engine refused the job: the prompt is longer than the context"


@pytest.mark.asyncio
async def test_a_dead_worker_is_restarted_and_the_user_asked_to_run_again(cache):
    client = RecordingClient(cache, "Test GPU")
    died = EngineGone("engine worker exited (code -9)")
    ended = await outcome.settle(client, "2", ends_with(died))
    assert ended.error and client.restarted == [died]
    assert ended.message == f"the engine failed: {died}. It is being restarted; run the action again."


@pytest.mark.asyncio
async def test_a_finished_job_is_concluded(cache):
    async def done() -> JobResult:
        return job_result([verdict("faster", 3.0)], "Test GPU")

    ended = await outcome.settle(RecordingClient(cache, "Test GPU"), "5", done())
    assert ended.apply == 0


@pytest.mark.asyncio
async def test_cancelling_the_request_itself_is_not_an_outcome(cache):
    """A cancelled awaiting task (the request was cancelled) propagates; the policy turns only
    the job's own end into an Outcome."""
    started = asyncio.Event()

    async def forever() -> JobResult:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.ensure_future(outcome.settle(RecordingClient(cache, "Test GPU"), "1", forever()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.asyncio
async def test_a_candidate_is_chosen_only_from_a_finished_job(cache):
    jobs = JobRegistry()
    result = job_result([verdict("faster", 2.0)], "Test GPU")

    async def done() -> JobResult:
        return result

    job = jobs.start("optimize", "file:///work/k.cu", done(), request_id=1)
    with pytest.raises(ValueError, match="unknown or has not finished"):
        outcome.chosen_candidate(jobs, job.id, 0)
    await job.task
    assert outcome.chosen_candidate(jobs, job.id, 0) is result
    with pytest.raises(ValueError, match="has 1 candidate"):
        outcome.chosen_candidate(jobs, job.id, 1)
    with pytest.raises(ValueError, match="unknown"):
        outcome.chosen_candidate(jobs, "99", 0)


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_a_job_whose_candidates_all_fail_to_compile_names_the_gpu_it_was_judged_on(tmp_path):
    """No candidate reached the GPU, yet there is one (or not): the answer says which, rather
    than "no GPU" on a machine that has one (seen on the H200 with the built-in model)."""
    import profiler
    from dice_lsp.core.config import Settings
    from dice_lsp.core.jobs import judge

    path = tmp_path / "k.cu"
    path.write_text(SOURCE)
    target = optimize_target(SOURCE, str(path), kernel="scale")
    broken = SOURCE[target.start:target.end].replace("2.0f * x[i]", "2.0f * undefined_name[i]")
    result = asyncio.run(judge(Snapshot(path.as_uri(), 1, str(path), SOURCE), target,
                               [Candidate(broken, 0, 0, 0.0, "eos")], Settings(time_limit=60), lambda m, p: None))
    assert [v.status for _, v, _ in result.candidates] == ["compile_error"]
    assert result.gpu == profiler.gpu_name()


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
@pytest.mark.parametrize("document_eol", ["\n", "\r\n"])
def test_candidates_are_judged_in_the_documents_line_endings(tmp_path, document_eol):
    """Editors rewrite an inserted text's line endings to the buffer's (Neovim: CR and CRLF
    become LF), so a candidate with stray CRs is judged as the text the editor will hold, and
    two candidates that differ only in line endings are one."""
    from dice_lsp.core.config import Settings
    from dice_lsp.core.jobs import judge

    source = SOURCE.replace("\n", document_eol)
    path = tmp_path / "k.cu"
    path.write_bytes(source.encode())
    target = optimize_target(source, str(path), kernel="scale")
    body = source[target.start:target.end]
    mixed = body.replace(document_eol, "\r").replace("2.0f", "3.0f")
    crlf = body.replace(document_eol, "\r\n").replace("2.0f", "3.0f")
    result = asyncio.run(judge(Snapshot(path.as_uri(), 1, str(path), source), target,
                               [Candidate(mixed, 0, 0, 0.0, "eos"), Candidate(crlf, 0, 0, 0.0, "eos")],
                               Settings(time_limit=60), lambda m, p: None))
    assert len(result.candidates) == 1
    candidate, _, document = result.candidates[0]
    assert candidate.text == body.replace("2.0f", "3.0f")
    assert document == source.replace("2.0f", "3.0f")
    assert result.replacement(0) == candidate.text
