"""Evaluate the built-in model on one-statement fills of kernels from held-out repositories.

    python benchmarks/builtin_eval.py [--model builtin] [--control NAME=DIR ...] [--corpus .corpus]
                                      [--sources pycuda-examples]
    python benchmarks/builtin_eval.py --latency-only --model DIR --device cuda     # GPU latency

Cases: real kernels by other authors that the model never saw. training/corpus/build_corpus.py holds
out whole packages (`held_out=True` in its SOURCES: the test split); from their files every
non-template `__global__` function of at most MAX_LINES lines is taken with a small prelude
of standard CUDA headers, kept if it compiles on its own with nvcc and if its text (whitespace
aside) is nowhere in the training or validation split. In each kept kernel up to
`--per-kernel` statements (a `;`-ended line of its body, without its indentation: what an
editor user selects) are masked, one per case, chosen with `--seed`. The cases are fixed
before any model is run; the first statement of each of the first 6 kernels is the issue's
"six small held-out kernels" target. `--select line` masks any line of code instead (also the
`if (...) {`, `}` and `for` heads that 29% of real lines are, whose brackets do not
balance on their own).

Methods, in the same run on the same cases:
- `empty`: the span left empty (removing a statement often still compiles);
- `random`: a model of the shape under test with random weights, through the same engine;
- each `--control NAME=DIR` (e.g. the previous built-in model);
- `model`: the model under test.
Each fills every case as `dice fill` does by default (dice_lsp.core.config.Settings: 4 candidates,
temperature 0.7, its steps and strategy), plus one greedy fill. Reported per method: the share
of cases with a candidate that compiles (profiler.nvcc_check of the kernel with the fill in
place), with a candidate equal to the original (whitespace aside), greedy exact, and seconds
per fill. Results go to OUT (env var, default ./.device-out)/builtin_eval.json, plus a
Markdown table on stdout for docs/model-card.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dice_lsp.bench.fills import (  # noqa: E402  (after the path is set)
    PRELUDE, Case, is_code_line, is_statement, same_code, statement_cases)

MAX_LINES = 60
TARGET_CASES = 6
GLOBAL_LINE = re.compile(r"^[^\n]*__global__[^\n]*$", re.MULTILINE)


@dataclass
class Fill:
    method: str
    case: int
    compiled: bool          # some candidate compiles
    exact: bool             # some candidate equals the original
    greedy_exact: bool
    seconds: float          # the 4-candidate fill
    texts: list[str] = field(default_factory=list)


def normalized(code: str) -> str:
    return " ".join(code.split())


def compiles(source: str) -> bool:
    from profiler.checks.compile import nvcc_check  # tree-sitter and nvcc only where compiling

    return not any(d.severity == "error" for d in nvcc_check(source, "case.cu"))


def plain_kernels(text: str) -> list[str]:
    """The text of each non-template `__global__` function definition of at most MAX_LINES."""
    found = []
    for m in GLOBAL_LINE.finditer(text):
        line = m.group(0).strip()
        previous = text[:m.start()].rstrip().rsplit("\n", 1)[-1].strip()
        if line.startswith(("//", "*", "#")) or "template" in line or previous.startswith("template"):
            continue
        brace, semicolon = text.find("{", m.start()), text.find(";", m.start())
        if brace < 0 or 0 <= semicolon < brace:
            continue   # a declaration
        depth = 0
        for end in range(brace, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
        kernel = text[m.start():end + 1]
        if depth == 0 and kernel.count("\n") < MAX_LINES:
            found.append(kernel)
    return found


def load_cases(corpus: Path, seed: int, kernels_wanted: int, per_kernel: int,
               sources: set[str] | None = None, select: str = "statement") -> list[Case]:
    """Cases from the held-out packages' kernels (see the module doc), shuffled by seed:
    kernel by kernel, up to per_kernel statements (select="line": lines of code) of each;
    `sources`: only those packages'."""
    files = [json.loads(line) for line in (corpus / "files.jsonl").read_text().splitlines()]
    held_out = {f["source"] for f in files if f["split"] == "test"}
    if sources is not None and not sources <= held_out:
        raise SystemExit(f"not held-out packages of {corpus}: {', '.join(sorted(sources - held_out))} "
                         f"(held out: {', '.join(sorted(held_out))})")
    trained = normalized(" ".join(f["text"] for f in files if f["split"] != "test"))
    kernels = [(f["source"], f["path"], k) for f in files
               if f["split"] == "test" and (sources is None or f["source"] in sources) for k in plain_kernels(f["text"])]
    rng = random.Random(seed)
    rng.shuffle(kernels)
    cases, seen, used = [], set(), 0
    for source, path, kernel in kernels:
        key = normalized(kernel)
        if key in seen or key in trained:
            continue
        seen.add(key)
        if not compiles(PRELUDE + kernel):
            continue
        found = statement_cases(source, path, kernel, rng, per_kernel,
                                is_code_line if select == "line" else is_statement)
        if not found:
            continue
        cases += found
        used += 1
        if used == kernels_wanted:
            break
    return cases


