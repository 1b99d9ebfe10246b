"""One honest and one cheating KernelBench candidate judged through profiler.judge on the GPU,
each verdict's status, numbers and the judge's clock accounting printed as JSON: a quick look
that the audited timing works on this GPU before the adversarial library runs.
  python scripts/device-judge-smoke.py OUT.json"""

import json
import sys
import time
from pathlib import Path

import profiler

root = Path(__file__).resolve().parent.parent
library = root / "tests/profiler/adversarial"
problem = (root / "tests/data/kernelbench/level1/19_ReLU.py").read_text().replace("batch_size = 4096", "batch_size = 64")
names = ["honest_relu_vec4.py", "relu_reads_checked_set.py"]
started = time.monotonic()
verdicts = profiler.judge(problem, [(library / n).read_text() for n in names], "model.py", time_limit=300.0)
out = []
for name, v in zip(names, verdicts):
    keys = ("clock_accounting", "baseline", "charged_ms",
            "checked_apart_pairs", "flags", "timing", "persisting_l2_reset")
    out.append({"file": name, "status": v.status, "proven": v.proven, "speedup": v.speedup, "ci": v.speedup_ci,
                "message": v.message, **{k: v.extra.get(k) for k in keys}})
    print(json.dumps(out[-1])[:1500], flush=True)
print(f"judged in {time.monotonic() - started:.1f} s")
Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
