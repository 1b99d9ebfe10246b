"""Prompts and code extraction.

Two families:
- `fim` checkpoints (the built-in model) read `fim_prompt(prefix, suffix)` and answer the
  middle, then <|endoftext|>;
- DICE/SDAR chat checkpoints get DICE's task prompts (kernel infilling; end-to-end
  KernelBench, asking for `ModelNew`) wrapped in the checkpoint's chat template, and answer
  in Markdown: the code is taken out of the answer by DICE's own rule (`dice_extract_code`),
  or, for answers DICE would reject, by our `lenient_extract_code`; `span_from_answer`
  then cuts a filled span out of a whole-file answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Callable

FIM_PREFIX = "<|fim_prefix|>"
FIM_SUFFIX = "<|fim_suffix|>"
FIM_MIDDLE = "<|fim_middle|>"
END_OF_TEXT = "<|endoftext|>"
TEMPLATES = Path(__file__).parents[1] / "templates"  # package data of engine/


def fim_prompt(prefix: str, suffix: str) -> str:
    """The one place the FIM format is written (suffix first, so that a block-causal model has
    read the right-hand context before it writes the middle); training imports it. The model
    answers the middle, then <|endoftext|>."""
    return f"{FIM_SUFFIX}{suffix}{FIM_PREFIX}{prefix}{FIM_MIDDLE}"


# --- chat template ----------------------------------------------------------------------------


@cache
def sdar_chat_template() -> str:
    """SDAR's chat template (JetAstra/SDAR, MIT), for servers whose tokenizer we cannot read."""
    return (TEMPLATES / "sdar_chat.jinja").read_text()


def render_chat(user_message: str, template: str | None = None) -> str:
    """One user turn through a Hugging Face chat template, ready for the assistant's answer."""
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        conversations=[[{"role": "user", "content": user_message}]],
        chat_template=template or sdar_chat_template(),
        add_generation_prompt=True,
    )
    return rendered[0]


# --- DICE task prompts --------------------------------------------------------------------------
# The templates are data files (engine/templates/README.md names each one's source); each
# `{{ name }}` in them is replaced once, and the values put in are never read as template.

PLACEHOLDER = re.compile(r"\{\{ (\w+) \}\}")


@cache
def template_text(name: str) -> str:
    return (TEMPLATES / name).read_text()


def fill_template(name: str, **values: str) -> str:
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], template_text(name))


def kernelbench_prompt(source: str) -> str:
    """KernelBench's one-shot prompt, as DICE's evaluation builds it for a problem file (its
    `Model`); the answer is Python defining ModelNew with inline CUDA."""
    return fill_template(
        "kernelbench_one_shot.txt",
        example_arch=template_text("kernelbench_model_ex_add.py"),
        example_new_arch=template_text("kernelbench_model_new_ex_add.py"),
        pytorch_code=source,
    )


def dice_infill_prompt(pytorch_code: str, prefix: str, suffix: str) -> str:
    """DICE's kernel-infilling prompt (its RL stage's template): the PyTorch reference, the
    ModelNew file cut into prefix and suffix; the answer is the whole new file."""
    return fill_template(
        "dice_kernel_infilling.txt",
        example_arch=template_text("kernelbench_model_ex_add.py"),
        example_new_arch=template_text("kernelbench_model_new_ex_add.py"),
        pytorch_code=pytorch_code,
        prefix=prefix,
        suffix=suffix,
    )


def kernel_optimize_prompt(function: str) -> str:
    """Rewrite one __global__ function, same name and parameters, for speed (ours: DICE has
    no single-kernel task)."""
    return (
        "Here is a CUDA kernel:\n"
        f"```cuda\n{function}\n```\n\n"
        "Optimize this kernel for speed on a modern NVIDIA GPU. Keep its name, its parameters "
        "and its results exactly. Output the complete new kernel (and any __device__ helpers it "
        "needs) in one code block."
    )


# --- extraction ---------------------------------------------------------------------------------
# Two rules, kept apart so that a candidate says which one gave its code (Candidate.extraction):
# DICE's own (what its evaluation scores), and a lenient one of ours for answers DICE rejects.

DICE_LANGUAGES = ("python", "cpp")  # what DICE's evaluation passes to its extract_first_code
DICE_FENCE = re.compile(r"```(.*?)```", re.DOTALL)


