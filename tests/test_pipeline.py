"""End-to-end `vdr evaluate` on two of the bundled sample's PDFs (assets/sample_corpus) with every
backend (multimodal through a tiny local ColQwen2.5), checked against pytrec_eval on the written TREC
run files."""

from __future__ import annotations

import json
import shutil

import pytest

import vdr
from report_fixtures import SAMPLE
from vdr.errors import AlignmentError, InputError
from vdr.experiment.evaluation import evaluate

PDFS = ["state-crime-brief.pdf", "environment-factbook.pdf"]
N_PAGES = 15  # 5 + 10


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from vdr.ingest import ingest_pdfs

    src = tmp_path_factory.mktemp("pdfs")
    for name in PDFS:
        shutil.copy(SAMPLE / "pdfs" / name, src / name)
    out = tmp_path_factory.mktemp("corpus")
    ingest_pdfs(src, out, dpi=40, ocr="never", workers=1, progress=False)
    c = vdr.Corpus.load(out)
    assert len(c) == N_PAGES
    # queries from each text page's own words; rewrites: more words (keywords) and a vaguer form
    qdir = tmp_path_factory.mktemp("queries")
    pages = [p for p in c.pages() if len(p.text.split()) >= 8][:8]
    with open(qdir / "queries.jsonl", "w") as fq, open(qdir / "kw.jsonl", "w") as fk, open(qdir / "vague.jsonl", "w") as fv:
        for i, p in enumerate(pages):
            words = [w for w in p.text.split() if w.isalpha() and len(w) > 3]
            fq.write(json.dumps({"_id": f"q{i}", "text": " ".join(words[2:5]), "history": ["about the documents"] if i % 2 else []}) + "\n")
            fk.write(json.dumps({"_id": f"q{i}", "text": " ".join(words[:10])}) + "\n")
            fv.write(json.dumps({"_id": f"q{i}", "text": "what does it say"}) + "\n")
    with open(qdir / "qrels.tsv", "w") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for i, p in enumerate(pages):
            f.write(f"q{i}\t{p.corpus_id}\t2\n")
        f.write(f"q0\t{pages[1].corpus_id}\t1\n")
    return out, qdir


def run_eval(corpus, out, model=None, **kw):
    cdir, qdir = corpus
    return evaluate(
        cdir,
        queries=qdir / "queries.jsonl",
        qrels=qdir / "qrels.tsv",
        rewrites={"kw": qdir / "kw.jsonl", "vague": qdir / "vague.jsonl"},
        out=out,
        model=model,
        store=out.parent / "store",
        n_permutations=2000,
        n_bootstrap=2000,
        progress=False,
        **kw,
    )


