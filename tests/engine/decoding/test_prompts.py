"""DICE prompts, the chat template and getting the code back out of answers."""

from __future__ import annotations

from engine.decoding import prompts


def test_fim_prompt_puts_the_suffix_first():
    assert prompts.fim_prompt("int a = ", ";\n") == "<|fim_suffix|>;\n<|fim_prefix|>int a = <|fim_middle|>"


def test_chat_wrapping_uses_the_sdar_template(sdar_tokenizer_dir):
    template = (sdar_tokenizer_dir / "chat_template.jinja").read_text()
    text = prompts.render_chat("fill it", template)
    assert text == "<|im_start|>user\nfill it<|im_end|>\n<|im_start|>assistant\n"
    assert prompts.render_chat("fill it") == text  # the shipped copy is the same template


def test_infill_prompt_holds_reference_prefix_and_suffix():
    text = prompts.dice_infill_prompt("x = x + 1", "__global__ void k(float* x) {\n", "}\n")
    assert "```\nx = x + 1\n``` " in text
    assert "prefix: \n\n```\n__global__ void k(float* x) {\n\n``` " in text
    # A value holding template syntax is put in as it is, never read as a placeholder.
    assert "{{ suffix }}" in prompts.dice_infill_prompt("", "{{ suffix }}", "}")


def test_kernelbench_prompt_is_one_shot_and_asks_for_modelnew(kernelbench_dir):
    source = next((kernelbench_dir / "level1").glob("*.py")).read_text()
    text = prompts.kernelbench_prompt(source)
    assert source in text
    assert "class ModelNew" in text  # the one-shot answer
    assert text.rstrip().endswith("NO testing code!")
    assert "Name your optimized output architecture ModelNew" in text


def test_lenient_extraction_prefers_the_language_and_survives_a_cut_answer():
    answer = "Sure.\n```python\nprint(1)\n```\nand\n```cuda\nout[i] = a[i];\n```\n"
    assert prompts.lenient_extract_code(answer, ("cuda",)) == "out[i] = a[i];"
    assert prompts.lenient_extract_code(answer) == "print(1)"
    assert prompts.lenient_extract_code("<think>hmm</think>```cpp\nint x;\n") == "int x;"
    assert prompts.lenient_extract_code("int y;\n") == "int y;"


def test_span_from_a_whole_file_answer():
    prefix = "__global__ void add(const float* a, float* out, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    suffix = "}\n\nint main() { return 0; }\n"
    span = "    if (i < n) out[i] = a[i] + 1.0f;\n"
    assert prompts.span_from_answer(prefix + span + suffix, prefix, suffix) == span
    assert prompts.span_from_answer(span, prefix, suffix) == span  # already just the span
    # A piece around the span: the last prefix line and the first suffix line repeated.
    piece = "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n" + span + "}\n"
    assert prompts.span_from_answer(piece, prefix, suffix) == span
    # A span that closes its own block keeps its `}` when nothing around it was repeated.
    own = "    if (i < n) {\n        out[i] = a[i];\n    }\n"
    assert prompts.span_from_answer(own, prefix, suffix) == own


def test_tasks_map_answers_to_candidate_text():
    function = "__global__ void k(float* x)\n{\n    x[0] = 1.0f;\n}\n"
    fim = prompts.optimize_task(function, "cuda", "fim", None)
    assert fim.prompt == prompts.fim_prompt("__global__ void k(float* x)\n{\n", "}\n")
    assert fim.to_text("    x[0] = 2.0f;\n") == ("__global__ void k(float* x)\n{\n    x[0] = 2.0f;\n}\n", "")
    chat = prompts.optimize_task(function, "cuda", "chat", None)
    assert chat.prompt.startswith("<|im_start|>user\n") and function in chat.prompt
    answer = "```cuda\n#include <cuda.h>\n__global__ void k(float* x) { x[0] = 2.0f; }\n```"
    assert chat.to_text(answer) == ("__global__ void k(float* x) { x[0] = 2.0f; }\n", "lenient")
    kb = prompts.optimize_task("class Model: pass\n", "kernelbench", "chat", None)
    assert kb.to_text("```python\nclass ModelNew: pass\n```") == ("class ModelNew: pass\n", "dice")
    infill = prompts.infill_task("float scale_factor = ", ";\nreturn scale_factor;\n", None, "chat", None)
    assert infill.to_text("```c\nfloat scale_factor = 42.0f;\nreturn scale_factor;\n```") == ("42.0f", "dice")


def test_fim_answer_that_runs_on_into_the_suffix_is_cut_where_the_suffix_starts():
    from engine.decoding.prompts import infill_task, trim_suffix_overlap

    suffix = "\n    }\n}\n"
    # The small model writes the right statement, then copies the closing braces.
    assert trim_suffix_overlap("y[i] = a * x[i] + y[i];\n    }\n}", suffix) == "y[i] = a * x[i] + y[i];"
    # Text that is not a copy of the suffix's start is the model's own: kept.
    assert trim_suffix_overlap("y[i] = 0;\n    z = 1;", suffix) == "y[i] = 0;\n    z = 1;"
    # Only at a line boundary: a statement that ends like the suffix begins is not cut mid-line.
    assert trim_suffix_overlap("a = b}", "}\n") == "a = b}"
    task = infill_task("int f() {\n    ", suffix, None, "fim", None)
    assert task.to_text("return 1;\n    }\n}\n") == ("return 1;", "")
