"""The engine in this process: a checkpoint, its prompts, and block-diffusion decoding."""

from __future__ import annotations

import functools
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import torch

from engine.decoding.base import CancelFn, EngineBase, ProgressFn, request_task
from engine.decoding.context import fit_infill, prompt_budget
from engine.decoding.decode import decode, warm_up
from engine.decoding.memory import check_request
from engine.decoding.paths import PromptKeys
from engine.model.compile_cache import WarmRecords, use_persistent_caches, warm_key
from engine.model.loading import load_checkpoint
from engine.model.routes import FALLBACK, FAST_PATHS, Routing, default_path
from engine.model.sdar import SDARConfig, SDARForCausalLM
from engine.fill.repair import FIM_OVERSAMPLE, fim_fill, fim_request
from engine.types import Cancelled, Candidate, EngineError, EngineInfo, InfillRequest, Request

SMALL_HIDDEN = 1024


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

    def warm_up(self, report: Callable[[str], None], records: WarmRecords | None = None) -> None:
        """Compile and capture the fast path's decoding step now (engine.decoding.decode.warm_up);
        a path that fails hands over to the next (FALLBACK), down to the eager `cached`. The
        compilers' caches are kept under the user's cache folder (compile_cache.use_persistent_caches),
        and each path's outcome in `records` (compile_cache.WarmRecords(): the user's): a path
        that failed for this GPU, model shape, versions and source is not compiled again."""
        if self.decode_path not in FAST_PATHS:
            return
        use_persistent_caches()
        records = records or WarmRecords()
        weight = self.model.lm_head.weight
        while self.decode_path in FAST_PATHS:
            key = warm_key(self.config, weight.dtype, weight.device, self.decode_path, self.fusion)
            known = records.get(key)
            if known is not None and not known["ok"]:
                report(f"the {self.decode_path!r} decoding path failed here before ({known['reason']}); "
                       f"using {FALLBACK[self.decode_path]!r}")
                self.decode_path = FALLBACK[self.decode_path]
                continue
            started = time.perf_counter()
            try:
                warm_up(self.model, self.decode_path, self.config.block_size, report=report, fusion=self.fusion)
                records.put(key, True, time.perf_counter() - started)
                return
            except Exception as exc:  # noqa: BLE001 - dynamo's and the CUDA graphs' failures are of many kinds
                reason = f"{type(exc).__name__}: {exc}"
                if not isinstance(exc, torch.cuda.OutOfMemoryError):  # the memory another process held
                    records.put(key, False, time.perf_counter() - started, reason[:500])
                report(f"the {self.decode_path!r} decoding path failed ({reason}); "
                       f"using {FALLBACK[self.decode_path]!r}")
                self.decode_path = FALLBACK[self.decode_path]

    def info(self) -> EngineInfo:
        weight = self.model.lm_head.weight
        dtype = str(weight.dtype).removeprefix("torch.")
        return EngineInfo(self.name, str(weight.device), self.config.block_size, self.config.prompt_format, dtype,
                          self.decode_path)

    def run(self, request: Request, on_progress: ProgressFn = None, should_cancel: CancelFn = None) -> list[Candidate]:
        """The request's n answers; a FIM fill's are chosen by the fill policy (engine.fill.repair),
        which draws through this engine's decoding (LocalDrawer)."""
        # Only a FIM fill decodes more than once on its prompt (a chat checkpoint's request is
        # one decode, whose keys would only be copied for nothing).
        fim = isinstance(request, InfillRequest) and self.config.prompt_format == "fim"
        self.kept = PromptKeys() if fim else None
        try:
            if isinstance(request, InfillRequest):
                request = self.fit_to_context(request)
            self.check_memory(fim_request(request) if fim else request)
            if fim:
                return fim_fill(request, self.drawer(on_progress, should_cancel))
            return self.decode_batch(request, on_progress, should_cancel)
        finally:
            self.kept = None

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

    def drawer(self, on_progress: ProgressFn = None, should_cancel: CancelFn = None) -> "LocalDrawer":
        """This engine's decoding as the fill policy draws with it (engine.fill.repair.Drawer)."""
        return LocalDrawer(self, on_progress, should_cancel)

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
        training.train: the built-in model saw 1024-token examples; past them its fills get worse,
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


@dataclass
class LocalDrawer:
    """engine.fill.repair.Drawer over a LocalEngine, for one request's progress and cancel."""

    engine: LocalEngine
    on_progress: ProgressFn = None
    should_cancel: CancelFn = None

    @property
    def closing_tokens(self) -> list[int]:
        return self.engine.closing_tokens

    def draw(self, request: InfillRequest, *, first_banned=(), start_constraint=None, ended=None) -> list[Candidate]:
        return self.engine.decode_batch(request, self.on_progress, self.should_cancel, first_banned=first_banned,
                                        start_constraint=start_constraint, ended=ended)

    def name_start(self, names: list[str]) -> "NameStart":
        tokenizer = self.engine.tokenizer
        return NameStart([tokenizer.encode(name, add_special_tokens=False) for name in names],
                         self.engine.word_tokens, self.engine.config.vocab_size)


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
