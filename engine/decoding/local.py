"""The engine in this process: a checkpoint, its prompts, and block-diffusion decoding."""

from __future__ import annotations

import functools
import os
import re
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Callable

import torch

from engine.decoding.base import CancelFn, EngineBase, ProgressFn, request_task
from engine.decoding.context import fit_infill, prompt_budget
from engine.decoding.decode import decode, warm_up
from engine.decoding.memory import check_request
from engine.decoding.paths import PromptKeys
from engine.model.loading import load_checkpoint
from engine.model.routes import FALLBACK, FAST_PATHS, Routing, default_path
from engine.model.sdar import SDARConfig, SDARForCausalLM
from engine.fill.scope import (bare_type, cut_to_span, declaration_types, declared_names, declared_types, file_names,
                          first_invented, fits_span, initialized_declaration, inside_one_line, misuses_builtins,
                          must_close, needed_names, redeclared, renamed, renamed_declaration, renamed_invented,
                          scope_of, span_ended, starts_statement, type_family, uninitialized_declaration,
                          unknown_names, usage_type, without_type)
from engine.fill.spelling import code_tokens, respelled
from engine.types import Cancelled, Candidate, EngineError, EngineInfo, InfillRequest, Request

SMALL_HIDDEN = 1024
# A sampled FIM fill draws this many times the candidates asked for and keeps the best
# ranked (engine.fill.scope): a small model often invents a name, and a candidate that cannot
# compile is a wasted slot for the user.
FIM_OVERSAMPLE = 2
# When the code after the selection uses a name that nothing declares (engine.fill.scope.needed_names)
# and the draw has too few candidates that declare it, the engine draws this many times n more,
# each started with `TYPE NAME =` (the model then writes the initializer), in at most
# DECLARE_TYPES types; such a continuation is a short expression.
DECLARE_OVERSAMPLE = 2
DECLARE_TYPES = 2
# The share of those rows started with the type the code after uses the name as
# (engine.fill.scope.usage_type); the other type's rows are for a name whose uses misled it.
USED_AS_SHARE = 0.75
DECLARE_MAX_TOKENS = 32
# A sampled fill whose draw (and declaration starts) would show a candidate out of the
# selection's shape or that cannot compile (shows_bad_fills) draws FIM_OVERSAMPLE x n more,
# once, with the request's seed plus this.
TOP_UP_SEED = 101
# A sampled fill that still shows fewer than n good candidates (shows_bad_fills) and has drawn
# candidates reading a name the file does not have (engine.fill.scope.first_invented) draws, for the
# REPAIR_HEADS commonest of those candidates' texts before that name, REPAIR_ROWS short answers
# that must start with a name of the file (NameStart), and puts each name so chosen in place of
# the invented one (LocalEngine.scope_repairs). A small model writes the shape of a statement
# well and copies a distant name badly: `out[2] = attn_biasii;` where `ln_ai` was declared above.
REPAIR_HEADS = 2
REPAIR_ROWS = 2
REPAIR_SEED = 202
REPAIR_MAX_TOKENS = 8   # a name's tokens; the draw is cut after its first name
# A selection inside one line is filled with one line (engine.fill.scope.cut_to_span drops the rest),
# and a line of code is rarely longer than this: a candidate that runs on past its line stops here
# instead of at max_tokens (on a CPU, the rows that run on set a batch's time).
ONE_LINE_MAX_TOKENS = 40


