"""The forward paths engine.decoding.decode runs: how a step's logits are computed (which
kernels each path's steps use, and which path an engine runs: engine.model.routes). They give
the same tokens (tests/engine/decoding/test_decode.py, and test_decode_gpu.py on a GPU).

- `recompute`: the whole sequence through the model at every step; the reference.
- `cached`: the prompt's blocks once into a static KV cache, then each step over the current
  block; eager.
- `static`: the shapes of the graph paths, run eagerly (on any device, so that a CPU test
  pins them); `static-flex` and `static-decode` with flex or decode attention.
- `graphs`: `static` with each step's forward captured as a CUDA graph: on a GPU an eager
  step is bound by kernel launches, not by the GPU.
- `compiled`: `graphs` with the model torch.compile'd inside the graph, fusing its small
  kernels.
- `flex`: `compiled` with attention through flex_attention over a block mask, which reads only
  the cache tiles up to the current block.
- `decode`: `compiled` with the step's attention through the engine's own split-KV kernel
  (engine.model.decode_attention), which spreads a few query rows over the cache across the GPU.
- `skinny`: `decode` with a batch-1 step's projections through the engine's own kernel for a
  few rows (engine.model.skinny); bf16/fp16 only (an fp32 model runs `decode`'s products).

The graph paths keep their captured graphs and cache between requests (`graph_path`), with
fixed shapes: the batch padded to 1, 8, 16, 32 or 64 rows (batch_bucket), the cache to a power
of two of at least MIN_CACHE positions (to whole KEY_GRAIN positions where the power of two
would not fit in the GPU's memory: cache_bucket), so a compiled step is compiled once per
(batch, cache) bucket and never per prompt length (the prompt itself always runs eagerly). engine.decoding.
decode's warm_up pays the compilation and capture of the common buckets when the model is loaded.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Protocol

import torch

from engine.model.routes import (FAST_PATHS, FLEX_BLOCK, PATH_ATTENTION, PATH_PROJECTIONS, Fusion, Routed,
                                 flex_block_mask, unavailable)
from engine.model.sdar import KVCache, SDARForCausalLM, block_causal_mask
from engine.types import EngineError

EAGER = Routed()  # torch's SDPA and F.linear: the prompt's kernels, whatever a path's steps use
COMPILE_LIMIT = 64  # compilations of the model's forward one process may make (the compiled paths)


class ForwardPath(Protocol):
    # Whether keep_rows may drop rows (the eager paths); the graph paths' shapes are fixed.
    compacts: bool

    def prefill(self, prompt: torch.Tensor, kept: "PromptKeys | None" = None) -> None: ...

    def block_logits(self, x: torch.Tensor, start: int, end: int, commit_previous: bool) -> torch.Tensor:
        """Logits [n, end - start, V] of the block x[:, start:end]."""
        ...

    def keep_rows(self, rows: list[int], end: int) -> None:
        """From now on the batch is these rows of the current one, in this order (their cache
        up to `end` goes with them)."""
        ...


class PromptKeys:
    """The keys and values of the last prompt a fill prefilled (its whole blocks, one row), so
    that the fill's next decode, whose prompt starts with the same tokens, prefills only the
    blocks that differ. A fill decodes several times on one prompt (engine.decoding.local: its draws, the
    declarations `TYPE NAME =` and the repairs add a few tokens at the prompt's end), and on a
    CPU each whole-file prefill took ~0.8 s of a 2-12 s fill. Under block-causal attention a
    position's keys depend on every token up to the end of its block, so only whole blocks
    that are the same, token for token and at the same block size, are reused."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.block_size = 0
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.reused = 0   # positions the last prefill took from here (tests, benchmarks)

    def shared(self, ids: list[int], block_size: int) -> int:
        """Positions of `ids` (whole blocks) whose keys this holds."""
        if block_size != self.block_size:
            return 0
        same = 0
        for a, b in zip(ids, self.ids):
            if a != b:
                break
            same += 1
        return same // block_size * block_size

    def restore(self, cache: KVCache, length: int) -> None:
        for tensor, kept in zip((*cache.keys, *cache.values), (*self.keys, *self.values)):
            tensor[:1, :, :length] = kept[:, :, :length]

    def keep(self, ids: list[int], block_size: int, cache: KVCache) -> None:
        length = len(ids)
        self.ids, self.block_size = list(ids), block_size
        self.keys = [k[:1, :, :length].clone() for k in cache.keys]
        self.values = [v[:1, :, :length].clone() for v in cache.values]


def block_mask(positions: torch.Tensor, key_len: int, block_size: int) -> torch.Tensor:
    """The block-causal mask of `positions` over keys 0..key_len-1, for a decoding block size
    that may differ from the checkpoint's."""
    return block_causal_mask(positions, torch.arange(key_len, device=positions.device), block_size)


class RecomputeForward:
    """The reference: the whole sequence through the model at every step, no cache."""

    compacts = True

    def __init__(self, model: SDARForCausalLM, block_size: int):
        self.model = model
        self.block_size = block_size

    def prefill(self, prompt: torch.Tensor, kept: PromptKeys | None = None) -> None:
        pass

    def keep_rows(self, rows: list[int], end: int) -> None:
        pass   # no state per row

    def block_logits(self, x, start, end, commit_previous):
        positions = torch.arange(end, device=x.device)
        return self.model(x[:, :end], attn_mask=block_mask(positions, end, self.block_size), logits_to_keep=end - start)


class CachedForward:
    """Prompt blocks once into a static KV cache; each step runs over the current block (and,
    on a block's first step, the block just finished, to write its final keys)."""

    compacts = True

    def __init__(self, model: SDARForCausalLM, cache: KVCache, block_size: int):
        self.model = model
        # The prompt always runs eagerly: its length changes with every request, and through a
        # compiled model (StaticForward) each new length would be a new compilation, past
        # dynamo's limit a failure (the DICE golden prompts of 8, 10 and 13 tokens ended the
        # compiled path on the H200).
        self.eager = model
        self.cache = cache
        self.block_size = block_size
        self.kernels = EAGER

    def run(self, ids: torch.Tensor, positions: torch.Tensor, key_len: int, keep: int, cache: KVCache | None = None,
            eager: bool = False):
        """Logits of the last `keep` of `ids` at `positions`, their keys written to the cache,
        attending over its first `key_len` positions; `eager`: through the plain model and
        torch's SDPA whatever the path runs its steps with."""
        mask = block_mask(positions, key_len, self.block_size)
        cache = self.cache.rows(ids.shape[0]) if cache is None else cache
        model, kernels = (self.eager, EAGER) if eager else (self.model, self.kernels)
        if kernels.attention == "flex":  # built here, outside a compiled model (routes.Routed.prepare says why)
            mask = flex_block_mask(mask)
        return model(ids, position_ids=positions, attn_mask=mask, cache=cache, logits_to_keep=keep, kernels=kernels)

    def prefill(self, prompt: torch.Tensor, kept: PromptKeys | None = None) -> None:
        """The prompt's keys into every row of the cache; with `kept`, the whole blocks it holds
        of this prompt are copied instead of computed, and it then holds this prompt's."""
        length = prompt.shape[1]
        if length == 0:   # a prompt shorter than a block: it is decoded with the answer
            if kept is not None:
                kept.reused = 0
            return
        first = self.cache.rows(1)
        done = 0
        if kept is not None:
            ids = prompt[0].tolist()
            done = kept.reused = kept.shared(ids, self.block_size)
            kept.restore(first, done)
        if done < length:
            self.run(prompt[:, done:], torch.arange(done, length, device=prompt.device), length, 1, cache=first,
                     eager=True)
        if kept is not None:
            kept.keep(ids, self.block_size, first)
        self.cache.copy_first_row(length)

    def keep_rows(self, rows: list[int], end: int) -> None:
        index = torch.tensor(rows, device=self.cache.keys[0].device)
        for tensor in (*self.cache.keys, *self.cache.values):
            tensor[: len(rows), :, :end] = tensor[index, :, :end]

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
    when the model is compiled, as each new shape would mean a new compilation (flex
    attention skips the cache tiles past the block, so there the whole cache costs nothing).
    The sequence's first block, which has no block before it (a prompt shorter than a block),
    runs eagerly: one shape less to compile and capture, for a step that is rare.
    """

    KEY_BUCKET = 256
    compacts = False   # the graph paths' batch is a fixed bucket

    def __init__(self, model: SDARForCausalLM, cache: KVCache, block_size: int, compiled: bool = False,
                 attention: str = "sdpa", projections: str = "linear", fusion: Fusion = Fusion()):
        super().__init__(model, cache, block_size)
        self.compiled = compiled
        self.kernels = Routed(attention, projections, fusion)
        if compiled:
            # Static shapes: each is captured in a CUDA graph anyway. torch.compile wraps the
            # model without changing it; the plain paths keep calling it eagerly. A path per
            # batch and cache bucket: dynamo's default of 8 compilations of one function runs
            # out within a working session.
            config = torch._dynamo.config
            limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"  # torch < 2.7
            setattr(config, limit, max(getattr(config, limit), COMPILE_LIMIT))
            self.model = torch.compile(model, fullgraph=True, dynamic=False)

    def key_length(self, end: int) -> int:
        if self.compiled or self.kernels.attention in ("flex", "decode"):
            return self.cache.max_len
        return min(self.cache.max_len, -(-end // self.KEY_BUCKET) * self.KEY_BUCKET)

    def block_logits(self, x, start, end, commit_previous):
        if start == 0:  # the first block of the sequence: nothing before it
            return self.run(x[:, :end], torch.arange(end, device=x.device), end, end, eager=True)
        return self.window_logits(x, start - self.block_size, end, self.key_length(end))

    def window_logits(self, x, first, end, key_len):
        """Logits of the block ending at `end`, running the window [first, end) (it and the block before)."""
        return self.run(x[:, first:end], torch.arange(first, end, device=x.device), key_len, self.block_size)


class GraphForward(StaticForward):
    """StaticForward with each step replayed from a CUDA graph (one per key length),
    optionally with the torch.compile'd model inside (`compiled`). An eager step runs ~60
    small kernels per layer, and on a GPU their launches, not the weight reads, set the pace:
    the graph removes the CPU launch cost, compilation fuses the small kernels. The graph
    runs over all the cache's rows; a request with fewer candidates uses the first ones."""

    def __init__(self, model: SDARForCausalLM, cache: KVCache, block_size: int, compiled: bool,
                 attention: str = "sdpa", projections: str = "linear", fusion: Fusion = Fusion()):
        super().__init__(model, cache, block_size, compiled, attention, projections, fusion)
        self.pool = torch.cuda.graph_pool_handle()
        self.steps: dict[int, _CapturedStep] = {}

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

    def window_logits(self, x, first, end, key_len):
        n, width = x.shape[0], end - first
        step = self.steps.get(key_len)
        if step is None:
            # The rows past the request's hold the mask token: real ids, whose results nobody reads.
            ids = torch.full((self.cache.batch, width), self.eager.config.mask_token_id, dtype=x.dtype, device=x.device)
            ids[:n] = x[:, first:end]
            positions = torch.arange(first, end, device=x.device)
            step = self.steps[key_len] = self._capture(ids, positions, key_len, self.block_size)
        else:
            step.input_ids[:n].copy_(x[:, first:end])
            step.positions.copy_(torch.arange(first, end, device=x.device))
        step.graph.replay()
        return step.logits[:n].clone()


# Captured graphs and their caches outlive one request: capture (and compilation) costs more
# than a request's worth of steps. Per model, one path per batch bucket, rebuilt when the
# block size or the path changes, or when its cache is too short.
_graph_paths: "weakref.WeakKeyDictionary[SDARForCausalLM, dict[int, GraphForward]]" = weakref.WeakKeyDictionary()
MIN_CACHE = 2048


MIN_BATCH = 8  # past one candidate: a step reads the weights once for all rows, and 8 rows cost
# about what 2 do (1.07x a batch-1 step on the H200), so 2..8 share one compilation


def batch_bucket(n: int) -> int:
    """The batch a graph path runs for n candidates: 1, or the next power of two from MIN_BATCH."""
    return 1 if n == 1 else max(MIN_BATCH, 1 << (n - 1).bit_length())


KEY_GRAIN = 256  # a cache cut to fit is a whole number of these positions (whole flex and decode-kernel tiles)
# Device memory a graph path's cache leaves free for the rest of the process (the step's
# activations and logits, the captured graphs' pool, the prompt's eager prefill, sampling): a
# fraction of the card. A batch of 128 of DICE-4B's 8-row windows holds ~0.3 GB of bf16 logits
# and twice that in fp32 for sampling; 10% of an 80 GB card is 8 GB.
HEADROOM_FRACTION = 0.1


def cache_bucket(length: int, limit: int, rows: int = 1, position_bytes: int = 0, budget: float | None = None) -> int:
    """The cache length a graph path allocates for a sequence of `length`: the next power of
    two, at least MIN_CACHE, at most the model's context (in whole flex tiles), so that a
    compiled step is compiled for few lengths. Where `rows` caches of that length, at
    `position_bytes` a position, would take more than `budget` bytes, the length rounded up
    to whole KEY_GRAIN positions instead: a large batch of long answers then fits (128
    candidates of DICE-4B at 5120 positions take 97 GB instead of the power of two's 155 GB),
    at the price of a compilation for its own length. The mask hides every position past
    the sequence, so the tokens are the same at either length."""
    whole = -(-limit // FLEX_BLOCK) * FLEX_BLOCK
    bucket = max(length, min(whole, max(MIN_CACHE, 1 << (length - 1).bit_length())))
    if budget is not None and rows * bucket * position_bytes > budget:
        bucket = max(length, min(whole, -(-length // KEY_GRAIN) * KEY_GRAIN))
    return bucket


def position_bytes(config, dtype_bytes: int) -> int:
    """Bytes of one position of one row of the KV cache: keys and values of every layer."""
    return 2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim * dtype_bytes


def cache_budget(free_bytes: float, total_bytes: float) -> float:
    """The bytes a graph path's cache may take: the device's free memory less HEADROOM_FRACTION
    of the whole card."""
    return free_bytes - HEADROOM_FRACTION * total_bytes


def device_cache_budget(device: torch.device, released: int = 0) -> float | None:
    """cache_budget on `device` now: free memory, what torch's allocator holds unused, and
    `released` (the bytes of a cache about to be dropped); None off a GPU (no limit)."""
    if device.type != "cuda":
        return None
    free, total = torch.cuda.mem_get_info(device)
    unused = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return cache_budget(free + unused + released, total)


def cache_bytes(config, path: str, n: int, length: int, dtype_bytes: int, budget: float | None = None) -> int:
    """The bytes of the KV cache make_forward(path, n, length) allocates: n rows of `length`
    positions, or on a graph path a batch bucket of cache buckets (up to twice either; with
    `budget`, the free memory the path sees, the length in whole KEY_GRAIN positions where the
    power of two would not fit: cache_bucket). A graph path keeps its cache for later
    requests of the same batch bucket."""
    if path == "recompute":
        return 0
    per_position = position_bytes(config, dtype_bytes)
    if path in FAST_PATHS:
        rows = batch_bucket(n)
        positions = cache_bucket(length, config.max_position_embeddings, rows, per_position, budget)
    else:
        rows, positions = n, length
    return rows * positions * per_position


def graph_cache(model: SDARForCausalLM, n: int, length: int, budget: float | None) -> KVCache:
    """The KV cache a graph path allocates for n candidates of up to `length` positions, given
    `budget` bytes for it (cache_bucket; None: no limit): cache_bytes(..., budget) bytes."""
    weight = model.lm_head.weight
    rows = batch_bucket(n)
    per_position = position_bytes(model.config, weight.element_size())
    max_len = cache_bucket(length, model.config.max_position_embeddings, rows, per_position, budget)
    return KVCache.allocate(model.config, rows, max_len, weight.device, weight.dtype)


def release_graph_paths(model: SDARForCausalLM) -> None:
    """Drop `model`'s captured paths and their caches (the next request captures again): a
    run that moves on to a larger batch would otherwise hold every smaller batch's cache too."""
    _graph_paths.pop(model, None)


def graph_path(model: SDARForCausalLM, n: int, length: int, block_size: int, compiled: bool,
               attention: str = "sdpa", projections: str = "linear", fusion: Fusion = Fusion()) -> GraphForward:
    paths = _graph_paths.setdefault(model, {})
    batch = batch_bucket(n)
    current = paths.get(batch)
    if (
        current is not None
        and current.block_size == block_size
        and current.compiled == compiled
        and current.kernels.attention == attention
        and current.kernels.projections == projections
        and current.kernels.fusion == fusion
        and current.cache.max_len >= length
    ):
        return current
    released = 0
    if current is not None:
        released = sum(t.nbytes for t in (*current.cache.keys, *current.cache.values))
    paths.pop(batch, None)
    current = None  # its cache is freed before the new one is allocated
    budget = device_cache_budget(model.lm_head.weight.device, released)
    cache = graph_cache(model, n, length, budget)
    path = paths[batch] = GraphForward(model, cache, block_size, compiled, attention, projections, fusion)
    return path


def make_forward(model: SDARForCausalLM, path: str, n: int, length: int, block_size: int,
                 fusion: Fusion = Fusion()) -> ForwardPath:
    """The forward path `path` (routes.PATHS) for n rows of up to `length` positions; EngineError
    where it cannot run here (routes.unavailable)."""
    why = unavailable(path, model)
    if why is not None:
        raise EngineError(why)
    if path == "recompute":
        return RecomputeForward(model, block_size)
    attention = PATH_ATTENTION.get(path, "sdpa")
    weight = model.lm_head.weight
    if path not in FAST_PATHS:
        cache = KVCache.allocate(model.config, n, length, weight.device, weight.dtype)
        if path == "cached":
            return CachedForward(model, cache, block_size)
        return StaticForward(model, cache, block_size, attention=attention, fusion=fusion)
    return graph_path(model, n, length, block_size, compiled=path != "graphs", attention=attention,
                      projections=PATH_PROJECTIONS.get(path, "linear"), fusion=fusion)
