"""vdr convert (TopiOCQA, QReCC, MS MARCO, BEIR) and passage corpora through vdr evaluate
(issue 15.2, 15.7; issue 18.5, 18.7)."""

from __future__ import annotations

import json
import warnings

import pytest

from vdr.ingest.convert import EMPTY_ANSWER, ConcatSpec, concat_query, concat_text, convert_beir, convert_msmarco, convert_qrecc, convert_topiocqa
from vdr.corpus import load_corpus
from vdr.errors import InputError, VdrWarning
from vdr.io.formats import load_qrels, load_queries, load_rewrites, load_run
from vdr.types import Query

COLLECTION = (
    "id\ttext\ttitle\n"
    "1\tThe Eiffel tower is in Paris\tEiffel Tower [SEP] Introduction\n"
    "2\tIt was built in 1889 for the world fair\tEiffel Tower [SEP] History\n"
    '3\t"Gustave Eiffel\'s company ""designed"" the tower"\tEiffel Tower [SEP] Design\n'
    "4\tThe Louvre is the largest art museum\tLouvre [SEP] Introduction\n"
    "5\tThe Mona Lisa hangs in the Louvre\tLouvre [SEP] Collection\n"
    "6\tParis is the capital of France\tParis [SEP] Introduction\n"
    "7\tBerlin is the capital of Germany\tBerlin [SEP] Introduction\n"
    "8\t\t\n"
)

#: query id prefixes (ConvSearch-R1's scheme, vdr convert's default): TopiOCQA dev, QReCC test
T, Q = "topiocqa-dev_", "QReCC-Test_"

DATASET = [  # TopiOCQA dev.json shape (extra fields ignored; Context: the earlier questions and answers alternating)
    {"Conversation_no": 1, "Turn_no": 1, "Question": "where is the eiffel tower", "Answer": "Paris", "Topic": "Eiffel Tower", "Context": []},
    {"Conversation_no": 1, "Turn_no": 2, "Question": "when was it built", "Answer": "", "Topic": "Eiffel Tower",
     "Context": ["where is the eiffel tower", "Paris"]},
    {"Conversation_no": 1, "Turn_no": 3, "Question": "who was its architect", "Answer": "Eiffel's company", "Topic": "Eiffel Tower",
     "Context": ["where is the eiffel tower", "Paris", "when was it built", ""]},
    {"Conversation_no": 2, "Turn_no": 1, "Question": "what is the louvre", "Answer": "a museum", "Topic": "Louvre", "Context": []},
    {"Conversation_no": 2, "Turn_no": 2, "Question": "which painting hangs there", "Answer": "the Mona Lisa", "Topic": "Louvre",
     "Context": ["what is the louvre", "a museum"]},
]


def _gold(conv, turn, *pids):
    return {"conv_id": conv, "turn_id": turn, "question": "...", "answers": [],
            "positive_ctxs": [{"title": "t", "text": "x", "passage_id": p} for p in pids]}


# gold in another order and of another length than the dataset: (1, 2) has no gold; (3, 1) has no turn
GOLD = [_gold(2, 2, "5", "99"), _gold(3, 1, "7"), _gold(1, 3, "3"), _gold(1, 1, "1", "6"), _gold(2, 1, "4", "8")]


@pytest.fixture
def topiocqa(tmp_path):
    (tmp_path / "full_wiki_segments.tsv").write_text(COLLECTION, encoding="utf-8")
    (tmp_path / "dev.json").write_text(json.dumps(DATASET), encoding="utf-8")
    (tmp_path / "dev_gold.json").write_text(json.dumps(GOLD), encoding="utf-8")
    out = tmp_path / "topiocqa"
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        report = convert_topiocqa(tmp_path / "dev.json", tmp_path / "dev_gold.json", out, collection=tmp_path / "full_wiki_segments.tsv")
    assert any("1 gold entry has no dataset turn" in str(x.message) for x in w)
    return out, report


# --------------------------------------------------------------------------------------------- budget


