"""paths.cache_bytes says what make_forward's KV cache takes, so that a benchmark (and a
user) can tell how many candidates fit before a batch runs out of GPU memory. Checked
against the caches the paths really allocate: the plain ones here, a graph path's (a batch
bucket of cache buckets) on the GPU."""

from __future__ import annotations

import pytest
import torch

from engine.decoding import paths
from engine.model.sdar import KVCache

from tests.engine.conftest import random_model, tiny_sdar_config


def allocated(cache: KVCache) -> int:
    return sum(t.nbytes for t in (*cache.keys, *cache.values))


@pytest.mark.parametrize("path", ["cached", "static"])
@pytest.mark.parametrize(("n", "length"), [(1, 12), (3, 40), (5, 2052)])
def test_the_plain_paths_cache_is_n_rows_of_the_length(path, n, length):
    model = random_model(tiny_sdar_config()).to(torch.bfloat16)
    forward = paths.make_forward(model, path, n, length, 4)
    assert allocated(forward.cache) == paths.cache_bytes(model.config, path, n, length, 2)


def test_a_graph_paths_cache_is_rounded_up_to_its_buckets():
    config = tiny_sdar_config()
    per_position = 2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim * 2
    # 3 candidates run as 8 rows; 2100 positions as a cache of 4096
    assert paths.cache_bytes(config, "skinny", 3, 2100, 2) == 8 * 4096 * per_position
    assert paths.cache_bytes(config, "skinny", 1, 100, 2) == 1 * paths.MIN_CACHE * per_position
    assert paths.cache_bytes(config, "recompute", 3, 100, 2) == 0


def test_a_cache_whose_power_of_two_would_not_fit_is_cut_to_whole_grains():
    config = tiny_sdar_config()
    per_position = paths.position_bytes(config, 2)
    power_of_two = 8 * 4096 * per_position
    assert paths.cache_bytes(config, "skinny", 3, 2100, 2, budget=power_of_two) == power_of_two  # it fits
    # one byte short: 2100 positions in whole 256s, 2304
    assert paths.cache_bytes(config, "skinny", 3, 2100, 2, budget=power_of_two - 1) == 8 * 2304 * per_position
    assert paths.cache_bucket(2100, 32768, 8, per_position, power_of_two - 1) == 2304
    # never shorter than the sequence nor longer than the context in whole flex tiles
    assert paths.cache_bucket(2100, 32768, 8, per_position, 0) == 2304
    assert paths.cache_bucket(4000, 4000, 8, per_position, 0) == 4096
    assert paths.cache_bucket(5120, 32768, 128, per_position, 0) == 5120


def test_the_budget_is_free_memory_less_the_headroom():
    assert paths.cache_budget(70e9, 80e9) == 70e9 - paths.HEADROOM_FRACTION * 80e9
    assert paths.device_cache_budget(torch.device("cpu")) is None


@pytest.mark.parametrize("budget", [None, 0, 10**12])
@pytest.mark.parametrize(("n", "length"), [(1, 100), (3, 2100), (9, 2300)])
def test_a_graph_paths_cache_is_what_cache_bytes_says_at_any_budget(n, length, budget):
    # graph_cache is the allocation graph_path makes on the GPU; here its tensors are the CPU's
    model = random_model(tiny_sdar_config()).to(torch.bfloat16)
    cache = paths.graph_cache(model, n, length, budget)
    assert allocated(cache) == paths.cache_bytes(model.config, "skinny", n, length, 2, budget)
    assert cache.batch == paths.batch_bucket(n) and cache.max_len >= length


@pytest.mark.gpu
@pytest.mark.parametrize(("n", "length"), [(1, 100), (3, 2100)])
def test_a_graph_paths_cache_on_the_gpu_is_what_cache_bytes_says(n, length):
    model = random_model(tiny_sdar_config()).cuda().to(torch.bfloat16)
    forward = paths.graph_path(model, n, length, 4, compiled=False)
    budget = paths.device_cache_budget(model.lm_head.weight.device, allocated(forward.cache))
    assert allocated(forward.cache) == paths.cache_bytes(model.config, "graphs", n, length, 2, budget)
