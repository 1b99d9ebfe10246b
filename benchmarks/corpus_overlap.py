"""Could the training corpus itself give the statements the model misses?

    python benchmarks/corpus_overlap.py [docs/spelling-draws-repair-seeds-5-6.json.xz] [--corpus .corpus]

Reads a draws record of benchmarks/spelling_eval.py (held-out statements, each with the
candidates the engine drew for it) and the corpus's training and validation files
(training/corpus/build_corpus.py's files.jsonl; the held-out packages are not read). Reports, for all
statements and for those whose original the engine never drew (the misses): how many
originals are a line of the corpus at all (C tokens one space apart, as engine.fill.ranking.normalized
compares fills), and how many a lookup would give among its 4 answers: the 4 lines that most
often follow the line before the selection in the corpus. No model is run.
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engine.fill.ranking import normalized  # noqa: E402


def corpus_lines(files_jsonl: Path) -> tuple[Counter, dict[str, Counter]]:
    """(how often each line occurs, the lines that follow each line) over the non-test files."""
    counts: Counter = Counter()
    following: dict[str, Counter] = defaultdict(Counter)
    with files_jsonl.open() as f:
        for row in f:
            entry = json.loads(row)
            if entry["split"] == "test":
                continue
            lines = [line for line in map(normalized, entry["text"].split("\n")) if line]
            for before, line in zip(lines, lines[1:]):
                counts[line] += 1
                following[before][line] += 1
    return counts, following


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("draws", nargs="?", type=Path, default=REPO / "docs/spelling-draws-repair-seeds-5-6.json.xz")
    ap.add_argument("--corpus", type=Path, default=REPO / ".corpus")
    args = ap.parse_args()
    rows = json.loads(lzma.open(args.draws).read())["rows"]
    counts, following = corpus_lines(args.corpus / "files.jsonl")
    tally = {"all": Counter(), "misses": Counter()}
    for row in rows:
        original = normalized(row["middle"])
        before = [line for line in map(normalized, row["prefix"].split("\n")[:-1]) if line]
        looked_up = [line for line, _ in following[before[-1]].most_common(4)] if before else []
        drawn = original in {normalized(t) for t in row["drawn"]}
        for name in ("all",) if drawn else ("all", "misses"):
            tally[name]["statements"] += 1
            tally[name]["in the corpus"] += counts[original] > 0
            tally[name]["looked up"] += original in looked_up
    print(f"{args.draws.name}: {len(rows)} held-out statements; corpus {args.corpus} (train and valid files)")
    print("| statements | count | the original is a line of the corpus | a 4-line lookup by the line before gives it |")
    print("| --- | --- | --- | --- |")
    for name, t in tally.items():
        print(f"| {name} | {t['statements']} | {t['in the corpus']} | {t['looked up']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
