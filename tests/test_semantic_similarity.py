"""The semantic backend scores with the similarity the model declares (issue 34 item 5).

Tiny sentence-transformers models are built locally (:mod:`tiny_st`) and declare
``similarity_fn_name`` in ``config_sentence_transformers.json`` as sentence-transformers saves it
(cosine, dot, euclidean, manhattan; none). Expected scores come from the tool itself:
``SentenceTransformer.similarity`` of the installed sentence-transformers on its own
``encode_query`` / ``encode_document`` vectors; vdr's run must hold those scores (to the float16
store's precision) in the same order, record the similarity in ``config`` and in results.json, and
take an override (``similarity`` option, ``--backend-option semantic.similarity=dot``).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from tiny_st import build_tiny_st

pytestmark = pytest.mark.model

# The tiny model's text vector is the mean of its tokens' LayerNorm-ed word vectors ([CLS] and [SEP]
# count as zeros), so a page repeating a word has a longer vector than a short page: p7 has the
# largest dot product with q4 ("wolf fox"), p2 the largest cosine (it is q4's text)
PAGES = {"p1": "wolf", "p2": "wolf fox", "p3": "wolf fox dog cat", "p4": "river city", "p5": "alpha beta gamma delta", "p6": "fox",
         "p7": "wolf wolf wolf wolf wolf wolf fox"}
QUERIES = {"q1": "wolf fox dog", "q2": "fox", "q3": "river wolf", "q4": "wolf fox"}
DECLARED = ("cosine", "dot", "euclidean", "manhattan", None)


def _declare(folder, name):
    """Write ``similarity_fn_name`` into the model's config as sentence-transformers saves it."""
    cfg_path = folder / "config_sentence_transformers.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    cfg.pop("similarity_fn_name", None)
    if name is not None:
        cfg["similarity_fn_name"] = name
    cfg_path.write_text(json.dumps(cfg), encoding="utf-8")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """``{declared similarity or None: model folder}``: the same tiny weights, each declaring one."""
    pytest.importorskip("sentence_transformers")
    root = tmp_path_factory.mktemp("similarity")
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in DECLARED:
            folder = build_tiny_st(root / str(name), dim=64, seed=3)
            _declare(folder, name)
            out[name] = folder
    return out


def _st(folder):
    from sentence_transformers import SentenceTransformer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SentenceTransformer(str(folder), device="cpu")


def _backend(folder, **kw):
    from vdr.retrieve.semantic import DenseBackend

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return DenseBackend(str(folder), device="cpu", query_runtime="torch", **kw)


def _expected(st, similarity=None) -> dict[str, dict[str, float]]:
    """``{qid: {pid: score}}`` from sentence-transformers' own similarity of its own vectors."""
    if similarity is not None:
        st.similarity_fn_name = similarity
    q = st.encode_query(list(QUERIES.values()), convert_to_tensor=True)
    p = st.encode_document(list(PAGES.values()), convert_to_tensor=True)
    s = st.similarity(q, p).numpy().astype(np.float64)
    return {qid: dict(zip(PAGES, s[i])) for i, qid in enumerate(QUERIES)}


def _check_run(run, expected):
    for qid, want in expected.items():
        got = run[qid]
        assert set(got) == set(PAGES)
        scale = max(abs(w) for w in want.values())
        for pid, w in want.items():  # stored rows are float16 (11 significant bits): scores agree to its precision
            assert got[pid] == pytest.approx(w, abs=2e-3 * scale), (qid, pid)
        order = sorted(want, key=lambda p: (-want[p], p))
        gaps = np.diff(sorted(want.values()))
        if gaps.min() > 1e-2:  # no near-tie: the order is the tool's order
            assert list(got) == order or sorted(got, key=lambda p: -got[p]) == order


@pytest.mark.parametrize("declared", DECLARED)
def test_scores_are_the_declared_similarity_of_sentence_transformers(models, declared):
    st = _st(models[declared])
    assert st.similarity_fn_name == (declared or "cosine")
    b = _backend(models[declared])
    want_name = declared or "cosine"
    assert b.similarity == want_name and b.config["similarity"] == want_name
    assert b.normalize is (want_name == "cosine") and b.config["normalize"] is (want_name == "cosine")
    assert b.config["similarity_source"] == (
        f"the model's config_sentence_transformers.json (similarity_fn_name {declared!r})" if declared is not None
        else "sentence-transformers' default (the model declares no similarity_fn_name)")
    b.index(PAGES)
    _check_run(b.search(QUERIES, depth=len(PAGES)), _expected(st))


