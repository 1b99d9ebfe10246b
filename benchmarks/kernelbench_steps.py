"""Where one KernelBench problem's judging time goes in `dice bench`, step by step.

For the first N problems of the shared level1 folder that have a hand-written correct
control (benchmarks/kernelbench_controls), alone on the machine, one after the other, the
steps `dice bench`'s pipeline runs (profiler/judging/worker.py) and the seconds each takes:
the candidate's build (CPU, GPU hidden), Model alone (the reference, during which the
verdict's sandbox starts, as the worker pre-starts it), the candidate's verdict (finding its
build), the same verdict again (started at its turn: a warm re-judging, as the language
server's), then torch.compile(Model), with the phases each sandboxed run reported and when. Prints a table and writes $OUT/kernelbench_steps.{json,md}.

    python benchmarks/kernelbench_steps.py [--problems 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dice_lsp.bench.problems import discover  # noqa: E402
from dice_lsp.bench.solutions import correct_control, solution_files  # noqa: E402
from dice_lsp.bench.tasks import splice_model_new  # noqa: E402
from profiler.judging.kernelbench import torch_compile_baseline  # noqa: E402
from profiler.judging.problem import KernelBenchProblem  # noqa: E402
from profiler.sandbox import POOL, isolation  # noqa: E402
from profiler.sandbox.pool import kept, warm_kind  # noqa: E402

CONTROLS = REPO / "benchmarks" / "kernelbench_controls"
STEPS = ("build", "reference", "verdict", "verdict again", "torch.compile")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=2)
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", REPO / ".device-out"))
    out.mkdir(parents=True, exist_ok=True)
    level1 = Path(os.environ.get("DICE_SHARED", REPO / "tests" / "data")) / "kernelbench" / "level1"
    problems, _ = discover(level1)
    controls = solution_files(CONTROLS)
    picked = [(problem, control) for problem in problems
              if (control := correct_control(str(problem.path), controls)) is not None]
    rows = []
    # As dice bench's worker does: Model alone and torch.compile(Model) in pre-started
    # sandboxes, where sandboxes are isolated (profiler.sandbox.pool.warm_kind).
    POOL.reserve("kernelbench", 300.0, 2)
    print(f"sandboxes isolated: {isolation()}; Model alone and torch.compile pre-started: "
          f"{warm_kind('kernelbench') is not None} ({kept()} spares)", flush=True)
    for problem, control in picked[: args.problems]:
        baseline = problem.path.read_text()
        # A comment of its own: no build of an earlier run of this script is found.
        candidate = f"# kernelbench_steps {time.time()}\n" + splice_model_new(baseline, control.read_text())
        heard: list[tuple[float, str]] = []
        started = time.monotonic()

        def on_phase(name: str) -> None:
            heard.append((round(time.monotonic() - started, 2), name))

        judging = KernelBenchProblem(baseline, str(problem.path), 300.0, on_phase=on_phase)
        row: dict = {"problem": problem.path.name, "seconds": {}, "phases": {}}
        try:
            def reference():
                # As the worker does: the verdict's sandbox starts while Model alone runs.
                judging.prestart(candidate)
                return judging.reference([candidate])

            for step, run in (("build", lambda: judging.build(candidate)),
                              ("reference", reference),
                              ("verdict", lambda: judging.verdict(candidate)),
                              # The same candidate again, started at its turn: a warm re-judging.
                              ("verdict again", lambda: judging.verdict(candidate)),
                              ("torch.compile", lambda: torch_compile_baseline(baseline, str(problem.path), 300.0,
                                                                               on_phase=on_phase))):
                heard.clear()
                began = time.monotonic()
                result = run()
                row["seconds"][step] = round(time.monotonic() - began, 2)
                row["phases"][step] = list(heard)
                if step.startswith("verdict"):
                    row.setdefault("started_s_before", {})[step] = (result.extra.get("phases") or {}).get(
                        "started_s_before")
                if step == "verdict":
                    row["status"] = result.status
                    row["isolation"] = result.extra.get("isolation")
                    row["harness"] = (result.extra.get("phases") or {}).get("harness")
                print(f"{problem.path.name:40} {step:14} {row['seconds'][step]:7.2f} s  phases {heard}", flush=True)
        finally:
            judging.close()
        rows.append(row)
        (out / "kernelbench_steps.json").write_text(json.dumps(rows, indent=1))
    lines = ["| problem | " + " | ".join(f"{s} (s)" for s in STEPS) + " | verdict |",
             "| --- | " + " | ".join("---:" for _ in STEPS) + " | --- |"]
    for row in rows:
        lines.append(f"| {row['problem']} | " + " | ".join(str(row["seconds"].get(s, "-")) for s in STEPS)
                     + f" | {row.get('status', '-')} |")
    (out / "kernelbench_steps.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
