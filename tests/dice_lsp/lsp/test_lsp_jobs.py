"""Fill and optimize end to end on a CPU: the real server, the real engine worker with a tiny
random checkpoint, the real profiler (nvcc). The tiny model's candidates do not compile, which
is what a judged candidate looks like without a GPU or with a bad model; nothing is timed
here (no GPU), so no candidate is applied on its own and each is offered as a code action."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from lsprotocol import types

from ..conftest import SAXPY
# The statement on line 10 (1-based): `y[i] = a * x[i] + y[i];`
STATEMENT = types.Range(types.Position(9, 8), types.Position(9, 31))
IN_KERNEL = types.Range(types.Position(7, 4), types.Position(7, 4))

KERNELBENCH = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(1024), torch.randn(1024)]


def get_init_inputs():
    return []
"""


pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def editor(model_editor):
    return model_editor


@pytest.fixture
def workspace(model_editor, request) -> Path:
    folder = model_editor.root / request.node.name.replace("[", "-").replace("]", "")
    folder.mkdir()
    return folder


def progress_messages(editor) -> list[str]:
    return [
        getattr(value, "message", None) or getattr(value, "title", "")
        for reports in editor.client.progress_reports.values()
        for value in reports
    ]


async def wait_for_generation(editor) -> None:
    await editor.wait_for(lambda: any(m.startswith("generating: block") for m in progress_messages(editor)), what="generation")


def fill_args(uri: str) -> dict:
    """dice.fill's arguments for the saxpy statement (STATEMENT, as JSON)."""
    return {"uri": uri, "range": {"start": {"line": 9, "character": 8}, "end": {"line": 9, "character": 31}}}


async def open_for_a_long_job(editor, workspace: Path) -> str:
    """saxpy.cu opened, with a one-candidate budget long enough (2000 tokens) that a test can
    act on the job while it generates."""
    await editor.configure(maxTokens=2000, candidates=1)
    path = workspace / "saxpy.cu"
    path.write_text(SAXPY)
    return editor.open(path)


def action(actions: list[types.CodeAction], title: str) -> types.CodeAction:
    found = [a for a in actions if a.title == title]
    assert found, f"no action {title!r} in {[a.title for a in actions]}"
    return found[0]


async def run_as_command(editor, found: types.CodeAction) -> dict:
    """Run an action's command (as a client without codeAction/resolve does) and return its answer."""
    if found.data is not None:
        return await editor.execute(found.data["command"], found.data["args"])
    return await editor.execute(found.command.command, *found.command.arguments)


def outside(text: str, start: int, end_from_back: int) -> tuple[str, str]:
    return text[:start], text[len(text) - end_from_back :]


async def test_fill_resolves_then_each_candidate_is_an_action(editor, workspace: Path):
    path = workspace / "saxpy.cu"
    path.write_text(SAXPY)
    uri = editor.open(path)
    fill = action(await editor.code_actions(uri, STATEMENT), "Fill selection with DICE")
    resolved = await editor.client.code_action_resolve_async(fill)
    assert resolved.edit is None, "nothing is timed without a GPU, so nothing qualifies as the best"
    messages = progress_messages(editor)
    assert any(m.startswith("generating: block 1 of") for m in messages), messages
    assert any(m.startswith("judging: candidate 1 of") for m in messages), messages
    assert any("none applied" in m for m in editor.messages()), editor.messages()
    busy = [s for s in editor.statuses if s["busy"]]
    assert any(s["message"].startswith("fill: generating") for s in busy), editor.statuses
    assert editor.statuses[-1]["busy"] is False and editor.statuses[-1]["model"]
    # The status bar says which decoding path serves (a CPU runs the eager cached one).
    assert any(s["message"] == "ready: model loaded on cpu, decoding path cached" for s in editor.statuses), \
        editor.statuses

    # Verdicts on the range, from the real compiler.
    await editor.wait_for(lambda: any(d.source == "dice" and d.code for d in editor.client.diagnostics.get(uri, [])), what="verdict diagnostics")
    verdicts = [d for d in editor.client.diagnostics[uri] if d.code]
    assert verdicts and all(d.range.start == STATEMENT.start for d in verdicts)
    assert all(d.message.startswith("DICE candidate ") for d in verdicts)

    # Every candidate is a follow-up action; applying one touches only the range.
    candidates = [a for a in await editor.code_actions(uri, STATEMENT) if a.title.startswith("Apply candidate")]
    assert 1 <= len(candidates) <= 2
    assert candidates[0].command.command == "dice.applyCandidate"
    before = editor.text(uri)
    result = await editor.run_action(candidates[0])
    assert result["applied"] is True
    after = editor.text(uri)
    start = len("".join(SAXPY.splitlines(True)[:9])) + 8
    tail = len(SAXPY) - (start + len("y[i] = a * x[i] + y[i];"))
    assert outside(after, start, tail) == outside(before, start, tail)
    # The same candidates stay on offer over the new text, and the original can come back.
    again = [a for a in await editor.code_actions(uri, STATEMENT) if a.title.startswith("Apply candidate")]
    assert len(again) == len(candidates)


