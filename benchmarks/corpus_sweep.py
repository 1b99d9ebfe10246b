"""Robustness sweep over real CUDA by other authors: the language server's analysis of a document
and the text functions of a FIM fill, on every real file of the corpus, each call timed.

    python benchmarks/corpus_sweep.py [--corpus .corpus] [--splits train,valid,test] [--per-file 3]

Files: the corpus's records (training/corpus/build_corpus.py, `.corpus/files.jsonl`) of the real
sources (not the project's generated or ordinary kernels). For each file:
dice_lsp.lsp.document_analysis.analyse (what codeAction, codeLens and hover read), then at
`--per-file` lines chosen with --seed, the line masked: engine.fill.spans.s cut_to_span, span_ended,
fits_span and engine.fill.spelling.respelled of five fills (the line, the line and another, another
line alone, `}`, an unbalanced one), needed_names and scope_of, and engine.decoding.local's
rank_in_scope and shows_bad_fills of four candidates, all over the whole file (the engine cuts
a fill's context first, so these are harder than the engine's calls). Reported: files, any
exception (with its traceback's end), and every call over --slow seconds. Exit status 1 if
anything raised.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

GENERATED = ("ordinary", "generated", "generated-load-inline")   # the project's own kernels


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=REPO / ".corpus")
    ap.add_argument("--splits", default="train,valid,test")
    ap.add_argument("--per-file", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slow", type=float, default=1.0, help="seconds: a call over this is reported")
    args = ap.parse_args()

    from dice_lsp.lsp.document_analysis import analyse
    from engine.fill.ranking import rank_in_scope, shows_bad_fills
    from engine.fill.names import needed_names, scope_of
    from engine.fill.spans import cut_to_span, fits_span, span_ended
    from engine.fill.spelling import respelled
    from engine.types import Candidate

    splits = set(args.splits.split(","))
    files = []
    with open(args.corpus / "files.jsonl") as fh:
        for line in fh:
            record = json.loads(line)
            if record["split"] in splits and record["source"] not in GENERATED:
                files.append(record)
    rng = random.Random(args.seed)
    errors, slow = [], []

    def timed(where: str, fn, *call_args):
        started = time.perf_counter()
        try:
            result = fn(*call_args)
        except Exception as exc:  # noqa: BLE001 - every failure is what this looks for
            errors.append((where, f"{type(exc).__name__}: {exc}"[:300], traceback.format_exc()[-800:]))
            return None
        seconds = time.perf_counter() - started
        if seconds > args.slow:
            slow.append((round(seconds, 2), where))
        return result

    started = time.perf_counter()
    for record in files:
        text, path = record["text"], f"{record['source']}/{record['path']}"
        timed(f"analyse {path}", analyse, text, "/sweep/" + Path(record["path"]).name)
        lines = text.split("\n")
        for _ in range(args.per_file):
            i = rng.randrange(len(lines))
            indent = len(lines[i]) - len(lines[i].lstrip())
            a = sum(len(line) + 1 for line in lines[:i]) + indent
            b = a + len(lines[i].strip())
            prefix, middle, suffix = text[:a], text[a:b], text[b:]
            other = lines[rng.randrange(len(lines))].strip()
            where = f"{path}:{i + 1}"
            for fill in (middle, middle + "\n" + other, other, "}", "(" + middle):
                for fn in (cut_to_span, span_ended, fits_span, respelled):
                    timed(f"{fn.__name__} {where}", fn, fill, prefix, suffix)
            timed(f"needed_names {where}", needed_names, prefix, suffix)
            timed(f"scope_of {where}", scope_of, prefix, suffix)
            candidates = [Candidate(f, 0, 0, 0.0, "eos", f) for f in (middle, other, "int i = 0;", middle)]
            timed(f"rank_in_scope {where}", rank_in_scope, candidates, prefix, suffix)
            timed(f"shows_bad_fills {where}", shows_bad_fills, candidates, prefix, suffix, 4)
    print(f"{len(files)} files ({', '.join(sorted(splits))}), {args.per_file} lines each, "
          f"{time.perf_counter() - started:.0f} s: {len(errors)} exceptions, {len(slow)} calls over {args.slow} s")
    for where, what, trace in errors[:20]:
        print(f"\n{where}: {what}\n{trace}")
    for seconds, where in sorted(slow, reverse=True)[:20]:
        print(f"{seconds:7.2f} s  {where}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
