"""What C/CUDA code declares: its variables, parameters, for-loop variables and macros, with
the types they are declared with, and those of the block a selection is in (a fill that
declares one again does not compile)."""

from __future__ import annotations

import re
from collections import Counter

from engine.fill.source import COMMENT_OR_STRING, PREPROCESSOR_LINE, code_only, levels, opening

QUALIFIERS = "const|static|volatile|register|extern|constexpr|typedef|struct|unsigned|signed|long|short|__shared__"


# A declaration: `T name =`, `T* name;`, `const T *name[`, `T<U> name,`, a parameter `(T name)`,
# where a statement, a parameter or a for's init starts. A star with space on both sides or on
# neither (`a * b`, `a*b`) is a product, not a pointer.
DECLARED = re.compile(
    r"(?:^|(?<=[;{}(,]))\s*(?:(?:" + QUALIFIERS + r")\s+)*"
    r"(?P<type>[A-Za-z_]\w*(?:\s*::\s*\w+)*(?:\s*<[^;{}()<>]*(?:<[^;{}()<>]*>[^;{}()<>]*)*>)?)"
    r"(?P<sep>\s+|\s*[*&]+\s*)(?:(?:const|__restrict__|__restrict)\s+)*"
    r"(?P<name>[A-Za-z_]\w*)\s*(?P<end>[=;,\[)]|$)", re.MULTILINE)


# Words that start a statement without declaring: `return x;` declares no `x`.
NOT_TYPES = frozenset("return else case goto throw delete new sizeof do typename using".split())


DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)", re.MULTILINE)


STORAGE = re.compile(r"\b(?:__shared__|__constant__|static|extern|typedef|constexpr|struct)\b")


def pointer_spacing(sep: str) -> bool:
    """`T *p`, `T* p`, `T p`: a declarator's spacing; `a * b` and `a*b` are products."""
    return not sep.strip() or sep[0].isspace() != sep[-1].isspace()


def declaration(m: re.Match | None) -> bool:
    """A match of DECLARED is a declaration: not a statement's keyword (NOT_TYPES) before a
    name, not a product (pointer_spacing)."""
    return m is not None and m.group("type") not in NOT_TYPES and pointer_spacing(m.group("sep"))


def declarations(code: str) -> list[re.Match]:
    """The declarations of `code` (DECLARED matches that are: declaration), first to last."""
    return [m for m in DECLARED.finditer(code) if declaration(m)]


def declared_names(code: str) -> set[str]:
    """The names `code` declares: variables, parameters, for-loop variables (DECLARED, with
    the further declarators of `int a = 0, b;`), and macros (#define)."""
    code = COMMENT_OR_STRING.sub(" ", code)
    names = set(DEFINE.findall(code))
    code = PREPROCESSOR_LINE.sub(" ", code)
    for m in declarations(code):
        names.add(m.group("name"))
        if m.group("end") in "=,[":
            for piece in further_declarators(code, m.end("name")):
                more = re.match(r"\s*[*&]*\s*([A-Za-z_]\w*)\s*(?:[=\[]|$)", piece)
                if more:
                    names.add(more.group(1))
    return names


def further_declarators(code: str, start: int) -> list[str]:
    """The pieces after the first of a declaration's comma-separated declarators (up to its
    `;` or a closing bracket)."""
    pieces, begin, end = [], None, len(code)
    for i, ch, depth in levels(code, start, marks=";,"):
        if depth < 0 or (ch == ";" and depth == 0):
            end = i
            break
        if ch == "," and depth == 0:
            if begin is not None:
                pieces.append(code[begin:i])
            begin = i + 1
    if begin is not None:
        pieces.append(code[begin:end])
    return pieces


def _outer_level(code: str) -> str:
    """`code` without its nested blocks (each replaced by `;`), up to the `}` that closes the
    block it starts in."""
    kept, outside = [], 0   # where the text at the outer level resumes (None inside a block)
    for i, ch, depth in levels(code, brackets="{}"):
        if depth < 0:
            return "".join(kept) + code[outside:i]
        if depth == 0 and ch == "{":
            kept.append(code[outside:i])
            outside = None
        elif depth == 0:
            kept.append(";")
            outside = i + 1
    return "".join(kept) + (code[outside:] if outside is not None else "")


