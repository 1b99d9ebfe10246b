"""Where a job's candidates may go in the document as it is now.

A candidate replaces the job's span and nothing else. The document may have moved on since
the snapshot; a candidate is still safe to apply only if the text before and after the span
is unchanged and the span holds what the job left there (the original text or one of the
candidates), so that no edit of the user's is lost.
"""

from __future__ import annotations

from dice_lsp.core.jobs import JobResult


def candidate_slot(result: JobResult, text: str) -> tuple[int, int] | None:
    """The span of `text` that a candidate of `result` would replace, or None if unsafe."""
    before = result.snapshot.text[: result.target.start]
    after = result.snapshot.text[result.target.end :]
    if not (text.startswith(before) and text.endswith(after) and len(text) >= len(before) + len(after)):
        return None
    start, end = len(before), len(text) - len(after)
    held = text[start:end]
    known = {result.snapshot.text[result.target.start : result.target.end]}
    known.update(result.replacement(i) for i in range(len(result.candidates)))
    return (start, end) if held in known else None
