"""How often a real line's own text passes the engine's shape checks when that line is selected:
the original fill must be in shape (engine.fill.spans.fits_span), kept whole when the model runs on
past it (cut_to_span of the line followed by the code after it), and its row let stop there
(span_ended). A line that fails them is one whose right fill the engine ranks low or never
shows.

    python benchmarks/line_shape.py [--corpus .corpus] [--python] [--per-file 20] [--seed 0]

Lines: up to --per-file indented lines of code (not comments or directives) of each file of
the corpus's held-out and validation splits, drawn with --seed, each selected from its first
non-blank character to its end, the whole rest of the file its context. Files: those by other
authors (not the project's generated or ordinary kernels), or with --python every `.py` file
(CUDA in Python strings; the corpus has only the project's own). No model is run.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dice_lsp.bench.fills import is_code_line, line_span  # noqa: E402
from benchmarks.corpus_sweep import GENERATED  # noqa: E402
from engine.fill import spans  # noqa: E402


def selections(text: str, rng: random.Random, count: int):
    """(prefix, line, suffix) for up to `count` indented code lines of text (builtin_eval's
    `--select line` lines, each without its indentation)."""
    lines = text.split("\n")
    code = [i for i, line in enumerate(lines) if is_code_line(line)]
    for i in rng.sample(code, min(count, len(code))):
        a, b = line_span(lines, i)
        yield text[:a], text[a:b], text[b:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=REPO / ".corpus")
    ap.add_argument("--python", action="store_true", help="the .py files (CUDA in Python strings) instead")
    ap.add_argument("--per-file", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    files = [json.loads(line) for line in (args.corpus / "files.jsonl").read_text().splitlines()]
    files = [f for f in files if f["split"] in ("test", "valid")
             and (f["path"].endswith(".py") if args.python else f["source"] not in GENERATED)]
    rng = random.Random(args.seed)
    total = unbalanced = fits = kept = ended = 0
    start = time.perf_counter()
    for f in files:
        for prefix, line, suffix in selections(f["text"], rng, args.per_file):
            if not spans.inside_one_line(prefix, suffix):
                continue
            total += 1
            unbalanced += not spans.balanced(line)
            fits += spans.fits_span(line, prefix, suffix)
            kept += spans.cut_to_span(line + suffix[:300], prefix, suffix).strip() == line.strip()
            ended += spans.span_ended(line + "\n" + suffix.lstrip("\n")[:50], prefix, suffix)
    share = lambda k: f"{k} ({100 * k / max(total, 1):.0f}%)"  # noqa: E731
    print(f"{len(files)} files, {total} selected lines, {share(unbalanced)} not balanced on their own: "
          f"in shape {share(fits)}, kept whole by the cut {share(kept)}, let stop {share(ended)}; "
          f"{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
