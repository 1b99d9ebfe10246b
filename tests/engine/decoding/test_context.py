"""An infill's context cut to the model's window: the enclosing kernel and its spec first,
then lines outward, whole; measured with the real prompt of each format."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import engine
from engine.decoding import prompts
from engine.decoding.context import fit_infill, prompt_budget
from engine.model.loading import load_config, load_tokenizer
from engine.types import EngineError

REPO = Path(__file__).resolve().parents[3]


def big_cuda_file(lines: int = 2000) -> str:
    """`lines` lines of small kernels, each with its own `dice:` spec."""
    out = ["#include <cuda_runtime.h>", ""]
    i = 0
    while len(out) < lines:
        out += ["// dice: let n = 1 << 20", "// dice: buffer x[n], y[n]", "// dice: launch grid=(n + 255) / 256, block=256",
                f"__global__ void scale_{i}(const float* x, float* y, int n)", "{",
                "    int i = blockIdx.x * blockDim.x + threadIdx.x;", "    if (i < n) {", f"        y[i] = {i + 1}.0f * x[i];",
                "    }", "}", ""]
        i += 1
    return "\n".join(out[:lines]) + "\n"


def split_at(text: str, marker: str) -> tuple[str, str]:
    """(prefix, suffix) around an empty span at the start of the line after `marker`'s line."""
    at = text.index("\n", text.index(marker)) + 1
    return text[:at], text[at:]


def measures(tokenizer, prompt_format: str, chat_template: str | None):
    def prompt_tokens(prefix: str, suffix: str) -> int:
        task = prompts.infill_task(prefix, suffix, None, prompt_format, chat_template)
        return len(tokenizer.encode(task.prompt, add_special_tokens=False))

    def line_tokens(lines: list[str]) -> list[int]:
        return [len(ids) for ids in tokenizer(lines, add_special_tokens=False)["input_ids"]] if lines else []

    return prompt_tokens, line_tokens


@pytest.fixture(scope="module")
def builtin_tokenizer():
    folder = engine.resolve_builtin()
    return load_tokenizer(folder, load_config(folder))


@pytest.fixture(scope="module")
def sdar_tokenizer(sdar_tokenizer_dir):
    return load_tokenizer(sdar_tokenizer_dir, load_config(sdar_tokenizer_dir))


@pytest.mark.parametrize("prompt_format", ["fim", "chat"])
def test_a_2000_line_file_is_cut_around_the_enclosing_kernel(prompt_format, builtin_tokenizer, sdar_tokenizer):
    tokenizer = builtin_tokenizer if prompt_format == "fim" else sdar_tokenizer
    prompt_tokens, line_tokens = measures(tokenizer, prompt_format, tokenizer.chat_template)
    text = big_cuda_file()
    prefix, suffix = split_at(text, "void scale_100(")  # the span: the start of its body
    budget = prompt_budget(4096, 4, 256)
    assert prompt_tokens(prefix, suffix) > 3 * budget  # far too long as it is
    cut_prefix, cut_suffix = fit_infill(prefix, suffix, budget=budget, prompt_tokens=prompt_tokens,
                                        line_tokens=line_tokens)
    used = prompt_tokens(cut_prefix, cut_suffix)
    assert 0.9 * budget < used <= budget  # most of the window, never more
    assert prefix.endswith(cut_prefix) and suffix.startswith(cut_suffix)  # whole context next to the span
    assert prefix[: len(prefix) - len(cut_prefix)].endswith("\n") and cut_suffix.endswith("\n")  # whole lines
    # the enclosing kernel whole, with its spec lines
    kernel = "// dice: let n = 1 << 20\n// dice: buffer x[n], y[n]\n// dice: launch grid=(n + 255) / 256, block=256\n" \
             "__global__ void scale_100("
    assert kernel in cut_prefix
    assert cut_suffix.startswith("{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) {\n"
                                 "        y[i] = 101.0f * x[i];\n    }\n}\n")
    # and about as much above as below (one line each side in turn)
    above, below = cut_prefix.count("\n"), cut_suffix.count("\n")
    assert abs(above - below) <= 12, (above, below)


