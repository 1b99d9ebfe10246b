"""Names a fill uses that its file does not have: the small FIM model's commonest mistake.

A fill replaces a selection inside code that already declares everything the selection may
use. An identifier in a candidate that is neither in the prefix or suffix, nor a C++/CUDA
keyword or built-in, nor declared by the candidate itself, is almost surely invented (`b` in
saxpy's `y[i] = a * x[i] + b * y[i];`) and the candidate will not compile. LocalEngine uses
this to rank sampled candidates of a fill: in-scope ones first.

The same ranking also prefers candidates in the selection's shape (`fits_span`): brackets
balanced, as any statement, expression or block an editor user selects is (or, for a
selection that is not, such as a line `if (i < n) {`, exactly what the file around it lacks),
and on one line when the selection is inside one line (the text before it on its line and
after it on its line are both there: the README's `--range 12:9-12:32`), ending as a line of
code does. Before ranking, a candidate that runs on past the selection is cut where it ends
(`cut_to_span`): after its first whole line for a one-line selection, before a line that
repeats the suffix's first line for any selection, where the rest of the line begins for a
selection that cuts a line, and never past the end of the function the selection is in.

A selection whose suffix reads a name nothing declares (`needed_names`) held its declaration.
`usage_type` says what type the suffix uses that name as (an index: an integer; set to `true`:
a bool; an argument of `expf`: a float), for declarations to start with and to rank by; some
declarations are written without the model (`uninitialized_declaration`,
`initialized_declaration`) or from a drawn one of an invented name (`renamed_declaration`).
"""

from __future__ import annotations

import functools
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


def _code(text: str) -> str:
    """`text` without its comments, strings and preprocessor lines (each a space)."""
    return PREPROCESSOR_LINE.sub(" ", COMMENT_OR_STRING.sub(" ", text))


def _word(name: str) -> str:
    """A pattern of `name` used as a name of its own: not part of a longer one, not a member."""
    return r"(?<![\w.>:])%s(?!\w)" % re.escape(name)


def renamed(code: str, old: str, new: str) -> str:
    """`code` with the name `old` (as a name of its own: _word) written `new` wherever it occurs."""
    return re.sub(_word(old), new, code)


def _names(code: str) -> set[str]:
    return set(IDENTIFIER.findall(COMMENT_OR_STRING.sub(" ", code)))


@functools.lru_cache(maxsize=16)   # asked for each candidate of a fill (renamed_invented, renamed_declaration)
def scope_of(prefix: str, suffix: str) -> frozenset[str]:
    """Every identifier the text around a fill mentions, and the built-ins."""
    return frozenset(_names(prefix) | _names(suffix) | BUILTINS)


def unknown_names(fill: str, scope: frozenset[str]) -> list[str]:
    """The identifiers of `fill` that are not in `scope` nor declared by the fill itself."""
    code = COMMENT_OR_STRING.sub(" ", fill)
    return sorted(n for n in set(IDENTIFIER.findall(code)) - scope - declared_names(code)
                  if not n.isdigit() and not re.fullmatch(r"\d\w*", n))


def file_names(prefix: str, suffix: str) -> frozenset[str]:
    """The identifiers the text around a fill mentions that are not C/CUDA words or built-ins:
    the file's own variables, parameters, functions and types (`x`, `y`, `z` and `w` too, which
    BUILTINS holds as members of the built-in vectors, and which are common names)."""
    return frozenset((_names(prefix) | _names(suffix)) - (BUILTINS - {"x", "y", "z", "w"}))


def first_invented(fill: str, scope: frozenset[str]) -> tuple[str, str] | None:
    """(`fill` up to the first name it reads that is not in `scope` (unknown_names), that name):
    where the model wrote a name the file does not have and a name of the file belongs. The
    text before it keeps the space before the name if there is one. None when it reads no such
    name, or when the name follows other whitespace (a line break, an indentation)."""
    unknown = set(unknown_names(fill, scope))
    if not unknown:
        return None
    code = COMMENT_OR_STRING.sub(lambda m: " " * len(m.group()), fill)
    for m in IDENTIFIER.finditer(code):
        if m.group(1) in unknown:
            head = fill[:m.start()]
            gap = head[len(head.rstrip()):]
            return (head, m.group(1)) if not head or (head.strip() and gap in ("", " ")) else None
    return None