class LocalEngine(EngineBase):
    """`Engine` of docs/architecture.md for a checkpoint folder loaded in this process."""

    def __init__(self, model: SDARForCausalLM, tokenizer, config: SDARConfig, name: str,
                 routing: Routing = Routing(), memory: int | None = None):
        self.model = model
        self.memory = memory  # bytes the weights and a request may take (engine.decoding.memory)
        self.tokenizer = tokenizer
        self.config = config
        self.name = name
        device = model.lm_head.weight.device
        if device.type == "cpu" and config.hidden_size <= SMALL_HIDDEN and "OMP_NUM_THREADS" not in os.environ:
            # A small model's matmuls are too small to split across threads: syncing them costs
            # more than it saves (the built-in model decoded 3x slower with 2 threads than 1).
            torch.set_num_threads(1)
        # On a GPU, where an eager step is bound by kernel launches, the fastest path
        # (engine.model.routes.default_path), unless `routing` names another.
        self.fusion = routing.fusion
        self.decode_path = routing.path or default_path(model)
        # The prompt keys of the FIM fill being served (engine.decoding.paths.PromptKeys): its
        # decodes share its prompt. Per request, not kept after it (a model of DICE's size would
        # hold hundreds of MB). Requests run one at a time (engine.serving.service).
        self.kept: PromptKeys | None = None

    @classmethod
    def from_folder(cls, folder: str | Path, device=None, dtype=None, name: str | None = None,
                    routing: Routing = Routing(), memory: int | None = None) -> "LocalEngine":
        model, tokenizer, config = load_checkpoint(folder, device, dtype, memory)
        return cls(model, tokenizer, config, name or str(folder), routing, memory)

    def warm_up(self, report: Callable[[str], None]) -> None:
        """Compile and capture the fast path's decoding step now (engine.decoding.decode.warm_up);
        a path that fails hands over to the next (FALLBACK), down to the eager `cached`."""
        while self.decode_path in FAST_PATHS:
            try:
                warm_up(self.model, self.decode_path, self.config.block_size, report=report, fusion=self.fusion)
                return
            except Exception as exc:  # noqa: BLE001 - dynamo's and the CUDA graphs' failures are of many kinds
                report(f"the {self.decode_path!r} decoding path failed ({type(exc).__name__}: {exc}); "
                       f"using {FALLBACK[self.decode_path]!r}")
                self.decode_path = FALLBACK[self.decode_path]

    def info(self) -> EngineInfo:
        weight = self.model.lm_head.weight
        dtype = str(weight.dtype).removeprefix("torch.")
        return EngineInfo(self.name, str(weight.device), self.config.block_size, self.config.prompt_format, dtype,
                          self.decode_path)

    def run(self, request: Request, on_progress: ProgressFn = None, should_cancel: CancelFn = None) -> list[Candidate]:
        """The request's n answers; a FIM fill's candidates are cut to the selection's shape
        (engine.fill.scope.cut_to_span) and written as the file writes the same code, or where it
        says nothing as most CUDA code writes it (engine.fill.spelling),
        and a sampled one draws more and keeps the best ranked."""
        # Only a FIM fill decodes more than once on its prompt (a chat checkpoint's request is
        # one decode, whose keys would only be copied for nothing).
        fim = isinstance(request, InfillRequest) and self.config.prompt_format == "fim"
        self.kept = PromptKeys() if fim else None
        try:
            return self.answer(request, on_progress, should_cancel)
        finally:
            self.kept = None

    def answer(self, request: Request, on_progress: ProgressFn, should_cancel: CancelFn) -> list[Candidate]:
        if isinstance(request, InfillRequest):
            request = self.fit_to_context(request)
            if self.config.prompt_format == "fim" and inside_one_line(request.prefix, request.suffix):
                request = replace(request, max_tokens=min(request.max_tokens, ONE_LINE_MAX_TOKENS))
        self.check_memory(request)
        if isinstance(request, InfillRequest):
            if self.config.prompt_format == "fim":
                sampled = request.sampling.temperature != 0
                drawn = self.fim_draw(request, FIM_OVERSAMPLE if sampled else 1, on_progress, should_cancel)
                if sampled:
                    drawn += self.declaring_fills(request, drawn, on_progress, should_cancel)
                    if shows_bad_fills(drawn, request.prefix, request.suffix, request.n):
                        # Fewer than n candidates in the selection's shape that can compile, and
                        # others that would take the rest of the slots. One more draw, once.
                        seed = None if request.sampling.seed is None else request.sampling.seed + TOP_UP_SEED
                        more = replace(request, sampling=replace(request.sampling, seed=seed))
                        drawn += self.fim_draw(more, FIM_OVERSAMPLE, on_progress, should_cancel)
                    if shows_bad_fills(drawn, request.prefix, request.suffix, request.n):
                        drawn += self.scope_repairs(request, drawn, on_progress, should_cancel)
                # Each in the file's spelling (engine.fill.spelling; the corpus's commoner one where
                # the file says nothing): the same statement as the file writes it, and two
                # spellings of one statement then count as one when ranked.
                spelt = [replace(c, text=respelled(c.text, request.prefix, request.suffix)) for c in drawn]
                if not sampled:
                    return spelt
                ranked = rank_in_scope(spelt, request.prefix, request.suffix)
                return with_drawn_spellings(ranked, {id(s): c for s, c in zip(spelt, drawn)}, request.n)
        return self.decode_batch(request, on_progress, should_cancel)

    def check_memory(self, request: Request) -> None:
        """EngineError, before anything is allocated, when the request's largest batch (a sampled
        FIM fill draws FIM_OVERSAMPLE rows per candidate) cannot fit in the device's memory
        (engine.decoding.memory)."""
        task = request_task(request, self.config.prompt_format, self.tokenizer.chat_template)
        prompt_tokens = len(self.tokenizer.encode(task.prompt, add_special_tokens=False))
        fim = isinstance(request, InfillRequest) and self.config.prompt_format == "fim"
        rows = FIM_OVERSAMPLE if fim and request.sampling.temperature != 0 else 1
        check_request(self.model, self.decode_path, request.n, rows, prompt_tokens, request.max_tokens,
                      request.sampling.block_size or self.config.block_size, self.memory)

    def fim_draw(self, request: InfillRequest, times: int, on_progress: ProgressFn,
                 should_cancel: CancelFn) -> list[Candidate]:
        """`times` x n candidates for a FIM fill, each cut to the selection (engine.fill.scope.cut_to_span).
        One that reads a name of its own where the function has one it never uses
        (engine.fill.scope.renamed_invented) cannot compile as drawn: a sampled one is kept (it ranks
        late) and a copy reading the function's name is added; a greedy one, the one answer, is
        renamed in place. No candidate starts with a closing bracket (closing_tokens): a fill has the
        shape of a selection, whose brackets are balanced (engine.fill.scope.fits_span), and the small
        model, at the last statement of a block, often closes the block instead of filling it;
        unless the file around the selection lacks a closing bracket (engine.fill.scope.must_close: a
        selected `}`)."""
        closing = () if must_close(request.prefix, request.suffix) else self.closing_tokens
        drawn = self.decode_batch(replace(request, n=request.n * times), on_progress, should_cancel,
                                  first_banned=closing,
                                  ended=lambda answer: span_ended(answer, request.prefix, request.suffix))
        drawn = [replace(c, text=cut_to_span(c.text, request.prefix, request.suffix)) for c in drawn]
        renamed = [renamed_invented(c.text, request.prefix, request.suffix) for c in drawn]
        if request.sampling.temperature == 0:
            return [replace(c, text=r) if r else c for c, r in zip(drawn, renamed)]
        return drawn + [replace(c, text=r) for c, r in zip(drawn, renamed) if r]

    def declaring_fills(self, request: InfillRequest, drawn: list[Candidate], on_progress: ProgressFn,
                        should_cancel: CancelFn) -> list[Candidate]:
        """More candidates for a selection that must declare a name the code after it uses
        (engine.fill.scope.needed_names) when fewer than n distinct drawn ones declare it with a type
        of the family the code after uses it as (engine.fill.scope.usage_type): each starts with
        `TYPE NAME =` (declaration_types: the type it is used as, then the drawn candidates'
        types), the model writes the rest, and the statement gets its `;` if the model stopped
        before it. Written without the model, first: `TYPE a, b;` where the code after assigns
        the names before it reads them (engine.fill.scope.uninitialized_declaration), `TYPE x = 0;`
        where it updates the name from itself (`x += v;`: engine.fill.scope.initialized_declaration);
        and each drawn declaration of a name the file never mentions, renamed to declare the
        needed one (engine.fill.scope.renamed_declaration)."""
        prefix, suffix = request.prefix, request.suffix
        needed = needed_names(prefix, suffix)
        if not needed or not starts_statement(prefix):
            return []
        families = used_families(needed, prefix, suffix)
        uninitialized = uninitialized_declaration(needed, prefix, suffix)
        found = [Candidate(uninitialized, 0, 0, 0.0, "eos", uninitialized)] if uninitialized else []
        if len(needed) == 1:
            initialized = initialized_declaration(needed[0], prefix, suffix)
            if initialized:
                found.append(Candidate(initialized, 0, 0, 0.0, "eos", initialized))
            for c in drawn:
                renamed = renamed_declaration(c.text, needed[0], prefix, suffix)
                if renamed:
                    found.append(replace(c, text=renamed))
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
            for c in self.decode_batch(started, on_progress, should_cancel, ended=lambda answer: "\n" in answer):
                rest = c.text.split("\n", 1)[0].strip()
                if not rest or rest.startswith(("=", ";")):
                    continue
                text = f"{head} {rest}"
                if rest[-1].isalnum() or rest[-1] in "_)]'\"" or re.search(r"\d\.$", rest):   # not `i * n +`
                    text += ";"
                found.append(replace(c, text=cut_to_span(text, prefix, suffix)))
        return found

    def scope_repairs(self, request: InfillRequest, drawn: list[Candidate], on_progress: ProgressFn,
                      should_cancel: CancelFn) -> list[Candidate]:
        """Drawn candidates that read a name the file does not have (engine.fill.scope.first_invented),
        with that name replaced by one the model chooses among the file's names: for the
        REPAIR_HEADS commonest texts before such a name, REPAIR_ROWS short draws that must start
        with a name of the file (NameStart: token by token among the names' tokens), each name
        so drawn put in place of the invented one in every drawn candidate with that text before
        it. `out[2] = attn_biasii;` where `ln_ai` was declared above becomes `out[2] = ln_ai;` if
        the model chooses `ln_ai` there."""
        prefix, suffix = request.prefix, request.suffix
        scope, names = scope_of(prefix, suffix), sorted(file_names(prefix, suffix))
        if not names:   # nothing to choose from (NameStart would ban every token)
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
            start = NameStart([self.tokenizer.encode(lead + name, add_special_tokens=False) for name in names],
                              self.word_tokens, self.config.vocab_size)
            seed = None if request.sampling.seed is None else request.sampling.seed + REPAIR_SEED + k
            started = replace(request, prefix=prefix + head.removesuffix(" "), n=REPAIR_ROWS,
                              sampling=replace(request.sampling, seed=seed), max_tokens=REPAIR_MAX_TOKENS)
            chosen = dict.fromkeys(m.group(1) for c in self.decode_batch(started, on_progress, should_cancel,
                                                                         start_constraint=start)
                                   if (m := re.match(r"\s*([A-Za-z_]\w*)", c.text)) and m.group(1) in names)
            for name in chosen:
                for bad, rest in dict.fromkeys(invented[head]):
                    text = head + name + renamed(rest, bad, name)
                    found.append(Candidate(text, 0, 0, 0.0, "eos", text))
        return found

    @functools.cached_property
    def word_tokens(self) -> list[int]:
        """The tokens whose text starts with a word character (they would go on with a name)."""
        return [i for i, text in enumerate(self.token_texts) if text[:1].isalnum() or text[:1] == "_"]

    @functools.cached_property
    def token_texts(self) -> list[str]:
        """Each token's text, by id."""
        return [self.tokenizer.decode([i]) for i in range(len(self.tokenizer))]

    @functools.cached_property
    def closing_tokens(self) -> list[int]:
        """The tokens whose text, leading whitespace aside, starts with `}`, `)` or `]`."""
        return [i for i, text in enumerate(self.token_texts) if text.lstrip()[:1] in ("}", ")", "]")]

    def decode_batch(self, request: Request, on_progress: ProgressFn, should_cancel: CancelFn,
                     first_banned: list[int] | tuple = (),
                     start_constraint: NameStart | None = None,
                     ended: Callable[[str], bool] | None = None) -> list[Candidate]:
        """Decode the request's n answers as one batch (none starting with a `first_banned` token;
        each starting as `start_constraint` allows; each done once `ended` says so of its text:
        engine.decoding.decode.decode)."""
        task = request_task(request, self.config.prompt_format, self.tokenizer.chat_template)
        ids = self.tokenizer.encode(task.prompt, add_special_tokens=False)
        args = dict(n=request.n, max_tokens=request.max_tokens, sampling=request.sampling,
                    stop_ids=self.config.eos_token_ids, on_progress=on_progress, should_cancel=should_cancel,
                    first_banned=first_banned, start_constraint=start_constraint, kept=self.kept, fusion=self.fusion,
                    ended=None if ended is None else
                    lambda tokens: ended(self.tokenizer.decode(tokens, skip_special_tokens=True)))
        try:
            result = decode(self.model, ids, path=self.decode_path, **args)
        except Cancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - dynamo's failures are not all RuntimeErrors
            if self.decode_path not in FAST_PATHS:
                raise
            # A GPU whose stack cannot capture or compile the step still decodes, slower.
            print(f"dice engine: the {self.decode_path!r} decoding path failed ({type(exc).__name__}: {exc}); "
                  "using the plain cached path from now on", file=sys.stderr)
            self.decode_path = "cached"
            result = decode(self.model, ids, path=self.decode_path, **args)
        candidates = []
        for tokens, reason in zip(result.tokens, result.finish_reasons):
            raw = self.tokenizer.decode(tokens, skip_special_tokens=True)
            text, extraction = task.to_text(raw)
            candidates.append(Candidate(text, len(tokens), result.steps, result.seconds, reason, raw, extraction))
        return candidates

    @property
    def context(self) -> int:
        """The tokens a prompt and its answer may take: the model's positions, or fewer where the
        checkpoint says it was trained on shorter sequences (config `trained_context`, written by
        engine.training.train: the built-in model saw 1024-token examples; past them its fills get worse,
        and slower)."""
        trained = self.config.extra.get("trained_context")
        positions = self.config.max_position_embeddings
        return min(positions, trained) if isinstance(trained, int) and trained > 0 else positions

    def fit_to_context(self, request: InfillRequest) -> InfillRequest:
        """The request with prefix and suffix cut to the lines nearest the span when the whole
        file does not fit the model's context (engine.decoding.context; `context`)."""
        def prompt_tokens(prefix: str, suffix: str) -> int:
            task = request_task(replace(request, prefix=prefix, suffix=suffix), self.config.prompt_format,
                                self.tokenizer.chat_template)
            return len(self.tokenizer.encode(task.prompt, add_special_tokens=False))

        def line_tokens(lines: list[str]) -> list[int]:
            return [len(ids) for ids in self.tokenizer(lines, add_special_tokens=False)["input_ids"]] if lines else []

        block_size = request.sampling.block_size or self.config.block_size
        budget = prompt_budget(self.context, block_size, request.max_tokens)
        if budget <= 0:
            raise EngineError(f"max_tokens {request.max_tokens} is not less than the model's context of "
                              f"{self.context} tokens, which must also hold the prompt: ask for fewer tokens")
        prefix, suffix = fit_infill(request.prefix, request.suffix, budget=budget, prompt_tokens=prompt_tokens,
                                    line_tokens=line_tokens)
        return replace(request, prefix=prefix, suffix=suffix)


