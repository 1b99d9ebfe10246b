"""Prompts and code extraction.

Two families:
- `fim` checkpoints (the built-in model) read `fim_prompt(prefix, suffix)` and answer the
  middle, then <|endoftext|>;
- DICE/SDAR chat checkpoints get DICE's task prompts (kernel infilling; end-to-end
  KernelBench, asking for `ModelNew`) wrapped in the checkpoint's chat template, and answer
  in Markdown: the code is taken out of the answer by `extract_code` / `span_from_answer`.
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
TEMPLATES = Path(__file__).parent / "templates"


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

MISSING = "<<<MISSING CUDA CODE>>>"


def kernel_infill_prompt(prefix: str, suffix: str, reference: str | None = None) -> str:
    """DICE's kernel-infilling task: the PyTorch reference (when known) and the CUDA code with
    one span cut out; the answer is the missing code alone, in a code block."""
    parts = []
    if reference:
        parts.append(f"Here is a PyTorch reference implementation:\n```python\n{reference}\n```\n")
    parts.append(
        "Here is a CUDA implementation of it with a missing part, marked "
        f"{MISSING}:\n```cuda\n{prefix}{MISSING}{suffix}\n```\n"
    )
    parts.append(
        f"Fill the missing CUDA code. Output only the code that replaces {MISSING}, in one code "
        "block, so that the whole program compiles, is correct and runs fast."
    )
    return "\n".join(parts)


def kernel_optimize_prompt(function: str) -> str:
    """Rewrite one __global__ function, same name and parameters, for speed."""
    return (
        "Here is a CUDA kernel:\n"
        f"```cuda\n{function}\n```\n\n"
        "Optimize this kernel for speed on a modern NVIDIA GPU. Keep its name, its parameters "
        "and its results exactly. Output the complete new kernel (and any __device__ helpers it "
        "needs) in one code block."
    )


# KernelBench's one-shot prompt (ScalingIntelligence/KernelBench, src/prompt_constructor.py,
# MIT): DICE is evaluated with it, so its wording is kept. The one-shot pair is ours.
KERNELBENCH_STATEMENT = (
    "You write custom CUDA kernels to replace the pytorch operators in the given architecture "
    "to get speedups.\n\nYou have complete freedom to choose the set of operators you want to "
    "replace. You may make the decision to replace some operators with custom CUDA kernels and "
    "leave others unchanged. You may replace multiple operators with custom implementations, "
    "consider operator fusion opportunities (combining multiple operators into a single kernel, "
    "for example, combining matmul+relu), or algorithmic changes (such as online softmax). You "
    "are only limited by your imagination.\n"
)
KERNELBENCH_INSTRUCTION = (
    "Optimize the architecture named Model with custom CUDA operators! Name your optimized "
    "output architecture ModelNew. Output the new code in codeblocks. Please generate real code, "
    "NOT pseudocode, make sure the code compiles and is fully functional. Just output the new "
    "model code, no other text, and NO testing code! \n"
)


@cache
def kernelbench_example() -> tuple[str, str]:
    return (TEMPLATES / "kernelbench_example_model.py").read_text(), (
        TEMPLATES / "kernelbench_example_model_new.py"
    ).read_text()


def kernelbench_prompt(source: str) -> str:
    """The end-to-end task: a KernelBench file in, `ModelNew` with inline CUDA out."""
    example, example_new = kernelbench_example()
    return (
        f"{KERNELBENCH_STATEMENT}\n"
        "Here's an example to show you the syntax of inline embedding custom CUDA operators in "
        f"torch: The example given architecture is: \n\n```\n{example}\n```\n\n"
        f"The example new arch with custom CUDA kernels looks like this: \n```\n{example_new}\n```\n\n"
        f"You are given the following architecture: \n\n```\n{source}\n```\n"
        f"{KERNELBENCH_INSTRUCTION}"
    )


# --- extraction ---------------------------------------------------------------------------------

FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
THINKING = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)


def extract_code(answer: str, prefer: tuple[str, ...] = ()) -> str:
    """The code in a chat answer: the first fenced block whose language is in `prefer` (else
    the first block; an unclosed fence runs to the end, as when decoding hit max_tokens);
    an answer with no fence is taken as code. Reasoning in <think> is dropped."""
    answer = THINKING.sub("", answer)
    blocks = FENCE.findall(answer)
    if not blocks:
        return answer.strip("\n")
    for language, body in blocks:
        if language.lower() in prefer:
            return body.rstrip("\n")
    return blocks[0][1].rstrip("\n")


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
    to_text: Callable[[str], str]  # the model's answer -> the candidate's .text


def _identity(answer: str) -> str:
    return answer


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
    """The text that replaces the span between prefix and suffix."""
    if prompt_format == "fim":
        return Task(fim_prompt(prefix, suffix), lambda answer: trim_suffix_overlap(answer, suffix))
    return Task(
        render_chat(kernel_infill_prompt(prefix, suffix, reference), chat_template),
        lambda answer: span_from_answer(extract_code(answer, CODE_LANGUAGES), prefix, suffix),
    )


def optimize_task(code: str, language: str, prompt_format: str, chat_template: str | None) -> Task:
    """language="cuda": code is one __global__ function and the text replaces it whole;
    language="kernelbench": code is a KernelBench file and the text is Python defining ModelNew."""
    fim = prompt_format == "fim"
    if language == "cuda" and fim:
        # The FIM model rewrites the body under the fixed signature.
        head, tail = function_signature(code), "}\n"
        return Task(fim_prompt(head, tail), lambda answer: head + trim_suffix_overlap(answer, tail) + tail)
    if language == "cuda":
        return Task(
            render_chat(kernel_optimize_prompt(code), chat_template),
            lambda answer: kernel_from_answer(extract_code(answer, CODE_LANGUAGES)),
        )
    if language == "kernelbench" and fim:
        head = code.rstrip("\n") + "\n\n\n" + KERNELBENCH_FIM_HEADER
        return Task(fim_prompt(head, ""), lambda answer: KERNELBENCH_FIM_HEADER + answer)
    if language == "kernelbench":
        return Task(
            render_chat(kernelbench_prompt(code), chat_template),
            lambda answer: extract_code(answer, PYTHON_LANGUAGES) + "\n",
        )
    raise ValueError(f"unknown language {language!r} (use 'cuda' or 'kernelbench')")
