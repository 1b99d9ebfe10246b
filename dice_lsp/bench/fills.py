"""One-statement fills of real kernels, judged: the cases (a kernel with one statement or line
of its body masked, as an editor user selects it), whether a fill is the original (the same C
tokens, whitespace aside), and a generated benchmark spec under which the product's judge
tells whether a fill computes what the original computes.

The evaluation of the built-in model (benchmarks/builtin_eval.py, fill_judge.py,
context_eval.py, spelling_eval.py) runs on these.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from profiler.source.cuda_source import find_kernel
from profiler.source.dtypes import INT_TYPES

# Standard CUDA headers put above each case's kernel, so that it compiles on its own (the
# records keep the cases without it).
PRELUDE = "#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <stdint.h>\n#include <math.h>\n\n"


@dataclass
class Case:
    source: str      # the held-out package
    path: str
    kernel: str      # the function's name
    prefix: str
    middle: str
    suffix: str


# C's tokens, near enough to compare two spellings of a statement: string and character
# literals whole (their spaces count), words, and every other character on its own.
TOKEN = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|\w+|\S')


def same_code(a: str, b: str) -> bool:
    """`a` and `b` are the same code, whitespace aside: the same tokens (`(a[i]-m)/d` and
    `(a[i] - m) / d` are; `int i` and `inti` are not)."""
    return TOKEN.findall(a) == TOKEN.findall(b)


def is_statement(line: str) -> bool:
    """An indented `;`-ended line that is not a comment: what an editor user selects as a statement."""
    return line.startswith((" ", "\t")) and line.rstrip().endswith(";") and not line.strip().startswith(("//", "*"))


def is_code_line(line: str) -> bool:
    """An indented line of code that is not a comment or a directive: what an editor user
    selects by line (`--select line`): a statement, an `if (...) {`, a `}`, a `for` head."""
    text = line.strip()
    return line.startswith((" ", "\t")) and bool(text) and not text.startswith(("//", "*", "/*", "#"))


def line_span(lines: list[str], i: int) -> tuple[int, int]:
    """Where line i of "\n".join(lines) starts and ends, its indentation and trailing blanks aside."""
    start = sum(len(ln) + 1 for ln in lines[:i])
    return start + len(lines[i]) - len(lines[i].lstrip()), start + len(lines[i].rstrip())


def statement_cases(source: str, path: str, kernel: str, rng: random.Random, count: int,
                    selectable=is_statement) -> list[Case]:
    """The kernel (with the prelude) with one statement of its body masked, for up to
    `count` different statements (`selectable`: is_code_line for any line of code)."""
    text = PRELUDE + kernel
    lines = text.split("\n")
    body_from = len(PRELUDE.split("\n")) - 1 + next(i for i, ln in enumerate(kernel.split("\n")) if "{" in ln) + 1
    statements = [i for i in range(body_from, len(lines)) if selectable(lines[i])]
    name = re.search(r"(\w+)\s*\(", kernel[kernel.index("__global__"):])
    cases = []
    for i in rng.sample(statements, min(count, len(statements))):
        a, b = line_span(lines, i)
        cases.append(Case(source, path, name.group(1) if name else "?", text[:a], text[a:b], text[b:]))
    return cases


BUFFER = "1 << 20"
INT_VALUE, INT_STEP = 256, 8         # the k-th integer parameter is INT_VALUE + k * INT_STEP
FLOAT_VALUE, FLOAT_STEP = 1.5, 0.25
LAUNCH = "grid=256, block=256"
ONE_BLOCK = "grid=1, block=256"   # a kernel that never reads blockIdx or gridDim is written for one block


def spec_lines(source: str, kernel: str) -> tuple[int, str]:
    """(line to insert at, `// dice:` lines) for `kernel` of `source`: small sizes, so that
    a kernel that loops over an integer parameter or indexes a second dimension stays inside
    its buffers and its time limit. No two integer (or float) parameters are equal: with one
    value for all, a fill reading `a - b` where the kernel reads `a - c`, or a `0` where it
    computes `(a - b) / c`, computed the same outputs and was judged correct."""
    k = find_kernel(source, kernel)
    scalars = [p for p in k.params if not p.pointer]
    ints = [p.name for p in scalars if p.type in INT_TYPES]
    floats = [p.name for p in scalars if p.type not in INT_TYPES]
    lines = [f"let {p.name} = {INT_VALUE + ints.index(p.name) * INT_STEP}" if p.name in ints
             else f"let {p.name} = {FLOAT_VALUE + floats.index(p.name) * FLOAT_STEP}" for p in scalars]
    pointers = [p for p in k.params if p.pointer]
    if pointers:
        lines.append("buffer " + ", ".join(f"{p.name}[{BUFFER}]" for p in pointers))
        outputs = [p.name for p in pointers if not p.const]
        if outputs:
            lines.append("inout " + ", ".join(outputs))
    # 256 blocks of a kernel written for one (PyCUDA's `doublify`: `a[idx] *= 2` with idx from
    # threadIdx alone) update the same elements at once: its outputs are a race, and whether the
    # original was correct against itself, and a fill correct against it, was luck.
    body = "\n".join(source.split("\n")[k.body_start[0]:k.body_end[0] + 1])
    blocks = re.search(r"\b(blockIdx|gridDim)\b", body)
    lines.append(f"launch {LAUNCH if blocks else ONE_BLOCK}")
    return k.start[0], "".join(f"// dice: {line}\n" for line in lines)


def document(case: dict, middle: str) -> str:
    """The case's kernel with `middle` in the span, and the generated spec above it."""
    text = PRELUDE + case["prefix"] + middle + case["suffix"]
    original = PRELUDE + case["prefix"] + case["middle"] + case["suffix"]
    at, spec = spec_lines(original, case["kernel"])  # the original's parameters
    try:
        at = find_kernel(text, case["kernel"]).start[0]  # where the kernel starts in this text
    except ValueError:  # a fill that breaks the signature: the spec where the original's was
        pass
    lines = text.split("\n")
    return "\n".join(lines[:at]) + "\n" + spec + "\n".join(lines[at:])


