"""A fill in the shape of the selection it replaces, and cut where it runs on past it.

A candidate is in the selection's shape (`fits_span`) when its brackets are balanced, as any
statement, expression or block an editor user selects is (or, for a selection that is not,
such as a line `if (i < n) {`, exactly what the file around it lacks), and on one line when the
selection is inside one line (the text before it on its line and after it on its line are both
there: the README's `--range 12:9-12:32`), ending as a line of code does. A candidate that runs
on past the selection is cut where it ends (`cut_to_span`): after its first whole line for a
one-line selection, before a line that repeats the suffix's first line for any selection, where
the rest of the line begins for a selection that cuts a line, and never past the end of the
function the selection is in; decoding may stop once that cut can no longer move
(`span_ended`).
"""

from __future__ import annotations

import functools

from engine.fill.source import BACKWARDS, COMMENT_OR_STRING, PAIRS, balanced, blanked, code_only, levels, owed

def _source_around(prefix: str, suffix: str) -> tuple[str, str]:
    """The CUDA source around a selection: for one inside a Python triple-quoted string (a
    `load_inline` extension's source, a KernelBench ModelNew's), the string's text before and
    after it; otherwise the prefix and suffix as they are."""
    for quote in ('"""', "'''"):
        if prefix.count(quote) % 2 == 1 and quote in suffix:
            return prefix[prefix.rindex(quote) + 3:], suffix[:suffix.index(quote)]
    return prefix, suffix


