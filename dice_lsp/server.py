"""The dice-lsp language server: every LSP handler, each a few lines that unpack the
params, call the module that does the work, and answer in lsprotocol types.

Heavy work never runs on the event loop: the engine lives in its worker process
(engine.client.AsyncEngine) and the profiler in threads that drive sandboxed subprocesses.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import os
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls import uris
from pygls.lsp.server import LanguageServer

from dice_lsp import actions, editor_jobs, kernel_tools, transport
from dice_lsp.cache import ResultCache
from dice_lsp.compile_check import CompileChecker
from dice_lsp.config import Settings, parse_settings
from dice_lsp.diagnostics import DiagnosticsStore
from dice_lsp.document_analysis import Analyses, Analysis
from dice_lsp.edits import candidate_edit
from dice_lsp.engine_host import EngineHost
from dice_lsp.file_watch import FileWatcher
from dice_lsp.job_registry import JobRegistry
from dice_lsp.lenses import code_lenses, hover
from dice_lsp.lsp_text import open_document
from dice_lsp.measured import live_keys
from dice_lsp.protocol import DiceProtocol, JsonResult
from dice_lsp.request_args import job_and_index
from dice_lsp.status import StatusReporter
from dice_lsp.targets import TargetError

log = logging.getLogger("dice_lsp")

VERSION = "0.1.0"
# A client that never sends `initialized` still gets its jobs run, with what it sent so far.
SETTINGS_WAIT_S = 10.0


class DiceServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("dice-lsp", VERSION, protocol_cls=DiceProtocol)
        self.settings = Settings()
        self.status = StatusReporter(self)
        self.engines = EngineHost(self.status)
        self.jobs = JobRegistry()
        self.cache = ResultCache()
        self.diagnostics = DiagnosticsStore(self)
        self.checker = CompileChecker(self, self.diagnostics)
        self.watcher = FileWatcher(self.on_disk_change)
        self.analyses = Analyses()
        self.gpu: str | None = None
        # Set once the client's settings are in (workspace/configuration after `initialized`):
        # a job sent right after `initialized` must not run with the defaults.
        self.settings_loaded = asyncio.Event()

    async def ready_settings(self) -> Settings:
        try:
            await asyncio.wait_for(self.settings_loaded.wait(), SETTINGS_WAIT_S)
        except asyncio.TimeoutError:
            log.warning("no settings from the client after %.0f s; using what it sent", SETTINGS_WAIT_S)
        return self.settings

    async def release(self) -> None:
        """Stop everything this server started: its client is gone or shutting down."""
        self.jobs.cancel()
        self.checker.cancel_all()
        self.watcher.stop()
        await self.engines.close()

    async def analysis(self, uri: str) -> Analysis:
        """The analysis of the document's current version (computed off the event loop)."""
        return await self.analyses.of(self.workspace.get_text_document(uri))

    def show(self, kind: types.MessageType, message: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def apply_settings(self, raw: Any) -> None:
        self.settings, problems = parse_settings(raw)
        for problem in problems:
            self.show(types.MessageType.Warning, f"dice-lsp settings: {problem}")

    async def reload_settings(self, pushed: Any = None) -> None:
        """Settings from workspace/configuration when the client has it, else what it pushed."""
        workspace = self.client_capabilities.workspace
        if workspace and workspace.configuration:
            try:
                items = await self.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section="dice")])
                )
                pushed = items[0] if items else None
            except Exception as exc:  # a client that fails the request keeps the pushed settings
                log.warning("workspace/configuration failed: %s", exc)
        if pushed is not None:
            self.apply_settings(pushed)

    def refresh_lenses(self) -> None:
        workspace = self.client_capabilities.workspace
        if workspace and workspace.code_lens and workspace.code_lens.refresh_support:
            self.workspace_code_lens_refresh(None)

    async def detect_gpu(self) -> None:
        import profiler

        try:
            self.gpu = await asyncio.get_running_loop().run_in_executor(None, profiler.gpu_name)
        except Exception as exc:  # no GPU query at all still leaves compile checks working
            log.warning("GPU detection failed: %s", exc)
            self.gpu = None
        self.status.update(gpu=self.gpu, message="ready" if self.gpu else "ready (no GPU: results are not timed)")
        self.refresh_lenses()

    def on_disk_change(self, path: str) -> None:
        """A watched file changed outside the editor: drop the results that no longer match it."""
        uri = uris.from_fs_path(path) or path
        if open_document(self.workspace, uri) is not None:
            return  # the editor owns the text; its didChange keeps results in step
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = ""
        dropped = self.cache.prune(path, live_keys(text, path, self.gpu))
        self.jobs.forget(uri)
        self.diagnostics.clear_verdicts(uri)
        if dropped:
            log.info("dropped %d stale result(s) of %s", dropped, path)
            self.refresh_lenses()