@pytest.mark.slow
def test_all_backends_end_to_end(corpus, colqwen_dir, tmp_path):  # noqa: F811
    res = run_eval(corpus, tmp_path / "a", model=str(colqwen_dir), batch_size=4)
    assert res.skipped == {}
    backends = {r.backend for r in res.runs}
    assert backends == {"multimodal", "lexical", "semantic", "hybrid"}
    assert [r.variant for r in res.runs if r.backend == "lexical"] == ["original", "concat", "kw", "vague"]
    # every run is averaged over exactly the same query set (the qrels')
    n = len(vdr.load_qrels(corpus[1] / "qrels.tsv"))
    assert n >= 5 and {r.metrics.query_ids for r in res.runs} == {tuple(sorted(f"q{i}" for i in range(n)))}
    data = json.loads((tmp_path / "a" / "results.json").read_text())
    assert set(data) >= {"config", "versions", "runs", "comparisons"}
    assert data["versions"]["corpus_fingerprint"].startswith("sha256:")
    assert data["config"]["backend_config"]["multimodal"]["query_template"]
    assert len(data["runs"]) == 16 and len(data["comparisons"]) == 4 * 3 * 4  # backends x variants x metrics
    c = data["comparisons"][0]
    assert set(c) >= {"backend", "variant", "metric", "original", "rewritten", "delta", "p_value", "p_value_holm", "ci95", "wins", "ties", "losses"}
    assert c["wins"] + c["ties"] + c["losses"] == n and c["p_value_holm"] >= c["p_value"]
    assert len(c["holm_family"]) == 12
    # lexical: the keyword rewrite carries the page's own words, so it finds the pages at least as well
    kw = res.run("lexical", "kw").metrics.aggregate["ndcg@3"]
    assert kw >= res.run("lexical", "vague").metrics.aggregate["ndcg@3"]
    # every aggregate is recomputable from the written run files with pytrec_eval
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels = vdr.load_qrels(corpus[1] / "qrels.tsv").to_dict()
    for r in data["runs"]:
        run = vdr.load_run(tmp_path / "a" / r["run_file"]).to_dict()
        ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.3,10", "recall.5,10"}).evaluate(run)
        for ours, ref in (("ndcg@3", "ndcg_cut_3"), ("ndcg@10", "ndcg_cut_10"), ("recall@5", "recall_5"), ("recall@10", "recall_10")):
            mean = sum(ev.get(q, {}).get(ref, 0.0) for q in qrels) / len(qrels)  # queries absent from the run count 0
            assert r["aggregate"][ours] == pytest.approx(mean, abs=1e-12), (r["backend"], r["variant"], ours)
    # the same inputs again (page vectors now reused from the store), another batch size: same bytes
    res2 = run_eval(corpus, tmp_path / "b", model=str(colqwen_dir), batch_size=1)
    assert res2.backend_reports["multimodal"]["index"]["reused"] == N_PAGES and res2.backend_reports["multimodal"]["index"]["encoded"] == 0
    assert res2.backend_reports["multimodal"]["page_forward_passes"] == 0 and res2.backend_reports["multimodal"]["cache"]["hit"]
    a = json.loads((tmp_path / "a" / "results.json").read_text())
    b = json.loads((tmp_path / "b" / "results.json").read_text())
    for d in (a, b):
        d["config"]["backend_config"]["multimodal"].pop("batch_size")
        d["backend_reports"]["multimodal"] = None
    assert a["runs"] == b["runs"] and a["comparisons"] == b["comparisons"]
    # query batches hold one token length only (no padding), so the encoder batch size changes nothing
    for f in sorted((tmp_path / "a" / "runs").iterdir()):
        assert f.read_bytes() == (tmp_path / "b" / "runs" / f.name).read_bytes(), f.name


def test_deterministic_and_skips_multimodal_without_a_model(corpus, tmp_path):
    res = run_eval(corpus, tmp_path / "a", backends="multimodal,lexical")
    assert "multimodal" in res.skipped and "no --model" in res.skipped["multimodal"]
    assert {r.backend for r in res.runs} == {"lexical"}
    run_eval(corpus, tmp_path / "b", backends="multimodal,lexical")
    a, b = ((tmp_path / d / "results.json").read_text() for d in "ab")
    # the second run loads the BM25 index from the cache: only the cache facts differ
    da, db = json.loads(a), json.loads(b)
    assert db["backend_reports"]["lexical"]["cache"]["hit"] is True and db["backend_reports"]["lexical"]["page_forward_passes"] == 0
    for d in (da, db):
        for rep in d["backend_reports"].values():
            rep.pop("cache")
    assert da == db
    assert a.replace('"hit": false', '"hit": true') == b  # byte for byte otherwise
    table = res.table()
    assert "multimodal: skipped" in table and "lexical" in table and "Holm" in table
    lines = (tmp_path / "a" / "per_query.csv").read_text().splitlines()  # long form: one row per value
    assert lines[0] == "backend,variant,query_id,metric,value"
    n_q, n_m = len(res.query_ids), len(res.metric_names)
    assert len(lines) - 1 == 4 * n_q * n_m  # lexical x (original, concat, kw, vague) x queries x metrics
    kw = res.run("lexical", "kw").metrics
    assert f"lexical,kw,{kw.query_ids[0]},ndcg@3,{float(kw.values['ndcg@3'][0])!r}" in lines
    data = json.loads((tmp_path / "a" / "results.json").read_text())
    assert data["variants"]["vague"]["whitespace_tokens"]["mean"] == 4.0
    # a model that cannot be loaded is skipped with the reason, never faked
    res = run_eval(corpus, tmp_path / "c", backends="multimodal,lexical", model=str(tmp_path / "no-such-model"))
    assert "could not be used" in res.skipped["multimodal"]


