"""Block-diffusion decoding (SDAR): fill one block of masks at a time, a few tokens per step.

The prompt's whole blocks go through the model once, into a static KV cache. Then each new
block starts as all `<|MASK|>`; every step runs the model over that block alone (attending
to the cache), samples every masked position, and commits some of them (the strategy says
which); when none is masked the block is final and the next one begins. The final block's
keys and values reach the cache in the first step of the next block, which runs over
[previous block ; new block] at once instead of spending an extra forward pass on it.

A prompt whose length is not a multiple of the block size is handled as SDAR does: the first
generated block starts inside the prompt's last partial block, whose prompt tokens are fixed
and whose remaining positions are masks. No padding token is invented, positions stay
0..T-1 as in training, and the model sees exactly the layout it was trained on.

How each step's logits are computed is the forward path's business (engine.decoding.paths:
the reference that recomputes the whole sequence, the KV cache, CUDA graphs, torch.compile;
`fusion`: engine.model.routes.Fusion); they give the same tokens (tests/engine/decoding/
test_decode.py, and GPU tests for the graph paths).

Two presets share this loop (`Sampling.preset`). `default` is the project's: the mask token is
never an answer, equal confidences commit leftmost first, a block's quota is spread over its
masks, and decoding stops at a stop token. `dice` is DICE's `block_diffusion_generate`
(evaluation/scripts/sdar_utils.py) token for token, as tests/engine/decoding/test_dice_fidelity.py
checks on DICE's own outputs: the mask token may be sampled, commits are chosen by
`torch.topk`, the quota is spread over the block length, and whole blocks come back with no
stop at EOS.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import torch

from engine.decoding.paths import ForwardPath, PromptKeys, make_forward
from engine.model.routes import Fusion
from engine.model.sdar import SDARForCausalLM
from engine.types import Cancelled, EngineError, Progress, Sampling


@dataclass
class DecodeResult:
    # Generated tokens per candidate: up to max_tokens, the stop token excluded; under the dice
    # preset the whole blocks after the prompt, as DICE returns them.
    tokens: list[list[int]]
    finish_reasons: list[str]  # "eos" | "length"
    steps: int  # forward passes spent on denoising
    seconds: float
    prefill_seconds: float


# --- one denoising step: sample, then choose what to commit --------------------------------


def transfer_schedule(count: int, steps: int) -> list[int]:
    """How many tokens to commit at each of `steps` steps so that `count` are done (SDAR's
    get_num_transfer_tokens): equal shares, the remainder spread over the first steps. The
    default preset asks it for min(steps, masked) steps, so that no step commits nothing;
    DICE's asks it for exactly `steps` shares of the block length."""
    steps = max(1, steps)
    base, extra = divmod(count, steps)
    return [base + (1 if i < extra else 0) for i in range(steps)]


