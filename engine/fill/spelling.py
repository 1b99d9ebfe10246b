"""Fills spelt the way their file spells things.

The small model often writes the right statement in another spelling than the file around
the selection: `blockIdx.x * blockDim.x + threadIdx.x` in a file that writes
`blockDim.x * blockIdx.x + threadIdx.x`, `a[i] = a[i] * 2;` in a file of `x *= v;` updates,
`int i = ...;` where the file declares the same kind of value as
`const int j = static_cast<int>(...);`. `respelled` rewrites a candidate into the file's
spelling, from what the text around the selection (prefix and suffix) already writes:

- an expression the file writes too, the same up to the order of the operands of `*` and `+`
  (and spacing), is written as the file writes it (`blockDim.x*blockIdx.x`);
- the operands of a `*` or `+` are put in the order the file puts operands of that kind in,
  a thread coordinate `.x`, `.y` or `.z` of the same built-in counting as the same kind
  (`blockDim.y * blockIdx.y` in a file of `blockDim.x * blockIdx.x`); a swap that would change
  how a chain associates (`a + b + c` to `c + a + b`) is not made;
- `x = x OP e;` becomes `x OP= e;` where the file writes more compound assignments than
  `x = x OP e` ones, and `x OP= e;` becomes `x = x OP e;` where it writes more of the latter
  (only where `x` has no call or `++`/`--` in it, and `e` needs no brackets);
- a one-name declaration `T name = e;` takes the qualifiers (`const`) and the cast around its
  value (`static_cast<T>(...)` to its own type) of a declaration in the file of the same type
  (const aside) whose value is `e` up to operand order and thread coordinate, the name and `e`
  kept; `const` only where the code after does not assign the name.

Where the file says nothing on one of these (no `*` or `+` of that kind of operands, no update,
no declaration of that type and value kind), the spelling CUDA code writes most decides
(`engine/spelling_prior.json`, counted by scripts/spelling_prior.py on the built-in model's
corpus, code by other authors only): `blockIdx.x * blockDim.x + threadIdx.x`, `i + 1`, `x *= e;`,
`int i = ...` for a global thread index. A prior's choice needs PRIOR_SHARE of the corpus's uses
of its kind; on the held-out packages, which it never read, 86% of the operand orders, 84% of the
updates and 88% of the declarations where it chooses are written as it would write them.

Each rewrite is the same statement in another spelling (apart from the `const` and the cast,
which copy a declaration the file has or the corpus writes most); nothing is rewritten where
neither the file nor the prior says which.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from engine.fill.source import balanced, code_only, squeezed, word

TOKEN = re.compile(r"""
    (?P<skip>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<str>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
  | (?P<num>0[xX][0-9a-fA-F]+[uUlL]*|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?[fFuUlL]*)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<op><<=|>>=|->|::|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|[-+*/%&|^<>=!~?:;,.()\[\]{}#])
  | (?P<other>.)""", re.VERBOSE | re.DOTALL)
BINARY = {"*": 10, "/": 10, "%": 10, "+": 9, "-": 9, "<<": 8, ">>": 8, "<": 7, "<=": 7, ">": 7, ">=": 7,
          "==": 6, "!=": 6, "&": 5, "^": 4, "|": 3, "&&": 2, "||": 1}
COMMUTATIVE = ("*", "+")
COMPOUND = ("+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>")
CASTS = ("static_cast", "reinterpret_cast", "const_cast", "dynamic_cast")
KEYWORDS = frozenset("return if else for while do switch case sizeof new delete goto using typedef namespace".split())
NOT_OPERANDS = KEYWORDS | frozenset("""const volatile unsigned signed void bool char short int long float double auto
struct static extern __shared__ __restrict__""".split())   # a type's words: `float *p` is no product
CLOSE = {"(": ")", "[": "]", "{": "}"}
PRIOR_FILE = Path(__file__).parents[1] / "spelling_prior.json"  # package data of engine/
PRIOR_SHARE = 0.6   # the share of the corpus's uses a prior's choice needs


@functools.cache
def prior() -> dict:
    """The corpus's counts (scripts/spelling_prior.py); none where the file is missing or unreadable
    (a source checkout without it still fills, in the file's spelling only)."""
    try:
        return json.loads(PRIOR_FILE.read_text())
    except (OSError, ValueError):
        return {"orders": {}, "updates": {}, "declarations": {}}


def prior_choice(counts: dict[str, int]) -> str | None:
    """The form with at least PRIOR_SHARE of `counts`, if one has."""
    total = sum(counts.values())
    if not total:
        return None
    form, uses = max(counts.items(), key=lambda item: item[1])
    return form if uses >= PRIOR_SHARE * total else None


@dataclass
class Node:
    """An expression: an operand (`op` empty: a name, a call, an index, a bracketed expression,
    a unary operator's) or a binary operator's (`op`, `left`, `right`). `start`, `end`: its
    span in the text parsed; `key`: its tokens with whitespace aside, the operands of `*`
    and `+` sorted; `kind`: the same with thread coordinates (`.x`, `.y`, `.z`) as one."""
    start: int
    end: int
    key: str
    kind: str
    op: str = ""
    left: "Node | None" = None
    right: "Node | None" = None
    inner: list["Node"] = field(default_factory=list)   # the expressions in an operand's brackets


def code_tokens(text: str) -> list[str]:
    """`text`'s C tokens, whitespace aside (comments kept): `a*b` and `a * b` are the same."""
    return [m.group() for m in TOKEN.finditer(text) if not m.group().isspace()]


def _tokens(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(), m.start(), m.end()) for m in TOKEN.finditer(text) if m.lastgroup != "skip"]


class _Parser:
    """Precedence climbing over the binary operators of BINARY; anything else it does not know
    ends an expression (a tolerant reader: types, keywords and statements are skipped)."""

    def __init__(self, text: str):
        self.text = text
        self.toks = _tokens(text)
        # Each bracket's closing one (any kind closes any: a tolerant reader), found once: a
        # broken file's thousands of unclosed brackets would each rescan the rest of the text.
        self.closing: dict[int, int] = {}
        opened: list[int] = []
        for j, (t, _, _) in enumerate(self.toks):
            if t in CLOSE:
                opened.append(j)
            elif t in CLOSE.values() and opened:
                self.closing[opened.pop()] = j

    def expressions(self, i: int, end: int) -> list[Node]:
        """Every maximal expression in tokens i..end."""
        found = []
        while i < end:
            node, j = self.expression(i, end, 1)
            if node is not None:
                found.append(node)
            i = max(j, i + 1)
        return found

    def expression(self, i: int, end: int, level: int) -> tuple[Node | None, int]:
        left, i = self.operand(i, end)
        if left is None:
            return None, i
        while i < end and BINARY.get(self.toks[i][0], 0) >= level:
            op = self.toks[i][0]
            right, j = self.expression(i + 1, end, BINARY[op] + 1)
            if right is None:
                break
            if op in COMMUTATIVE:
                key = op + "{" + "|".join(sorted((left.key, right.key))) + "}"
                kind = op + "{" + "|".join(sorted((left.kind, right.kind))) + "}"
            else:
                key = op + "{" + left.key + "|" + right.key + "}"
                kind = op + "{" + left.kind + "|" + right.kind + "}"
            left, i = Node(left.start, right.end, key, kind, op, left, right), j
        return left, i

    def _closing(self, i: int, end: int) -> int:
        j = self.closing.get(i, -1)
        return j if j < end else -1

    def operand(self, i: int, end: int) -> tuple[Node | None, int]:
        if i >= end:
            return None, i
        t, start, _ = self.toks[i]
        inner: list[Node] = []
        if t in ("-", "+", "!", "~", "*", "&", "++", "--"):
            node, j = self.operand(i + 1, end)
            if node is None:
                return None, j
            return Node(start, node.end, t + node.key, t + node.kind, inner=[node]), j
        if t == "(":
            close = self._closing(i, end)
            if close < 0:
                return None, i + 1
            inner = self.expressions(i + 1, close)
            j = close + 1
            if j < end and (re.match(r"[A-Za-z_\d(]", self.toks[j][0]) and self.toks[j][0] not in KEYWORDS):
                # A cast, `(float)a`: one operand with what it casts (not `(float)` then `a * b`).
                node, j = self.operand(j, end)
                if node is None:
                    return None, j
                inner.append(node)
                return Node(start, node.end, *self._key(i, j, inner), inner=inner), j
        elif re.match(r"[A-Za-z_\d'\"]|\.\d", t) and t not in NOT_OPERANDS:
            j = i + 1
            if t in CASTS and j < end and self.toks[j][0] == "<":
                close = next((k for k in range(j, end) if self.toks[k][0] in (">", ";", "{", "}")), end)
                if close < end and self.toks[close][0] == ">":
                    j = close + 1
        else:
            return None, i
        while j < end:   # postfix: members, calls, indexing, ++/--
            t = self.toks[j][0]
            if t in (".", "->", "::") and j + 1 < end and re.match(r"[A-Za-z_]", self.toks[j + 1][0]):
                j += 2
            elif t in ("(", "["):
                close = self._closing(j, end)
                if close < 0:
                    break
                inner += self.expressions(j + 1, close)
                j = close + 1
            elif t in ("++", "--"):
                j += 1
            else:
                break
        key, kind = self._key(i, j, inner)
        return Node(start, self.toks[j - 1][2], key, kind, inner=inner), j

    def _key(self, i: int, j: int, inner: list[Node]) -> tuple[str, str]:
        """An operand's key and kind (Node): its tokens i..j, each expression in its brackets
        by its own key (so `f(b * a)` is `f(a * b)`)."""
        parts, kinds, k = [], [], i
        for node in inner:
            while k < j and self.toks[k][1] < node.start:
                parts.append(self.toks[k][0])
                kinds.append(self.toks[k][0])
                k += 1
            parts.append(node.key)
            kinds.append(node.kind)
            while k < j and self.toks[k][1] < node.end:
                k += 1
        parts += [tok[0] for tok in self.toks[k:j]]
        kinds += [tok[0] for tok in self.toks[k:j]]
        return " ".join(parts), re.sub(r"\b(threadIdx|blockIdx|blockDim|gridDim) \. [xyz]\b", r"\1.#", " ".join(kinds))


def _nodes(node: Node):
    """`node` and every expression in it (without recursion: a long `a + b + ...` is deep)."""
    stack = [node]
    while stack:
        node = stack.pop()
        yield node
        stack += [child for child in (node.left, node.right, *node.inner) if child is not None]


@dataclass
class FileSpelling:
    """What the text around a selection writes: each expression's spellings (by key), the
    operand order of `*` and `+` by kind (the kind of the first operand, counted), compound
    against spelt-out updates, and its one-name declarations."""
    spellings: dict[str, Counter]
    orders: dict[str, Counter]
    compound: int
    spelt_out: int
    declarations: list[tuple[str, str, str, str]]   # (qualifiers, type, cast, the value's kind)


DECLARATION = re.compile(
    r"(?:^|(?<=[;{}]))\s*(?P<quals>(?:(?:const|volatile|register)\s+)*)"
    r"(?P<type>(?:(?:unsigned|signed|long|short)\s+)*[A-Za-z_]\w*(?:\s*::\s*\w+)*)\s+"
    r"(?P<name>[A-Za-z_]\w*)\s*=(?!=)\s*(?P<value>[^;{}]*);", re.MULTILINE)


def _cast_of(value: str, kind: str) -> tuple[str, str]:
    """(`static_cast<T>(`, inner) where `value` is wholly a cast to `kind`, else ("", value)."""
    m = re.fullmatch(r"((?:static_cast\s*<\s*([^<>;]+?)\s*>\s*)|\(\s*([^()]+?)\s*\)\s*)\((.*)\)", value.strip(),
                     re.DOTALL)
    if m and " ".join((m.group(2) or m.group(3) or "").split()) == kind and balanced(m.group(4)):
        return m.group(1), m.group(4)
    return "", value


def _one(text: str) -> Node | None:
    """The expression `text` is, if it is one."""
    p = _Parser(text)
    found = p.expressions(0, len(p.toks))
    return found[0] if len(found) == 1 and not text[:found[0].start].strip() and not text[found[0].end:].strip() \
        else None


@functools.lru_cache(maxsize=16)   # asked for each candidate of a fill
def file_spelling(prefix: str, suffix: str) -> FileSpelling:
    """What the code around a selection writes (FileSpelling); nothing where its brackets
    nest deeper than Python recurses (kept in the cache too: not read again per candidate)."""
    try:
        return _file_spelling(prefix, suffix)
    except RecursionError:
        return FileSpelling({}, {}, 0, 0, [])


def _file_spelling(prefix: str, suffix: str) -> FileSpelling:
    # Runs of whitespace as one: the patterns below then never try the ways of splitting a run.
    code = squeezed(code_only(prefix) + "\n" + code_only(suffix))
    parser = _Parser(code)
    spellings: dict[str, Counter] = {}
    orders: dict[str, Counter] = {}
    for top in parser.expressions(0, len(parser.toks)):
        for node in _nodes(top):
            if node.op:
                spellings.setdefault(node.key, Counter())[" ".join(code[node.start:node.end].split())] += 1
                if node.op in COMMUTATIVE:
                    orders.setdefault(node.kind, Counter())[node.left.kind] += 1
    compound = len(re.findall(r"(?<![-+*/%&|^<>=!])(?:[-+*/%&|^]|<<|>>)=(?!=)", code))
    spelt_out = 0
    for m in re.finditer(r"(?:^|(?<=[;{}]))\s*([^;{}=]+?)\s*=(?!=)([^;{}]*);", code):
        target = " ".join(t for t, _, _ in _tokens(m.group(1)))
        value = _one(m.group(2))
        if value and value.op in COMPOUND and target and target in (_text_key(m.group(2), value.left),
                                                                     _text_key(m.group(2), value.right)):
            spelt_out += 1
    declarations = []
    for m in DECLARATION.finditer(code):
        kind = " ".join(m.group("type").split())
        if kind in KEYWORDS:
            continue
        cast, inner = _cast_of(m.group("value"), kind)
        value = _one(inner)
        if value is not None:
            declarations.append((" ".join(m.group("quals").split()), kind, " ".join(cast.split()), value.kind))
    return FileSpelling(spellings, orders, compound, spelt_out, declarations)


def _text_key(text: str, node: Node | None) -> str:
    return " ".join(t for t, _, _ in _tokens(text[node.start:node.end])) if node else ""


# What a reordered expression must hold (a thread coordinate or a number) and must not (a
# string, `sizeof`, a type's word as in a function-style cast `float(i)`): operands of `*` and
# `+` commute for numbers, not for strings, matrices or other overloaded types.
ARITHMETIC = re.compile(r"\b(?:threadIdx|blockIdx|blockDim|gridDim)\b|(?<![\w.])\.?\d")
NOT_ARITHMETIC = re.compile(r"[\"']|\b(?:" + "|".join(sorted(NOT_OPERANDS)) + r")\b")


def _reorderable(text: str) -> bool:
    return bool(ARITHMETIC.search(text)) and not NOT_ARITHMETIC.search(text)


def _render(text: str, node: Node, spelling: FileSpelling) -> str:
    """`node` of `text` in the file's spelling."""
    reorder = bool(node.op) and _reorderable(text[node.start:node.end])
    written = spelling.spellings.get(node.key) if reorder else None
    if written:
        best, count = written.most_common(1)[0]
        if count > sum(written.values()) - count:   # the file's commoner spelling
            return best
    if node.op:
        left, right = _render(text, node.left, spelling), _render(text, node.right, spelling)
        between = text[node.left.end:node.right.start]
        if node.op in COMMUTATIVE and reorder and node.left.kind != node.right.kind \
                and not (node.left.op and BINARY[node.left.op] == BINARY[node.op]):
            order = spelling.orders.get(node.kind)
            if order:
                first, count = order.most_common(1)[0]
                first = first if count > sum(order.values()) - count else None
            else:   # the file writes no such pair: the corpus's commoner order
                first = prior_choice(prior()["orders"].get(node.kind, {}))
            if first == node.right.kind:
                return right + between + left
        return left + between + right
    out, at = [], node.start
    for child in node.inner:
        out.append(text[at:child.start])
        out.append(_render(text, child, spelling))
        at = child.end
    out.append(text[at:node.end])
    return "".join(out)


# A C cast before a unary operator, `(float)-x * s`: read as `(float) - x * s`, where a swap
# would move the cast to the other operand; such fills are left as drawn.
CAST_BEFORE_UNARY = re.compile(r"\(\s*(?:(?:const|volatile|unsigned|signed|long|short|struct)\s+)*[A-Za-z_]\w*"
                               r"(?:\s*::\s*\w+)*\s*\**\s*\)\s*(?:[-+!~*&]|\+\+|--)")


def respelled(fill: str, prefix: str, suffix: str) -> str:
    """`fill` in the spelling of the text around it (the module doc); `fill` itself where
    that says nothing or it is not code this reads (a preprocessor line: a macro's body
    expands its arguments unbracketed; a cast before a unary operator)."""
    if not fill.strip() or re.search(r"^\s*#", fill, re.MULTILINE) or CAST_BEFORE_UNARY.search(fill):
        return fill
    try:
        return _respelled(fill, prefix, suffix)
    except RecursionError:   # brackets nested deeper than Python recurses: as drawn
        return fill


def _respelled(fill: str, prefix: str, suffix: str) -> str:
    spelling = file_spelling(prefix, suffix)
    parser = _Parser(fill)
    out, at = [], 0
    for node in parser.expressions(0, len(parser.toks)):
        out.append(fill[at:node.start])
        out.append(_render(fill, node, spelling))
        at = node.end
    out.append(fill[at:])
    text = "".join(out)
    return _declaration(_update(text, spelling), spelling, suffix)


# What an update's target may be: a name with members and indices, nothing before it (a
# keyword, a label, a comma expression) and no call or ++/-- in it (evaluated once either way).
TARGET = re.compile(r"[A-Za-z_]\w*(?:\s*(?:\.|->)\s*[A-Za-z_]\w*|\s*\[[^\[\]();]*\])*")


def _target(text: str) -> bool:
    return bool(TARGET.fullmatch(text.strip())) and text.split()[0].split("[")[0] not in NOT_OPERANDS


def _update(text: str, spelling: FileSpelling) -> str:
    """`x = x OP e;` and `x OP= e;` as the file writes its updates (the module doc)."""
    if spelling.compound or spelling.spelt_out:
        style = "compound" if spelling.compound > spelling.spelt_out else \
            "spelt_out" if spelling.spelt_out > spelling.compound else None
    else:   # the file writes no update: the corpus's commoner kind
        style = prior_choice(prior()["updates"])
    m = re.fullmatch(r"(\s*)([^;{}=]+?)(\s*)=(?!=)(\s*)([^;{}]*?)(\s*;\s*)", text)
    if m and style == "compound" and _target(m.group(2)):
        target = " ".join(t for t, _, _ in _tokens(m.group(2)))
        value = _one(m.group(5))
        # Only `x = x OP e` (not `x = e OP x`: `s = p + s` prepends where s is a string).
        if value and value.op in COMPOUND and _text_key(m.group(5), value.left) == target:
            rest = m.group(5)[value.right.start:value.right.end]
            return f"{m.group(1)}{m.group(2)}{m.group(3)}{value.op}={m.group(4)}{rest}{m.group(6)}"
    m = re.fullmatch(r"(\s*)([^;{}=]+?)(\s*)((?:[-+*/%&|^]|<<|>>))=(?!=)(\s*)([^;{}]*?)(\s*;\s*)", text)
    if m and style == "spelt_out" and _target(m.group(2)):
        target, op = m.group(2), m.group(4)
        value = _one(m.group(6))
        if value and not value.op:
            return f"{m.group(1)}{target}{m.group(3)}={m.group(5)}{target} {op} {m.group(6)}{m.group(7)}"
    return text


def _declaration(text: str, spelling: FileSpelling, suffix: str) -> str:
    """`T name = e;` with the qualifiers and cast of the file's declaration of its kind (the
    module doc)."""
    m = DECLARATION.fullmatch(text.strip())
    if not m or m.group("type") in KEYWORDS:
        return text
    kind = " ".join(m.group("type").split())
    quals = " ".join(m.group("quals").split())
    cast, inner = _cast_of(m.group("value"), kind)
    value = _one(inner)
    if value is None or quals not in ("", "const"):   # volatile or register: kept as drawn
        return text
    name = word(m.group("name"))
    # Whether the code after may change the name: assigned, incremented, its address taken or
    # a reference bound to it, a member or element written, read into, or passed to a call (which may
    # take it by reference: std::swap, atomicAdd(&x), asm outputs). Then no `const`.
    changed = re.search(name + r"\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|(?:\+\+|--)\s*" + name + "|" + name
                        + r"\s*(?:\+\+|--|\.|->|\[)|&\s*" + name + r"|>>\s*" + name + r"|[(,]\s*" + name
                        + r"\s*[,)]|&\s*[A-Za-z_]\w*\s*=\s*" + name, code_only(suffix))
    forms = Counter((q, c) for q, k, c, v in spelling.declarations if k == kind and v == value.kind)
    from_file = bool(forms)
    if not from_file:   # the file declares nothing of this kind: the corpus's commoner form
        counts = prior()["declarations"].get(f"{kind} @ {value.kind}", {})
        forms = Counter({tuple(form.split("|", 1)): n for form, n in counts.items()})
    # Only `const` copied (not volatile or register), and not onto a pointer or reference
    # (`const float* p` is a pointer to const).
    forms = Counter({(q, c): n for (q, c), n in forms.items()
                     if q in ("", "const") and not (q == "const" and (changed or re.search(r"[*&]", kind)))})
    if not forms:
        return text
    (file_quals, file_cast), count = forms.most_common(1)[0]
    enough = count > sum(forms.values()) - count if from_file else count >= PRIOR_SHARE * sum(forms.values())
    if not enough or (file_quals, file_cast) == (quals, " ".join(cast.split())):
        return text
    body = inner.strip()
    value_text = f"{file_cast}({body})" if file_cast else body
    lead = text[:len(text) - len(text.lstrip())]
    trail = text[len(text.rstrip()):]
    return f"{lead}{file_quals + ' ' if file_quals else ''}{kind} {m.group('name')} = {value_text};{trail}"
