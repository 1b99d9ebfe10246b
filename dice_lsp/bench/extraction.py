"""Under a protocol with strict extraction (DICE's), an answer whose code DICE's own extraction
does not find is a failure, as in DICE's evaluation, instead of being judged on what our
lenient extraction took from it.

The engine says which rule gave each candidate's code (engine.types.Candidate.extraction:
"dice", "lenient", or "" where nothing was extracted: a FIM model's answer is the code, and
a solution file is code); `dice bench` records it in the candidate's `generation`. Only
"lenient" is rejected: the other two had no chat answer for DICE's rule to read.

The failure is a "compile_error" verdict: KernelBench, whose evaluation DICE's is, counts an
answer with no code as a kernel that was not compiled, so the compiled column agrees with
DICE's table; "error" is this project's word for a judge that could not judge.
"""

from __future__ import annotations

from dice_lsp.bench.results import CandidateRecord
from profiler.judge import Protocol
from profiler.verdict.types import Verdict

REJECTED = "lenient"
MESSAGE = ("no code: DICE's extraction finds no closed ``` block in the answer, so under protocol "
           "{protocol} it fails unjudged (the lenient extraction of protocol dice-lsp would judge it)")


def rejected(candidate: CandidateRecord, protocol: Protocol) -> bool:
    return protocol.strict_extraction and candidate.generation.get("extraction") == REJECTED


def fail_rejected(candidates: list[CandidateRecord], protocol: Protocol) -> int:
    """Give each candidate that `protocol` rejects its failed verdict; how many there were."""
    failures = [c for c in candidates if c.verdict is None and rejected(c, protocol)]
    for candidate in failures:
        candidate.verdict = Verdict.failed("compile_error", MESSAGE.format(protocol=protocol.name)).to_json()
    return len(failures)
