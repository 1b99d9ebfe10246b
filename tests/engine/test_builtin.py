"""The shipped built-in model: a real checkpoint folder, loaded by engine.load("builtin"),
that fills a span on the CPU, and `dice fill --model builtin` end to end."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

import engine
from engine.decoding.prompts import END_OF_TEXT, FIM_MIDDLE, FIM_PREFIX, FIM_SUFFIX

REPO = Path(__file__).resolve().parents[2]
BUILTIN = REPO / "engine" / "builtin"
SAXPY = REPO / "examples" / "saxpy.cu"
STATEMENT = "y[i] = a * x[i] + y[i];"


def test_shipped_folder_is_a_small_fim_sdar_checkpoint():
    config = json.loads((BUILTIN / "config.json").read_text())
    assert config["model_type"] == "sdar" and config["prompt_format"] == "fim"
    assert config["block_size"] == 4
    shards = list(BUILTIN.glob("*.safetensors"))
    assert shards and sum(p.stat().st_size for p in shards) <= 60e6   # installs with the package
    assert all(p.stat().st_size < 16 * 2**20 for p in shards)   # fits the device machine's return
    from engine.model.loading import load_config, load_tokenizer

    tokenizer = load_tokenizer(BUILTIN, load_config(BUILTIN))
    assert tokenizer.convert_ids_to_tokens(config["mask_token_id"]) == "<|MASK|>"
    assert tokenizer.convert_ids_to_tokens(config["eos_token_id"]) == END_OF_TEXT
    for token in (FIM_PREFIX, FIM_MIDDLE, FIM_SUFFIX):
        assert len(tokenizer.encode(token, add_special_tokens=False)) == 1


def test_builtin_fills_the_saxpy_statement_on_cpu():
    """The README's first fill: greedy, on the CPU, the statement the kernel had."""
    text = SAXPY.read_text()
    at = text.index(STATEMENT)
    prefix, suffix = text[:at], text[at + len(STATEMENT):]
    model = engine.load("builtin", device="cpu")
    [candidate] = model.infill(prefix, suffix, n=1, max_tokens=32, temperature=0.0)
    assert candidate.finish_reason == "eos"        # it closes the span by itself
    assert candidate.text == STATEMENT
    from profiler.checks.compile import CompilerMissing, nvcc_check

    try:
        diagnostics = nvcc_check(prefix + candidate.text + suffix, "saxpy.cu")
    except CompilerMissing as exc:
        pytest.skip(str(exc))
    assert [d for d in diagnostics if d.severity == "error"] == []


def test_a_long_file_is_cut_to_the_length_the_model_was_trained_on():
    """The built-in model saw 1024-token examples (config `trained_context`): a file longer than
    that is cut to the lines around the span that fit, though the model has 4096 positions."""
    from engine.decoding.prompts import fim_prompt
    from engine.types import InfillRequest

    model = engine.load("builtin", device="cpu")
    assert model.config.max_position_embeddings == 4096 and model.context == 1024
    text = SAXPY.read_text()
    at = text.index(STATEMENT)
    filler = "".join(f"__device__ float f{k}(float v) {{ return v * {k}.0f + 1.0f; }}\n" for k in range(300))
    prefix, suffix = filler + text[:at], text[at + len(STATEMENT):] + filler
    fitted = model.fit_to_context(InfillRequest(prefix=prefix, suffix=suffix, n=1, max_tokens=64))
    tokens = len(model.tokenizer.encode(fim_prompt(fitted.prefix, fitted.suffix), add_special_tokens=False))
    assert 1024 - 64 - 64 < tokens <= 1024 - 64
    assert prefix.endswith(fitted.prefix) and suffix.startswith(fitted.suffix)   # whole lines nearest the span
    assert "saxpy" in fitted.prefix