def test_the_similarity_decides_the_ranking(models):
    """Not a formality: for q4 the model's declared dot product ranks p7 first and cosine ranks p2
    first (sentence-transformers' own scores); vdr follows the declaration, and the option."""
    dot = _expected(_st(models["dot"]))["q4"]
    cos = _expected(_st(models["dot"]), "cosine")["q4"]
    assert max(dot, key=dot.get) == "p7" and max(cos, key=cos.get) == "p2"
    for opt, top in ((None, "p7"), ("cosine", "p2")):
        b = _backend(models["dot"], similarity=opt)
        b.index(PAGES)
        got = b.search({"q4": QUERIES["q4"]}, depth=3)["q4"]
        assert max(got, key=got.get) == top


@pytest.mark.parametrize("override", ["dot", "cosine", "euclidean", "manhattan", "dot_product"])
def test_the_option_overrides_the_declaration(models, override):
    name = "dot" if override == "dot_product" else override
    b = _backend(models["cosine"], similarity=override)
    assert b.similarity == name and b.config["similarity_source"] == "option similarity"
    b.index(PAGES)
    _check_run(b.search(QUERIES, depth=len(PAGES)), _expected(_st(models["cosine"]), name))


def test_option_errors_and_legacy_normalize(models):
    from vdr.errors import InputError

    with pytest.raises(InputError, match="similarity must be one of cosine, dot, euclidean, manhattan, got 'maxsim'"):
        _backend(models[None], similarity="maxsim")
    with pytest.raises(InputError, match="similarity=dot and normalize=true contradict"):
        _backend(models[None], similarity="dot", normalize=True)
    with pytest.raises(InputError, match="search='faiss' scores inner products only"):
        _backend(models["euclidean"], search="faiss")
    legacy = _backend(models["dot"], normalize=True)  # the legacy option still wins over the declaration
    assert legacy.similarity == "cosine" and legacy.config["similarity_source"] == "option normalize=true"


def test_results_json_records_the_similarity_and_the_cli_override(models, tmp_path, capsys):
    """``vdr evaluate`` through the CLI: results.json's backend config says "dot" for a model
    declaring dot, and ``--backend-option semantic.similarity=cosine`` changes it."""
    from cli_helpers import cli
    from rewards_fixtures import write_corpus

    corpus = write_corpus(tmp_path / "corpus", PAGES, QUERIES, {"q1": {"p3": 1}, "q2": {"p6": 1}, "q3": {"p4": 1}, "q4": {"p7": 1}})
    for opt, want in ((None, "dot"), ("cosine", "cosine")):
        out = tmp_path / f"res-{want}"
        extra = [] if opt is None else ["--backend-option", f"semantic.similarity={opt}"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rc, _out, err = cli(capsys, "evaluate", corpus, "--queries", corpus / "queries.jsonl", "--qrels", corpus / "qrels.tsv",
                                "--backend", "semantic", "--backend-option", f"semantic.model={models['dot']}",
                                "--backend-option", "semantic.query_runtime=torch", *extra, "--out", out, "-q")
        assert rc == 0, err
        doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
        found = [v for v in _walk(doc) if isinstance(v, dict) and v.get("backend") == "semantic" and "similarity" in v]
        assert found and {v["similarity"] for v in found} == {want}
        assert {v["normalize"] for v in found} == {want == "cosine"}
        run = {}
        for line in (out / "runs" / "semantic.original.trec").read_text(encoding="utf-8").splitlines():
            q, _, d, rank, *_ = line.split()
            run.setdefault(q, {})[int(rank)] = d
        assert run["q4"][1] == ("p7" if want == "dot" else "p2")  # the gold page p7 is first only under the declared dot


def _walk(x):
    yield x
    if isinstance(x, dict):
        for v in x.values():
            yield from _walk(v)
    elif isinstance(x, list):
        for v in x:
            yield from _walk(v)
