"""The type a name is used as, for a selection that must declare it: what the code after the
selection does with the name (`usage_type`: an index is an integer, a flag set to `true` a
bool, an argument of `expf` a float), and the declarations written from that without the model
(`uninitialized_declaration`, `initialized_declaration`).
"""

from __future__ import annotations

import functools
import re
from collections import Counter

from engine.fill.declarations import NOT_TYPES, value_types
from engine.fill.source import code_only, levels, opening, squeezed, word

# Type families, for the type a needed name is used as (usage_type).
INTEGER_TYPES = frozenset("""int unsigned signed long short char size_t ptrdiff_t int8_t int16_t int32_t int64_t
uint8_t uint16_t uint32_t uint64_t uint index_t""".split())


FLOAT_TYPES = frozenset("float double half __half __nv_bfloat16".split())


# Functions whose arguments are floating-point values.
FLOAT_FUNCTIONS = frozenset("""sqrt sqrtf rsqrt rsqrtf exp expf exp2f expm1f log logf log2f log1pf log10f pow powf
sin sinf cos cosf tan tanf tanh tanhf erf erff fabs fabsf fmax fmaxf fmin fminf fma fmaf floor floorf ceil
ceilf round roundf trunc truncf fmod fmodf __expf __logf __powf __fdividef __saturatef __float2half
__float2int_rn""".split())


FLOAT_LITERAL = re.compile(r"(?<![\w.])(?:\d+\.\d*|\.\d+|\d+(?=[eE][-+]?\d))(?:[eE][-+]?\d+)?[fF]?(?![\w.])")


INTEGER_LITERAL = re.compile(r"(?<![\w.])(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*(?![\w.])")


def type_family(kind: str) -> str:
    """`bool`, `int` (any integer type), `float` (any floating-point type), or the type itself
    (`scalar_t`, `float4`): qualifiers and a pointer's star aside (`const int64_t ` is `int`)."""
    words = [w for w in re.findall(r"[A-Za-z_]\w*", kind) if w not in ("const", "volatile", "register", "static")]
    if not words:
        return ""
    if words == ["bool"]:
        return "bool"
    if all(w in INTEGER_TYPES for w in words):
        return "int"
    if len(words) == 1 and words[0] in FLOAT_TYPES:
        return "float"
    return " ".join(words)


def bare_type(kind: str) -> str:
    """`kind` without const or volatile, its words one space apart."""
    return " ".join(w for w in kind.replace("*", " * ").split() if w not in ("const", "volatile"))


def _enclosing(code: str, at: int) -> tuple[str, int]:
    """The innermost bracket open at `at` (`(` or `[`, `` at statement level) and where it is;
    a `;`, `{` or `}` first ends the search."""
    for i, ch, depth in levels(code, 0, at, brackets="()[]", marks=";{}", backwards=True):
        if ch in ";{}":
            return "", i
        if depth < 0:   # (read backwards, a `(` or `[` closes)
            return ch, i
    return "", -1


def _statement(code: str, at: int) -> tuple[int, int]:
    """The bounds of the statement (or `for`/`if` head) around `at`."""
    start = max(code.rfind(ch, 0, at) for ch in ";{}") + 1
    ends = [i for i in (code.find(ch, at) for ch in ";{}") if i >= 0]
    return start, min(ends) if ends else len(code)


@functools.lru_cache(maxsize=4)
def _usage_context(prefix: str, suffix: str) -> tuple[str, dict[str, tuple[str, bool]]]:
    """The code after the selection and the types of the names declared around it, for
    usage_type: the same for every name a fill asks of (a file cut in its middle may need 80
    names, and over a 150 kB file each pass took 30 ms). Runs of whitespace as one (a newline
    where they hold one): usage_type's patterns then never try the ways of splitting a long run
    between two of their optional spaces."""
    code = squeezed(code_only(suffix))
    return code, value_types(squeezed(code_only(prefix)) + "\n" + code)


