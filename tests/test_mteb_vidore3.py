"""MTEB parity on ViDoRe V3 (issue 33, "Done when"): a local copy of a V3 task in MTEB's own layout
(``vidore/vidore_v3_*_mteb_format``: configs ``<language>-corpus/-queries/-qrels``, built by
:func:`vidore_fixture.make_v3_mteb`: 3 pages, 2 queries in each of 6 languages, grades 1 and 2),
scored by vdr and by mteb 2.26 itself.

* MTEB loads the copy with its own loader: a task class whose metadata is the installed
  ``Vidore3HrRetrieval``'s (its 6 language subsets, main score ``ndcg_at_10``, category, prompt),
  with ``dataset`` pointing at the local folder; ``AbsTaskRetrieval.load_data`` ->
  ``RetrievalDatasetLoader`` reads ``<language>-corpus``, ``-queries`` and ``-qrels`` from it.
  Nothing is fed to MTEB pre-loaded.
* Per query: vdr's nDCG@k equals MTEB's scoring of the same run
  (``mteb._evaluators.retrieval_metrics.calculate_retrieval_scores``: pytrec_eval, linear gain) on
  MTEB's qrels of each language, within 1e-6.
* Main score: ``mteb.evaluate`` of vdr's model wrapper (:class:`vdr.integrations.mteb.VdrColPaliModel`)
  against ``vdr.evaluate(vidore=<the folder>)`` with the same tiny ColQwen2.5. MTEB rounds each
  subset's nDCG@10 to 5 decimals (``parse_metrics_from_scores``: ``round(mean, 5)``) and its main
  score is the unweighted mean of those rounded subset scores (``TaskResult.get_score``: ``np.mean``
  over subsets). Hence: per language, MTEB's ``ndcg_at_10`` == vdr's per-language mean rounded to 5
  decimals; MTEB's main score == the mean of vdr's rounded per-language means (1e-12), and differs
  from vdr's unrounded mean over languages by at most the rounding, 5e-6. That rounding is MTEB's
  deliberate choice, not a disagreement.

Runs offline: HF_HUB_OFFLINE / HF_DATASETS_OFFLINE are set (and the already imported libraries'
flags patched) for the module.
"""

from __future__ import annotations

import hashlib
import math

import pytest

mteb = pytest.importorskip("mteb")

from vidore_fixture import V3_LANGUAGES, make_v3_mteb  # noqa: E402

import vdr  # noqa: E402
from vdr.results import MEAN_OVER_LANGUAGES  # noqa: E402

pytestmark = pytest.mark.model  # a tiny ColQwen2.5; mteb imports torch, transformers and datasets

#: the installed MTEB task whose metadata the local task copies
SOURCE_TASK = "Vidore3HrRetrieval"
LOCAL_TASK = "VdrLocalVidore3HrRetrieval"
K = (3, 10)
#: MTEB's rounding of a subset's mean nDCG (``round(..., 5)``): the largest effect on a mean of them
MTEB_ROUNDING = 5e-6


@pytest.fixture(scope="module", autouse=True)
def offline():
    """No network: the environment variables, and the flags that datasets / huggingface_hub read
    from them at import (they may be imported already by an earlier test module)."""
    import datasets.config
    import huggingface_hub.constants

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        mp.setattr(datasets.config, "HF_HUB_OFFLINE", True)
        mp.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
        yield


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The local copy of a V3 task in MTEB's layout, as ``hf download`` leaves a snapshot."""
    return make_v3_mteb(tmp_path_factory.mktemp("v3") / "vidore_v3_hr_mteb_format")


def local_task(folder):
    """A fresh instance of an MTEB task over ``folder``: the installed ``Vidore3HrRetrieval``'s
    metadata with another name and ``dataset`` = the folder; its revision is a digest of the
    folder's parquet files (40 hex digits, as a hub commit; a local folder has no revisions)."""
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    src = mteb.get_task(SOURCE_TASK).metadata
    rev = hashlib.sha1(b"".join(p.read_bytes() for p in sorted(folder.rglob("*.parquet")))).hexdigest()
    md = src.model_copy(update={"name": LOCAL_TASK, "dataset": {"path": str(folder), "revision": rev}, "superseded_by": None})
    cls = type("VdrLocalVidore3Hr", (AbsTaskRetrieval,), {"metadata": md, "__module__": __name__})
    return cls()