class NameStart:
    """engine.decoding.decode.decode's start_constraint for an answer that must start with one of some
    names, each given as its tokens: a trie of them. Inside a name only the tokens that go on
    with one are allowed; after a whole name, a token that goes on with a longer name or one that
    does not start with a word character (`ln_ai` must not become `ln_aiii`); then the answer is
    free."""

    def __init__(self, names: list[list[int]], word_tokens: list[int], vocab_size: int):
        self.root: dict = {}
        for tokens in names:
            node = self.root
            for t in tokens:
                node = node.setdefault(t, {})
            node[None] = True   # a whole name ends here
        self.word_tokens = torch.tensor(word_tokens, dtype=torch.long)
        self.vocab_size = vocab_size

    def __call__(self, tokens: list[int]) -> torch.Tensor | None:
        node = self.root
        for t in tokens:
            if t not in node:   # what followed a whole name: the answer is free
                return None
            node = node[t]
        banned = torch.ones(self.vocab_size, dtype=torch.bool)
        if None in node:   # a whole name: anything but more of a name not in the trie
            banned[:] = False
            banned[self.word_tokens] = True
        children = [t for t in node if t is not None]
        if children:
            banned[torch.tensor(children)] = False
        return banned


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
    built-in used as no code can (engine.fill.scope); then those that declare the needed names with
    a type of the family the code after uses them as (engine.fill.scope.usage_type: `bool` for a
    flag, not `int64_t`); then those that are no type twin of one ranked before them
    (engine.fill.scope.without_type: the slots go to different statements, not to `int i = e;`,
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
    """Nothing in `fill` says it cannot compile (engine.fill.scope): its names are all in `scope` (or
    declared by it), it declares the `needed` names, it declares no name of its block again,
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
    """The type family (engine.fill.scope.type_family) each needed name is used as after the
    selection (engine.fill.scope.usage_type), for those whose uses say."""
    return {name: type_family(kind) for name in names if (kind := usage_type(name, prefix, suffix))}


def mistyped(fill: str, families: dict[str, str]) -> bool:
    """`fill` declares one of the names with a type of another family than it is used as
    (`int64_t flag = 0;` for a name the code after sets to `true`)."""
    declares = declared_types(fill)
    return any(name in declares and type_family(declares[name]) != family for name, family in families.items())

