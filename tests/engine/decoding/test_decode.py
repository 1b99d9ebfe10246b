"""Block-diffusion decoding on a tiny random checkpoint loaded from disk."""

from __future__ import annotations

import pytest
import torch

from engine.decoding.decode import choose_commits, decode, filter_logits, planned_steps, transfer_schedule
from engine.types import Cancelled, EngineError, Sampling

from tests.engine.conftest import random_model, tiny_sdar_config


@pytest.fixture(scope="module")
def tiny():
    """A small vocabulary keeps these many decodes fast; loading real checkpoints is
    test_loading's and test_engine_api's business."""
    return random_model(tiny_sdar_config(vocab_size=1024, mask_token_id=1023))


def prompt(length: int) -> list[int]:
    return torch.randint(0, 1000, (length,), generator=torch.Generator().manual_seed(length)).tolist()


def test_transfer_schedule_spreads_the_remainder_first():
    assert transfer_schedule(4, 4) == [1, 1, 1, 1]
    assert transfer_schedule(4, 3) == [2, 1, 1]
    assert transfer_schedule(3, 4) == [1, 1, 1, 0]  # the default preset asks for min(steps, masked)
    assert transfer_schedule(8, 1) == [8]


def test_choose_commits_per_strategy():
    masked = torch.tensor([[True, True, False, True]])
    confidence = torch.tensor([[0.2, 0.95, 0.99, 0.92]])
    assert choose_commits(Sampling(strategy="sequential"), masked, confidence, 1).tolist() == [[True, False, False, False]]
    assert choose_commits(Sampling(), masked, confidence, 1).tolist() == [[False, True, False, False]]
    dynamic = Sampling(strategy="low_confidence_dynamic", threshold=0.9)
    assert choose_commits(dynamic, masked, confidence, 1).tolist() == [[False, True, False, True]]
    low = torch.tensor([[0.2, 0.3, 0.99, 0.1]])  # nothing above the threshold: still k
    assert choose_commits(dynamic, masked, low, 2).tolist() == [[True, True, False, False]]


def test_filter_logits_top_k_and_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert torch.isinf(filter_logits(logits, 2, 1.0)).tolist() == [[False, False, True, True]]
    assert torch.isinf(filter_logits(logits, 0, 0.79)).tolist() == [[False, False, True, True]]
    assert torch.isinf(filter_logits(logits, 0, 0.81)).tolist() == [[False, False, False, True]]
    assert torch.isinf(filter_logits(logits, 0, 0.1)).tolist() == [[False, True, True, True]]
    # As SDAR/DICE: top-k keeps every token tied with the k-th.
    tied = torch.tensor([[3.0, 1.0, 1.0, 0.0]])
    assert torch.isinf(filter_logits(tied, 2, 1.0)).tolist() == [[False, False, False, True]]


@pytest.mark.parametrize("prompt_len", [8, 10, 3])
@pytest.mark.parametrize(
    "sampling",
    [
        Sampling(),
        Sampling(strategy="sequential", steps=2),
        Sampling(strategy="low_confidence_dynamic", threshold=0.05),
        Sampling(temperature=1.0, top_k=50, top_p=0.9, seed=7),
    ],
    ids=["static-greedy", "sequential", "dynamic", "sampled"],
)
def test_cached_and_static_paths_give_the_same_tokens_as_recomputing(tiny, prompt_len, sampling):
    args = dict(n=3, max_tokens=19, sampling=sampling, stop_ids=[])
    cached = decode(tiny, prompt(prompt_len), path="cached", **args)
    again = decode(tiny, prompt(prompt_len), path="recompute", **args)
    static = decode(tiny, prompt(prompt_len), path="static", **args)  # the CUDA-graph shapes
    assert cached.tokens == again.tokens == static.tokens
    assert cached.steps == again.steps == static.steps
    assert all(len(t) == 19 for t in cached.tokens)
    assert cached.finish_reasons == ["length"] * 3
    assert all(1023 not in t for t in cached.tokens)  # no mask left, none predicted