def test_history_budget_is_the_shared_one_drops_oldest_and_keeps_question():
    q = Query("q1 q2", ("a b", "c d e", "f"))
    assert concat_text(q, ConcatSpec("x", answers=False, budget=6)) == ("c d e f q1 q2", 1)
    assert concat_text(q, ConcatSpec("x", answers=False, budget=3)) == ("f q1 q2", 2)
    assert concat_text(q, ConcatSpec("x", answers=False, budget=5)) == ("d e f q1 q2", 2)  # "a b" dropped, "c d e" cut in part
    assert concat_text(q, ConcatSpec("x", answers=False, budget=None)) == ("a b c d e f q1 q2", 0)
    long = concat_query(Query("one two three four", ("a", "b")), ConcatSpec("x", answers=False, budget=2))
    assert long.text == "three four" and long.question_cut and long.dropped_turns == 2  # the question's last tokens
    q_first = concat_query(q, ConcatSpec("x", answers=False, order="newest-first", separator=" | ", budget=5))
    assert q_first.text == "q1 q2 | f | d e"  # the newest turn next to the question


def test_concat_text_orders_and_separators():
    q = Query("q3", ("q1", "q2"), ("a1", "a2"))
    assert concat_text(q, ConcatSpec("x", answers=False)) == ("q1 q2 q3", 0)
    assert concat_text(q, ConcatSpec("x", answers=True, separator=" [SEP] ")) == ("q1 [SEP] a1 [SEP] q2 [SEP] a2 [SEP] q3", 0)
    assert concat_text(q, ConcatSpec("x", answers=True, order="newest-first")) == ("q3 q2 a2 q1 a1", 0)
    assert concat_text(q, ConcatSpec("x", answers=True, budget=3)) == ("q2 a2 q3", 1)
    with pytest.raises(InputError):
        ConcatSpec("x", answers=True, order="random")


# --------------------------------------------------------------------------------------------- TopiOCQA


def test_topiocqa_join_by_key_drop_and_history(topiocqa):
    out, report = topiocqa
    c = report["counts"]
    assert c["turns"] == 5 and c["queries"] == 4 and c["dropped_without_gold"] == 1 and c["dropped_examples"] == [T + "1_2"]
    assert c["gold_entries"] == 5 and c["empty_answers_replaced"] == 1
    assert report["gold_without_turn"] == {"count": 1, "examples": [T + "3_1"]}
    qs = load_queries(out / "queries.jsonl")
    assert list(qs.ids()) == [T + "1_1", T + "1_3", T + "2_1", T + "2_2"]
    # the dropped turn 1_2 stays in the history of 1_3; its empty answer gets the placeholder
    assert qs[T + "1_3"] == Query("who was its architect", ("where is the eiffel tower", "when was it built"), ("Paris", EMPTY_ANSWER))
    assert qs[T + "1_1"] == Query("where is the eiffel tower")
    qrels = load_qrels(out / "qrels.tsv")
    assert qrels.to_dict() == {T + "1_1": {"1": 1, "6": 1}, T + "1_3": {"3": 1}, T + "2_1": {"4": 1, "8": 1}, T + "2_2": {"5": 1, "99": 1}}
    cq = load_rewrites(out / "variants" / "concat-q.jsonl", qs, "concat-q")
    assert cq[T + "1_3"].text == "where is the eiffel tower when was it built who was its architect"
    cqa = load_rewrites(out / "variants" / "concat-qa.jsonl", qs, "concat-qa")
    assert cqa[T + "1_3"].text == f"where is the eiffel tower Paris when was it built {EMPTY_ANSWER} who was its architect"
    assert report["variants"]["concat-qa"]["budget_tokens"] == 512 and report["variants"]["concat-q"]["answers"] is False
    # concat-q holds the built-in concat's texts: written, marked, and not suggested as --rewrites (issue 24.5)
    assert report["variants"]["concat-q"]["same_texts_as"].startswith("concat ")
    assert report["evaluate"] == (f"vdr evaluate {out} --backend lexical --bm25-preset topiocqa --bm25-analyzer lucene --protocol convsearch"
                                  f" --rewrites concat-qa={out / 'variants' / 'concat-qa.jsonl'} --out {out / 'results'}")
    assert json.loads((out / "conversion.json").read_text())["counts"] == c
    corpus = load_corpus(out)
    assert corpus.kind == "passage" and len(corpus) == 8
    assert corpus.texts()["3"] == 'Eiffel Tower Design Gustave Eiffel\'s company "designed" the tower'


def test_topiocqa_without_matching_gold_is_an_error(tmp_path):
    (tmp_path / "d.json").write_text(json.dumps(DATASET), encoding="utf-8")
    (tmp_path / "g.json").write_text(json.dumps([_gold(9, 9, "1")]), encoding="utf-8")
    with pytest.raises(InputError, match="no dataset turn has a gold passage"):
        convert_topiocqa(tmp_path / "d.json", tmp_path / "g.json", tmp_path / "o")