def dice_extract_code(answer: str, languages: tuple[str, ...] = DICE_LANGUAGES) -> str | None:
    """DICE's extraction (evaluation/src/utils.py extract_first_code): the text between the
    first two ``` of the stripped answer, stripped, with each listed language word that it
    starts with taken off in turn (so "```python3" leaves "3" and "```cuda" keeps "cuda").
    None when there is no closed fence."""
    found = DICE_FENCE.search(answer.strip())
    if found is None:
        return None
    code = found.group(1).strip()
    for language in languages:
        if code.startswith(language):
            code = code[len(language) :].strip()
    return code


FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
THINKING = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)


def lenient_extract_code(answer: str, prefer: tuple[str, ...] = ()) -> str:
    """Our fallback: the first fenced block whose language is in `prefer` (else the first
    block; an unclosed fence runs to the end, as when decoding hit max_tokens); an answer with
    no fence is taken as code. Reasoning in <think> is dropped."""
    answer = THINKING.sub("", answer)
    blocks = FENCE.findall(answer)
    if not blocks:
        return answer.strip("\n")
    for language, body in blocks:
        if language.lower() in prefer:
            return body.rstrip("\n")
    return blocks[0][1].rstrip("\n")


def extract_dice_answer(answer: str, prefer: tuple[str, ...]) -> tuple[str, str]:
    """(code, "dice") when DICE's extraction accepts the answer, else (code, "lenient")."""
    code = dice_extract_code(answer)
    if code is not None:
        return code, "dice"
    return lenient_extract_code(answer, prefer), "lenient"


ANCHOR_MIN = 12  # shorter overlaps are too likely to be chance


def _longest_tail_in(text: str, code: str) -> tuple[int, int] | None:
    """(start, end) in code of the longest tail of `text` (>= ANCHOR_MIN chars) found there."""
    tail = text[-400:]
    for cut in range(len(tail) - ANCHOR_MIN + 1):
        piece = tail[cut:]
        if not piece.strip():
            break
        where = code.rfind(piece)
        if where >= 0:
            return where, where + len(piece)
    return None


def _longest_head_in(text: str, code: str, start: int) -> int | None:
    """Where in code (at or after start) the longest head of `text` (>= ANCHOR_MIN) begins."""
    head = text[:400]
    for cut in range(len(head), ANCHOR_MIN - 1, -1):
        piece = head[:cut]
        if not piece.strip():
            break
        where = code.find(piece, start)
        if where >= 0:
            return where
    return None


def _repeated_at_end(text: str, code: str) -> int | None:
    """Where code ends with a head of `text` (any length, ignoring trailing whitespace)."""
    body = code.rstrip()
    for cut in range(min(len(text), 400), 0, -1):
        piece = text[:cut].rstrip()
        if piece.strip() and body.endswith(piece):
            return len(body) - len(piece)
    return None


def _repeated_at_start(text: str, code: str) -> int | None:
    """Where (after) code starts with a tail of `text` (any length, ignoring leading whitespace)."""
    start = len(code) - len(code.lstrip())
    for cut in range(max(0, len(text) - 400), len(text)):
        piece = text[cut:].lstrip()
        if piece.strip() and code.startswith(piece, start):
            return start + len(piece)
    return None


def span_from_answer(code: str, prefix: str, suffix: str) -> str:
    """The part of `code` that replaces the span between prefix and suffix. When the model
    answered with the whole file (or a piece around the span), the text it repeated from the
    prefix's end and the suffix's start is cut off; otherwise the code is the span.

    A long overlap (ANCHOR_MIN characters) anywhere counts as repeated context. Once one side
    is known to be repeated, a short overlap at the very edge on the other side (a lone `}`)
    counts too; alone it would not, since a span may well end with its own `}`."""
    before = _longest_tail_in(prefix, code) if prefix.strip() else None
    start = before[1] if before is not None else 0
    after = _longest_head_in(suffix, code, start) if suffix.strip() else None
    if before is None and after is not None and prefix.strip():
        start = _repeated_at_start(prefix, code[:after]) or 0
    if after is None and before is not None and suffix.strip():
        edge = _repeated_at_end(suffix, code)
        after = edge if edge is not None and edge >= start else None
    end = after if after is not None else len(code)
    return code[start:end]


def function_signature(function: str) -> str:
    """A CUDA function's text up to and including the `{` that opens its body, and the line
    break after it: the fixed prefix when a FIM model rewrites only the body."""
    brace = function.find("{")
    if brace < 0:
        raise ValueError("no function body: '{' not found")
    return function[: brace + 1] + "\n"