def test_a_fills_decodes_share_its_prompt_and_stop_at_the_span(monkeypatch):
    """A sampled fill decodes several times on one prompt (its draw, then declarations
    `TYPE i =` of the name the code after needs): each decode after the first reuses the
    prompt's keys (engine.decoding.paths.PromptKeys) but for the blocks that differ, every one is
    told when its rows are past the span (engine.fill.spans.span_ended), and nothing is kept after
    the fill."""
    import engine.decoding.local

    calls = []
    decode = engine.decoding.local.decode

    def spy(model, ids, **kwargs):
        result = decode(model, ids, **kwargs)
        calls.append((kwargs["kept"], kwargs["kept"].reused, len(ids), kwargs["ended"]))
        return result

    monkeypatch.setattr(engine.decoding.local, "decode", spy)
    model = engine.load("builtin", device="cpu")
    statement = "int i = blockIdx.x * blockDim.x + threadIdx.x;"
    text = SAXPY.read_text()
    at = text.index(statement)
    filler = "".join(f"__device__ float f{k}(float v) {{ return v * {k}.0f + 1.0f; }}\n" for k in range(300))
    candidates = model.infill(filler + text[:at], text[at + len(statement):] + filler, n=4, max_tokens=64, seed=0,
                              temperature=0.7)
    assert any(c.text == statement for c in candidates)
    # Rows stopped at the end of their line: no candidate brings that line break along.
    assert all("\n" not in c.text for c in candidates)
    assert len(calls) >= 2   # the draw, and the declarations of `i`
    assert len({id(kept) for kept, *_ in calls}) == 1 and calls[0][1] == 0
    for _, reused, length, ended in calls[1:]:
        assert length - 8 <= reused < length   # all but the last whole blocks, where `TYPE i =` was added
    assert all(ended is not None for *_, ended in calls)
    assert model.kept is None


def test_a_fill_at_the_end_of_a_block_fills_it_instead_of_closing_it():
    # The last statement of a loop's body: the small model drawn freely often writes the `}`
    # that the code after already has. No candidate may start with a closing bracket.
    model = engine.load("builtin")
    closers = {model.tokenizer.decode([i]).lstrip()[0] for i in model.closing_tokens}
    assert closers == {"}", ")", "]"}
    assert model.tokenizer.encode("}", add_special_tokens=False)[0] in model.closing_tokens
    assert not {model.tokenizer.encode(t, add_special_tokens=False)[0] for t in ("{", "(", "[")} & \
        set(model.closing_tokens)
    prefix = ("__global__ void count(const int *flags, int *out, int n)\n{\n    int total = 0;\n"
              "    for (int i = 0; i < n; i++) {\n        ")
    suffix = "\n    }\n    out[0] = total;\n}\n"
    for seed in range(3):
        texts = [c.text for c in model.infill(prefix, suffix, n=4, max_tokens=32, seed=seed, temperature=0.7)]
        assert texts and all(t.strip() and t.strip()[0] not in "})]" for t in texts), texts
    greedy = model.infill(prefix, suffix, n=1, max_tokens=32, temperature=0.0)[0].text
    assert greedy.strip() and greedy.strip()[0] not in "})]"


def test_a_selected_line_that_opens_or_closes_a_block_is_filled_with_one():
    # `if (i < n) {` and `}` do not balance on their own; the file around them lacks exactly
    # that, so a fill that supplies it is in shape, is cut after its line, and `}` may be drawn.
    model = engine.load("builtin")
    prefix = "__global__ void k(float* y, int n)\n{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    "
    suffix = "\n        y[i] = 2.0f * y[i];\n    }\n}\n"
    assert model.infill(prefix, suffix, n=1, max_tokens=32, temperature=0.0)[0].text == "if (i < n) {"
    texts = [c.text for c in model.infill(prefix, suffix, n=4, max_tokens=32, seed=0, temperature=0.7)]
    assert texts[0] == "if (i < n) {" and all("\n" not in t.strip() for t in texts), texts
    prefix = ("__global__ void count(const int *flags, int *out, int n)\n{\n    int total = 0;\n"
              "    for (int i = 0; i < n; i++) {\n        total += flags[i];\n    ")
    suffix = "\n    out[0] = total;\n}\n"
    assert model.infill(prefix, suffix, n=1, max_tokens=32, temperature=0.0)[0].text.strip() == "}"
    assert "}" in [c.text.strip() for c in model.infill(prefix, suffix, n=4, max_tokens=32, seed=0, temperature=0.7)]


