"""Fill-in-the-middle training rows cut from the corpus of scripts/build_corpus.py.

A middle span is cut out of a file's text and the three parts are tokenized separately,
exactly as `engine.decoding.prompts.fim_prompt(prefix, suffix)` + middle + `<|endoftext|>` is at
inference (the special tokens split the prompt, so each part is encoded on its own):

    <|fim_suffix|> suffix <|fim_prefix|> prefix <|fim_middle|> middle <|endoftext|>

Span kinds, drawn like editor selections: one statement (a line without its indentation,
what `dice fill --range` of the README selects), an expression (the right-hand side of an
assignment, or the inside of a call's parentheses), the tail of a line, a few lines, a block
body (the lines between a `{` that ends a line and its `}`: loop bodies, if bodies, whole
function bodies).

The end of the span is marked: the middle is followed by <|endoftext|>, and the rest of its
last block is <|endoftext|> too (at inference the decoder fills the whole block in which the
answer ends, so the model learns that nothing follows the end). Every token carries a role
(ROLE_*), by which training/train.py weights the loss: the middle and its end token are what a
fill asks of the model, the context only teaches CUDA.

Examples are packed into rows of `seq_len` tokens. Each starts at a multiple of the block
size with positions from 0, as a prompt does at inference, and attends only to itself; the
context (suffix, prefix) is cut to fit the room left in the row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PAD_DOC = 1_000_000   # doc ids at or above this are padding (one per block)
CHARS_PER_TOKEN = 4   # generous: a context window of room * 4 characters fills room tokens
ROLE_CONTEXT, ROLE_MIDDLE, ROLE_END, ROLE_AFTER_END, ROLE_PAD = range(5)


@dataclass
class FimTokens:
    """The special token ids the format uses."""

    eos: int
    fim_prefix: int
    fim_middle: int
    fim_suffix: int

    @classmethod
    def from_tokenizer(cls, tokenizer) -> FimTokens:
        from engine.decoding.prompts import END_OF_TEXT, FIM_MIDDLE, FIM_PREFIX, FIM_SUFFIX

        ids = tokenizer.convert_tokens_to_ids([END_OF_TEXT, FIM_PREFIX, FIM_MIDDLE, FIM_SUFFIX])
        return cls(*ids)


@dataclass
class Batch:
    """Packed rows: ids [B, T]; doc [B, T] (which example; PAD_DOC and above: padding);
    pos [B, T] (position inside its example); role [B, T] (ROLE_*)."""

    ids: np.ndarray
    doc: np.ndarray
    pos: np.ndarray
    role: np.ndarray


@dataclass
class Span:
    file: int
    start: int   # character offsets of the middle
    end: int


class CorpusSplit:
    """One split as written by scripts/build_corpus.py (OUT/data/SPLIT_*)."""

    def __init__(self, folder: Path, split: str):
        self.texts: list[str] = json.loads((folder / f"{split}_texts.json").read_text())
        self.lines = np.load(folder / f"{split}_lines.npy")
        self.blocks = np.load(folder / f"{split}_blocks.npy")
        index = np.load(folder / f"{split}_files.npy")
        self.line_start = index[:, 0]
        self.line_end = np.append(index[1:, 0], len(self.lines))
        self.block_start = index[:, 1]
        self.block_end = np.append(index[1:, 1], len(self.blocks))

    def __len__(self) -> int:
        return len(self.texts)

    def file_lines(self, f: int) -> np.ndarray:
        """[L, 3] character offsets (start, first non-blank, end) of file f's lines."""
        return self.lines[self.line_start[f]:self.line_end[f]]

    def file_blocks(self, f: int) -> np.ndarray:
        """[K, 2] (opening line, closing line) of file f's blocks."""
        return self.blocks[self.block_start[f]:self.block_end[f]]