def test_decoding_leaves_the_model_as_it_was(tiny):
    """The fast paths' shapes run on the model as loaded: no weights swapped or buffers added."""
    parameters = {name: (p, p.data_ptr()) for name, p in tiny.named_parameters()}
    buffers = dict(tiny.named_buffers())
    decode(tiny, prompt(10), n=2, max_tokens=8, sampling=Sampling(), stop_ids=[], path="static")
    after = {name: (p, p.data_ptr()) for name, p in tiny.named_parameters()}
    assert after.keys() == parameters.keys()
    assert all(after[name][0] is p and after[name][1] == ptr for name, (p, ptr) in parameters.items())
    assert dict(tiny.named_buffers()) == buffers


def test_the_first_block_starts_inside_the_prompts_partial_block(tiny):
    """Prompt of 10 with block 4: the first block is positions 8..11, two of them prompt
    tokens; with one step per token it takes 2 steps, then 4 per block after it. Progress
    comes per block (block, its steps, tokens so far)."""
    steps_seen = []
    result = decode(
        tiny, prompt(10), max_tokens=6, sampling=Sampling(steps=4), stop_ids=[],
        on_progress=lambda p: steps_seen.append((p.phase, p.block, p.step, p.tokens)),
    )
    assert len(result.tokens[0]) == 6
    assert result.steps == 2 + 4
    assert steps_seen[0] == ("prefill", 0, 0, 0)
    assert [s[1:] for s in steps_seen[1:]] == [(1, 2, 2), (2, 4, 6)]


def test_candidates_decode_together_and_greedy_rows_agree(tiny):
    one = decode(tiny, prompt(9), n=1, max_tokens=12, sampling=Sampling(), stop_ids=[])
    four = decode(tiny, prompt(9), n=4, max_tokens=12, sampling=Sampling(), stop_ids=[])
    assert four.tokens == one.tokens * 4
    assert four.steps == one.steps  # one batch, not four runs


def test_seeded_sampling_is_reproducible_and_candidates_differ(tiny):
    sampling = Sampling(temperature=1.0, seed=3)
    a = decode(tiny, prompt(8), n=4, max_tokens=8, sampling=sampling, stop_ids=[])
    b = decode(tiny, prompt(8), n=4, max_tokens=8, sampling=sampling, stop_ids=[])
    c = decode(tiny, prompt(8), n=4, max_tokens=8, sampling=Sampling(temperature=1.0, seed=4), stop_ids=[])
    assert a.tokens == b.tokens
    assert a.tokens != c.tokens
    assert len({tuple(t) for t in a.tokens}) > 1


