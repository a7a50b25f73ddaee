"""``vdr evaluate --backend-option BACKEND.KEY=VALUE``: every backend option of the API reachable from
the command line; ``--concat-max-tokens``; and an end-to-end TopiOCQA check through the CLI
(``vdr convert topiocqa`` then ``vdr evaluate --protocol convsearch``; issues 15 and 18.3)."""

from __future__ import annotations

import json

import pytest

import vdr.experiment.evaluation
from vdr.cli import main
from vdr.retrieve.budget import budget_config

from test_convert import COLLECTION, DATASET, GOLD


def _capture(monkeypatch) -> dict:
    seen: dict = {}

    def fake(corpus_dir=None, **kw):
        seen.update(kw, corpus_dir=corpus_dir)
        return None

    monkeypatch.setattr(vdr.experiment.evaluation, "evaluate", fake)
    return seen


def test_backend_options_reach_the_api(tmp_path, monkeypatch, capsys):
    seen = _capture(monkeypatch)
    rc = main(["evaluate", str(tmp_path), "-o", str(tmp_path / "r"), "--backend", "lexical,semantic,pyserini",
               "--backend-option", "semantic.long_text=truncate", "--backend-option", "semantic.passage_max_length=512",
               "--backend-option", "pyserini.index_dir=/path/to/lucene-index", "--backend-option", "lexical.max_query_tokens=null",
               "--backend-option", "lexical.k1=0.9", "--backend-option", "lexical.stopwords=[\"a\", \"b\"]",
               "--backend-option", "semantic.normalize=false", "--concat-max-tokens", "64", "-q"])
    assert rc == 0, capsys.readouterr().err
    assert seen["backend_options"] == {
        "semantic": {"long_text": "truncate", "passage_max_length": 512, "normalize": False},
        "pyserini": {"index_dir": "/path/to/lucene-index"},
        "lexical": {"max_query_tokens": None, "k1": 0.9, "stopwords": ["a", "b"]},
    }
    assert type(seen["backend_options"]["semantic"]["passage_max_length"]) is int
    assert seen["concat_max_tokens"] == 64


def test_defaults_are_the_api_defaults(tmp_path, monkeypatch):
    import inspect

    defaults = {n: p.default for n, p in inspect.signature(vdr.experiment.evaluation.evaluate).parameters.items()}
    seen = _capture(monkeypatch)
    assert main(["evaluate", str(tmp_path), "-o", str(tmp_path / "r"), "-q"]) == 0
    assert seen["backend_options"] is None is defaults["backend_options"]
    assert seen["concat_max_tokens"] == defaults["concat_max_tokens"] == 512
    assert main(["evaluate", str(tmp_path), "-o", str(tmp_path / "r"), "--concat-max-tokens", "0", "-q"]) == 0
    assert seen["concat_max_tokens"] is None  # 0: no budget


@pytest.mark.parametrize("item, message", [
    ("nosuch.k1=0.9", "unknown backend 'nosuch'; known: multimodal, lexical"),
    ("pyserini.k1=0.9", "backend 'pyserini' is not among --backend lexical"),
    ("lexical=0.9", "takes BACKEND.KEY=VALUE"),
    ("lexical.k1", "takes BACKEND.KEY=VALUE"),
])
def test_bad_backend_option_is_a_clear_error(tmp_path, monkeypatch, capsys, item, message):
    seen = _capture(monkeypatch)
    rc = main(["evaluate", str(tmp_path), "-o", str(tmp_path / "r"), "--backend", "lexical", "--backend-option", item])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err
    assert not seen  # refused before evaluate


def test_twice_is_an_error(tmp_path, monkeypatch, capsys):
    _capture(monkeypatch)
    rc = main(["evaluate", str(tmp_path), "-o", str(tmp_path / "r"), "--backend", "lexical",
               "--backend-option", "lexical.k1=1", "--backend-option", "lexical.k1=2"])
    assert rc == 2 and "lexical.k1 given twice" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------- real runs


@pytest.fixture
def converted(tmp_path, capsys):
    """``vdr convert topiocqa`` through the CLI on a hand-written TopiOCQA set (8 passages, 4 judged turns)."""
    (tmp_path / "full_wiki_segments.tsv").write_text(COLLECTION, encoding="utf-8")
    (tmp_path / "dev.json").write_text(json.dumps(DATASET), encoding="utf-8")
    (tmp_path / "dev_gold.json").write_text(json.dumps(GOLD), encoding="utf-8")
    out = tmp_path / "topiocqa"
    rc = main(["convert", "topiocqa", "--collection", str(tmp_path / "full_wiki_segments.tsv"), "--dataset",
               str(tmp_path / "dev.json"), "--gold", str(tmp_path / "dev_gold.json"), "--out", str(out), "-q"])
    cap = capsys.readouterr()
    assert rc == 0 and "4 queries" in cap.out and "gold entry has no dataset turn" in cap.err
    return out


