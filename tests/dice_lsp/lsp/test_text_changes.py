"""FastTextDocument applies an editor's incremental changes exactly as pygls' TextDocument
does, in every encoding, without pygls' Python loop over the lines."""

from __future__ import annotations

import random

import pytest
from lsprotocol import types
from pygls.workspace import PositionCodec, TextDocument

from dice_lsp.lsp.lsp_text import FastPositionCodec, FastTextDocument

from .python_work import python_lines

PIECES = ["a", "é", "中", "\U0001F600", "\r\n", "\n", "\r", " "]
INSERTS = ["", "x", "é\n", "\U0001F600", "ab\r\ncd"]


def change(start: tuple[int, int], end: tuple[int, int], text: str) -> types.TextDocumentContentChangePartial:
    # A fresh object each time: pygls' codec writes into the positions it is given.
    return types.TextDocumentContentChangePartial(range=types.Range(types.Position(*start), types.Position(*end)), text=text)


@pytest.mark.parametrize("encoding", [types.PositionEncodingKind.Utf16, types.PositionEncodingKind.Utf8,
                                      types.PositionEncodingKind.Utf32])
def test_the_same_text_as_pygls_after_every_change(encoding):
    rng = random.Random(11)
    for _ in range(1500):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 30)))
        slow = TextDocument("file:///k.cu", source=text, version=1, position_codec=PositionCodec(encoding))
        fast = FastTextDocument("file:///k.cu", source=text, version=1, position_codec=FastPositionCodec(encoding))
        for _ in range(4):
            lines = max(1, len(slow.lines))
            # Ranges past the end, reversed, and past a line's end are all in the draw.
            start = (rng.randint(0, lines + 1), rng.randint(0, 8))
            end = (rng.randint(0, lines + 1), rng.randint(0, 8))
            inserted = rng.choice(INSERTS)
            slow.apply_change(change(start, end, inserted))
            fast.apply_change(change(start, end, inserted))
            assert fast.source == slow.source, (repr(text), start, end, repr(inserted))


def test_a_keystroke_runs_no_python_loop_over_the_lines():
    """A keystroke in the 5 MB load-test file (165,000 lines) took pygls' loop over every line;
    here the Python it runs is the same for 1,000 lines and for 165,000 (counted, not timed:
    python_work says why)."""

    def keystroke_lines(kind, codec, lines: int) -> int:
        document = kind("file:///big.cu", source="int a = 1; // line\n" * lines, version=1, position_codec=codec)
        count = python_lines(lambda: document.apply_change(change((lines // 2, 3), (lines // 2, 3), "z")))
        assert document.lines[lines // 2] == "intz a = 1; // line\n"
        return count

    fast_small, fast_big = (keystroke_lines(FastTextDocument, FastPositionCodec(), n) for n in (1_000, 165_000))
    slow_small, slow_big = (keystroke_lines(TextDocument, PositionCodec(), n) for n in (1_000, 165_000))
    assert fast_big == fast_small, (fast_small, fast_big)
    assert slow_big > 100 * slow_small, (slow_small, slow_big)  # pygls: lines of Python per line of text
    assert fast_big < slow_big / 1000
