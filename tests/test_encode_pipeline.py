"""The page-encoding pipeline (issue 28.1): equal-token buckets, input order, worker processes,
background store writes, batch size from memory, and vectors equal to the previous path's.

The previous path batched consecutive pages of one size (a corpus) and returned each page's rows
as ``out[i][mask[i]].float().cpu()``; :func:`_previous_path` re-does exactly that with the
encoder's own forward pass, so the comparison is against what vdr computed before the pipeline.
On the CPU the vectors must be bit-identical (float32 and bfloat16 compute); the bfloat16 ones
must also stay within bfloat16 rounding of the float32 ones. The CUDA parts (pinned memory,
streams, free memory) cannot run here: their logic is tested with stand-ins where it can be.
"""

from __future__ import annotations

import threading
import time

import pytest
import torch

from tiny_models import make_corpus, random_image
from vdr.errors import InputError
from vdr.encode.pipeline import (BUCKET_BATCHES, DEFAULT_BATCH_SIZE, BackgroundWriter, PagePipeline, batch_size_from_memory,
                                 default_workers, plan_batches)

SIZES = [(100, 80), (300, 200), (100, 80), (56, 56), (500, 400), (130, 80), (300, 200), (56, 56), (100, 80)]


def _previous_path(enc, corpus, batch_size):
    """vdr's page encoding before the pipeline: consecutive pages of one size per batch, in input order."""
    ids = corpus.ids()
    sizes = [(corpus[i].width, corpus[i].height) for i in ids]
    batches: list[list[int]] = []
    for i, size in enumerate(sizes):
        if batches and len(batches[-1]) < batch_size and sizes[batches[-1][0]] == size:
            batches[-1].append(i)
        else:
            batches.append([i])
    out = []
    for b in batches:
        batch = enc.processor.process_images([corpus.open_image(ids[i]) for i in b])
        inputs = enc._inputs(batch)
        with torch.inference_mode():
            o = enc.model(**inputs)
        mask = inputs["attention_mask"].bool()
        out += [o[k][mask[k]].float().cpu() for k in range(o.shape[0])]
    return out


# ------------------------------------------------------------------------------ pure parts (core)
def test_plan_batches_groups_equal_counts_per_window_in_input_order():
    counts = [3, 5, 3, 3, 5, 9, 3, 5]
    assert plan_batches(counts, 2, 8) == [[0, 2], [3, 6], [1, 4], [7], [5]]
    assert plan_batches(counts, 2, 4) == [[0, 2], [3], [1], [4, 7], [5], [6]]  # windows of four: [0..3], [4..7]
    assert sorted(i for b in plan_batches(counts, 3, 3) for i in b) == list(range(8))
    with pytest.raises(InputError, match="batch_size and window"):
        plan_batches(counts, 0, 4)


def test_batch_size_from_free_memory_and_defaults():
    gib = 2**30
    assert batch_size_from_memory(100 * gib, 3 * gib) == 26  # 0.8 * 100 / 3
    assert batch_size_from_memory(100 * gib, 3 * gib, fraction=0.5, cap=8) == 8
    assert batch_size_from_memory(gib, 3 * gib) == 1 and batch_size_from_memory(gib, 0) == 64
    assert DEFAULT_BATCH_SIZE == 8 and default_workers("cpu") == 0 and 1 <= default_workers("cuda:0") <= 8


def test_background_writer_keeps_order_and_reports_errors():
    seen = []
    w = BackgroundWriter(lambda ids, vecs: (time.sleep(0.01), seen.append((threading.current_thread().name, ids))))
    for i in range(5):
        w.put([f"p{i}"], [torch.zeros(1, 2)])
    w.close()
    assert [ids for _, ids in seen] == [[f"p{i}"] for i in range(5)]
    assert {name for name, _ in seen} == {"vdr-store-writer"} and w.busy_s >= 0.04

    def fail(ids, vecs):
        if ids == ["bad"]:
            raise ValueError("broken page")
        seen.append(ids)

    seen.clear()
    w = BackgroundWriter(fail)
    w.put(["a"], [])
    w.put(["bad"], [])
    w.put(["after"], [])  # dropped: the first error is the one reported
    with pytest.raises(ValueError, match="broken page"):
        w.close()
    assert seen == [["a"]]


class _FakeProcessor:
    """Stand-in processor: each image becomes its size as one row (no model library)."""

    def process_images(self, images):
        return {"x": torch.tensor([[float(im.size[0]), float(im.size[1])] for im in images])}


def _opener(i):
    return random_image(20 + 10 * (i % 3), 20, i)


def test_pipeline_returns_input_order_window_by_window_with_workers():
    calls = []

    def forward(batch):
        calls.append(batch["x"].shape[0])
        return [row[None, :] * 2 for row in batch["x"]]

    pipe = PagePipeline(_FakeProcessor(), forward, device="cpu", batch_size=2, num_workers=1)
    pipe.window = 4
    ids = [f"p{i}" for i in range(7)]
    counts = [i % 3 for i in range(7)]  # the opener's widths: 20, 30, 40, 20, ...
    got = list(pipe.run(_opener, ids, counts))
    assert [g[0] for g in got] == [ids[:4], ids[4:]]  # windows of four, in input order
    vecs = [v for _, vs in got for v in vs]
    assert [float(v[0, 0]) for v in vecs] == [2.0 * (20 + 10 * (i % 3)) for i in range(7)]
    assert calls == [len(b) for b in plan_batches(counts, 2, 4)] and sum(calls) == 7
    st = pipe.stats
    assert (st.pages, st.batches, st.workers, st.pin_memory, st.cuda_streams, st.window) == (7, len(calls), 1, False, False, 4)
    assert st.to_json()["batch_size"] == {"min": 1, "max": 2, "mean": round(7 / len(calls), 2)}


