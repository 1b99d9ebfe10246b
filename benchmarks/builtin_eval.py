"""Evaluate the built-in model on held-out corpus kernels: compile rate, exact match, latency.

    python benchmarks/builtin_eval.py [--model builtin] [--corpus .corpus] [--files 25] [--device cpu]
    python benchmarks/builtin_eval.py --latency-only --model DIR --device cuda     # GPU latency

Cases: held-out (test split) files of scripts/build_corpus.py that compile on their own
with nvcc; in each, one statement (a `;`-terminated line inside a function body, without
its indentation) and one loop body (the lines between a `for`/`while` line ending in `{`
and its `}`) are masked, the same span shapes the model was trained on.

Methods, measured in the same run on the same cases:
- `empty`: leave the span empty (the floor: removing a statement often still compiles);
- `random`: a model of the same shape with random weights, through the same engine;
- the model under test (`builtin` by default), greedy decoding, DICE's settings.

For each fill: does prefix + fill + suffix compile (profiler.nvcc_check, device code, no GPU
needed), does the fill equal the original after whitespace normalization, and how long
the fill took. Results go to OUT (env var, default ./.device-out)/builtin_eval.json, plus
a Markdown table on stdout for docs/model-card.md.
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
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

LOOP_HEAD = re.compile(r"^\s*(for|while)\s*\(.*\{\s*$")


@dataclass
class Case:
    file: int
    kind: str        # "statement" | "loop body"
    prefix: str
    middle: str
    suffix: str


@dataclass
class Fill:
    method: str
    case: int
    kind: str
    compiled: bool
    exact: bool
    seconds: float
    text: str


def normalized(code: str) -> str:
    return " ".join(code.split())


def compiles(source: str) -> bool:
    from profiler.compile import nvcc_check  # tree-sitter and nvcc only where compiling

    return not any(d.severity == "error" for d in nvcc_check(source, "case.cu"))


def cases_of(text: str, file: int, rng: random.Random) -> list[Case]:
    """One statement and one loop body of a file, where it has them."""
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    statements = [i for i, line in enumerate(lines)
                  if line.startswith((" ", "\t")) and line.rstrip().endswith(";")]
    loops = []
    for i, line in enumerate(lines):
        if not LOOP_HEAD.match(line):
            continue
        depth = 0
        for j in range(i, len(lines)):
            code = lines[j].split("//")[0]
            depth += code.count("{") - code.count("}")
            if depth == 0:
                if j > i + 1 and lines[j].strip().startswith("}"):
                    loops.append((i, j))
                break
    found = []
    if statements:
        i = rng.choice(statements)
        a = starts[i] + len(lines[i]) - len(lines[i].lstrip())
        b = starts[i] + len(lines[i])
        found.append(Case(file, "statement", text[:a], text[a:b], text[b:]))
    if loops:
        i, j = rng.choice(loops)
        a, b = starts[i + 1], starts[j]
        found.append(Case(file, "loop body", text[:a], text[a:b], text[b:]))
    return found


def load_cases(corpus: Path, files: int, seed: int) -> list[Case]:
    """Cases from the first `files` held-out files (shuffled by seed) that compile as they are."""
    texts = json.loads((corpus / "data" / "test_texts.json").read_text())
    order = list(range(len(texts)))
    rng = random.Random(seed)
    rng.shuffle(order)
    cases: list[Case] = []
    used = 0
    for f in order:
        if used == files:
            break
        found = cases_of(texts[f], f, rng)
        if not found or len(texts[f]) > 6000 or not compiles(texts[f]):
            continue
        cases += found
        used += 1
    return cases


def random_twin(folder: Path, out: Path, seed: int) -> Path:
    """A checkpoint of the same shape and tokenizer as `folder`, with random weights
    (initialized as engine.train initializes before training)."""
    import torch

    from engine.loading import config_to_json, load_checkpoint, save_checkpoint
    from engine.train import TrainSettings, build_model

    _, tokenizer, config = load_checkpoint(folder, "cpu", torch.float32)
    settings = TrainSettings(model=config_to_json(config), seed=seed)
    model = build_model(settings, torch.device("cpu"))
    save_checkpoint(model.to(torch.bfloat16), tokenizer, out)
    return out


def fill_all(method: str, engine, cases: list[Case], max_tokens: int) -> list[Fill]:
    fills = []
    for k, case in enumerate(cases):
        started = time.perf_counter()
        if engine is None:
            text = ""
        else:
            text = engine.infill(case.prefix, case.suffix, n=1, max_tokens=max_tokens, temperature=0.0)[0].text
        seconds = time.perf_counter() - started
        ok = compiles(case.prefix + text + case.suffix)
        fills.append(Fill(method, k, case.kind, ok, normalized(text) == normalized(case.middle), seconds, text))
        print(f"  {method:>8} case {k:3d} ({case.kind:9s}) compiled={ok!s:5} exact={fills[-1].exact!s:5} "
              f"{seconds:6.2f} s", flush=True)
    return fills


def summary(fills: list[Fill]) -> dict:
    def share(values: list[bool]) -> float:
        return sum(values) / len(values) if values else float("nan")

    out = {"cases": len(fills), "compiled": share([f.compiled for f in fills]),
           "exact": share([f.exact for f in fills])}
    for kind in ("statement", "loop body"):
        mine = [f for f in fills if f.kind == kind]
        out[kind] = {"cases": len(mine), "compiled": share([f.compiled for f in mine]),
                     "exact": share([f.exact for f in mine])}
    times = [f.seconds for f in fills]
    out["seconds_median"] = statistics.median(times) if times else None
    out["seconds_p90"] = sorted(times)[int(0.9 * (len(times) - 1))] if times else None
    return out


def measure_latency(engine, repeats: int, max_tokens: int) -> dict:
    """Seconds per fill of the saxpy example's statement (examples/saxpy.cu), after a warm-up."""
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
    return {"fills": repeats, "seconds_median": statistics.median(times), "seconds_min": min(times),
            "tokens_median": statistics.median(tokens), "answer": answer, "original": target}


