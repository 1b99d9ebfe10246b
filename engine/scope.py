"""Names a fill uses that its file does not have: the small FIM model's commonest mistake.

A fill replaces a selection inside code that already declares everything the selection may
use. An identifier in a candidate that is neither in the prefix or suffix, nor a C++/CUDA
keyword or built-in, nor declared by the candidate itself, is almost surely invented (`b` in
saxpy's `y[i] = a * x[i] + b * y[i];`) and the candidate will not compile. LocalEngine uses
this to rank sampled candidates of a fill: in-scope ones first.

The same ranking also prefers candidates in the selection's shape (`fits_span`): brackets
balanced, as any statement, expression or block an editor user selects is, and on one line
when the selection is inside one line (the text before it on its line and after it on its
line are both there: the README's `--range 12:9-12:32`), ending as a line of code does. Before
ranking, a candidate that runs on past the selection is cut where it ends (`cut_to_span`):
after its first whole line for a one-line selection, before a line that repeats the suffix's
first line for any selection.
"""

from __future__ import annotations

import re
from collections import Counter

IDENTIFIER = re.compile(r"(?<![\w.>:])([A-Za-z_]\w*)")   # not a member (x.y, p->y, ns::y)
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
PREPROCESSOR_LINE = re.compile(r"^\s*#[^\n]*", re.MULTILINE)
COMMENT_OR_STRING = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'", re.DOTALL)

BUILTINS = frozenset("""
alignas alignof auto bool break case char char16_t char32_t class const constexpr const_cast continue
decltype default delete do double dynamic_cast else enum explicit extern false float for friend goto if
inline int long mutable namespace new noexcept nullptr operator private protected public register
reinterpret_cast return short signed sizeof static static_assert static_cast struct switch template this
throw true try typedef typeid typename union unsigned using virtual void volatile while
size_t ptrdiff_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t uint NULL
half half2 __half __half2 __nv_bfloat16 __nv_bfloat162 float2 float3 float4 int2 int3 int4 uint2 uint3
uint4 double2 dim3 char4 uchar4 short2 longlong2 warpSize
threadIdx blockIdx blockDim gridDim x y z w
__global__ __device__ __host__ __shared__ __constant__ __restrict__ __forceinline__ __noinline__
__syncthreads __syncwarp __threadfence __threadfence_block __ldg __shfl_sync __shfl_down_sync
__shfl_up_sync __shfl_xor_sync __ballot_sync __any_sync __all_sync __activemask __popc __popcll __clz
__ffs __fdividef __expf __logf __powf __sinf __cosf __saturatef __float2half __half2float __float2int_rn
__int2float_rn __float_as_int __int_as_float __hadd __hmul __hfma __fmaf_rn __umulhi __mul24 __brev
atomicAdd atomicSub atomicMax atomicMin atomicExch atomicCAS atomicAnd atomicOr atomicXor atomicInc
make_float2 make_float3 make_float4 make_int2 make_int3 make_int4 printf assert min max abs
sqrt sqrtf rsqrt rsqrtf exp expf exp2f expm1f log logf log2f log1pf log10f pow powf sin sinf cos cosf
tan tanf tanh tanhf sinh cosh asin acos atan atan2 atan2f erf erff erfc fabs fabsf fmax fmaxf fmin fminf
fma fmaf floor floorf ceil ceilf round roundf rint rintf trunc truncf fmod fmodf hypotf cbrtf isnan
isinf isfinite copysignf signbit INFINITY NAN FLT_MAX FLT_MIN DBL_MAX INT_MAX INT_MIN UINT_MAX
std numeric_limits
""".split())


def _names(code: str) -> set[str]:
    return set(IDENTIFIER.findall(COMMENT_OR_STRING.sub(" ", code)))


def scope_of(prefix: str, suffix: str) -> frozenset[str]:
    """Every identifier the text around a fill mentions, and the built-ins."""
    return frozenset(_names(prefix) | _names(suffix) | BUILTINS)


def unknown_names(fill: str, scope: frozenset[str]) -> list[str]:
    """The identifiers of `fill` that are not in `scope` nor declared by the fill itself."""
    code = COMMENT_OR_STRING.sub(" ", fill)
    return sorted(n for n in set(IDENTIFIER.findall(code)) - scope - declared_names(code)
                  if not n.isdigit() and not re.fullmatch(r"\d\w*", n))


def _pointer_spacing(sep: str) -> bool:
    """`T *p`, `T* p`, `T p`: a declarator's spacing; `a * b` and `a*b` are products."""
    return not sep.strip() or sep[0].isspace() != sep[-1].isspace()