def target_cases(cases: list[Case]) -> list[int]:
    """The issue's target set: the first statement of each of the first TARGET_CASES kernels."""
    firsts, kernels = [], set()
    for k, case in enumerate(cases):
        if (case.path, case.kernel) not in kernels:
            kernels.add((case.path, case.kernel))
            firsts.append(k)
    return firsts[:TARGET_CASES]


def random_twin(folder: Path, out: Path, seed: int) -> Path:
    """A checkpoint of the same shape and tokenizer as `folder`, with random weights
    (initialized as training.train initializes before training)."""
    import torch

    from engine.model.loading import config_to_json, load_checkpoint, save_checkpoint
    from training.train import TrainSettings, build_model

    _, tokenizer, config = load_checkpoint(folder, "cpu", torch.float32)
    settings = TrainSettings(model=config_to_json(config), seed=seed)
    model = build_model(settings, torch.device("cpu"))
    save_checkpoint(model.to(torch.bfloat16), tokenizer, out)
    return out


def fill_all(method: str, engine, cases: list[Case], max_tokens: int, seed: int) -> list[Fill]:
    from dice_lsp.core.config import Settings

    defaults = Settings()
    fills = []
    for k, case in enumerate(cases):
        started = time.perf_counter()
        if engine is None:
            texts, greedy = [""], ""
        else:
            texts = [c.text for c in engine.infill(case.prefix, case.suffix, n=defaults.candidates,
                                                   max_tokens=max_tokens, seed=seed + k, **defaults.sampling())]
        seconds = time.perf_counter() - started
        if engine is not None:
            greedy = engine.infill(case.prefix, case.suffix, n=1, max_tokens=max_tokens, temperature=0.0)[0].text
        unique = list(dict.fromkeys(texts))
        ok = any(compiles(case.prefix + t + case.suffix) for t in unique)
        exact = any(same_code(t, case.middle) for t in unique)
        fills.append(Fill(method, k, ok, exact, same_code(greedy, case.middle), seconds, unique))
        print(f"  {method:>8} case {k:3d} compiled={ok!s:5} exact={exact!s:5} {seconds:6.2f} s  "
              f"{case.middle!r} -> {unique[:2]!r}", flush=True)
    return fills


def summary(fills: list[Fill], target: list[int]) -> dict:
    def share(values: list[bool]) -> float:
        return sum(values) / len(values) if values else float("nan")

    target = [f for f in fills if f.case in target]
    times = [f.seconds for f in fills]
    return {"cases": len(fills), "compiled": share([f.compiled for f in fills]),
            "exact": share([f.exact for f in fills]), "greedy_exact": share([f.greedy_exact for f in fills]),
            "target_compiled": sum(f.compiled for f in target), "target_exact": sum(f.exact for f in target),
            "seconds_median": statistics.median(times) if times else None}


def measure_latency(engine, repeats: int, max_tokens: int) -> dict:
    """Seconds per greedy fill of the saxpy example's statement (examples/saxpy.cu), after a
    warm-up, and the 4 candidates `dice fill` would judge there."""
    from dice_lsp.core.config import Settings

    text = (REPO / "examples" / "saxpy.cu").read_text()
    target = "y[i] = a * x[i] + y[i];"
    at = text.index(target)
    prefix, suffix = text[:at], text[at + len(target):]
    engine.infill(prefix, suffix, n=1, max_tokens=max_tokens, temperature=0.0)   # warm-up
    times, tokens, answer = [], [], ""
    for _ in range(repeats):
        started = time.perf_counter()
        cand = engine.infill(prefix, suffix, n=1, max_tokens=max_tokens, temperature=0.0)[0]
        times.append(time.perf_counter() - started)
        tokens.append(cand.tokens)
        answer = cand.text
    defaults = Settings()
    started = time.perf_counter()
    several = engine.infill(prefix, suffix, n=defaults.candidates, max_tokens=max_tokens, seed=0,
                            **defaults.sampling())
    return {"fills": repeats, "seconds_median": statistics.median(times), "seconds_min": min(times),
            "tokens_median": statistics.median(tokens), "answer": answer, "original": target,
            "candidates": [c.text for c in several], "candidates_seconds": time.perf_counter() - started}


