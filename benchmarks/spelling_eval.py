"""Does spelling a fill as most CUDA code does (engine/spelling_prior.json) find the original
more often? Measured on fresh held-out statements, the drawing done once.

    python benchmarks/spelling_eval.py draw --seed 5 [--part 0 --parts 2] [--temperature T]
    python benchmarks/spelling_eval.py replay $OUT/spelling_draws-5-*.json
    python benchmarks/spelling_eval.py replay docs/spelling-draws-seeds-5-6.json.xz       # 001518e's draws
    python benchmarks/spelling_eval.py replay docs/spelling-draws-ban-seeds-5-6.json.xz   # ... with the bracket ban
    python benchmarks/spelling_eval.py shown RECORDS...   # what each set of draws showed: original, compiles

`draw` takes cases as benchmarks/builtin_eval.py does, from all held-out packages (`--kernels`
kernels, `--per-kernel` statements each: by default 200 statements, most of them not in
builtin_eval's target sets), fills each with the built-in model and the default settings (4
candidates), and records every candidate the engine drew before it respelled them
(OUT/spelling_draws-SEED-PART.json; `--part`/`--parts` split the cases over processes).
`replay` re-runs what the engine does after drawing (engine.fill.spelling.respelled, ranking,
engine.fill.ranking.with_drawn_spellings) on those draws, with the prior off and at several shares
(engine.fill.spelling.PRIOR_SHARE), and prints how many fills show the original among the 4
(C tokens, whitespace aside: dice_lsp.bench.fills.same_code). The draws do not depend on the spelling,
so the comparison is exact: the same candidates, spelt and ranked two ways.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

SHARES = (None, 0.9, 0.75, 2 / 3, 0.6)   # None: no prior, the file's spelling only


def draw(args: argparse.Namespace) -> None:
    import torch

    import engine
    import engine.decoding.local as local
    from builtin_eval import load_cases
    from dice_lsp.core.config import Settings

    torch.set_num_threads(args.threads)
    drawn: list[str] = []
    respell = local.respelled

    def recording(fill: str, prefix: str, suffix: str) -> str:
        drawn.append(fill)
        return respell(fill, prefix, suffix)

    local.respelled = recording   # LocalEngine.run respells each drawn candidate once
    cases = load_cases(args.corpus, args.seed, args.kernels, args.per_kernel)
    model = engine.load(args.model)
    defaults = Settings()
    sampling = defaults.sampling()
    if args.temperature is not None:
        sampling["temperature"] = args.temperature
    out = Path(os.environ.get("OUT", ".")) / f"spelling_draws-{args.seed}-{args.part}.json"
    rows = []
    for k, case in enumerate(cases):
        if k % args.parts != args.part:
            continue
        drawn.clear()
        started = time.perf_counter()
        shown = model.infill(case.prefix, case.suffix, n=defaults.candidates, max_tokens=args.max_tokens,
                             seed=args.seed + k, **sampling)
        rows.append({"case": k, "source": case.source, "path": case.path, "prefix": case.prefix,
                     "suffix": case.suffix, "middle": case.middle, "drawn": list(drawn),
                     "shown": [c.text for c in shown], "seconds": time.perf_counter() - started})
        print(f"case {k:3d}: {len(drawn):2d} drawn, {rows[-1]['seconds']:.1f} s", flush=True)
        out.write_text(json.dumps({"seed": args.seed, "sampling": sampling, "rows": rows}))
    print(f"wrote {out}")


def found(rows: list[dict], share: float | None, candidates: int = 4) -> int:
    """Of the recorded fills, how many show the original among `candidates` when their draws
    are respelled with the prior at `share` (None: no prior) and ranked as the engine ranks."""
    from dice_lsp.bench.fills import same_code
    from engine.fill import spelling
    from engine.fill.ranking import rank_in_scope, with_drawn_spellings
    from engine.types import Candidate

    def candidate(text: str) -> Candidate:
        return Candidate(text, 1, 1, 0.0, "eos", text)

    kept = spelling.PRIOR_SHARE
    spelling.PRIOR_SHARE = 2.0 if share is None else share   # 2.0: no choice has it
    try:
        count = 0
        for row in rows:
            drawn = [candidate(t) for t in row["drawn"]]
            spelt = [candidate(spelling.respelled(c.text, row["prefix"], row["suffix"])) for c in drawn]
            ranked = rank_in_scope(spelt, row["prefix"], row["suffix"])
            shown = with_drawn_spellings(ranked, {id(s): c for s, c in zip(spelt, drawn)}, candidates)
            count += any(same_code(c.text, row["middle"]) for c in shown)
        return count
    finally:
        spelling.PRIOR_SHARE = kept


def replay(args: argparse.Namespace) -> None:
    rows = [row for path in args.records for row in read_rows(path)]
    print(f"{len(rows)} cases from {len(args.records)} records")
    for share in SHARES:
        count = found(rows, share, args.candidates)
        name = "no prior" if share is None else f"prior, share {share:.2f}"
        print(f"{name:>18}: the original among the {args.candidates} in {count} of {len(rows)} "
              f"({count / len(rows):.1%})")


def shown(args: argparse.Namespace) -> None:
    """What the recorded fills showed the user, per record set: how many show the original, and
    how many show a candidate that compiles (nvcc, as builtin_eval checks; each distinct
    source checked once across the sets, in parallel)."""
    from concurrent.futures import ThreadPoolExecutor

    from builtin_eval import compiles
    from dice_lsp.bench.fills import same_code

    sets = {path: read_rows(path) for path in args.records}
    sources = {row["prefix"] + t + row["suffix"] for rows in sets.values() for row in rows
               for t in dict.fromkeys(row["shown"])}
    with ThreadPoolExecutor(os.cpu_count()) as pool:
        compiled = dict(zip(sources, pool.map(compiles, sources)))
    for path, rows in sets.items():
        exact = sum(any(same_code(t, row["middle"]) for t in row["shown"]) for row in rows)
        ok = sum(any(compiled[row["prefix"] + t + row["suffix"]] for t in row["shown"]) for row in rows)
        seconds = sorted(row["seconds"] for row in rows)[len(rows) // 2]
        print(f"{path}: {len(rows)} fills; the original shown in {exact} ({exact / len(rows):.1%}), a candidate "
              f"that compiles in {ok} ({ok / len(rows):.1%}); median {seconds:.1f} s a fill")


def read_rows(path: str) -> list[dict]:
    data = Path(path).read_bytes()
    return json.loads(lzma.decompress(data) if path.endswith(".xz") else data)["rows"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("draw")
    d.add_argument("--seed", type=int, default=5)
    d.add_argument("--kernels", type=int, default=100)
    d.add_argument("--per-kernel", type=int, default=2)
    d.add_argument("--part", type=int, default=0)
    d.add_argument("--parts", type=int, default=1)
    d.add_argument("--model", default="builtin")
    d.add_argument("--corpus", type=Path, default=REPO / ".corpus")
    d.add_argument("--max-tokens", type=int, default=64)
    d.add_argument("--temperature", type=float)
    d.add_argument("--threads", type=int, default=1)
    r = sub.add_parser("replay")
    r.add_argument("records", nargs="+")
    r.add_argument("--candidates", type=int, default=4)
    w = sub.add_parser("shown")
    w.add_argument("records", nargs="+", help="draw records, each a set (several files of one set: join them first)")
    args = ap.parse_args()
    if args.command == "draw":
        draw(args)
    elif args.command == "shown":
        shown(args)
    else:
        replay(args)


if __name__ == "__main__":
    main()