@pytest.fixture(scope="module")
def mteb_data(folder):
    """What MTEB's own loader (``AbsTaskRetrieval.load_data``) reads from the folder:
    ``{language: RetrievalSplitData}`` of the test split."""
    task = local_task(folder)
    task.load_data()
    return {lang: task.dataset[lang]["test"] for lang in task.hf_subsets}


@pytest.fixture(scope="module")
def ours(folder, colqwen_dir, tmp_path_factory):
    """``vdr evaluate`` on the folder (ingested by vdr) with the tiny ColQwen2.5, on the CPU as the MTEB run."""
    out = tmp_path_factory.mktemp("vdr-out")
    res = vdr.evaluate(None, out=out, vidore=str(folder), backends="multimodal", model=str(colqwen_dir), device="cpu", k=K,
                       progress=False)
    assert [(r.backend, r.variant) for r in res.runs] == [("multimodal", "original")]
    return res


@pytest.fixture(scope="module")
def theirs(folder, colqwen_dir, tmp_path_factory):
    """``mteb.evaluate`` of vdr's model wrapper on the local task: (TaskResult, predictions)."""
    import json

    from vdr.integrations.mteb import VdrColPaliModel

    pred = tmp_path_factory.mktemp("mteb-pred")
    model = VdrColPaliModel(colqwen_dir, device="cpu")
    res = mteb.evaluate(model, [local_task(folder)], cache=None, prediction_folder=pred, encode_kwargs={"batch_size": 4},
                        show_progress_bar=False, co2_tracker=False)
    assert not res.exceptions
    (tr,) = res.task_results
    predictions = json.loads((pred / f"{LOCAL_TASK}_predictions.json").read_text())
    return tr, {lang: predictions[lang]["test"] for lang in V3_LANGUAGES}


def _language_of(results) -> dict[str, str]:
    return {q: results.query_fields[q]["language"] for q in results.query_ids}


def _per_query(results, metric: str) -> dict[str, float]:
    (r,) = results.runs
    return dict(zip(r.metrics.query_ids, r.metrics.values[metric].tolist()))


def _vdr_run(results):
    (r,) = results.runs
    return r.ranking if r.ranking is not None else results.ranking(r.backend, r.variant)


def _lang_means(results, metric: str = "ndcg@10") -> dict[str, float]:
    return {row["language"]: row["mean"] for row in results.language_rows(metric)}


# ------------------------------------------------------------------------------------------ loading


def test_mteb_loads_the_local_copy_with_its_own_loader_as_vdr_ingests_it(folder, mteb_data, ours):
    """The local task is the installed V3 task but for its name and data; per language, MTEB's loader
    reads the pages, queries and graded qrels that vdr ingested from the same folder."""
    src = mteb.get_task(SOURCE_TASK).metadata
    md = local_task(folder).metadata
    assert md.eval_langs == src.eval_langs and set(md.eval_langs) == set(V3_LANGUAGES)
    for attr in ("main_score", "category", "modalities", "eval_splits", "prompt", "type"):
        assert getattr(md, attr) == getattr(src, attr), attr
    assert md.main_score == "ndcg_at_10" and md.dataset["path"] == str(folder)
    assert set(mteb_data) == set(V3_LANGUAGES) == set(ours.languages)
    lang = _language_of(ours)
    pages = ours.corpus.ids()
    for language, split in mteb_data.items():
        assert sorted(split["corpus"]["id"]) == sorted(pages), language  # the one corpus, in every subset
        mine = sorted(q for q, x in lang.items() if x == language)
        assert sorted(split["queries"]["id"]) == mine and len(mine) == 2, language
        assert {q: dict(split["relevant_docs"][q]) for q in mine} == {q: dict(ours.qrels[q]) for q in mine}, language
        assert set(split["relevant_docs"]) == set(mine), language
    assert max(g for q in ours.qrels for g in ours.qrels[q].values()) == 2  # graded: V3's grades are kept


# ------------------------------------------------------------------------------------------ per query


