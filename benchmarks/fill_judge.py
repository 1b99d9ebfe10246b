"""Judge the built-in model's fills on the GPU: of the candidates that compile, which compute
what the original kernel computes: the correctness of filled kernels through the product's own
judge.

    python benchmarks/fill_judge.py docs/builtin-eval-pycuda-examples.json [more records ...]
                                    [--methods model,previous] [--time-limit 20]

Input: the records benchmarks/builtin_eval.py writes (each case's prefix, original statement and
suffix, and each method's candidates). Each case's kernel gets a generated benchmark spec
(dice_lsp.bench.fills.spec_lines: the integer parameters 256, 264, 272, ..., the floats 1.5, 1.75, 2.0, ... in
their order, every pointer a buffer of 2^20 elements, the non-const ones `inout` so that they
start from the same random values, 256 blocks of 256 threads), and the product's own judge
(profiler.judge.judge: the original document as the baseline, each distinct candidate in its own
sandboxed process, several random input sets, outputs compared) gives each candidate a verdict.
A case counts only where the original judged against itself is correct and the kernel writes
through a pointer (a kernel that only prints is "correct" whatever a fill does; one whose output
depends on a race, or that reads past the generated buffers, is not correct against itself:
reported, not counted). Reported per method: cases judged, cases with a correct candidate, and
of those how many had no candidate equal to the original (right, but written otherwise). Writes
$OUT/fill_judge.json (OUT defaults to ./.device-out) after every case, and a table on stdout.
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

from dice_lsp.bench.fills import has_outputs, judge_case, same_code, summary  # noqa: E402  (after the path is set)

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="+", type=Path)
    ap.add_argument("--methods", default="model,previous", help="the records' methods to judge")
    ap.add_argument("--time-limit", type=float, default=20.0, help="seconds per candidate")
    ap.add_argument("--summarize", type=Path, metavar="FILL_JUDGE_JSON",
                    help="no judging: add each case's outputs flag from the records to this earlier "
                         "run's results and print its summary again (a run cut by its time limit)")
    ap.add_argument("--resume", type=Path, metavar="FILL_JUDGE_JSON",
                    help="go on with this earlier run (one cut by the device's time limit): its judged cases "
                         "are kept, the rest judged")
    args = ap.parse_args()
    methods = args.methods.split(",")
    if args.summarize:
        report = json.loads(args.summarize.read_text())
        for record_path in args.records:
            record = json.loads(record_path.read_text())
            for entry in report["sets"].get(record_path.stem.removeprefix("builtin-eval-"), {}).get("cases", []):
                if "original" in entry:
                    entry["outputs"] = has_outputs(record["cases"][entry["case"]])
        report["summary"] = summary(report, methods)
        args.summarize.write_text(json.dumps(report, indent=1) + "\n")
        print(table(report["summary"], report.get("gpu")))
        return 0
    out_dir = Path(os.environ.get("OUT", ".device-out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "sets": {}}
    earlier = json.loads(args.resume.read_text()) if args.resume and args.resume.exists() else {"sets": {}}
    from profiler.machine.gpu import gpu_name

    report["gpu"] = gpu_name()
    began = time.perf_counter()
    for record_path in args.records:
        record = json.loads(record_path.read_text())
        name = record_path.stem.removeprefix("builtin-eval-")
        done = {c["case"]: c for c in earlier["sets"].get(name, {}).get("cases", [])}
        cases_out = []
        report["sets"][name] = {"record": str(record_path), "cases": cases_out}
        for index, case in enumerate(record["cases"]):
            if index in done:
                cases_out.append(done[index])
                continue
            fills = {f["method"]: f for f in record["fills"] if f["case"] == index and f["method"] in methods}
            texts = [t for f in fills.values() for t in f["texts"]]
            try:
                verdicts = judge_case(case, texts, args.time_limit)
            except Exception as exc:  # noqa: BLE001 - a case the spec generator cannot read is reported
                cases_out.append({"case": index, "kernel": case["kernel"], "error": f"{type(exc).__name__}: {exc}"})
                continue
            original = verdicts[case["middle"]]
            entry = {"case": index, "kernel": case["kernel"], "outputs": has_outputs(case), "original": original,
                     "methods": {}}
            for method, fill in fills.items():
                mine = [verdicts[t] | {"text": t, "exact": same_code(t, case["middle"])}
                        for t in dict.fromkeys(fill["texts"])]
                entry["methods"][method] = {
                    "correct": any(v["correct"] for v in mine),
                    "correct_not_exact": any(v["correct"] for v in mine) and not any(v["exact"] for v in mine),
                    "candidates": mine,
                }
            cases_out.append(entry)
            print(f"[fill_judge] {name} case {index} ({case['kernel']}): original {original['status']}; "
                  + ", ".join(f"{m} {'correct' if e['correct'] else 'no'}" for m, e in entry["methods"].items()),
                  flush=True)
            (out_dir / "fill_judge.json").write_text(json.dumps(report, indent=1) + "\n")
    report["seconds"] = round(time.perf_counter() - began, 1)
    report["summary"] = summary(report, methods)
    (out_dir / "fill_judge.json").write_text(json.dumps(report, indent=1) + "\n")
    print(table(report["summary"], report.get("gpu")))
    return 0


def table(summary_: dict, gpu: str | None) -> str:
    lines = [f"fills judged on {gpu or 'no GPU'}", "", "| held-out set | cases judgeable | method | a correct candidate | "
             "correct, none exact |", "| --- | --- | --- | --- | --- |"]
    for name, row in summary_.items():
        for method, counts in row.items():
            if isinstance(counts, dict):
                lines.append(f"| {name} | {row['judgeable']} of {row['cases']} | {method} | "
                             f"{counts['correct']}/{row['judgeable']} | {counts['correct_not_exact']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
