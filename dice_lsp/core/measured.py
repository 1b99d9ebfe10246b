"""The parts of a document that results attach to: each kernel (or a KernelBench model).

A code lens goes over each one, a hover answers on its name, and its cache key is its
own text plus the file's `dice:` spec lines, so an edit elsewhere keeps its results.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import profiler
from dice_lsp.core.cache import result_key
from dice_lsp.core.targets import TargetError, kernel_span, language_of
from dice_lsp.core.text_offsets import line_starts, offset_at_point
from profiler.source.document import benchmark_class
from profiler.source.spec import spec_lines


@dataclass(frozen=True)
class MeasuredUnit:
    name: str  # kernel name, or "ModelNew" / "Model"
    start: int  # offsets of the whole kernel / class
    end: int
    name_start: int  # offsets of its name, where a hover answers
    name_end: int
    code: str  # what a measurement of it depends on, besides the spec and GPU


def _cuda_units(text: str) -> list[MeasuredUnit]:
    units = []
    starts = line_starts(text)
    for kernel in profiler.find_kernels(text):
        start, end = kernel_span(text, kernel, starts)
        found = re.compile(rf"\b{re.escape(kernel.name)}\b").search(text, start, end)
        name_start = found.start() if found else start
        units.append(
            MeasuredUnit(kernel.name, start, end, name_start, name_start + len(kernel.name), text[start:end])
        )
    return units


def _kernelbench_units(text: str) -> list[MeasuredUnit]:
    """One unit for the file (the whole file is the benchmark), on ModelNew or else Model."""
    node = benchmark_class(text)
    if node is None:
        return []
    start = offset_at_point(text, (node.lineno - 1, node.col_offset))
    name_start = text.index(node.name, start)
    end = offset_at_point(text, (node.end_lineno - 1, node.end_col_offset))
    return [MeasuredUnit(node.name, start, end, name_start, name_start + len(node.name), text)]


def measured_units(text: str, path: str) -> list[MeasuredUnit]:
    try:
        language = language_of(path)
    except ValueError:
        return []
    return _cuda_units(text) if language == "cuda" else _kernelbench_units(text)


def unit_at(text: str, path: str, offset: int) -> MeasuredUnit | None:
    """The kernel (or KernelBench model) whose text holds the offset."""
    return next((u for u in measured_units(text, path) if u.start <= offset <= u.end), None)


def unit_to_profile(text: str, path: str, offset: int) -> MeasuredUnit:
    """What Profile measures for a cursor at `offset`: the kernel under it, or the KernelBench
    file's one benchmark wherever the cursor is in it; TargetError says why there is none."""
    if language_of(path) == "cuda":
        unit = unit_at(text, path, offset)
    else:
        unit = next(iter(measured_units(text, path)), None)
    if unit is None:
        raise TargetError("put the cursor inside a __global__ function (or on Model) to profile it")
    return unit


def unit_key(text: str, unit: MeasuredUnit, gpu: str | None) -> str:
    return result_key(unit.code, spec_lines(text), gpu)


def live_keys(text: str, path: str, gpu: str | None) -> set[str]:
    spec = spec_lines(text)  # once: it is the whole file's spec lines
    return {result_key(u.code, spec, gpu) for u in measured_units(text, path)}