@pytest.mark.one_client("neovim")
async def test_a_job_that_loads_the_model_says_so_in_its_progress(editor, workspace: Path, tiny_checkpoint: Path):
    """A job that has to start the model (the first after start-up, or after the model setting
    changed) reports it before generating; the next job, the model warm, goes straight on."""
    await editor.configure(model=f"{tiny_checkpoint}/")  # the same folder spelt otherwise: another engine
    path = workspace / "saxpy.cu"
    path.write_text(SAXPY)
    uri = editor.open(path)
    await editor.execute("dice.fill", fill_args(uri))
    loading = [m for m in progress_messages(editor) if m.startswith("loading model")]
    assert loading == [f"loading model {tiny_checkpoint}/"], progress_messages(editor)
    editor.client.progress_reports.clear()
    await editor.execute("dice.fill", fill_args(uri))
    assert not [m for m in progress_messages(editor) if m.startswith("loading model")]


@pytest.mark.one_client("neovim")
async def test_compile_error_in_a_candidate_is_reported(editor, workspace: Path):
    path = workspace / "saxpy.cu"
    path.write_text(SAXPY)
    uri = editor.open(path)
    result = await run_as_command(editor, action(await editor.code_actions(uri, STATEMENT), "Fill selection with DICE"))
    assert result["job"] and result["applied"] is False and not result["error"]
    statuses = {c["status"] for c in result["candidates"]}
    assert statuses <= {"compile_error", "no_gpu", "wrong"}, result
    for c in result["candidates"]:
        if c["status"] == "compile_error":
            assert c["title"].startswith(f"Apply candidate {c['index'] + 1}: does not compile: line ")


async def test_optimize_command_rewrites_only_the_kernel(editor, workspace: Path):
    text = "// a helper that stays as it is\n#define SCALE 2\n" + SAXPY + "\nint untouched = 1;\n"
    path = workspace / "two.cu"
    path.write_text(text)
    uri = editor.open(path)
    found = await editor.code_actions(uri, types.Range(types.Position(9, 4), types.Position(9, 4)))
    result = await run_as_command(editor, action(found, "Optimize this kernel with DICE"))
    assert result["candidates"] and not result["error"], result
    assert any("generating" in m for m in progress_messages(editor))
    applied = await editor.execute("dice.applyCandidate", {"uri": uri, "job": result["job"], "index": 0})
    assert applied["applied"] is True
    new = editor.text(uri)
    assert new.startswith("// a helper that stays as it is\n#define SCALE 2\n// dice: let n = 1 << 20\n")
    assert new.endswith("\nint untouched = 1;\n")


@pytest.mark.one_client("neovim")
async def test_optimize_model_appends_model_new(editor, workspace: Path):
    path = workspace / "add.py"
    path.write_text(KERNELBENCH)
    uri = editor.open(path)
    found = await editor.code_actions(uri, types.Range(types.Position(4, 8), types.Position(4, 8)))
    result = await run_as_command(editor, action(found, "Optimize this kernel with DICE"))
    assert result["candidates"], result
    applied = await editor.execute("dice.applyCandidate", {"uri": uri, "job": result["job"], "index": 0})
    assert applied["applied"] is True
    assert editor.text(uri).startswith(KERNELBENCH + "\n\n"), "ModelNew goes after everything, which stays"


