"""What a request takes in memory, reckoned before any of it is allocated, against what the
device has (engine.model.memory.available).

A request that does not fit is refused with a message that names what it needs, what there is
and how many candidates would fit, instead of growing the worker until the kernel's OOM killer
ends it with no word (a batch of 10,000 candidates of the built-in model wanted over 24 GB).

A request: its KV cache (engine.decoding.paths.cache_bytes, rows x positions), its token grid
(int64), and a decoding step's working memory for every row: the hidden states and MLP
activations of [previous block; block], and its logits with several fp32 copies of them
(softmax, filtering, sampling).
"""

from __future__ import annotations

from engine.decoding.paths import cache_bytes
from engine.model.memory import available, weights_bytes
from engine.model.system_memory import describe
from engine.types import EngineError

# fp32 copies of a step's logits alive at once while it samples (logits.float(), the scaled and
# filtered ones, softmax, the sort of top-p).
LOGIT_COPIES = 6


def step_bytes(config, rows: int, block_size: int, dtype_bytes: int) -> int:
    """A decoding step's working memory for `rows` rows."""
    positions = rows * 2 * block_size
    activations = positions * (4 * config.hidden_size + 3 * config.intermediate_size) * dtype_bytes
    logits = rows * block_size * config.vocab_size * (dtype_bytes + 4 * LOGIT_COPIES)
    return activations + logits


def request_bytes(config, path: str, rows: int, length: int, block_size: int, dtype_bytes: int) -> int:
    """What decoding `rows` rows of `length` positions allocates on `path`: KV cache, token
    grid, a step's working memory."""
    return (cache_bytes(config, path, rows, length, dtype_bytes) + rows * length * 8
            + step_bytes(config, rows, block_size, dtype_bytes))


def check_request(model, path: str, candidates: int, rows_per_candidate: int, prompt_tokens: int,
                  max_tokens: int, block_size: int, memory: int | None = None) -> None:
    """EngineError when `candidates` candidates (`rows_per_candidate` rows each in the largest
    batch the request decodes) of up to `max_tokens` after a prompt of `prompt_tokens` cannot
    fit in what the device has (and the budget `memory` leaves beside the weights); it names the
    need, what there is and how many candidates would fit."""
    config = model.config
    weight = model.lm_head.weight
    dtype_bytes = weight.element_size()
    length = -(-(prompt_tokens + max_tokens) // block_size) * block_size

    def need(n: int) -> int:
        return request_bytes(config, path, n * rows_per_candidate, length, block_size, dtype_bytes)

    have, where = available(weight.device, memory, held=weights_bytes(config, dtype_bytes))
    if have is None or need(candidates) <= have:
        return
    fit = 0
    while fit < candidates and need(fit + 1) <= have:
        fit += 1
    kv = cache_bytes(config, path, candidates * rows_per_candidate, length, dtype_bytes)
    advice = (f"at most {fit} candidate{'s' if fit != 1 else ''} of {max_tokens} tokens fit" if fit
              else "not even one candidate fits: ask for fewer tokens, or free memory")
    raise EngineError(
        f"{candidates} candidates of up to {max_tokens} tokens after a {prompt_tokens}-token prompt need about "
        f"{describe(need(candidates))} (KV cache {describe(kv)}), and {describe(have)} is {where}: {advice}")