def test_pipeline_out_of_memory_goes_to_the_fallback():
    def forward(batch):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")

    seen = []
    pipe = PagePipeline(_FakeProcessor(), forward, device="cpu", batch_size=4)
    pipe.fallback = lambda batch, rebuild, n, error: seen.append((n, type(error).__name__, rebuild(0, 1)["x"].shape)) or [
        torch.zeros(1, 2)] * n
    out = list(pipe.run(_opener, ["a", "b", "c"], [0, 0, 0]))
    assert seen == [(3, "OutOfMemoryError", (1, 2))] and len(out[0][1]) == 3
    pipe.forward = lambda batch: (_ for _ in ()).throw(RuntimeError("shape mismatch"))  # not an OOM: raised
    with pytest.raises(RuntimeError, match="shape mismatch"):
        list(pipe.run(_opener, ["a"], [0]))


# ------------------------------------------------------------------- the tiny ColQwen2.5 (model)
@pytest.mark.model
def test_vectors_equal_the_previous_path_bit_for_bit(colqwen, tmp_path):
    import vdr

    corpus = vdr.Corpus.load(make_corpus(tmp_path / "c", SIZES))
    ref = _previous_path(colqwen, corpus, 3)
    for workers in (0, 1):
        got = colqwen.encode_pages(corpus, batch_size=3, num_workers=workers)
        assert len(got) == len(ref) and all(torch.equal(a, b) for a, b in zip(ref, got)), workers
    st = colqwen.pipeline_stats
    counts = [colqwen.page_token_count(w, h) for w, h in SIZES]
    assert st.batches == len(plan_batches(counts, 3, 3 * BUCKET_BATCHES)) < len(SIZES)  # fewer batches than sizes change
    assert st.workers == 1 and st.pin_memory is False and st.cuda_streams is False


@pytest.mark.model
def test_bfloat16_vectors_equal_the_previous_path_and_float32_within_bf16_rounding(colqwen_dir, colqwen, tmp_path):
    import vdr

    enc = vdr.LateInteractionEncoder.load(colqwen_dir, device="cpu", compute_dtype="bfloat16")
    corpus = vdr.Corpus.load(make_corpus(tmp_path / "c", SIZES[:5]))
    got = enc.encode_pages(corpus, batch_size=2)
    ref = _previous_path(enc, corpus, 2)
    assert all(torch.equal(a, b) for a, b in zip(ref, got))
    f32 = colqwen.encode_pages(corpus, batch_size=2)
    for a, b in zip(got, f32):  # unit vectors: bfloat16 keeps 8 significant bits through the network
        assert a.shape == b.shape and a.dtype == torch.float32 and float((a - b).abs().max()) < 0.1
        assert float(torch.nn.functional.cosine_similarity(a, b).min()) > 0.99


@pytest.mark.model
def test_embed_writes_in_the_background_and_reports_the_pipeline(colqwen_dir, tmp_path):
    import vdr
    from vdr.encode import EmbeddingStore, EncoderSettings, embed

    corpus = make_corpus(tmp_path / "c", SIZES)
    rep = embed(corpus, EncoderSettings(colqwen_dir, device="cpu", shard_pages=2), tmp_path / "s", progress=False)
    p = rep.pipeline
    assert rep.batch_size == DEFAULT_BATCH_SIZE and p["batch_size_source"] == "default 8 (no CUDA)"
    assert p["attn_implementation"] in ("sdpa", "eager") and p["varlen_attention"] is False
    assert p["pages"] == len(SIZES) and p["store_write_s"] >= 0 and p["workers"] == 0 and p["cuda_streams"] is False
    st = EmbeddingStore.open(rep.store)
    assert st.ids() == vdr.Corpus.load(corpus).ids()  # the store keeps corpus order
    enc = vdr.LateInteractionEncoder.load(colqwen_dir, device="cpu")
    ref = _previous_path(enc, vdr.Corpus.load(corpus), 8)
    assert all(torch.equal(st.get(pid), r.half()) for pid, r in zip(st.ids(), ref))
    assert len(list((st.path / "shards").iterdir())) >= len(SIZES) // 2  # shards of two pages, committed by the writer


@pytest.mark.model
def test_a_store_error_in_the_writer_thread_reaches_the_caller(colqwen_dir, tmp_path, monkeypatch):
    from vdr.encode import EncoderSettings, embed
    from vdr.encode.colpali import LateInteractionEncoder
    from vdr.errors import StoreError

    real = LateInteractionEncoder._forward_device

    def poisoned(enc, inputs):
        return [v.masked_fill(torch.ones_like(v, dtype=torch.bool), float("nan")) for v in real(enc, inputs)]

    monkeypatch.setattr(LateInteractionEncoder, "_forward_device", poisoned)
    with pytest.raises(StoreError, match="non-finite"):
        embed(make_corpus(tmp_path / "c", SIZES[:3]), EncoderSettings(colqwen_dir, device="cpu"), tmp_path / "s", progress=False)
