"""FastTextDocument applies an editor's incremental changes exactly as pygls' TextDocument
does, in every encoding, without pygls' Python loop over the lines."""

from __future__ import annotations

import random
import time

import pytest
from lsprotocol import types
from pygls.workspace import PositionCodec, TextDocument

from dice_lsp.lsp.lsp_text import FastPositionCodec, FastTextDocument

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


def test_a_keystroke_in_a_file_of_165000_lines_costs_less_than_in_pygls():
    lines = 165_000  # the 5 MB load-test file's size
    kinds = ((TextDocument, PositionCodec()), (FastTextDocument, FastPositionCodec()))
    documents = {kind: kind("file:///big.cu", source="int a = 1; // line\n" * lines, version=1, position_codec=codec)
                 for kind, codec in kinds}
    # Rounds that take turns, each kind's best round kept: a busy machine slows a round of
    # either, not the best of five of one.
    seconds = {kind: float("inf") for kind in documents}
    for _ in range(5):
        for kind, document in documents.items():
            started = time.perf_counter()
            for _ in range(5):
                document.apply_change(change((lines // 2, 3), (lines // 2, 3), "z"))
            seconds[kind] = min(seconds[kind], time.perf_counter() - started)
    for document in documents.values():
        assert document.lines[lines // 2] == "int" + "z" * 25 + " a = 1; // line\n"
    # About 1.8x here (what is left is splitting the text into lines, which both do for the
    # position codec).
    assert seconds[FastTextDocument] < seconds[TextDocument] * 0.8, seconds