def print_table(methods: dict[str, dict]) -> None:
    print(f"\n| method | cases | a candidate compiles | a candidate exact | greedy exact "
          f"| first {TARGET_CASES}: compiles / exact | median s per 4-candidate fill |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, s in methods.items():
        print(f"| {name} | {s['cases']} | {s['compiled']:.0%} | {s['exact']:.0%} | {s['greedy_exact']:.0%} | "
              f"{s['target_compiled']}/{TARGET_CASES} / {s['target_exact']}/{TARGET_CASES} | "
              f"{s['seconds_median']:.2f} |")


def rescore(record: Path) -> None:
    """A record's candidates compared with their originals by this version's `same_code`
    (records before 2026-12-04 (d309e49) compared whitespace runs, so `a-b` was not
    `a - b`), the record rewritten in place. The greedy fill's text is not in a record: its
    `greedy_exact` stays as recorded."""
    report = json.loads(record.read_text())
    fills = [Fill(**f) for f in report["fills"]]
    for f in fills:
        f.exact = any(same_code(t, report["cases"][f.case]["middle"]) for t in f.texts)
    report["fills"] = [asdict(f) for f in fills]
    report["methods"] = {m: summary([f for f in fills if f.method == m], report["target_cases"])
                         for m in report["methods"]}
    report["exact_compare"] = "tokens (same_code)"
    record.write_text(json.dumps(report, indent=1))
    print_table(report["methods"])


def machine(device: str) -> str:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.get_device_name(0)
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"{torch.get_num_threads()} torch threads, load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="builtin", help="builtin or a checkpoint folder")
    ap.add_argument("--control", action="append", default=[], metavar="NAME=DIR",
                    help="another checkpoint to run on the same cases (e.g. the previous built-in model)")
    ap.add_argument("--corpus", type=Path, default=REPO / ".corpus")
    ap.add_argument("--kernels", type=int, default=30, help="held-out kernels to take cases from (at most)")
    ap.add_argument("--sources", help="only these held-out packages (comma-separated names of "
                                      "training/corpus/build_corpus.py's SOURCES, e.g. pycuda-examples)")
    ap.add_argument("--per-kernel", type=int, default=3, help="statements masked per kernel (one at a time)")
    ap.add_argument("--select", choices=("statement", "line"), default="statement",
                    help="what is masked: a `;`-ended statement (the issue's cases) or any line of code "
                         "(also `if (...) {`, `}`, a `for` head)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--latency-only", action="store_true", help="only time fills of examples/saxpy.cu")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--threads", type=int, help="torch CPU threads (default: the engine's choice)")
    ap.add_argument("--no-baselines", action="store_true",
                    help="only the model and the controls (no empty span, no random weights): to compare two models")
    ap.add_argument("--rescore", type=Path, metavar="RECORD",
                    help="only compare a record's candidates with the originals again (see rescore)")
    args = ap.parse_args()
    if args.rescore:
        rescore(args.rescore)
        return
    import torch

    import engine

    if args.threads:
        torch.set_num_threads(args.threads)

    out_dir = Path(os.environ.get("OUT", ".device-out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    model = engine.load(args.model, device=args.device)
    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "model": args.model,
              "device": args.device, "machine": machine(args.device)}
    latency = measure_latency(model, args.repeats, args.max_tokens)
    report["latency"] = latency
    print(f"latency on {report['machine']}: median {latency['seconds_median']:.3f} s per greedy fill "
          f"({latency['tokens_median']:.0f} tokens); answer {latency['answer']!r}; 4 candidates "
          f"{latency['candidates']!r} in {latency['candidates_seconds']:.2f} s", flush=True)
    if not args.latency_only:
        sources = set(args.sources.split(",")) if args.sources else None
        cases = load_cases(args.corpus, args.seed, args.kernels, args.per_kernel, sources, args.select)
        report["sources"] = sorted(sources) if sources else "all held-out packages"
        target = target_cases(cases)
        print(f"{len(cases)} cases from {len({(c.path, c.kernel) for c in cases})} kernels of held-out packages "
              f"{sorted({c.source for c in cases})}; target cases {target}", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            folder = engine.resolve_builtin() if args.model == "builtin" else Path(args.model)
            methods = {} if args.no_baselines else {
                "empty": None,
                "random": engine.load(str(random_twin(folder, Path(tmp) / "random", args.seed)), device=args.device)}
            for spec in args.control:
                name, _, path = spec.partition("=")
                methods[name] = engine.load(path, device=args.device)
            methods["model"] = model
            fills = [f for name, eng in methods.items()
                     for f in fill_all(name, eng, cases, args.max_tokens, args.seed)]
        report["methods"] = {m: summary([f for f in fills if f.method == m], target) for m in methods}
        report["target_cases"] = target
        report["fills"] = [asdict(f) for f in fills]
        report["exact_compare"] = "tokens (same_code)"
        report["cases"] = [asdict(c) | {"prefix": c.prefix[len(PRELUDE):]} for c in cases]
        print_table(report["methods"])
    name = "builtin_latency" if args.latency_only else "builtin_eval" + (f"-{args.sources}" if args.sources else "") \
        + ("-lines" if args.select == "line" else "")
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(report, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
