"""The Engine API of docs/DESIGN.md written once: infill, generate and optimize build a typed
request (engine.types) and hand it to the backend's one method, `run`.

The four backends (engine.decoding.local, engine.serving.sglang, engine.serving.remote, engine.serving.client) differ only in
`run`: decoding here, an SGLang server, a remote `dice engine serve`, a worker process.
AsyncEngine's `run` is a coroutine function, so its trio returns awaitables:
`await engine.infill(...)` there, `engine.infill(...)` elsewhere. Bad sampling names fail at
the call, before anything is sent.
"""

from __future__ import annotations

import sys
from typing import Callable

from engine.decoding import prompts
from engine.types import EngineError, GenerateRequest, InfillRequest, OptimizeRequest, Progress, Request, Sampling

ProgressFn = Callable[[Progress], None] | None
CancelFn = Callable[[], bool] | None


def report_to_stderr(message: str) -> None:
    """What an engine process says while it prepares (warm_up): stderr, where the client keeps
    the last lines."""
    print(f"dice engine: {message}", file=sys.stderr, flush=True)


class EngineBase:
    def run(self, request: Request, on_progress: ProgressFn = None, should_cancel: CancelFn = None):
        """The request's candidates (a list of Candidate, or an awaitable of one)."""
        raise NotImplementedError

    def warm_up(self, report: Callable[[str], None]) -> None:
        """Pay a backend's first-use costs (compilation, CUDA graphs) now, at load, saying what
        it does through `report`; nothing to do for most."""

    def infill(self, prefix: str, suffix: str, n: int = 1, max_tokens: int = 256, *, reference: str | None = None,
               on_progress: ProgressFn = None, should_cancel: CancelFn = None, **sampling):
        """Each .text replaces the span between prefix and suffix."""
        request = InfillRequest(prefix, suffix, reference, n=n, max_tokens=max_tokens, sampling=Sampling.from_kwargs(sampling))
        return self.run(request, on_progress, should_cancel)

    def generate(self, prompt: str, n: int = 1, max_tokens: int = 512, *, on_progress: ProgressFn = None,
                 should_cancel: CancelFn = None, **sampling):
        """Continue `prompt` as it is (no template): each .text is the continuation."""
        request = GenerateRequest(prompt, n=n, max_tokens=max_tokens, sampling=Sampling.from_kwargs(sampling))
        return self.run(request, on_progress, should_cancel)

    def optimize(self, code: str, *, language: str = "cuda", n: int = 1, max_tokens: int = 1024,
                 on_progress: ProgressFn = None, should_cancel: CancelFn = None, **sampling):
        """language="cuda": `code` is one __global__ function, each .text a whole replacement;
        language="kernelbench": `code` is a KernelBench problem (Model, get_inputs,
        get_init_inputs; DICE is shown the problem alone), each .text Python defining ModelNew."""
        request = OptimizeRequest(code, language, n=n, max_tokens=max_tokens, sampling=Sampling.from_kwargs(sampling))
        return self.run(request, on_progress, should_cancel)


def request_task(request: Request, prompt_format: str, chat_template: str | None) -> prompts.Task:
    """The prompt and the answer's extraction for a request, in the model's prompt format."""
    if isinstance(request, GenerateRequest):
        return prompts.generate_task(request.prompt)
    if isinstance(request, InfillRequest):
        return prompts.infill_task(request.prefix, request.suffix, request.reference, prompt_format, chat_template)
    try:
        return prompts.optimize_task(request.code, request.language, prompt_format, chat_template)
    except ValueError as exc:
        raise EngineError(f"optimize: {exc}") from exc
