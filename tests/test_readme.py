"""The README as a new user meets it: its commands are the ones CI runs, and the figures on
its first screen are the Benchmarks table's.

The first screen is everything before the README's first line that is `---` alone (the rule
after the install and test commands)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()
CI = (REPO / ".ci" / "run").read_text()

# A figure: a number with a unit, or a ratio written `1.93x` (or "1.9 times").
UNITS = r"x|times|%|ms|s|us|min|minutes|GiB|MiB|GB|MB|KiB|tokens/s|steps/s"
FIGURE = re.compile(rf"(?<![\w.=-])(\d+(?:\.\d+)?)(?:\s?({UNITS}))(?![\w/])")


def first_screen() -> str:
    lines = README.split("\n")
    return "\n".join(lines[: lines.index("---")])


def ci_blocks() -> dict[str, list[str]]:
    """`.ci/run`'s blocks, each from its `# --- README: NAME ---` line to the next block or the
    end, blank lines left out."""
    blocks: dict[str, list[str]] = {}
    name = None
    for line in CI.split("\n"):
        marker = re.fullmatch(r"# --- README: (.+) ---", line)
        if marker:
            name = marker.group(1)
            blocks[name] = []
        elif name is not None and line.strip():
            blocks[name].append(line)
    return blocks


def sh_blocks(text: str) -> list[list[str]]:
    return [block.strip("\n").split("\n") for block in re.findall(r"```sh\n(.*?)```", text, re.S)]


def benchmarks_table() -> str:
    section = README[README.index("\n## Benchmarks\n"):]
    section = section[: section.index("\n## ", 1)]
    return "\n".join(line for line in section.split("\n") if line.startswith("|"))


def test_the_readme_commands_are_the_ones_ci_runs():
    blocks = ci_blocks()
    assert set(blocks) == {"install and run", "the VS Code end-to-end test's tools", "test"}
    in_readme = sh_blocks(README)
    for name, commands in blocks.items():
        assert commands in in_readme, f".ci/run's {name!r} block is not a README sh block as it is:\n{commands}"
    # The first screen's two commands are install-and-run and test, in that order, and
    # nothing else: a reader who copies them runs what CI runs.
    assert sh_blocks(first_screen()) == [blocks["install and run"], blocks["test"]]
    # The install runs the main job on the built-in model; the test command needs npm, and says so.
    assert blocks["install and run"][-1].startswith("dice fill ")
    assert any(line.startswith("npm ci ") for line in blocks["test"])
    assert re.search(r"Node\.js with\s+npm", first_screen())


def test_ci_runs_its_blocks_in_order_and_stops_at_the_first_failure():
    assert CI.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in CI
    order = [m.group(1) for m in re.finditer(r"# --- README: (.+) ---", CI)]
    assert order == ["install and run", "the VS Code end-to-end test's tools", "test"]


def test_every_figure_on_the_first_screen_is_in_the_benchmarks_table():
    table = benchmarks_table()
    figures = [(m.group(0), m.group(1), m.group(2)) for m in FIGURE.finditer(first_screen())]
    assert figures, "the first screen quotes the fill's time: at least that figure"
    for text, number, unit in figures:
        forms = {f"{number} {unit}", f"{number}{unit}"} | ({f"{number}x"} if unit == "times" else set())
        assert any(form in table for form in forms), f"{text!r} on the first screen is not in the Benchmarks table"


def test_the_benchmarks_table_is_one_current_value_per_measure():
    table = benchmarks_table().split("\n")
    assert table[0] == "| measure | value | machine | date | commit |"
    rows = [re.split(r"(?<!\\)\|", row)[1:-1] for row in table[2:]]
    assert rows and all(len(row) == 5 for row in rows)
    for measure, value, machine, date, commit in rows:
        assert machine.strip() in {"H200", "H100", "CPU box"}
        assert re.fullmatch(r" \d{4}-\d\d-\d\d ", date)
        assert re.match(r" [0-9a-f]{7}", commit)
        assert not re.search(r"\btargets?\b|baseline at|the engine at", value), value
    assert len({row[0] for row in rows}) == len(rows), "one row per measure"
