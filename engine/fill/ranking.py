"""Which of a sampled fill's candidates the user sees, in what order: distinct ones in the
selection's shape that can compile first, then the better typed declarations, then those the
model drew more often."""

from __future__ import annotations

from collections import Counter

from engine.fill.declarations import declared_names, declared_types, redeclared, without_type
from engine.fill.names import misuses_builtins, needed_names, scope_of, unknown_names
from engine.fill.spans import fits_span
from engine.fill.spelling import code_tokens
from engine.fill.usage import bare_type, type_family, usage_type
from engine.types import Candidate


def normalized(text: str) -> str:
    """`text` as its C tokens one space apart: candidates that differ only in whitespace are one
    (`a*b` and `a * b` too, which would otherwise take two of the n slots)."""
    return " ".join(code_tokens(text))


def with_drawn_spellings(ranked: list[Candidate], drawn_as: dict[int, Candidate], n: int) -> list[Candidate]:
    """The first n of `ranked` (candidates in the file's spelling, engine.fill.spelling); where fewer
    than n of them differ (whitespace aside), the model's own spelling of a rewritten one
    (`drawn_as`: each candidate's drawn text by id) takes a slot that a repeat would have
    taken: respelling merges twins, and the user still gets n different candidates where the
    model drew them."""
    seen: set[str] = set()
    distinct, repeats = [], []
    for c in ranked:
        (repeats if normalized(c.text) in seen else distinct).append(c)
        seen.add(normalized(c.text))
    spare = []
    for c in ranked:
        own = drawn_as.get(id(c), c)
        if normalized(own.text) not in seen:
            seen.add(normalized(own.text))
            spare.append(own)
    return (distinct + spare + repeats)[:n]


def rank_in_scope(candidates: list[Candidate], prefix: str, suffix: str) -> list[Candidate]:
    """Candidates reordered (stably): distinct ones first (whitespace aside); among them those
    in the shape of the selection, then those that can compile: names all in scope, the names
    the code after the selection needs declared, no name of the block declared again, no
    built-in used as no code can (engine.fill.names, declarations, spans); then those that declare the needed names with
    a type of the family the code after uses them as (engine.fill.usage.usage_type: `bool` for a
    flag, not `int64_t`); then those that are no type twin of one ranked before them
    (engine.fill.declarations.without_type: the slots go to different statements, not to `int i = e;`,
    `unsigned int i = e;` and `int i=e;`); then those that declare the needed names with the
    very type (const aside) the code after uses them as (`int` in a file of `int` values, not
    `unsigned int`); then those the model drew more often (the samples' agreement: the
    commonest answer is the likeliest)."""
    scope = scope_of(prefix, suffix)
    needed = set(needed_names(prefix, suffix))
    families = used_families(needed, prefix, suffix)
    kinds = {name: bare_type(kind) for name in needed if (kind := usage_type(name, prefix, suffix))}
    seen: set[str] = set()
    drawn = Counter(normalized(c.text) for c in candidates)

    def key(c: Candidate) -> tuple[bool, bool, bool, bool, bool, int]:
        text = normalized(c.text)
        repeat = text in seen
        seen.add(text)
        cannot = not can_compile(c.text, prefix, suffix, scope, needed)
        declares = declared_types(c.text)
        other = any(name in declares and bare_type(declares[name]) != kind for name, kind in kinds.items())
        return repeat, not fits_span(c.text, prefix, suffix), cannot, mistyped(c.text, families), other, -drawn[text]

    ranked = sorted(zip([key(c) for c in candidates], candidates), key=lambda pair: pair[0])
    cores: set[tuple] = set()
    keyed = []
    for k, c in ranked:
        core = (k[:4], without_type(c.text))
        keyed.append((k[:4] + (core in cores,) + k[4:], c))
        cores.add(core)
    return [c for _, c in sorted(keyed, key=lambda pair: pair[0])]


def can_compile(fill: str, prefix: str, suffix: str, scope: frozenset[str], needed: set[str]) -> bool:
    """Nothing in `fill` says it cannot compile (engine.fill.names, engine.fill.declarations): its
    names are all in `scope` (or declared by it), it declares the `needed` names, it declares no name of its block again,
    and it uses no built-in as no code can."""
    return not (unknown_names(fill, scope) or needed - declared_names(fill) or redeclared(fill, prefix, suffix)
                or misuses_builtins(fill))


def shows_bad_fills(candidates: list[Candidate], prefix: str, suffix: str, n: int) -> bool:
    """Whether n slots filled from `candidates` would show one out of the selection's shape or
    that cannot compile (can_compile): fewer than n different good ones (whitespace aside), and
    a different bad one to take a slot. A draw that agrees on one good answer shows that answer
    once (its repeats are no other candidate) and needs no more."""
    scope, needed = scope_of(prefix, suffix), set(needed_names(prefix, suffix))
    texts = {normalized(c.text) for c in candidates}
    good = {normalized(c.text) for c in candidates
            if fits_span(c.text, prefix, suffix) and can_compile(c.text, prefix, suffix, scope, needed)}
    return len(good) < n and len(texts) > len(good)


def used_families(names, prefix: str, suffix: str) -> dict[str, str]:
    """The type family (engine.fill.usage.type_family) each needed name is used as after the
    selection (engine.fill.usage.usage_type), for those whose uses say."""
    return {name: type_family(kind) for name in names if (kind := usage_type(name, prefix, suffix))}


def mistyped(fill: str, families: dict[str, str]) -> bool:
    """`fill` declares one of the names with a type of another family than it is used as
    (`int64_t flag = 0;` for a name the code after sets to `true`)."""
    declares = declared_types(fill)
    return any(name in declares and type_family(declares[name]) != family for name, family in families.items())