STATEMENT, EXPRESSION, LINE_TAIL, LINES, BLOCK_BODY = range(5)
SPAN_KINDS = np.array([0.35, 0.15, 0.05, 0.2, 0.25])   # drawn with these probabilities


def expression_span(line: str, rng: np.random.Generator) -> tuple[int, int] | None:
    """Offsets in `line` of an expression an editor user would select: the right-hand side
    of an assignment (up to its `;`), or the inside of a pair of parentheses."""
    choices = []
    eq = [k for k in range(1, len(line) - 1) if line[k] == "=" and line[k - 1] not in "=!<>+-*/%&|^"
          and line[k + 1] != "="]
    if eq:
        start = eq[0] + 1 + (line[eq[0] + 1] == " ")
        end = len(line.rstrip()) - line.rstrip().endswith(";")
        if end > start:
            choices.append((start, end))
    opened: list[int] = []
    for k, ch in enumerate(line):
        if ch == "(":
            opened.append(k)
        elif ch == ")" and opened:
            a = opened.pop()
            if k > a + 1:
                choices.append((a + 1, k))
    if not choices:
        return None
    return choices[rng.integers(len(choices))]


def random_span(data: CorpusSplit, f: int, rng: np.random.Generator) -> Span | None:
    """A random middle in file f, or None when the file has no span of the drawn kind."""
    lines = data.file_lines(f)
    content = np.nonzero(lines[:, 2] > lines[:, 1])[0]
    if len(content) == 0:
        return None
    kind = rng.choice(len(SPAN_KINDS), p=SPAN_KINDS)
    i = content[rng.integers(len(content))]
    if kind == STATEMENT:
        return Span(f, int(lines[i, 1]), int(lines[i, 2]))
    if kind == EXPRESSION:
        found = expression_span(data.texts[f][lines[i, 1]:lines[i, 2]], rng)
        if found is None:
            return None
        return Span(f, int(lines[i, 1]) + found[0], int(lines[i, 1]) + found[1])
    if kind == LINE_TAIL:                            # from a space to the end of the line
        text = data.texts[f][lines[i, 1]:lines[i, 2]]
        spaces = [k for k, ch in enumerate(text) if ch == " "]
        if not spaces:
            return None
        cut = int(lines[i, 1]) + spaces[rng.integers(len(spaces))] + 1
        return Span(f, cut, int(lines[i, 2]))
    if kind == LINES:
        a = rng.integers(len(content))
        b = min(len(content) - 1, a + rng.integers(1, 8))
        return Span(f, int(lines[content[a], 1]), int(lines[content[b], 2]))
    blocks = data.file_blocks(f)                     # a block body
    if len(blocks) == 0:
        return None
    opened, closed = blocks[rng.integers(len(blocks))]
    return Span(f, int(lines[opened + 1, 0]), int(lines[closed, 0]))


@dataclass
class Example:
    prefix: list[int]   # tokens of a window of text before the middle (cut on the left)
    middle: list[int]
    suffix: list[int]   # tokens of a window after it (cut on the right)