# What cannot compile whatever the file: a member of a built-in dim3 other than x, y and z
# (`blockDim.xg`), and a CUDA qualifier called as a function (`__host__();`).
BAD_BUILTIN_USE = re.compile(r"(?<![\w.>:])(?:threadIdx|blockIdx|blockDim|gridDim)\s*\.\s*(?![xyz](?!\w))\w+"
                             r"|(?<![\w.>:])__(?:global|host|device|shared|constant)__\s*\(")


def misuses_builtins(fill: str) -> bool:
    """`fill` uses a CUDA built-in as no code can (BAD_BUILTIN_USE), comments and strings aside."""
    return BAD_BUILTIN_USE.search(COMMENT_OR_STRING.sub(" ", fill)) is not None


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
    before = _code(prefix)
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
    after = _code(suffix)
    return names | declared_names(_outer_level(after))


def redeclared(fill: str, prefix: str, suffix: str) -> list[str]:
    """The names `fill` declares (outside its own nested blocks) that its block already has."""
    return sorted(declared_names(_outer_level(COMMENT_OR_STRING.sub(" ", fill))) & block_declarations(prefix, suffix))


PAIRS = {"(": ")", "[": "]", "{": "}"}
BACKWARDS = {")": "(", "]": "[", "}": "{"}


