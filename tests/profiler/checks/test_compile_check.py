"""profiler.check: real nvcc on broken code, diagnostics in the document's coordinates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import profiler
from profiler.checks.compile import find_nvcc, nvcc_check, parse_compiler_output
from profiler.checks.spec import spec_errors_as_diagnostics
from profiler.verdict.types import Diagnostic

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")

BROKEN = """\
// a comment line
__global__ void scale(float* y, int n)
{
\tint i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = undefined_thing * 2.0f;
    int unused = 3;
}
"""


@needs_nvcc
def test_undefined_identifier_is_an_error_at_its_line_and_column():
    diags = profiler.check(BROKEN, "/tmp/scale.cu")
    errors = [d for d in diags if d.severity == "error"]
    assert len(errors) == 1
    assert (errors[0].line, errors[0].column) == (5, 23)
    assert "undefined_thing" in errors[0].message
    warnings = [d for d in diags if d.severity == "warning"]
    assert [(w.line, w.column) for w in warnings] == [(6, 9)]


@needs_nvcc
def test_column_survives_tabs_and_the_preprocessed_echo():
    # nvcc echoes `__global__` as `__attribute__((global))` and expands tabs; the column
    # must still point at the token in the user's line.
    src = "__global__ void k(float* y)\n{\n\ty[0] = missing;\n}\n"
    (diag,) = profiler.check(src, "k.cu")
    assert (diag.line, diag.column) == (3, 9)
    src = "__global__ void k(float* y) { y[0] = nothere; }\n"
    (diag,) = profiler.check(src, "k.cu")
    assert (diag.line, diag.column) == (1, 38)


@needs_nvcc
def test_clean_example_has_no_diagnostics(repo_root):
    path = repo_root / "examples" / "saxpy.cu"
    assert profiler.check(path.read_text(), str(path)) == []


@needs_nvcc
def test_missing_include_is_reported_where_it_is_included():
    (diag,) = profiler.check('#include "not_there.cuh"\n__global__ void k() {}\n', "x.cu")
    assert (diag.line, diag.column, diag.severity) == (1, 10, "error")
    assert "not_there.cuh" in diag.message


@needs_nvcc
def test_local_include_is_found_beside_the_document(tmp_path):
    (tmp_path / "helper.cuh").write_text("__device__ float twice(float x) { return 2 * x; }\n")
    src = '#include "helper.cuh"\n__global__ void k(float* y) { y[0] = twice(y[0]); }\n'
    assert profiler.check(src, str(tmp_path / "main.cu")) == []


@needs_nvcc
def test_template_instantiation_context_is_kept_in_the_message():
    src = "template <class T> __device__ T g(T x) { return x.bad; }\n__global__ void h(float* y) { y[0] = g(1.0f); }\n"
    (diag,) = profiler.check(src, "t.cu")
    assert (diag.line, diag.severity) == (1, "error")
    assert "instantiation" in diag.message
    assert diag.column == src.splitlines()[0].index("x.bad") + 1


def test_header_errors_are_kept_on_line_one_with_their_place():
    out = 'helper.cuh(4): error: identifier "q" is undefined\n    return q;\n           ^\n\n'
    (diag,) = parse_compiler_output(out, "main.cu", "int x;\n")
    assert (diag.line, diag.column) == (1, 1)
    assert diag.message.startswith("helper.cuh(4):")


def test_ptxas_messages_go_to_the_kernel_they_name():
    out = "ptxas error   : Entry function '_Z3bigPf' uses too much shared data (0x20000 bytes, 0xc000 max)\n"
    (diag,) = parse_compiler_output(out, "k.cu", "", kernel_lines={"big": 7})
    assert (diag.line, diag.severity) == (7, "error")
    assert "too much shared data" in diag.message


def test_python_document_syntax_error():
    (diag,) = profiler.check("import torch\ndef forward(:\n    pass\n", "model.py")
    assert (diag.line, diag.severity) == (2, "error")


def test_import_profiler_does_not_import_torch():
    code = "import sys, profiler; profiler.check('x = 1', 'a.py'); print('torch' in sys.modules, 'cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]



def test_a_bad_spec_is_an_error_diagnostic_on_its_line():
    src = "// dice: let n = 1 <<\n__global__ void k(float* y, int n) { }\n"
    (diag,) = spec_errors_as_diagnostics(src)
    assert (diag.line, diag.column, diag.severity) == (1, 22, "error")
    assert diag.message.startswith("dice spec: expected")


@needs_nvcc
def test_unclosed_brace_is_reported_at_the_end_of_the_document_not_as_a_bare_failure():
    # A candidate cut off by its token budget often leaves a brace open: nvcc says so
    # "At end of source", with no line number.
    source = "__global__ void k(float* y)\n{\n    y[0] = 1.0f;\n"
    diags = profiler.check(source, "/tmp/open.cu")
    errors = [d for d in diags if d.severity == "error"]
    assert [(e.line, e.column) for e in errors] == [(3, 17)]
    assert errors[0].message == 'at end of file: expected a "}"'
    assert not any("nvcc failed" in d.message for d in diags)


@needs_nvcc
def test_an_edited_header_is_checked_again(tmp_path):
    header = tmp_path / "scale.cuh"
    header.write_text("#define SCALE 2.0f +\n")  # a broken macro
    source = '#include "scale.cuh"\n__global__ void k(float* y) { y[0] = SCALE; }\n'
    kernel = tmp_path / "k.cu"
    assert any(d.severity == "error" for d in profiler.check(source, str(kernel)))
    header.write_text("#define SCALE 2.0f\n")  # fixed; the .cu itself did not change
    os.utime(header, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))  # coarse clocks
    assert profiler.check(source, str(kernel)) == []


@needs_nvcc
def test_kept_answers_are_written_where_the_cache_is(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    source = "__global__ void k(float* y) { y[0] = missing; }\n"
    first = nvcc_check(source, "k.cu", keep=True)
    (kept,) = (tmp_path / "dice-lsp" / "nvcc-checks").glob("*.json")
    assert [Diagnostic.from_json(d) for d in json.loads(kept.read_text())] == first
    assert first and first[0].line == 1 and "missing" in first[0].message