def test_topiocqa_gold_without_keys_is_an_error(tmp_path):
    (tmp_path / "d.json").write_text(json.dumps(DATASET), encoding="utf-8")
    (tmp_path / "g.json").write_text(json.dumps([{"positive_ctxs": [{"passage_id": "1"}]}]), encoding="utf-8")
    with pytest.raises(InputError, match="entry 1: missing conversation number"):
        convert_topiocqa(tmp_path / "d.json", tmp_path / "g.json", tmp_path / "o")


# --------------------------------------------------------------------------------------------- QReCC


def test_qrecc_human_rewrite_and_missing_gold(tmp_path):
    data = [
        {"Conversation_no": 5, "Turn_no": 1, "Question": "who wrote hamlet", "Rewrite": "who wrote hamlet", "Answer": "Shakespeare",
         "Context": []},
        {"Conversation_no": 5, "Turn_no": 2, "Question": "when was he born", "Rewrite": "when was Shakespeare born", "Answer": "1564",
         "Context": ["who wrote hamlet", "Shakespeare"]},
        {"Conversation_no": 5, "Turn_no": 3, "Question": "and died", "Rewrite": "when did Shakespeare die", "Answer": "",
         "Context": ["who wrote hamlet", "Shakespeare", "when was he born", "1564"]},
    ]
    (tmp_path / "test.json").write_text(json.dumps(data), encoding="utf-8")
    (tmp_path / "qrels.trec").write_text("5_2 0 http://a.com_p0 1\n5_3 0 http://b.com_p1 1\n5_3 0 http://c.com_p2 0\n", encoding="utf-8")
    coll = tmp_path / "coll"
    coll.mkdir()
    (coll / "p.jsonl").write_text("".join(json.dumps({"id": i, "contents": t}) + "\n" for i, t in
                                          [("http://a.com_p0", "Shakespeare was born in 1564"), ("http://b.com_p1", "He died in 1616")]),
                                  encoding="utf-8")
    r = convert_qrecc(tmp_path / "test.json", tmp_path / "qrels.trec", tmp_path / "o", collection=coll)
    assert r["counts"]["queries"] == 2 and r["counts"]["dropped_without_gold"] == 1 and r["counts"]["dropped_examples"] == [Q + "5_1"]
    qs = load_queries(tmp_path / "o" / "queries.jsonl")
    assert qs[Q + "5_2"] == Query("when was he born", ("who wrote hamlet",), ("Shakespeare",))  # 5_1 dropped, kept in history
    human = load_rewrites(tmp_path / "o" / "variants" / "human.jsonl", qs, "human")
    assert human.texts() == {Q + "5_2": "when was Shakespeare born", Q + "5_3": "when did Shakespeare die"}
    assert load_qrels(tmp_path / "o" / "qrels.tsv").to_dict() == {Q + "5_2": {"http://a.com_p0": 1},
                                                                  Q + "5_3": {"http://b.com_p1": 1, "http://c.com_p2": 0}}
    assert load_corpus(tmp_path / "o").report["format"] == "jsonl"


# --------------------------------------------------------------------------------------------- MS MARCO, BEIR


def test_msmarco(tmp_path):
    (tmp_path / "collection.tsv").write_text('0\tfirst\n1\t"quote never closed\n2\tthird\n', encoding="utf-8")
    (tmp_path / "queries.dev.tsv").write_text("10\twhat is first\n11\tno qrels for me\n", encoding="utf-8")
    (tmp_path / "qrels.dev.tsv").write_text("10\t0\t1\t1\n", encoding="utf-8")
    r = convert_msmarco(tmp_path / "queries.dev.tsv", tmp_path / "qrels.dev.tsv", tmp_path / "o", collection=tmp_path / "collection.tsv")
    assert r["counts"]["queries"] == 1 and r["counts"]["dropped_without_qrels"] == 1
    assert load_corpus(tmp_path / "o").texts() == {"0": "first", "1": '"quote never closed', "2": "third"}
    assert load_qrels(tmp_path / "o" / "qrels.tsv").to_dict() == {"10": {"1": 1}}


