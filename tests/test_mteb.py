"""MTEB 2.x compatibility (vdr.integrations.mteb): vdr corpora as MTEB tasks, vdr's encoder as an MTEB
model, ``vdr mteb-task``, ``vdr evaluate --engine mteb``, and metric agreement with MTEB.

Everything runs offline (HF_HUB_OFFLINE=1) on a tiny, randomly initialised local ColQwen2.5 and a
corpus of random page images.

Query-set policies compared (stated again in each agreement assertion):

* MTEB (2.26): drops queries without any qrels line; averages over the queries present in the run;
  a query whose qrels hold only grade 0 stays and scores 0; means of nDCG/Recall rounded to 5
  decimals, MRR unrounded.
* vdr: query set = queries with a qrels line; ``queries_without_relevant="zero"`` (its default) --
  the same set as MTEB's when the run covers every query, which MTEB's search always does. Where
  MTEB is fed a run that misses a query, vdr matches it only on the qrels restricted to the run's
  queries (shown explicitly below).
"""

from __future__ import annotations

import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

import importlib.util  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

mteb = pytest.importorskip("mteb")

from tiny_models import make_corpus  # noqa: E402,F401

import vdr  # noqa: E402
from vdr.errors import InputError  # noqa: E402
from vdr.metrics import evaluate_run  # noqa: E402
from vdr.integrations import mteb as vm  # noqa: E402

pytestmark = pytest.mark.model  # mteb imports torch, transformers and datasets

QUERIES = {
    "q0": "What is the revenue in 2023?",
    "q1": "Which page shows the carbon emissions?",
    "q2": "The quick brown fox",  # qrels: only grade 0 -> kept by MTEB, scores 0; vdr "zero" policy
    "q3": "Describe the image.",
    "q4": "document table figure",  # no qrels line -> in neither side's query set
    "q5": "user assistant query page",
}
REWRITES = {q: t.lower() + " chart" for q, t in QUERIES.items()}
QRELS = [("q0", 1, 2), ("q0", 3, 1), ("q1", 2, 1), ("q2", 4, 0), ("q3", 5, 1), ("q3", 6, 3), ("q3", 2, 0),
         ("q5", 7, 1), ("q5", 8, 1), ("q5", 1, 1)]
K = [1, 3, 5, 10]
COMPARED = [f"ndcg@{k}" for k in K] + ["mrr@3"] + [f"recall@{k}" for k in K]