@functools.lru_cache(maxsize=16)
def _context_brackets(prefix: str, suffix: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(the closers the prefix leaves owed, the closers the suffix gives to brackets opened
    before it), both outermost first, in the CUDA source around the selection
    (`_source_around`); None where either part's brackets do not close in order on their own
    (a file broken mid-edit, braces doubled in `#if` branches): then no fill is judged by its
    context."""
    prefix, suffix = _source_around(prefix, suffix)
    before = owed(COMMENT_OR_STRING.sub(" ", prefix), PAIRS)
    after = owed(COMMENT_OR_STRING.sub(" ", suffix)[::-1], BACKWARDS)
    if before is None or after is None:
        return None
    return before, tuple(PAIRS[opener] for opener in after)


def closes_in_context(fill: str, prefix: str, suffix: str) -> bool:
    """The fill's brackets are balanced, or, where they are not, they are exactly what the code
    around the selection lacks: a selected `if (i < n) {` whose `}` the suffix has, a `} else {`,
    the first line of a call whose arguments go on below (the file, read with the fill, closes
    every bracket in order, as it did with the selection)."""
    if balanced(fill):
        return True
    context = _context_brackets(prefix, suffix)
    if context is None:
        return False
    before, after = context
    return owed(COMMENT_OR_STRING.sub(" ", fill), PAIRS, before) == after


def inside_one_line(prefix: str, suffix: str) -> bool:
    """The selection is inside one line: text before it on its line, and its line ends after it."""
    return not prefix.endswith("\n") and suffix.split("\n", 1)[0].strip() == "" and "\n" in suffix


def line_rest(suffix: str) -> str:
    """The code after the selection on its last line ("" where the selection runs to the line's
    end): a selection that cuts a statement, `y[i] = a * ` before `x[i] + y[i];`, has one."""
    return suffix.split("\n", 1)[0].strip()


def _function_exit(fill: str, prefix: str, suffix: str) -> int | None:
    """Where the fill closes the outermost bracket the selection is in (the function's body, for
    a selection in a function) while the suffix still closes it: the offset of that closer in
    `fill`, or None where the fill stays inside (or the file's brackets say nothing)."""
    context = _context_brackets(prefix, suffix)
    if context is None or not context[0] or not context[1] or context[0][0] != context[1][0]:
        return None
    outermost = -len(context[0])   # the depth, counted from the fill's start, of that closer
    return next((at for at, _, depth in levels(blanked(fill)) if depth == outermost), None)


def _rest_repeated(fill: str, prefix: str, suffix: str) -> int | None:
    """For a selection that cuts a line (line_rest), the offset where a line of the fill ends
    with that line's rest after a head that is not blank and closes in context: the model wrote
    the selection and then the code after it, which the suffix has. None where no line does."""
    rest = line_rest(suffix)
    if not rest:
        return None
    start = 0
    for line in fill.split("\n"):
        code = line.rstrip()
        if code.endswith(rest) and code[:len(code) - len(rest)].strip():   # the rest, after code on its line
            head = fill[:start + len(code) - len(rest)]
            if head.strip() and closes_in_context(head, prefix, suffix):
                return len(head)
        start += len(line) + 1
    return None


LINE_ENDS = (";", "{", "}", ")", ":", "else")


def fits_span(fill: str, prefix: str, suffix: str) -> bool:
    """The fill has the shape of the selection it replaces (see the module doc); a selection
    inside one line that runs to the line's end is a whole line of code, so its fill ends as
    one does (`;`, a brace, `)` of an `if`, a label, `else`) or is a comment or directive, or
    opens what the lines below close (`foo(a,` of a call that goes on), or is one of the lines
    of an argument or parameter list (`const float* x,`), or of a statement that the deeper
    indented line below goes on with (`const int n =`), or of a macro (`\\` after one)."""
    if not closes_in_context(fill, prefix, suffix):
        return False
    if not inside_one_line(prefix, suffix):
        return True
    text = COMMENT_OR_STRING.sub(lambda m: m.group(0) if m.group(0)[0] in "\"'" else "", fill).strip()
    whole = text.endswith(LINE_ENDS) or fill.strip().startswith(("//", "/*", "#")) or not balanced(fill) \
        or (text.endswith(",") and _inside_list(prefix, suffix)) \
        or (text.endswith(CONTINUED) and _continued(prefix, suffix)) \
        or (text.endswith("\\") and prefix.rstrip(" \t").endswith("\\\n"))
    return "\n" not in fill.strip() and whole


CONTINUED = ("=", "+", "-", "*", "/", "%", "&", "|", "^", "<", ">", "?", ":", ",", "(", "!")


def _continued(prefix: str, suffix: str) -> bool:
    """The selected line's statement goes on below it: the next line of code is indented deeper
    than the selection's line (`const int n =` over `    rows * cols;`)."""
    indent = prefix[prefix.rfind("\n") + 1:]
    following = next((line for line in suffix.split("\n")[1:] if line.strip()), "")
    return not indent.strip() and _width(following) > _width(indent)


def _width(line: str) -> int:
    """The width of a line's indentation, a tab as 4 columns."""
    return len(line[:len(line) - len(line.lstrip())].expandtabs(4))


def must_close(prefix: str, suffix: str) -> bool:
    """The file closes fewer brackets after the selection than it opens before it, at the levels
    the two share: a fill must close one (a selected `}`, or `}` ending a block before more
    code). Where it need not, a fill that starts by closing a bracket is out of shape."""
    context = _context_brackets(prefix, suffix)
    if context is None:
        return False
    before, after = context
    return after[:len(before)] != before


def _inside_list(prefix: str, suffix: str) -> bool:
    """The selection is inside parentheses or brackets that the file opens before it and closes
    after it: one of a call's or a parameter list's lines, which end with `,`."""
    context = _context_brackets(prefix, suffix)
    return context is not None and bool(context[0]) and context[0][-1] in ")]"


def cut_to_span(fill: str, prefix: str, suffix: str) -> str:
    """A fill that runs on past the selection, cut where it ends: the small model often writes
    what the selection needs and then goes on with the code after it, which the suffix already
    has. For a selection inside one line, after the fill's first line when that line is a whole
    piece of code (brackets balanced, or closing what the file around it lacks: `if (i < n) {`);
    for any selection, before the first line of the fill that repeats the suffix's first
    non-blank line where the fill up to it is balanced (a block body followed by the `}` the
    suffix starts with). Any other fill is returned as it is, but for a selection inside one line
    without the line break that ends its one line of code (a row that span_ended stopped there):
    the selection has no line break, and the user's line would gain an empty one.

    Before all that, two cuts keep a fill inside the selection's function: a fill that closes
    the function's body (which the suffix closes) is cut before that line, and for a selection
    that cuts a line (line_rest: `y[i] = a * ` of `y[i] = a * x[i] + y[i];`), a fill that goes
    on to write the rest of the line (and then the code after it, a second copy of the function)
    is cut where that rest begins."""
    exit_at = _function_exit(fill, prefix, suffix)
    if exit_at is not None and fill[:fill.rfind("\n", 0, exit_at) + 1].strip():
        # Up to the line break before that line, which stays unless the suffix brings its own.
        line_break = fill.rfind("\n", 0, exit_at)
        fill = fill[:line_break] if suffix.lstrip(" \t").startswith("\n") else fill[:line_break + 1]
    rest_at = _rest_repeated(fill, prefix, suffix)
    if rest_at is not None:
        return fill[:rest_at]
    if "\n" not in fill:
        return fill
    text = fill.strip()
    one_line = inside_one_line(prefix, suffix)
    if "\n" not in text:
        head = fill.split("\n", 1)[0]
        return head.rstrip() if one_line and head.strip() else fill
    if one_line:
        first = text.split("\n", 1)[0].rstrip()
        return first if first and closes_in_context(first, prefix, suffix) else fill
    lines = fill.split("\n")
    found = _suffix_repeated(lines, suffix)
    if found is None:
        return fill
    k, following = found
    head = "\n".join(lines[:k])
    # The suffix starts the line that `following` is on, or a newline ends the fill's line.
    return head if "\n" in suffix[:suffix.index(following)] else head + "\n"


def _suffix_repeated(lines: list[str], suffix: str) -> tuple[int, str] | None:
    """(k, the suffix's first non-blank line) for the first line k of a fill that repeats that
    line after a head (lines before k) that is not blank and is balanced; None if none does."""
    following = next((line.strip() for line in suffix.split("\n") if line.strip()), "")
    if not following:
        return None
    for k in range(1, len(lines)):
        head = "\n".join(lines[:k])
        if lines[k].strip() == following and head.strip() and balanced(head):
            return k, following
    return None


def span_ended(answer: str, prefix: str, suffix: str) -> bool:
    """Whether a FIM answer already holds all the fill it will give, whitespace aside: however it
    goes on, trim_suffix_overlap (engine.decoding.prompts) then cut_to_span cut it where they cut it now,
    so its decoding may stop (engine.decoding.local: on a CPU the rows that run on past the span set a
    batch's time). For a selection inside one line: its first line is complete (a newline after
    it), not blank and balanced (in its context: closes_in_context): cut_to_span keeps that
    line, and no tail that the suffix (blank up to its first newline) starts with can begin
    before its end. For any other selection: a complete line repeating the suffix's first
    non-blank line follows a balanced, not blank head: cut_to_span cuts before the first such
    line, and a tail the suffix starts with can only begin past it or at blank lines. Otherwise
    (no such line yet, a blank or unbalanced first line) the answer is not ended: the model goes
    on to its stop token or max_tokens."""
    complete = answer[:answer.rfind("\n") + 1]   # the lines that will not change
    exit_at = _function_exit(complete, prefix, suffix)
    if exit_at is not None and complete[:complete.rfind("\n", 0, exit_at) + 1].strip():
        return True   # cut_to_span cuts before the line that leaves the function
    if _rest_repeated(complete, prefix, suffix) is not None:
        return True   # cut_to_span cuts where the rest of the selection's line begins
    lines = answer.split("\n")
    if inside_one_line(prefix, suffix):
        return len(lines) > 1 and bool(lines[0].strip()) and closes_in_context(lines[0].strip(), prefix, suffix)
    found = _suffix_repeated(lines, suffix)
    return found is not None and found[0] < len(lines) - 1   # the last line may not be whole yet


def starts_statement(prefix: str) -> bool:
    """The selection begins where a statement may: nothing before it on its line, and the
    code before that ends a statement or opens or closes a block."""
    line_start = prefix.rfind("\n") + 1
    if prefix[line_start:].strip():
        return False
    code = code_only(prefix[:line_start]).rstrip()
    return code.endswith((";", "{", "}"))