def has_outputs(case: dict) -> bool:
    """Whether the kernel writes through a pointer: one that only prints (or writes nothing)
    is "correct" whatever it does, so it is not counted."""
    source = PRELUDE + case["prefix"] + case["middle"] + case["suffix"]
    return any(p.pointer and not p.const for p in find_kernel(source, case["kernel"]).params)


def judge_case(case: dict, texts: list[str], time_limit: float) -> dict:
    """Verdicts of the original and of each distinct text, against the original."""
    from profiler.judge import judge

    distinct = list(dict.fromkeys([case["middle"], *texts]))
    baseline = document(case, case["middle"])
    verdicts = judge(baseline, [document(case, t) for t in distinct], "fill.cu", kernel=case["kernel"],
                     time_limit=time_limit)
    return {t: {"status": v.status, "compiled": v.compiled, "correct": v.correct, "message": v.message[:200]}
            for t, v in zip(distinct, verdicts)}


def summary(report: dict, methods: list[str]) -> dict:
    """Per record set of a fill_judge report: the cases, those judgeable (the original correct
    against itself, an output written), and per method how many of those have a correct
    candidate, and a correct one with none equal to the original."""
    out = {}
    for name, data in report["sets"].items():
        judged = [c for c in data["cases"] if "original" in c and c["original"]["correct"] and c.get("outputs", True)]
        row = {"cases": len(data["cases"]), "judgeable": len(judged)}
        for method in methods:
            entries = [c["methods"][method] for c in judged if method in c["methods"]]
            row[method] = {"correct": sum(e["correct"] for e in entries),
                           "correct_not_exact": sum(e["correct_not_exact"] for e in entries)}
        out[name] = row
    return out
