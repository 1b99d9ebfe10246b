"""An infill's prefix and suffix cut to what fits the model's context, around the span.

A file of a few hundred lines is already more than a 4096-token model can read. What it
needs most is the code around the span: the enclosing kernel (from its signature and the
`// dice:` or other comment lines directly above it, down to its closing `}` at column 0),
then the lines further out, taken one above, one below, until the budget is spent. Whole
lines are kept; only a nearest line too long for the budget is cut inside.

The budget is measured with the real prompt (the caller's `prompt_tokens`), so it holds
for any prompt format: the FIM prompt of the built-in model, DICE's chat prompts.
"""

from __future__ import annotations

from typing import Callable

from engine.types import EngineError

PromptTokens = Callable[[str, str], int]  # (prefix, suffix) -> tokens of the whole prompt
LineTokens = Callable[[list[str]], list[int]]  # lines -> tokens of each, as one batch
FIT_ATTEMPTS = 8


def prompt_budget(context: int, block_size: int, max_tokens: int) -> int:
    """Tokens the prompt may have: decoding needs whole blocks of prompt + answer within the
    context."""
    return context // block_size * block_size - max_tokens


def _enclosing_block(above: list[str], below: list[str]) -> tuple[int, int]:
    """How many lines of `above` (from its end) and `below` (from its start) make up the
    top-level block the span is in, with the comment lines directly above it; (0, 0) when
    the span is not inside one. A block starts at a line that begins at column 0 (not with
    `{`, `}`, `#` or a comment) and ends at a line that begins with `}`."""
    start = None
    for i in range(len(above) - 1, -1, -1):
        line = above[i]
        if line.startswith("}"):
            return 0, 0  # the span is after a block, not in one
        if line[:1] not in ("", " ", "\t", "\n", "\r", "{", "#") and not line.startswith(("//", "/*", "*")):
            start = i
            break
    if start is None:
        return 0, 0
    while start > 0 and above[start - 1].lstrip().startswith("//"):
        start -= 1
    end = next((j + 1 for j, line in enumerate(below) if line.startswith("}")), 0)
    return len(above) - start, end


def _grow(costs_above: list[int], costs_below: list[int], limits: list[tuple[int, int]], room: int) -> tuple[int, int]:
    """Lines taken above and below, one each side in turn, nearest first, each stage up to
    its limits; a side stops at its first line that does not fit (the context stays whole)."""
    taken = [0, 0]
    open_side = [True, True]
    costs = (costs_above, costs_below)
    for limit in limits:
        grew = True
        while grew:
            grew = False
            for side in (0, 1):
                if not open_side[side] or taken[side] >= limit[side]:
                    continue
                cost = costs[side][taken[side]]
                if cost > room:
                    open_side[side] = False
                    continue
                room -= cost
                taken[side] += 1
                grew = True
    return taken[0], taken[1]


def _longest_part(line: str, side: int, prefix: str, suffix: str, prompt_tokens: PromptTokens, budget: int) -> str:
    """The longest end of `line` nearest the span (its tail above it, side 0; its head below,
    side 1) that fits beside the prefix and suffix already chosen."""
    def part(keep: int) -> str:
        return line[len(line) - keep:] if side == 0 else line[:keep]

    low, high = 0, len(line)
    while low < high:
        keep = (low + high + 1) // 2
        fits = prompt_tokens(part(keep) + prefix, suffix) if side == 0 else prompt_tokens(prefix, suffix + part(keep))
        if fits <= budget:
            low = keep
        else:
            high = keep - 1
    return part(low)


def fit_infill(prefix: str, suffix: str, *, budget: int, prompt_tokens: PromptTokens,
               line_tokens: LineTokens) -> tuple[str, str]:
    """(prefix, suffix) as they are when the prompt fits in `budget` tokens, else cut to the
    lines nearest the span, the enclosing block first. EngineError when not even an empty
    context fits (max_tokens leaves no room)."""
    if prompt_tokens(prefix, suffix) <= budget:
        return prefix, suffix
    fixed = prompt_tokens("", "")
    if budget <= 0:
        raise EngineError("max_tokens takes the model's whole context, with no room left for the prompt: "
                          "ask for fewer tokens")
    if fixed > budget:
        raise EngineError(f"the prompt needs {fixed} tokens before any code, more than the {budget} that "
                          "max_tokens leaves of the model's context: ask for fewer tokens")
    above = prefix.splitlines(keepends=True)[::-1]  # nearest first
    below = suffix.splitlines(keepends=True)
    # Per-line counts are close to, not exactly, the count of the joined lines: measure the
    # real prompt, and take lines away until it fits.
    costs_above, costs_below = line_tokens(above), line_tokens(below)
    core_above, core_below = _enclosing_block(above[::-1], below)
    limits = [(core_above, core_below), (len(above), len(below))]
    room = budget - fixed
    taken_above = taken_below = 0
    for _ in range(FIT_ATTEMPTS):
        taken_above, taken_below = _grow(costs_above, costs_below, limits, room)
        over = prompt_tokens("".join(above[:taken_above][::-1]), "".join(below[:taken_below])) - budget
        if over <= 0:
            break
        room -= over
    else:
        taken_above = taken_below = 0
    cut_prefix, cut_suffix = "".join(above[:taken_above][::-1]), "".join(below[:taken_below])
    # A side whose nearest line alone is too long gets as much of that line as fits.
    if taken_above == 0 and above:
        cut_prefix = _longest_part(above[0], 0, "", cut_suffix, prompt_tokens, budget)
    if taken_below == 0 and below:
        cut_suffix = _longest_part(below[0], 1, cut_prefix, "", prompt_tokens, budget)
    return cut_prefix, cut_suffix
