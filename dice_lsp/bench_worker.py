"""One `dice bench` judging job, run as `python -m dice_lsp.bench_worker REQUEST RESULT`.

REQUEST is a JudgeJob as JSON; RESULT receives {"verdicts": [Verdict.to_json()...],
"profile": {"candidate": i, "verdict": ...} | None}. The profiler itself runs every
candidate in its own sandbox; this process exists so that the bench can pin it to one GPU
and bound it with a wall-clock limit (dice_lsp.bench_judge).

For a KernelBench problem with a correct candidate, the best one (largest speedup) is also
run through `profiler.profile`, exactly what `dice profile` does on that file: it times
torch.compile(Model) as the second baseline, which `judge` leaves out.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def best_correct(verdicts: list[Any]) -> int | None:
    """Index of the correct, timed candidate with the largest speedup."""
    timed = [(v.speedup, i) for i, v in enumerate(verdicts) if v.correct and v.speedup is not None]
    return max(timed)[1] if timed else None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m dice_lsp.bench_worker REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    job = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    from dice_lsp.bench_judge import JudgeJob
    from profiler.run.harness import die_with_parent

    # This process has a session of its own (so that it can be stopped as a group): should
    # `dice bench` be killed outright (SIGTERM, SIGKILL, a closed terminal), it dies too,
    # and its sandboxes with it, instead of judging on, on a GPU someone else now times on.
    die_with_parent(JudgeJob(**job).deadline)
    import profiler  # after the arguments are read: a usage error should not pay for it

    documents, path, limit = job["documents"], job["path"], job["time_limit"]
    verdicts = profiler.judge(job["baseline"], documents, path, time_limit=limit)
    profiled = None
    best = best_correct(verdicts) if profiler.is_kernelbench(path) else None
    if best is not None:
        verdict = profiler.profile(documents[best], path, time_limit=limit)
        profiled = {"candidate": best, "verdict": verdict.to_json()}
    result = {"verdicts": [v.to_json() for v in verdicts], "profile": profiled}
    Path(argv[1]).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