def declared_names(code: str) -> set[str]:
    """The names `code` declares: variables, parameters, for-loop variables (DECLARED, with
    the further declarators of `int a = 0, b;`), and macros (#define)."""
    code = COMMENT_OR_STRING.sub(" ", code)
    names = set(DEFINE.findall(code))
    code = PREPROCESSOR_LINE.sub(" ", code)
    for m in DECLARED.finditer(code):
        if m.group("type") in NOT_TYPES or not _pointer_spacing(m.group("sep")):
            continue
        names.add(m.group("name"))
        if m.group("end") in "=,[":
            for piece in _declarators(code, m.end("name")):
                more = re.match(r"\s*[*&]*\s*([A-Za-z_]\w*)\s*(?:[=\[]|$)", piece)
                if more:
                    names.add(more.group(1))
    return names


def _declarators(code: str, start: int) -> list[str]:
    """The pieces after the first of a declaration's comma-separated declarators (up to its
    `;` or a closing bracket)."""
    pieces, depth, begin = [], 0, None
    for i in range(start, len(code)):
        ch = code[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                break
        elif ch == ";" and depth == 0:
            break
        elif ch == "," and depth == 0:
            if begin is not None:
                pieces.append(code[begin:i])
            begin = i + 1
    else:
        i = len(code)
    if begin is not None:
        pieces.append(code[begin:i])
    return pieces


def _uses_as_value(code: str, end: int) -> bool:
    """The identifier ending at `end` is used as a value: not called (`f(`, `f<T>(`), not a
    namespace or class (`ns::`), not a type (`T x`, `T *p`)."""
    after = code[end:]
    if re.match(r"\s*(?:\(|::|<[^;{}()]*>\s*\(|[A-Za-z_])", after):
        return False
    star = re.match(r"(\s*[*&]+\s*)[A-Za-z_]\w*\s*[=;,)\[]", after)
    return not (star and _pointer_spacing(star.group(1)))


def needed_names(prefix: str, suffix: str) -> list[str]:
    """Names the code after the selection uses as values that neither the text before it
    mentions nor the text after it declares: the selection must have declared them
    (`int threads = blockDim.x * blockDim.y;` before a suffix that reads `threads`). Built-ins,
    keywords, names in all capitals (macros and constants of headers not in the file) and
    names used as a function, a namespace or a type anywhere in the suffix are never needed."""
    code = COMMENT_OR_STRING.sub(" ", suffix)
    known = declared_names(code) | _names(prefix) | BUILTINS
    code = PREPROCESSOR_LINE.sub(" ", code)
    used = set()
    for m in IDENTIFIER.finditer(code):
        (used if _uses_as_value(code, m.end()) else known).add(m.group(1))
    return sorted(n for n in used - known
                  if not re.fullmatch(r"[A-Z][A-Z0-9_]*|__\w*|\d\w*", n))


def _outer_level(code: str) -> str:
    """`code` without its nested blocks (each replaced by `;`), up to the `}` that closes the
    block it starts in."""
    kept, depth = [], 0
    for ch in code:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                break
            if depth == 0:
                kept.append(";")
        elif depth == 0:
            kept.append(ch)
    return "".join(kept)


def block_declarations(prefix: str, suffix: str) -> set[str]:
    """The names declared in the block the selection is in, outside any block nested in it:
    before the selection, after it, and in the parentheses that open the block (a function's
    parameters, a for's variable). A fill that declares one of them again does not compile;
    outside any block (file scope) nothing is returned."""
    before = PREPROCESSOR_LINE.sub(" ", COMMENT_OR_STRING.sub(" ", prefix))
    opened = []
    for i, ch in enumerate(before):
        if ch == "{":
            opened.append(i)
        elif ch == "}" and opened:
            opened.pop()
    if not opened:
        return set()
    at = opened[-1]
    names = declared_names(_outer_level(before[at + 1:]))
    head = before[:at].rstrip()
    if head.endswith(")"):
        depth = 0
        for i in range(len(head) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(head[i], 0)
            if depth == 0:
                names |= declared_names(head[i:])
                break
    after = PREPROCESSOR_LINE.sub(" ", COMMENT_OR_STRING.sub(" ", suffix))
    return names | declared_names(_outer_level(after))


def redeclared(fill: str, prefix: str, suffix: str) -> list[str]:
    """The names `fill` declares (outside its own nested blocks) that its block already has."""
    return sorted(declared_names(_outer_level(COMMENT_OR_STRING.sub(" ", fill))) & block_declarations(prefix, suffix))


PAIRS = {"(": ")", "[": "]", "{": "}"}


def balanced(code: str) -> bool:
    """Brackets of `code` (comments and strings aside) close in order and all close."""
    stack = []
    for ch in COMMENT_OR_STRING.sub(" ", code):
        if ch in PAIRS:
            stack.append(PAIRS[ch])
        elif ch in PAIRS.values() and (not stack or stack.pop() != ch):
            return False
    return not stack


def inside_one_line(prefix: str, suffix: str) -> bool:
    """The selection is inside one line: text before it on its line, and its line ends after it."""
    return not prefix.endswith("\n") and suffix.split("\n", 1)[0].strip() == "" and "\n" in suffix


LINE_ENDS = (";", "{", "}", ")", ":", "else")


def fits_span(fill: str, prefix: str, suffix: str) -> bool:
    """The fill has the shape of the selection it replaces (see the module doc); a selection
    inside one line that runs to the line's end is a whole line of code, so its fill ends as
    one does (`;`, a brace, `)` of an `if`, a label, `else`) or is a comment or directive."""
    if not balanced(fill):
        return False
    if not inside_one_line(prefix, suffix):
        return True
    text = COMMENT_OR_STRING.sub(lambda m: m.group(0) if m.group(0)[0] in "\"'" else "", fill).strip()
    whole = text.endswith(LINE_ENDS) or fill.strip().startswith(("//", "/*", "#"))
    return "\n" not in fill.strip() and whole


def cut_to_span(fill: str, prefix: str, suffix: str) -> str:
    """A fill that runs on past the selection, cut where it ends: the small model often writes
    what the selection needs and then goes on with the code after it, which the suffix already
    has. For a selection inside one line, after the fill's first line when that line is a whole
    piece of code (brackets balanced); for any selection, before the first line of the fill
    that repeats the suffix's first non-blank line where the fill up to it is balanced (a block
    body followed by the `}` the suffix starts with). Any other fill is returned as it is."""
    text = fill.strip()
    if "\n" not in text:
        return fill
    if inside_one_line(prefix, suffix):
        first = text.split("\n", 1)[0].rstrip()
        return first if first and balanced(first) else fill
    following = next((line.strip() for line in suffix.split("\n") if line.strip()), "")
    lines = fill.split("\n")
    for k in range(1, len(lines)):
        head = "\n".join(lines[:k])
        if following and lines[k].strip() == following and head.strip() and balanced(head):
            # The suffix starts the line that `following` is on, or a newline ends the fill's line.
            return head if "\n" in suffix[:suffix.index(following)] else head + "\n"
    return fill


def starts_statement(prefix: str) -> bool:
    """The selection begins where a statement may: nothing before it on its line, and the
    code before that ends a statement or opens or closes a block."""
    line_start = prefix.rfind("\n") + 1
    if prefix[line_start:].strip():
        return False
    code = PREPROCESSOR_LINE.sub(" ", COMMENT_OR_STRING.sub(" ", prefix[:line_start])).rstrip()
    return code.endswith((";", "{", "}"))


STORAGE = re.compile(r"\b(?:__shared__|__constant__|static|extern|typedef|constexpr|struct)\b")


def declaration_types(fills: list[str], prefix: str, count: int = 2) -> list[str]:
    """Types to declare a needed name with (`const int `, `float *`): those the fills declare
    with, the commonest first, then those of the values declared before the selection, the
    nearest first, then `int `; without storage classes, which take no initializer."""
    def types_in(code: str) -> list[str]:
        code = PREPROCESSOR_LINE.sub(" ", COMMENT_OR_STRING.sub(" ", code))
        found = []
        for m in DECLARED.finditer(code):
            if m.group("type") in NOT_TYPES or not _pointer_spacing(m.group("sep")):
                continue
            text = " ".join(code[m.start():m.start("name")].split())
            if text and not STORAGE.search(text):
                found.append(text if text.endswith(("*", "&")) else text + " ")
        return found

    from_fills = Counter(t for fill in fills for t in types_in(fill))
    # A pointer before the selection is mostly a parameter: an array, not a value to compute.
    nearby = [t for t in types_in(prefix)[::-1] if not t.endswith(("*", "&"))]
    ranked = [t for t, _ in from_fills.most_common()] + nearby + ["int "]
    return list(dict.fromkeys(ranked))[:count]
