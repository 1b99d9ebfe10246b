"""KernelBench metrics over judged problems, per level.

Definitions (KernelBench, arXiv 2502.10517): a problem is *correct* when its candidate
matches the reference on every checked input set; fast_p is the share of problems whose
candidate is correct AND whose speedup over the baseline is > p (fast_1: p = 1, fast_2:
p = 2). With N candidates per problem, a problem counts when any of its candidates does
("best of N"), and its speedup is the best one among its correct candidates. The geometric
mean of speedups is taken over correct problems that were timed.

Only a proven verdict counts (profiler.verdict.types.proven: status faster or not_faster, no flag
raised): a candidate measured faster than the GPU allows, over 10x eager PyTorch, with
timings that disagree, or against a baseline whose outputs ignore its inputs, and one the
static checks flagged, is neither correct nor fast here, whatever its numbers. Each row says
how many candidates were left out so, and why (`not_counted`), so that none vanishes unseen.

Without a GPU nothing can be checked or timed: correct, fast_p and the mean are None
("not measured: no GPU"), never zero, because zero would claim the candidates were wrong.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from dice_lsp.bench.results import FINISHED_STATES, TaskRecord
from profiler.verdict.types import NOT_PROOF, PROVEN, proven

EAGER = "eager"
TORCH_COMPILE = "torch.compile"
ALL_LEVELS = "all"
NO_GPU_NOTE = "not measured: no GPU"
FLAGGED = "flagged"
# Why a measured candidate is left out, in the order a row lists them.
LEFT_OUT_REASONS = (*NOT_PROOF, FLAGGED)


def verdicts(task: TaskRecord) -> list[dict[str, Any]]:
    return [c.verdict for c in task.candidates if c.verdict is not None] if task.state == "done" else []


def counted(verdict: dict[str, Any]) -> bool:
    """Whether a verdict (as results.json holds it) counts: profiler.verdict.types.proven."""
    return proven(str(verdict.get("status")), (verdict.get("extra") or {}).get("flags"))


def left_out(verdict: dict[str, Any]) -> str | None:
    """Why a verdict with a measurement is not counted: its status when that says the
    measurement proves nothing, FLAGGED for a proven status with a flag; None for a verdict
    that counts, or that measured nothing to count (wrong, compile_error, no_gpu ...)."""
    status = verdict.get("status")
    if status in NOT_PROOF:
        return status
    if status in PROVEN and not counted(verdict):
        return FLAGGED
    return None


def best_eager_speedup(task: TaskRecord) -> float | None:
    speedups = [v["speedup"] for v in verdicts(task)
                if counted(v) and v.get("correct") is True and v.get("speedup") is not None]
    return max(speedups) if speedups else None


def compile_speedup(task: TaskRecord) -> float | None:
    """Speedup of the best correct candidate over torch.compile(Model), from its profile;
    None where that candidate's verdict does not count."""
    profiled = (task.profile or {}).get("verdict") or {}
    if not counted(profiled):
        return None
    return (profiled.get("extra") or {}).get("speedup_vs_compile")


SPEEDUPS: dict[str, Callable[[TaskRecord], float | None]] = {
    EAGER: best_eager_speedup,
    TORCH_COMPILE: compile_speedup,
}


@dataclass(frozen=True)
class ProblemOutcome:
    """One problem, best of its candidates."""
    level: str
    compiled: bool | None    # None: could not be measured here (e.g. load_inline without a GPU)
    correct: bool            # a counted verdict says correct
    speedup: float | None    # best speedup among counted correct candidates; None if none was timed
    left_out: tuple[str, ...] = ()   # left_out() of each candidate not counted, in candidate order


@dataclass(frozen=True)
class LevelRow:
    level: str
    problems: int
    compiled: int | None          # None when no problem's build could be measured
    correct: int | None
    fast_1: float | None          # share of problems, 0..1
    fast_2: float | None
    geomean_speedup: float | None
    # Candidates measured but not counted, by reason (LEFT_OUT_REASONS order); empty: none.
    not_counted: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "not_counted": dict(self.not_counted)}