@functools.lru_cache(maxsize=256)  # a fill asks it of the same names and text several times
def usage_type(name: str, prefix: str, suffix: str) -> str | None:
    """The type `name` (needed by the code after a selection, engine.fill.names.needed_names) is
    used as there, for a declaration to start with (`float `, `int64_t `, `bool `), or None
    where its uses say nothing. Each use votes for a type family (type_family): as an index
    (`a[name]`) or an operand of `%`, `<<`, `>>`, `&`, `|`, `^`: an integer; assigned `true` or
    `false`, negated (`!name`) or an operand of `&&`/`||`: a bool; an argument of a float math
    function (`expf(name)`): a float; otherwise the values beside it at its bracket level: the
    typed names (an array's element `p[i]` by its element type), floating-point literals, and
    the type the statement declares or assigns to. The integer or float type is the one the
    votes named most, else the one the surrounding code declares most (`int64_t` in a file of
    `int64_t` indices), else `int ` or `float `."""
    code, types = _usage_context(prefix, suffix)
    families: Counter = Counter()
    concrete: Counter = Counter()

    def vote(kind: str, weight: float) -> None:
        family = type_family(kind)
        if family:
            families[family] += weight
            if family in ("int", "float"):
                concrete[bare_type(kind)] += weight

    def value_type(text: str) -> str | None:
        """The type of a value written `x` or `x[...]`, if `x` is declared."""
        m = re.fullmatch(r" ?\(? ?([A-Za-z_]\w*) ?(\[.*\])? ?\)? ?", " ".join(text.split()), re.DOTALL)
        if not m or m.group(1) not in types:
            return None
        kind, several = types[m.group(1)]
        return kind if bool(m.group(2)) == several else None

    for m in re.finditer(word(name), code):
        # (the patterns on `before` look at its end only)
        before, after = code[max(0, m.start() - 16):m.start()].rstrip(), code[m.end():].lstrip()
        if re.match(r"=\s*(?:true|false)\b", after) or re.search(r"(?:!|&&|\|\|)$", before) \
                or after.startswith(("&&", "||")):
            vote("bool", 5)
            continue
        bracket, at = _enclosing(code, m.start())
        if bracket == "[":
            vote("int", 3)
            continue
        # (`a & name` is an integer's; `&name`, `(&name`, `, &name` take its address)
        if re.search(r"(?:[%^|]|<<|>>|[\w)\]]\s*&)$", before) or re.match(r"(?:[%^|]|<<|>>|&(?!&))", after):
            vote("int", 3)
            continue
        if bracket == "(":
            call = re.search(r"([A-Za-z_]\w*)\s*$", code[max(0, at - 256):at])   # not a scan of all before
            if call and call.group(1) in FLOAT_FUNCTIONS:
                vote("float", 3)
                continue
        # The values beside the name at its level: up to the enclosing bracket's `,` or end.
        start, end = _statement(code, m.start())
        if bracket == "(":
            start = at + 1
            end = next((i for i, ch, depth in levels(code, at + 1, brackets="()[]", marks=",")
                        if (ch, depth) in ((",", 0), (")", -1))), len(code))
        text = code[start:end]
        declared = re.match(r"\s*(?:(?:const|unsigned|signed|long|short)\s+)*([A-Za-z_]\w*)\s+[A-Za-z_]\w*\s*=",
                            text)
        if declared and declared.group(1) not in NOT_TYPES:
            whole = " ".join(text[:declared.end(1)].split())
            vote(whole, 2)
            text = text[text.index("=", declared.end(1)) + 1:]
        assigned = re.match(r"\s*([A-Za-z_]\w*\s*(?:\[[^;=]*\])?)\s*[-+*/]?=(?!=)", text)
        if assigned and not declared:
            kind = value_type(assigned.group(1))
            if kind:
                vote(kind, 2)
            text = text[assigned.end():]
        # Operands at the name's level: split on operators outside brackets.
        cuts = [i for i, ch, depth in levels(text, brackets="()[]", marks="+-*/<>=!?:,")
                if depth == 0 and ch not in "()[]"]
        pieces = [text[i + 1:j] for i, j in zip([-1] + cuts, cuts + [len(text)])]
        for p in pieces:
            if re.fullmatch(r"\s*%s\s*" % re.escape(name), p):
                continue
            kind = value_type(p)
            if kind:
                vote(kind, 1)
            elif FLOAT_LITERAL.fullmatch(p.strip()):
                vote("float", 1)
            elif INTEGER_LITERAL.fullmatch(p.strip()):
                vote("int", 0.5)
    if not families:
        return None
    family = families.most_common(1)[0][0]
    if family not in ("int", "float"):
        return family + " "
    named = [k for k, _ in concrete.most_common() if type_family(k) == family and k != family]
    if named and concrete[named[0]] >= concrete[family]:
        return named[0] + " "
    declared = Counter(kind for kind, several in types.values() if not several and type_family(kind) == family)
    return (declared.most_common(1)[0][0] if declared else family) + " "


