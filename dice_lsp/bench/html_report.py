"""report.html of a `dice bench` run: one self-contained page (inline SVG and CSS, no script,
no font or image fetched), readable offline and in an editor's webview.

It shows fast_p against p (KernelBench's fast_p: the share of problems with a counted correct
candidate whose speedup is above p, dice_lsp.bench.stats), each problem's best speedup with its
95% interval, every candidate's status (a measured candidate whose measurement proves nothing
is `not counted`, with why), the per-level tables, the machine and the commit.
"""

from __future__ import annotations

import datetime
import html
import math
import platform
import subprocess
from pathlib import Path
from typing import Any

from dice_lsp.bench.results import FINISHED_STATES, TaskRecord
from dice_lsp.bench.stats import EAGER, NO_GPU_NOTE, Table, counted, fast_p, left_out, not_counted_words, outcome

REPORT_FILE = "report.html"
PACKAGE_ROOT = Path(__file__).resolve().parents[2]

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; padding: 0 1em; color: #1b1b1b; background: #fff; }
h1 { font-size: 1.5em; margin-bottom: .2em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .5em 0; } th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
th { background: #f0f0f0; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.status-faster { color: #0a6b2a; font-weight: 600; } .status-not-counted { color: #9a5b00; font-weight: 600; }
.status-wrong, .status-compile_error, .status-crash, .status-timeout, .status-error { color: #b00020; }
dl { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; } dt { font-weight: 600; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
"""


def git_commit(root: Path = PACKAGE_ROOT) -> str:
    """The checkout's commit (with `+changes` when its tracked files differ), else why not."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown (not a git checkout)"
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + (" +changes" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown (git not found)"


def machine(gpu: str | None) -> dict[str, str]:
    return {
        "GPU": gpu or "no GPU (nothing was checked or timed)",
        "host": platform.node() or "unknown",
        "system": f"{platform.system()} {platform.release()} {platform.machine()}",
        "Python": platform.python_version(),
    }


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def candidate_status(verdict: dict[str, Any] | None) -> str:
    """A candidate's status as the report shows it: `not counted (why)` for a measurement that
    proves nothing, else the judge's status."""
    if verdict is None:
        return "not judged"
    reason = left_out(verdict)
    if reason is not None:
        return f"not counted ({reason})"
    return str(verdict.get("status"))


def _status_class(status: str) -> str:
    return "status-not-counted" if status.startswith("not counted") else f"status-{status}"


def best_candidate(task: TaskRecord) -> tuple[int, dict[str, Any]] | None:
    """The counted correct candidate with the largest speedup (the one the tables count)."""
    best = None
    for i, c in enumerate(task.candidates):
        v = c.verdict
        if v and counted(v) and v.get("correct") is True and v.get("speedup") is not None:
            if best is None or v["speedup"] > best[1]["speedup"]:
                best = (i, v)
    return best


def fast_p_svg(tasks: list[TaskRecord], measured: bool) -> str:
    """fast_p as a step function of p on [0, p_max], with p = 1 and p = 2 marked."""
    width, height, left, bottom, top, right = 640, 300, 52, 40, 16, 16
    w, h = width - left - right, height - top - bottom
    parts = [f'<svg id="fast-p-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="fast_p against p">',
             f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="#fafafa" stroke="#999"/>']
    outcomes = [outcome(t, EAGER) for t in tasks if t.state in FINISHED_STATES]
    if not measured or not outcomes:
        why = NO_GPU_NOTE if not measured else "no finished problem"
        parts.append(f'<text x="{left + w / 2}" y="{top + h / 2}" text-anchor="middle">fast_p: {_e(why)}</text>')
        return "".join(parts) + "</svg>"
    speedups = [o.speedup for o in outcomes if o.correct and o.speedup is not None]
    p_max = max(2.5, 1.1 * max(speedups, default=0.0))
    x = lambda p: left + w * p / p_max  # noqa: E731
    y = lambda share: top + h * (1 - share)  # noqa: E731
    for share in (0, .25, .5, .75, 1):
        parts.append(f'<line x1="{left}" x2="{left + w}" y1="{y(share):.1f}" y2="{y(share):.1f}" stroke="#e4e4e4"/>'
                     f'<text x="{left - 6}" y="{y(share) + 4:.1f}" text-anchor="end">{share * 100:.0f}%</text>')
    ticks = sorted({0.0, 1.0, 2.0, *[float(t) for t in range(3, int(p_max) + 1, max(1, int(p_max) // 6))]})
    for p in ticks:
        parts.append(f'<text x="{x(p):.1f}" y="{top + h + 16}" text-anchor="middle">{p:g}</text>')
    for p in (1.0, 2.0):
        parts.append(f'<line class="p-mark" x1="{x(p):.1f}" x2="{x(p):.1f}" y1="{top}" y2="{top + h}" '
                     f'stroke="#888" stroke-dasharray="4 3"/>'
                     f'<text x="{x(p) + 3:.1f}" y="{top + 12}">fast_{p:g} = {fast_p(outcomes, p) * 100:.0f}%</text>')
    # fast_p only changes at a speedup: a step at each, from p = 0 to p_max.
    steps = sorted({0.0, *[s for s in speedups if s < p_max], p_max})
    points = []
    for a, b in zip(steps, steps[1:]):
        share = fast_p(outcomes, a)
        points += [f"{x(a):.1f},{y(share):.1f}", f"{x(b):.1f},{y(share):.1f}"]
    parts.append(f'<polyline id="fast-p-curve" fill="none" stroke="#1f5fbf" stroke-width="2" points="{" ".join(points)}"/>')
    parts.append(f'<text x="{left + w / 2}" y="{height - 6}" text-anchor="middle">p (speedup over eager PyTorch)</text>')
    parts.append(f'<text x="14" y="{top + h / 2}" transform="rotate(-90 14 {top + h / 2})" '
                 f'text-anchor="middle">fast_p</text>')
    return "".join(parts) + "</svg>"


def speedups_svg(rows: list[tuple[str, float, tuple[float, float] | None]]) -> str:
    """Each problem's best speedup (a dot) and its 95% interval (a bar), log scale, 1x marked."""
    bar_h, left, width = 22, 220, 640
    height = 30 + bar_h * max(1, len(rows))
    parts = [f'<svg id="speedup-chart" xmlns="http://www.w3.org/2000/svg" width="{width + left}" height="{height}" '
             f'viewBox="0 0 {width + left} {height}" role="img" aria-label="speedup per problem">']
    if not rows:
        parts.append(f'<text x="{left}" y="20">no correct, timed candidate</text>')
        return "".join(parts) + "</svg>"
    values = [v for _, s, ci in rows for v in (s, *(ci or ()))]
    lo, hi = math.log(min(0.5, *values) * 0.9), math.log(max(2.0, *values) * 1.1)
    x = lambda v: left + (width - 20) * (math.log(v) - lo) / (hi - lo)  # noqa: E731
    for v in (0.5, 1.0, 2.0):
        parts.append(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="14" y2="{height}" stroke="{"#444" if v == 1 else "#ddd"}"/>'
                     f'<text x="{x(v):.1f}" y="11" text-anchor="middle">{v:g}x</text>')
    for i, (name, speedup, ci) in enumerate(rows):
        cy = 30 + i * bar_h
        parts.append(f'<text x="{left - 8}" y="{cy + 4}" text-anchor="end">{_e(name)}</text>')
        if ci is not None:
            parts.append(f'<line class="interval" x1="{x(ci[0]):.1f}" x2="{x(ci[1]):.1f}" y1="{cy}" y2="{cy}" '
                         f'stroke="#1f5fbf" stroke-width="4" stroke-opacity=".45"/>')
        colour = "#0a6b2a" if (ci[0] if ci else speedup) > 1 else "#b00020" if (ci[1] if ci else speedup) < 1 else "#555"
        parts.append(f'<circle cx="{x(speedup):.1f}" cy="{cy}" r="4" fill="{colour}"/>')
    return "".join(parts) + "</svg>"


def _interval(ci: Any) -> tuple[float, float] | None:
    return (float(ci[0]), float(ci[1])) if isinstance(ci, (list, tuple)) and len(ci) == 2 else None


def _table_html(table: Table) -> str:
    head = ("level", "problems", "compiled", "correct", "fast_1", "fast_2", "geomean", "not counted")
    rows = []
    for r in table.rows:
        share = lambda v: "-" if v is None else f"{100 * v:.0f}%"  # noqa: E731
        cells = [r.level, r.problems, "-" if r.compiled is None else r.compiled, "-" if r.correct is None else r.correct,
                 share(r.fast_1), share(r.fast_2), "-" if r.geomean_speedup is None else f"{r.geomean_speedup:.2f}x",
                 not_counted_words(r.not_counted) or "-"]
        rows.append("<tr>" + "".join(f'<td{" class=num" if i else ""}>{_e(c)}</td>' for i, c in enumerate(cells)) + "</tr>")
    against = "eager PyTorch" if table.baseline == EAGER else "torch.compile(Model)"
    note = f"<p>{_e(table.note)}</p>" if table.note else ""
    return (f'<table class="levels" data-baseline="{_e(table.baseline)}"><caption>against {_e(against)}</caption>'
            "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>" + note)


def render(records: list[TaskRecord], summary: dict[str, Any], tables: list[Table], *,
           commit: str, machine_info: dict[str, str], made: str) -> str:
    """The page, from the run's records and summary (run.summarize's object)."""
    measured = summary.get("gpu") is not None
    problem_rows, chart_rows = [], []
    for task in records:
        best = best_candidate(task)
        statuses = [candidate_status(c.verdict) for c in task.candidates]
        if task.state == "error":
            statuses = [f"error: {task.error}"]
        if best is not None:
            i, v = best
            ci = _interval(v.get("speedup_ci"))
            speedup = f"{v['speedup']:.2f}x" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
            chart_rows.append((task.name, float(v["speedup"]), ci))
            which = f"candidate {i + 1}"
        else:
            speedup, which = "-", "-"
        status_html = "<br>".join(f'<span class="status {_status_class(s)}">{_e(s)}</span>' for s in statuses) or "-"
        problem_rows.append(
            f'<tr class="problem" data-name="{_e(task.name)}"><td>{_e(task.name)}</td><td>{_e(task.level)}</td>'
            f'<td class="num speedup">{_e(speedup)}</td><td>{_e(which)}</td><td>{status_html}</td></tr>')
    who = f"solutions in {summary['solutions']}" if summary.get("solutions") else (summary.get("model") or "?")
    facts = {
        "candidates": who,
        "protocol": summary.get("protocol", "dice-lsp"),
        "speedups against": summary.get("baseline", "eager PyTorch (Model)"),
        **machine_info,
        "commit": commit,
        "report made": made,
        "results": summary.get("results", ""),
    }
    ids = {"GPU": "gpu", "host": "host", "commit": "commit"}
    facts_html = "".join(f'<dt>{_e(k)}</dt><dd{f" id={ids[k]}" if k in ids else ""}>{_e(v)}</dd>' for k, v in facts.items())
    not_counted = summary.get("not_counted") or []
    not_counted_html = "".join(
        f"<li>{_e(n['name'])} candidate {n['candidate'] + 1}: {_e(n['reason'])}: {_e(str(n.get('message', ''))[:200])}</li>"
        for n in not_counted)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>dice bench report</title><style>{CSS}</style></head>
<body>
<h1>dice bench report</h1>
<p>{len(records)} problem(s); fast_p is the share of problems with a correct candidate whose speedup is above p
(best of each problem's candidates; only proven verdicts count).</p>
<section id="machine"><h2>Machine and run</h2><dl>{facts_html}</dl></section>
<section><h2>fast_p against p</h2>{fast_p_svg(records, measured)}</section>
<section><h2>Per level</h2>{"".join(_table_html(t) for t in tables) or "<p>no table</p>"}</section>
<section><h2>Speedup per problem (best counted correct candidate, 95% interval)</h2>{speedups_svg(chart_rows)}</section>
<section><h2>Problems</h2>
<table id="problems"><tr><th>problem</th><th>level</th><th>speedup [95% interval]</th><th>best</th><th>candidate statuses</th></tr>
{"".join(problem_rows)}</table></section>
<section id="not-counted"><h2>Not counted</h2>{f"<ul>{not_counted_html}</ul>" if not_counted_html else
    "<p>none: every measured candidate's measurement is proof</p>"}</section>
</body></html>
"""


def write_report(records: list[TaskRecord], summary: dict[str, Any], tables: list[Table], path: Path) -> Path:
    """Write report.html for the run at `path` (atomically enough: written whole, then renamed)."""
    made = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page = render(records, summary, tables, commit=git_commit(), machine_info=machine(summary.get("gpu")), made=made)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    return path
