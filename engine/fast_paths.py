"""The forward paths engine.decode can run: how a step's logits are computed. They give the
same tokens (tests/engine/test_decode.py, and tests/engine/test_decode_gpu.py on a GPU).

- `recompute`: the whole sequence through the model at every step; the reference.
- `cached`: the prompt's blocks once into a static KV cache, then each step over the current
  block; eager.
- `static`: the shapes of the graph paths, run eagerly (on any device, so that a CPU test
  pins them).
- `graphs`: `static` with each step's forward captured as a CUDA graph: on a GPU an eager
  step is bound by kernel launches, not by the GPU.
- `compiled`: `graphs` with the model torch.compile'd inside the graph, fusing its small
  kernels.

The graph paths keep their captured graphs and cache between requests (`graph_path`).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Protocol

import torch

from engine.model import KVCache, SDARForCausalLM, block_causal_mask
from engine.types import EngineError

PATHS = ("recompute", "cached", "static", "graphs", "compiled")
FAST_PATHS = ("graphs", "compiled")  # the GPU-only ones: the engine falls back to `cached` if they fail
COMPILE_LIMIT = 64  # compilations of the model's forward one process may make (the compiled path)


class ForwardPath(Protocol):
    def prefill(self, prompt: torch.Tensor) -> None: ...

    def block_logits(self, x: torch.Tensor, start: int, end: int, commit_previous: bool) -> torch.Tensor:
        """Logits [n, end - start, V] of the block x[:, start:end]."""
        ...


def block_mask(positions: torch.Tensor, key_len: int, block_size: int) -> torch.Tensor:
    """The block-causal mask of `positions` over keys 0..key_len-1, for a decoding block size
    that may differ from the checkpoint's."""
    return block_causal_mask(positions, torch.arange(key_len, device=positions.device), block_size)


class RecomputeForward:
    """The reference: the whole sequence through the model at every step, no cache."""

    def __init__(self, model: SDARForCausalLM, block_size: int):
        self.model = model
        self.block_size = block_size

    def prefill(self, prompt: torch.Tensor) -> None:
        pass

    def block_logits(self, x, start, end, commit_previous):
        positions = torch.arange(end, device=x.device)
        return self.model(x[:, :end], attn_mask=block_mask(positions, end, self.block_size), logits_to_keep=end - start)


class CachedForward:
    """Prompt blocks once into a static KV cache; each step runs over the current block (and,
    on a block's first step, the block just finished, to write its final keys)."""

    def __init__(self, model: SDARForCausalLM, cache: KVCache, block_size: int):
        self.model = model
        # The prompt always runs eagerly: its length changes with every request, and through a
        # compiled model (StaticForward) each new length would be a new compilation, past
        # dynamo's limit a failure (the DICE golden prompts of 8, 10 and 13 tokens ended the
        # compiled path on the H200).
        self.eager = model
        self.cache = cache
        self.block_size = block_size

    def run(self, ids: torch.Tensor, positions: torch.Tensor, key_len: int, keep: int, cache: KVCache | None = None,
            model: SDARForCausalLM | None = None):
        """Logits of the last `keep` of `ids` at `positions`, their keys written to the cache,
        attending over its first `key_len` positions."""
        mask = block_mask(positions, key_len, self.block_size)
        cache = self.cache if cache is None else cache
        return (model or self.model)(ids, position_ids=positions, attn_mask=mask, cache=cache, logits_to_keep=keep)

    def prefill(self, prompt: torch.Tensor) -> None:
        length = prompt.shape[1]
        if length == 0:
            return
        self.run(prompt, torch.arange(length, device=prompt.device), length, 1, cache=self.cache.first_row(),
                 model=self.eager)
        self.cache.copy_first_row(length)

    def block_logits(self, x, start, end, commit_previous):
        first = start - self.block_size if commit_previous else start
        return self.run(x[:, first:end], torch.arange(first, end, device=x.device), end, end - start)


@dataclass
class _CapturedStep:
    graph: torch.cuda.CUDAGraph
    input_ids: torch.Tensor
    positions: torch.Tensor
    logits: torch.Tensor