@dataclass(frozen=True)
class Table:
    baseline: str                 # EAGER or TORCH_COMPILE: what the speedups are against
    rows: list[LevelRow]          # one per level, then ALL_LEVELS
    note: str | None              # why some columns are None

    def to_json(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "note": self.note, "rows": [r.to_json() for r in self.rows]}


def outcome(task: TaskRecord, baseline: str = EAGER) -> ProblemOutcome:
    judged = verdicts(task)
    if any(v.get("compiled") for v in judged):
        compiled: bool | None = True
    elif judged and all(v.get("status") == "no_gpu" for v in judged):
        compiled = None  # the candidate could not even be built here: not measured
    else:
        compiled = False
    return ProblemOutcome(
        level=task.level,
        compiled=compiled,
        correct=any(counted(v) and v.get("correct") is True for v in judged),
        speedup=SPEEDUPS[baseline](task),
        left_out=tuple(reason for v in judged if (reason := left_out(v)) is not None),
    )


def fast_p(outcomes: list[ProblemOutcome], p: float) -> float:
    """Share of problems correct AND with speedup > p."""
    hits = sum(1 for o in outcomes if o.correct and o.speedup is not None and o.speedup > p)
    return hits / len(outcomes)


def geometric_mean(values: Iterable[float]) -> float | None:
    values = [v for v in values if v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def not_counted(outcomes: Iterable[ProblemOutcome]) -> dict[str, int]:
    found = Counter(reason for o in outcomes for reason in o.left_out)
    return {reason: found[reason] for reason in LEFT_OUT_REASONS if found[reason]}


def not_counted_words(counts: dict[str, int]) -> str:
    """ "2 impossible, 1 suspicious, 1 flagged", or "" when nothing was left out."""
    return ", ".join(f"{n} {reason}" for reason, n in counts.items())


def level_row(level: str, outcomes: list[ProblemOutcome], measured: bool) -> LevelRow:
    builds = [o.compiled for o in outcomes if o.compiled is not None]
    compiled = sum(builds) if builds else None
    if not measured:
        return LevelRow(level, len(outcomes), compiled, None, None, None, None, not_counted(outcomes))
    return LevelRow(
        level=level,
        problems=len(outcomes),
        compiled=compiled,
        correct=sum(o.correct for o in outcomes),
        fast_1=fast_p(outcomes, 1.0),
        fast_2=fast_p(outcomes, 2.0),
        geomean_speedup=geometric_mean(o.speedup for o in outcomes if o.correct and o.speedup),
        not_counted=not_counted(outcomes),
    )


def table(tasks: Iterable[TaskRecord], gpu: str | None, baseline: str = EAGER) -> Table | None:
    """The per-level table against `baseline`. Against torch.compile, problems with a
    correct candidate whose torch.compile(Model) could not be timed are left out (their
    standing is unknown); None when it was timed for no problem at all."""
    tasks = [t for t in tasks if t.state in FINISHED_STATES]
    note = None
    if baseline == TORCH_COMPILE:
        if not any(compile_speedup(t) is not None for t in tasks):
            return None
        unknown = [t for t in tasks if best_eager_speedup(t) is not None and compile_speedup(t) is None]
        tasks = [t for t in tasks if t not in unknown]
        if unknown:
            note = f"{len(unknown)} problem(s) left out: torch.compile(Model) could not be timed"
    if gpu is None:
        note = NO_GPU_NOTE
    outcomes = [outcome(t, baseline) for t in tasks]
    levels = sorted({o.level for o in outcomes}, key=_level_order)
    rows = [level_row(lv, [o for o in outcomes if o.level == lv], gpu is not None) for lv in levels]
    if outcomes:
        rows.append(level_row(ALL_LEVELS, outcomes, gpu is not None))
    return Table(baseline, rows, note)


def _level_order(level: str) -> tuple[int, str]:
    digits = level[5:] if level.startswith("level") else ""
    return (int(digits) if digits.isdigit() else 1 << 30, level)
