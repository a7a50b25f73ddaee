"""Embedding store: atomic, resumable (kill -9), fingerprint- and content-keyed, bounded streaming."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from tiny_models import make_corpus, random_image  # noqa: E402,F401
from vdr.encode import embed  # noqa: E402
from vdr.errors import StoreError  # noqa: E402
from vdr.encode.store import JOURNAL_FILE, SHARDS_DIR, EmbeddingStore  # noqa: E402

SIZES = [(100, 80), (300, 200), (56, 56), (500, 400), (120, 260), (80, 80), (210, 150)]


def _fake(tmp_path, lengths, dim=8, dtype="float32", fp="f" * 64):
    st = EmbeddingStore.open_for_writing(tmp_path / "s", encoder_fingerprint=fp, encoder_settings={}, dtype=dtype, dim=dim)
    g = torch.Generator().manual_seed(0)
    vecs = {}
    for i, n in enumerate(lengths):
        v = torch.randn(n, dim, generator=g)
        vecs[f"p{i}"] = v
        st.add(f"p{i}", f"h{i}", v)
        if i % 3 == 2:
            st.commit()
    st.close()
    return EmbeddingStore.open(tmp_path / "s"), vecs


def test_round_trip_get_lengths_dtype(tmp_path):
    st, vecs = _fake(tmp_path, [3, 5, 1, 7, 2])
    assert st.ids() == list(vecs) and len(st) == 5 and st.dim == 8 and st.dtype == torch.float32
    assert st.lengths() == [v.shape[0] for v in vecs.values()] and st.length("p1") == 5
    for k, v in vecs.items():
        assert torch.equal(st.get(k), v)
    with pytest.raises(KeyError, match="nope"):
        st.get("nope")


@pytest.mark.parametrize("max_tokens", [1, 4, 7, 8, 100])
def test_iter_blocks_budget_and_coverage(tmp_path, max_tokens):
    st, vecs = _fake(tmp_path, [3, 5, 1, 7, 2, 9, 4])
    seen = []
    for ids, tokens, lengths in st.iter_blocks(max_tokens):
        assert tokens.shape == (int(lengths.sum()), 8) and lengths.dtype == torch.int64 and len(ids) == len(lengths)
        assert tokens.shape[0] <= max_tokens or len(ids) == 1  # a long page alone forms its own block
        pos = 0
        for pid, n in zip(ids, lengths.tolist()):
            assert torch.equal(tokens[pos:pos + n], vecs[pid])
            pos += n
        seen += ids
    assert seen == list(vecs)  # every page exactly once, in order
    sub = ["p4", "p0"]
    assert [i for b in st.iter_blocks(max_tokens, ids=sub) for i in b[0]] == sub


def test_float16_default_and_several_fingerprints(tmp_path):
    a = EmbeddingStore.open_for_writing(tmp_path, encoder_fingerprint="a" * 64, encoder_settings={}, dim=4)
    a.add("x", "h", torch.ones(2, 4))
    a.close()
    b = EmbeddingStore.open_for_writing(tmp_path, encoder_fingerprint="b" * 64, encoder_settings={}, dim=4)
    b.close()
    with pytest.raises(StoreError, match="2 encoder settings"):
        EmbeddingStore.open(tmp_path)
    st = EmbeddingStore.open(tmp_path, fingerprint="a" * 64)
    assert st.dtype == torch.float16 and st.get("x").dtype == torch.float16
    assert len(EmbeddingStore.open(tmp_path, fingerprint="b" * 10)) == 0


def test_single_writer_lock(tmp_path):
    a = EmbeddingStore.open_for_writing(tmp_path, encoder_fingerprint="a" * 64, encoder_settings={}, dim=4)
    with pytest.raises(StoreError, match="another process"):
        EmbeddingStore.open_for_writing(tmp_path, encoder_fingerprint="a" * 64, encoder_settings={}, dim=4)
    a.close()
    EmbeddingStore.open_for_writing(tmp_path, encoder_fingerprint="a" * 64, encoder_settings={}, dim=4).close()


def test_torn_journal_and_orphans_are_ignored(tmp_path):
    st, vecs = _fake(tmp_path, [3, 5, 1, 7])
    path = st.path
    (path / SHARDS_DIR / "999999-dead.safetensors").write_bytes(b"garbage")  # complete but unindexed
    (path / SHARDS_DIR / ".x.safetensors.abc.tmp").write_bytes(b"half")  # temp file
    with open(path / JOURNAL_FILE, "ab") as f:
        f.write(b'{"shard":"000002-x.safetensors","pages":[["p9",0,')  # torn tail
    r = EmbeddingStore.open(path)
    assert r.ids() == list(vecs)
    w = EmbeddingStore.open_for_writing(tmp_path / "s", encoder_fingerprint="f" * 64, encoder_settings={}, dtype="float32", dim=8)
    w.close()
    assert not (path / SHARDS_DIR / "999999-dead.safetensors").exists()
    assert not any(p.name.startswith(".") for p in (path / SHARDS_DIR).iterdir())
    assert (path / JOURNAL_FILE).read_bytes().endswith(b"\n")
    assert EmbeddingStore.open(path).ids() == list(vecs)


def test_no_pickle_in_store_code():
    src = (Path(__file__).parent.parent / "vdr" / "encode" / "store.py").read_text()
    assert "pickle" not in src.replace("pickle-free", "") and "torch.load" not in src


def test_embed_plan_dedups_and_reuses():
    """The plan from hashes alone: stale dropped, stored content copied, new duplicates encoded once."""
    from vdr.encode.embed import _duplicates, _plan

    ids = ["p1", "p2", "p3", "p4", "p5"]
    hashes = {"p1": "a", "p2": "b", "p3": "a", "p4": "c", "p5": "b"}
    plan = _plan(ids, hashes, {"p1": "a", "p2": "x", "p9": "z"})
    assert plan.stale == ["p9"]
    assert plan.encode == ["p2", "p4"]  # p2 changed (x -> b), p4 new
    assert plan.from_store == [("p3", "p1")]  # p3 has p1's stored content
    assert plan.copies == {"p2": ["p5"]} and plan.copied == 2
    assert _duplicates(ids, hashes) == {"p3": "p1", "p5": "p2"}
    again = _plan(ids, hashes, {pid: hashes[pid] for pid in ids})
    assert (again.stale, again.encode, again.copies, again.from_store) == ([], [], {}, [])


# ---------------------------------------------------------------------------------- with a model


def test_changed_page_reencoded_unchanged_reused_removed_dropped(tmp_path, colqwen):
    corpus = make_corpus(tmp_path / "c", SIZES[:4])
    r1 = embed(corpus, colqwen, tmp_path / "s", batch_size=2, progress=False)
    assert (r1.encoded, r1.reused) == (4, 0)
    st1 = EmbeddingStore.open(tmp_path / "s")
    before = {k: st1.get(k).clone() for k in st1.ids()}
    # change page 2's image, remove page 4 from pages.jsonl
    from vdr.corpus import Corpus, write_pages

    c = Corpus.load(corpus)
    random_image(300, 200, seed=1234).save(c.image_path("doc.pdf#2"))
    write_pages(corpus / "pages.jsonl", [p for p in c.pages() if p.corpus_id != "doc.pdf#4"])
    r2 = embed(corpus, colqwen, tmp_path / "s", batch_size=2, progress=False)
    assert (r2.encoded, r2.reused, r2.removed) == (1, 2, 1)
    st2 = EmbeddingStore.open(tmp_path / "s")
    assert sorted(st2.ids()) == ["doc.pdf#1", "doc.pdf#2", "doc.pdf#3"]
    assert torch.equal(st2.get("doc.pdf#1"), before["doc.pdf#1"])
    assert not torch.equal(st2.get("doc.pdf#2"), before["doc.pdf#2"])
    r3 = embed(corpus, colqwen, tmp_path / "s", batch_size=2, progress=False)
    assert (r3.encoded, r3.reused) == (0, 3)


def test_different_page_settings_never_reused(tmp_path, colqwen_dir):
    from vdr.encode import LateInteractionEncoder

    corpus = make_corpus(tmp_path / "c", SIZES[:2])
    a = LateInteractionEncoder.load(colqwen_dir, device="cpu")
    c = LateInteractionEncoder.load(colqwen_dir, device="cpu", max_pixels=28 * 28 * 8)
    d = LateInteractionEncoder.load(colqwen_dir, device="cpu", compute_dtype="bfloat16")
    assert len({a.page_fingerprint, c.page_fingerprint, d.page_fingerprint}) == 3
    ra = embed(corpus, a, tmp_path / "s", progress=False)
    rc = embed(corpus, c, tmp_path / "s", store_dtype="float32", progress=False)
    rd = embed(corpus, a, tmp_path / "s", store_dtype="float32", progress=False)
    re_ = embed(corpus, d, tmp_path / "s", progress=False)
    assert [r.encoded for r in (ra, rc, rd, re_)] == [2, 2, 2, 2]
    assert len({ra.store, rc.store, rd.store, re_.store}) == 4
    assert (rd.dtype, EmbeddingStore.open(rd.store).dtype) == ("float32", torch.float32)


class _CountPageForwards:
    """Counts forward passes over page batches (those with pixel values) of every encoder."""

    def __init__(self, monkeypatch):
        from vdr.encode.colpali import LateInteractionEncoder

        self.pages = self.queries = 0
        real = LateInteractionEncoder._forward_device  # every forward pass, pages (the pipeline) and queries

        def counting(enc, inputs):
            if "pixel_values" in inputs:
                self.pages += 1
            else:
                self.queries += 1
            return real(enc, inputs)

        monkeypatch.setattr(LateInteractionEncoder, "_forward_device", counting)


def test_new_query_template_reuses_every_page_vector(tmp_path, colqwen_dir, monkeypatch):
    """The store key covers only page settings: another query prefix (or augmentation count)
    performs 0 page forward passes and finds the same store folder; the query fingerprint changes."""
    from vdr.encode import EncoderSettings, LateInteractionEncoder

    corpus = make_corpus(tmp_path / "c", SIZES[:4])
    count = _CountPageForwards(monkeypatch)
    base = EncoderSettings(colqwen_dir, device="cpu", batch_size=2)
    r1 = embed(corpus, base, tmp_path / "s", progress=False)
    # four page sizes; pages with equal image-token counts share a batch (vdr.encode.pipeline.plan_batches)
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    from tiny_models import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS
    from vdr.encode.pipeline import plan_batches

    counts = [(h // 28) * (w // 28) for h, w in (smart_resize(hh, ww, 28, QWEN_MIN_PIXELS, QWEN_MAX_PIXELS) for ww, hh in SIZES[:4])]
    assert r1.encoded == 4 and count.pages == len(plan_batches(counts, 2, 32)) < 4  # batch size 2
    st1 = EmbeddingStore.open(r1.store)
    before = {k: st1.get(k).clone() for k in st1.ids()}
    count.pages = 0
    r2 = embed(corpus, base.replace(query_prefix="", n_augmentation=3), tmp_path / "s", progress=False)
    assert count.pages == 0 and (r2.encoded, r2.reused, r2.copied) == (0, 4, 0)
    assert r2.store == r1.store and r2.fingerprint == r1.fingerprint
    assert r2.query_fingerprint != r1.query_fingerprint
    assert r2.encoder["query_template"]["prefix"] == "" and r2.encoder["query_template"]["n_augmentation"] == 3
    st = EmbeddingStore.open(tmp_path / "s")  # one folder only
    assert all(torch.equal(st.get(k), before[k]) for k in before)
    assert "query_template" not in st.meta["encoder"] and st.meta["key_scheme"] == 2
    # the query vectors do change with the template
    enc1 = LateInteractionEncoder.load(base)
    enc2 = enc1.with_query_template(query_prefix="", n_augmentation=3)
    assert enc2.page_fingerprint == enc1.page_fingerprint and enc2.query_fingerprint == r2.query_fingerprint
    tok = enc1.processor.tokenizer
    assert enc1.encode_queries(["carbon"])[0].shape[0] == len(tok("Query: carbon" + "<|endoftext|>" * 10)["input_ids"])
    assert enc2.encode_queries(["carbon"])[0].shape[0] == len(tok("carbon" + "<|endoftext|>" * 3)["input_ids"])


def test_duplicate_pages_encoded_once(tmp_path, colqwen_dir, monkeypatch):
    """Pages with the same image bytes: one forward pass, the same vectors under every id, counted."""
    import shutil

    from vdr.corpus import Corpus
    from vdr.encode import EncoderSettings

    corpus = make_corpus(tmp_path / "c", [(100, 80), (100, 80), (100, 80), (56, 56)])
    c = Corpus.load(corpus)
    shutil.copyfile(c.image_path("doc.pdf#1"), c.image_path("doc.pdf#3"))  # p3 == p1
    count = _CountPageForwards(monkeypatch)
    s = EncoderSettings(colqwen_dir, device="cpu", batch_size=1)
    r = embed(corpus, s, tmp_path / "s", progress=False)
    assert count.pages == 3 and (r.encoded, r.copied, r.reused, r.duplicates) == (3, 1, 0, 1)
    assert r.duplicate_of == {"doc.pdf#3": "doc.pdf#1"}
    st = EmbeddingStore.open(r.store)
    assert st.ids() == ["doc.pdf#1", "doc.pdf#3", "doc.pdf#2", "doc.pdf#4"]
    assert torch.equal(st.get("doc.pdf#1"), st.get("doc.pdf#3"))
    # a new page that duplicates a stored one is copied from the store: no forward pass
    from vdr.corpus import write_pages
    import dataclasses

    pages = c.pages()
    shutil.copyfile(c.image_path("doc.pdf#4"), corpus / "images" / "extra.png")
    write_pages(corpus / "pages.jsonl", pages + [dataclasses.replace(pages[3], corpus_id="doc.pdf#5", page=5, image="images/extra.png")])
    count.pages = 0
    r2 = embed(corpus, s, tmp_path / "s", progress=False)
    assert count.pages == 0 and (r2.encoded, r2.copied, r2.reused, r2.duplicates) == (0, 1, 4, 2)
    st = EmbeddingStore.open(r2.store)
    assert torch.equal(st.get("doc.pdf#5"), st.get("doc.pdf#4"))


def test_duplicate_vectors_equal_encoding_each_page(tmp_path, colqwen):
    """The copied vectors are exactly those encoding the duplicate on its own gives."""
    import shutil

    from vdr.corpus import Corpus

    corpus = make_corpus(tmp_path / "c", [(100, 80), (300, 200), (100, 80)])
    c = Corpus.load(corpus)
    shutil.copyfile(c.image_path("doc.pdf#1"), c.image_path("doc.pdf#3"))
    r = embed(corpus, colqwen, tmp_path / "s", store_dtype="float32", progress=False)
    alone = colqwen.encode_pages([c.image_path("doc.pdf#3")])[0]
    assert r.copied == 1 and torch.equal(EmbeddingStore.open(r.store).get("doc.pdf#3"), alone)


def test_legacy_key_folder_never_reused_and_named(tmp_path, colqwen):
    """A folder written with the old key (query template included; no key_scheme) is not reused:
    the pages are encoded once more, a warning and the report name the old folder."""
    from vdr.encode.store import META_FILE, legacy_folders
    from vdr.errors import VdrWarning

    corpus = make_corpus(tmp_path / "c", SIZES[:2])
    old = EmbeddingStore.open_for_writing(tmp_path / "s", encoder_fingerprint="0" * 64, encoder_settings={"format": 1},
                                          dtype="float16", dim=colqwen.dim)
    old.add("doc.pdf#1", "sha256:whatever", torch.ones(3, colqwen.dim))
    old.close()
    meta = json.loads((old.path / META_FILE).read_text())
    del meta["key_scheme"]
    (old.path / META_FILE).write_text(json.dumps(meta))
    assert legacy_folders(tmp_path / "s") == [old.path]
    with pytest.warns(VdrWarning, match="older vdr.*not reused"):
        r = embed(corpus, colqwen, tmp_path / "s", progress=False)
    assert (r.encoded, r.reused) == (2, 0) and r.legacy_stores == [str(old.path)]
    assert EmbeddingStore.open(tmp_path / "s").path == Path(r.store)  # the current folder is preferred
    assert EmbeddingStore.open(tmp_path / "s", fingerprint=old.path.name).ids() == ["doc.pdf#1"]  # still readable


_CHILD = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {tests!r})
    from vdr.encode import LateInteractionEncoder, embed
    from vdr.encode.store import EmbeddingStore
    mode = {mode!r}
    if mode == "after_commit":   # kill -9 once the first shard is committed
        EmbeddingStore._after_commit_hook = lambda self, name: os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "before_journal":   # shard renamed into place, journal line not written
        EmbeddingStore._after_shard_hook = lambda self, name: os.kill(os.getpid(), signal.SIGKILL) if self._seq >= 2 else None
    elif mode == "torn_journal":   # half a journal line written
        def torn(self, fd, line):
            if self._seq >= 2:
                os.write(fd, line[: len(line) // 2]); os.kill(os.getpid(), signal.SIGKILL)
            os.write(fd, line)
        EmbeddingStore._journal_write = torn
    enc = LateInteractionEncoder.load({model!r}, device="cpu")
    embed({corpus!r}, enc, {store!r}, batch_size=2, shard_pages=2, progress=False)
    print("finished")
""")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["after_commit", "before_journal", "torn_journal"])
def test_resume_after_sigkill_is_bit_identical(tmp_path, colqwen_dir, colqwen, mode):
    corpus = make_corpus(tmp_path / "c", SIZES)
    ref = embed(corpus, colqwen, tmp_path / "ref", batch_size=2, shard_pages=2, progress=False)
    code = _CHILD.format(tests=str(Path(__file__).parent), mode=mode, model=str(colqwen_dir), corpus=str(corpus),
                         store=str(tmp_path / "s"))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == -signal.SIGKILL, p.stderr[-2000:]
    partial = EmbeddingStore.open(tmp_path / "s")
    assert 0 < len(partial) < len(SIZES)  # interrupted mid-way; readers see only committed pages
    r = embed(corpus, colqwen, tmp_path / "s", batch_size=2, shard_pages=2, progress=False)
    assert r.reused == len(partial) and r.encoded == len(SIZES) - len(partial)
    a, b = EmbeddingStore.open(ref.store), EmbeddingStore.open(r.store)
    assert sorted(a.ids()) == sorted(b.ids())
    for k in a.ids():
        assert torch.equal(a.get(k), b.get(k)), k  # bit for bit
    names = {json.loads(l).get("shard") for l in (b.path / JOURNAL_FILE).read_text().splitlines()}
    assert {p.name for p in (b.path / SHARDS_DIR).iterdir()} <= names


def test_store_is_a_maxsim_page_source(tmp_path):
    """The lead's MaxSim reads the store block by block: same scores as from the tensors."""
    from vdr.retrieve.maxsim import PageSource, maxsim

    st, vecs = _fake(tmp_path, [3, 5, 1, 7, 2, 9, 4])
    assert isinstance(st, PageSource)
    q = [torch.randn(4, 8, generator=torch.Generator().manual_seed(1))]
    a = maxsim(q, st, budget_bytes=4096)
    b = maxsim(q, [vecs[i] for i in st.ids()])
    assert torch.allclose(a, b, atol=1e-5)