def block_declarations(prefix: str, suffix: str) -> set[str]:
    """The names declared in the block the selection is in, outside any block nested in it:
    before the selection, after it, and in the parentheses that open the block (a function's
    parameters, a for's variable). A fill that declares one of them again does not compile;
    outside any block (file scope) nothing is returned."""
    before = code_only(prefix)
    # The innermost `{` the prefix leaves open: read from the end, the first that closes more
    # than was opened after it.
    at = next((i for i, ch, depth in levels(before, brackets="{}", backwards=True) if depth < 0), None)
    if at is None:
        return set()
    names = declared_names(_outer_level(before[at + 1:]))
    head = before[:at].rstrip()
    if head.endswith(")"):
        start = opening(head, len(head) - 1)
        if start is not None:
            names |= declared_names(head[start:])
    after = code_only(suffix)
    return names | declared_names(_outer_level(after))


def redeclared(fill: str, prefix: str, suffix: str) -> list[str]:
    """The names `fill` declares (outside its own nested blocks) that its block already has."""
    return sorted(declared_names(_outer_level(COMMENT_OR_STRING.sub(" ", fill))) & block_declarations(prefix, suffix))


def declared_types(code: str) -> dict[str, str]:
    """The type each name `code` declares is declared with (qualifiers and a star kept:
    `const int `, `float *`); the further declarators of `int a, b;` are not included."""
    code = code_only(code)
    found = {}
    for m in declarations(code):
        found.setdefault(m.group("name"), " ".join(code[m.start():m.start("name")].split()))
    return found


def value_types(code: str) -> dict[str, tuple[str, bool]]:
    """Each declared name's type (without qualifiers) and whether it holds several values
    (a pointer or an array, whose element `name[i]` has that type)."""
    types = {}
    for m in declarations(code):
        types[m.group("name")] = (" ".join(m.group("type").split()), "*" in m.group("sep") or m.group("end") == "[")
    return types


def declaration_types(fills: list[str], prefix: str, count: int = 2, used_as: str | None = None) -> list[str]:
    """Types to declare a needed name with (`const int `, `float *`): `used_as` (the type the
    code after the selection uses the name as, usage_type) first when given; then those the
    fills declare with, the commonest first, then those of the values declared before the
    selection, the nearest first, then `int `; without storage classes, which take no
    initializer."""
    def types_in(code: str) -> list[str]:
        code = code_only(code)
        found = []
        for m in declarations(code):
            text = " ".join(code[m.start():m.start("name")].split())
            if text and not STORAGE.search(text):
                found.append(text if text.endswith(("*", "&")) else text + " ")
        return found

    from_fills = Counter(t for fill in fills for t in types_in(fill))
    # A pointer before the selection is mostly a parameter: an array, not a value to compute.
    nearby = [t for t in types_in(prefix)[::-1] if not t.endswith(("*", "&"))]
    ranked = ([used_as] if used_as else []) + [t for t, _ in from_fills.most_common()] + nearby + ["int "]
    return list(dict.fromkeys(ranked))[:count]


def without_type(fill: str) -> str:
    """`fill` without the type its first statement declares a name with, and without
    whitespace (`i=threadIdx.x;` for `const unsigned int i = threadIdx.x;` and for
    `int i = threadIdx.x ;`): candidates that differ only there are type twins."""
    code = " ".join(fill.split())
    m = DECLARED.match(code)
    if declaration(m):
        code = code[m.start("name"):]
    return "".join(code.split())


def function_start(prefix: str) -> int | None:
    """Where the header of the function the selection is in starts in `prefix` (after the
    `;` or `}` that ends what comes before it at file level), or None where the selection is
    not inside a brace block of the prefix."""
    opened, start = False, 0
    for i, ch, depth in levels(code_only(prefix), brackets="{}", marks=";", stray=False):
        if ch == "{":
            opened = opened or depth == 0
        elif depth == 0:   # a `;` at file level, or the `}` that closes a function's body
            start = i + 1
            opened = opened and ch == ";"
    return start if opened else None
