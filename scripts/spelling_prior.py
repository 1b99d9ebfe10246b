"""The spelling CUDA code writes most, counted on the built-in model's corpus: what
engine.fill.spelling falls back on where the file around a selection says nothing.

    python scripts/spelling_prior.py [--corpus .corpus] [--out engine/spelling_prior.json]

Counted on the corpus's `train` and `valid` files by other authors (training/corpus/build_corpus.py;
the kernels this project generates are left out, they would count our own generators' habits),
file by file, with the very reader engine.fill.spelling reads a file with (`file_spelling`):

- `orders`: for each kind of `*` or `+` (its operands' kinds, thread coordinates as one), how
  often each kind of operand is written first: `blockIdx.x * blockDim.x` 1 276 times,
  `blockDim.x * blockIdx.x` 360 times;
- `updates`: compound updates (`x *= e;`) against spelt-out ones (`x = x * e;`);
- `declarations`: for each one-name declaration's type and value kind, its qualifiers and
  cast (`int i = ...` 563 times, `const int i = ...` 331 times for a global thread index).

Only kinds written at least MIN_USES times are kept. engine.fill.spelling takes a prior's choice only
where one form has at least engine.fill.spelling.PRIOR_SHARE of the uses.

`held_out` records how often the held-out packages (the `test` split, which the prior never
reads) write what the prior would choose: the premise that the prior spells a fill as an
unseen file would, measured on files it never saw.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.fill.spelling import PRIOR_SHARE, file_spelling, prior_choice  # noqa: E402

MIN_USES = 20
OWN = {"generated", "generated-load-inline", "ordinary"}   # this project's generators


def count(files: list[dict]) -> tuple[dict[str, Counter], Counter, dict[tuple[str, str], Counter]]:
    orders: dict[str, Counter] = {}
    updates: Counter = Counter()
    declarations: dict[tuple[str, str], Counter] = {}
    for f in files:
        spelling = file_spelling(f["text"], "")
        for kind, firsts in spelling.orders.items():
            orders.setdefault(kind, Counter()).update(firsts)
        updates.update(compound=spelling.compound, spelt_out=spelling.spelt_out)
        for quals, kind, cast, value in spelling.declarations:
            declarations.setdefault((kind, value), Counter())[f"{quals}|{cast}"] += 1
    return orders, updates, declarations


def agreement(prior: dict, orders, updates, declarations) -> dict:
    """How often held-out code writes what the prior chooses, where it chooses."""
    def share(agree: int, total: int) -> dict:
        return {"agree": agree, "uses": total, "share": round(agree / total, 3) if total else None}

    agree = total = 0
    for kind, firsts in orders.items():
        choice = prior_choice(prior["orders"].get(kind, {}))
        if choice is not None:
            agree, total = agree + firsts[choice], total + sum(firsts.values())
    result = {"orders": share(agree, total)}
    choice = prior_choice(prior["updates"])
    result["updates"] = share(updates[choice], sum(updates.values())) if choice else share(0, 0)
    agree = total = 0
    for key, forms in declarations.items():
        choice = prior_choice(prior["declarations"].get(" @ ".join(key), {}))
        if choice is not None:
            agree, total = agree + forms[choice], total + sum(forms.values())
    result["declarations"] = share(agree, total)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=Path(".corpus"))
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "engine/spelling_prior.json")
    args = ap.parse_args()
    files = [json.loads(line) for line in (args.corpus / "files.jsonl").read_text().splitlines()]
    files = [f for f in files if f["source"] not in OWN]
    orders, updates, declarations = count([f for f in files if f["split"] != "test"])
    prior = {
        "about": "scripts/spelling_prior.py: the spelling the corpus's code by other authors writes most",
        "files": sum(f["split"] != "test" for f in files),
        "min_uses": MIN_USES,
        "orders": {k: dict(c.most_common()) for k, c in sorted(orders.items()) if sum(c.values()) >= MIN_USES},
        "updates": dict(updates),
        "declarations": {" @ ".join(k): dict(c.most_common()) for k, c in sorted(declarations.items())
                         if sum(c.values()) >= MIN_USES},
    }
    prior["held_out"] = agreement(prior, *count([f for f in files if f["split"] == "test"]))
    prior["held_out"]["files"] = sum(f["split"] == "test" for f in files)
    args.out.write_text(json.dumps(prior, indent=1, sort_keys=False) + "\n")
    print(f"{args.out}: {len(prior['orders'])} operand orders, {len(prior['declarations'])} declaration forms "
          f"from {prior['files']} files; updates {dict(updates)}; a choice needs {PRIOR_SHARE:.0%} of the uses")
    for what, row in prior["held_out"].items():
        print(f"  held out, {what}: {row}")


if __name__ == "__main__":
    main()
