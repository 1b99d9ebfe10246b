"""The engine in this process: a checkpoint, its prompts, and block-diffusion decoding."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable

import torch

from engine import prompts
from engine.scope import fits_span, scope_of, unknown_names
from engine.decode import decode
from engine.loading import load_checkpoint
from engine.model import SDARConfig, SDARForCausalLM
from engine.types import Candidate, EngineError, EngineInfo, Progress, Sampling

ProgressFn = Callable[[Progress], None] | None
CancelFn = Callable[[], bool] | None
FAST_PATHS = ("graphs", "compiled")
SMALL_HIDDEN = 1024
# A sampled FIM fill draws this many times the candidates asked for and keeps the best
# ranked (engine.scope): a small model often invents a name, and a candidate that cannot
# compile is a wasted slot for the user.
FIM_OVERSAMPLE = 2


class LocalEngine:
    """`Engine` of docs/architecture.md for a checkpoint folder loaded in this process."""

    def __init__(self, model: SDARForCausalLM, tokenizer, config: SDARConfig, name: str):
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.name = name
        device = model.lm_head.weight.device
        if device.type == "cpu" and config.hidden_size <= SMALL_HIDDEN and "OMP_NUM_THREADS" not in os.environ:
            # A small model's matmuls are too small to split across threads: syncing them costs
            # more than it saves (the built-in model decoded 3x slower with 2 threads than 1).
            torch.set_num_threads(1)
        # CUDA graphs on a GPU, where an eager step is bound by kernel launches;
        # DICE_DECODE_PATH picks another path (recompute | cached | graphs), e.g. to compare.
        self.decode_path = os.environ.get("DICE_DECODE_PATH") or ("graphs" if device.type == "cuda" else "cached")

    @classmethod
    def from_folder(cls, folder: str | Path, device=None, dtype=None, name: str | None = None) -> "LocalEngine":
        model, tokenizer, config = load_checkpoint(folder, device, dtype)
        return cls(model, tokenizer, config, name or str(folder))

    def info(self) -> EngineInfo:
        weight = self.model.lm_head.weight
        dtype = str(weight.dtype).removeprefix("torch.")
        return EngineInfo(self.name, str(weight.device), self.config.block_size, self.config.prompt_format, dtype)

    def run(self, task: prompts.Task, n: int, max_tokens: int, sampling: dict,
            on_progress: ProgressFn = None, should_cancel: CancelFn = None) -> list[Candidate]:
        """Decode n answers to the task's prompt, as one batch."""
        settings = Sampling.from_kwargs(sampling)
        ids = self.tokenizer.encode(task.prompt, add_special_tokens=False)
        args = dict(n=n, max_tokens=max_tokens, sampling=settings, stop_ids=self.config.eos_token_ids,
                    on_progress=on_progress, should_cancel=should_cancel)
        try:
            result = decode(self.model, ids, path=self.decode_path, **args)
        except RuntimeError as exc:
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
            candidates.append(Candidate(task.to_text(raw), len(tokens), result.steps, result.seconds, reason, raw))
        return candidates

    def generate(self, prompt: str, n: int = 1, max_tokens: int = 512, *, on_progress: ProgressFn = None,
                 should_cancel: CancelFn = None, **sampling) -> list[Candidate]:
        """Continue `prompt` as it is (no template): each .text is the continuation."""
        return self.run(prompts.generate_task(prompt), n, max_tokens, sampling, on_progress, should_cancel)

    def infill(self, prefix: str, suffix: str, n: int = 1, max_tokens: int = 256, *, reference: str | None = None,
               on_progress: ProgressFn = None, should_cancel: CancelFn = None, **sampling) -> list[Candidate]:
        """Each .text replaces the span between prefix and suffix."""
        task = prompts.infill_task(prefix, suffix, reference, self.config.prompt_format, self.tokenizer.chat_template)
        if self.config.prompt_format != "fim" or Sampling.from_kwargs(sampling).temperature == 0:
            return self.run(task, n, max_tokens, sampling, on_progress, should_cancel)
        drawn = self.run(task, n * FIM_OVERSAMPLE, max_tokens, sampling, on_progress, should_cancel)
        return rank_in_scope(drawn, prefix, suffix)[:n]

    def optimize(self, code: str, *, language: str = "cuda", n: int = 1, max_tokens: int = 1024,
                 on_progress: ProgressFn = None, should_cancel: CancelFn = None, **sampling) -> list[Candidate]:
        """language="cuda": `code` is one __global__ function, each .text a whole replacement;
        language="kernelbench": `code` is a KernelBench file, each .text Python defining ModelNew."""
        try:
            task = prompts.optimize_task(code, language, self.config.prompt_format, self.tokenizer.chat_template)
        except ValueError as exc:
            raise EngineError(f"optimize: {exc}") from exc
        return self.run(task, n, max_tokens, sampling, on_progress, should_cancel)


def rank_in_scope(candidates: list[Candidate], prefix: str, suffix: str) -> list[Candidate]:
    """Candidates reordered (stably): distinct ones first; among them those in the shape of
    the selection, then those whose names are all in scope (engine.scope)."""
    scope = scope_of(prefix, suffix)
    seen: set[str] = set()

    def key(c: Candidate) -> tuple[bool, bool, bool]:
        repeat = c.text in seen
        seen.add(c.text)
        return repeat, not fits_span(c.text, prefix, suffix), bool(unknown_names(c.text, scope))

    keys = [key(c) for c in candidates]
    return [c for _, c in sorted(zip(keys, candidates), key=lambda pair: pair[0])]