INCLUDE_LINE = re.compile(r"^\s*#\s*include\b.*\n?", re.MULTILINE)


def kernel_from_answer(code: str) -> str:
    """A rewritten kernel as a replacement for the function in the document: includes that a
    chat model likes to repeat at the top would land in the middle of the file, so they go."""
    return INCLUDE_LINE.sub("", code).strip("\n") + "\n"


# --- tasks: the prompt for a request and the way back from the answer to the candidate's text ---

CODE_LANGUAGES = ("cuda", "cu", "cpp", "c++", "c")
PYTHON_LANGUAGES = ("python", "py")
KERNELBENCH_FIM_HEADER = "class ModelNew(nn.Module):"


@dataclass
class Task:
    prompt: str
    # The model's answer -> (the candidate's .text, the extraction used: "dice" | "lenient" | "").
    to_text: Callable[[str], tuple[str, str]]


def _identity(answer: str) -> tuple[str, str]:
    return answer, ""


def trim_suffix_overlap(fill: str, suffix: str) -> str:
    """The fill without a tail that repeats the start of the suffix exactly.

    A small FIM model (the built-in one) often writes the right middle and then goes on
    copying the suffix instead of ending with <|endoftext|>. Cutting, at the earliest line
    boundary, a tail that the suffix starts with undoes that: on held-out kernels it lifted
    exact matches from 25% to 75% (docs/model-card.md). The cut text is, by construction,
    already in the document right after the span, so nothing the model meant is lost."""
    for j in range(len(fill)):
        at_boundary = j == 0 or fill[j - 1] == "\n" or fill[j] == "\n"
        tail = fill[j:]
        if at_boundary and tail.strip() and suffix.startswith(tail):
            return fill[:j]
    return fill


def generate_task(prompt: str) -> Task:
    """Plain continuation: the prompt as it is, the answer as it is."""
    return Task(prompt, _identity)


def infill_task(prefix: str, suffix: str, reference: str | None, prompt_format: str, chat_template: str | None) -> Task:
    """The text that replaces the span between prefix and suffix. Chat checkpoints get DICE's
    kernel-infilling prompt; without a PyTorch reference (a .cu file) its reference block is
    left empty, the nearest input to the format DICE was trained on (README, Prompts)."""
    if prompt_format == "fim":
        return Task(fim_prompt(prefix, suffix), lambda answer: (trim_suffix_overlap(answer, suffix), ""))

    def to_text(answer: str) -> tuple[str, str]:
        code, extraction = extract_dice_answer(answer, CODE_LANGUAGES + PYTHON_LANGUAGES)
        return span_from_answer(code, prefix, suffix), extraction

    return Task(render_chat(dice_infill_prompt(reference or "", prefix, suffix), chat_template), to_text)


def optimize_task(code: str, language: str, prompt_format: str, chat_template: str | None) -> Task:
    """language="cuda": code is one __global__ function and the text replaces it whole;
    language="kernelbench": code is a KernelBench problem (DICE is shown the problem alone:
    profiler.source.document.kernelbench_problem cuts one out of a file that holds a ModelNew
    too) and the text is Python defining ModelNew."""
    fim = prompt_format == "fim"
    if language == "cuda" and fim:
        # The FIM model rewrites the body under the fixed signature.
        head, tail = function_signature(code), "}\n"
        return Task(fim_prompt(head, tail), lambda answer: (head + trim_suffix_overlap(answer, tail) + tail, ""))
    if language == "cuda":
        return Task(
            render_chat(kernel_optimize_prompt(code), chat_template),
            lambda answer: (kernel_from_answer(lenient_extract_code(answer, CODE_LANGUAGES)), "lenient"),
        )
    if language == "kernelbench" and fim:
        head = code.rstrip("\n") + "\n\n\n" + KERNELBENCH_FIM_HEADER
        return Task(fim_prompt(head, ""), lambda answer: (KERNELBENCH_FIM_HEADER + answer, ""))
    if language == "kernelbench":
        def to_text(answer: str) -> tuple[str, str]:
            extracted, extraction = extract_dice_answer(answer, PYTHON_LANGUAGES)
            return extracted + "\n", extraction

        return Task(render_chat(kernelbench_prompt(code), chat_template), to_text)
    raise ValueError(f"unknown language {language!r} (use 'cuda' or 'kernelbench')")