def test_stops_at_the_first_stop_token(tiny):
    free = decode(tiny, prompt(8), max_tokens=24, sampling=Sampling(), stop_ids=[])
    stop_token = free.tokens[0][5]
    first = free.tokens[0].index(stop_token)
    stopped = decode(tiny, prompt(8), max_tokens=24, sampling=Sampling(), stop_ids=[stop_token])
    assert stopped.tokens[0] == free.tokens[0][:first]
    assert stopped.finish_reasons == ["eos"]
    assert stopped.steps == 4 * (first // 4 + 1)  # it stopped after the block holding it


@pytest.mark.parametrize("prompt_len", [8, 10])   # the answer starts a block, or inside the prompt's last
def test_an_answer_never_starts_with_a_banned_token(tiny, prompt_len):
    free = decode(tiny, prompt(prompt_len), n=4, max_tokens=8, sampling=Sampling(temperature=1.0, seed=5),
                  stop_ids=[])
    banned = sorted({row[0] for row in free.tokens})   # what this model starts with, banned
    kept = decode(tiny, prompt(prompt_len), n=4, max_tokens=8, sampling=Sampling(temperature=1.0, seed=5),
                  stop_ids=[], first_banned=banned)
    assert all(row[0] not in banned for row in kept.tokens)
    # Only the first token: later positions may still take them, and the greedy answer's first
    # token is its next likeliest.
    greedy = decode(tiny, prompt(prompt_len), max_tokens=8, sampling=Sampling(), stop_ids=[])
    again = decode(tiny, prompt(prompt_len), max_tokens=8, sampling=Sampling(), stop_ids=[],
                   first_banned=[greedy.tokens[0][0]])
    assert again.tokens[0][0] != greedy.tokens[0][0]
    # DICE's preset decodes as DICE does: nothing banned.
    dice = Sampling(preset="dice", steps=4, temperature=0.0)
    assert decode(tiny, prompt(prompt_len), max_tokens=8, sampling=dice, stop_ids=[],
                  first_banned=[greedy.tokens[0][0]]).tokens == \
        decode(tiny, prompt(prompt_len), max_tokens=8, sampling=dice, stop_ids=[]).tokens


def test_cancel_between_steps(tiny):
    calls = []

    def should_cancel():
        calls.append(1)
        return len(calls) > 3

    with pytest.raises(Cancelled):
        decode(tiny, prompt(8), max_tokens=64, sampling=Sampling(), stop_ids=[], should_cancel=should_cancel)
    assert len(calls) == 4


def test_bad_requests_are_clear_errors(tiny):
    with pytest.raises(EngineError, match="context"):
        decode(tiny, prompt(8), max_tokens=5000, sampling=Sampling(), stop_ids=[])
    with pytest.raises(EngineError, match="CUDA"):
        decode(tiny, prompt(8), max_tokens=4, sampling=Sampling(), stop_ids=[], path="graphs")
    with pytest.raises(EngineError, match="strategy"):
        Sampling(strategy="fastest")


def test_the_compiled_path_reads_prompts_eagerly(tiny):
    """A prompt's length changes with every request: through the compiled model each length
    was a compilation, and the ninth ended the path (seen on the H200 with DICE's golden
    prompts). Prefill of twelve lengths compiles nothing and fills the cache as eagerly."""
    import torch._dynamo

    from engine.decoding.paths import StaticForward
    from engine.model.sdar import KVCache

    config = torch._dynamo.config
    limit = config.recompile_limit
    torch._dynamo.reset()
    compiled_before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for length in range(3, 15):
        ids = torch.tensor([prompt(length)])
        caches = [KVCache.allocate(tiny.config, 2, 32, "cpu", torch.float32) for _ in range(2)]
        StaticForward(tiny, caches[0], 4, compiled=True).prefill(ids)
        StaticForward(tiny, caches[1], 4).prefill(ids)
        assert all(torch.equal(a, b) for a, b in zip(caches[0].keys + caches[0].values, caches[1].keys + caches[1].values))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == compiled_before
    config.recompile_limit = limit


def test_planned_steps_are_the_steps_a_block_surely_needs():
    static = Sampling(steps=4)
    assert planned_steps(static, transfer_schedule(4, 4), 4) == 4
    assert planned_steps(static, transfer_schedule(2, 2), 2) == 2  # a block the prompt half fills
    dice = Sampling.for_preset("dice")  # quotas over the block length: 2 masks take 2 steps of 1
    assert planned_steps(dice, transfer_schedule(4, 4), 2) == 2
    assert planned_steps(Sampling(strategy="low_confidence_dynamic"), transfer_schedule(4, 4), 4) == 1
    assert planned_steps(static, [0], 0) == 0


class HostReads:
    """Counts the reads of tensor values by the host (each a device synchronisation on a GPU)."""

    def __init__(self, monkeypatch):
        self.count = 0
        for name in ("__bool__", "__int__", "__float__", "item", "tolist"):
            original = getattr(torch.Tensor, name)

            def counted(tensor, *args, _original=original):
                self.count += 1
                return _original(tensor, *args)

            monkeypatch.setattr(torch.Tensor, name, counted)


@pytest.mark.parametrize("path", ["cached", "static"])
def test_the_host_reads_the_device_per_block_not_per_step(tiny, monkeypatch, path):
    """A static schedule's steps are queued without waiting for the device: the reads are
    the same for 1 step per block as for 4 (per block: whether it is whole, where the stop
    tokens are; then the result), and the progress comes per block."""
    ids = prompt(8)
    reads = HostReads(monkeypatch)
    counts = {}
    for steps in (1, 4):
        reads.count = 0
        progress = []
        result = decode(tiny, ids, n=2, max_tokens=16, sampling=Sampling(steps=steps), stop_ids=[1022],
                        path=path, on_progress=progress.append)
        counts[steps] = reads.count
        assert result.steps == 4 * steps
        assert [p.block for p in progress if p.phase == "decode"] == [1, 2, 3, 4]
    assert counts[1] == counts[4] == 2 * 4 + 1


def test_the_dynamic_strategy_reads_once_per_step_past_the_first(tiny, monkeypatch):
    ids = prompt(8)
    reads = HostReads(monkeypatch)
    result = decode(tiny, ids, max_tokens=16, sampling=Sampling(strategy="low_confidence_dynamic", threshold=2.0),
                    stop_ids=[], path="cached")
    assert result.steps == 16  # nothing above a threshold of 2: one token per step
    assert reads.count == 4 * 3 + 4 + 1  # 3 checks a block with work left, 1 with none; the result


@pytest.fixture(scope="module")
def tiny16():
    """head_dim 16: the least flex_attention takes."""
    return random_model(tiny_sdar_config(vocab_size=1024, mask_token_id=1023, head_dim=16))


@pytest.mark.parametrize("prompt_len", [8, 10, 3])
@pytest.mark.parametrize(
    "sampling",
    [Sampling(), Sampling(strategy="low_confidence_dynamic", threshold=0.05),
     Sampling(temperature=1.0, top_k=50, top_p=0.9, seed=7)],
    ids=["static-greedy", "dynamic", "sampled"],
)
@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")  # eagerly, on purpose
def test_flex_attention_gives_the_same_tokens(tiny16, prompt_len, sampling):
    """The `flex` path's attention (a block mask over the whole cache), run eagerly."""
    args = dict(n=2, max_tokens=19, sampling=sampling, stop_ids=[])
    cached = decode(tiny16, prompt(prompt_len), path="cached", **args)
    flex = decode(tiny16, prompt(prompt_len), path="static-flex", **args)
    assert flex.tokens == cached.tokens
    assert flex.steps == cached.steps


def test_the_flex_block_mask_skips_the_tiles_past_the_block():
    from engine.model.routes import FLEX_BLOCK, flex_block_mask
    from engine.model.sdar import block_causal_mask

    positions = torch.arange(300, 308)
    mask = block_causal_mask(positions, torch.arange(4 * FLEX_BLOCK), 4)
    block_mask = flex_block_mask(mask)
    assert block_mask.kv_num_blocks.flatten().tolist() == [3]  # keys 0..307: tiles 0, 1, 2 of 4
    assert block_mask.kv_indices.flatten()[:3].tolist() == [0, 1, 2]
    assert torch.equal(block_mask.to_dense()[0, 0, 0, :4].bool(), torch.tensor([True, True, True, False]))


def test_graph_paths_pad_to_fixed_buckets():
    from engine.decoding.paths import MIN_CACHE, batch_bucket, cache_bucket

    assert [batch_bucket(n) for n in (1, 2, 3, 4, 5, 8, 9, 17, 64)] == [1, 8, 8, 8, 8, 8, 16, 32, 64]
    assert cache_bucket(1152, 32768) == cache_bucket(1, 32768) == MIN_CACHE
    assert cache_bucket(MIN_CACHE + 1, 32768) == 2 * MIN_CACHE
    assert cache_bucket(30000, 32768) == 32768
    assert cache_bucket(4000, 4000) == 4096  # the context in whole flex tiles


def test_a_fast_path_that_fails_at_warm_up_hands_over_down_to_cached(tiny):
    """On a CPU every fast path fails (they need CUDA; flex also a head_dim of 16): the
    engine says so and ends on the eager path, which then decodes."""
    from engine.decoding.local import LocalEngine

    engine = LocalEngine(tiny, tokenizer=None, config=tiny.config, name="tiny")
    engine.decode_path = "flex"
    said = []
    engine.warm_up(said.append)
    assert engine.decode_path == "cached"
    failures = [m for m in said if "decoding path failed" in m]
    assert [m.split(" decoding path failed")[0] for m in failures] == ["the 'flex'", "the 'compiled'"]
    assert "head dimension" in failures[0] and "using 'compiled'" in failures[0]
    assert "CUDA" in failures[1] and "using 'cached'" in failures[1]
    assert said[0].startswith("preparing the 'flex' decoding step")


def test_warm_up_prepares_and_checks_one_candidate_and_eight(tiny16):
    """engine.decoding.decode.warm_up on a path the CPU runs: both batches decode and pass the agreement
    check (a one-candidate check once failed on its own prompt row, and every fast path then
    fell back to the eager one at load)."""
    from engine.decoding import decode as decoding

    said = []
    decoding.warm_up(tiny16, "static", 4, report=said.append)
    assert [m.split(" is ready")[0] for m in said if "is ready" in m] == [
        "the 'static' decoding step for 1 candidate(s)", "the 'static' decoding step for 8 candidate(s)"]


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_the_compiled_model_takes_flex_attention_with_its_block_mask_built_outside(tiny16):
    """The `flex` path compiles the whole model; inductor cannot lower flex_attention over a
    block mask built inside the same graph (on the H200 with torch 2.11 every `flex` test
    failed so, and on the CPU there is no valid choice), so the path builds the mask outside
    and the compiled model takes it. Pinned on the CPU: the compiled step gives the eager
    step's logits, and a second window (another mask) needs no recompilation."""
    import torch._dynamo

    from engine.decoding.paths import StaticForward
    from engine.model.sdar import KVCache

    torch._dynamo.reset()
    cache = KVCache.allocate(tiny16.config, 2, 256, torch.device("cpu"), torch.float32)
    eager = StaticForward(tiny16, cache, 4, attention="flex")
    compiled = StaticForward(tiny16, cache, 4, compiled=True, attention="flex")
    ids = torch.randint(0, 1000, (2, 16))
    counters = torch._dynamo.utils.counters
    with torch._dynamo.config.patch(error_on_recompile=True), torch.no_grad():
        eager.prefill(ids[:1, :8])
        for first in (4, 8):
            want = eager.window_logits(ids, first, first + 8, cache.max_len)
            got = compiled.window_logits(ids, first, first + 8, cache.max_len)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert counters["stats"]["unique_graphs"] >= 1


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_warm_up_checks_a_path_against_the_plain_path_and_refuses_one_that_disagrees(tiny16, monkeypatch):
    """engine.decoding.decode.check_agreement, which warm_up runs for every fast path before the engine
    uses it: a path giving the plain path's logits passes; one whose step is off (as
    torch.compile'd flex_attention was on the H200) raises, and the engine falls back."""
    import engine.decoding.decode as decoding
    from engine.types import EngineError

    assert decoding.check_agreement(tiny16, "static-flex", 2, 4) < 1e-4
    assert decoding.check_agreement(tiny16, "static", 2, 4) < 1e-4
    # One candidate, as warm_up checks first (WARM_BATCHES): its row is the prompt's own row.
    assert decoding.check_agreement(tiny16, "static", 1, 4) < 1e-4

    real = decoding.make_forward

    def off_by_one(model, path, *args):
        forward = real(model, path, *args)
        if path == "static":
            block_logits = forward.block_logits
            forward.block_logits = lambda *a, **k: block_logits(*a, **k) + 1.0
        return forward

    monkeypatch.setattr(decoding, "make_forward", off_by_one)
    with pytest.raises(EngineError, match="'static' decoding step disagrees with the plain path"):
        decoding.check_agreement(tiny16, "static", 2, 4)


def test_the_default_path_off_a_gpu_is_the_eager_cached_one():
    """engine.model.routes.default_path on the CPU (the GPU's is tests/engine/decoding/test_decode_gpu.py)."""
    from engine.model.routes import default_path

    assert default_path(random_model(tiny_sdar_config())) == "cached"


def test_a_start_constraint_decodes_one_of_its_names_then_frees_the_answer(tiny):
    """NameStart: each answer starts with one of the names (token sequences), whole, then a
    token that does not go on with a word; the rest is free. The names here are what this model
    would not write: its free answers' first tokens, shifted."""
    from engine.decoding.local import NameStart

    free = decode(tiny, prompt(10), n=4, max_tokens=12, sampling=Sampling(temperature=1.0, seed=5), stop_ids=[])
    names = [[7, 8, 9], [7, 11], [13]]
    word_tokens = [8, 9, 11, 13, 14, 15]   # say: these go on with a name
    start = NameStart(names, word_tokens, tiny.config.vocab_size)
    kept = decode(tiny, prompt(10), n=4, max_tokens=12, sampling=Sampling(temperature=1.0, seed=5), stop_ids=[],
                  start_constraint=start)
    for row in kept.tokens:
        name = next(n for n in names if row[:len(n)] == n)
        assert row[len(name)] not in word_tokens
    assert kept.tokens != free.tokens
    # The trie: inside a name only its next tokens; after a whole one, no word token; then free.
    assert (~start([7])).nonzero().flatten().tolist() == [8, 11]
    assert start([13])[14] and not start([13])[2]
    assert start([13, 2]) is None


def test_the_context_is_the_trained_length_where_the_checkpoint_says_it(tiny):
    """A checkpoint without `trained_context` (DICE's, for one) keeps its positions; one with it
    is cut to it, never past its positions, and a bad value is ignored."""
    from dataclasses import replace

    from engine.decoding.local import LocalEngine

    positions = tiny.config.max_position_embeddings
    for extra, context in (({}, positions), ({"trained_context": 64}, 64),
                           ({"trained_context": 10 * positions}, positions), ({"trained_context": "64"}, positions)):
        config = replace(tiny.config, extra=extra)
        assert LocalEngine(tiny, tokenizer=None, config=config, name="tiny").context == context


def rows_run(model):
    """A hook recording the batch of every forward call; remove it with .remove()."""
    seen: list[int] = []
    handle = model.register_forward_pre_hook(lambda module, args, kwargs: seen.append(args[0].shape[0]),
                                              with_kwargs=True)
    return seen, handle


def test_rows_that_stopped_leave_the_batch_and_the_others_draw_the_same_tokens(tiny):
    """A row past its stop token is done: the eager paths stop running the model over it, and
    every other row gets the tokens it got when all rows ran to the end (the static path, the
    graph paths' shapes, never drops a row)."""
    args = dict(n=4, max_tokens=24, sampling=Sampling(temperature=1.0, seed=3))
    free = decode(tiny, prompt(10), stop_ids=[], **args)
    # A token that ends row 0 early and the others later or never.
    stop = next(t for t in free.tokens[0][:6] if all(t not in row[:8] for row in free.tokens[1:]))
    seen, handle = rows_run(tiny)
    try:
        cached = decode(tiny, prompt(10), stop_ids=[stop], path="cached", **args)
    finally:
        handle.remove()
    static = decode(tiny, prompt(10), stop_ids=[stop], path="static", **args)
    recomputed = decode(tiny, prompt(10), stop_ids=[stop], path="recompute", **args)
    assert cached.tokens == static.tokens == recomputed.tokens
    assert cached.tokens[0] == free.tokens[0][:free.tokens[0].index(stop)]
    assert cached.finish_reasons[0] == "eos"
    for row, tokens in zip(free.tokens[1:], cached.tokens[1:]):
        assert tokens == (row[:row.index(stop)] if stop in row else row)
    assert seen[0] == 1 and seen[1] == 4   # the prefill (one row), the first step
    assert min(seen[1:]) < 4   # the cached path ran fewer rows once row 0 was done


def test_a_row_the_caller_calls_ended_stops_with_its_tokens_so_far(tiny):
    """`ended` (a FIM fill past its span, engine.fill.spans.span_ended) ends a row at the end of a
    block: its tokens so far are returned, as they were drawn, with the reason `length`."""
    args = dict(n=3, max_tokens=20, sampling=Sampling(temperature=1.0, seed=11), stop_ids=[])
    free = decode(tiny, prompt(8), **args)
    ended = decode(tiny, prompt(8), ended=lambda tokens: len(tokens) >= 8, **args)
    assert ended.tokens == [row[:8] for row in free.tokens]
    assert ended.finish_reasons == ["length"] * 3
    assert ended.steps < free.steps


def test_a_prompt_that_starts_as_the_last_one_prefills_only_the_blocks_that_differ(tiny):
    """engine.decoding.paths.PromptKeys: a fill's next decode (a few tokens added at the prompt's end)
    reuses the whole blocks the prompts share, and decodes what a fresh prefill decodes."""
    from dataclasses import replace

    from engine.decoding.paths import PromptKeys

    first, longer = prompt(13), prompt(13) + [5, 6, 7, 8, 9]
    other = [999] + longer[1:]
    args = dict(n=2, max_tokens=12, sampling=Sampling(temperature=1.0, seed=2), stop_ids=[])
    for path in ("cached", "static"):
        kept = PromptKeys()
        for ids, reused in ((first, 0), (longer, 12), (longer, 16), (other, 0)):
            # 12: the 3 whole blocks both prefill (token 13 is in the block decoding starts in)
            assert decode(tiny, ids, kept=kept, path=path, **args).tokens == decode(tiny, ids, path=path, **args).tokens
            assert kept.reused == reused
    decode(tiny, other, kept=kept, **{**args, "sampling": replace(args["sampling"], block_size=2)})
    assert kept.reused == 0   # keys of another block size are other keys