def machine(device: str) -> str:
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_name(0)
    import torch

    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"{torch.get_num_threads()} torch threads, load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="builtin", help="builtin or a checkpoint folder")
    ap.add_argument("--corpus", type=Path, default=REPO / ".corpus")
    ap.add_argument("--files", type=int, default=25, help="held-out files to take cases from")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--latency-only", action="store_true", help="only time fills of examples/saxpy.cu")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    args = ap.parse_args()
    import torch

    import engine

    if args.threads:
        torch.set_num_threads(args.threads)

    out_dir = Path(os.environ.get("OUT", ".device-out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    model = engine.load(args.model, device=args.device)
    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "model": args.model,
              "device": args.device, "machine": machine(args.device),
              "sampling": "greedy, block 4, 4 steps per block, low_confidence_static"}
    latency = measure_latency(model, args.repeats, args.max_tokens)
    report["latency"] = latency
    print(f"latency on {report['machine']}: median {latency['seconds_median']:.3f} s per fill "
          f"({latency['tokens_median']:.0f} tokens); answer {latency['answer']!r}", flush=True)
    if not args.latency_only:
        cases = load_cases(args.corpus, args.files, args.seed)
        print(f"{len(cases)} cases from {args.files} held-out files", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            folder = engine.resolve_builtin() if args.model == "builtin" else Path(args.model)
            twin = engine.load(str(random_twin(folder, Path(tmp) / "random", args.seed)), device=args.device)
            fills = (fill_all("empty", None, cases, args.max_tokens)
                     + fill_all("random", twin, cases, args.max_tokens)
                     + fill_all("model", model, cases, args.max_tokens))
        report["methods"] = {m: summary([f for f in fills if f.method == m]) for m in ("empty", "random", "model")}
        report["fills"] = [asdict(f) for f in fills]
        report["cases"] = [asdict(c) | {"prefix": c.prefix[-300:], "suffix": c.suffix[:300]} for c in cases]
        print("\n| method | cases | compiles | exact match | statement exact | loop body exact "
              "| median s/fill |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for name, s in report["methods"].items():
            print(f"| {name} | {s['cases']} | {s['compiled']:.0%} | {s['exact']:.0%} | "
                  f"{s['statement']['exact']:.0%} | {s['loop body']['exact']:.0%} | "
                  f"{s['seconds_median']:.2f} |")
    path = out_dir / ("builtin_latency.json" if args.latency_only else "builtin_eval.json")
    path.write_text(json.dumps(report, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
