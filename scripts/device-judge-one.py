"""Judge KernelBench candidates from the adversarial library one judge() call each (no other
candidate building beside it), on the full-size problem, and print each verdict's status and
the judge's clock accounting as JSON.
  python scripts/device-judge-one.py PROBLEM.py OUT.json CANDIDATE.py..."""

import json
import sys
import time
from pathlib import Path

import profiler

root = Path(__file__).resolve().parent.parent
problem = Path(sys.argv[1]).read_text()
out = []
for name in sys.argv[3:]:
    started = time.monotonic()
    [v] = profiler.judge(problem, [(root / "tests/profiler/adversarial" / name).read_text()], "model.py",
                         time_limit=300.0)
    keys = ("clock_accounting", "baseline", "checked_apart_pairs", "flags", "timing", "persisting_l2_reset")
    out.append({"file": name, "status": v.status, "speedup": v.speedup, "message": v.message,
                "seconds": round(time.monotonic() - started, 1), **{k: v.extra.get(k) for k in keys}})
    print(json.dumps(out[-1])[:1800], flush=True)
Path(sys.argv[2]).write_text(json.dumps(out, indent=1))
