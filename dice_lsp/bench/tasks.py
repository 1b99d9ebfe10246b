"""What `dice bench` asks the model for and what it judges, for its two variants.

- OptimizeTask (the end-to-end variant): the whole KernelBench problem goes to
  `engine.optimize(language="kernelbench")`; each answer (code defining ModelNew) is
  spliced into the problem file and judged against the problem's `Model`.
- InfillTask (`--infill FILE.json`): a record's prefix and suffix go to `engine.infill`
  with the record's reference; each fill is put between prefix and suffix and judged
  against the same document with its true middle (the baseline).

Both expose the same three things the bench loop needs: `baseline`, `document(text)` and
`generate(engine, n, **options)`, so the loop never asks which variant it runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dice_lsp.bench.problems import Problem
from dice_lsp.core.targets import model_new_target
from profiler.source.document import MODEL_NEW, is_kernelbench_source, kernelbench_problem, module_level_names

INFILL_FIELDS = ("reference", "prefix", "middle", "suffix")


def splice_model_new(problem: str, candidate: str) -> str:
    """The KernelBench file `problem` with `candidate` (code defining ModelNew) in place of
    its `class ModelNew`, or appended: the same span `dice optimize` replaces."""
    target = model_new_target(problem)
    return problem[: target.start] + target.lead + candidate + target.trail + problem[target.end :]


@dataclass(frozen=True)
class OptimizeTask:
    name: str
    level: str
    path: str     # the problem file: its suffix (.py) tells the profiler the kind
    source: str

    @classmethod
    def from_problem(cls, problem: Problem) -> "OptimizeTask":
        return cls(problem.name, problem.level, str(problem.path), problem.source)

    @property
    def baseline(self) -> str:
        return self.source

    def document(self, text: str) -> str:
        return splice_model_new(self.source, text)

    def generate(self, engine: Any, n: int, **options: Any) -> list:
        return engine.optimize(kernelbench_problem(self.source), language="kernelbench", n=n, **options)


@dataclass(frozen=True)
class InfillTask:
    name: str
    level: str
    path: str     # a file name whose suffix tells the profiler the kind: .py or .cu
    reference: str
    prefix: str
    middle: str
    suffix: str
    # The record holds only the ModelNew part of a KernelBench file: it runs spliced into
    # the reference (the problem), which supplies Model and the inputs.
    in_reference: bool = False

    @property
    def baseline(self) -> str:
        return self.document(self.middle)

    def document(self, text: str) -> str:
        filled = self.prefix + text + self.suffix
        return splice_model_new(self.reference, filled) if self.in_reference else filled

    def generate(self, engine: Any, n: int, **options: Any) -> list:
        return engine.infill(self.prefix, self.suffix, n=n, reference=self.reference, **options)


Task = OptimizeTask | InfillTask


class InfillFileError(ValueError):
    """A --infill file that cannot be used; the message says which record and why."""


def infill_tasks(path: Path) -> list[InfillTask]:
    """The records of a --infill JSON file (a list of objects, or {"records": [...]}).

    The kind of each record follows from its true document: a KernelBench file (or the
    ModelNew part of one, when the reference is the KernelBench problem) is judged as a
    .py file against `Model`; anything else is CUDA, judged as a .cu file with its `dice:`
    spec against the true middle.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InfillFileError(f"{path}: cannot read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise InfillFileError(f"{path}: not JSON: {exc}") from exc
    if isinstance(data, dict) and isinstance(data.get("records"), list):
        data = data["records"]
    if not isinstance(data, list) or not data:
        raise InfillFileError(f"{path}: expected a non-empty JSON list of records")
    tasks: list[InfillTask] = []
    seen: set[str] = set()
    for index, record in enumerate(data):
        if not isinstance(record, dict):
            raise InfillFileError(f"{path}: record {index} is not an object")
        missing = [f for f in INFILL_FIELDS if not isinstance(record.get(f), str)]
        if missing:
            raise InfillFileError(
                f"{path}: record {index} lacks string field(s) {', '.join(missing)} "
                f"(each record needs {', '.join(INFILL_FIELDS)})"
            )
        name = str(record.get("name") or f"record{index}")
        if name in seen:
            name = f"{name}#{index}"
        seen.add(name)
        stem = name.replace("/", "_")
        true_document = record["prefix"] + record["middle"] + record["suffix"]
        whole_file = is_kernelbench_source(true_document)
        in_reference = not whole_file and _is_model_new_part(record["reference"], true_document)
        tasks.append(
            InfillTask(
                name=name,
                level=str(record.get("level") or "other"),
                path=stem + (".py" if whole_file or in_reference else ".cu"),
                reference=record["reference"],
                prefix=record["prefix"],
                middle=record["middle"],
                suffix=record["suffix"],
                in_reference=in_reference,
            )
        )
    return tasks


def _is_model_new_part(reference: str, true_document: str) -> bool:
    try:
        defines_model_new = MODEL_NEW in module_level_names(true_document)
    except SyntaxError:
        return False
    return defines_model_new and is_kernelbench_source(reference)
