"""Retrieve, then rerank (issue 37, item 3): tiny rerankers built offline (tests/tiny_rerank.py).

Scores equal the library's own (sentence-transformers ``CrossEncoder.predict`` / ``rank``, rerankers'
``TransformerRanker.rank`` and ``MonoVLMRanker.rank``); the reranked run is the base's top pages
ranked by them; a re-run scores nothing again; ``vdr evaluate --rerank`` audits the reranked system
against its base; the reward through the reranker equals the evaluation.
"""

from __future__ import annotations

import json
import time
import warnings

import pytest

import vdr
from tiny_models import make_text_inputs
from vdr.errors import InputError

pytestmark = pytest.mark.model

TEXTS = ["alpha beta river report", "gamma delta mountain city", "river wind revenue report", "lion tiger wolf fox",
         "city report alpha", "dog cat bird fish", "river mountain revenue", "zebra lion river"]
QUERIES = {"q1": "river report", "q2": "mountain city", "q3": "lion river", "q4": "revenue wind"}
KEYWORDS = {"q1": "river", "q2": "city", "q3": "lion", "q4": "revenue"}
QRELS = {"q1": {"doc.pdf#1": 1, "doc.pdf#3": 1}, "q2": {"doc.pdf#2": 1}, "q3": {"doc.pdf#8": 1}, "q4": {"doc.pdf#3": 1}}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("rerank-inputs")
    return make_text_inputs(root, [(56, 84)] * len(TEXTS), TEXTS, QUERIES, KEYWORDS, QRELS)


def _lexical(corpus):
    from vdr.retrieve.base import create_backend

    b = create_backend("lexical", {})
    b.index(corpus)
    return b


def _queries():
    return vdr.QuerySet.from_texts(QUERIES, name="original")


def test_cross_encoder_scores_are_the_library_predict_and_rank(inputs, cross_encoder_dir, tmp_path):
    """sentence-transformers: every score is CrossEncoder.predict's for (query, page text), the
    order CrossEncoder.rank's; only the base's top `depth` pages are kept. A second backend over the
    same cache scores no pair again and gives the same run. rerankers' TransformerRanker: its rank's scores."""
    from sentence_transformers import CrossEncoder

    corpus = vdr.load_corpus(inputs["corpus"])
    base = _lexical(corpus)
    from vdr.retrieve.base import create_backend

    def make(**o):
        b = create_backend("lexical+rerank", {"model": str(cross_encoder_dir), "base": "lexical", "depth": 3, **o}, factory="rerank",
                           built={"lexical": base}, cache_dir=tmp_path / "cache", device="cpu")
        b.index(corpus)
        return b

    rr = make()
    t0 = time.perf_counter()
    run = rr.search(_queries(), 10)
    elapsed = time.perf_counter() - t0
    base_run = base.search(_queries(), 10)
    ce = CrossEncoder(str(cross_encoder_dir), device="cpu")
    texts = corpus.texts()
    pairs = 0
    for qid, q in QUERIES.items():
        top = [p for p, _ in base_run.ranked(qid)[:3]]
        want = ce.predict([(q, texts[p]) for p in top], batch_size=32)
        got = dict(run.ranked(qid))
        assert set(got) == set(top)  # pages below depth dropped
        assert [got[p] for p in top] == pytest.approx([float(x) for x in want], abs=1e-6)
        ranked = ce.rank(q, [texts[p] for p in top])
        assert [p for p, _ in run.ranked(qid)] == [top[r["corpus_id"]] for r in ranked] or len(set(want.tolist())) < len(top)
        pairs += len(top)
    rep = rr.report["searches"]["original"]
    assert (rep["pairs"], rep["pairs_scored"], rep["pairs_cached"]) == (pairs, pairs, 0) and rr.report["model_loaded"]
    print(f"\ntiny cross-encoder: {pairs} pairs, rerank {rep['rerank_seconds']:.3f} s = {rep['ms_per_query']:.1f} ms/query"
          f" (search incl. base {1000 * elapsed / len(QUERIES):.1f} ms/query)")
    again = make()
    run2 = again.search(_queries(), 10)
    rep2 = again.report["searches"]["original"]
    assert (rep2["pairs_scored"], rep2["pairs_cached"]) == (0, pairs) and not again.report["model_loaded"]
    assert again.report["cache"]["hit"] is True
    assert {q: run2.ranked(q) for q in QUERIES} == {q: run.ranked(q) for q in QUERIES}
    files = list((tmp_path / "cache" / "rerank").rglob("*"))
    assert files and all(f.suffix == ".json" for f in files if f.is_file())  # JSON only, never pickle
    # rerankers' TransformerRanker (raw logits): its own rank's scores
    from rerankers import Reranker

    rk = make(library="rerankers")
    run3 = rk.search(_queries(), 10)
    ranker = Reranker(str(cross_encoder_dir), model_type="cross-encoder", device="cpu", dtype="float32", verbose=0)
    for qid, q in QUERIES.items():
        top = [p for p, _ in base_run.ranked(qid)[:3]]
        res = ranker.rank(q, [texts[p] for p in top], doc_ids=top)
        assert dict(run3.ranked(qid)) == pytest.approx({r.document.doc_id: r.score for r in res.results}, abs=1e-6)
    assert rk.config["rerank"]["library"] == "rerankers" and rk.config["model_key"] != rr.config["model_key"]


