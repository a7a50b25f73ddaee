"""The multimodal backend's query-vector cache (``query_cache_size``): bounded, least-recently-used
eviction, every text of one search encoded once whatever the bound. A counting fake encoder (no model)."""

from __future__ import annotations

import numpy as np
import pytest

from vdr.errors import InputError
from vdr.retrieve.multimodal import QUERY_CACHE_SIZE, MultimodalBackend, build
from vdr.retrieve.base import BuildContext


class CountingEncoder:
    """encode_queries: one (2, 4) float32 multi-vector per text, its first value the text's length; records the texts."""

    def __init__(self):
        self.encoded: list[str] = []

    def encode_queries(self, texts, batch_size, progress):
        self.encoded += list(texts)
        return [np.full((2, 4), len(t), dtype=np.float32) for t in texts]


def backend(size):
    b = MultimodalBackend({"model": "none"}, query_cache_size=size)
    b.encoder = CountingEncoder()
    return b


def test_lru_bound_keeps_the_most_recent_texts():
    b = backend(3)
    vecs, n = b._query_vectors(["a", "bb", "ccc"])
    assert n == 3 and [float(v[0, 0]) for v in vecs] == [1.0, 2.0, 3.0]
    assert b._query_vectors(["a"])[1] == 0  # a hit refreshes "a": now the most recent
    assert b._query_vectors(["dddd"])[1] == 1  # evicts the least recently used: "bb"
    assert list(b._query_vecs) == ["ccc", "a", "dddd"]
    assert b.query_cache_info() == {"entries": 3, "max_entries": 3, "eviction": "lru"}
    vecs, n = b._query_vectors([f"t{i}" for i in range(5)] + ["a"])  # more texts than the bound in one search
    assert n == 5 and len(vecs) == 6 and float(vecs[5][0, 0]) == 1.0  # all scored; "a" from the cache
    assert list(b._query_vecs) == ["t3", "t4", "a"]
    assert b.encoder.encoded == ["a", "bb", "ccc", "dddd", "t0", "t1", "t2", "t3", "t4"]


def test_zero_none_default_and_bad_bounds():
    b = backend(0)
    assert b._query_vectors(["a", "a2"])[1] == 2 and b._query_vectors(["a"])[1] == 1  # nothing kept between searches
    assert b.query_cache_info()["entries"] == 0
    b = backend(None)
    b._query_vectors([f"t{i}" for i in range(50)])
    assert b.query_cache_info() == {"entries": 50, "max_entries": None, "eviction": "lru"}
    assert MultimodalBackend({"model": "m"}).query_cache_size == QUERY_CACHE_SIZE == 4096
    assert build(BuildContext("multimodal", {"encoder": {"model": "m"}, "query_cache_size": 7})).query_cache_size == 7
    for bad in (-1, 1.5, True, "10"):
        with pytest.raises(InputError, match="query_cache_size must be an integer >= 0 or None"):
            MultimodalBackend({"model": "m"}, query_cache_size=bad)
