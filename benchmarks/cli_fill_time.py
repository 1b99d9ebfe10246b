"""How long the README's CPU fill takes end to end, against `import torch` in the same run.

    python benchmarks/cli_fill_time.py [--rounds 5] [--json OUT]

Each round runs, one after the other, `python -c "import torch"` and the README's command
(`dice fill examples/saxpy.cu --range 12:9-12:32`, the built-in model, default settings) as
fresh processes, so that whatever else the machine is doing weighs on both alike. It prints
each round's wall-clock seconds, the medians and the ratio of the medians. The fill's bar
(the target): at most about 2x the time of `import torch`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FILL = ["fill", "examples/saxpy.cu", "--range", "12:9-12:32"]


def seconds(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of both commands (default: %(default)s)")
    parser.add_argument("--json", type=Path, help="also write the numbers as JSON to this file (default: none)")
    args = parser.parse_args()
    dice = shutil.which("dice") or sys.exit("dice is not on PATH: pip install -e . in this environment")
    torch_command = [sys.executable, "-c", "import torch"]
    fill_command = [dice, *FILL]
    seconds(fill_command)  # one unmeasured round: the OS's file cache, nvcc's first start
    torch_times, fill_times = [], []
    for round_ in range(1, args.rounds + 1):
        torch_times.append(seconds(torch_command))
        fill_times.append(seconds(fill_command))
        print(f"round {round_}: import torch {torch_times[-1]:.2f} s, dice fill {fill_times[-1]:.2f} s", flush=True)
    torch_median, fill_median = statistics.median(torch_times), statistics.median(fill_times)
    ratio = fill_median / torch_median
    print(f"median of {args.rounds}: import torch {torch_median:.2f} s, dice fill {fill_median:.2f} s, "
          f"ratio {ratio:.2f} (wall clock, fresh processes, interleaved)")
    if args.json:
        args.json.write_text(json.dumps({"command": ["dice", *FILL], "import_torch_s": torch_times,
                                         "fill_s": fill_times, "ratio_of_medians": ratio}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
