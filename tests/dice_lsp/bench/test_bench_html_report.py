"""report.html in a real headless Chromium: one made by a real `dice bench` process on this
machine (no GPU: every status `no_gpu`, fast_p not measured), and one made from the records of
a `dice bench` run on the H200 (docs/device-runs), with fast_p, speedups and their intervals.
The page must render (a screenshot that is not blank) and its DOM, as Chromium builds it, must
hold the fast_p chart, a row per problem, the statuses, the machine and the commit; it must
fetch nothing (no script, stylesheet, font or image from anywhere)."""

from __future__ import annotations

import json
import lzma
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dice_lsp.bench.html_report import git_commit, write_report
from dice_lsp.bench.results import RunRecord
from dice_lsp.bench.run import not_counted_candidates
from dice_lsp.bench.stats import EAGER, table
from dice_lsp.cli import main

pytestmark = pytest.mark.timeout(900)  # nvcc compile-checks each candidate: minutes on a busy 2-core box

H200_RUN = Path("docs/device-runs/2026-12-02/a56ab51/bench-controls-results.json.xz")


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    pytest.skip("chromium is not installed (apt-get install -y chromium)")


def browse(page: Path, tmp_path: Path) -> tuple[str, Path]:
    """(the DOM Chromium built from the page, a screenshot of it), with every host unresolvable
    so that a page that fetched anything would show it missing."""
    common = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
              f"--user-data-dir={tmp_path / 'chromium-profile'}", "--host-resolver-rules=MAP * ~NOTFOUND"]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0 and "<html" in dom.stdout, dom.stderr[-2000:]
    shot = tmp_path / "report.png"
    subprocess.run([*common, f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri()],
                   capture_output=True, text=True, timeout=120)
    assert shot.is_file() and shot.read_bytes().startswith(b"\x89PNG")
    return dom.stdout, shot


def assert_not_blank(shot: Path) -> None:
    import matplotlib.image

    pixels = matplotlib.image.imread(str(shot))
    assert pixels.std() > 0.05, "the screenshot is one colour: the page did not render"
    dark = (pixels[..., :3].mean(axis=2) < 0.5).mean()
    assert dark > 0.002, f"almost no ink on the page ({dark:.4f} of the pixels)"


def assert_self_contained(page_text: str) -> None:
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\(", page_text, re.IGNORECASE)
    assert not re.search(r"\b(?:src|href)\s*=", page_text, re.IGNORECASE)
    # The only URL is the SVG namespace name, which is never fetched.
    assert set(re.findall(r"https?://[^\s\"'<>]+", page_text)) <= {"http://www.w3.org/2000/svg"}


def problem_rows(dom: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r'<tr class="problem" data-name="([^"]+)">(.*?)</tr>', dom, re.S)}


def test_a_real_dice_bench_run_links_a_report_that_chromium_renders(
    control_problems: Path, controls_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "out"
    # The `dice` command's own entry, as test_bench_run.py runs it.
    code = main(["bench", str(control_problems), "--solutions", str(controls_dir), "--out", str(out), "--limit", "1"])
    assert code == 0
    stdout = capsys.readouterr().out
    # The summary printed at the end links the report, and so does results.json's summary.
    (line,) = [ln for ln in stdout.splitlines() if ln.startswith("report:")]
    page = Path(line.split(None, 1)[1])
    assert page == out / "report.html" and page.is_file()
    assert json.loads((out / "results.json").read_text())["summary"]["report"] == str(page)
    assert_self_contained(page.read_text())

    dom, shot = browse(page, tmp_path)
    assert_not_blank(shot)
    assert 'id="fast-p-chart"' in dom and "fast_p: not measured: no GPU" in dom
    rows = problem_rows(dom)
    assert sorted(rows) == ["level1/19_ReLU"]
    for cells in rows.values():
        assert cells.count('class="status status-no_gpu"') == 2  # the correct and the wrong control
    assert "no GPU (nothing was checked or timed)" in re.search(r'id="gpu">([^<]*)<', dom).group(1)
    commit = re.search(r'id="commit">([^<]*)<', dom).group(1)
    assert commit == git_commit() and re.match(r"[0-9a-f]{12}", commit)


def test_a_gpu_run_report_shows_fast_p_speedups_intervals_and_not_counted(tmp_path: Path, repo_root: Path) -> None:
    data = json.loads(lzma.decompress((repo_root / H200_RUN).read_bytes()))
    run = RunRecord.from_json(data)
    records = list(run.tasks.values())
    timed = [(r.name, c.verdict) for r in records for c in r.candidates
             if c.verdict and c.verdict["status"] in ("faster", "not_faster")]
    assert len(timed) == 3, "the H200 run judged one faster and two not_faster controls"
    # That run predates the `unstable` status; one of its not_faster verdicts recorded as the
    # judge records an unstable one shows how the report names a verdict that is not counted.
    unstable_name, unstable = next((n, v) for n, v in timed if v["status"] == "not_faster")
    unstable["status"] = "unstable"
    gpu = timed[0][1]["gpu"]
    tables = [table(records, gpu, EAGER)]
    summary = {**data["summary"], "gpu": gpu, "protocol": "dice-lsp", "not_counted": not_counted_candidates(records),
               "results": str(repo_root / H200_RUN)}
    page = write_report(records, summary, tables, tmp_path / "report.html")
    assert_self_contained(page.read_text())

    dom, shot = browse(page, tmp_path)
    assert_not_blank(shot)
    chart = re.search(r'<svg id="fast-p-chart".*?</svg>', dom, re.S).group(0)
    assert 'id="fast-p-curve"' in chart and chart.count('class="p-mark"') == 2
    fast_1 = tables[0].rows[-1].fast_1
    assert f"fast_1 = {fast_1 * 100:.0f}%" in chart
    rows = problem_rows(dom)
    assert sorted(rows) == sorted(r.name for r in records)
    for name, verdict in timed:
        cells = rows[name]
        if verdict is unstable:
            assert "not counted (unstable)" in cells and 'class="status status-not-counted"' in cells
        else:
            low, high = verdict["speedup_ci"]
            assert f"{verdict['speedup']:.2f}x [{low:.2f}, {high:.2f}]" in cells
    assert "wrong" in "".join(rows.values())
    assert 'class="interval"' in re.search(r'<svg id="speedup-chart".*?</svg>', dom, re.S).group(0)
    assert re.search(r'id="gpu">([^<]*)<', dom).group(1) == gpu
    assert re.search(r'id="commit">([^<]*)<', dom).group(1) == git_commit()
    assert unstable_name in re.search(r'id="not-counted".*?</section>', dom, re.S).group(0)
