"""Diagnostics per document, from two sources published together: the compile-only check
of the document, and the verdicts of the last job or profile run on it.

Verdicts describe one exact text, so each set is anchored to the text it is about and shown
only while the document holds that text: they appear once an applied edit lands, and
vanish (rather than point at the wrong code) as soon as the user edits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from dice_lsp.core.jobs import JobResult
from dice_lsp.core.slots import candidate_slot
from dice_lsp.core.verdict_view import summary
from dice_lsp.lsp.lsp_text import document_key, line_range, lsp_range, open_document, text_document
from profiler.verdict.types import PROVEN, Diagnostic, Verdict

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer
    from pygls.workspace import TextDocument

SOURCE = "dice"

_SEVERITY = {
    "faster": types.DiagnosticSeverity.Information,
    "not_faster": types.DiagnosticSeverity.Hint,
    "no_gpu": types.DiagnosticSeverity.Hint,
    "no_spec": types.DiagnosticSeverity.Warning,
    "wrong": types.DiagnosticSeverity.Error,
    "compile_error": types.DiagnosticSeverity.Error,
    "timeout": types.DiagnosticSeverity.Error,
    "crash": types.DiagnosticSeverity.Error,
    "error": types.DiagnosticSeverity.Error,
    # Measured, but proving nothing: what the user must look at before trusting the numbers.
    "impossible": types.DiagnosticSeverity.Warning,
    "suspicious": types.DiagnosticSeverity.Warning,
    "unstable": types.DiagnosticSeverity.Warning,
    "unproven": types.DiagnosticSeverity.Warning,
}

_COMPILER_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "note": types.DiagnosticSeverity.Information,
}


def severity(verdict: Verdict) -> types.DiagnosticSeverity:
    """The status's severity; a flagged faster or not_faster is a warning: not proven."""
    if verdict.status in PROVEN and not verdict.proven:
        return types.DiagnosticSeverity.Warning
    return _SEVERITY.get(verdict.status, types.DiagnosticSeverity.Warning)


def compiler_severity(word: str) -> types.DiagnosticSeverity:
    return _COMPILER_SEVERITY.get(word, types.DiagnosticSeverity.Information)


def compiler_diagnostics(document: TextDocument, found: list[Diagnostic]) -> list[types.Diagnostic]:
    return [
        types.Diagnostic(
            range=line_range(document, d.line, d.column),
            message=d.message,
            severity=compiler_severity(d.severity),
            source=SOURCE,
        )
        for d in found
    ]


def verdict_diagnostic(
    document: TextDocument, start: int, end: int, message: str, verdict: Verdict, *, in_document: bool = True
) -> types.Diagnostic:
    """A verdict over [start, end); one about code not in the document is at most a warning."""
    level = severity(verdict)
    if not in_document:
        level = max(level, types.DiagnosticSeverity.Warning)
    return types.Diagnostic(
        range=lsp_range(document, start, end), message=message, severity=level, source=SOURCE, code=verdict.status
    )


def first_error(verdict: Verdict) -> str:
    """The first compiler error of a candidate, with its line, for a one-line message."""
    for d in verdict.diagnostics:
        if d.severity == "error":
            return f" (line {d.line}: {d.message})"
    return ""


class DiagnosticsStore:
    """Keyed by document_key; published under the URI the caller names (the client's own)."""

    def __init__(self, server: LanguageServer) -> None:
        self._server = server
        self._compile: dict[str, list[types.Diagnostic]] = {}
        self._verdicts: dict[str, tuple[str, list[types.Diagnostic]]] = {}
        self._verdicts_shown: dict[str, bool] = {}

    def set_compile(self, uri: str, diagnostics: list[types.Diagnostic]) -> None:
        self._compile[document_key(uri)] = diagnostics
        self.publish(uri)

    def set_verdicts(self, uri: str, text: str, diagnostics: list[types.Diagnostic]) -> None:
        """Verdict diagnostics about the document when it holds exactly `text`."""
        self._verdicts[document_key(uri)] = (text, diagnostics)
        self.publish(uri)

    def set_job_verdicts(self, result: JobResult, text: str, in_document: int | None) -> None:
        """One diagnostic per candidate over the job's span of `text` (the document, or the
        text it will hold once candidate `in_document` is applied); the compiler's messages of
        the candidate in the document at their own lines."""
        slot = candidate_slot(result, text)
        if slot is None:
            return
        document = text_document(self._server, result.snapshot.uri, text)
        found = []
        for i, (_, verdict, _) in enumerate(result.candidates):
            applied = i == in_document
            label = f"DICE candidate {i + 1}{' (applied)' if applied else ''}: {summary(verdict)}{first_error(verdict)}"
            found.append(verdict_diagnostic(document, *slot, label, verdict, in_document=applied))
        if in_document is not None:
            found += compiler_diagnostics(document, result.candidates[in_document][1].diagnostics)
        self.set_verdicts(result.snapshot.uri, text, found)

    def clear_verdicts(self, uri: str) -> None:
        if self._verdicts.pop(document_key(uri), None) is not None:
            self.publish(uri)

    def document_changed(self, uri: str) -> None:
        """Publish again if the edit showed or hid the verdicts."""
        key = document_key(uri)
        if key in self._verdicts and self._verdicts_visible(uri) != self._verdicts_shown.get(key):
            self.publish(uri)

    def forget(self, uri: str) -> None:
        key = document_key(uri)
        self._compile.pop(key, None)
        self._verdicts.pop(key, None)
        self._verdicts_shown.pop(key, None)
        self.publish(uri)

    def _verdicts_visible(self, uri: str) -> bool:
        anchored = self._verdicts.get(document_key(uri))
        document = open_document(self._server.workspace, uri)
        return anchored is not None and document is not None and document.source == anchored[0]

    def publish(self, uri: str) -> None:
        key = document_key(uri)
        visible = self._verdicts_visible(uri)
        self._verdicts_shown[key] = visible
        verdicts = self._verdicts[key][1] if visible else []
        self._server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=self._compile.get(key, []) + verdicts)
        )
