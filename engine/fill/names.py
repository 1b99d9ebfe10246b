"""Names a fill uses that its file does not have: the small FIM model's commonest mistake.

A fill replaces a selection inside code that already declares everything the selection may
use. An identifier in a candidate that is neither in the prefix or suffix, nor a C++/CUDA
keyword or built-in, nor declared by the candidate itself, is almost surely invented (`b` in
saxpy's `y[i] = a * x[i] + b * y[i];`) and the candidate will not compile
(engine.fill.ranking ranks in-scope candidates first). A selection whose suffix reads a name
nothing declares (`needed_names`) held its declaration. Where a fill invents a name the file
has a use for, it is renamed to that one (`renamed_invented`, `renamed_declaration`).
"""

from __future__ import annotations

import functools
import re

from engine.fill.declarations import DECLARED, STORAGE, declaration, declared_names, function_start, \
    further_declarators, pointer_spacing
from engine.fill.source import COMMENT_OR_STRING, PREPROCESSOR_LINE, balanced, blanked, code_only, word

IDENTIFIER = re.compile(r"(?<![\w.>:])([A-Za-z_]\w*)")   # not a member (x.y, p->y, ns::y)


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


def renamed(code: str, old: str, new: str) -> str:
    """`code` with the name `old` (as a name of its own: engine.fill.source.word) written `new` wherever it occurs."""
    return re.sub(word(old), new, code)


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
    code = blanked(fill)
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


def _uses_as_value(code: str, end: int) -> bool:
    """The identifier ending at `end` is used as a value: not called (`f(`, `f<T>(`), not a
    namespace or class (`ns::`), not a type (`T x`, `T *p`)."""
    after = code[end:]
    if re.match(r"\s*(?:\(|::|<[^;{}()]*>\s*\(|[A-Za-z_])", after):
        return False
    star = re.match(r"(\s*[*&]+\s*)[A-Za-z_]\w*\s*[=;,)\[]", after)
    return not (star and pointer_spacing(star.group(1)))


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


@functools.lru_cache(maxsize=16)   # asked for each candidate of a fill (renamed_invented)
def unused_names(prefix: str, suffix: str) -> frozenset[str]:
    """Names the function around the selection declares (its parameters, the locals before the
    selection) that the code around the selection mentions nowhere but in their declaration:
    code declares a name to use it, so such a name is one the selection may use (`denom` in
    `func(float *a, int N, float minval, int denom)` whose body reads it nowhere else)."""
    start = function_start(prefix)
    if start is None:
        return frozenset()
    around = code_only(prefix) + "\n" + code_only(suffix)
    return frozenset(name for name in declared_names(prefix[start:]) if len(re.findall(word(name), around)) == 1)


def renamed_invented(fill: str, prefix: str, suffix: str) -> str | None:
    """`fill` with its one invented name (a name used as a value that nothing around the
    selection declares or mentions: unknown_names) replaced by the one name the function
    declares and never uses (unused_names) that the fill does not use either: the small model
    often writes the right statement with a name of its own (`(a[idx] - minval) / scale` in a
    function whose unused parameter is `denom`). None where there is not exactly one of each,
    where the invented name is called or in a string or comment, or where the fill declares
    names (a declaration's name is renamed_declaration's), or where the invented
    name is used as a type (a cast, a template argument; a declaration `T *p` is excluded
    above): a name of the file would not do there."""
    invented = unknown_names(fill, scope_of(prefix, suffix))
    if len(invented) != 1 or declared_names(fill):
        return None
    spare = [name for name in unused_names(prefix, suffix) if not re.search(word(name), fill)]
    if len(spare) != 1:
        return None
    code, pattern = COMMENT_OR_STRING.sub(" ", fill), word(invented[0])
    if len(re.findall(pattern, code)) != len(re.findall(pattern, fill)) or re.search(pattern + r"\s*[(<]", code) \
            or re.search(r"[(<]\s*" + pattern + r"\s*[*&]*\s*[)>]\s*[\w(]", code):
        return None   # called, in a string or comment, or used as a type (`(T)x`, `<T>(`)
    return renamed(fill, invented[0], spare[0])


def renamed_declaration(fill: str, name: str, prefix: str, suffix: str) -> str | None:
    """`fill` declaring `name` instead of the one name it declares, where that is a name the
    code around the selection never mentions (`int index = blockDim.x * blockIdx.x + threadIdx.x;`
    for a selection whose suffix reads `xIndex` and no `index`: the small model often knows the
    expression but not the file's name for it); None for any other fill: not one `T x = ...;`
    statement, a name the code around uses, or one the fill's expression reads."""
    code = COMMENT_OR_STRING.sub(" ", fill)
    m = DECLARED.match(code)
    if not declaration(m) or m.group("end") != "=" or STORAGE.search(code[:m.start("name")]):
        return None
    old = m.group("name")
    rest = code[m.end():].strip()
    if old == name or old in scope_of(prefix, suffix) or not rest.endswith(";") or rest.count(";") > 1 \
            or re.search(word(old), rest) or further_declarators(code, m.end("name")) \
            or not balanced(rest):
        return None
    return fill[:m.start("name")] + name + fill[m.end("name"):]
