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


@pytest.mark.gpu
@pytest.mark.parametrize(("n", "length"), [(1, 100), (3, 2100)])
def test_a_graph_paths_cache_on_the_gpu_is_what_cache_bytes_says(n, length):
    model = random_model(tiny_sdar_config()).cuda().to(torch.bfloat16)
    forward = paths.graph_path(model, n, length, 4, compiled=False)
    assert allocated(forward.cache) == paths.cache_bytes(model.config, "graphs", n, length, 2)
