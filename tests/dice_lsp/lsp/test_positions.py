"""FastPositionCodec gives pygls' answers for every position, in every encoding, without a
Python loop over the characters of a line."""

from __future__ import annotations

import random
import time

import pytest
from lsprotocol import types
from pygls.workspace import PositionCodec

from dice_lsp.lsp.lsp_text import FastPositionCodec

ENCODINGS = [types.PositionEncodingKind.Utf16, types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf32]
# ASCII, 2- and 3-byte characters, one beyond the BMP (two UTF-16 units), line ends, and lone
# surrogate halves (which the framing layer replaces, but the codec must not trip on).
PIECES = ["a", "é", "中", "\U0001F600", "\r\n", "\n", " ", "\ud800", "\udc00"]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_same_answers_as_pygls(encoding):
    rng = random.Random(7)
    slow, fast = PositionCodec(encoding), FastPositionCodec(encoding)
    for _ in range(1500):
        line = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
        lines = [line, "x"]
        assert fast.client_num_units(line) == slow.client_num_units(line)
        for character in range(40):
            expected = slow.position_from_client_units(lines, types.Position(0, character))
            got = fast.position_from_client_units(lines, types.Position(0, character))
            assert (got.line, got.character) == (expected.line, expected.character), (repr(line), character)
        for character in range(len(line) + 3):
            position = types.Position(0, character)
            assert fast.position_to_client_units(lines, position) == slow.position_to_client_units(lines, position)
        past = types.Position(5, 1)
        assert fast.position_from_client_units(lines, past) == slow.position_from_client_units(lines, past)
        assert fast.position_to_client_units(lines, past) == slow.position_to_client_units(lines, past)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_6_mb_line_takes_milliseconds(encoding):
    line = "int a = 1; " * 580_000 + "é"  # not ASCII: the slow case
    codec = FastPositionCodec(encoding)
    started = time.perf_counter()
    for _ in range(5):
        codec.position_from_client_units([line], types.Position(0, 6_000_000))
        codec.position_to_client_units([line], types.Position(0, 6_000_000))
    assert (time.perf_counter() - started) / 5 < 0.3  # pygls' own codec takes 1.7 s here