def filter_logits(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Top-k then nucleus (top-p) filtering as SDAR/DICE sample: excluded tokens get -inf.
    Top-k keeps every token tied with the k-th; top-p drops a token once the tokens ranked
    before it already exceed top_p (the first always stays)."""
    vocab = logits.shape[-1]
    if 0 < top_k < vocab:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        ordered, index = torch.sort(logits, dim=-1, descending=True)
        cumulative = ordered.softmax(-1).cumsum(-1)
        drop = torch.zeros_like(cumulative, dtype=torch.bool)
        drop[..., 1:] = cumulative[..., :-1] > top_p
        logits = logits.scatter(-1, index, ordered.masked_fill(drop, float("-inf")))
    return logits


def sample_tokens(
    logits: torch.Tensor, sampling: Sampling, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """logits [n, bs, V] -> (tokens [n, bs], confidence [n, bs]: the probability of each)."""
    logits = logits.float()
    if sampling.temperature == 0:
        probs = logits.softmax(-1)
        confidence, tokens = probs.max(-1)
        return tokens, confidence
    probs = filter_logits(logits / sampling.temperature, sampling.top_k, sampling.top_p).softmax(-1)
    flat = probs.reshape(-1, probs.shape[-1])
    tokens = torch.multinomial(flat, 1, generator=generator).view(probs.shape[:-1])
    return tokens, probs.gather(-1, tokens[..., None])[..., 0]


def choose_commits(sampling: Sampling, masked: torch.Tensor, confidence: torch.Tensor, quota: int) -> torch.Tensor:
    """Which masked positions to commit this step, bool [n, bs]: k = `quota` of them (or all
    a row has left, if fewer) by the strategy's rule.

    sequential: the k leftmost; low_confidence_static: the k most confident;
    low_confidence_dynamic: every one above the threshold, and at least the k most confident
    (DICE's rule: all above the threshold when they are at least k, else the k most
    confident; the union is the same set). Among equal confidences the default preset takes
    the leftmost; the dice preset breaks ties as DICE does, by torch.topk over the block
    (with top_k 1 every confidence is 1.0, so this is what decides DICE's order).
    """
    bs = masked.shape[1]
    if sampling.strategy == "sequential":
        score = -torch.arange(bs, device=masked.device, dtype=torch.float32).expand_as(confidence)
    else:
        score = confidence
    score = score.masked_fill(~masked, float("-inf"))
    if sampling.preset == "dice" and sampling.strategy != "sequential":
        # A row with fewer masks than the quota commits them all (DICE's topk would also pick
        # a filled position and overwrite it with a new sample, which its own settings
        # never reach).
        top = torch.topk(score, min(quota, bs), dim=1).indices
        commit = torch.zeros_like(masked).scatter_(1, top, True) & masked
    else:
        order = torch.argsort(score, dim=1, descending=True, stable=True)
        rank = torch.empty_like(order).scatter_(1, order, torch.arange(bs, device=masked.device).expand_as(order))
        commit = masked & (rank < quota)
    if sampling.strategy == "low_confidence_dynamic":
        commit |= masked & (confidence > sampling.threshold)
    return commit


def planned_steps(sampling: Sampling, schedule: list[int], masked_count: int) -> int:
    """Steps a block surely needs before it can be whole: with a fixed quota per step (the
    static strategies) no step commits more than its quota, so the block cannot finish before
    the quotas add up to its masks (it finishes then, unless the dice preset committed the mask
    token itself); the dynamic strategy commits past its quota whenever confidences allow, so
    only the first step is sure."""
    if masked_count == 0:
        return 0
    if sampling.strategy == "low_confidence_dynamic":
        return 1
    done = 0
    for index, quota in enumerate(schedule, 1):
        done += quota
        if done >= masked_count:
            return index
    return len(schedule)


# --- the decoding loop ---------------------------------------------------------------------


@torch.inference_mode()
def decode(
    model: SDARForCausalLM,
    prompt_ids: Sequence[int],
    *,
    n: int = 1,
    max_tokens: int,
    sampling: Sampling,
    stop_ids: Iterable[int],
    on_progress: Callable[[Progress], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    path: str = "cached",
    fusion: Fusion = Fusion(),
    first_banned: Sequence[int] = (),
    start_constraint: Callable[[list[int]], torch.Tensor | None] | None = None,
    kept: PromptKeys | None = None,
    ended: Callable[[list[int]], bool] | None = None,
) -> DecodeResult:
    """Decode `n` candidates for one prompt together, as one batch. Raises Cancelled when
    should_cancel() returns true (polled before every step). `on_progress` hears of the
    prefill and of each finished block. `first_banned`: tokens the answer may not start with
    (the default preset only; a FIM fill's closing brackets, engine.decoding.local). `start_constraint`
    (the default preset only): given a row's first answer tokens, the bool [V] of tokens banned
    next, or None once the row is free; the answer's positions are then decoded left to right
    until it is (engine.decoding.local.NameStart: the answer starts with one of the file's names).
    `kept`: the prompt keys of the caller's previous decode, reused where this prompt starts
    with the same blocks, and then this prompt's (engine.decoding.paths.PromptKeys). `ended` (the
    default preset only): given a row's answer so far (whole blocks), whether the caller needs no
    more of it (engine.fill.spans.span_ended: a FIM fill past its span); such a row is done, its
    tokens so far returned with the reason "length" (the model did not stop).

    A row that has reached a stop token is done: its later blocks stay masked, and on the paths
    that can (`compacts`: the eager ones) the model no longer runs over it, so a batch whose rows
    stop early costs what its live rows do. The other rows' tokens are the same: every step
    still samples all n rows (a done row from dummy logits, never committed), so the generator
    draws what it would have.

    The host reads the device once per block (the stop tokens), and inside a block only once
    its planned steps are spent (planned_steps): the static strategies queue a whole block's
    steps without waiting for the GPU; the dynamic one, whose step count depends on the
    model's confidences, reads one bool after each step past its first."""
    config = model.config
    if n < 1 or max_tokens < 1:
        raise EngineError(f"need n >= 1 and max_tokens >= 1 (got n={n}, max_tokens={max_tokens})")
    bs = sampling.block_size or config.block_size
    mask_id = config.mask_token_id
    device = model.lm_head.weight.device
    prompt_len = len(prompt_ids)
    total_blocks = -(-(prompt_len + max_tokens) // bs)
    total = total_blocks * bs
    if total > config.max_position_embeddings:
        raise EngineError(
            f"prompt ({prompt_len} tokens) + max_tokens ({max_tokens}) exceed the model's "
            f"context of {config.max_position_embeddings} tokens"
        )
    first_block = prompt_len // bs
    blocks = total_blocks - first_block
    generator = None
    if sampling.seed is not None:
        generator = torch.Generator(device=device).manual_seed(sampling.seed)
    stop = torch.tensor(sorted(set(stop_ids)), device=device, dtype=torch.long)

    started = time.perf_counter()
    x = torch.full((n, total), mask_id, dtype=torch.long, device=device)
    x[:, :prompt_len] = torch.tensor(list(prompt_ids), dtype=torch.long, device=device)
    forward = make_forward(model, path, n, total, bs, fusion)
    forward.prefill(x[:1, : first_block * bs], kept)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    prefill_seconds = time.perf_counter() - started
    if on_progress is not None:
        on_progress(Progress("prefill", 0, blocks, 0, 0))

    dice = sampling.preset == "dice"
    banned = torch.tensor(sorted(set(first_banned)), device=device, dtype=torch.long) \
        if len(first_banned) and not dice else None
    constrained = [start_constraint is not None and not dice] * n   # rows still under start_constraint
    stop_at = [None] * n  # index (relative to the prompt's end) of each row's first stop token
    cut = set()   # the rows `ended` stopped (stop_at: their length)
    live = torch.ones(n, 1, dtype=torch.bool, device=device)   # rows not done
    rows = list(range(n))   # the rows the forward runs over (fewer once it compacts)
    steps = 0
    for block in range(first_block, total_blocks):
        start, end = block * bs, (block + 1) * bs
        # Masked when the block begins: what the prompt leaves (known here, no read of x).
        masked_count = sum(1 for i in range(start, end) if i >= prompt_len or prompt_ids[i] == mask_id)
        if dice:  # DICE's quota comes from the block length, whatever the prompt filled
            schedule = transfer_schedule(bs, sampling.steps)
        else:
            schedule = transfer_schedule(masked_count, min(sampling.steps, masked_count))
        planned = planned_steps(sampling, schedule, masked_count)
        step = 0
        while True:
            masked = (x[:, start:end] == mask_id) & live
            # The device is asked whether masks remain only once the planned steps are spent:
            # until then the host queues steps without waiting for the GPU.
            if step >= planned:
                if not bool(masked.any()):
                    break
                if dice and step == len(schedule):
                    where = start + int(masked.nonzero()[0, 1])
                    raise EngineError(
                        f"the model predicted the mask token itself (id {mask_id}) at position {where}, so block "
                        f"{block - first_block + 1} is still masked after {sampling.steps} steps; DICE's decoder "
                        "cannot finish it either (its block_diffusion_generate raises IndexError here). Decode with "
                        "the default preset, which never commits the mask token."
                    )
            if should_cancel is not None and should_cancel():
                raise Cancelled("cancelled")
            logits = block_logits(forward, x, rows, start, end, commit_previous=step == 0 and block > first_block)
            if not dice:
                logits[..., mask_id] = float("-inf")  # the mask is never an answer
            if banned is not None and start <= prompt_len < end:
                logits[:, prompt_len - start, banned] = float("-inf")
            eligible = masked
            if any(constrained):
                eligible = constrain_start(x, logits, masked, constrained, start_constraint, prompt_len, start, mask_id)
            tokens, confidence = sample_tokens(logits, sampling, generator)
            commit = choose_commits(sampling, eligible, confidence, schedule[min(step, len(schedule) - 1)])
            x[:, start:end] = torch.where(commit, tokens, x[:, start:end])
            step += 1
            steps += 1
        if on_progress is not None:  # per block: the block is whole, so the count needs no read of x
            on_progress(Progress("decode", block - first_block + 1, blocks, step, min(end - prompt_len, max_tokens)))
        if dice:
            continue  # DICE's evaluation never stops early: tokens after an EOS are kept
        if len(stop):
            hits = torch.isin(x[:, max(start, prompt_len) : end], stop)
            first_hits = torch.where(hits.any(1), hits.int().argmax(1), -1).tolist()  # one read per block
            for row, hit in enumerate(first_hits):
                if stop_at[row] is None and hit >= 0:
                    stop_at[row] = max(start, prompt_len) - prompt_len + hit
        if ended is not None:
            open_rows = [row for row in range(n) if stop_at[row] is None]
            answers = x[open_rows, prompt_len:min(end, prompt_len + max_tokens)].tolist() if open_rows else []
            for row, answer in zip(open_rows, answers):
                if ended(answer):
                    stop_at[row] = len(answer)
                    cut.add(row)
        if all(s is not None for s in stop_at):
            break
        if any(s is not None for s in stop_at):
            live = torch.tensor([[s is None] for s in stop_at], device=device)
            left = [row for row in rows if stop_at[row] is None]
            if forward.compacts and len(left) < len(rows):
                forward.keep_rows([rows.index(row) for row in left], end)
                rows = left

    # The dice preset returns whole blocks, as DICE does; the default stops at max_tokens.
    length = total - prompt_len if dice else max_tokens
    generated = x[:, prompt_len : prompt_len + length].tolist()
    tokens = [row[:s] if s is not None and s < length else row for row, s in zip(generated, stop_at)]
    reasons = ["eos" if s is not None and s < length and row not in cut else "length" for row, s in enumerate(stop_at)]
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return DecodeResult(tokens, reasons, steps, time.perf_counter() - started, prefill_seconds)


def block_logits(forward: ForwardPath, x: torch.Tensor, rows: list[int], start: int, end: int,
                 commit_previous: bool) -> torch.Tensor:
    """The block's logits [n, bs, V] for every row of x, the forward run over `rows` only (the
    others, done, get zeros)."""
    if len(rows) == x.shape[0]:
        return forward.block_logits(x, start, end, commit_previous)
    index = torch.tensor(rows, device=x.device)
    computed = forward.block_logits(x[index], start, end, commit_previous)
    logits = computed.new_zeros((x.shape[0], *computed.shape[1:]))
    logits[index] = computed
    return logits


def constrain_start(x: torch.Tensor, logits: torch.Tensor, masked: torch.Tensor, constrained: list[bool],
                    start_constraint: Callable[[list[int]], torch.Tensor | None], prompt_len: int, start: int,
                    mask_id: int) -> torch.Tensor:
    """The positions of the block [start, start + bs) that may be committed this step: in a row
    under the constraint, only its first masked answer position, whose banned tokens get -inf
    in `logits` (in place); a row the constraint frees (None) is marked so in `constrained`.
    Reads the rows' answers on the host (a constrained decode is a short repair, engine.decoding.local)."""
    eligible = masked.clone()
    bs = masked.shape[1]
    answers = x[:, prompt_len:start + bs].tolist()
    for row, answer in enumerate(answers):
        if not constrained[row]:
            continue
        first = answer.index(mask_id) if mask_id in answer else len(answer)
        banned = start_constraint(answer[:first])
        if banned is None:
            constrained[row] = False
            continue
        at = prompt_len + first - start
        if at >= bs:   # the block is whole (cannot happen while masks remain)
            continue
        eligible[row, at + 1:] = False
        logits[row, at, banned.to(logits.device)] = float("-inf")
    return eligible


WARM_BATCHES = (1, 8)  # a single fill, and up to 8 candidates (the editor's 4; a sampled FIM fill's 2 x 4)


def warm_up(model: SDARForCausalLM, path: str, block_size: int, batches=WARM_BATCHES,
            report: Callable[[str], None] = print, fusion: Fusion = Fusion()) -> None:
    """Compile and capture `path`'s step for `batches` at the smallest cache bucket, by
    decoding a few blocks of a dummy prompt, so that the first request does not pay it.
    Raises whatever the path raises (the engine then falls back, routes.FALLBACK)."""
    prompt = [0] * (block_size + 1)  # a partial block, then whole ones: the step's shapes
    for n in batches:
        started = time.perf_counter()
        report(f"preparing the {path!r} decoding step for {n} candidate(s) (compilation, CUDA graphs)...")
        decode(model, prompt, n=n, max_tokens=3 * block_size, sampling=Sampling(block_size=block_size), stop_ids=[],
               path=path, fusion=fusion)
        check_agreement(model, path, n, block_size, fusion=fusion)
        report(f"the {path!r} decoding step for {n} candidate(s) is ready ({time.perf_counter() - started:.1f} s)")


# Relative L2 distance of a step's logits allowed between a fast path and the plain one: in
# fp32 only summation order differs (2e-7 to 5e-7 on the CPU box); in bf16/fp16 other kernels
# and shapes round differently through every layer (0.002-0.005 for `static`, `static-flex` and
# `recompute` against `cached` on 4- and 12-layer bf16 models, CPU box). A wrong kernel is far off.
AGREEMENT_TOLERANCE = {torch.float32: 1e-3, torch.float64: 1e-3}
HALF_AGREEMENT_TOLERANCE = 0.1


@torch.inference_mode()
def check_agreement(model: SDARForCausalLM, path: str, n: int, block_size: int, seed: int = 0,
                    fusion: Fusion = Fusion()) -> float:
    """One decoding step through `path` against the eager `cached` path, on the same random
    tokens: their logits must agree (relative L2 distance within AGREEMENT_TOLERANCE), else
    EngineError, and the engine falls back (routes.FALLBACK). A compiled kernel that gets
    the attention wrong (torch.compile'd flex_attention on the H200 with torch 2.11: logits
    off by 2.19 in fp32) then costs speed, never correctness. Returns the distance."""
    device = model.lm_head.weight.device
    generator = torch.Generator(device="cpu").manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (n, 3 * block_size), generator=generator).to(device)
    ids[1:, :block_size] = ids[0, :block_size]  # one prompt (prefilled once), n candidates after it
    logits = []
    for which in (path, "cached"):
        forward = make_forward(model, which, n, ids.shape[1], block_size, fusion)
        forward.prefill(ids[:1, :block_size])
        forward.block_logits(ids, block_size, 2 * block_size, commit_previous=False)
        logits.append(forward.block_logits(ids, 2 * block_size, 3 * block_size, commit_previous=True).float())
    got, want = logits
    distance = ((got - want).norm() / want.norm().clamp_min(1e-30)).item()
    tolerance = AGREEMENT_TOLERANCE.get(model.lm_head.weight.dtype, HALF_AGREEMENT_TOLERANCE)
    if not distance <= tolerance:  # NaN included
        raise EngineError(f"the {path!r} decoding step disagrees with the plain path "
                          f"(logits {distance:.3g} apart, relative; at most {tolerance:g})")
    return distance
