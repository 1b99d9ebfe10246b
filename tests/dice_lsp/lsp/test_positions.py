"""FastPositionCodec gives pygls' answers for every position, in every encoding, without a
Python loop over the characters of a line."""

from __future__ import annotations

import random

import pytest
from lsprotocol import types
from pygls.workspace import PositionCodec

from dice_lsp.lsp.lsp_text import FastPositionCodec

from .python_work import python_lines

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
def test_a_6_mb_line_runs_no_python_loop_over_its_characters(encoding):
    """pygls' codec took 1.7 s on a 6 MB line, a Python loop over its characters; here the
    Python run is the same for a line of 60 characters and one of 6,000,000 (counted, not
    timed: python_work says why), and the answers are pygls'."""
    lines = {n: "int a = 1; " * n + "é" for n in (5, 500, 580_000)}  # not ASCII: the slow case
    fast, slow = FastPositionCodec(encoding), PositionCodec(encoding)

    def both_ways(codec, line: str):
        far = types.Position(0, len(line) - 3)
        return codec.position_from_client_units([line], far), codec.position_to_client_units([line], far)

    for n in (5, 500):
        assert both_ways(fast, lines[n]) == both_ways(slow, lines[n])
    fast_lines = {n: python_lines(lambda: both_ways(fast, line)) for n, line in lines.items()}
    assert len(set(fast_lines.values())) == 1, fast_lines
    slow_lines = {n: python_lines(lambda: both_ways(slow, lines[n])) for n in (5, 500)}
    assert slow_lines[500] > 10 * slow_lines[5], slow_lines  # pygls: Python per character
