"""Per-backend variants (issue 37.1): ``--rewrites NAME@BACKEND=FILE`` feeds each backend its own
rewriter's file, and the variant is one row per backend whose numbers are those of its own file alone."""

from __future__ import annotations

import json

import pytest

import vdr
from vdr.errors import InputError, VdrWarning
from vdr.experiment.inputs import split_backend_rewrites



def test_split_backend_rewrites():
    plain, per = split_backend_rewrites({"kw": "a", "rl@lexical": "b", "rl@multimodal": "c", "x@semantic": "d", "x": "e"})
    assert plain == {"kw": "a"}
    assert per == {"rl": {"lexical": "b", "multimodal": "c"}, "x": {"semantic": "d", "*": "e"}}
    for bad in ("@lexical", "rl@", "bad/name@lexical"):
        with pytest.raises(InputError):
            split_backend_rewrites({bad: "f"})


def _values(res, backend, variant, metric="ndcg@3"):
    """The variant's per-query metric and its run's scores (each page's), on ``backend``."""
    run = res.run(backend, variant).ranking
    return {q: (v[metric], dict(run[q])) for q, v in res.per_query(backend, variant).items()}


@pytest.mark.model
def test_each_backend_gets_its_own_file(served_setup, tmp_path):  
    root = served_setup["root"]
    common = dict(queries=root / "q.jsonl", qrels=root / "qrels.tsv", backends="multimodal,lexical", model=served_setup["model"],
                  device="cpu", store=root / "store", progress=False, n_permutations=200, n_bootstrap=200)
    res = vdr.evaluate(root / "corpus", out=tmp_path / "a", serve_as=["binary"],
                       rewrites={"kw": root / "kw.jsonl", "rl@lexical": root / "kw.jsonl", "rl@multimodal": root / "q.jsonl"}, **common)
    # lexical's rl is its file (the keyword rewrites) alone; multimodal's and its served system's are the originals' file
    assert _values(res, "lexical", "rl") == _values(res, "lexical", "kw")
    assert _values(res, "multimodal", "rl") == _values(res, "multimodal", "original")
    assert _values(res, "multimodal-binary", "rl") == _values(res, "multimodal-binary", "original")
    assert _values(res, "lexical", "rl") != _values(res, "lexical", "original")
    data = json.loads((tmp_path / "a" / "results.json").read_text())
    pbv = data["config"]["per_backend_variants"]["rl"]
    assert pbv["files"] == {"lexical": str(root / "kw.jsonl"), "multimodal": str(root / "q.jsonl")}
    assert pbv["fed"] == {"multimodal": str(root / "q.jsonl"), "lexical": str(root / "kw.jsonl"), "multimodal-binary": str(root / "q.jsonl")}
    # one comparison per backend and metric for the variant: counted once per backend in its Holm family
    rl = [c for c in data["comparisons"] if c["variant"] == "rl" and c["metric"] == "ndcg@3"]
    assert sorted(c["backend"] for c in rl) == ["lexical", "multimodal", "multimodal-binary"]
    assert all(len(c["holm_family"]) == len({f for f in c["holm_family"]}) for c in rl)
    # the reward of the lexical backend on the lexical rewriter's texts equals the evaluation, query by query
    from vdr.rewards import Rewarder, build_backend

    kw = vdr.load_queries(root / "kw.jsonl")
    ids = list(kw)
    rewards = Rewarder(build_backend("lexical", served_setup["corpus"]), vdr.load_qrels(root / "qrels.tsv"), depth=100).score(
        ids, [kw[q].text for q in ids], "ndcg@3")
    assert rewards == pytest.approx([_values(res, "lexical", "rl")[q][0] for q in ids], abs=1e-12)


@pytest.mark.model
def test_missing_and_unknown_backends(served_setup, tmp_path):  
    root = served_setup["root"]
    common = dict(queries=root / "q.jsonl", qrels=root / "qrels.tsv", progress=False, n_permutations=200, n_bootstrap=200)
    with pytest.raises(InputError, match="no backend 'semantic' runs"):
        vdr.evaluate(root / "corpus", out=tmp_path / "x", backends="lexical", rewrites={"rl@semantic": root / "kw.jsonl"}, **common)
    with pytest.warns(VdrWarning, match="has no file for multimodal"):
        res = vdr.evaluate(root / "corpus", out=tmp_path / "y", backends="lexical,multimodal", model=served_setup["model"], device="cpu",
                           store=root / "store", rewrites={"rl@lexical": root / "kw.jsonl"}, **common)
    assert {(r.backend, r.variant) for r in res.runs} == {("lexical", "original"), ("lexical", "rl"), ("multimodal", "original")}
    data = json.loads((tmp_path / "y" / "results.json").read_text())
    assert data["config"]["per_backend_variants"]["rl"]["fed"] == {"lexical": str(root / "kw.jsonl"), "multimodal": None}
    # a plain NAME=FILE feeds the backends without a file of their own
    res = vdr.evaluate(root / "corpus", out=tmp_path / "z", backends="lexical,multimodal", model=served_setup["model"], device="cpu",
                       store=root / "store", rewrites={"rl@lexical": root / "kw.jsonl", "rl": root / "q.jsonl"}, **common)
    assert _values(res, "multimodal", "rl") == _values(res, "multimodal", "original")
    assert _values(res, "lexical", "rl") != _values(res, "lexical", "original")
