"""ViDoRe as users evaluate it (issue 33): V3's languages as MTEB scores them, page text from the
datasets, corpora without text refused, graded qrels, and a whole MTEB benchmark in one command."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("datasets")

import vdr  # noqa: E402
import vidore_fixture as vf  # noqa: E402
from cli_helpers import cli  # noqa: E402
from vdr.errors import InputError  # noqa: E402
from vdr.ingest.vidore import MtebVidoreTask  # noqa: E402
from vdr.results import MEAN_OVER_LANGUAGES, Results  # noqa: E402


@pytest.fixture(scope="module")
def v3(tmp_path_factory):
    return vf.make_v3(tmp_path_factory.mktemp("v3") / "vidore_v3_hr")


def _keywords(tmp_path):
    """A rewrite of every query (id as in V3's queries): the English keywords of its base query."""
    path = tmp_path / "keywords.jsonl"
    with open(path, "w") as f:
        for qid, _, _, base in vf._v3_query_rows():
            f.write(json.dumps({"_id": str(qid), "text": ["revenue euros million", "prime pump fueling"][base]}) + "\n")
    return path


def test_v3_languages_are_query_sets_with_mteb_mean(v3, tmp_path):
    res = vdr.evaluate(None, out=tmp_path / "res", vidore=str(v3), backends="lexical", k=(3, 10), progress=False,
                       rewrites={"keywords": _keywords(tmp_path)})
    assert res.languages == list(vf.V3_LANGUAGES) and "language" in res.group_fields
    rows = res.language_rows("ndcg@10")
    per_query = res.per_query("lexical", "original")
    fields = res.query_fields
    for lang in vf.V3_LANGUAGES:  # each language's mean is the mean of its own queries
        mine = [per_query[q]["ndcg@10"] for q in res.query_ids if fields[q]["language"] == lang]
        row = next(r for r in rows if (r["variant"], r["language"]) == ("original", lang))
        assert row["n_queries"] == len(mine) == 2 and row["mean"] == pytest.approx(math.fsum(mine) / 2, abs=1e-12)
    langs = [r["mean"] for r in rows if r["variant"] == "original" and r["language"] != MEAN_OVER_LANGUAGES]
    mean = next(r for r in rows if (r["variant"], r["language"]) == ("original", MEAN_OVER_LANGUAGES))
    assert mean["mean"] == pytest.approx(math.fsum(langs) / 6, abs=1e-12) and mean["n_queries"] == 12
    assert {g.group for g in res.grouped("language")} == set(vf.V3_LANGUAGES)  # the per-language tests
    table = res.language_table().to_text()
    assert "english (n=2)" in table and "mean over languages" in table
    assert res.to_pandas("languages").shape == (2 * 7, 6)
    doc = json.loads((tmp_path / "res" / "results.json").read_text())
    assert doc["config"]["languages"]["values"] == list(vf.V3_LANGUAGES)
    assert len(doc["per_language"]) == 2 * 7
    again = Results.load(tmp_path / "res")
    assert again.language_rows() == res.language_rows()
    from vdr.report import report

    paths = report(tmp_path / "res")
    md = paths.markdown.read_text() if hasattr(paths, "markdown") else (tmp_path / "res" / "report.md").read_text()
    assert "## By language" in md and "### ndcg@10" in md and "| lexical | keywords |" in md
    assert 'id="languages"' in (tmp_path / "res" / "report.html").read_text()


def test_v3_markdown_is_the_page_text_and_graded_gain_is_noted(v3, tmp_path):
    res = vdr.evaluate(None, out=tmp_path / "res", vidore=str(v3), backends="lexical", progress=False)
    assert res.aggregate("lexical", "original")["ndcg@3"] > 0.5  # markdown indexed: BM25 finds the pages
    gain = res.config["graded_gain"]
    assert gain["metric"] == "ndcg@3" and gain["exp_metric"] == "ndcg_exp@3" and gain["max_difference"] > 0.005
    exp = vdr.evaluate_run(res.qrels, res.ranking("lexical", "original"), ["ndcg_exp@3"]).aggregate["ndcg_exp@3"]
    assert gain["values"]["lexical/original"]["ndcg_exp@3"] == pytest.approx(exp, abs=1e-12)
    assert any(n.startswith("graded qrels: ndcg@3 uses linear gain") for n in res.summary_table().notes)


@pytest.mark.parametrize("make", [vf.make_v1, vf.make_v2, vf.make_v1_beir], ids=["v1_qa", "v2", "v1_beir"])
def test_a_corpus_without_text_is_refused_by_text_backends_never_a_silent_zero(tmp_path, make):
    root = make(tmp_path / "ds")
    with pytest.raises(InputError, match=r"no backend ran: lexical: no page of the corpus has text.*--ocr auto.*OCRRetrieval"):
        vdr.evaluate(None, out=tmp_path / "res", vidore=str(root), backends="lexical", progress=False)
    res = vdr.evaluate(None, out=tmp_path / "res2", vidore=str(root), backends="lexical", progress=False,
                       backend_options={"lexical": {"allow_no_text": True}})
    assert res.aggregate("lexical", "original")["ndcg@3"] == 0.0  # asked for explicitly


def test_the_ocr_copy_text_feeds_the_text_backends(tmp_path):
    root = vf.make_v3_mteb(tmp_path / "Vidore3HrOCRRetrieval", ocr=True)
    res = vdr.evaluate(None, out=tmp_path / "res", vidore=str(root), backends="lexical", progress=False)
    assert res.aggregate("lexical", "original")["ndcg@3"] > 0.5 and len(res.languages) == 6
    assert res.corpus["corpus-test-0"].text_source == "dataset"


def test_a_benchmark_in_one_command_a_row_per_task_and_their_mean(tmp_path, capsys, monkeypatch):
    from vdr.experiment.benchmark import evaluate_benchmark
    from vdr.ingest import vidore

    tasks = [MtebVidoreTask("Vidore3HrRetrieval", str(vf.make_v3(tmp_path / "hr")), None, "ndcg_at_10", True),
             MtebVidoreTask("Vidore3HrRetrieval.v2", str(vf.make_v3_mteb(tmp_path / "ocr", ocr=True)), None, "ndcg_at_10", True)]
    bench = evaluate_benchmark("ViDoRe(v3)", out=tmp_path / "b", tasks=tasks, backends="lexical", progress=False)
    assert [r["task"] for r in bench.rows] == ["Vidore3HrRetrieval", "Vidore3HrRetrieval.v2"]
    for r in bench.rows:  # a task's score: the mean over its languages of nDCG@10, MTEB's main score
        res = bench.results[r["task"]]
        want = next(x["mean"] for x in res.language_rows("ndcg@10") if x["language"] == MEAN_OVER_LANGUAGES)
        assert r["metric"] == "ndcg@10" and r["score"] == pytest.approx(want, abs=1e-12)
    (mean,) = bench.means()
    assert mean["tasks"] == 2 and mean["score"] == pytest.approx((bench.rows[0]["score"] + bench.rows[1]["score"]) / 2, abs=1e-12)
    assert json.loads((tmp_path / "b" / "benchmark.json").read_text())["means"][0]["score"] == pytest.approx(mean["score"])
    monkeypatch.setattr(vidore, "benchmark_tasks", lambda name: tasks)
    rc, out, err = cli(capsys, "evaluate", "--vidore", "ViDoRe(v3)", "--backend", "lexical", "--out", tmp_path / "c", "--quiet")
    assert rc == 0, err
    assert "Vidore3HrRetrieval.v2" in out and "mean over 2 tasks" in out and "benchmark.json" in out


def test_v3_list_attributes_put_a_query_in_each_of_its_groups(v3, tmp_path):
    res = vdr.evaluate(None, out=tmp_path / "res", vidore=str(v3), backends="lexical", progress=False,
                       rewrites={"keywords": _keywords(tmp_path)}, group_by=("query_types", "source_type"))
    sizes = {r["group"]: r["n_queries"] for r in res.group_rows("query_types")}
    assert sizes == {"numerical": 6, "extractive": 6, "instruction": 6}  # query 2j in both of its types
    assert any("overlap" in n for n in res.group_table("query_types").notes)
    assert {r["group"]: r["n_queries"] for r in res.group_rows("source_type")} == {"multi-page": 6, "single-page": 6}


def test_a_rerun_into_the_same_folder_keeps_the_language_breakdown(v3, tmp_path):
    """The breakdown by language is added by vdr itself: running again (another backend option, the
    same languages) neither refuses nor loses it."""
    kw = dict(out=tmp_path / "res", vidore=str(v3), backends="lexical", progress=False)
    vdr.evaluate(None, **kw)
    res = vdr.evaluate(None, **kw, k=(3, 5, 10))
    assert res.group_fields == ["language"] and res.languages == list(vf.V3_LANGUAGES)