@pytest.mark.one_client("neovim")
async def test_document_edited_mid_job_is_not_overwritten(editor, workspace: Path):
    path = workspace / "saxpy.cu"
    path.write_text(SAXPY)
    uri = editor.open(path)
    job = asyncio.ensure_future(editor.execute("dice.fill", fill_args(uri)))
    await wait_for_generation(editor)
    editor.change(uri, types.Range(types.Position(0, 0), types.Position(0, 0)), "// edited while DICE works\n")
    result = await job
    assert result.get("stale") is True, result
    assert any("document changed while job" in m for m in editor.messages())
    assert editor.text(uri) == "// edited while DICE works\n" + SAXPY


@pytest.mark.one_client("neovim")
async def test_cancel_from_progress_and_by_job_id(editor, workspace: Path):
    uri = await open_for_a_long_job(editor, workspace)
    args = fill_args(uri)

    job = asyncio.ensure_future(editor.execute("dice.fill", args))
    await wait_for_generation(editor)
    (token,) = [t for t, r in editor.client.progress_reports.items() if r]
    editor.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    result = await asyncio.wait_for(job, 30)
    assert result["cancelled"] is True, result
    assert editor.client.progress_reports[token][-1].kind == "end"
    assert editor.client.progress_reports[token][-1].message == "cancelled"

    job = asyncio.ensure_future(editor.execute("dice.fill", args))
    await editor.wait_for(lambda: len([r for r in editor.client.progress_reports.values() if len(r) > 1]) >= 2, what="second job")
    cancelled = await editor.execute("dice.cancel", {})
    assert len(cancelled["cancelled"]) == 1
    assert (await asyncio.wait_for(job, 30))["cancelled"] is True
    # The engine is still there for the next job.
    await editor.configure()
    assert (await editor.execute("dice.fill", args))["candidates"]


async def cancel_once_generating(editor, request: asyncio.Future, msg_id: str, what: str) -> None:
    """$/cancelRequest for `msg_id` once generation runs: the request fails as cancelled and
    the job's progress ends with "cancelled"."""
    await wait_for_generation(editor)
    editor.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
    with pytest.raises(Exception, match="cancel"):
        await asyncio.wait_for(request, 30)
    await editor.wait_for(
        lambda: any(r[-1].kind == "end" and r[-1].message == "cancelled" for r in editor.client.progress_reports.values() if r),
        what=what,
    )


@pytest.mark.one_client("visual-studio-code")
async def test_cancel_request_of_a_resolve(editor, workspace: Path):
    uri = await open_for_a_long_job(editor, workspace)
    fill = action(await editor.code_actions(uri, STATEMENT), "Fill selection with DICE")
    request = asyncio.ensure_future(
        editor.client.protocol.send_request_async(types.CODE_ACTION_RESOLVE, fill, msg_id="resolve-1")
    )
    await cancel_once_generating(editor, request, "resolve-1", "progress end")

    # The same for a command: its job stops too, not only the request.
    editor.client.progress_reports.clear()
    command = types.ExecuteCommandParams(command="dice.fill", arguments=[fill_args(uri)])
    request = asyncio.ensure_future(editor.client.protocol.send_request_async(types.WORKSPACE_EXECUTE_COMMAND, command, msg_id="fill-1"))
    await cancel_once_generating(editor, request, "fill-1", "the job to stop")


def engine_workers(server_pid: int) -> list[int]:
    """The engine worker processes the server started (children running engine.serving.worker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == server_pid and "engine.serving.worker" in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.one_client("neovim")
async def test_worker_crash_is_reported_and_the_engine_restarts(editor, workspace: Path):
    uri = await open_for_a_long_job(editor, workspace)
    args = fill_args(uri)
    job = asyncio.ensure_future(editor.execute("dice.fill", args))
    await wait_for_generation(editor)
    (worker,) = engine_workers(editor.client._server.pid)
    os.kill(worker, signal.SIGKILL)
    result = await asyncio.wait_for(job, 60)
    assert result["error"] is True and "engine worker killed by signal 9 (SIGKILL" in result["message"], result
    await editor.wait_for(lambda: any(s["message"] == "engine restarted after a crash" for s in editor.statuses), what="restart status")
    assert engine_workers(editor.client._server.pid) not in ([], [worker])
    await editor.configure()
    assert (await editor.execute("dice.fill", args))["candidates"]
