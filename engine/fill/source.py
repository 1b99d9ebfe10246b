"""C/CUDA source read as code: its comments, strings and directives blanked, and one walk over
its brackets that every reader of a fill's structure (engine.fill.names, declarations, spans,
usage) shares.

A fill is judged against text that is not a whole translation unit: a prefix that ends inside a
function, a suffix that starts inside one, a candidate that may close what it never opened. A
parser's tree of such fragments is its error recovery's guess; a bracket count says exactly what
the text holds, and each reader asks it the one question it needs (`levels`: the depth of every
bracket and mark; `owed`: which closers the text still owes, in order).
"""

from __future__ import annotations

import functools
import re
from typing import Iterator

PREPROCESSOR_LINE = re.compile(r"^\s*#[^\n]*", re.MULTILINE)
COMMENT_OR_STRING = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'", re.DOTALL)
PAIRS = {"(": ")", "[": "]", "{": "}"}
BACKWARDS = {")": "(", "]": "[", "}": "{"}
ALL_BRACKETS = "()[]{}"


def code_only(text: str) -> str:
    """`text` without its comments, strings and preprocessor lines (each a space)."""
    return PREPROCESSOR_LINE.sub(" ", COMMENT_OR_STRING.sub(" ", text))


def blanked(text: str) -> str:
    """`text` with each comment and string blanked to as many spaces: offsets stay `text`'s."""
    return COMMENT_OR_STRING.sub(lambda m: " " * len(m.group()), text)


def word(name: str) -> str:
    """A pattern of `name` used as a name of its own: not part of a longer one, not a member."""
    return r"(?<![\w.>:])%s(?!\w)" % re.escape(name)


def squeezed(code: str) -> str:
    """`code` with each run of whitespace as one character (a newline where the run holds one)."""
    return re.sub(r"\s+", lambda m: "\n" if "\n" in m.group() else " ", code)


@functools.lru_cache(maxsize=32)
def _marks_pattern(characters: str) -> re.Pattern:
    return re.compile("[" + re.escape(characters) + "]")


def levels(code: str, start: int = 0, stop: int | None = None, *, brackets: str = ALL_BRACKETS, marks: str = "",
           backwards: bool = False, stray: bool = True) -> Iterator[tuple[int, str, int]]:
    """Each bracket of `brackets` (pairs of opener and closer, `"()[]{}"`, `"{}"`) and each
    character of `marks` in code[start:stop], in order (last first when `backwards`, where a
    closer opens and an opener closes), as (offset, character, depth). The depth counts the
    brackets opened since `start` and not yet closed, of any kind: a mark's is the depth it is
    at; an opener's the depth outside it, and its closer's the same, so that the brackets at
    depth 0 are the outermost ones; a closer of a bracket opened before `start` has depth -1
    (and what follows it goes on from there). Where `stray` is False such a closer is still
    given with depth -1 but closes nothing: the count never goes below 0."""
    openers, closers = brackets[0::2], brackets[1::2]
    if backwards:
        openers, closers = closers, openers
    pattern = _marks_pattern(brackets + marks)
    stop = len(code) if stop is None else stop
    depth = 0
    for m in _backwards(pattern, code, start, stop) if backwards else pattern.finditer(code, start, stop):
        ch = m.group()
        if ch in openers:
            yield m.start(), ch, depth
            depth += 1
        elif ch in closers:
            if depth == 0 and not stray:
                yield m.start(), ch, -1
                continue
            depth -= 1
            yield m.start(), ch, depth
        else:
            yield m.start(), ch, depth


def _backwards(pattern: re.Pattern, code: str, start: int, stop: int) -> Iterator[re.Match]:
    """The matches of a one-character `pattern` in code[start:stop], last first, read in windows
    that double from the end: a walk that stops near `stop` reads only that far."""
    width = 256
    while stop > start:
        low = max(start, stop - width)
        yield from reversed(list(pattern.finditer(code, low, stop)))
        stop, width = low, width * 2


def opening(code: str, end: int, brackets: str = "()") -> int | None:
    """Where the bracket that the closer at code[end] closes opens (counting the brackets of
    `brackets` only), or None where nothing in code[:end] opens it."""
    for i, _, depth in levels(code, 0, end + 1, brackets=brackets, backwards=True):
        if depth == 0 and i != end:
            return i
    return None


def owed(code: str, pairs: dict[str, str], owing: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    """The closers still owed after reading `code` (comments and strings already blanked) from a
    state that owed `owing` (outermost first); None where a bracket closes out of order or closes
    one that nothing opened."""
    stack, closers = list(owing), set(pairs.values())
    for ch in _marks_pattern("".join(pairs) + "".join(pairs.values())).findall(code):
        if ch in pairs:
            stack.append(pairs[ch])
        elif ch in closers and (not stack or stack.pop() != ch):
            return None
    return tuple(stack)


def balanced(code: str) -> bool:
    """Brackets of `code` (comments and strings aside) close in order and all close."""
    return owed(COMMENT_OR_STRING.sub(" ", code), PAIRS) == ()
