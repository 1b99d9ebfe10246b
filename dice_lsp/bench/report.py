"""What a `dice bench` run shows: the per-level tables as text and the speedup chart."""

from __future__ import annotations

from pathlib import Path

from dice_lsp.bench.results import FINISHED_STATES, TaskRecord
from dice_lsp.bench.stats import EAGER, Table, not_counted_words, outcome

COLUMNS = ("level", "problems", "compiled", "correct", "fast_1", "fast_2", "geomean", "not counted")


def _count(n: int | None, total: int) -> str:
    if n is None:
        return "-"
    return f"{n} ({100 * n / total:.0f}%)" if total else str(n)


def _share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def format_table(table: Table, *, gpu: str | None, candidates: int, model: str, baseline: str,
                 protocol: str) -> str:
    """A plain-text table; '-' marks what was not measured, and the header says why. The last
    column counts the candidates whose measurement proves nothing (dice_lsp.bench.stats)."""
    header = (
        f"dice bench | {model} | best of {candidates} candidate(s) per problem | "
        f"GPU: {gpu or 'no GPU'} | speedup vs {baseline} | protocol: {protocol}"
    )
    lines = [header]
    if table.note:
        lines.append(f"  ({table.note})")
    lines.append("  fast_p = share of problems with a correct candidate whose median speedup > p")
    lines.append("  counted: proven verdicts only; not counted: candidates measured impossible, suspicious, "
                 "unstable or unproven, or flagged")
    cells = [list(COLUMNS)]
    for r in table.rows:
        cells.append([
            r.level,
            str(r.problems),
            _count(r.compiled, r.problems),
            _count(r.correct, r.problems),
            _share(r.fast_1),
            _share(r.fast_2),
            "-" if r.geomean_speedup is None else f"{r.geomean_speedup:.2f}x",
            not_counted_words(r.not_counted) or "-",
        ])
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    for row in cells:
        lines.append("  " + "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
    return "\n".join(lines)


def write_chart(tasks: list[TaskRecord], gpu: str | None, path: Path) -> Path:
    """A PNG bar chart of each problem's best correct speedup vs eager, grouped by level,
    on a log scale with the 1x line. Without measured speedups the chart says why instead
    of drawing empty bars."""
    import matplotlib

    matplotlib.use("Agg")  # no display on servers and CI
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    from matplotlib.patches import Patch

    outcomes = [(t.name, outcome(t, EAGER)) for t in tasks if t.state in FINISHED_STATES]
    timed = [(name, o) for name, o in outcomes if o.speedup is not None]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(timed) + 2), 4.5))
    if timed:
        levels = sorted({o.level for _, o in timed})
        colours = {lv: plt.cm.tab10(i % 10) for i, lv in enumerate(levels)}
        # Bars grow from 1x, up for faster and down for slower, on a log scale where 2x
        # and 0.5x are the same distance from it.
        ax.bar(
            range(len(timed)),
            [o.speedup - 1.0 for _, o in timed],
            bottom=1.0,
            color=[colours[o.level] for _, o in timed],
        )
        ax.set_yscale("log")
        for set_formatter in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
            set_formatter(matplotlib.ticker.FormatStrFormatter("%gx"))
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(timed)))
        ax.set_xticklabels([name.rsplit("/", 1)[-1][:28] for name, _ in timed], rotation=70, ha="right", fontsize=7)
        ax.set_ylabel("speedup vs eager (best correct candidate)")
        ax.legend(handles=[Patch(color=colours[lv], label=lv) for lv in levels], fontsize=8)
    else:
        why = "no GPU: nothing was timed" if gpu is None else "no correct candidate was timed"
        ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    ax.set_title(f"dice bench: {len(timed)} of {len(outcomes)} problems with a correct, timed candidate"
                 f" ({gpu or 'no GPU'})", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