class FimSampler:
    """Draws FIM examples and packs them into rows."""

    MIN_CONTEXT = 16   # fewest context tokens an example gets

    def __init__(self, data: CorpusSplit, tokenizer, seq_len: int, block_size: int,
                 max_middle: int, seed: int):
        self.data = data
        self.special = FimTokens.from_tokenizer(tokenizer)
        self.encoder = tokenizer.backend_tokenizer   # the Rust tokenizer: batch encoding in threads
        self.seq_len = seq_len
        self.block_size = block_size
        self.max_middle = max_middle
        self.rng = np.random.default_rng(seed)
        self.pending: list[Example] = []
        # Files weighted by length, capped, so that long library headers do not crowd out
        # the many short kernels.
        sizes = np.array([len(t) for t in data.texts], dtype=np.float64)
        weight = np.minimum(sizes, 2 * seq_len * CHARS_PER_TOKEN)
        self.file_p = weight / weight.sum()
        # Generator.choice(n, p=file_p) draws searchsorted(cdf, random()) with this cdf, computed
        # anew on every call (~0.3 ms for 30 000 files): the same draws, computed once.
        self.file_cdf = self.file_p.cumsum()
        self.file_cdf /= self.file_cdf[-1]

    def draw(self, count: int) -> list[Example]:
        spans = []
        while len(spans) < count:
            f = int(self.file_cdf.searchsorted(self.rng.random(), side="right"))
            span = random_span(self.data, f, self.rng)
            if span is not None and span.end > span.start:
                spans.append(span)
        window = self.seq_len * CHARS_PER_TOKEN
        pieces = []
        for s in spans:
            text = self.data.texts[s.file]
            pieces += [text[max(0, s.start - window):s.start], text[s.start:s.end],
                       text[s.end:s.end + window]]
        enc = self.encoder.encode_batch(pieces, add_special_tokens=False)
        return [Example(enc[i].ids, enc[i + 1].ids, enc[i + 2].ids) for i in range(0, len(enc), 3)]

    def next_example(self) -> Example:
        if not self.pending:
            self.pending = self.draw(256)
        return self.pending.pop()

    def layout(self, ex: Example, room: int) -> np.ndarray | None:
        """The example's tokens with its context cut to fit `room`, or None if it cannot."""
        s = self.special
        budget = room - len(ex.middle) - 4 - self.block_size   # room for the end's block
        if len(ex.middle) > self.max_middle or budget < self.MIN_CONTEXT:
            return None
        n_suffix = min(len(ex.suffix), int(budget * self.rng.uniform(0.2, 0.5)))
        n_prefix = min(len(ex.prefix), budget - n_suffix)
        n_suffix = min(len(ex.suffix), budget - n_prefix)
        prefix = ex.prefix[len(ex.prefix) - n_prefix:]
        return np.array([s.fim_suffix, *ex.suffix[:n_suffix], s.fim_prefix, *prefix,
                         s.fim_middle, *ex.middle, s.eos], dtype=np.int64)

    def row(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        ids = np.full(self.seq_len, self.special.eos, dtype=np.int64)
        doc = np.full(self.seq_len, -1, dtype=np.int64)
        pos = np.zeros(self.seq_len, dtype=np.int64)
        role = np.full(self.seq_len, ROLE_PAD, dtype=np.int64)
        at, n, tries = 0, 0, 0
        while self.seq_len - at >= self.MIN_CONTEXT + 8 and tries < 8:
            ex = self.next_example()
            tokens = self.layout(ex, self.seq_len - at)
            tries += 1
            if tokens is None:
                continue
            # The example runs to the end of the block its <|endoftext|> is in (ids stay EOS
            # there), and the next one starts on a block boundary, as a prompt does.
            length = -(-len(tokens) // self.block_size) * self.block_size
            ids[at:at + len(tokens)] = tokens
            doc[at:at + length] = n
            pos[at:at + length] = np.arange(length)
            end = at + len(tokens) - 1
            role[at:end - len(ex.middle)] = ROLE_CONTEXT
            role[end - len(ex.middle):end] = ROLE_MIDDLE
            role[end] = ROLE_END
            role[end + 1:at + length] = ROLE_AFTER_END
            at += length
            n += 1
        # Padding: its own "example" per block, so that every query attends to something.
        pad = doc < 0
        doc[pad] = PAD_DOC + np.arange(self.seq_len)[pad] // self.block_size
        return ids, doc, pos, role

    def batch(self, rows: int) -> Batch:
        ids, doc, pos, role = zip(*(self.row() for _ in range(rows)))
        return Batch(np.stack(ids), np.stack(doc), np.stack(pos), np.stack(role))

    def state(self) -> dict:
        return {"rng": self.rng.bit_generator.state, "pending": self.pending}

    def restore(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.pending = state["pending"]