def _owed(code: str, pairs: dict[str, str], owed: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    """The closers still owed after reading `code` (comments and strings already blanked) from a
    state that owed `owed` (outermost first); None where a bracket closes out of order or closes
    one that nothing opened."""
    stack, closers = list(owed), set(pairs.values())
    for ch in code:
        if ch in pairs:
            stack.append(pairs[ch])
        elif ch in closers and (not stack or stack.pop() != ch):
            return None
    return tuple(stack)


def balanced(code: str) -> bool:
    """Brackets of `code` (comments and strings aside) close in order and all close."""
    return _owed(COMMENT_OR_STRING.sub(" ", code), PAIRS) == ()


def _source_around(prefix: str, suffix: str) -> tuple[str, str]:
    """The CUDA source around a selection: for one inside a Python triple-quoted string (a
    `load_inline` extension's source, a KernelBench ModelNew's), the string's text before and
    after it; otherwise the prefix and suffix as they are."""
    for quote in ('"""', "'''"):
        if prefix.count(quote) % 2 == 1 and quote in suffix:
            return prefix[prefix.rindex(quote) + 3:], suffix[:suffix.index(quote)]
    return prefix, suffix


@functools.lru_cache(maxsize=16)
def _context_brackets(prefix: str, suffix: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(the closers the prefix leaves owed, the closers the suffix gives to brackets opened
    before it), both outermost first, in the CUDA source around the selection
    (`_source_around`); None where either part's brackets do not close in order on their own
    (a file broken mid-edit, braces doubled in `#if` branches): then no fill is judged by its
    context."""
    prefix, suffix = _source_around(prefix, suffix)
    before = _owed(COMMENT_OR_STRING.sub(" ", prefix), PAIRS)
    after = _owed(COMMENT_OR_STRING.sub(" ", suffix)[::-1], BACKWARDS)
    if before is None or after is None:
        return None
    return before, tuple(PAIRS[opener] for opener in after)


def closes_in_context(fill: str, prefix: str, suffix: str) -> bool:
    """The fill's brackets are balanced, or, where they are not, they are exactly what the code
    around the selection lacks: a selected `if (i < n) {` whose `}` the suffix has, a `} else {`,
    the first line of a call whose arguments go on below (the file, read with the fill, closes
    every bracket in order, as it did with the selection)."""
    if balanced(fill):
        return True
    context = _context_brackets(prefix, suffix)
    if context is None:
        return False
    before, after = context
    return _owed(COMMENT_OR_STRING.sub(" ", fill), PAIRS, before) == after


def inside_one_line(prefix: str, suffix: str) -> bool:
    """The selection is inside one line: text before it on its line, and its line ends after it."""
    return not prefix.endswith("\n") and suffix.split("\n", 1)[0].strip() == "" and "\n" in suffix


def line_rest(suffix: str) -> str:
    """The code after the selection on its last line ("" where the selection runs to the line's
    end): a selection that cuts a statement, `y[i] = a * ` before `x[i] + y[i];`, has one."""
    return suffix.split("\n", 1)[0].strip()


def _function_exit(fill: str, prefix: str, suffix: str) -> int | None:
    """Where the fill closes the outermost bracket the selection is in (the function's body, for
    a selection in a function) while the suffix still closes it: the offset of that closer in
    `fill`, or None where the fill stays inside (or the file's brackets say nothing)."""
    context = _context_brackets(prefix, suffix)
    if context is None or not context[0] or not context[1] or context[0][0] != context[1][0]:
        return None
    depth, closers = len(context[0]), set(PAIRS.values())
    for at, ch in enumerate(COMMENT_OR_STRING.sub(lambda m: " " * len(m.group(0)), fill)):
        if ch in PAIRS:
            depth += 1
        elif ch in closers:
            depth -= 1
            if depth == 0:
                return at
    return None


def _rest_repeated(fill: str, prefix: str, suffix: str) -> int | None:
    """For a selection that cuts a line (line_rest), the offset where a line of the fill ends
    with that line's rest after a head that is not blank and closes in context: the model wrote
    the selection and then the code after it, which the suffix has. None where no line does."""
    rest = line_rest(suffix)
    if not rest:
        return None
    start = 0
    for line in fill.split("\n"):
        code = line.rstrip()
        if code.endswith(rest) and code[:len(code) - len(rest)].strip():   # the rest, after code on its line
            head = fill[:start + len(code) - len(rest)]
            if head.strip() and closes_in_context(head, prefix, suffix):
                return len(head)
        start += len(line) + 1
    return None


LINE_ENDS = (";", "{", "}", ")", ":", "else")


def fits_span(fill: str, prefix: str, suffix: str) -> bool:
    """The fill has the shape of the selection it replaces (see the module doc); a selection
    inside one line that runs to the line's end is a whole line of code, so its fill ends as
    one does (`;`, a brace, `)` of an `if`, a label, `else`) or is a comment or directive, or
    opens what the lines below close (`foo(a,` of a call that goes on), or is one of the lines
    of an argument or parameter list (`const float* x,`), or of a statement that the deeper
    indented line below goes on with (`const int n =`), or of a macro (`\\` after one)."""
    if not closes_in_context(fill, prefix, suffix):
        return False
    if not inside_one_line(prefix, suffix):
        return True
    text = COMMENT_OR_STRING.sub(lambda m: m.group(0) if m.group(0)[0] in "\"'" else "", fill).strip()
    whole = text.endswith(LINE_ENDS) or fill.strip().startswith(("//", "/*", "#")) or not balanced(fill) \
        or (text.endswith(",") and _inside_list(prefix, suffix)) \
        or (text.endswith(CONTINUED) and _continued(prefix, suffix)) \
        or (text.endswith("\\") and prefix.rstrip(" \t").endswith("\\\n"))
    return "\n" not in fill.strip() and whole


CONTINUED = ("=", "+", "-", "*", "/", "%", "&", "|", "^", "<", ">", "?", ":", ",", "(", "!")


def _continued(prefix: str, suffix: str) -> bool:
    """The selected line's statement goes on below it: the next line of code is indented deeper
    than the selection's line (`const int n =` over `    rows * cols;`)."""
    indent = prefix[prefix.rfind("\n") + 1:]
    following = next((line for line in suffix.split("\n")[1:] if line.strip()), "")
    return not indent.strip() and _width(following) > _width(indent)


def _width(line: str) -> int:
    """The width of a line's indentation, a tab as 4 columns."""
    return len(line[:len(line) - len(line.lstrip())].expandtabs(4))


def must_close(prefix: str, suffix: str) -> bool:
    """The file closes fewer brackets after the selection than it opens before it, at the levels
    the two share: a fill must close one (a selected `}`, or `}` ending a block before more
    code). Where it need not, a fill that starts by closing a bracket is out of shape."""
    context = _context_brackets(prefix, suffix)
    if context is None:
        return False
    before, after = context
    return after[:len(before)] != before


def _inside_list(prefix: str, suffix: str) -> bool:
    """The selection is inside parentheses or brackets that the file opens before it and closes
    after it: one of a call's or a parameter list's lines, which end with `,`."""
    context = _context_brackets(prefix, suffix)
    return context is not None and bool(context[0]) and context[0][-1] in ")]"


def cut_to_span(fill: str, prefix: str, suffix: str) -> str:
    """A fill that runs on past the selection, cut where it ends: the small model often writes
    what the selection needs and then goes on with the code after it, which the suffix already
    has. For a selection inside one line, after the fill's first line when that line is a whole
    piece of code (brackets balanced, or closing what the file around it lacks: `if (i < n) {`);
    for any selection, before the first line of the fill that repeats the suffix's first
    non-blank line where the fill up to it is balanced (a block body followed by the `}` the
    suffix starts with). Any other fill is returned as it is, but for a selection inside one line
    without the line break that ends its one line of code (a row that span_ended stopped there):
    the selection has no line break, and the user's line would gain an empty one.

    Before all that, two cuts keep a fill inside the selection's function: a fill that closes
    the function's body (which the suffix closes) is cut before that line, and for a selection
    that cuts a line (line_rest: `y[i] = a * ` of `y[i] = a * x[i] + y[i];`), a fill that goes
    on to write the rest of the line (and then the code after it, a second copy of the function)
    is cut where that rest begins."""
    exit_at = _function_exit(fill, prefix, suffix)
    if exit_at is not None and fill[:fill.rfind("\n", 0, exit_at) + 1].strip():
        # Up to the line break before that line, which stays unless the suffix brings its own.
        line_break = fill.rfind("\n", 0, exit_at)
        fill = fill[:line_break] if suffix.lstrip(" \t").startswith("\n") else fill[:line_break + 1]
    rest_at = _rest_repeated(fill, prefix, suffix)
    if rest_at is not None:
        return fill[:rest_at]
    if "\n" not in fill:
        return fill
    text = fill.strip()
    one_line = inside_one_line(prefix, suffix)
    if "\n" not in text:
        head = fill.split("\n", 1)[0]
        return head.rstrip() if one_line and head.strip() else fill
    if one_line:
        first = text.split("\n", 1)[0].rstrip()
        return first if first and closes_in_context(first, prefix, suffix) else fill
    lines = fill.split("\n")
    found = _suffix_repeated(lines, suffix)
    if found is None:
        return fill
    k, following = found
    head = "\n".join(lines[:k])
    # The suffix starts the line that `following` is on, or a newline ends the fill's line.
    return head if "\n" in suffix[:suffix.index(following)] else head + "\n"


def _suffix_repeated(lines: list[str], suffix: str) -> tuple[int, str] | None:
    """(k, the suffix's first non-blank line) for the first line k of a fill that repeats that
    line after a head (lines before k) that is not blank and is balanced; None if none does."""
    following = next((line.strip() for line in suffix.split("\n") if line.strip()), "")
    if not following:
        return None
    for k in range(1, len(lines)):
        head = "\n".join(lines[:k])
        if lines[k].strip() == following and head.strip() and balanced(head):
            return k, following
    return None


def span_ended(answer: str, prefix: str, suffix: str) -> bool:
    """Whether a FIM answer already holds all the fill it will give, whitespace aside: however it
    goes on, trim_suffix_overlap (engine.decoding.prompts) then cut_to_span cut it where they cut it now,
    so its decoding may stop (engine.decoding.local: on a CPU the rows that run on past the span set a
    batch's time). For a selection inside one line: its first line is complete (a newline after
    it), not blank and balanced (in its context: closes_in_context): cut_to_span keeps that
    line, and no tail that the suffix (blank up to its first newline) starts with can begin
    before its end. For any other selection: a complete line repeating the suffix's first
    non-blank line follows a balanced, not blank head: cut_to_span cuts before the first such
    line, and a tail the suffix starts with can only begin past it or at blank lines. Otherwise
    (no such line yet, a blank or unbalanced first line) the answer is not ended: the model goes
    on to its stop token or max_tokens."""
    complete = answer[:answer.rfind("\n") + 1]   # the lines that will not change
    exit_at = _function_exit(complete, prefix, suffix)
    if exit_at is not None and complete[:complete.rfind("\n", 0, exit_at) + 1].strip():
        return True   # cut_to_span cuts before the line that leaves the function
    if _rest_repeated(complete, prefix, suffix) is not None:
        return True   # cut_to_span cuts where the rest of the selection's line begins
    lines = answer.split("\n")
    if inside_one_line(prefix, suffix):
        return len(lines) > 1 and bool(lines[0].strip()) and closes_in_context(lines[0].strip(), prefix, suffix)
    found = _suffix_repeated(lines, suffix)
    return found is not None and found[0] < len(lines) - 1   # the last line may not be whole yet


def starts_statement(prefix: str) -> bool:
    """The selection begins where a statement may: nothing before it on its line, and the
    code before that ends a statement or opens or closes a block."""
    line_start = prefix.rfind("\n") + 1
    if prefix[line_start:].strip():
        return False
    code = _code(prefix[:line_start]).rstrip()
    return code.endswith((";", "{", "}"))


STORAGE = re.compile(r"\b(?:__shared__|__constant__|static|extern|typedef|constexpr|struct)\b")


def declaration_types(fills: list[str], prefix: str, count: int = 2, used_as: str | None = None) -> list[str]:
    """Types to declare a needed name with (`const int `, `float *`): `used_as` (the type the
    code after the selection uses the name as, usage_type) first when given; then those the
    fills declare with, the commonest first, then those of the values declared before the
    selection, the nearest first, then `int `; without storage classes, which take no
    initializer."""
    def types_in(code: str) -> list[str]:
        code = _code(code)
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
    ranked = ([used_as] if used_as else []) + [t for t, _ in from_fills.most_common()] + nearby + ["int "]
    return list(dict.fromkeys(ranked))[:count]


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


def declared_types(code: str) -> dict[str, str]:
    """The type each name `code` declares is declared with (qualifiers and a star kept:
    `const int `, `float *`); the further declarators of `int a, b;` are not included."""
    code = _code(code)
    found = {}
    for m in DECLARED.finditer(code):
        if m.group("type") not in NOT_TYPES and _pointer_spacing(m.group("sep")):
            found.setdefault(m.group("name"), " ".join(code[m.start():m.start("name")].split()))
    return found


def _value_types(code: str) -> dict[str, tuple[str, bool]]:
    """Each declared name's type (without qualifiers) and whether it holds several values
    (a pointer or an array, whose element `name[i]` has that type)."""
    types = {}
    for m in DECLARED.finditer(code):
        if m.group("type") in NOT_TYPES or not _pointer_spacing(m.group("sep")):
            continue
        types[m.group("name")] = (" ".join(m.group("type").split()), "*" in m.group("sep") or m.group("end") == "[")
    return types


def _enclosing(code: str, at: int) -> tuple[str, int]:
    """The innermost bracket open at `at` (`(` or `[`, `` at statement level) and where it is;
    a `;`, `{` or `}` first ends the search."""
    depth = 0
    for i in range(at - 1, -1, -1):
        ch = code[i]
        if ch in ")]":
            depth += 1
        elif ch in "([":
            if depth == 0:
                return ch, i
            depth -= 1
        elif ch in ";{}":
            return "", i
    return "", -1


def _statement(code: str, at: int) -> tuple[int, int]:
    """The bounds of the statement (or `for`/`if` head) around `at`."""
    start = max(code.rfind(ch, 0, at) for ch in ";{}") + 1
    ends = [i for i in (code.find(ch, at) for ch in ";{}") if i >= 0]
    return start, min(ends) if ends else len(code)


def _squeezed(code: str) -> str:
    return re.sub(r"\s+", lambda m: "\n" if "\n" in m.group() else " ", code)


@functools.lru_cache(maxsize=4)
def _usage_context(prefix: str, suffix: str) -> tuple[str, dict[str, tuple[str, bool]]]:
    """The code after the selection and the types of the names declared around it, for
    usage_type: the same for every name a fill asks of (a file cut in its middle may need 80
    names, and over a 150 kB file each pass took 30 ms). Runs of whitespace as one (a newline
    where they hold one): usage_type's patterns then never try the ways of splitting a long run
    between two of their optional spaces."""
    code = _squeezed(_code(suffix))
    return code, _value_types(_squeezed(_code(prefix)) + "\n" + code)


@functools.lru_cache(maxsize=256)  # a fill asks it of the same names and text several times
def usage_type(name: str, prefix: str, suffix: str) -> str | None:
    """The type `name` (needed by the code after a selection, engine.fill.scope.needed_names) is
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

    for m in re.finditer(_word(name), code):
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
            depth, end = 0, at + 1
            while end < len(code) and not (depth == 0 and code[end] in ",)"):
                depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(code[end], 0)
                end += 1
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
        depth, piece, pieces = 0, "", []
        for ch in text:
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            if depth == 0 and ch in "+-*/<>=!?:,":
                pieces.append(piece)
                piece = ""
            else:
                piece += ch
        pieces.append(piece)
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
    code = _code(suffix)
    first = {}
    for name in names:
        pattern = re.compile(_word(name))
        m = pattern.search(code)
        if not m or not re.match(r"\s*=(?!=)", code[m.end():]) or _guarded(code, m.start()):
            return None
        # The assignment's end: its `;` or `,` outside brackets (`lo = max(n, lo);` reads lo).
        end, depth = m.end(), 0
        while end < len(code) and not (depth == 0 and code[end] in ";,"):
            depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(code[end], 0)
            end += 1
        if pattern.search(code, m.end(), end):
            return None
        depth = 0
        for i in range(end, len(code)):
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            if depth < 0:
                if pattern.search(code, i):
                    return None
                break
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
    depth, i = 0, len(before) - 1
    while i >= 0:
        depth += {")": 1, "(": -1}.get(before[i], 0)
        if depth == 0:
            break
        i -= 1
    return bool(re.search(r"(?<!\w)(?:if|for|while)\s*$", before[:max(i, 0)]))


def renamed_declaration(fill: str, name: str, prefix: str, suffix: str) -> str | None:
    """`fill` declaring `name` instead of the one name it declares, where that is a name the
    code around the selection never mentions (`int index = blockDim.x * blockIdx.x + threadIdx.x;`
    for a selection whose suffix reads `xIndex` and no `index`: the small model often knows the
    expression but not the file's name for it); None for any other fill: not one `T x = ...;`
    statement, a name the code around uses, or one the fill's expression reads."""
    code = COMMENT_OR_STRING.sub(" ", fill)
    m = DECLARED.match(code)
    if not m or m.group("end") != "=" or m.group("type") in NOT_TYPES or not _pointer_spacing(m.group("sep")) \
            or STORAGE.search(code[:m.start("name")]):
        return None
    old = m.group("name")
    rest = code[m.end():].strip()
    if old == name or old in scope_of(prefix, suffix) or not rest.endswith(";") or rest.count(";") > 1 \
            or re.search(_word(old), rest) or _declarators(code, m.end("name")) \
            or not balanced(rest):
        return None
    return fill[:m.start("name")] + name + fill[m.end("name"):]


def function_start(prefix: str) -> int | None:
    """Where the header of the function the selection is in starts in `prefix` (after the
    `;` or `}` that ends what comes before it at file level), or None where the selection is
    not inside a brace block of the prefix."""
    code, depth, opened, start = _code(prefix), 0, False, 0
    for i, ch in enumerate(code):
        if ch == "{":
            opened = opened or depth == 0
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                start, opened = i + 1, False
        elif ch == ";" and depth == 0:
            start = i + 1
    return start if opened else None


@functools.lru_cache(maxsize=16)   # asked for each candidate of a fill (renamed_invented)
def unused_names(prefix: str, suffix: str) -> frozenset[str]:
    """Names the function around the selection declares (its parameters, the locals before the
    selection) that the code around the selection mentions nowhere but in their declaration:
    code declares a name to use it, so such a name is one the selection may use (`denom` in
    `func(float *a, int N, float minval, int denom)` whose body reads it nowhere else)."""
    start = function_start(prefix)
    if start is None:
        return frozenset()
    around = _code(prefix) + "\n" + _code(suffix)
    return frozenset(name for name in declared_names(prefix[start:]) if len(re.findall(_word(name), around)) == 1)


def renamed_invented(fill: str, prefix: str, suffix: str) -> str | None:
    """`fill` with its one invented name (a name used as a value that nothing around the
    selection declares or mentions: unknown_names) replaced by the one name the function
    declares and never uses (unused_names) that the fill does not use either: the small model
    often writes the right statement with a name of its own (`(a[idx] - minval) / scale` in a
    function whose unused parameter is `denom`). None where there is not exactly one of each,
    where the invented name is called or in a string or comment, or where the fill declares
    names (a declaration's name is engine.fill.scope.renamed_declaration's), or where the invented
    name is used as a type (a cast, a template argument; a declaration `T *p` is excluded
    above): a name of the file would not do there."""
    invented = unknown_names(fill, scope_of(prefix, suffix))
    if len(invented) != 1 or declared_names(fill):
        return None
    spare = [name for name in unused_names(prefix, suffix) if not re.search(_word(name), fill)]
    if len(spare) != 1:
        return None
    code, word = COMMENT_OR_STRING.sub(" ", fill), _word(invented[0])
    if len(re.findall(word, code)) != len(re.findall(word, fill)) or re.search(word + r"\s*[(<]", code) \
            or re.search(r"[(<]\s*" + word + r"\s*[*&]*\s*[)>]\s*[\w(]", code):
        return None   # called, in a string or comment, or used as a type (`(T)x`, `<T>(`)
    return renamed(fill, invented[0], spare[0])


def without_type(fill: str) -> str:
    """`fill` without the type its first statement declares a name with, and without
    whitespace (`i=threadIdx.x;` for `const unsigned int i = threadIdx.x;` and for
    `int i = threadIdx.x ;`): candidates that differ only there are type twins."""
    code = " ".join(fill.split())
    m = DECLARED.match(code)
    if m and m.group("type") not in NOT_TYPES and _pointer_spacing(m.group("sep")):
        code = code[m.start("name"):]
    return "".join(code.split())


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
    code = _code(suffix)
    word = _word(name)
    value = None
    if family == "bool":
        m = re.search(word + r"\s*=\s*(true|false)\b", code)
        value = m and {"true": "false", "false": "true"}[m.group(1)]
    else:
        op = None
        m = re.search(word + r"\s*(\+|-|\*|/|\||\^|<<|>>)=", code) or re.search(r"(\+\+|--)\s*" + word, code) \
            or re.search(word + r"\s*(\+\+|--)", code)
        if m:
            op = m.group(1)[0]
        else:
            for m in re.finditer(word + r"\s*=(?!=)([^;]*)", code):
                rhs = m.group(1)
                ops = r"(\+|-|\*|/|\||\^|<<|>>)"
                near = re.search(ops + r"\s*" + word + r"|" + word + r"\s*" + ops, rhs)
                if near and rhs[:near.start()].count("(") == rhs[:near.start()].count(")"):   # not in a call
                    op = (near.group(1) or near.group(2))[0]
                    break
        if op is None or op in "<>":
            return None
        one = op in "*/"
        if family == "int":
            value = "1" if one else "0"
        else:
            around = _code(prefix) + code
            literals = [m.group(0) for m in FLOAT_LITERAL.finditer(around)]
            plain = sum(not lit.lower().endswith("f") for lit in literals)
            value = ("1.0" if one else "0.0") + ("" if literals and plain > len(literals) - plain else "f")
    return f"{kind}{name} = {value};" if value else None
