"""`dice fill` and `dice optimize`: the editor's job pipeline, headless.

The file is never modified: the candidates and their verdicts are printed (a table, or
DESIGN's JSON object with `--json`, where the best candidate's whole file is `best_text`).
A progress bar goes to stderr when it is a terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import TextIO

from dice_lsp.core import jobs
from dice_lsp.core.config import Settings
from dice_lsp.core.engine_host import MODEL_CHOICES, ModelUnavailable
from dice_lsp.core.jobs import JobResult, Snapshot
from dice_lsp.core.targets import TargetError, fill_target, optimize_target
from dice_lsp.core.text_offsets import line_starts, offset_at
from profiler.machine import settings as environment
from profiler.source.source_files import SourceFileError, read_source_text

_RANGE = re.compile(r"(\d+):(\d+)-(\d+):(\d+)")
_BAR_WIDTH = 24


def parse_range(text: str, spec: str, clamped: list[str] | None = None) -> tuple[int, int]:
    """Offsets of `L:C-L:C` (1-based lines and columns, end exclusive). A column past the end
    of its line means the line's end (as an editor's position does); each such column is
    said in `clamped`, so that the user learns the range is not what was typed."""
    match = _RANGE.fullmatch(spec.strip())
    if not match:
        raise ValueError(f"--range {spec!r}: expected L:C-L:C, 1-based, end exclusive (e.g. 12:5-14:1)")
    l1, c1, l2, c2 = (int(g) for g in match.groups())
    if min(l1, c1, l2, c2) < 1:
        raise ValueError(f"--range {spec!r}: lines and columns start at 1")
    start, end = offset_at(text, l1 - 1, c1 - 1), offset_at(text, l2 - 1, c2 - 1)
    starts = line_starts(text)
    for line, column, offset in ((l1, c1, start), (l2, c2, end)):
        last = offset - starts[line - 1] + 1  # the column the offset is at: the line's end when clamped
        if clamped is not None and column > last:
            clamped.append(f"--range {spec}: line {line} has {last - 1} characters, so column {column} "
                           f"is read as {last}, the end of the line")
    if end < start:
        raise ValueError(f"--range {spec!r}: the end comes before the start")
    return start, end


class ProgressBar:
    """One line on a terminal, redrawn in place; nothing at all when stderr is not a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._live = stream.isatty()
        self._last = ""

    def __call__(self, message: str, percentage: int | None) -> None:
        if not self._live:
            return
        done = (percentage or 0) * _BAR_WIDTH // 100
        line = f"[{'#' * done}{'.' * (_BAR_WIDTH - done)}] {percentage or 0:3d}% {message}"
        if line != self._last:
            self._last = line
            self._stream.write("\r\033[K" + line)
            self._stream.flush()

    def close(self) -> None:
        if self._live and self._last:
            self._stream.write("\r\033[K")
            self._stream.flush()


async def _run(args: argparse.Namespace, snapshot: Snapshot, settings: Settings, report: ProgressBar) -> JobResult:
    from engine.serving.client import AsyncEngine
    from engine.types import EngineError

    # A bad range or kernel is an error before the model is loaded, not after.
    if args.command == "fill":
        clamped: list[str] = []
        start, end = parse_range(snapshot.text, args.range, clamped)
        for note in dict.fromkeys(clamped):
            print(f"dice fill: {note}", file=sys.stderr)
        fill_target(snapshot.text, snapshot.path, start, end)
    else:
        optimize_target(snapshot.text, snapshot.path, kernel=args.kernel)
    engine = AsyncEngine(settings.model, device=settings.device, memory=environment.current().engine_memory)
    try:
        report(f"loading model {settings.model}", 0)
        try:
            await engine.start()
        except EngineError as exc:  # the one failure where another --model is the advice
            raise ModelUnavailable(str(exc)) from exc
        if args.command == "fill":
            return await jobs.fill(engine, snapshot, start, end, settings, report)
        return await jobs.optimize(engine, snapshot, settings, report, kernel=args.kernel)
    finally:
        await engine.close()


def _number(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.3g}{unit}"