def _key(metric: str) -> str:
    return metric.replace("@", "_at_")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("mteb-data")
    sizes = [(56, 56), (84, 56), (56, 112), (112, 84), (56, 56), (84, 84), (112, 56), (56, 84), (84, 112), (112, 112), (56, 140), (140, 56)]
    corpus = make_corpus(root / "corpus", sizes)
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()))
    (root / "kw.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in REWRITES.items()))
    (root / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\tdoc.pdf#{p}\t{g}\n" for q, p, g in QRELS)
    )
    return {"root": root, "corpus": corpus, "queries": root / "queries.jsonl", "kw": root / "kw.jsonl", "qrels": root / "qrels.tsv"}


@pytest.fixture(scope="module")
def model(colqwen_dir):  # noqa: F811
    return vm.VdrColPaliModel(colqwen_dir, device="cpu")


@pytest.fixture(scope="module")
def tasks(data):
    return vm.make_tasks(data["corpus"], name="VdrTinyDocs", queries=data["queries"], qrels=data["qrels"], rewrites={"kw": data["kw"]})


@pytest.fixture(scope="module")
def mteb_run(model, tasks, tmp_path_factory):
    """One ``mteb.evaluate`` over both tasks (originals, rewrite variant) with the vdr model."""
    pred = tmp_path_factory.mktemp("mteb-pred")
    names = [c.metadata.name for c in tasks.values()]
    res = mteb.evaluate(model, mteb.get_tasks(tasks=names), cache=None, prediction_folder=pred,
                        encode_kwargs={"batch_size": 4}, show_progress_bar=False, co2_tracker=False)
    assert not res.exceptions
    return {tr.task_name: tr for tr in res.task_results}, pred


# ------------------------------------------------------------------------------------------ tasks


def test_tasks_registered_and_loaded_from_local_files(data, tasks):
    assert set(tasks) == {"original", "kw"}
    t = mteb.get_task("VdrTinyDocs")
    t_kw = mteb.get_task("VdrTinyDocs-kw")  # a rewrite variant is its own task over the same corpus
    assert [x.metadata.name for x in mteb.get_tasks(tasks=["VdrTinyDocs", "VdrTinyDocs-kw"])] == ["VdrTinyDocs", "VdrTinyDocs-kw"]
    assert "VdrTinyDocs" in [x.metadata.name for x in mteb.get_tasks(categories=["t2i"], modalities=["image"], exclude_private=False)]
    md = t.metadata
    assert md.category == "t2i" and md.modalities == ["text", "image"] and md.main_score == "ndcg_at_3"
    assert md.type == "DocumentUnderstanding" and md.eval_splits == ["test"]
    assert md.dataset["path"] == str(data["corpus"].resolve()) and len(md.dataset["revision"]) == 64
    assert t_kw.metadata.dataset["revision"] != md.dataset["revision"]
    assert t_kw.metadata.adapted_from == ["VdrTinyDocs"]
    t.load_data()
    split = t.dataset["default"]["test"]
    assert split["corpus"]["id"] == vdr.Corpus.load(data["corpus"]).ids()
    assert split["corpus"][0]["image"].size == (56, 56)
    assert split["queries"]["id"] == list(QUERIES)
    assert split["relevant_docs"]["q2"] == {"doc.pdf#4": 0} and "q4" not in split["relevant_docs"]
    t_kw.load_data()
    assert t_kw.dataset["default"]["test"]["queries"]["text"] == list(REWRITES.values())
    assert t_kw.dataset["default"]["test"]["relevant_docs"] == split["relevant_docs"]
    assert "VdrTinyDocs" in vm.registered_tasks()


def test_task_options_and_errors(data, tmp_path):
    cls = vm.make_task(data["corpus"], name="VdrTinyMrr", queries=data["queries"], qrels=data["qrels"], main_score="mrr_at_10",
                       register=False)
    assert cls.metadata.main_score == "mrr_at_10" and "VdrTinyMrr" not in vm.registered_tasks()
    kw = vm.make_task(data["corpus"], name="VdrTinyOne", variant="kw", rewrite=data["kw"], queries=data["queries"], qrels=data["qrels"])
    assert kw.metadata.name == "VdrTinyOne-kw" and mteb.get_task("VdrTinyOne-kw").metadata.category == "t2i"
    with pytest.raises(InputError, match="main score"):
        vm.make_tasks(data["corpus"], name="X", queries=data["queries"], qrels=data["qrels"], main_score="ndcg_at_7")
    with pytest.raises(InputError, match="main score"):
        vm.make_tasks(data["corpus"], name="X", queries=data["queries"], qrels=data["qrels"], main_score="ndcg3")
    with pytest.raises(InputError, match="MTEB's own tasks"):
        vm.make_tasks(data["corpus"], name="Vidore2ESGReportsRetrieval", queries=data["queries"], qrels=data["qrels"])
    with pytest.raises(InputError, match="task name"):
        vm.make_tasks(data["corpus"], name="bad name", queries=data["queries"], qrels=data["qrels"])
    bad = tmp_path / "qrels.tsv"
    bad.write_text("query-id\tcorpus-id\tscore\nq0\tother.pdf#1\t1\n")
    with pytest.raises(InputError, match="not pages of the corpus"):
        vm.make_tasks(data["corpus"], name="X", queries=data["queries"], qrels=bad)
    short = tmp_path / "kw.jsonl"
    short.write_text(json.dumps({"_id": "q0", "text": "x"}) + "\n")
    with pytest.raises(vdr.AlignmentError):
        vm.make_tasks(data["corpus"], name="X", queries=data["queries"], qrels=data["qrels"], rewrites={"kw": short})


# ------------------------------------------------------------------------------------------ model


def test_model_meta_and_vidore_benchmark_accepts_it(model, colqwen_dir):  # noqa: F811
    from mteb.models.model_meta import ModelMeta, ScoringFunction

    meta = model.mteb_model_meta
    assert isinstance(meta, ModelMeta)
    assert meta.name == f"vdr/{Path(colqwen_dir).name}" and meta.revision == model.encoder.fingerprint
    assert meta.similarity_fn_name == ScoringFunction.MAX_SIM and meta.model_type == ["late-interaction"]
    assert set(meta.modalities) == {"text", "image"} and meta.embed_dim == model.encoder.dim
    assert meta.framework == ["ColPali", "PyTorch"] and meta.n_parameters > 0
    # ViDoRe(v2): tasks known without data (nothing is downloaded); every task accepts the model
    bench = mteb.get_benchmark("ViDoRe(v2)")
    assert len(bench.tasks) == 4
    for task in bench.tasks:
        assert not task.data_loaded
        assert task.metadata.category == "t2i"
        assert set(task.metadata.modalities) <= set(meta.modalities)
    sys.modules["mteb.evaluate"]._check_model_modalities(meta, bench.tasks)  # what mteb.evaluate checks first; raises on mismatch
    text_only = meta.model_copy(update={"modalities": ["text"]})
    with pytest.raises(Exception):  # noqa: B017 - MTEB's own error type for a modality mismatch
        sys.modules["mteb.evaluate"]._check_model_modalities(text_only, bench.tasks)
    # the ModelMeta loads the same model back (mteb.evaluate(meta, tasks) path)
    again = meta.load_model()
    assert type(again).__name__ == "VdrColPaliModel" and again.mteb_model_meta.revision == meta.revision


def test_similarity_is_maxsim_over_real_tokens(model):
    import torch

    from vdr.retrieve.maxsim import maxsim

    g = torch.Generator().manual_seed(0)
    q = [torch.nn.functional.normalize(torch.randn(n, 8, generator=g), dim=-1) for n in (3, 5)]
    d = [torch.nn.functional.normalize(torch.randn(n, 8, generator=g), dim=-1) for n in (2, 7, 4)]
    pad = torch.nn.utils.rnn.pad_sequence
    got = model.similarity(pad(q, batch_first=True), pad(d, batch_first=True))
    assert torch.allclose(got, maxsim(q, d), atol=1e-6)
    # a padding row (zeros) never wins a max against negative similarities
    e = torch.zeros(1, 8)
    e[0, 0] = 1.0
    docs = pad([-e, d[1]], batch_first=True)  # the first page: one real token, padded to 7 rows
    assert model.similarity(e[None], docs)[0, 0] == pytest.approx(-1.0)
    pair = model.similarity_pairwise(pad(q, batch_first=True), pad(d[:2], batch_first=True))
    assert torch.allclose(pair, torch.stack([maxsim([q[0]], [d[0]])[0, 0], maxsim([q[1]], [d[1]])[0, 0]]), atol=1e-6)


# ------------------------------------------------------------------------------------------ agreement


def test_metrics_agree_with_mteb_on_the_same_task_model_and_run(data, tasks, model, mteb_run):
    """Policy on both sides: MTEB drops q4 (no qrels line) and keeps q2 (grade 0 only, scores 0);
    its run covers every query. vdr: queries_without_relevant="zero" (default), the same run."""
    from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores, mrr

    qrels = vdr.load_qrels(data["qrels"])
    results, pred_dir = mteb_run
    for variant, cls in tasks.items():
        name = cls.metadata.name
        scores = results[name].scores["test"][0]
        assert scores["main_score"] == scores["ndcg_at_3"]
        pred = json.loads((pred_dir / f"{name}_predictions.json").read_text())["default"]["test"]
        run = vm.run_from_predictions(pred)
        assert set(run) == set(QUERIES) - {"q4"}  # MTEB searched exactly the queries it kept
        ours = evaluate_run(qrels, run, COMPARED, queries_without_relevant="zero")
        assert ours.policy["num_queries_averaged"] == 5 and ours.policy["num_queries_missing_from_run"] == 0
        # MTEB's unrounded per-query values (pytrec_eval + its MRR) on the same run and qrels
        mq = {q: dict(qrels[q]) for q in qrels}
        run_d = {q: dict(run[q]) for q in run}
        res = calculate_retrieval_scores(run_d, mq, K)
        per_q_mrr = dict(zip(run_d, mrr(mq, run_d, [3])["MRR@3"]))
        assert set(res.all_scores) == set(ours.query_ids), "MTEB (drop no-qrels, keep grade-0-only) vs vdr (zero)"
        for q in ours.query_ids:
            for k in K:
                assert abs(ours.per_query[q][f"ndcg@{k}"] - res.all_scores[q][f"ndcg_cut_{k}"]) <= 1e-6
                assert abs(ours.per_query[q][f"recall@{k}"] - res.all_scores[q][f"recall_{k}"]) <= 1e-6
            assert abs(ours.per_query[q]["mrr@3"] - per_q_mrr[q]) <= 1e-6
        for m in COMPARED:
            unrounded = (sum(res.all_scores[q][f"ndcg_cut_{m[5:]}"] for q in run) / len(run) if m.startswith("ndcg")
                         else sum(res.all_scores[q][f"recall_{m[7:]}"] for q in run) / len(run) if m.startswith("recall")
                         else res.mrr["MRR@3"])
            assert abs(ours.aggregate[m] - unrounded) <= 1e-6, (variant, m, "policy: MTEB 2.26 vs vdr zero")
            # the TaskResult: MRR unrounded, nDCG/Recall rounded by MTEB to 5 decimals
            tol = 1e-6 if m.startswith("mrr") else 5e-6 + 1e-12
            assert abs(ours.aggregate[m] - scores[_key(m)]) <= tol, (variant, m)
            if not m.startswith("mrr"):
                assert round(ours.aggregate[m], 5) == pytest.approx(scores[_key(m)], abs=1e-9)
        # the policy matters: excluding grade-0-only queries (vdr "exclude") is NOT what MTEB does
        excl = evaluate_run(qrels, run, COMPARED, queries_without_relevant="exclude")
        assert excl.policy["num_queries_averaged"] == 4 and ours.aggregate["ndcg@10"] != excl.aggregate["ndcg@10"]


def test_missing_queries_policy_is_explicit(data, tasks, mteb_run):
    """A run without q0: MTEB (pytrec_eval, MRR over the run) averages the 4 queries left; vdr
    (missing = 0) averages 5 -- equal to MTEB only on the qrels restricted to the run's queries."""
    from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores

    qrels = vdr.load_qrels(data["qrels"])
    results, pred_dir = mteb_run
    pred = json.loads((pred_dir / "VdrTinyDocs_predictions.json").read_text())["default"]["test"]
    partial = {q: d for q, d in pred.items() if q != "q0"}
    res = calculate_retrieval_scores(partial, {q: dict(qrels[q]) for q in qrels}, K)
    assert len(res.all_scores) == 4
    vdr_zero = evaluate_run(qrels, partial, ["ndcg@5", "mrr@3"])
    assert vdr_zero.num_queries == 5 and vdr_zero.policy["num_queries_missing_from_run"] == 1
    restricted = vdr.Qrels({q: dict(qrels[q]) for q in qrels if q in partial})
    same = evaluate_run(restricted, partial, ["ndcg@5", "mrr@3"])
    assert abs(same.aggregate["ndcg@5"] - res.ndcg["NDCG@5"]) <= 5e-6 and abs(same.aggregate["mrr@3"] - res.mrr["MRR@3"]) <= 1e-6


def test_mteb_scores_are_vdr_encoder_scores(data, model, mteb_run):
    """The run MTEB produced holds the MaxSim scores of vdr's own encoder (same template, same vectors)."""
    from vdr.retrieve.maxsim import maxsim

    results, pred_dir = mteb_run
    pred = json.loads((pred_dir / "VdrTinyDocs_predictions.json").read_text())["default"]["test"]
    enc = model.encoder
    corpus = vdr.Corpus.load(data["corpus"])
    qids = sorted(pred)
    qv = enc.encode_queries([QUERIES[q] for q in qids])
    pv = enc.encode_pages(corpus)
    s = maxsim(qv, pv)
    for i, q in enumerate(qids):
        for j, pid in enumerate(corpus.ids()):
            assert abs(pred[q][pid] - float(s[i, j])) <= 1e-4 * max(1.0, abs(float(s[i, j])))


# ------------------------------------------------------------------------------------------ CLI / pipeline


def test_cli_mteb_task_writes_a_registering_module(data, tmp_path, capsys):
    from vdr.cli import main

    mod = tmp_path / "tiny_tasks.py"
    rc = main(["mteb-task", str(data["corpus"]), "--queries", str(data["queries"]), "--qrels", str(data["qrels"]),
               "--rewrites", f"kw={data['kw']}", "--name", "VdrCliDocs", "--main-score", "ndcg_at_5", "--out", str(mod)])
    assert rc == 0 and mod.is_file()
    spec = importlib.util.spec_from_file_location("tiny_tasks", mod)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    assert m.TASK_NAMES == ["VdrCliDocs", "VdrCliDocs-kw"]
    t = mteb.get_task("VdrCliDocs-kw")
    assert t.metadata.main_score == "ndcg_at_5" and t.metadata.category == "t2i"
    assert "import mteb" in m.__doc__ and "mteb.evaluate" in m.__doc__
    capsys.readouterr()
    assert main(["mteb-task", str(data["corpus"]), "--queries", str(data["queries"]), "--qrels", str(data["qrels"]), "--name", "VdrCliPrint"]) == 0
    assert "make_tasks(" in capsys.readouterr().out
    assert main(["mteb-task", str(data["corpus"]), "--queries", str(data["queries"]), "--qrels", str(data["qrels"]),
                 "--name", "VdrCliBad", "--main-score", "ndcg_at_2"]) == 2


def test_evaluate_engine_mteb_stores_task_results(data, colqwen_dir, tmp_path):  # noqa: F811
    from mteb.results import TaskResult

    from vdr.cli import main
    from vdr.experiment.evaluation import evaluate

    out = tmp_path / "res"
    rc = main(["evaluate", str(data["corpus"]), "--queries", str(data["queries"]), "--qrels", str(data["qrels"]),
               "--rewrites", f"kw={data['kw']}", "--backend", "multimodal", "--model", str(colqwen_dir), "--engine", "mteb",
               "--device", "cpu", "--out", str(out), "--quiet"])
    assert rc == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["config"]["engine"] == "mteb" and not doc["skipped"]
    rep = doc["backend_reports"]["multimodal"]
    files = sorted(p.name for p in (out / "mteb").glob("*.json"))
    assert len(files) == 2 and set(rep["task_results"]) == {"original", "kw"}
    for variant, rel in rep["task_results"].items():
        tr = TaskResult.from_disk(out / rel)
        run = next(r for r in doc["runs"] if r["variant"] == variant)
        assert run["policy"]["queries_without_relevant"] == "zero" and run["num_queries"] == 5
        assert abs(run["aggregate"]["ndcg@3"] - tr.scores["test"][0]["ndcg_at_3"]) <= 5e-6
        assert abs(run["aggregate"]["mrr@3"] - tr.scores["test"][0]["mrr_at_3"]) <= 1e-6
        assert rep["max_abs_difference_vdr_vs_mteb"][variant] <= 1e-6  # vdr's nDCG/Recall rounded as MTEB rounds them
    assert (out / "runs" / "multimodal.kw.trec").is_file()
    # one encoder load, pages encoded once into the page store, MTEB's corpus encoding answered from it
    assert rep["page_forward_passes"] == 12 and rep["main_metric"]["name"] == "ndcg_at_3"
    assert rep["disagreements"] == {"original": [], "kw": []}
    assert rep["main_metric"]["values"]["kw"] == rep["mteb_scores"]["kw"]["ndcg_at_3"]
    cfg = doc["config"]["backend_config"]["multimodal"]
    assert cfg["engine"] == "mteb" and cfg["device"] == "cpu" and cfg["compute_dtype"] == "float32" and cfg["stored_dtype"] == "float16"
    # the vdr engine scores the same stored vectors: the same rankings
    assert main(["evaluate", str(data["corpus"]), "--queries", str(data["queries"]), "--qrels", str(data["qrels"]),
                 "--backend", "multimodal", "--model", str(colqwen_dir), "--device", "cpu", "--out", str(tmp_path / "vdr"), "--quiet"]) == 0
    ours = json.loads((tmp_path / "vdr" / "results.json").read_text())
    assert ours["backend_reports"]["multimodal"]["page_forward_passes"] == 0  # the store MTEB's run filled
    mine, theirs = vdr.load_run(tmp_path / "vdr" / "runs" / "multimodal.original.trec"), vdr.load_run(out / "runs" / "multimodal.original.trec")
    for q in QUERIES:
        if q in theirs:
            assert [d for d, _ in mine.ranked(q)][:10] == [d for d, _ in theirs.ranked(q)][:10], q
            assert max(abs(mine[q][d] - theirs[q][d]) for d in mine[q]) <= 1e-5
    with pytest.raises(InputError, match="engine"):
        evaluate(data["corpus"], queries=data["queries"], qrels=data["qrels"], out=tmp_path / "x", backends="lexical", engine="nope")