_FEATURES: list[tuple[str, Any, Callable]] = []
_COMMANDS: list[tuple[str, Callable]] = []


def feature(name: str, options: Any = None) -> Callable[[Callable], Callable]:
    def record(handler: Callable) -> Callable:
        _FEATURES.append((name, options, handler))
        return handler

    return record


def command(name: str) -> Callable[[Callable], Callable]:
    def record(handler: Callable) -> Callable:
        _COMMANDS.append((name, handler))
        return handler

    return record


def create_server() -> DiceServer:
    """A server with every handler registered: one per editor connection."""
    ls = DiceServer()
    for name, options, handler in _FEATURES:
        ls.feature(name, options)(handler)
    for name, handler in _COMMANDS:
        ls.command(name)(handler)
    return ls


@feature(types.INITIALIZE)
def initialize(ls: DiceServer, params: types.InitializeParams) -> None:
    ls.apply_settings(params.initialization_options)


@feature(types.INITIALIZED)
async def initialized(ls: DiceServer, params: types.InitializedParams) -> None:
    ls.status.update(message="starting")
    roots = [uris.to_fs_path(folder.uri) for folder in ls.workspace.folders.values()] or [ls.workspace.root_path]
    for path in roots:
        if path:
            ls.watcher.watch(path)
    try:
        await ls.reload_settings()
    finally:
        ls.settings_loaded.set()
    await ls.detect_gpu()


@feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(ls: DiceServer, params: types.DidChangeConfigurationParams) -> None:
    await ls.reload_settings(params.settings)


@feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: DiceServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.checker.schedule(params.text_document.uri, 0)


@feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: DiceServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.diagnostics.document_changed(uri)
    if ls.settings.diagnostics_on_change:
        ls.checker.schedule(uri, ls.settings.debounce_ms)


@feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: DiceServer, params: types.DidSaveTextDocumentParams) -> None:
    ls.checker.schedule(params.text_document.uri, ls.settings.debounce_ms)


@feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: DiceServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.checker.cancel(params.text_document.uri)
    ls.analyses.forget(params.text_document.uri)
    ls.diagnostics.forget(params.text_document.uri)


@feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(
        code_action_kinds=[
            types.CodeActionKind.RefactorRewrite,
            types.CodeActionKind.Source,
            types.CodeActionKind.QuickFix,
            types.CodeActionKind.Refactor,
        ],
        resolve_provider=True,
    ),
)
async def code_action(ls: DiceServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    analysis = await ls.analysis(params.text_document.uri)
    return actions.code_actions(ls, ls.jobs, params, analysis)


@feature(types.CODE_ACTION_RESOLVE)
async def resolve_code_action(ls: DiceServer, action: types.CodeAction) -> types.CodeAction:
    data = action.data if isinstance(action.data, dict) else {}
    command, args = data.get("command"), data.get("args")
    if command in (actions.FILL, actions.OPTIMIZE):
        outcome = await editor_jobs.generate(ls, command.removeprefix("dice."), args)
        action.edit = outcome.edit
    elif command == actions.PROFILE:
        await kernel_tools.profile(ls, args)
    elif command == actions.ADD_SPEC:
        try:
            action.edit = kernel_tools.add_spec_edit(ls, args)
        except (TargetError, ValueError) as exc:
            ls.show(types.MessageType.Warning, f"DICE: {exc}")
    return action


@feature(types.TEXT_DOCUMENT_CODE_LENS)
async def code_lens(ls: DiceServer, params: types.CodeLensParams) -> JsonResult:
    uri = params.text_document.uri
    analysis = await ls.analysis(uri)
    build = functools.partial(code_lenses, analysis, uri, ls.cache, ls.gpu, ls.workspace.position_codec)
    return JsonResult(await asyncio.get_running_loop().run_in_executor(None, build))


@feature(types.TEXT_DOCUMENT_HOVER)
async def hover_kernel(ls: DiceServer, params: types.HoverParams) -> types.Hover | None:
    analysis = await ls.analysis(params.text_document.uri)
    return hover(analysis, params.position, ls.cache, ls.gpu, ls.workspace.position_codec)


async def _apply(ls: DiceServer, edit: types.WorkspaceEdit, label: str) -> bool:
    reply = await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=label))
    if not reply.applied:
        ls.show(types.MessageType.Warning, f"DICE: the editor did not apply the edit: {reply.failure_reason or 'no reason given'}")
    return reply.applied