def test_per_query_ndcg_equals_mtebs_scoring_of_the_same_run(mteb_data, ours):
    """vdr's run, scored by MTEB's ``calculate_retrieval_scores`` on MTEB's qrels of each language."""
    from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores

    run = _vdr_run(ours)
    lang = _language_of(ours)
    means = _lang_means(ours)
    graded_matters = False
    for language, split in mteb_data.items():
        qids = [q for q in run if lang[q] == language]
        sub = {q: dict(run[q]) for q in qids}
        qrels = {q: dict(d) for q, d in split["relevant_docs"].items()}
        res = calculate_retrieval_scores(sub, qrels, list(K))
        assert set(res.all_scores) == set(qids), language
        for k in K:
            mine = _per_query(ours, f"ndcg@{k}")
            diff = max(abs(mine[q] - res.all_scores[q][f"ndcg_cut_{k}"]) for q in qids)
            assert diff <= 1e-6, (language, k, diff)
        # the language's mean: MTEB's NDCG@10 is the mean rounded to 5 decimals
        assert res.ndcg["NDCG@10"] == pytest.approx(round(means[language], 5), abs=1e-12), language
        # the grades matter on this fixture: binary qrels give other values (linear gain is compared, not 0/1)
        binary = calculate_retrieval_scores(sub, {q: {d: int(g > 0) for d, g in r.items()} for q, r in qrels.items()}, [10])
        graded_matters |= any(abs(binary.all_scores[q]["ndcg_cut_10"] - res.all_scores[q]["ndcg_cut_10"]) > 1e-3 for q in qids)
    assert graded_matters


# ------------------------------------------------------------------------------------------ main score


def test_mteb_main_score_of_vdrs_model_equals_vdr_evaluate(ours, theirs):
    """Per language and for the main score, with MTEB's rounding to 5 decimals applied to vdr's means."""
    tr, _ = theirs
    means = _lang_means(ours)
    by_subset = {s["hf_subset"]: s for s in tr.scores["test"]}
    assert set(by_subset) == set(V3_LANGUAGES)
    for language, s in by_subset.items():
        assert s["main_score"] == s["ndcg_at_10"]
        # MTEB rounds a subset's mean to 5 decimals: vdr's mean, rounded the same way, is equal
        assert s["ndcg_at_10"] == pytest.approx(round(means[language], 5), abs=1e-12), language
        assert abs(s["ndcg_at_10"] - means[language]) <= MTEB_ROUNDING, language
    main = tr.get_score()  # MTEB's main score: the mean over the language subsets
    assert main == pytest.approx(math.fsum(round(means[x], 5) for x in V3_LANGUAGES) / len(V3_LANGUAGES), abs=1e-12)
    assert abs(main - means[MEAN_OVER_LANGUAGES]) <= MTEB_ROUNDING
    assert means[MEAN_OVER_LANGUAGES] == pytest.approx(math.fsum(means[x] for x in V3_LANGUAGES) / len(V3_LANGUAGES), abs=1e-12)


def test_mtebs_run_of_vdrs_model_scores_per_query_as_vdr_evaluate(ours, theirs, mteb_data):
    """MTEB's own run (its search with vdr's model; pages encoded in float32, where vdr evaluate
    scores its float16 page store) ranks every query as vdr's run does, so MTEB's per-query nDCG@k
    of it equals vdr's within 1e-6."""
    from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores

    _, predictions = theirs
    run = _vdr_run(ours)
    for language, pred in predictions.items():
        assert set(pred) == set(mteb_data[language]["relevant_docs"]), language
        qrels = {q: dict(d) for q, d in mteb_data[language]["relevant_docs"].items()}
        res = calculate_retrieval_scores(pred, qrels, list(K))
        for q, scores in pred.items():
            assert sorted(scores, key=scores.get, reverse=True) == [d for d, _ in run.ranked(q)], q
            assert max(abs(s - run[q][d]) for d, s in scores.items()) <= 1e-3 * max(1.0, max(map(abs, scores.values())))
            for k in K:
                assert abs(_per_query(ours, f"ndcg@{k}")[q] - res.all_scores[q][f"ndcg_cut_{k}"]) <= 1e-6, (language, q, k)
