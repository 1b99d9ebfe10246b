"""Offsets into a text from (line, column) pairs and back, counting columns in characters.

The profiler and the CLI speak 0- or 1-based line/column in characters; the server
converts LSP positions (UTF-16 by default) with pygls' own codec before it gets here.
"""

from __future__ import annotations


def line_starts(text: str) -> list[int]:
    """Offset of the first character of every line ("\\n" separated)."""
    starts = [0]
    pos = text.find("\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = text.find("\n", pos + 1)
    return starts


def line_count(text: str) -> int:
    """Lines as editors and `wc -l` count them: a final newline ends the last line, it does
    not start another."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def offset_at(text: str, line: int, column: int, starts: list[int] | None = None) -> int:
    """Offset of 0-based (line, column); raises ValueError outside the text.

    A column past the end of its line is clamped to the line end, as LSP positions are.
    Pass the text's line_starts when asking many times: computing them is linear in the text.
    """
    starts = line_starts(text) if starts is None else starts
    if line < 0 or column < 0 or line >= len(starts):
        lines = line_count(text)
        raise ValueError(f"position {line + 1}:{column + 1} is outside the file ({lines} line{'' if lines == 1 else 's'})")
    line_end = starts[line + 1] - 1 if line + 1 < len(starts) else len(text)
    return min(starts[line] + column, line_end)


def position_at(text: str, offset: int) -> tuple[int, int]:
    """0-based (line, column) of an offset."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset)
    return line, offset - (text.rfind("\n", 0, offset) + 1)


def offset_at_point(text: str, point: tuple[int, int], starts: list[int] | None = None) -> int:
    """Offset of a tree-sitter point: 0-based line and a column counted in UTF-8 bytes."""
    line, byte_column = point
    start = offset_at(text, line, 0, starts)
    line_text = text[start : start + byte_column]  # a character is at least one byte
    if line_text.isascii():
        return start + min(byte_column, len(line_text.split("\n", 1)[0]))
    end = text.find("\n", start)
    line_text = text[start : end if end != -1 else len(text)]
    return start + len(line_text.encode()[:byte_column].decode(errors="ignore"))