async def _generate_command(ls: DiceServer, kind: str, args: tuple) -> dict:
    outcome = await editor_jobs.generate(ls, kind, args[0] if args else None)
    answer = outcome.to_json()
    answer["applied"] = False
    if outcome.edit is not None and outcome.result is not None:
        answer["applied"] = await _apply(ls, outcome.edit, f"DICE {kind}")
    return answer


@command(actions.FILL)
async def fill_command(ls: DiceServer, *args: Any) -> dict:
    return await _generate_command(ls, "fill", args)


@command(actions.OPTIMIZE)
async def optimize_command(ls: DiceServer, *args: Any) -> dict:
    return await _generate_command(ls, "optimize", args)


@command(actions.PROFILE)
async def profile_command(ls: DiceServer, *args: Any) -> dict:
    return await kernel_tools.profile(ls, args[0] if args else None)


@command(actions.ADD_SPEC)
async def add_spec_command(ls: DiceServer, *args: Any) -> dict:
    try:
        edit = kernel_tools.add_spec_edit(ls, args[0] if args else None)
    except (TargetError, ValueError) as exc:
        ls.show(types.MessageType.Warning, f"DICE: {exc}")
        return {"applied": False, "error": str(exc)}
    return {"applied": await _apply(ls, edit, "DICE: add benchmark spec")}


@command(actions.APPLY_CANDIDATE)
async def apply_candidate_command(ls: DiceServer, *args: Any) -> dict:
    try:
        job_id, index = job_and_index(args[0] if args else None)
        job = ls.jobs.get(job_id)
        if job is None or job.result is None:
            raise ValueError(f"job {job_id} is unknown or has not finished (results are dropped when the file changes on disk)")
        if not 0 <= index < len(job.result.candidates):
            raise ValueError(f"job {job_id} has {len(job.result.candidates)} candidate(s), not {index + 1}")
    except ValueError as exc:
        ls.show(types.MessageType.Warning, f"DICE: {exc}")
        return {"applied": False, "error": str(exc)}
    document = ls.workspace.get_text_document(job.result.snapshot.uri)
    edit = candidate_edit(ls, job.result, index, document.source, document.version)
    if edit is None:
        message = "the text around the range changed since the job ran; run it again"
        ls.show(types.MessageType.Warning, f"DICE: {message}")
        return {"applied": False, "error": message}
    applied = await _apply(ls, edit, f"DICE candidate {index + 1}")
    if applied:
        editor_jobs.publish_job_diagnostics(ls, job.result, job.result.candidates[index][2], index)
        ls.refresh_lenses()
    return {"applied": applied}


@command(actions.SHOW_CANDIDATES)
def show_candidates_command(ls: DiceServer, *args: Any) -> dict:
    """Every finished job of a document and its candidates' verdicts (for editor pickers)."""
    uri = args[0].get("uri") if args and isinstance(args[0], dict) else None
    found = []
    for job in ls.jobs.finished(uri) if uri else []:
        outcome = editor_jobs.Outcome("", job=job.id, result=job.result)
        found.append(outcome.to_json())
    return {"jobs": found}


@command(actions.CANCEL)
def cancel_command(ls: DiceServer, *args: Any) -> dict:
    job = args[0].get("job") if args and isinstance(args[0], dict) else None
    return {"cancelled": ls.jobs.cancel(None if job is None else str(job))}


@feature(types.SHUTDOWN)
async def shutdown(ls: DiceServer, params: None) -> None:
    await ls.release()


def port_number(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (0 to 65535)")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dice-lsp", description="The DICE language server (stdio by default).")
    parser.add_argument("--tcp", action="store_true", help="listen on TCP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=port_number, default=2087)
    parser.add_argument(
        "--token",
        default=os.environ.get("DICE_LSP_TOKEN"),
        help="with --tcp: the token a client must send as initializationOptions.token (default: $DICE_LSP_TOKEN, "
        "which other users cannot read in the process list); required to listen on an address other than loopback",
    )
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if not args.tcp:
        return transport.serve_stdio(create_server)
    if not args.token and not transport.is_loopback(args.host):
        parser.error(
            f"--host {args.host} is reachable from other machines, and any client of dice-lsp can run code on "
            "this one: set a token (DICE_LSP_TOKEN or --token), or listen on 127.0.0.1"
        )
    return transport.serve_tcp(create_server, args.host, args.port, args.token or None)


if __name__ == "__main__":
    sys.exit(main())
