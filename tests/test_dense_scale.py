"""Dense retrieval at collection scale: float16 store, exact FAISS/NumPy search, FAISS sentinels,
non-finite vectors, long texts (MaxP windows vs counted truncation). A tiny sentence-transformers
model built here (``tiny_st.build_tiny_st``: a bag of words, so rankings are predictable)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from vdr.errors import InputError, VdrWarning

pytestmark = pytest.mark.model

FILLER = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau"
DOCS = {"long": FILLER + " zebra", "other": "lion tiger wolf fox", "third": "river mountain city"}


@pytest.fixture(scope="module")
def tiny(tiny_st_dir):
    return tiny_st_dir


def _backend(tiny, **kw):
    from vdr.retrieve.semantic import DenseBackend

    return DenseBackend(tiny, device="cpu", **kw)


class StreamOnly:
    """A passage corpus that can only be streamed (``texts()`` would load everything: refused)."""

    kind = "passage"

    def __init__(self, items: dict, fingerprint: str | None = None) -> None:
        self.items, self.batches = items, []
        if fingerprint:
            self.fingerprint = fingerprint

    def iter_texts(self, batch_size):
        ids = list(self.items)
        for s in range(0, len(ids), batch_size):
            self.batches.append(len(ids[s : s + batch_size]))
            yield ids[s : s + batch_size], [self.items[i] for i in ids[s : s + batch_size]]

    def texts(self):  # pragma: no cover - must not be called
        raise AssertionError("the dense backend must stream the corpus")


def _corpus(n: int, seed: int = 0) -> dict[str, str]:
    from tiny_st import WORDS

    rng = np.random.default_rng(seed)
    words = [w for w in WORDS if w != "poison"]
    return {f"p{i}": " ".join(rng.choice(words, size=int(rng.integers(3, 30)))) for i in range(n)}


# ------------------------------------------------------------------------------------ store


def test_store_is_streamed_float16_memmapped_and_cached(tiny, tmp_path):
    corpus = StreamOnly(_corpus(23), fingerprint="abc")
    a = _backend(tiny, cache_dir=tmp_path, index_batch_size=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VdrWarning)
        a.index(corpus)
    assert corpus.batches == [5, 5, 5, 5, 3]  # read in batches, never as one dict
    folder = a.store.folder
    assert folder.parent == tmp_path / "semantic" and not list(folder.glob("*.pkl"))
    vec = np.load(folder / "vectors.npy", mmap_mode="r", allow_pickle=False)
    assert isinstance(vec, np.memmap) and vec.dtype == np.float16 and vec.shape == (a.report["index"]["num_windows"], 256)
    meta = json.loads((folder / "vdr-store.json").read_text())
    assert meta["dtype"] == "float16" and meta["num_passages"] == 23 and meta["settings"]["long_text"] == "maxp"
    assert json.loads((folder / "ids.json").read_text()) == [f"p{i}" for i in range(23)]
    np.testing.assert_allclose(np.linalg.norm(vec.astype(np.float32), axis=1), 1.0, atol=2e-3)  # unit rows, float16 rounding
    b = _backend(tiny, cache_dir=tmp_path, batch_size=3)  # the batch size is not part of the key
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VdrWarning)
        b.index(corpus)
    assert (a.report["page_forward_passes"], b.report["page_forward_passes"]) == (a.report["index"]["num_windows"], 0)
    assert b.report["cache"]["hit"] is True and b.store.folder == folder
    qs = {"q1": "zebra lion", "q2": "river city", "q3": "alpha"}
    assert a.search(qs, 7) == b.search(qs, 7)
    c = _backend(tiny, cache_dir=tmp_path, long_text="truncate")  # another long-text policy: another store
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VdrWarning)
        c.index(corpus)
    assert c.report["cache"]["hit"] is False and c.store.folder != folder


def test_faiss_and_numpy_give_identical_runs_whatever_the_chunking(tiny):
    pytest.importorskip("faiss")
    corpus = _corpus(60, seed=1)
    qs = {f"q{i}": t for i, t in enumerate(["zebra", "lion tiger", "river mountain city", "alpha beta", "report revenue wind"])}
    runs = []
    for engine, chunk in (("faiss", 65536), ("faiss", 7), ("numpy", 65536), ("numpy", 7)):
        b = _backend(tiny, search=engine, chunk_rows=chunk)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", VdrWarning)
            b.index(corpus)
        runs.append(b.search(qs, 10).to_dict())
        assert ("faiss" in b.report["searches"]["original"]["search"]) == (engine == "faiss")
    assert all(r == runs[0] for r in runs[1:])  # same ids, same order, bit-identical float64 scores
    # against brute force over the stored rows (a page scores its best window)
    b.store.vectors.astype(np.float64)
    E = np.asarray(b.store.vectors, dtype=np.float64)
    Q, _ = b.encode(list(qs.values()))
    best = np.maximum.reduceat(E @ Q.astype(np.float64).T, b.store.offsets[:-1], axis=0)
    for j, q in enumerate(qs):
        want = sorted(range(len(b.page_ids)), key=lambda i: (-best[i, j], [-ord(c) for c in b.page_ids[i]]))[:10]
        assert list(runs[0][q]) == [b.page_ids[i] for i in want]


# ------------------------------------------------------------------------------------ 18.6 FAISS sentinels, NaN


def test_depth_beyond_collection_never_yields_faiss_sentinels(tiny):
    faiss = pytest.importorskip("faiss")
    three = {"a": "lion tiger", "b": "river city", "c": "zebra fox"}
    # the trap: FAISS pads with id -1 and score -3.4e38, and Python's [-1] is the LAST passage
    raw = faiss.IndexFlatIP(4)
    raw.add(np.eye(3, 4, dtype=np.float32))
    D, I = raw.search(np.ones((1, 4), dtype=np.float32), 10)
    assert (I[0, 3:] == -1).all() and (D[0, 3:] < -1e38).all()
    for engine in ("faiss", "numpy"):
        b = _backend(tiny, search=engine)
        b.index(three)
        run = b.search({"q": "zebra", "r": "city lion"}, depth=10)
        for q in ("q", "r"):
            got = run.to_dict()[q]
            assert sorted(got) == ["a", "b", "c"] and len(got) == 3
            assert all(np.isfinite(s) and -1.01 <= s <= 1.01 for s in got.values())
        assert list(run.to_dict()["q"])[0] == "c"


def test_non_finite_vectors_are_errors_naming_the_passage_or_query(tiny):
    b = _backend(tiny)
    with pytest.raises(InputError, match="passage 'bad'") as e:
        b.index({"ok": "lion tiger", "bad": "river poison city", "ok2": "fox"})
    assert e.value.id == "bad"
    b.index({"ok": "lion tiger", "ok2": "fox"})
    with pytest.raises(InputError, match="query 'q2'") as e:
        b.search({"q1": "lion", "q2": "poison"}, 5)
    assert e.value.id == "q2"


# ------------------------------------------------------------------------------------ 15.6 / 18.4 long texts


def test_truncation_is_bit_identical_to_the_head_and_therefore_counted(tiny):
    b = _backend(tiny, long_text="truncate")
    head = " ".join(DOCS["long"].split()[:14])  # 14 words + [CLS] + [SEP] = max_seq_length 16
    full, cut = b.encode([DOCS["long"], head], max_length=16)
    assert cut.tolist() == [True, False]
    assert np.array_equal(full[0], full[1])  # bit-identical: "zebra" (word 20) never counts, and nothing says so
    with pytest.warns(VdrWarning, match=r"1 of 3 pages exceed passage_max_length \(16 tokens\).*truncated"):
        b.index(DOCS)
    info = b.report["index"]
    assert info["num_truncated_pages"] == 1 and info["truncated_pages"] == ["long"] and info["long_text"] == "truncate"
    assert info["num_windows"] == 3 and b.config["long_text"] == "truncate"
    with pytest.warns(VdrWarning, match=r"1 of 2 queries \(original\) are longer than query_max_length \(16 tokens\)"):
        run = b.search({"q": "zebra", "long": FILLER}, 3)
    s = b.report["searches"]["original"]
    assert s["num_truncated_queries"] == 1 and s["truncated_queries"] == ["long"] and s["query_max_length"] == 16
    got = run.to_dict()["q"]
    q = b.encode(["zebra"])[0][0].astype(np.float64)
    assert got["long"] == float(full[1].astype(np.float16).astype(np.float64) @ q)  # scored as its head alone
    tail = b.encode([" ".join(DOCS["long"].split()[6:])])[0][0].astype(np.float64)  # MaxP's window with "zebra"
    assert float(tail @ q) > 0.25 > 0.1 > got["long"]  # the cut lost the only word the query asks for


def test_maxp_finds_a_term_beyond_the_first_window(tiny):
    b = _backend(tiny)  # long_text="maxp" is the default
    assert b.window == 14 and b.stride == 7
    assert b.windows(DOCS["long"]) == [" ".join(FILLER.split()[:14]), " ".join((FILLER + " zebra").split()[6:])]
    with pytest.warns(VdrWarning, match=r"1 of 3 pages exceed .* split into 2 overlapping windows of 14 tokens \(stride 7\).*MaxP"):
        b.index(DOCS)
    info = b.report["index"]
    assert (info["num_split_pages"], info["num_windows"], info["max_windows_per_page"], info["num_truncated_pages"]) == (1, 4, 2, 0)
    run = b.search({"q": "zebra"}, 3).to_dict()["q"]
    assert list(run)[0] == "long"
    w = b.encode(b.windows(DOCS["long"]))[0]
    q = b.encode(["zebra"])[0][0]
    assert run["long"] == pytest.approx(float((w.astype(np.float16).astype(np.float64) @ q.astype(np.float64)).max()), abs=1e-12)


def test_windows_cover_the_text_and_respect_window_and_stride(tiny):
    b = _backend(tiny, window=5, stride=3)
    words = [w for w in (FILLER + " zebra lion tiger").split()]
    wins = b.windows(" ".join(words))
    assert all(len(x.split()) == 5 for x in wins)
    starts = [words.index(x.split()[0]) for x in wins]
    assert starts[:-1] == list(range(0, len(words) - 5, 3)) and starts[-1] == len(words) - 5
    assert b.windows("lion tiger") == ["lion tiger"]
    assert b.config["window"] == 5 and b.config["stride"] == 3 and b.config["passage_max_length"] == 16


def test_options_are_checked_and_recorded(tiny):
    with pytest.raises(InputError, match="long_text"):
        _backend(tiny, long_text="cut")
    with pytest.raises(InputError, match="stride 9 is larger than the window 5"):
        _backend(tiny, window=5, stride=9)
    with pytest.raises(InputError, match="window 15 is longer than the 14 content tokens"):
        _backend(tiny, window=15)
    with pytest.raises(InputError, match="query_max_length must be between 3 and 64"):
        _backend(tiny, query_max_length=65)
    with pytest.raises(InputError, match="search"):
        _backend(tiny, search="annoy")
    b = _backend(tiny, query_max_length=8, passage_max_length=32, normalize=False)
    assert (b.config["query_max_length"], b.config["passage_max_length"], b.window, b.stride) == (8, 32, 30, 15)
    assert b.config["similarity"] == "dot"
    e, cut = b.encode([FILLER], max_length=8)
    assert cut.tolist() == [True] and abs(float(np.linalg.norm(e)) - 1.0) > 1e-3  # not normalised


def test_registry_factory_passes_the_options(tiny, tmp_path):
    from vdr.retrieve.base import BuildContext
    from vdr.retrieve.semantic import build

    b = build(BuildContext("semantic", {"model": tiny, "long_text": "truncate", "query_max_length": 10}, cache_dir=tmp_path, device="cpu"))
    assert b.config["long_text"] == "truncate" and b.query_max_length == 10
    with pytest.raises(InputError, match="unknown semantic option"):
        build(BuildContext("semantic", {"model": tiny, "maxlen": 3}, device="cpu"))


DAMAGE = {
    "vectors truncated": ("vectors.npy", lambda b: b[: len(b) // 2]),
    "vectors empty": ("vectors.npy", lambda b: b""),
    "vectors header only": ("vectors.npy", lambda b: b[:128]),
    "offsets empty": ("offsets.npy", lambda b: b""),
    "offsets garbage": ("offsets.npy", lambda b: b"\x93NUMPY garbage"),
    "meta garbage": ("vdr-store.json", lambda b: b"{not json"),
    "meta not an object": ("vdr-store.json", lambda b: b"[1, 2]"),
    "meta not utf-8": ("vdr-store.json", lambda b: b"\xff\xfe\x00"),
    "ids not a list": ("ids.json", lambda b: b'{"p0": 1}'),
    "ids truncated": ("ids.json", lambda b: b[: len(b) // 2]),
    "ids not strings": ("ids.json", lambda b: json.dumps(list(range(len(json.loads(b))))).encode()),
    "meta missing": ("vdr-store.json", None),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_store_file_is_a_cache_miss_and_rebuilt(tiny, tmp_path, case):
    """A truncated or garbage file in a cached store entry is a miss: the store is rebuilt (same
    vectors, same run), never a library traceback."""
    corpus = _corpus(9, seed=3)
    a = _backend(tiny, cache_dir=tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VdrWarning)
        a.index(corpus)
    folder = a.store.folder
    want_vectors = np.array(a.store.vectors)
    qs = {"q1": "zebra lion", "q2": "river city"}
    want = a.search(qs, 5)
    name, damage = DAMAGE[case]
    f = folder / name
    if damage is None:
        f.unlink()
    else:
        f.write_bytes(damage(f.read_bytes()))
    b = _backend(tiny, cache_dir=tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VdrWarning)
        b.index(corpus)
    passes = a.report["page_forward_passes"]
    assert passes >= 9 and b.report["cache"]["hit"] is False and b.report["page_forward_passes"] == passes  # rebuilt
    assert b.store.folder == folder and np.array_equal(np.array(b.store.vectors), want_vectors)
    assert b.search(qs, 5) == want
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # the damaged entry is gone, nothing left aside
    c = _backend(tiny, cache_dir=tmp_path)  # the rebuilt entry is a hit again
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VdrWarning)
        c.index(corpus)
    assert c.report["cache"]["hit"] is True and c.report["page_forward_passes"] == 0
