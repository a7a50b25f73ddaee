"""The optional ``pyserini`` backend (issue 15.3, 18.3).

Checks that need no Pyserini run everywhere (parameters, presets, Java discovery, the registry,
the unavailable message, the JsonCollection writer, ``import vdr`` staying light). The live tests
need Pyserini + pyjnius + Java 21+ and are skipped, with the reason, without them.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from vdr.errors import InputError
from vdr.retrieve import base
from vdr.retrieve import pyserini as ps
from vdr.retrieve.base import BackendUnavailable, BuildContext
from vdr.types import QuerySet

from shared_data import REPO_ROOT

REASON = ps.unavailable_reason()
live = pytest.mark.skipif(REASON is not None, reason=f"pyserini backend unavailable: {REASON}")

# issue 18.1's collection: a stopword-only passage has no indexed term (not in N or avgdl for Lucene)
CORPUS = {"foo": "foo", "dog": "dog", "baz": "baz", "qg": "quick god", "qf": "quick fox", "stop": "the of and"}
# ln(1 + (5 - 2 + 0.5) / (2 + 0.5)) * 1 / (1 + 1.5 * (0.25 + 0.75 * 2 / 1.4))  (k1 1.5, b 0.75, N 5, avgdl 7/5)
QUICK = math.log(2.4) / (1 + 1.5 * (0.25 + 0.75 * 2 / 1.4))


# --------------------------------------------------------------------------------------------- always


def test_golden_value():
    assert QUICK == pytest.approx(0.293570, abs=1e-6)


def test_presets_and_defaults():
    assert ps.PyseriniBackend(preset="topiocqa").config["k1"] == 0.9
    assert ps.PyseriniBackend(preset="topiocqa").config["b"] == 0.4
    c = ps.PyseriniBackend(preset="qrecc").config
    assert (c["k1"], c["b"], c["preset"]) == (0.82, 0.68, "qrecc")
    c = ps.PyseriniBackend().config
    assert (c["k1"], c["b"], c["threads"]) == (0.9, 0.4, 2)
    assert c["query_budget"]["max_query_tokens"] == 512
    assert ps.PyseriniBackend(k1=1.2, b=0.75, max_query_tokens=None).config["query_budget"]["max_query_tokens"] is None


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"preset": "bogus"}, "unknown BM25 preset"),
        ({"preset": "qrecc", "k1": 1.0}, "either preset"),
        ({"k1": -1}, "k1"),
        ({"b": 1.5}, "b must"),
        ({"threads": 0}, "threads"),
        ({"max_query_tokens": 0}, "max_query_tokens"),
        ({"stemmer": "snowball"}, "stemmer"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(InputError, match=match):
        ps.PyseriniBackend(**kwargs)


def test_index_dir_checked(tmp_path):
    with pytest.raises(InputError, match="no such index folder"):
        ps.PyseriniBackend(index_dir=tmp_path / "missing")
    (tmp_path / "notanindex").mkdir()
    with pytest.raises(InputError, match="not a Lucene index"):
        ps.PyseriniBackend(index_dir=tmp_path / "notanindex")


def test_registry_and_options():
    assert "pyserini" in base.available_backends()
    factory = base.backend_factory("pyserini")
    assert factory is ps.build
    b = factory(BuildContext("pyserini", {"preset": "qrecc", "threads": 3}))
    assert (b.config["k1"], b.threads) == (0.82, 3)
    with pytest.raises(InputError, match="unknown pyserini option"):
        factory(BuildContext("pyserini", {"k3": 1}))


def _fake_jdk(root: Path, name: str, version: str) -> Path:
    home = root / name
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text("#!/bin/sh\n")
    (home / "release").write_text(f'JAVA_VERSION="{version}"\n')
    return home


def test_find_java_prefers_java_home_then_newest(tmp_path, monkeypatch):
    old = _fake_jdk(tmp_path, "jdk17", "17.0.15")
    new = _fake_jdk(tmp_path, "jdk25", "25.0.1")
    _fake_jdk(tmp_path, "jdk21", "21.0.4")
    monkeypatch.setattr(ps, "JVM_DIRS", (tmp_path,))
    monkeypatch.setattr(ps.shutil, "which", lambda _: None)
    monkeypatch.setenv("JAVA_HOME", str(old))  # too old: the newest JDK found is used
    assert ps.find_java() == (new, 25)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk21"))
    assert ps.find_java() == (tmp_path / "jdk21", 21)
    monkeypatch.delenv("JAVA_HOME")
    assert ps.find_java(min_major=26) is None
    assert ps._java_major(_fake_jdk(tmp_path, "jdk8", "1.8.0_402")) == 8


def test_unavailable_message(monkeypatch):
    monkeypatch.setattr(ps.importlib.util, "find_spec", lambda name: None)
    msg = ps.unavailable_reason()
    assert "pip install 'vdr[pyserini]'" in msg and "pyserini" in msg
    with pytest.raises(BackendUnavailable, match=r"vdr\[pyserini\]"):
        ps.PyseriniBackend().index(CORPUS)


def test_no_java_message(monkeypatch):
    monkeypatch.setattr(ps.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(ps, "find_java", lambda min_major=21: None)
    assert "Java 21+" in ps.unavailable_reason()


def test_search_before_index():
    with pytest.raises(InputError, match="call index"):
        ps.PyseriniBackend().search({"q": "x"}, 10)


def test_json_collection_streams_shards(tmp_path):
    corpus = {f"p{i}": ("" if i == 3 else f"text {i}") for i in range(7)}
    n, empty = ps.write_json_collection(corpus, tmp_path, shard=3)
    assert (n, empty) == (7, 1)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["docs-00000.jsonl", "docs-00001.jsonl", "docs-00002.jsonl"]
    rows = [json.loads(line) for f in files for line in (tmp_path / f).read_text().splitlines()]
    assert rows[0] == {"id": "p0", "contents": "text 0"} and rows[3] == {"id": "p3", "contents": ""} and len(rows) == 7


def test_import_vdr_does_not_import_pyserini():
    code = "import sys, vdr, vdr.retrieve.base; print(any(m in sys.modules for m in ('pyserini', 'jnius')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------------------------- live


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if REASON is not None:
        pytest.skip(f"pyserini backend unavailable: {REASON}")
    cache = tmp_path_factory.mktemp("cache")
    b = ps.PyseriniBackend(k1=1.5, b=0.75, cache_dir=cache, index_threads=1)
    b.index(CORPUS)
    yield b, cache
    b.close()


@live
@pytest.mark.slow
def test_live_scores_issue_18_1(built):
    b, _ = built
    assert b.report["cache"]["hit"] is False
    assert b.report["index"]["num_written"] == 6 and b.report["index"]["num_docs"] == 6
    run = b.search(QuerySet.from_texts({"q": "quick", "s": "the"}), 10)
    assert set(run["q"]) == {"qg", "qf"}
    for pid in ("qg", "qf"):  # Lucene's float32 arithmetic and quantised norms: close, not bit-equal
        assert run["q"][pid] == pytest.approx(QUICK, abs=1e-4)
    # a tie: Anserini rounds to 4 decimals and ranks by docid ascending, the later one 1e-6 lower
    assert run["q"]["qf"] == pytest.approx(round(run["q"]["qf"], 4), abs=1e-7)
    assert run["q"]["qf"] - run["q"]["qg"] == pytest.approx(1e-6, abs=1e-7)
    assert dict(run["s"]) == {}  # stopword-only query: in the run, empty, counted
    rep = b.report["searches"]["original"]
    assert rep["num_queries_without_hits"] == 1 and rep["queries_without_hits"] == ["s"] and rep["num_failed"] == 0


@live
@pytest.mark.slow
def test_live_budget_and_counted_failure(built, tmp_path):
    b, cache = built
    long = " ".join(f"w{i}" for i in range(1500)) + " quick"  # 1,501 distinct terms > 1,024 clauses
    run = b.search({"long": long, "q": "quick"}, 10)
    rep = b.report["searches"]["original"]
    assert rep["num_queries_cut"] == 1 and rep["queries_cut"] == ["long"] and rep["num_failed"] == 0
    assert set(run["long"]) == {"qg", "qf"}  # the budget kept the question at the end
    nobudget = ps.PyseriniBackend(k1=1.5, b=0.75, cache_dir=cache, max_query_tokens=None)
    nobudget.index(CORPUS)
    assert nobudget.report["cache"]["hit"] is True
    run = nobudget.search({"long": long, "q": "quick"}, 10)
    rep = nobudget.report["searches"]["original"]
    assert list(run) == ["long", "q"] and dict(run["long"]) == {}  # never missing from the run
    assert rep["num_failed"] == 1 and "maxClauseCount" in rep["failed"]["long"]
    assert set(run["q"]) == {"qg", "qf"}


@live
@pytest.mark.slow
def test_live_existing_index_dir(built):
    b, _ = built
    folder = Path(b.report["cache"]["path"])
    other = ps.PyseriniBackend(index_dir=folder, k1=1.5, b=0.75)
    other.index({"only": "one passage"})
    assert other.report["index"]["num_docs"] == 6 and "6 documents, the corpus 1" in other.report["index"]["warning"]
    run = other.search({"q": "quick fox"}, 1)
    assert list(run["q"]) == ["qf"]