def test_beir(tmp_path):
    d = tmp_path / "scifact"
    (d / "qrels").mkdir(parents=True)
    (d / "corpus.jsonl").write_text("".join(json.dumps(o) + "\n" for o in [{"_id": "d1", "title": "T", "text": "x"},
                                                                          {"_id": "d2", "title": "", "text": "y"}]), encoding="utf-8")
    (d / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "x?"}) + "\n" + json.dumps({"_id": "q2", "text": "z?"}) + "\n",
                                     encoding="utf-8")
    (d / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    r = convert_beir(d, tmp_path / "o")
    assert r["counts"]["queries"] == 1 and r["counts"]["dropped_without_qrels"] == 1
    assert load_corpus(tmp_path / "o").texts() == {"d1": "T x", "d2": "y"}


def test_cli_convert_topiocqa(tmp_path):
    from typer.testing import CliRunner

    from vdr.cli import app

    (tmp_path / "w.tsv").write_text(COLLECTION, encoding="utf-8")
    (tmp_path / "d.json").write_text(json.dumps(DATASET), encoding="utf-8")
    (tmp_path / "g.json").write_text(json.dumps(GOLD), encoding="utf-8")
    r = CliRunner().invoke(app, ["convert", "topiocqa", "--collection", str(tmp_path / "w.tsv"), "--dataset", str(tmp_path / "d.json"),
                                 "--gold", str(tmp_path / "g.json"), "--out", str(tmp_path / "o"), "--history-budget", "4"])
    assert r.exit_code == 0, r.output
    assert "4 queries" in r.output and "1 turn without gold dropped" in r.output and T + "3_1" in r.output
    rep = json.loads((tmp_path / "o" / "conversion.json").read_text())
    assert rep["variants"]["concat-q"]["budget_tokens"] == 4 and rep["variants"]["concat-q"]["queries_with_history_cut"] == 2
    from vdr.retrieve.budget import budget_config

    assert rep["variants"]["concat-q"]["budget"] == budget_config(4)  # the shared budget rule, recorded
    # a budget of 4 makes concat-q differ from vdr evaluate's built-in concat (512): the hint passes it
    assert "same_texts_as" not in rep["variants"]["concat-q"] and f"--rewrites concat-q={tmp_path / 'o' / 'variants' / 'concat-q.jsonl'}" in r.output
    cq = {d["_id"]: d["text"] for d in map(json.loads, (tmp_path / "o" / "variants" / "concat-q.jsonl").read_text().splitlines())}
    assert cq[T + "1_3"] == "who was its architect"  # 4 question tokens: the whole history goes, the question stays


# --------------------------------------------------------------------------------------------- rewrite spelling


def test_convsearch_r1_rewrite_file(topiocqa, tmp_path):
    out, _ = topiocqa
    qs = load_queries(out / "queries.jsonl")
    f = tmp_path / "r1.jsonl"
    f.write_text("".join(json.dumps({"qid": q, "rewrite": f"rewrite of {q}"}) + "\n" for q in qs.ids()), encoding="utf-8")
    v = load_rewrites(f, qs, "convsearch-r1")
    assert v[T + "1_3"].text == "rewrite of topiocqa-dev_1_3"


def test_old_history_format_still_reads(tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_text(json.dumps({"_id": "a", "text": "q2", "history": ["q1"]}) + "\n", encoding="utf-8")
    assert load_queries(f)["a"] == Query("q2", ("q1",))
    f.write_text(json.dumps({"_id": "a", "text": "q2", "history": [{"question": "q1"}]}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="'history' must be a list") as e:
        load_queries(f)
    assert e.value.line == 1 and e.value.id == "a"


# --------------------------------------------------------------------------------------------- evaluate


def _pytrec(qrels: dict, run: dict) -> dict:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_3", "ndcg_cut_10", "recall_10", "P_3"})
    top3 = {q: dict(sorted(d.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:3]) for q, d in run.items()}
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top3)
    out = ev.evaluate(run)
    for q in out:
        out[q]["rr3"] = rr[q]["recip_rank"]
    return out


def _check_against_pytrec(res, qrels: dict, out):
    for r in res.runs:
        run = load_run(out / r.run_file).to_dict()
        ref = _pytrec(qrels, run)
        per_query = r.metrics.per_query
        assert set(per_query) == set(qrels)
        for q, m in per_query.items():
            if q not in ref:  # pytrec_eval skips a query with an empty ranking; trec_eval -c scores it 0
                assert not run.get(q) and all(m[k] == 0.0 for k in ("ndcg@3", "ndcg@10", "recall@10", "precision@3", "mrr@3"))
                continue
            assert m["ndcg@3"] == pytest.approx(ref[q]["ndcg_cut_3"], abs=1e-12)
            assert m["ndcg@10"] == pytest.approx(ref[q]["ndcg_cut_10"], abs=1e-12)
            assert m["recall@10"] == pytest.approx(ref[q]["recall_10"], abs=1e-12)
            assert m["precision@3"] == pytest.approx(ref[q]["P_3"], abs=1e-12)
            assert m["mrr@3"] == pytest.approx(ref[q]["rr3"], abs=1e-12)


def test_evaluate_converted_topiocqa_lexical_matches_pytrec_eval(topiocqa, tmp_path):
    from vdr.experiment.evaluation import evaluate

    out, report = topiocqa
    res_dir = tmp_path / "res"
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = evaluate(out, out=res_dir, backends="lexical,multimodal", k="3,10", depth=10, n_permutations=200, n_bootstrap=200,
                       progress=False, rewrites={n: v["file"] for n, v in report["variants"].items()})
    msgs = [str(x.message) for x in w if issubclass(x.category, VdrWarning)]
    assert any("1 judged passage(s) are not in the collection" in m and "'99'" in m for m in msgs)
    assert any("1 judged passage(s) are empty" in m and "'8'" in m for m in msgs)
    assert "multimodal" in res.skipped  # no model given; a passage corpus is refused anyway (test below)
    # concat-q holds the built-in concat's texts: evaluated once, under the first name (issue 24.5)
    assert [r.variant for r in res.runs] == ["original", "concat", "concat-qa"] and res.config["same_texts"] == {"concat-q": "concat"}
    jp = res.config["judged_passages"]
    assert jp["missing"] == ["99"] and jp["empty"] == ["8"] and jp["policy"].startswith("kept")
    assert res.config["corpus_kind"] == "passage" and res.versions["corpus_fingerprint"] == load_corpus(out).fingerprint
    qrels = load_qrels(out / "qrels.tsv").to_dict()
    _check_against_pytrec(res, qrels, res_dir)  # the missing and the empty passage stay in the denominators
    # 2_2 judges 5 and the missing 99: recall@10 can reach 1/2 only
    orig = next(r for r in res.runs if r.variant == "original")
    assert orig.metrics.per_query[T + "2_2"]["recall@10"] == 0.5
    # 1_3 alone ("who was its architect") matches no passage; with its history it finds passage 3
    concat_q = next(r for r in res.runs if r.variant == "concat")
    assert orig.metrics.per_query[T + "1_3"]["recall@10"] == 0.0 and concat_q.metrics.per_query[T + "1_3"]["recall@10"] == 1.0
    # compare and the report work on the results (read back)
    from vdr.results import Results

    back = Results.load(res_dir)
    assert back.corpus is not None and back.corpus.kind == "passage" and back.page_image("1") is None
    assert back.comparisons
    assert back.variants["original"][T + "1_3"].answers == ("Paris", EMPTY_ANSWER)  # answers of the history kept in results.json
    assert back.corpus.passage("3") == ("Eiffel Tower [SEP] Design", 'Gustave Eiffel\'s company "designed" the tower')
    with pytest.raises(KeyError):
        back.corpus.passage("99")
    from vdr.report.render import report as render_report

    paths = render_report(res_dir, top=2)
    html = paths.html.read_text(encoding="utf-8")
    assert "Eiffel Tower Design Gustave Eiffel&#x27;s company" in html or "Eiffel Tower Design Gustave Eiffel's company" in html
    assert "image missing" not in html and not any("image(s) missing" in w for w in paths.warnings)
    assert '<div class="psg" role="note">' in html and "missing psg" not in html  # passages as readable text (issue 27.4)


def test_evaluate_drop_missing_judged_is_labelled(topiocqa, tmp_path):
    from vdr.experiment.evaluation import evaluate

    out, _ = topiocqa
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = evaluate(out, out=tmp_path / "res", backends="lexical", k="3,10", depth=10, n_permutations=100, n_bootstrap=100,
                       progress=False, drop_missing_judged=True)
    jp = res.config["judged_passages"]
    assert jp["policy"].startswith("dropped") and jp["judgments_dropped"] == 2 and jp["queries_dropped"] == []
    qrels = load_qrels(out / "qrels.tsv").to_dict()
    del qrels[T + "2_2"]["99"], qrels[T + "2_1"]["8"]
    _check_against_pytrec(res, qrels, tmp_path / "res")
    assert next(r for r in res.runs if r.variant == "original").metrics.per_query[T + "2_2"]["recall@10"] == 1.0


def test_multimodal_refuses_a_passage_corpus(topiocqa):
    from vdr.retrieve.base import BackendUnavailable
    from vdr.retrieve.multimodal import MultimodalBackend

    out, _ = topiocqa
    b = MultimodalBackend.__new__(MultimodalBackend)
    with pytest.raises(BackendUnavailable, match="needs a page corpus.*passage corpus"):
        b.index(load_corpus(out))


def test_cli_evaluate_on_passages_with_drop_flag(topiocqa, tmp_path):
    from typer.testing import CliRunner

    from vdr.cli import app

    out, _ = topiocqa
    r = CliRunner().invoke(app, ["evaluate", str(out), "--backend", "lexical", "--k", "3,10", "--depth", "10", "-q",
                                 "--out", str(tmp_path / "res"), "--drop-missing-judged"])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "res" / "results.json").read_text())
    assert doc["config"]["judged_passages"]["judgments_dropped"] == 2


