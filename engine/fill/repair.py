"""A FIM fill's policy: how many candidates to draw, which further draws a poor draw gets (the
declaration the code after needs, one top-up, a name of the file where one was invented), and
what the user is shown (cut to the selection, in the file's spelling, ranked).

The policy draws through a `Drawer` it is handed (the local engine's decoding), and never calls
back into the engine otherwise: everything it decides is about the text, and each draw is a
request and a few constraints on its first tokens.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable, Protocol, Sequence

from engine.fill.declarations import declaration_types, declared_names
from engine.fill.names import file_names, first_invented, needed_names, renamed, renamed_declaration, \
    renamed_invented, scope_of
from engine.fill.ranking import mistyped, normalized, rank_in_scope, shows_bad_fills, used_families, \
    with_drawn_spellings
from engine.fill.spans import cut_to_span, fits_span, inside_one_line, must_close, span_ended, starts_statement
from engine.fill.spelling import respelled
from engine.fill.usage import initialized_declaration, uninitialized_declaration, usage_type
from engine.types import Candidate, InfillRequest

# A sampled FIM fill draws this many times the candidates asked for and keeps the best
# ranked (engine.fill.ranking): a small model often invents a name, and a candidate that cannot
# compile is a wasted slot for the user.
FIM_OVERSAMPLE = 2
# When the code after the selection uses a name that nothing declares (engine.fill.names.needed_names)
# and the draw has too few candidates that declare it, the policy draws this many times n more,
# each started with `TYPE NAME =` (the model then writes the initializer), in at most
# DECLARE_TYPES types; such a continuation is a short expression.
DECLARE_OVERSAMPLE = 2
DECLARE_TYPES = 2
# The share of those rows started with the type the code after uses the name as
# (engine.fill.usage.usage_type); the other type's rows are for a name whose uses misled it.
USED_AS_SHARE = 0.75
DECLARE_MAX_TOKENS = 32
# A sampled fill whose draw (and declaration starts) would show a candidate out of the
# selection's shape or that cannot compile (shows_bad_fills) draws FIM_OVERSAMPLE x n more,
# once, with the request's seed plus this.
TOP_UP_SEED = 101
# A sampled fill that still shows fewer than n good candidates (shows_bad_fills) and has drawn
# candidates reading a name the file does not have (engine.fill.names.first_invented) draws, for the
# REPAIR_HEADS commonest of those candidates' texts before that name, REPAIR_ROWS short answers
# that must start with a name of the file (Drawer.name_start), and puts each name so chosen in
# place of the invented one (scope_repairs). A small model writes the shape of a statement
# well and copies a distant name badly: `out[2] = attn_biasii;` where `ln_ai` was declared above.
REPAIR_HEADS = 2
REPAIR_ROWS = 2
REPAIR_SEED = 202
REPAIR_MAX_TOKENS = 8   # a name's tokens; the draw is cut after its first name
# A selection inside one line is filled with one line (engine.fill.spans.cut_to_span drops the rest),
# and a line of code is rarely longer than this: a candidate that runs on past its line stops here
# instead of at max_tokens (on a CPU, the rows that run on set a batch's time).
ONE_LINE_MAX_TOKENS = 40


class Drawer(Protocol):
    """What the policy needs of a model: a draw of a request's n answers as one batch (none
    starting with a `first_banned` token; each starting as `start_constraint` allows; each done
    once `ended` says so of its text), the tokens that close a bracket, and a start constraint
    for answers that must begin with one of some names."""

    closing_tokens: Sequence[int]

    def draw(self, request: InfillRequest, *, first_banned: Sequence[int] = (), start_constraint=None,
             ended: Callable[[str], bool] | None = None) -> list[Candidate]: ...

    def name_start(self, names: list[str]): ...


def fim_request(request: InfillRequest) -> InfillRequest:
    """The request as a FIM fill decodes it: a selection inside one line takes at most
    ONE_LINE_MAX_TOKENS (what the engine reckons memory for, too)."""
    if inside_one_line(request.prefix, request.suffix):
        return replace(request, max_tokens=min(request.max_tokens, ONE_LINE_MAX_TOKENS))
    return request


def fim_fill(request: InfillRequest, drawer: Drawer) -> list[Candidate]:
    """The request's n answers: candidates cut to the selection's shape (engine.fill.spans.cut_to_span)
    and written as the file writes the same code, or where it says nothing as most CUDA code
    writes it (engine.fill.spelling); a sampled fill draws more and keeps the best ranked."""
    request = fim_request(request)
    sampled = request.sampling.temperature != 0
    drawn = fim_draw(request, FIM_OVERSAMPLE if sampled else 1, drawer)
    if sampled:
        drawn += declaring_fills(request, drawn, drawer)
        if shows_bad_fills(drawn, request.prefix, request.suffix, request.n):
            # Fewer than n candidates in the selection's shape that can compile, and
            # others that would take the rest of the slots. One more draw, once.
            seed = None if request.sampling.seed is None else request.sampling.seed + TOP_UP_SEED
            more = replace(request, sampling=replace(request.sampling, seed=seed))
            drawn += fim_draw(more, FIM_OVERSAMPLE, drawer)
        if shows_bad_fills(drawn, request.prefix, request.suffix, request.n):
            drawn += scope_repairs(request, drawn, drawer)
    # Each in the file's spelling (engine.fill.spelling; the corpus's commoner one where the
    # file says nothing): the same statement as the file writes it, and two spellings of one
    # statement then count as one when ranked.
    spelt = [replace(c, text=respelled(c.text, request.prefix, request.suffix)) for c in drawn]
    if not sampled:
        return spelt
    ranked = rank_in_scope(spelt, request.prefix, request.suffix)
    return with_drawn_spellings(ranked, {id(s): c for s, c in zip(spelt, drawn)}, request.n)


def fim_draw(request: InfillRequest, times: int, drawer: Drawer) -> list[Candidate]:
    """`times` x n candidates for a FIM fill, each cut to the selection (engine.fill.spans.cut_to_span).
    One that reads a name of its own where the function has one it never uses
    (engine.fill.names.renamed_invented) cannot compile as drawn: a sampled one is kept (it ranks
    late) and a copy reading the function's name is added; a greedy one, the one answer, is
    renamed in place. No candidate starts with a closing bracket (Drawer.closing_tokens): a fill
    has the shape of a selection, whose brackets are balanced (engine.fill.spans.fits_span), and
    the small model, at the last statement of a block, often closes the block instead of filling
    it; unless the file around the selection lacks a closing bracket (engine.fill.spans.must_close:
    a selected `}`)."""
    closing = () if must_close(request.prefix, request.suffix) else drawer.closing_tokens
    drawn = drawer.draw(replace(request, n=request.n * times), first_banned=closing,
                        ended=lambda answer: span_ended(answer, request.prefix, request.suffix))
    drawn = [replace(c, text=cut_to_span(c.text, request.prefix, request.suffix)) for c in drawn]
    renamed_fills = [renamed_invented(c.text, request.prefix, request.suffix) for c in drawn]
    if request.sampling.temperature == 0:
        return [replace(c, text=r) if r else c for c, r in zip(drawn, renamed_fills)]
    return drawn + [replace(c, text=r) for c, r in zip(drawn, renamed_fills) if r]


def written(text: str) -> Candidate:
    """A candidate the policy wrote itself, not drawn: no tokens, no decoding time."""
    return Candidate(text, 0, 0, 0.0, "eos", text)


def declaring_fills(request: InfillRequest, drawn: list[Candidate], drawer: Drawer) -> list[Candidate]:
    """More candidates for a selection that must declare a name the code after it uses
    (engine.fill.names.needed_names) when fewer than n distinct drawn ones declare it with a type
    of the family the code after uses it as (engine.fill.usage.usage_type): each starts with
    `TYPE NAME =` (declaration_types: the type it is used as, then the drawn candidates'
    types), the model writes the rest, and the statement gets its `;` if the model stopped
    before it. Written without the model, first: `TYPE a, b;` where the code after assigns
    the names before it reads them (engine.fill.usage.uninitialized_declaration), `TYPE x = 0;`
    where it updates the name from itself (`x += v;`: engine.fill.usage.initialized_declaration);
    and each drawn declaration of a name the file never mentions, renamed to declare the
    needed one (engine.fill.names.renamed_declaration)."""
    prefix, suffix = request.prefix, request.suffix
    needed = needed_names(prefix, suffix)
    if not needed or not starts_statement(prefix):
        return []
    families = used_families(needed, prefix, suffix)
    uninitialized = uninitialized_declaration(needed, prefix, suffix)
    found = [written(uninitialized)] if uninitialized else []
    if len(needed) == 1:
        initialized = initialized_declaration(needed[0], prefix, suffix)
        if initialized:
            found.append(written(initialized))
        for c in drawn:
            renamed_fill = renamed_declaration(c.text, needed[0], prefix, suffix)
            if renamed_fill:
                found.append(replace(c, text=renamed_fill))
    declaring = {normalized(c.text) for c in drawn
                 if set(needed) <= declared_names(c.text) and fits_span(c.text, prefix, suffix)
                 and not mistyped(c.text, families)}
    if len(declaring) >= request.n:
        return found
    used_as = usage_type(needed[0], prefix, suffix)
    types = declaration_types([c.text for c in drawn], prefix, DECLARE_TYPES, used_as=used_as)
    rows = request.n * DECLARE_OVERSAMPLE
    counts = [max(1, round(rows * USED_AS_SHARE)) if len(types) > 1 else rows] if used_as else []
    left, others = rows - sum(counts), len(types) - len(counts)
    counts += [left // others + (k < left % others) for k in range(others)]
    for k, (kind, count) in enumerate(zip(types, counts)):
        if not count:  # one candidate asked for: two rows, both the used type's
            continue
        head = f"{kind}{needed[0]} ="
        seed = None if request.sampling.seed is None else request.sampling.seed + k + 1
        started = replace(request, prefix=prefix + head, n=count, sampling=replace(request.sampling, seed=seed),
                          max_tokens=min(request.max_tokens, DECLARE_MAX_TOKENS))
        # Only the answer's first line is used: a row is done once it is whole.
        for c in drawer.draw(started, ended=lambda answer: "\n" in answer):
            rest = c.text.split("\n", 1)[0].strip()
            if not rest or rest.startswith(("=", ";")):
                continue
            text = f"{head} {rest}"
            if rest[-1].isalnum() or rest[-1] in "_)]'\"" or re.search(r"\d\.$", rest):   # not `i * n +`
                text += ";"
            found.append(replace(c, text=cut_to_span(text, prefix, suffix)))
    return found


def scope_repairs(request: InfillRequest, drawn: list[Candidate], drawer: Drawer) -> list[Candidate]:
    """Drawn candidates that read a name the file does not have (engine.fill.names.first_invented),
    with that name replaced by one the model chooses among the file's names: for the
    REPAIR_HEADS commonest texts before such a name, REPAIR_ROWS short draws that must start
    with a name of the file (Drawer.name_start: token by token among the names' tokens), each
    name so drawn put in place of the invented one in every drawn candidate with that text
    before it. `out[2] = attn_biasii;` where `ln_ai` was declared above becomes
    `out[2] = ln_ai;` if the model chooses `ln_ai` there."""
    prefix, suffix = request.prefix, request.suffix
    scope, names = scope_of(prefix, suffix), sorted(file_names(prefix, suffix))
    if not names:   # nothing to choose from (a start among no names would ban every token)
        return []
    invented: dict[str, list[tuple[str, str]]] = {}
    for c in drawn:
        found_name = first_invented(c.text, scope)
        if found_name is not None and fits_span(c.text, prefix, suffix):
            head, name = found_name
            invented.setdefault(head, []).append((name, c.text[len(head) + len(name):]))
    heads = sorted(invented, key=lambda h: -len(invented[h]))[:REPAIR_HEADS]
    found = []
    for k, head in enumerate(heads):
        # The space before a name is the name's first token's (` ln`), as the corpus has it.
        lead = " " if head.endswith(" ") else ""
        start = drawer.name_start([lead + name for name in names])
        seed = None if request.sampling.seed is None else request.sampling.seed + REPAIR_SEED + k
        started = replace(request, prefix=prefix + head.removesuffix(" "), n=REPAIR_ROWS,
                          sampling=replace(request.sampling, seed=seed), max_tokens=REPAIR_MAX_TOKENS)
        chosen = dict.fromkeys(m.group(1) for c in drawer.draw(started, start_constraint=start)
                               if (m := re.match(r"\s*([A-Za-z_]\w*)", c.text)) and m.group(1) in names)
        for name in chosen:
            for bad, rest in dict.fromkeys(invented[head]):
                found.append(written(head + name + renamed(rest, bad, name)))
    return found