def test_bad_inputs(corpus, tmp_path):
    cdir, qdir = corpus
    bad = tmp_path / "empty.jsonl"
    lines = (qdir / "kw.jsonl").read_text().splitlines()
    lines[2] = json.dumps({"_id": "q2", "text": "   "})
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"empty.jsonl:3: empty query text"):
        evaluate(cdir, queries=qdir / "queries.jsonl", qrels=qdir / "qrels.tsv", rewrites={"x": bad}, out=tmp_path / "o", backends="lexical")
    short = tmp_path / "short.jsonl"
    short.write_text("\n".join(lines[:2]) + "\n")
    with pytest.raises(AlignmentError, match="missing from the variant"):
        evaluate(cdir, queries=qdir / "queries.jsonl", qrels=qdir / "qrels.tsv", rewrites={"x": short}, out=tmp_path / "o", backends="lexical")
    with pytest.raises(InputError, match="unknown backend"):
        evaluate(cdir, queries=qdir / "queries.jsonl", qrels=qdir / "qrels.tsv", out=tmp_path / "o", backends="lexical,bm99")
    with pytest.raises(InputError, match="name"):
        evaluate(cdir, queries=qdir / "queries.jsonl", qrels=qdir / "qrels.tsv", rewrites={"../x": qdir / "kw.jsonl"}, out=tmp_path / "o")
    qr = tmp_path / "qrels.tsv"
    qr.write_text("query-id\tcorpus-id\tscore\nq0\tnope.pdf#1\t1\n")
    with pytest.raises(InputError, match="not pages of the corpus"):
        evaluate(cdir, queries=qdir / "queries.jsonl", qrels=qr, out=tmp_path / "o", backends="lexical")


def test_vidore_dataset_on_the_fly(tmp_path):
    from vidore_fixture import make_v3

    ds = make_v3(tmp_path / "tiny-vidore")  # V3: its page markdown feeds BM25 (V2 pages have no text: refused)
    res = evaluate(vidore=str(ds), vidore_language="english", out=tmp_path / "res", backends="lexical",
                   n_permutations=200, n_bootstrap=200, progress=False)
    data = json.loads((tmp_path / "res" / "results.json").read_text())
    assert data["versions"]["dataset"]["name"] == str(ds) and data["versions"]["dataset"]["revision"] == "local"
    assert (tmp_path / "res" / "corpus" / "pages.jsonl").is_file()
    assert res.run("lexical", "original").metrics.num_queries >= 1
    with pytest.raises(InputError, match="not both"):
        evaluate(tmp_path / "res" / "corpus", vidore=str(ds), out=tmp_path / "x")


def test_evaluate_options_object_and_keywords(corpus, tmp_path):
    """``options=EvaluateOptions(...)`` with keyword overrides writes the same results.json as the
    same options as keywords; an unknown keyword is refused by name before any work."""
    from vdr.experiment.evaluation import EvaluateOptions

    cdir, qdir = corpus
    common = dict(queries=qdir / "queries.jsonl", qrels=qdir / "qrels.tsv", rewrites={"kw": qdir / "kw.jsonl"},
                  n_permutations=200, n_bootstrap=200, progress=False, cache_dir=False)
    evaluate(cdir, out=tmp_path / "a", backends="lexical", k=(3, 10), **common)
    opts = EvaluateOptions(backends="semantic", k=(3, 10), **common)
    assert opts.depth == 100 and opts.rrf_k == 60 and opts.concat_max_tokens == 512
    evaluate(cdir, out=tmp_path / "b", options=opts, backends="lexical")  # the keyword overrides the field
    assert (tmp_path / "a" / "results.json").read_bytes() == (tmp_path / "b" / "results.json").read_bytes()
    assert opts.backends == "semantic"  # frozen, not changed by the override
    with pytest.raises(TypeError, match=r"unknown option\(s\) 'bogus'.*known: queries, qrels"):
        evaluate(cdir, out=tmp_path / "c", bogus=1, **common)
    assert not (tmp_path / "c").exists()