def test_topiocqa_gold_keyed_by_id_suffix_and_jsonl_dataset(tmp_path):
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(o) + "\n" for o in DATASET), encoding="utf-8")
    gold = [{"id": "topiocqa-dev_2_2", "positive_ctxs": [{"passage_id": 5}]}, {"id": "topiocqa-dev_1_1", "positive_ctxs": [{"passage_id": "1"}]}]
    (tmp_path / "g.json").write_text(json.dumps(gold), encoding="utf-8")
    r = convert_topiocqa(tmp_path / "d.jsonl", tmp_path / "g.json", tmp_path / "o")
    assert r["counts"]["queries"] == 2 and r["counts"]["dropped_without_gold"] == 3
    assert load_qrels(tmp_path / "o" / "qrels.tsv").to_dict() == {T + "1_1": {"1": 1}, T + "2_2": {"5": 1}}
    assert not (tmp_path / "o" / "passages.jsonl").exists()  # no collection given: queries and qrels only


def test_vdr_compare_on_passage_runs(topiocqa, tmp_path):
    """Runs over a passage corpus go through `vdr compare` like page runs (qrels and runs only)."""
    from typer.testing import CliRunner

    from vdr.cli import app
    from vdr.experiment.evaluation import evaluate

    out, report = topiocqa
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evaluate(out, out=tmp_path / "res", backends="lexical", k="3,10", depth=10, n_permutations=100, n_bootstrap=100, progress=False,
                 rewrites={"concat-qa": report["variants"]["concat-qa"]["file"]})
    runs = tmp_path / "res" / "runs"
    r = CliRunner().invoke(app, ["compare", str(out / "qrels.tsv"), f"raw={runs / 'lexical.original.trec'}",
                                 f"hist={runs / 'lexical.concat-qa.trec'}", "--k", "3,10", "--permutations", "100", "--bootstrap", "100",
                                 "--out", str(tmp_path / "cmp")])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "cmp" / "results.json").read_text())
    by = {x["variant"]: x["aggregate"] for x in doc["runs"]}
    res = json.loads((tmp_path / "res" / "results.json").read_text())
    ev = {x["variant"]: x["aggregate"] for x in res["runs"]}
    assert by["raw"]["ndcg@3"] == pytest.approx(ev["original"]["ndcg@3"]) and by["hist"]["recall@10"] == pytest.approx(ev["concat-qa"]["recall@10"])


def test_the_printed_evaluate_command_runs_as_printed(topiocqa, capsys):
    """Issue 35.8: `vdr convert`'s "evaluate with:" line is a command that runs (it names --out)."""
    import shlex

    from vdr.cli import main

    out, report = topiocqa
    argv = shlex.split(report["evaluate"])
    assert argv[:2] == ["vdr", "evaluate"] and argv[-2:] == ["--out", str(out / "results")]
    assert main(argv[1:] + ["--permutations", "10", "--bootstrap", "10", "-q"]) == 0, capsys.readouterr().err
    assert (out / "results" / "results.json").is_file()


def test_the_hint_without_a_converted_collection_names_the_corpus_to_give(tmp_path):
    from vdr.ingest.convert import _evaluate_hint

    out = tmp_path / "my data"  # a path with a space is quoted
    hint = _evaluate_hint(out, {}, "topiocqa", corpus=False)
    assert hint == (f"vdr evaluate CORPUS_DIR --queries '{out / 'queries.jsonl'}' --qrels '{out / 'qrels.tsv'}' --backend lexical"
                    f" --bm25-preset topiocqa --bm25-analyzer lucene --protocol convsearch --out '{out / 'results'}'")