def test_multimodal_reranker_reads_the_page_image(inputs, monovlm_dir, tmp_path):
    """A tiny Qwen2-VL through rerankers' MonoVLMRanker (kind auto-detected): scores are its rank's
    P(True) over the page images; a passage corpus is refused."""
    from rerankers import Reranker

    from vdr.retrieve.base import BackendUnavailable, create_backend

    corpus = vdr.load_corpus(inputs["corpus"])
    base = _lexical(corpus)
    rr = create_backend("lexical+rerank", {"model": str(monovlm_dir), "base": "lexical", "depth": 2}, factory="rerank",
                        built={"lexical": base}, cache_dir=tmp_path / "cache", device="cpu")
    rr.index(corpus)
    assert rr.config["rerank"]["kind"] == "multimodal" and rr.config["rerank"]["library"] == "rerankers"
    qs = vdr.QuerySet.from_texts({"q1": QUERIES["q1"], "q3": QUERIES["q3"]}, name="original")
    run = rr.search(qs, 10)
    base_run = base.search(qs, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranker = Reranker(str(monovlm_dir), model_type="monovlm", processor_name=str(monovlm_dir), device="cpu", dtype="float32",
                          verbose=0, attention_implementation="sdpa", token_false="False", token_true="True")
    for qid in ("q1", "q3"):
        top = [p for p, _ in base_run.ranked(qid)[:2]]
        res = ranker.rank(QUERIES[qid], [str(corpus.image_path(p)) for p in top], doc_ids=top)
        want = {r.document.doc_id: r.score for r in res.results}
        assert dict(run.ranked(qid)) == pytest.approx(want, abs=1e-6)
        assert all(0.0 < s < 1.0 for s in want.values())  # P(True)
    print(f"\ntiny MonoVLM: {rr.report['searches']['original']['ms_per_query']:.1f} ms/query over 2 pages")
    passages = {"p1": "river report", "p2": "lion"}
    lex = create_backend("lexical", {})
    lex.index(passages)
    mm = create_backend("x", {"model": str(monovlm_dir), "base": "lexical"}, factory="rerank", built={"lexical": lex}, device="cpu")
    with pytest.raises(BackendUnavailable, match="reads page images"):
        mm.index(passages)


def test_evaluate_rerank_audits_against_the_base(inputs, cross_encoder_dir, tmp_path):
    """`vdr evaluate --rerank`: lexical+rerank is a system of its own (runs, run files, config, report
    section); the rerank audit says whether each rewrite's gain holds before and after reranking; a
    re-run into the folder keeps the reranked system and scores no pair again; the reward through the
    reranker equals the evaluation, query by query."""
    from typer.testing import CliRunner

    from vdr.cli import app
    from vdr.rewards import Rewarder, build_backend

    out = tmp_path / "res"
    args = ["evaluate", str(inputs["corpus"]), "--queries", str(inputs["queries"]), "--qrels", str(inputs["qrels"]),
            "--rewrites", f"kw={inputs['kw']}", "--backend", "lexical", "--rerank", str(cross_encoder_dir),
            "--rerank-depth", "5", "--rerank-option", "batch_size=4", "--k", "3,5", "--permutations", "200", "--bootstrap", "200",
            "--quiet", "--out", str(out), "--cache-dir", str(tmp_path / "cache")]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "reranked vs base" in r.output and "lexical+rerank: " in r.output and "before reranking" in r.output
    data = json.loads((out / "results.json").read_text())
    assert data["config"]["backends"] == ["lexical", "lexical+rerank"]
    assert data["config"]["rerank"] == {"model": str(cross_encoder_dir), "depth": 5, "backends": ["lexical"], "options": {"batch_size": 4}}
    assert data["config"]["backend_config"]["lexical+rerank"]["rerank"]["base"] == "lexical"
    assert (out / "runs" / "lexical+rerank.kw.trec").is_file()
    audit = data["rerank_audit"]
    (entry,) = audit["systems"]
    assert (entry["system"], entry["reference"], entry["relation"]) == ("lexical+rerank", "lexical", "rerank")
    (gain,) = entry["gains"]
    assert gain["variant"] == "kw" and gain["verdict"] in ("survives", "shrinks", "grows", "lost", "reversed")
    per = {b: {r["variant"]: r["per_query"] for r in data["runs"] if r["backend"] == b} for b in ("lexical", "lexical+rerank")}
    m = audit["metric"]
    mean = lambda b, v: sum(per[b][v][q][m] for q in QUERIES) / len(QUERIES)  # noqa: E731
    assert gain["gain_exact"] == pytest.approx(mean("lexical", "kw") - mean("lexical", "original"))
    assert gain["gain_served"] == pytest.approx(mean("lexical+rerank", "kw") - mean("lexical+rerank", "original"))
    assert not any(r["backend"] == "macro" for r in data["runs"])
    assert 'id="rerank"' in (out / "report.html").read_text() and "## Reranked vs base" in (out / "report.md").read_text()
    # a re-run into the folder without --rerank keeps the reranked system; every pair comes from the cache
    with pytest.warns(vdr.errors.VdrWarning, match="reranked systems"):
        res = vdr.evaluate(inputs["corpus"], queries=inputs["queries"], qrels=inputs["qrels"], rewrites={"kw": inputs["kw"]}, out=out,
                           backends="lexical", k=(3, 5), n_permutations=200, n_bootstrap=200,
                           cache_dir=tmp_path / "cache", progress=False)
    assert {r.backend for r in res.runs} == {"lexical", "lexical+rerank"}
    searches = res.backend_reports["lexical+rerank"]["searches"]
    assert all(s["pairs_scored"] == 0 and s["pairs_cached"] > 0 for s in searches.values())
    assert res.rerank_verdicts() and res.rerank_verdicts()[0].startswith("lexical+rerank: ")
    # the reward through the reranker equals the evaluation of lexical+rerank
    corpus = vdr.load_corpus(inputs["corpus"])
    backend = build_backend("rerank", corpus, {"device": "cpu", "backend_options": {
        "rerank": {"model": str(cross_encoder_dir), "base": "lexical", "depth": 5}}})
    kw = vdr.load_queries(inputs["kw"])
    ids = list(kw)
    rewards = Rewarder(backend, vdr.load_qrels(inputs["qrels"]), depth=100).score(ids, [kw[q].text for q in ids], "ndcg@3")
    per_query = res.run("lexical+rerank", "kw").metrics.per_query
    assert rewards == pytest.approx([per_query[q]["ndcg@3"] for q in ids], abs=1e-12)


def test_rerank_options_are_checked(inputs, tmp_path):
    """Bad reranker settings are refused before any search, naming the option."""
    with pytest.raises(InputError, match="--rerank-backends"):
        vdr.evaluate(inputs["corpus"], queries=inputs["queries"], qrels=inputs["qrels"], out=tmp_path / "a", backends="lexical",
                     rerank="x", rerank_backends="semantic", progress=False)
    with pytest.raises(InputError, match="--rerank-depth"):
        vdr.evaluate(inputs["corpus"], queries=inputs["queries"], qrels=inputs["qrels"], out=tmp_path / "b", backends="lexical",
                     rerank="x", rerank_depth=0, progress=False)
    from vdr.retrieve.rerank import RerankBackend

    with pytest.raises(InputError, match="kind must be one of"):
        RerankBackend(object(), {"model": "m", "kind": "audio"})
    with pytest.raises(InputError, match="model"):
        RerankBackend(object(), {})
