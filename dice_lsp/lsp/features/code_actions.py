"""The code-action list: instant, computed from the text alone, each action carrying its
command name and arguments in `data`. The model runs later, in codeAction/resolve (here, by
the feature the command belongs to), or in the command for clients that cannot resolve (those
get a Command instead of data).

The command names are the LSP surface of docs/DESIGN.md; lsp/wiring.py registers them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lsprotocol import types
from lsprotocol.converters import get_converter

from dice_lsp.core.slots import candidate_slot
from dice_lsp.core.targets import TargetError
from dice_lsp.core.verdict_view import candidate_title
from dice_lsp.lsp.features.add_spec import add_spec_edit
from dice_lsp.lsp.features.generate import generate
from dice_lsp.lsp.features.profile import profile
from dice_lsp.lsp.session import Session  # at run time: pygls evaluates handlers' annotations

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

    from dice_lsp.lsp.document_analysis import Analysis
    from dice_lsp.core.job_registry import JobRegistry

FILL = "dice.fill"
OPTIMIZE = "dice.optimize"
PROFILE = "dice.profile"
ADD_SPEC = "dice.addSpec"
APPLY_CANDIDATE = "dice.applyCandidate"
SHOW_CANDIDATES = "dice.showCandidates"
CANCEL = "dice.cancel"

TITLES = {
    FILL: "Fill selection with DICE",
    OPTIMIZE: "Optimize this kernel with DICE",
    PROFILE: "Profile this kernel",
    ADD_SPEC: "Add benchmark spec",
}
KINDS = {
    FILL: types.CodeActionKind.RefactorRewrite,
    OPTIMIZE: types.CodeActionKind.RefactorRewrite,
    PROFILE: types.CodeActionKind.Source,
    ADD_SPEC: types.CodeActionKind.Source,
}

_converter = get_converter()


def client_resolves_edits(server: LanguageServer) -> bool:
    document = server.client_capabilities.text_document
    code_action = document.code_action if document else None
    resolve = code_action.resolve_support if code_action else None
    return bool(resolve and "edit" in resolve.properties)


def _action(server: LanguageServer, command: str, args: dict[str, Any]) -> types.CodeAction:
    title = TITLES[command]
    if client_resolves_edits(server):
        return types.CodeAction(title=title, kind=KINDS[command], data={"command": command, "args": args})
    return types.CodeAction(title=title, kind=KINDS[command], command=types.Command(title=title, command=command, arguments=[args]))


def _wanted(kind: str, only: list[str] | None) -> bool:
    return not only or any(kind == k or kind.startswith(k + ".") for k in only)


def candidate_actions(jobs: JobRegistry, uri: str, text: str, start: int, end: int) -> list[types.CodeAction]:
    """"Apply candidate i" for every finished job whose span (in the document as it is now) meets [start, end]."""
    actions = []
    for job in jobs.finished(uri):
        slot = candidate_slot(job.result, text)
        if slot is None or slot[1] < start or slot[0] > end:
            continue
        for i, (_, verdict, _) in enumerate(job.result.candidates):
            title = candidate_title(i, verdict)
            kind = types.CodeActionKind.QuickFix if verdict.status == "faster" else types.CodeActionKind.Refactor
            args = {"uri": uri, "job": job.id, "index": i}
            actions.append(
                types.CodeAction(
                    title=title,
                    kind=kind,
                    is_preferred=i == job.result.best,
                    command=types.Command(title=title, command=APPLY_CANDIDATE, arguments=[args]),
                )
            )
    return actions


def code_actions(
    server: LanguageServer, jobs: JobRegistry, params: types.CodeActionParams, analysis: Analysis
) -> list[types.CodeAction]:
    if analysis.language is None:
        return []
    uri = params.text_document.uri
    codec = server.workspace.position_codec
    start = analysis.offset(params.range.start, codec)
    end = analysis.offset(params.range.end, codec)
    actions = []
    if start != end:
        actions.append(_action(server, FILL, {"uri": uri, "range": _converter.unstructure(params.range)}))
    # In a KernelBench file, Model and ModelNew both stand for the one benchmark the file is.
    on_kernel = analysis.unit_at(start) if analysis.language == "cuda" else None
    if on_kernel is not None or (analysis.language == "kernelbench" and analysis.model_class_at(start)):
        at = {"uri": uri, "position": _converter.unstructure(params.range.start)}
        actions.append(_action(server, OPTIMIZE, at))
        actions.append(_action(server, PROFILE, at))
        if on_kernel is not None and not analysis.has_spec(on_kernel.name):
            actions.append(_action(server, ADD_SPEC, at))
    actions += candidate_actions(jobs, uri, analysis.text, start, end)
    only = params.context.only if params.context else None
    return [a for a in actions if _wanted(a.kind, only)]


async def code_action(ls: Session, params: types.CodeActionParams) -> list[types.CodeAction]:
    analysis = await ls.analysis(params.text_document.uri)
    return code_actions(ls, ls.jobs, params, analysis)


async def resolve_code_action(ls: Session, action: types.CodeAction) -> types.CodeAction:
    data = action.data if isinstance(action.data, dict) else {}
    command, args = data.get("command"), data.get("args")
    if command in (FILL, OPTIMIZE):
        _, action.edit = await generate(ls, command.removeprefix("dice."), args)
    elif command == PROFILE:
        await profile(ls, args)
    elif command == ADD_SPEC:
        try:
            action.edit = await add_spec_edit(ls, args)
        except (TargetError, ValueError) as exc:
            ls.show(types.MessageType.Warning, f"DICE: {exc}")
    return action