def test_unknown_key_is_refused_by_the_factory(converted, tmp_path, capsys):
    rc = main(["evaluate", str(converted), "-o", str(tmp_path / "r"), "--backend", "lexical", "--backend-option", "lexical.k3=1",
               "--permutations", "10", "--bootstrap", "10", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "unknown BM25 option(s) ['k3']" in err and "max_query_tokens" in err


def test_lexical_k1_option_recorded(converted, tmp_path, capsys):
    rc = main(["evaluate", str(converted), "-o", str(tmp_path / "r"), "--backend", "lexical", "--backend-option", "lexical.k1=0.9",
               "--backend-option", "lexical.max_query_tokens=null", "--permutations", "10", "--bootstrap", "10", "-q"])
    assert rc == 0, capsys.readouterr().err
    cfg = json.loads((tmp_path / "r" / "results.json").read_text())["config"]["backend_config"]["lexical"]
    assert cfg["k1"] == 0.9 and cfg["b"] == 0.75 and cfg["query_budget"]["max_query_tokens"] is None


def test_topiocqa_end_to_end_through_the_cli(converted, tmp_path, capsys):
    out = tmp_path / "R"
    rc = main(["evaluate", str(converted), "--backend", "lexical", "--bm25-preset", "topiocqa", "--bm25-analyzer", "lucene",
               "--protocol", "convsearch", "--rewrites", f"concat-q={converted / 'variants' / 'concat-q.jsonl'}",
               "--permutations", "10", "--bootstrap", "10", "--out", str(out)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    header = next(ln for ln in cap.out.splitlines() if "mrr@3" in ln)
    cols = header.split()
    assert cols[:7] == ["backend", "variant", "mrr@3", "ndcg@3", "recall@10", "recall@100", "rr_full"]
    assert cols[7] == "queries"  # the short header; the long name is in the notes (and the HTML title)
    assert "rr_full (paper-compatible: ConvSearch-R1 code): averaged over" in cap.out
    doc = json.loads((out / "results.json").read_text())
    cfg = doc["config"]
    lex = cfg["backend_config"]["lexical"]
    assert (lex["k1"], lex["b"], lex["preset"]["name"], lex["analyzer"]) == (0.9, 0.4, "topiocqa", "lucene")
    assert lex["query_budget"] == budget_config(512)
    assert cfg["primary_metric"] == "mrr@3" and cfg["table_metrics"][-1] == "rr_full" and cfg["protocol"]["name"] == "convsearch"
    # the built-in concat and vdr convert's concat-q are the same texts (questions only, one budget
    # function): evaluated once, under the first name (issue 24.5)
    assert cfg["variants"] == ["original", "concat"] and cfg["same_texts"] == {"concat-q": "concat"}
    assert cfg["concat"]["max_query_tokens"] == 512 and cfg["concat"]["num_queries_cut"] == 0
    assert {r["variant"] for r in doc["runs"]} == {"original", "concat"}
    searches = doc["backend_reports"]["lexical"]["searches"]
    assert searches["concat"]["max_query_tokens"] == 512 and searches["concat"]["num_queries_cut"] == 0


def test_serve_backend_options_reach_the_backend(tmp_path, monkeypatch, capsys):
    """``vdr serve --backend-option``: parsed as for evaluate, handed to build_backend, which builds
    the lexical backend with them (the Rewarder's own word budget stays: max_query_tokens None)."""
    import vdr.rewards.serve
    from vdr.rewards.rewarder import build_backend

    seen: dict = {}
    monkeypatch.setattr(vdr.rewards.serve, "serve", lambda corpus_dir, **kw: seen.update(kw))
    rc = main(["serve", str(tmp_path), "--qrels", str(tmp_path / "q.tsv"), "--backend", "hybrid",
               "--backend-option", "lexical.k1=0.9", "--backend-option", "lexical.analyzer=lucene",
               "--backend-option", "hybrid.rrf_k=10", "-q"])
    assert rc == 0, capsys.readouterr().err
    assert seen["backend_options"] == {"lexical": {"k1": 0.9, "analyzer": "lucene"}, "hybrid": {"rrf_k": 10}}
    rc = main(["serve", str(tmp_path), "--qrels", str(tmp_path / "q.tsv"), "--backend-option", "semantic.long_text=truncate", "-q"])
    assert rc == 2 and "not among --backend lexical" in capsys.readouterr().err
    be = build_backend("lexical", {"d1": "quick fox", "d2": "lazy dog"}, {"backend_options": {"lexical": {"k1": 0.9, "b": 0.4}}})
    assert (be.config["k1"], be.config["b"]) == (0.9, 0.4)
    assert be.search({"q": "fox"}, depth=5)["q"].keys() == {"d1"}