# What each status means for a candidate that was not applied, in the summary line.
_FATES = {
    "compile_error": "did not compile",
    "wrong": "compiled but gave wrong results",
    "no_gpu": "compiled but not run or timed: no GPU",
    "not_faster": "correct but not faster",
    "faster": "faster but flagged (see its verdict)",
    "no_spec": "compiled but not run: no benchmark spec",
    "timeout": "ran out of time",
    "crash": "crashed",
    "error": "could not be judged",
}


def what_became_of(verdicts: list) -> str:
    """The candidates' fates in a few words: "none compiled", "none correct: 2 gave wrong
    results, 1 did not compile", "not timed: no GPU" and the like, never a reason that is
    not what happened."""
    counts: dict[str, int] = {}
    for verdict in verdicts:
        fate = _FATES.get(verdict.status, f"measured, but the measurement proves nothing ({verdict.status})")
        counts[fate] = counts.get(fate, 0) + 1
    n = len(verdicts)
    if set(counts) == {_FATES["compile_error"]}:
        return "none compiled" if n > 1 else "it did not compile"
    if set(counts) == {_FATES["no_gpu"]}:
        return "compiled, not timed: no GPU" if n == 1 else "all compiled, none timed: no GPU"
    parts = [f"{count} {fate}" for fate, count in sorted(counts.items(), key=lambda item: -item[1])]
    if all(v.correct is not True for v in verdicts) and any(v.status == "wrong" for v in verdicts):
        return "none correct: " + ", ".join(parts)
    return ", ".join(parts)


def print_table(result: JobResult, out: TextIO) -> None:
    out.write(f"{'#':>2}  {'status':<15} {'speedup':>8} {'time':>10} {'baseline':>10}  verdict\n")
    for i, (_, verdict, _) in enumerate(result.candidates):
        mark = "*" if i == result.best else " "
        out.write(
            f"{i + 1:>2}{mark} {verdict.status:<15} {_number(verdict.speedup, 'x'):>8} "
            f"{_number(verdict.time_ms, ' ms'):>10} {_number(verdict.baseline_ms, ' ms'):>10}  {verdict.message}\n"
        )
    if not result.candidates:
        out.write("the model returned no candidate\n")
    elif result.best is None:
        why = what_became_of([verdict for _, verdict, _ in result.candidates])
        out.write(f"\nno candidate applies ({why}); the file is unchanged\n")
    else:
        out.write(f"\nbest: candidate {result.best + 1} on {result.gpu} (the file is unchanged; --json has its text)\n")
    for i, (candidate, _, _) in enumerate(result.candidates):
        out.write(f"\n--- candidate {i + 1} ---\n{candidate.text}\n")


def main(args: argparse.Namespace) -> int:
    from engine.types import EngineError

    path = Path(args.file)
    try:
        text = read_source_text(path)
    except SourceFileError as exc:  # missing, a FIFO or a device, too large, not UTF-8
        print(f"dice {args.command}: {exc}", file=sys.stderr)
        return 2
    settings = dataclasses.replace(Settings(), model=args.model, candidates=args.candidates, preset=args.preset)
    if args.max_tokens is not None:
        settings = dataclasses.replace(settings, max_tokens=args.max_tokens)
    snapshot = Snapshot(path.resolve().as_uri(), None, str(path), text)
    bar = ProgressBar(sys.stderr)
    try:
        result = asyncio.run(_run(args, snapshot, settings, bar))
    except (TargetError, ValueError) as exc:
        bar.close()
        print(f"dice {args.command}: {exc}", file=sys.stderr)
        return 2
    except ModelUnavailable as exc:
        bar.close()
        print(f"dice {args.command}: the model {args.model!r} failed: {exc}\nPass --model {MODEL_CHOICES}.", file=sys.stderr)
        return 1
    except EngineError as exc:  # the model is there; the job failed (another model would not help)
        bar.close()
        print(f"dice {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        bar.close()
        print(f"dice {args.command}: cancelled", file=sys.stderr)
        return 130
    bar.close()
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_table(result, sys.stdout)
    return 0
