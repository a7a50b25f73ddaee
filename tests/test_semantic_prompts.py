"""The semantic backend applies the prompts a model declares, as sentence-transformers does (issue 24, item 3).

Expected vectors come from the tool itself: ``SentenceTransformer.encode_query`` /
``encode_document`` of the installed sentence-transformers on tiny models built here that declare
prompts (``query`` + ``document``; the same with ``default_prompt_name``; a default prompt only;
E5-style ``passage``; a pooling that leaves prompt tokens out) or none. vdr's query vectors (torch
and ONNX Runtime paths) and page vectors must equal them to 1e-5; results.json records the
prompts applied; the prompts are part of the cache keys, and a model without prompts keeps its keys.
The end-to-end case is one where the prompt decides the ranking: 4 passages, nDCG@3 from vdr equal
to the nDCG@3 of the ranking by ``encode_query`` / ``encode_document`` vectors (computed here).
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from tiny_st import build_tiny_st

pytestmark = pytest.mark.model

TEXTS = ["river city", "alpha beta gamma", "wolf", "report revenue wind fox dog"]
QP, DP = "wolf fox ", "river mountain "  # prompts of words in the tiny vocabulary: they move the vectors
KINDS = {
    "query_document": dict(prompts={"query": QP, "document": DP}),
    "default_prompt_name": dict(prompts={"query": QP, "document": DP, "other": "cat "}, default_prompt_name="query"),
    "default_only": dict(prompts={"retrieval": QP}, default_prompt_name="retrieval"),
    "passage": dict(prompts={"query": QP, "passage": DP}),
    "prompt_not_pooled": dict(prompts={"query": QP, "document": DP}, include_prompt=False),
    "none": {},
}
#: the cache-key fields of a model without prompts, as before prompts were read (issue 24.3: unchanged)
NO_PROMPT_KEY = {"model", "weights", "max_seq_length", "passage_max_length", "long_text", "window", "stride", "normalize", "text",
                 "document_prompt", "dtype", "device_type", "dimension", "versions"}


def _hadamard(n: int) -> np.ndarray:
    h = np.ones((1, 1))
    while len(h) < n:
        h = np.block([[h, h], [h, -h]])
    return h


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """``{kind: model folder}``: the tiny model of :mod:`tiny_st`, each kind declaring other prompts."""
    pytest.importorskip("sentence_transformers")
    root = tmp_path_factory.mktemp("prompted")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the transformers load report of the hand-built BERT
        return {k: str(build_tiny_st(root / k, **kw)) for k, kw in KINDS.items()}


def _st(folder):
    from sentence_transformers import SentenceTransformer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SentenceTransformer(folder, device="cpu")


def _backend(folder, **kw):
    from vdr.retrieve.semantic import DenseBackend

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the E5-style model's warning is tested on its own
        return DenseBackend(folder, device="cpu", normalize=False, **kw)


def _runtimes():
    from importlib.util import find_spec

    onnx = find_spec("onnxruntime") is not None and find_spec("onnx") is not None
    return ["torch", pytest.param("onnx", marks=pytest.mark.skipif(not onnx, reason="onnxruntime / onnx not installed"))]


@pytest.mark.parametrize("runtime", _runtimes())
@pytest.mark.parametrize("kind", [k for k in KINDS if k != "prompt_not_pooled"])
def test_vectors_equal_encode_query_and_encode_document(models, kind, runtime, tmp_path):
    st = _st(models[kind])
    b = _backend(models[kind], query_runtime=runtime, cache_dir=tmp_path)
    assert b.config["query_runtime"].startswith("onnxruntime" if runtime == "onnx" else "torch")
    queries, _cut = b._encode_queries(TEXTS)  # the path search() takes (ONNX Runtime or torch)
    assert np.abs(queries - st.encode_query(TEXTS)).max() < 1e-5
    docs, _cut = b.encode(TEXTS, prompt=b.document_prompt, max_length=b.passage_max_length)  # the call index() makes
    assert np.abs(docs - st.encode_document(TEXTS)).max() < 1e-5
    b.index({f"d{i}": t for i, t in enumerate(TEXTS)})  # the stored rows (float16) are those vectors
    stored = dict(zip(b.page_ids, b.page_embeddings))
    want = st.encode_document(TEXTS)
    assert max(np.abs(stored[f"d{i}"] - want[i]).max() / np.abs(want[i]).max() for i in range(len(TEXTS))) < 1e-3


def test_the_prompts_applied_are_recorded(models):
    cfg = {k: _backend(models[k]).config for k in KINDS}
    assert (cfg["query_document"]["query_prompt"], cfg["query_document"]["document_prompt"]) == (QP, DP)
    # default_prompt_name does not reach the pages: encode_document applies the document prompt (issue 24.3)
    assert (cfg["default_prompt_name"]["query_prompt"], cfg["default_prompt_name"]["document_prompt"]) == (QP, DP)
    assert cfg["default_prompt_name"]["default_prompt_name"] == "query"
    assert cfg["default_prompt_name"]["model_prompts"] == {"query": QP, "document": DP, "other": "cat "}
    for k in ("query_document", "default_prompt_name"):
        assert cfg[k]["prompt_sources"] == {
            "query": "the model's prompts['query'] (as encode_query)",
            "document": "the model's prompts['document'] (as encode_document: first of document, passage, corpus)"}
    assert (cfg["none"]["query_prompt"], cfg["none"]["document_prompt"], cfg["none"]["model_prompts"]) == ("", "", {})
    assert cfg["prompt_not_pooled"]["prompt_in_pooling"] is False and cfg["none"]["prompt_in_pooling"] is True


def test_each_kind_applies_what_sentence_transformers_applies(models):
    """The recorded prompt strings are the ones encode_query / encode_document prepend: the vector
    of ``prompt + text`` encoded without a prompt equals encode_query(text)."""
    for kind in KINDS:
        if kind == "prompt_not_pooled":
            continue
        st, cfg = _st(models[kind]), _backend(models[kind]).config
        for side, enc in (("query", st.encode_query), ("document", st.encode_document)):
            plain = st.encode([cfg[f"{side}_prompt"] + t for t in TEXTS], prompt="")
            assert np.abs(plain - enc(TEXTS)).max() < 1e-6, (kind, side)


def test_a_pooling_without_prompt_tokens_is_encoded_by_torch_alike(models, tmp_path):
    st = _st(models["prompt_not_pooled"])
    b = _backend(models["prompt_not_pooled"], cache_dir=tmp_path)  # auto: the export would pool the prompt: torch
    assert b.config["query_runtime"] == "torch" and "pooling" in b.config["query_runtime_note"]
    queries, _ = b._encode_queries(TEXTS)
    assert np.abs(queries - st.encode_query(TEXTS)).max() < 1e-5
    docs, _ = b.encode(TEXTS, prompt=b.document_prompt, max_length=b.passage_max_length)
    assert np.abs(docs - st.encode_document(TEXTS)).max() < 1e-5
    pooled = st.encode([QP + t for t in TEXTS], prompt="")  # the prompt's tokens pooled: another vector
    assert np.abs(queries - pooled).max() > 1e-3
    assert b._vector_settings()["prompt_in_pooling"] is False


def test_passage_prompt_behind_an_empty_document_prompt_warns(models):
    from vdr.errors import VdrWarning
    from vdr.retrieve.semantic import DenseBackend

    with pytest.warns(VdrWarning, match=r"prompts\['passage'\]='river mountain '.*semantic\.document_prompt='river mountain '"):
        b = DenseBackend(models["passage"], device="cpu")
    assert b.document_prompt == "" and b.query_prompt == QP


def test_overrides(models):
    from vdr.errors import InputError

    st = _st(models["default_prompt_name"])
    b = _backend(models["default_prompt_name"], query_runtime="torch", query_prompt="", document_prompt="cat ")
    assert (b.config["query_prompt"], b.config["document_prompt"]) == ("", "cat ")
    assert b.config["prompt_sources"] == {"query": "option query_prompt", "document": "option document_prompt"}
    assert np.abs(b._encode_queries(TEXTS)[0] - st.encode_query(TEXTS, prompt="")).max() < 1e-5
    docs, _ = b.encode(TEXTS, prompt=b.document_prompt)
    assert np.abs(docs - st.encode_document(TEXTS, prompt="cat ")).max() < 1e-5
    named = _backend(models["default_prompt_name"], query_runtime="torch", prompt_name="other")
    assert named.query_prompt == "cat " and named.document_prompt == DP
    assert named.config["prompt_sources"]["query"] == "option prompt_name='other': the model's prompts['other']"
    assert np.abs(named._encode_queries(TEXTS)[0] - st.encode_query(TEXTS, prompt_name="other")).max() < 1e-5
    with pytest.raises(InputError, match=r"prompt_name 'nosuch' is not a prompt of .*; it declares \['document', 'other', 'query'\]"):
        _backend(models["default_prompt_name"], prompt_name="nosuch")
    with pytest.raises(InputError, match="give query_prompt or prompt_name, not both"):
        _backend(models["default_prompt_name"], prompt_name="other", query_prompt="x ")


def test_overrides_from_the_command_line():
    from vdr.retrieve.options import SemanticOptions, check_options

    o = check_options(SemanticOptions, {"query_prompt": "query: ", "document_prompt": '""', "prompt_name": "null"}, backend="semantic",
                      strings=True)
    assert (o.query_prompt, o.document_prompt, o.prompt_name) == ("query: ", "", None)
    assert check_options(SemanticOptions, {"prompt_name": "s2p_query"}, backend="semantic", strings=True).prompt_name == "s2p_query"


def test_prompts_are_in_the_cache_keys_and_a_model_without_keeps_its_keys(models, tmp_path):
    corpus = {f"d{i}": t for i, t in enumerate(TEXTS)}
    plain = _backend(models["none"], cache_dir=tmp_path)
    assert set(plain._vector_settings()) == NO_PROMPT_KEY  # no new field: the cache of a model without prompts still hits
    prompted = _backend(models["query_document"], cache_dir=tmp_path)
    assert prompted._vector_settings()["document_prompt"] == DP
    assert prompted._vector_settings()["model_prompts"] == {"prompts": {"query": QP, "document": DP}, "default_prompt_name": None}
    prompted.index(corpus)
    assert prompted.report["cache"]["hit"] is False and prompted.report["page_forward_passes"] == len(TEXTS)
    again = _backend(models["query_document"], cache_dir=tmp_path)
    again.index(corpus)
    assert again.report["cache"]["hit"] is True and again.report["page_forward_passes"] == 0
    other = _backend(models["query_document"], cache_dir=tmp_path, document_prompt="")
    other.index(corpus)
    assert other.report["cache"]["hit"] is False  # another document prompt: other vectors, another entry
    first = prompted.search({"q": "wolf"}, 2)
    q_other = _backend(models["query_document"], cache_dir=tmp_path, query_prompt="", query_runtime=prompted.options.query_runtime)
    q_other.index(corpus)
    assert q_other.report["cache"]["hit"] is True  # the page vectors do not depend on the query prompt
    q_other.search({"q": "wolf"}, 2)
    assert q_other.report["searches"]["original"]["query_cache_hit"] is False  # another query prompt: not the cached vector
    assert prompted.search({"q": "wolf"}, 2) == first


# ------------------------------------------------------------------------------------------ end to end

CASE_TEXTS = {  # page -> text; with the prompts B (no "wolf") overtakes D and C, without them it is last
    "A": "wolf fox dog cat",
    "B": "bird",
    "C": "wolf fish fish fish fish fish fish fish",
    "D": "wolf tiger tiger tiger",
}
CASE_QRELS = {"A": 1, "B": 1}


@pytest.fixture(scope="module")
def case_model(tmp_path_factory):
    """A 16-dimensional tiny model whose words are orthogonal Hadamard rows, the two prompt words
    (``qtag``, ``dtag``) sharing one: the prompts add a query-document similarity that favours short pages."""
    pytest.importorskip("sentence_transformers")
    h = _hadamard(16)
    words = ["qtag", "wolf", "fox", "dog", "cat", "bird", "fish", "tiger"]
    vectors = {w: h[i + 1].tolist() for i, w in enumerate(words)}
    vectors["dtag"] = vectors["qtag"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return str(build_tiny_st(tmp_path_factory.mktemp("case") / "m", dim=16, vectors=vectors,
                                 prompts={"query": "qtag ", "document": "dtag "}))


def _ndcg3(scores: dict[str, float], qrels: dict[str, int]) -> float:
    """nDCG@3 (trec_eval ndcg_cut.3: gain = grade, discount log2(rank + 1)) of pages ranked by
    score, ties by page id descending (trec_eval's order)."""
    ranked = sorted(scores, key=lambda p: (-scores[p], tuple(-ord(c) for c in p)))[:3]
    dcg = sum(qrels.get(p, 0) / math.log2(r + 2) for r, p in enumerate(ranked))
    ideal = sum(g / math.log2(r + 2) for r, g in enumerate(sorted(qrels.values(), reverse=True)[:3]))
    return dcg / ideal


def _case_inputs(root):
    from tiny_models import make_text_inputs

    ids = list(CASE_TEXTS)
    d = make_text_inputs(root, [(56, 56)] * 4, [CASE_TEXTS[p] for p in ids], {"q1": "wolf"}, {"q1": "wolf"},
                         {"q1": {f"doc.pdf#{ids.index(p) + 1}": g for p, g in CASE_QRELS.items()}})
    return d, {f"doc.pdf#{i + 1}": p for i, p in enumerate(ids)}


def test_the_prompt_decides_the_ranking_end_to_end(case_model, tmp_path):
    """vdr evaluate's nDCG@3 equals the nDCG@3 of the ranking encode_query / encode_document give;
    without the prompts (as vdr did before) the ranking and the value differ."""
    from vdr import evaluate

    st = _st(case_model)
    ids = list(CASE_TEXTS)
    q = st.encode_query(["wolf"], normalize_embeddings=True)[0]
    docs = st.encode_document([CASE_TEXTS[p] for p in ids], normalize_embeddings=True)
    want = _ndcg3(dict(zip(ids, (docs @ q).tolist())), CASE_QRELS)
    q0 = st.encode(["wolf"], prompt="", normalize_embeddings=True)[0]
    docs0 = st.encode([CASE_TEXTS[p] for p in ids], prompt="", normalize_embeddings=True)
    unprompted = _ndcg3(dict(zip(ids, (docs0 @ q0).tolist())), CASE_QRELS)
    assert want == pytest.approx(1.0) and unprompted < 0.7  # the prompts decide: B ranks 2nd with them, last without

    d, names = _case_inputs(tmp_path / "in")
    got = {}
    for label, opts in (("declared", {}), ("no prompts", {"query_prompt": "", "document_prompt": ""})):
        res = evaluate(d["corpus"], queries=d["queries"], qrels=d["qrels"], out=tmp_path / label, backends="semantic", device="cpu",
                       backend_options={"semantic": {"model": case_model, **opts}}, k=(3,), progress=False, concat=False,
                       n_permutations=20, n_bootstrap=20, cache_dir=tmp_path / "cache")
        got[label] = res.run("semantic", "original").metrics.per_query["q1"]["ndcg@3"]
        run = res.run("semantic", "original").ranking["q1"]
        assert [names[p] for p in sorted(run, key=lambda p: -run[p])][:3] == (["A", "B", "D"] if not opts else ["A", "D", "C"])
        saved = json.loads((tmp_path / label / "results.json").read_text())["config"]["backend_config"]["semantic"]
        assert (saved["query_prompt"], saved["document_prompt"]) == (("qtag ", "dtag ") if not opts else ("", ""))
    assert got["declared"] == pytest.approx(want, abs=1e-12)
    assert got["no prompts"] == pytest.approx(unprompted, abs=1e-12)