def uninitialized_declaration(names: list[str], prefix: str, suffix: str) -> str | None:
    """`TYPE a, b;` for needed names (needed_names) that the code after the selection assigns
    before it reads any (`int64_t row_start, row_end;` before a loop that starts with
    `row_start = ..., row_end = ...;`): in the order the code after first uses them, with the
    type the first one is used as (usage_type). None when a name's first use is not a plain
    assignment that does not read it (`acc = acc + x;`), or when the name is used after the
    block of that assignment ends (an `if` or a loop may have skipped it), or when its type
    says nothing."""
    code = code_only(suffix)
    first = {}
    for name in names:
        pattern = re.compile(word(name))
        m = pattern.search(code)
        if not m or not re.match(r"\s*=(?!=)", code[m.end():]) or _guarded(code, m.start()):
            return None
        # The assignment's end: its `;` or `,` outside brackets (`lo = max(n, lo);` reads lo).
        end = next((i for i, ch, depth in levels(code, m.end(), marks=";,") if ch in ";," and depth == 0), len(code))
        if pattern.search(code, m.end(), end):
            return None
        # ...and no use after the block of that assignment ends.
        block_end = next((i for i, _, depth in levels(code, end, brackets="{}") if depth < 0), None)
        if block_end is not None and pattern.search(code, block_end):
            return None
        first[name] = m.start()
    ordered = sorted(names, key=first.get)
    kind = usage_type(ordered[0], prefix, suffix) if ordered else None
    return f"{kind}{', '.join(ordered)};" if kind else None


def _guarded(code: str, at: int) -> bool:
    """Whether the statement at `at` is the body, without braces, of an `if`, `else`, `for` or
    `while` (`if (n) lo = 1;`): it may not run."""
    before = code[:at].rstrip()
    if re.search(r"(?<!\w)else$", before):
        return True
    if not before.endswith(")"):
        return False
    i = opening(before, len(before) - 1)
    return bool(re.search(r"(?<!\w)(?:if|for|while)\s*$", before[:i or 0]))


def initialized_declaration(name: str, prefix: str, suffix: str) -> str | None:
    """`TYPE name = VALUE;` for a needed name (needed_names) that the code after the selection
    keeps updating from itself, started at the identity of its update: `float sum = 0.0f;`
    before `sum += p;`, `int step = 1;` before `step = step * 2;`, `bool found = false;`
    before `found = true;` (a flag starts as what it is set against). The type is the one
    the name is used as (usage_type); a float is written as the code around writes its
    literals (`0.0f` or `0.0`). None for a name with no such update (`m = fmaxf(m, v);` has
    no identity to start from) or of no known integer, float or bool type."""
    kind = usage_type(name, prefix, suffix)
    family = type_family(kind) if kind else ""
    if family not in ("int", "float", "bool"):
        return None
    code = code_only(suffix)
    own = word(name)
    value = None
    if family == "bool":
        m = re.search(own + r"\s*=\s*(true|false)\b", code)
        value = m and {"true": "false", "false": "true"}[m.group(1)]
    else:
        op = None
        m = re.search(own + r"\s*(\+|-|\*|/|\||\^|<<|>>)=", code) or re.search(r"(\+\+|--)\s*" + own, code) \
            or re.search(own + r"\s*(\+\+|--)", code)
        if m:
            op = m.group(1)[0]
        else:
            for m in re.finditer(own + r"\s*=(?!=)([^;]*)", code):
                rhs = m.group(1)
                ops = r"(\+|-|\*|/|\||\^|<<|>>)"
                near = re.search(ops + r"\s*" + own + r"|" + own + r"\s*" + ops, rhs)
                if near and rhs[:near.start()].count("(") == rhs[:near.start()].count(")"):   # not in a call
                    op = (near.group(1) or near.group(2))[0]
                    break
        if op is None or op in "<>":
            return None
        one = op in "*/"
        if family == "int":
            value = "1" if one else "0"
        else:
            around = code_only(prefix) + code
            literals = [m.group(0) for m in FLOAT_LITERAL.finditer(around)]
            plain = sum(not lit.lower().endswith("f") for lit in literals)
            value = ("1.0" if one else "0.0") + ("" if literals and plain > len(literals) - plain else "f")
    return f"{kind}{name} = {value};" if value else None
