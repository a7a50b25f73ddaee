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


def test_different_fingerprint_never_reused(tmp_path, colqwen_dir):
    from vdr.encode import LateInteractionEncoder

    corpus = make_corpus(tmp_path / "c", SIZES[:2])
    a = LateInteractionEncoder.load(colqwen_dir, device="cpu")
    b = LateInteractionEncoder.load(colqwen_dir, device="cpu", query_prefix="")
    c = LateInteractionEncoder.load(colqwen_dir, device="cpu", max_pixels=28 * 28 * 8)
    assert len({a.fingerprint, b.fingerprint, c.fingerprint}) == 3
    ra = embed(corpus, a, tmp_path / "s", progress=False)
    rb = embed(corpus, b, tmp_path / "s", progress=False)
    rc = embed(corpus, c, tmp_path / "s", dtype="float32", progress=False)
    rd = embed(corpus, a, tmp_path / "s", dtype="float32", progress=False)
    assert [r.encoded for r in (ra, rb, rc, rd)] == [2, 2, 2, 2]
    assert len({ra.store, rb.store, rc.store, rd.store}) == 4


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
    from vdr.scoring import PageSource, maxsim

    st, vecs = _fake(tmp_path, [3, 5, 1, 7, 2, 9, 4])
    assert isinstance(st, PageSource)
    q = [torch.randn(4, 8, generator=torch.Generator().manual_seed(1))]
    a = maxsim(q, st, budget_bytes=4096)
    b = maxsim(q, [vecs[i] for i in st.ids()])
    assert torch.allclose(a, b, atol=1e-5)