class StaticForward(CachedForward):
    """The shapes of the CUDA-graph paths, run eagerly (and on any device, so that a CPU test
    pins them): every step runs over two blocks (the previous one and the current; rewriting
    the previous block's keys with the same tokens changes nothing), so one window shape
    serves all steps, and attention runs over the cache up to a key length bucket (the
    block-causal mask hides the stale positions past the block), or over the whole cache
    when the model is compiled, as each new shape would mean a new compilation.
    """

    KEY_BUCKET = 256

    def __init__(self, model: SDARForCausalLM, cache: KVCache, block_size: int, compiled: bool = False):
        super().__init__(model, cache, block_size)
        self.compiled = compiled
        if compiled:
            # Static shapes: each is captured in a CUDA graph anyway. torch.compile wraps the
            # model without changing it; the plain paths keep calling it eagerly. A path per
            # batch size and cache length, two window shapes each: dynamo's default of 8
            # compilations of one function runs out within a working session.
            config = torch._dynamo.config
            limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"  # torch < 2.7
            setattr(config, limit, max(getattr(config, limit), COMPILE_LIMIT))
            self.model = torch.compile(model, fullgraph=True, dynamic=False)

    def shapes(self, start: int, end: int) -> tuple[int, int]:
        """(first position of the window, key length) for the block [start, end)."""
        first = max(0, start - self.block_size)
        if self.compiled:
            return first, self.cache.max_len
        return first, min(self.cache.max_len, -(-end // self.KEY_BUCKET) * self.KEY_BUCKET)

    def block_logits(self, x, start, end, commit_previous):
        first, key_len = self.shapes(start, end)
        return self.run(x[:, first:end], torch.arange(first, end, device=x.device), key_len, end - start)


class GraphForward(StaticForward):
    """StaticForward with each step replayed from a CUDA graph (one per window and key
    length), optionally with the torch.compile'd model inside (`compiled`). An eager step runs
    ~60 small kernels per layer, and on a GPU their launches, not the weight reads, set the
    pace: the graph removes the CPU launch cost, compilation fuses the small kernels."""

    def __init__(self, model: SDARForCausalLM, cache: KVCache, block_size: int, compiled: bool):
        super().__init__(model, cache, block_size, compiled)
        self.pool = torch.cuda.graph_pool_handle()
        self.steps: dict[tuple[int, int], _CapturedStep] = {}

    def _capture(self, ids: torch.Tensor, positions: torch.Tensor, key_len: int, keep: int) -> _CapturedStep:
        # Warm-up (and compilation) on a side stream, as torch.cuda.graphs asks. It writes the
        # same keys and values the real step will, so it leaves the cache as it should be.
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self.run(ids, positions, key_len, keep)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            logits = self.run(ids, positions, key_len, keep)
        return _CapturedStep(graph, ids, positions, logits)

    def block_logits(self, x, start, end, commit_previous):
        first, key_len = self.shapes(start, end)
        key = (end - first, key_len)
        step = self.steps.get(key)
        if step is None:
            ids = x[:, first:end].clone()
            positions = torch.arange(first, end, device=x.device)
            step = self.steps[key] = self._capture(ids, positions, key_len, end - start)
        else:
            step.input_ids.copy_(x[:, first:end])
            step.positions.copy_(torch.arange(first, end, device=x.device))
        step.graph.replay()
        return step.logits.clone()


# Captured graphs and their cache outlive one request: capture costs more than a request's
# worth of steps. One per model, rebuilt when the batch, block size or path changes, or when
# the cache is too short.
_graph_paths: "weakref.WeakKeyDictionary[SDARForCausalLM, GraphForward]" = weakref.WeakKeyDictionary()
GRAPH_CACHE_ROUND = 256


def graph_path(model: SDARForCausalLM, n: int, length: int, block_size: int, compiled: bool) -> GraphForward:
    current = _graph_paths.get(model)
    if (
        current is not None
        and current.cache.batch == n
        and current.block_size == block_size
        and current.compiled == compiled
        and current.cache.max_len >= length
    ):
        return current
    _graph_paths.pop(model, None)
    max_len = -(-length // GRAPH_CACHE_ROUND) * GRAPH_CACHE_ROUND
    weight = model.lm_head.weight
    cache = KVCache.allocate(model.config, n, max_len, weight.device, weight.dtype)
    path = _graph_paths[model] = GraphForward(model, cache, block_size, compiled)
    return path


def make_forward(model: SDARForCausalLM, path: str, n: int, length: int, block_size: int) -> ForwardPath:
    if path not in PATHS:
        raise EngineError(f"unknown decoding path {path!r}; choose one of {', '.join(PATHS)}")
    if path == "recompute":
        return RecomputeForward(model, block_size)
    weight = model.lm_head.weight
    if path in ("cached", "static"):
        cache = KVCache.allocate(model.config, n, length, weight.device, weight.dtype)
        kind = CachedForward if path == "cached" else StaticForward
        return kind(model, cache, block_size)
    if weight.device.type != "cuda":
        raise EngineError(f"the {path!r} decoding path needs the model on a CUDA device")
    return graph_path(model, n, length, block_size, compiled=path == "compiled")