def test_the_evaluation_can_mask_any_line_of_code():
    from dice_lsp.bench.fills import is_code_line, is_statement, statement_cases

    kernel = ("__global__ void k(float* y, int n)\n{\n    // double it\n    int i = threadIdx.x;\n"
              "    if (i < n) {\n        y[i] *= 2;\n    }\n}")
    lines = kernel.split("\n")
    assert [ln.strip() for ln in lines if is_code_line(ln)] == \
        ["int i = threadIdx.x;", "if (i < n) {", "y[i] *= 2;", "}"]
    assert [ln.strip() for ln in lines if is_statement(ln)] == ["int i = threadIdx.x;", "y[i] *= 2;"]
    cases = statement_cases("s", "p.cu", kernel, random.Random(0), 10, is_code_line)
    assert sorted(c.middle for c in cases) == sorted(["int i = threadIdx.x;", "if (i < n) {", "y[i] *= 2;", "}"])
    assert all(c.prefix + c.middle + c.suffix == cases[0].prefix + cases[0].middle + cases[0].suffix for c in cases)


@pytest.mark.slow
def test_dice_fill_with_the_builtin_model(tmp_path):
    source = tmp_path / "saxpy.cu"
    source.write_text(SAXPY.read_text())
    line = next(i for i, l in enumerate(SAXPY.read_text().split("\n"), 1) if STATEMENT in l)
    col = SAXPY.read_text().split("\n")[line - 1].index(STATEMENT) + 1
    out = subprocess.run(
        [sys.executable, "-m", "dice_lsp.cli", "fill", str(source), "--range",
         f"{line}:{col}-{line}:{col + len(STATEMENT)}", "--model", "builtin", "--candidates", "1",
         "--max-tokens", "32", "--json"],
        capture_output=True, text=True, timeout=600, cwd=REPO, check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert len(result["candidates"]) == 1
    cand = result["candidates"][0]
    assert cand["text"].strip() and isinstance(cand["compiled"], bool)
    if result["gpu"] is None:
        assert cand["correct"] is None and cand["speedup"] is None   # never invented


@pytest.mark.slow
def test_the_evaluation_script_runs_on_the_builtin_model(tmp_path):
    """benchmarks/builtin_eval.py (docs/model-card.md's numbers) still runs: its latency part,
    which fills saxpy as `dice fill` does by default, so that a module it imports and the
    package no longer has is noticed."""
    out = subprocess.run([sys.executable, "benchmarks/builtin_eval.py", "--latency-only", "--repeats", "1"],
                         capture_output=True, text=True, timeout=600, cwd=REPO, check=False,
                         env={**os.environ, "OUT": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-2000:]
    latency = json.loads((tmp_path / "builtin_latency.json").read_text())["latency"]
    assert latency["answer"].strip() and len(latency["candidates"]) == 4


def test_the_evaluation_compares_fills_whitespace_aside_by_tokens(tmp_path):
    """builtin_eval's exact match is "equal to the original, whitespace aside":
    the same C tokens, so `(a[i]-m)/d` is `(a[i] - m) / d`, but a string's spaces count and
    words stay apart; --rescore applies it to a saved record."""
    from dice_lsp.bench.fills import same_code

    assert same_code("a[idx] = (a[idx] - minval) / denom;", "a[idx] = (a[idx]-minval)/denom;")
    assert same_code("int  i =\n0 ;", "int i = 0;")
    assert not same_code("int i = 0;", "inti = 0;")
    assert not same_code('printf("a  b");', 'printf("a b");')
    assert not same_code("a[i] *= 2;", "a[i] = a[i] * 2;")
    record = {"methods": {"model": {}}, "target_cases": [0],
              "cases": [{"middle": "y[i] = a*x[i];"}],
              "fills": [{"method": "model", "case": 0, "compiled": True, "exact": False, "greedy_exact": False,
                         "seconds": 1.0, "texts": ["y[i] = x[i];", "y[i] = a * x[i];"]}]}
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    out = subprocess.run([sys.executable, "benchmarks/builtin_eval.py", "--rescore", str(path)],
                         capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    rescored = json.loads(path.read_text())
    assert rescored["fills"][0]["exact"] and rescored["methods"]["model"]["target_exact"] == 1