def test_the_enclosing_kernel_comes_before_lines_further_out(builtin_tokenizer):
    prompt_tokens, line_tokens = measures(builtin_tokenizer, "fim", None)
    kernel = ("// dice: launch grid=1, block=32\n__global__ void k(const float* x, float* y)\n{\n"
              + "".join(f"    y[{i}] = x[{i}] * {i}.0f;\n" for i in range(40)) + "}\n")
    text = "int far_above = 1;\n" * 200 + kernel + "int far_below = 2;\n" * 200
    prefix, suffix = split_at(text, "y[1] = x[1]")
    kernel_prefix, kernel_suffix = split_at(kernel, "y[1] = x[1]")
    room_for_the_kernel = prompt_tokens(kernel_prefix, kernel_suffix) + 40
    cut_prefix, cut_suffix = fit_infill(prefix, suffix, budget=room_for_the_kernel, prompt_tokens=prompt_tokens,
                                        line_tokens=line_tokens)
    # lines one above, one below in turn would have stopped short of the signature above
    # and far past the closing brace below; the kernel comes first, whole
    assert cut_prefix.endswith(kernel_prefix) and cut_suffix.startswith(kernel_suffix)
    assert 2 <= cut_prefix.count("far_above") + cut_suffix.count("far_below") <= 12  # the spare room, outward


def test_a_file_that_fits_is_untouched_and_no_room_is_a_clear_error(builtin_tokenizer):
    prompt_tokens, line_tokens = measures(builtin_tokenizer, "fim", None)
    prefix, suffix = "__global__ void k(float* y) {\n", "}\n"
    assert fit_infill(prefix, suffix, budget=100, prompt_tokens=prompt_tokens, line_tokens=line_tokens) == (prefix, suffix)
    with pytest.raises(EngineError, match="ask for fewer tokens"):
        fit_infill(prefix * 50, suffix, budget=prompt_budget(4096, 4, 4096), prompt_tokens=prompt_tokens,
                   line_tokens=line_tokens)


def test_one_line_too_long_for_the_window_is_cut_inside(builtin_tokenizer):
    prompt_tokens, line_tokens = measures(builtin_tokenizer, "fim", None)
    prefix, suffix = "float table[] = {" + ", ".join(f"{i}.5f" for i in range(3000)), "};\n" + "int z;\n" * 10
    cut_prefix, cut_suffix = fit_infill(prefix, suffix, budget=300, prompt_tokens=prompt_tokens, line_tokens=line_tokens)
    assert prompt_tokens(cut_prefix, cut_suffix) <= 300 and cut_prefix.endswith("2999.5f") and prefix.endswith(cut_prefix)


def test_the_builtin_model_fills_inside_a_2000_line_file_on_cpu():
    model = engine.load("builtin", device="cpu")
    prefix, suffix = split_at(big_cuda_file(), "void scale_100(")
    found = model.infill(prefix, suffix, max_tokens=8)  # before: "exceeds the model's context of 4096"
    assert len(found) == 1 and found[0].tokens >= 1


def dice_fill(path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([sys.executable, "-m", "dice_lsp.cli", "fill", str(path), *args], capture_output=True,
                          text=True, timeout=300, env=env)


def test_dice_fill_in_a_2000_line_file_with_the_builtin_model(tmp_path):
    path = tmp_path / "big.cu"
    path.write_text(big_cuda_file())
    line = big_cuda_file().splitlines().index("__global__ void scale_100(const float* x, float* y, int n)") + 3
    done = dice_fill(path, "--range", f"{line}:5-{line}:51", "--candidates", "1", "--max-tokens", "16", "--json")
    assert done.returncode == 0, done.stderr  # before: "prompt ... exceed the model's context of 4096 tokens"
    assert len(json.loads(done.stdout)["candidates"]) == 1


def test_a_job_the_model_refuses_does_not_advise_another_model(tmp_path):
    path = tmp_path / "big.cu"
    path.write_text(big_cuda_file(40))
    done = dice_fill(path, "--range", "8:5-8:51", "--max-tokens", "5000")
    assert done.returncode == 1 and "ask for fewer tokens" in done.stderr
    assert "Pass --model" not in done.stderr  # before: told to pass --model builtin, the model it ran


def test_max_tokens_past_the_context_says_so_with_numbers_that_make_sense(tmp_path):
    path = tmp_path / "small.cu"
    path.write_text(big_cuda_file(40))
    done = dice_fill(path, "--range", "8:5-8:51", "--max-tokens", "8192")
    assert done.returncode == 1 and "max_tokens 8192 is not less than the model's context of" in done.stderr
    assert not re.search(r"-\d", done.stderr), done.stderr  # no "more than the -98976 that max_tokens leaves"
