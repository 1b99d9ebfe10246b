"""Whole-file fills past the length the built-in model was trained on: does cutting the prompt to
`trained_context` (engine.local.LocalEngine.context) lose fills, and what does it save?

    python benchmarks/context_eval.py --context 1024 [--cases 24] [--seed 7]
    python benchmarks/context_eval.py --context 4096          # the model's positions: the old behaviour

Cases: files of the held-out packages (the corpus's test split, scripts/build_corpus.py) longer
than 1200 tokens; in each, one `;`-ended statement of an indented line (not a comment, `return;`
or `break;`) is masked, chosen with --seed, and the whole rest of the file is the context, as
an editor sends it. Each case is filled as `dice fill` does by default (4 candidates), with the
engine's context set to --context tokens; reported: fills with the original among the 4
(whitespace aside: builtin_eval.same_code) and seconds per fill, one torch thread. Records go to
OUT (env var, default ./.device-out)/context_eval-CONTEXT.jsonl.
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

from builtin_eval import is_statement, line_span, same_code  # noqa: E402 - after the path

SKIPPED_STARTS = ("return;", "break;", "#")   # besides comments (is_statement)


def whole_file_cases(texts: list[str], tokenizer, count: int, seed: int) -> list[tuple[str, str, str]]:
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
        start, end = line_span(lines, rng.choice(statements))
        cases.append((text[:start], text[start:end], text[end:]))
        if len(cases) == count:
            break
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--context", type=int, required=True, help="the engine's context in tokens")
    ap.add_argument("--cases", type=int, default=24)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--corpus", type=Path, default=REPO / ".corpus")
    args = ap.parse_args()
    import torch

    import engine
    from dice_lsp.core.config import Settings

    torch.set_num_threads(1)
    model = engine.load("builtin", device="cpu")
    texts = json.loads((args.corpus / "data" / "test_texts.json").read_text())
    cases = whole_file_cases(texts, model.tokenizer, args.cases, args.seed)
    # The engine's context is min(positions, trained_context): set both to the one measured.
    model.config.max_position_embeddings = args.context
    model.config.extra["trained_context"] = args.context
    defaults = Settings()
    out = Path(os.environ.get("OUT", ".device-out"))
    out.mkdir(parents=True, exist_ok=True)
    hits, seconds = 0, []
    with open(out / f"context_eval-{args.context}.jsonl", "w") as fh:
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