def test_identical_variants_are_evaluated_once(corpus, tmp_path):
    """Issue 24.5: a variant whose texts equal another's for every query (a copy of a rewrite file, a
    ``concat-q`` file beside the built-in ``concat``) is evaluated once: no duplicate rows, a note,
    and a Holm family that counts it once (the same p-values as without the copy)."""
    cdir, qdir = corpus
    shutil.copy(qdir / "kw.jsonl", qdir / "kw-copy.jsonl")
    with open(qdir / "queries.jsonl") as f, open(qdir / "concat-q.jsonl", "w") as g:
        for line in f:
            q = json.loads(line)
            g.write(json.dumps({"_id": q["_id"], "text": " ".join([*q["history"], q["text"]])}) + "\n")
    common = dict(queries=qdir / "queries.jsonl", qrels=qdir / "qrels.tsv", backends="lexical", n_permutations=500,
                  n_bootstrap=200, progress=False)
    plain = evaluate(cdir, out=tmp_path / "plain", rewrites={"kw": qdir / "kw.jsonl"}, **common)
    dup = evaluate(cdir, out=tmp_path / "dup", rewrites={"kw": qdir / "kw.jsonl", "concat-q": qdir / "concat-q.jsonl",
                                                          "kw-copy": qdir / "kw-copy.jsonl"}, **common)
    assert [r.variant for r in dup.runs] == ["original", "concat", "kw"] == [r.variant for r in plain.runs]
    assert dup.config["same_texts"] == {"concat-q": "concat", "kw-copy": "kw"} and "same_texts" not in plain.config
    fam = dup.comparison("lexical", "kw", dup.primary).holm_family
    assert fam == plain.comparison("lexical", "kw", plain.primary).holm_family and len(fam) == 2 * len(dup.compared_metrics)
    for v in ("concat", "kw"):
        a, b = dup.comparison("lexical", v, dup.primary), plain.comparison("lexical", v, plain.primary)
        assert (a.delta, a.p_value_holm) == (b.delta, b.p_value_holm)
    table = dup.table()
    assert "concat-q: the same query texts as concat for every query; evaluated once" in table
    assert table.count(" on lexical [95% CI ") == 2  # one verdict per evaluated variant (issue 27.1): concat, kw
    assert "kw-copy: the same query texts as kw" in table and table.count("lexical") == 3 + table.count("lexical:") + table.count(" on lexical [95% CI ")
    assert json.loads((tmp_path / "dup" / "results.json").read_text())["config"]["same_texts"]["kw-copy"] == "kw"
    # issue 25.5: the query-set policy under the table, as `vdr metrics` says it
    assert "query set: the qrels' queries, 8 averaged; relevant = grade >= 1; 0 of the qrels' queries have no page of grade > 0" in table
    lines = (qdir / "qrels.tsv").read_text().splitlines()
    (qdir / "qrels-q3-zero.tsv").write_text("\n".join(x[:-1] + "0" if x.startswith("q3\t") else x for x in lines) + "\n")
    zero = evaluate(cdir, out=tmp_path / "zero", rewrites={"kw": qdir / "kw.jsonl"}, **{**common, "qrels": qdir / "qrels-q3-zero.tsv"})
    assert ("query set: the qrels' queries, 8 averaged; relevant = grade >= 1; 1 of the qrels' queries have no page of grade > 0"
            " and count 0 in every mean") in zero.table()
