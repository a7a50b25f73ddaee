"""Served systems (issue 36): each compression of the page store scored as its library or paper defines it,
exact = exact, the systems through `vdr evaluate --serve-as` (results, re-runs, CLI) and the reward server.

The page vectors are a tiny ColQwen2.5's over two of the bundled sample's PDFs (15 pages); every direct
computation below is written from the definition (numpy, float64) with the library's own quantiser,
pooler or encoding, and compared with what the served backend returned."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import vdr
from vdr.errors import InputError
from vdr.retrieve.served import ServedBackend, parse_serve_as

DEPTH = 15


def _served(served_setup, text: str):
    b = ServedBackend(served_setup["exact"], parse_serve_as([text])[0], cache_dir=served_setup["root"] / "cache")
    b.index(served_setup["corpus"])
    return b, b.search(served_setup["queries"], DEPTH)


def _query_vectors(served_setup) -> dict[str, np.ndarray]:
    texts = [q.text for q in served_setup["queries"].values()]
    vecs, _ = served_setup["exact"]._query_vectors(texts)
    return {qid: v.double().numpy() for qid, v in zip(served_setup["queries"], vecs)}


def _pages(served_setup) -> dict[str, torch.Tensor]:
    store = served_setup["exact"].store
    return {pid: store.get(pid) for pid in store.ids()}


def _maxsim(q: np.ndarray, p: np.ndarray) -> float:
    return float((q @ p.T).max(axis=1).sum())


def _check_run(run, direct: dict[str, dict[str, float]], atol: float = 1e-4) -> None:
    """Every (query, page) score of the run equals the direct one, and the run is the direct top-DEPTH."""
    for qid, scores in direct.items():
        got = dict(run[qid])
        assert got, qid
        for pid, s in got.items():
            assert s == pytest.approx(scores[pid], abs=atol), (qid, pid)
        best = sorted(scores.values(), reverse=True)[:len(got)]
        assert sorted(got.values(), reverse=True) == pytest.approx(best, abs=atol), qid


@pytest.mark.model
def test_exact_equals_exact(served_setup):
    """On a float16 store, fp16 storage is the exact system: same pages, same float32 scores, bit for bit;
    and the exact run is MaxSim of the stored vectors, computed directly."""
    exact_run = served_setup["exact"].search(served_setup["queries"], DEPTH)
    _, fp16 = _served(served_setup, "fp16")
    assert served_setup["exact"].store.dtype == torch.float16
    assert {q: dict(fp16[q]) for q in fp16} == {q: dict(exact_run[q]) for q in exact_run}
    qv, pages = _query_vectors(served_setup), _pages(served_setup)
    _check_run(exact_run, {q: {pid: _maxsim(v, p.double().numpy()) for pid, p in pages.items()} for q, v in qv.items()})


@pytest.mark.model
def test_bf16_and_pool_equal_their_definitions(served_setup):
    from colpali_engine.compression.token_pooling import HierarchicalTokenPooler

    qv, pages = _query_vectors(served_setup), _pages(served_setup)
    _, bf16 = _served(served_setup, "bf16")
    _check_run(bf16, {q: {pid: _maxsim(v, p.to(torch.bfloat16).double().numpy()) for pid, p in pages.items()} for q, v in qv.items()})
    pooler = HierarchicalTokenPooler()
    pooled = {pid: pooler.pool_embeddings([p], pool_factor=2)[0] for pid, p in pages.items()}
    backend, pool = _served(served_setup, "pool:2")
    _check_run(pool, {q: {pid: _maxsim(v, p.double().numpy()) for pid, p in pooled.items()} for q, v in qv.items()})
    assert all(p.shape[0] <= pages[pid].shape[0] // 2 for pid, p in pooled.items())
    n_tokens = sum(p.shape[0] for p in pooled.values())
    assert backend.config["bytes_per_page"] == pytest.approx(n_tokens * pages["%s" % next(iter(pages))].shape[1] * 2 / len(pages))
    assert backend.report["cache"]["hit"] is False
    again, _ = _served(served_setup, "pool:2")  # pooled pages come back from the cache, keyed by the factor
    assert again.report["cache"]["hit"] is True
    other, _ = _served(served_setup, "pool:3")
    assert other.report["cache"]["hit"] is False


@pytest.mark.model
def test_int8_equals_sentence_transformers(served_setup):
    from sentence_transformers.util.quantization import quantize_embeddings
    from sentence_transformers.util.quantization import _dequantize_embeddings

    qv, pages = _query_vectors(served_setup), _pages(served_setup)
    arrays = {pid: p.float().numpy() for pid, p in pages.items()}
    allv = np.concatenate(list(arrays.values()))
    ranges = np.vstack((allv.min(0), allv.max(0)))
    quant = quantize_embeddings(list(arrays.values()), precision="int8")  # the list form calibrates on every token
    restored = {pid: _dequantize_embeddings(qz, "int8", ranges) for pid, qz in zip(arrays, quant)}
    backend, run = _served(served_setup, "int8")
    _check_run(run, {q: {pid: _maxsim(v, r) for pid, r in restored.items()} for q, v in qv.items()})
    assert backend.config["bytes_per_page"] == pytest.approx(backend.config["exact_bytes_per_page"] / 2)  # float16 store


@pytest.mark.model
@pytest.mark.parametrize("rule", ["vespa", "elasticsearch"])
def test_binary_hamming_maxsim(served_setup, rule):
    from sentence_transformers.util.quantization import quantize_embeddings

    qv, pages = _query_vectors(served_setup), _pages(served_setup)
    dim = next(iter(pages.values())).shape[1]
    bits = {pid: quantize_embeddings(p.float().numpy(), precision="ubinary") for pid, p in pages.items()}

    def score(q: np.ndarray, pb: np.ndarray) -> float:
        qb = quantize_embeddings(q.astype(np.float32), precision="ubinary")
        h = np.unpackbits(qb[:, None, :] ^ pb[None, :, :], axis=-1).sum(-1).astype(np.float64)  # (q tokens, p tokens)
        f = 1.0 / (1.0 + h) if rule == "vespa" else (dim - h) / dim
        return float(f.max(axis=1).sum())

    backend, run = _served(served_setup, f"binary:hamming={rule}")
    _check_run(run, {q: {pid: score(v, b) for pid, b in bits.items()} for q, v in qv.items()}, atol=1e-5)
    assert backend.config["bytes_per_page"] == pytest.approx(backend.config["exact_bytes_per_page"] / 16)


@pytest.mark.model
def test_muvera_first_stage_then_exact(served_setup):
    from fastembed.postprocess import Muvera

    qv, pages = _query_vectors(served_setup), _pages(served_setup)
    dim = next(iter(pages.values())).shape[1]
    m = Muvera(dim=dim, k_sim=2, dim_proj=min(8, dim), r_reps=3, random_seed=7)
    fde = {pid: m.process_document(p.float().numpy()) for pid, p in pages.items()}
    backend, run = _served(served_setup, f"muvera:k_sim=2,dim_proj={min(8, dim)},r_reps=3,seed=7,candidates=5")
    for qid, v in qv.items():
        fq = m.process_query(v.astype(np.float32))
        first = sorted(fde, key=lambda pid: (-float(np.float32(fq @ fde[pid])), tuple(-ord(c) for c in pid)))[:5]
        got = dict(run[qid])
        assert set(got) == set(first), qid  # the run holds the re-ranked candidates only
        for pid in got:
            assert got[pid] == pytest.approx(_maxsim(v, pages[pid].double().numpy()), abs=1e-4)
    assert backend.config["first_stage_bytes_per_page"] == len(next(iter(fde.values()))) * 4


def test_parse_serve_as():
    specs = parse_serve_as(["pool:3", "binary", "es=binary:hamming=elasticsearch", "qdrant:prefetch=mean,candidates=50"])
    assert [s.name for s in specs] == ["multimodal-pool3", "multimodal-binary", "es", "multimodal-qdrant"]
    assert specs[0].params == {"factor": 3} and specs[2].params == {"hamming": "elasticsearch"}
    assert specs[3].params == {"prefetch": "mean", "candidates": 50} and specs[3].is_engine
    assert parse_serve_as(["muvera"])[0].params == {"k_sim": 5, "dim_proj": 16, "r_reps": 20, "seed": 42, "candidates": 100}
    for bad, said in [("zip", "unknown system 'zip'"), ("pool:1", "factor must be an integer >= 2"),
                      ("binary:hamming=cosine", "hamming must be vespa or elasticsearch"), ("int8:bits=4", "unknown int8 parameter"),
                      ("bad/name=int8", "must be letters"), ("=binary", "the name before '=' is empty"),
                      ("qdrant:bogus=1", "--serve-as 'qdrant:bogus=1': unknown qdrant engine parameter"),
                      ("plaid:nbits=3", "--serve-as 'plaid:nbits=3': plaid engine parameter nbits=3")]:
        with pytest.raises(InputError, match=said):
            parse_serve_as([bad])
    with pytest.raises(InputError, match="both named 'multimodal-binary'"):
        parse_serve_as(["binary", "binary:hamming=vespa"])
    assert [s.name for s in parse_serve_as(["binary", "binary:hamming=elasticsearch"])] == ["multimodal-binary", "multimodal-binary-es"]


@pytest.mark.model
def test_evaluate_serve_as(served_setup, tmp_path):
    """`vdr evaluate --serve-as`: each system a backend of its own in results.json, with storage and
    time; a re-run into the folder keeps them; the reward server rewards through one, equal to its
    evaluation."""
    from typer.testing import CliRunner

    from vdr.cli import app
    from vdr.rewards import Rewarder, build_backend

    root, out = served_setup["root"], tmp_path / "res"
    args = ["evaluate", str(root / "corpus"), "--queries", str(root / "q.jsonl"), "--qrels", str(root / "qrels.tsv"),
            "--rewrites", f"kw={root / 'kw.jsonl'}", "--backend", "multimodal", "--model", served_setup["model"], "--device", "cpu",
            "--store", str(root / "store"), "--serve-as", "binary", "--serve-as", "int8", "--k", "3,10", "--quiet",
            "--no-report", "--out", str(out)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    data = json.loads((out / "results.json").read_text())
    assert data["config"]["backends"] == ["multimodal", "multimodal-binary", "multimodal-int8"]
    assert data["config"]["serve_as"] == ["binary", "int8"]
    bc = data["config"]["backend_config"]
    assert bc["multimodal-binary"]["served"]["exact"] == "multimodal" and bc["multimodal-binary"]["served"]["system"] == "binary"
    assert bc["multimodal-binary"]["bytes_per_page"] == pytest.approx(bc["multimodal"]["bytes_per_page"] / 16)
    for b in ("multimodal", "multimodal-binary", "multimodal-int8"):  # timings stay out of results.json (its bytes are reproducible)
        assert "score_seconds" not in data["backend_reports"][b]["searches"]["kw"]
    audit = {s["system"]: s for s in data["served_audit"]["systems"]}
    assert audit["multimodal-binary"]["ms_per_query"] > 0 and audit["multimodal-binary"]["exact_ms_per_query"] > 0
    assert audit["multimodal-binary"]["storage_ratio"] == 1 / 16 and audit["multimodal-int8"]["storage_ratio"] == 1 / 2
    assert {(x["backend"], x["variant"]) for x in data["runs"]} >= {("multimodal-binary", "kw"), ("multimodal-int8", "original")}
    # a re-run into the folder with the exact backend alone keeps the served systems (issue 34.2)
    with pytest.warns(vdr.errors.VdrWarning, match="served system multimodal-binary"):
        res = vdr.evaluate(root / "corpus", queries=root / "q.jsonl", qrels=root / "qrels.tsv", rewrites={"kw": root / "kw.jsonl"},
                           out=out, backends="multimodal", model=served_setup["model"], device="cpu", store=root / "store", k=(3, 10),
                           progress=False)
    assert {r.backend for r in res.runs} == {"multimodal", "multimodal-binary", "multimodal-int8"}
    # the reward through the served system equals its evaluation, query by query
    backend = build_backend("served", served_setup["corpus"], {"model": served_setup["model"], "device": "cpu", "backend_options": {
        "served": {"system": "binary"}, "multimodal": {"store": str(root / "store")}}})
    kw = vdr.load_queries(root / "kw.jsonl")
    ids = list(kw)
    rewards = Rewarder(backend, vdr.load_qrels(root / "qrels.tsv"), depth=100).score(ids, [kw[q].text for q in ids], "ndcg@3")
    per_query = res.run("multimodal-binary", "kw").metrics.per_query
    assert rewards == pytest.approx([per_query[q]["ndcg@3"] for q in ids], abs=1e-12)
    with pytest.raises(InputError, match="add multimodal to --backend"):
        vdr.evaluate(root / "corpus", queries=root / "q.jsonl", qrels=root / "qrels.tsv", out=tmp_path / "x", backends="lexical",
                     serve_as=["binary"], progress=False)


@pytest.mark.model
def test_engines_through_the_served_backend(served_setup):
    """Qdrant (local mode, no prefetch) and LanceDB (flat) search every page exactly: through the served
    backend they give the exact run's pages, in order; their configs name the engine."""
    pytest.importorskip("qdrant_client", reason="qdrant-client not installed: pip install 'vdr[served]'")
    pytest.importorskip("lancedb", reason="lancedb not installed: pip install 'vdr[served]'")
    exact_run = served_setup["exact"].search(served_setup["queries"], DEPTH)
    for system in ("qdrant", "lancedb"):
        backend, run = _served(served_setup, system)
        assert backend.config["served"]["kind"] == "engine" and backend.config["engine"]
        for qid in exact_run:
            assert [d for d, _ in run.ranked(qid)][:5] == [d for d, _ in exact_run.ranked(qid)][:5], (system, qid)
        if system == "qdrant":
            for qid in exact_run:
                assert dict(run[qid]) == pytest.approx(dict(exact_run[qid]), abs=1e-4)
