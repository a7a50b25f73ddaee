"""Smoke test of ``benchmarks/textscale.py`` (issue 15 Targets) at 2,000 passages: one JSON line
with every key, sane values. Pyserini is left out (``--no-pyserini``: its JVM start alone takes
longer than this test); its keys are then ``null`` with the reason."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "textscale.py"
sys.path.insert(0, str(SCRIPT.parent))


def test_synthetic_corpus_is_deterministic_and_streams():
    import textscale

    c = textscale.SyntheticCorpus(25_000, seed=3)
    batches = list(c.iter_texts(7_000))
    assert [len(i) for i, _ in batches] == [7_000, 7_000, 7_000, 4_000]
    ids = [i for b, _ in batches for i in b]
    assert ids == c.ids() and ids[0] == "p0" and ids[-1] == "p24999"
    again = list(textscale.SyntheticCorpus(25_000, seed=3).iter_texts(10_000))
    assert [t for _, ts in batches for t in ts] == [t for _, ts in again for t in ts]
    lengths = [len(t.split()) for _, ts in batches for t in ts]
    assert min(lengths) >= 40 and max(lengths) <= 80 and 58 < sum(lengths) / len(lengths) < 62
    words = [w for t in batches[0][1] for w in t.split()]
    share = words.count("a") / len(words)  # Zipf rank 1: 1 / H(50,000) = 0.0884
    assert share == pytest.approx(1 / sum(1 / r for r in range(1, 50_001)), rel=0.03)
    assert words.count("a") > 20 * words.count("with") > 0  # rank 33: 33x rarer than rank 1
    q = textscale.make_queries(10, seed=3)
    assert len(q) == 10 and all(3 <= len(t.split()) <= 5 for t in q.values())
    assert textscale.overlap({"a": ["x", "y"], "b": []}, {"a": ["y", "z"], "b": []}) == pytest.approx(0.75)
    assert textscale.top_equal_share({"a": ["x", "y"], "b": ["y", "x"], "c": []}, {"a": ["x", "y", "z"], "b": ["x", "y"], "c": []}, k=2) == pytest.approx(2 / 3)


@pytest.mark.slow
def test_textscale_small_run():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--passages", "2000", "--queries", "200", "--no-pyserini"],
                          capture_output=True, text=True, timeout=300, cwd=SCRIPT.parents[1])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["passages"] == 2000 and res["queries"] == 200
    for key in ("bm25_build_s", "bm25_build_peak_rss_gib", "bm25_queries_per_s", "dense_search_peak_rss_gib"):
        assert res[key] > 0, key
    assert res["bm25_build_peak_rss_gib"] < 2
    for key in ("pyserini_build_s", "pyserini_queries_per_s", "top100_overlap_vs_pyserini", "top10_equal_share_vs_pyserini"):
        assert res[key] is None
    assert "--no-pyserini" in res["pyserini_skipped"]
