"""Judge the built-in model's fills on the GPU: of the candidates that compile, which compute
what the original kernel computes (issue 16: "correctness of filled kernels through the real
judge").

    python benchmarks/fill_judge.py docs/builtin-eval-pycuda-examples.json [more records ...]
                                    [--methods model,previous] [--time-limit 20]

Input: the records benchmarks/builtin_eval.py writes (each case's prefix, original statement and
suffix, and each method's candidates). Each case's kernel gets a generated benchmark spec
(`spec_lines`: the integer parameters 256, 264, 272, ..., the floats 1.5, 1.75, 2.0, ... in
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
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.builtin_eval import PRELUDE, same_code  # noqa: E402  (the records keep the cases without the prelude)
from profiler.source.cuda_source import find_kernel  # noqa: E402
from profiler.dtypes import INT_TYPES  # noqa: E402

BUFFER = "1 << 20"
INT_VALUE, INT_STEP = 256, 8         # the k-th integer parameter is INT_VALUE + k * INT_STEP
FLOAT_VALUE, FLOAT_STEP = 1.5, 0.25
LAUNCH = "grid=256, block=256"
ONE_BLOCK = "grid=1, block=256"   # a kernel that never reads blockIdx or gridDim is written for one block


def spec_lines(source: str, kernel: str) -> tuple[int, str]:
    """(line to insert at, `// dice:` lines) for `kernel` of `source`: small sizes, so that
    a kernel that loops over an integer parameter or indexes a second dimension stays inside
    its buffers and its time limit. No two integer (or float) parameters are equal: with one
    value for all, a fill reading `a - b` where the kernel reads `a - c`, or a `0` where it
    computes `(a - b) / c`, computed the same outputs and was judged correct."""
    k = find_kernel(source, kernel)
    scalars = [p for p in k.params if not p.pointer]
    ints = [p.name for p in scalars if p.type in INT_TYPES]
    floats = [p.name for p in scalars if p.type not in INT_TYPES]
    lines = [f"let {p.name} = {INT_VALUE + ints.index(p.name) * INT_STEP}" if p.name in ints
             else f"let {p.name} = {FLOAT_VALUE + floats.index(p.name) * FLOAT_STEP}" for p in scalars]
    pointers = [p for p in k.params if p.pointer]
    if pointers:
        lines.append("buffer " + ", ".join(f"{p.name}[{BUFFER}]" for p in pointers))
        outputs = [p.name for p in pointers if not p.const]
        if outputs:
            lines.append("inout " + ", ".join(outputs))
    # 256 blocks of a kernel written for one (PyCUDA's `doublify`: `a[idx] *= 2` with idx from
    # threadIdx alone) update the same elements at once: its outputs are a race, and whether the
    # original was correct against itself, and a fill correct against it, was luck.
    body = "\n".join(source.split("\n")[k.body_start[0]:k.body_end[0] + 1])
    blocks = re.search(r"\b(blockIdx|gridDim)\b", body)
    lines.append(f"launch {LAUNCH if blocks else ONE_BLOCK}")
    return k.start[0], "".join(f"// dice: {line}\n" for line in lines)


def document(case: dict, middle: str) -> str:
    """The case's kernel with `middle` in the span, and the generated spec above it."""
    text = PRELUDE + case["prefix"] + middle + case["suffix"]
    original = PRELUDE + case["prefix"] + case["middle"] + case["suffix"]
    at, spec = spec_lines(original, case["kernel"])  # the original's parameters
    try:
        at = find_kernel(text, case["kernel"]).start[0]  # where the kernel starts in this text
    except ValueError:  # a fill that breaks the signature: the spec where the original's was
        pass
    lines = text.split("\n")
    return "\n".join(lines[:at]) + "\n" + spec + "\n".join(lines[at:])


def has_outputs(case: dict) -> bool:
    """Whether the kernel writes through a pointer: one that only prints (or writes nothing)
    is "correct" whatever it does, so it is not counted."""
    source = PRELUDE + case["prefix"] + case["middle"] + case["suffix"]
    return any(p.pointer and not p.const for p in find_kernel(source, case["kernel"]).params)


def judge_case(case: dict, texts: list[str], time_limit: float) -> dict:
    """Verdicts of the original and of each distinct text, against the original."""
    from profiler.judge import judge

    distinct = list(dict.fromkeys([case["middle"], *texts]))
    baseline = document(case, case["middle"])
    verdicts = judge(baseline, [document(case, t) for t in distinct], "fill.cu", kernel=case["kernel"],
                     time_limit=time_limit)
    return {t: {"status": v.status, "compiled": v.compiled, "correct": v.correct, "message": v.message[:200]}
            for t, v in zip(distinct, verdicts)}


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
    from profiler.gpu import gpu_name

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


def summary(report: dict, methods: list[str]) -> dict:
    out = {}
    for name, data in report["sets"].items():
        judged = [c for c in data["cases"] if "original" in c and c["original"]["correct"] and c.get("outputs", True)]
        row = {"cases": len(data["cases"]), "judgeable": len(judged)}
        for method in methods:
            entries = [c["methods"][method] for c in judged if method in c["methods"]]
            row[method] = {"correct": sum(e["correct"] for e in entries),
                           "correct_not_exact": sum(e["correct_not_exact"] for e in entries)}
        out[name] = row
    return out


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
