"""A document's `dice:` spec checked as the compilers are: a bad spec
(profiler.source.spec.SpecError, 1-based line and column) is one error diagnostic where it is
wrong. No GPU, no compiler."""

from __future__ import annotations

from profiler.source.spec import SpecError, parse_spec
from profiler.verdict.types import Diagnostic


def spec_errors_as_diagnostics(source: str) -> list[Diagnostic]:
    """A bad spec as an editor diagnostic (empty when the spec is fine)."""
    try:
        parse_spec(source)
    except SpecError as exc:
        return [Diagnostic(exc.line, exc.column, "error", f"dice spec: {exc.message}")]
    return []
