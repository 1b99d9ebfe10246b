"""Whole-file fills past the length the built-in model was trained on: does cutting the prompt to
`trained_context` (engine.decoding.local.LocalEngine.context) lose fills, and what does it save?

    python benchmarks/context_eval.py --context 1024 [--cases 24] [--seed 7]
    python benchmarks/context_eval.py --context 4096          # the model's positions: the old behaviour
    python benchmarks/context_eval.py --context 512 --split valid --cases 96 --per-file 3 --seed 3   # to choose

Cases: files of the held-out packages (the corpus's test split, training/corpus/build_corpus.py) longer
than 1200 tokens; in each, one `;`-ended statement of an indented line (not a comment, `return;`
or `break;`) is masked, chosen with --seed, and the whole rest of the file is the context, as
an editor sends it. Each case is filled as `dice fill` does by default (4 candidates), with the
engine's context set to --context tokens; reported: fills with the original among the 4
(whitespace aside: dice_lsp.bench.fills.same_code) and seconds per fill, one torch thread. Records go to
OUT (env var, default ./.device-out)/context_eval-CONTEXT[-SPLIT-seedS].jsonl. A choice (of a
length, say) is made on `--split valid` (files of the trained packages that training never
read, 2% by a hash of the text) and reported on the held-out test split.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from dice_lsp.bench.fills import is_statement, line_span, same_code  # noqa: E402 - after the path

SKIPPED_STARTS = ("return;", "break;", "#")   # besides comments (is_statement)


def whole_file_cases(texts: list[str], tokenizer, count: int, seed: int,
                     per_file: int = 1) -> list[tuple[str, str, str]]:
    """`count` cases, `per_file` different statements masked (one at a time) in each file."""
    rng = random.Random(seed)
    long = [t for t in texts if len(tokenizer.encode(t, add_special_tokens=False)) > 1200]
    rng.shuffle(long)
    cases = []
    for text in long:
        lines = text.split("\n")
        statements = [i for i, line in enumerate(lines) if is_statement(line)
                      and 4 < len(line.strip()) < 100 and not line.strip().startswith(SKIPPED_STARTS)]
        if not statements:
            continue
        for line in (rng.sample(statements, min(per_file, len(statements))) if per_file > 1
                     else [rng.choice(statements)]):   # one per file: the draws of 4d144a1's records
            start, end = line_span(lines, line)
            cases.append((text[:start], text[start:end], text[end:]))
        if len(cases) >= count:
            break
    return cases[:count]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--context", type=int, required=True, help="the engine's context in tokens")
    ap.add_argument("--cases", type=int, default=24)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--corpus", type=Path, default=REPO / ".corpus")
    ap.add_argument("--per-file", type=int, default=1, help="statements masked per file (one at a time)")
    ap.add_argument("--split", choices=("test", "valid"), default="test",
                    help="test: the held-out packages (report); valid: unseen files of the trained ones (choose)")
    args = ap.parse_args()
    import torch

    import engine
    from dice_lsp.core.config import Settings

    torch.set_num_threads(1)
    model = engine.load("builtin", device="cpu")
    texts = json.loads((args.corpus / "data" / f"{args.split}_texts.json").read_text())
    cases = whole_file_cases(texts, model.tokenizer, args.cases, args.seed, args.per_file)
    # The engine's context is min(positions, trained_context): set both to the one measured.
    model.config.max_position_embeddings = args.context
    model.config.extra["trained_context"] = args.context
    defaults = Settings()
    out = Path(os.environ.get("OUT", ".device-out"))
    out.mkdir(parents=True, exist_ok=True)
    hits, seconds = 0, []
    default = (args.split, args.seed, args.per_file) == ("test", 7, 1)
    name = f"context_eval-{args.context}" + ("" if default else f"-{args.split}-seed{args.seed}-per{args.per_file}")
    with open(out / f"{name}.jsonl", "w") as fh:
        for k, (prefix, middle, suffix) in enumerate(cases):
            started = time.perf_counter()
            candidates = model.infill(prefix, suffix, n=defaults.candidates, max_tokens=64, seed=k,
                                      **defaults.sampling())
            seconds.append(time.perf_counter() - started)
            hit = any(same_code(c.text, middle) for c in candidates)
            hits += hit
            fh.write(json.dumps({"k": k, "context": args.context, "hit": hit, "seconds": round(seconds[-1], 2),
                                 "middle": middle, "texts": [c.text for c in candidates]}) + "\n")
            fh.flush()
    print(f"context {args.context}: the original among {defaults.candidates} in {hits}/{len(cases)} fills; "
          f"median {statistics.median(seconds):.1f} s, max {max(seconds):.1f} s, total {sum(seconds):.0f} s")


if __name__ == "__main__":
    main()
