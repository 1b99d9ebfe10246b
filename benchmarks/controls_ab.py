"""Honest KernelBench controls judged by whichever checkout is first on PYTHONPATH: status,
speedup and interval per control, so that two checkouts (the one in the working tree and an
earlier one unpacked elsewhere) can be compared on the same GPU in one device call:

    python benchmarks/controls_ab.py --out $OUT/new.json
    PYTHONPATH=/tmp/old python benchmarks/controls_ab.py --out $OUT/old.json

Each control (benchmarks/kernelbench_controls/LEVEL/STEM.correct.py) is spliced into its
problem (tests/data/kernelbench/LEVEL/STEM.py) as `dice bench --solutions` does, and judged
with profiler.judge, the path `dice bench` and the editor share.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = "level1/19_ReLU,level1/23_Softmax,level1/47_Sum_reduction_over_a_dimension,level1/26_GELU_," \
          "level1/1_Square_matrix_multiplication_"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default=str(ROOT / "tests/data/kernelbench"))
    parser.add_argument("--controls", default=str(ROOT / "benchmarks/kernelbench_controls"))
    parser.add_argument("--names", default=DEFAULT, help="LEVEL/STEM,... (default: %(default)s)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import profiler
    from dice_lsp.bench.tasks import splice_model_new
    from profiler.machine.gpu import gpu_name

    records = []
    for name in args.names.split(","):
        problem = (Path(args.problems) / f"{name}.py").read_text()
        control = (Path(args.controls) / f"{name}.correct.py").read_text()
        started = time.monotonic()
        (verdict,) = profiler.judge(problem, [splice_model_new(problem, control)], f"{Path(name).name}.py",
                                    time_limit=180.0)
        records.append({"control": name, "status": verdict.status, "speedup": verdict.speedup,
                        "speedup_ci": verdict.speedup_ci, "time_ms": verdict.time_ms,
                        "baseline_ms": verdict.baseline_ms, "message": verdict.message,
                        "flags": verdict.extra.get("flags", []), "escape_check": verdict.extra.get("escape_check"),
                        "other_threads_cpu_s": verdict.extra.get("other_threads_cpu_s"),
                        "seconds": round(time.monotonic() - started, 1)})
        print(f"{name}: {verdict.status} {verdict.message[:160]}", flush=True)
    Path(args.out).write_text(json.dumps({"profiler": profiler.__file__, "gpu": gpu_name(), "controls": records},
                                         indent=1))


if __name__ == "__main__":
    main()
