"""ANCE checkpoints in the semantic backend (issue 24, item 4): ConvSearch-R1's dense retriever.

A tiny, randomly initialised ANCE checkpoint is built here, laid out as ANCE's and Pyserini's are
(:func:`tiny_st.build_tiny_ance`). vdr's query and passage vectors (torch, and the ONNX Runtime
query path) must equal a plain transformers forward of the recipe Pyserini's ``AnceEncoder`` and
ConvSearch-R1's ``ANCE`` run -- RoBERTa, first token, ``embeddingHead``, ``norm`` -- on padded
batches cut at 64 (queries) / 384 (passages) tokens, to 1e-5; the lengths, the architecture and the
inner product are recorded. Pyserini's own ``AnceQueryEncoder`` / ``AnceDocumentEncoder`` give the
same vectors: recorded with Pyserini 1.6.0 (transformers 4.50.0) by tests/make_ance_fixture.py, and
live when Pyserini can load the checkpoint here (Java 21+, a transformers it supports; Pyserini
1.6.0 cannot under transformers 5, and the live test says so when it skips).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from tiny_st import build_tiny_ance

pytestmark = pytest.mark.model

QUERIES = ["What was the revenue of the wind division?", "river city", "Which city lies at the foot of the mountain?",
           " ".join(["river mountain city report"] * 20)]  # the last one: more than 64 tokens
PASSAGES = ["The quick brown fox jumps over the lazy dog near the river.", "revenue wind alpha beta gamma",
            " ".join(["Which city lies at the foot of the mountain? revenue of the wind division"] * 30)]  # > 384 tokens


@pytest.fixture(scope="module")
def ance(tmp_path_factory):
    """``{layout: folder}``: the tiny checkpoint as ANCE writes it (``RobertaDot_NLL_LN``, safetensors)
    and as Pyserini's ``AnceEncoder.save_pretrained`` names it (``AnceEncoder``, ``pytorch_model.bin``)."""
    pytest.importorskip("sentence_transformers")
    root = tmp_path_factory.mktemp("ance")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"ance": build_tiny_ance(root / "ance"),
                "pyserini": build_tiny_ance(root / "pyserini", weights="bin", architecture="AnceEncoder", seed=1)}


def _state(folder: Path) -> dict:
    """The checkpoint's weights (a ``.bin`` built by this test, so trusted: ``allow_pickle``)."""
    from vdr.io.weights import load_state_dict

    name = "model.safetensors" if (folder / "model.safetensors").is_file() else "pytorch_model.bin"
    return load_state_dict(folder / name, allow_pickle=True, what="test checkpoint", opt_in="-")


def reference(folder: Path, texts: list[str], max_length: int) -> np.ndarray:
    """The ANCE recipe written out with transformers alone: a RoBERTa holding the checkpoint's
    ``roberta.*`` weights (every key used), one padded batch with its attention mask, cut at
    ``max_length`` tokens (special tokens kept), ``norm(embeddingHead(last_hidden_state[:, 0]))``.

    Returns:
        float32 ``(len(texts), 768)``.
    """
    import torch
    from transformers import AutoTokenizer, RobertaConfig, RobertaModel

    state = _state(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = RobertaModel(RobertaConfig.from_pretrained(folder), add_pooling_layer=False).eval()
    model.load_state_dict({k[len("roberta."):]: v for k, v in state.items() if k.startswith("roberta.")}, strict=True)
    tok = AutoTokenizer.from_pretrained(folder)
    batch = tok(texts, padding="longest", truncation=True, max_length=max_length, return_tensors="pt")
    w, b, nw, nb = (state[k] for k in ("embeddingHead.weight", "embeddingHead.bias", "norm.weight", "norm.bias"))
    with torch.no_grad():
        first = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state[:, 0]
        out = torch.nn.functional.layer_norm(torch.nn.functional.linear(first, w, b), (w.shape[0],), nw, nb, eps=1e-5)
    return out.numpy().astype(np.float32)


def _backend(folder, **kw):
    """The semantic backend on a checkpoint these tests built (the pickle layout opted in)."""
    from vdr.retrieve.semantic import DenseBackend

    kw.setdefault("allow_pickle_weights", True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return DenseBackend(str(folder), device="cpu", **kw)


def _runtimes():
    from importlib.util import find_spec

    onnx = find_spec("onnxruntime") is not None and find_spec("onnx") is not None
    return ["torch", pytest.param("onnx", marks=pytest.mark.skipif(not onnx, reason="onnxruntime / onnx not installed"))]


def test_detected_and_recorded(ance):
    for layout, arch in (("ance", "RobertaDot_NLL_LN"), ("pyserini", "AnceEncoder")):
        c = _backend(ance[layout]).config
        assert c["architecture"] == "ance" and c["architecture_note"] == f"auto: config.json architectures names {arch}"
        assert (c["query_max_length"], c["passage_max_length"], c["max_seq_length"], c["dimension"]) == (64, 384, 512, 768)
        assert c["normalize"] is False and c["similarity"] == "dot"
        assert c["encoder"].startswith("ance: RoBERTa last hidden state of the first token -> embeddingHead")
        assert (c["query_prompt"], c["document_prompt"]) == ("", "")
    c = _backend(ance["ance"], query_max_length=32, passage_max_length=128, normalize=True).config
    assert (c["query_max_length"], c["passage_max_length"], c["normalize"]) == (32, 128, True)


@pytest.mark.parametrize("runtime", _runtimes())
@pytest.mark.parametrize("layout", ["ance", "pyserini"])
def test_vectors_equal_a_plain_transformers_forward(ance, layout, runtime, tmp_path):
    folder = ance[layout]
    b = _backend(folder, query_runtime=runtime, cache_dir=tmp_path, long_text="truncate")
    assert b.config["query_runtime"].startswith("onnxruntime" if runtime == "onnx" else "torch")
    queries, cut = b._encode_queries(QUERIES)  # the path search() takes
    assert cut.tolist() == [False, False, False, True]
    assert np.abs(queries - reference(folder, QUERIES, 64)).max() < 1e-5
    docs, cut = b.encode(PASSAGES, max_length=b.passage_max_length)  # the call index() makes (long_text="truncate")
    assert cut.tolist() == [False, False, True]
    want = reference(folder, PASSAGES, 384)
    assert np.abs(docs - want).max() < 1e-5
    assert np.abs(reference(folder, PASSAGES, 512)[2] - want[2]).max() > 1e-4  # the cut at 384 matters for the long one (10x the tolerance)
    from vdr.errors import VdrWarning

    with pytest.warns(VdrWarning, match=r"1 of 3 pages exceed passage_max_length \(384 tokens\).*truncated"):
        b.index({f"p{i}": t for i, t in enumerate(PASSAGES)})
    stored = dict(zip(b.page_ids, b.page_embeddings))  # float16 rows of the same vectors
    assert max(np.abs(stored[f"p{i}"] - want[i]).max() / np.abs(want[i]).max() for i in range(3)) < 1e-3


def test_the_explicit_path_and_a_checkpoint_without_its_head(ance, tmp_path):
    import shutil

    from vdr.errors import InputError

    plain = tmp_path / "plain-name"  # an ANCE checkpoint whose config.json names no ANCE class: architecture=ance
    shutil.copytree(ance["pyserini"], plain)
    cfg = json.loads((plain / "config.json").read_text())
    (plain / "config.json").write_text(json.dumps(dict(cfg, architectures=["RobertaModel"])))
    assert _backend(plain).config["architecture"] == "sentence-transformers"  # not recognised: the default stays
    b = _backend(plain, architecture="ance", query_runtime="torch")
    assert b.config["architecture"] == "ance" and b.config["architecture_note"] == "architecture='ance'"
    assert np.abs(b._encode_queries(QUERIES[:2])[0] - reference(ance["pyserini"], QUERIES[:2], 64)).max() < 1e-5
    headless = tmp_path / "headless"
    shutil.copytree(ance["ance"], headless)
    from safetensors.torch import save_file

    save_file({k: v for k, v in _state(ance["ance"]).items() if k.startswith("roberta.")}, str(headless / "model.safetensors"))
    with pytest.raises(InputError, match=r"no embeddingHead\.weight, embeddingHead\.bias, norm\.weight, norm\.bias"):
        _backend(headless, architecture="ance")
    with pytest.raises(InputError, match="architecture must be one of auto, sentence-transformers, ance"):
        _backend(ance["ance"], architecture="dpr")


def test_pickle_weights_only_when_asked(ance, tmp_path):
    """A checkpoint whose weights are pytorch_model.bin (Pyserini's layout) is refused by default,
    naming the folder, the file and the option; with the option it gives the safetensors copy's vectors."""
    import shutil


    from vdr.errors import InputError
    from vdr.io.weights import load_state_dict

    folder = ance["pyserini"]
    with pytest.raises(InputError, match=r"semantic model .*pyserini: its weights are pytorch_model\.bin, a pickle.*"
                                         r"--backend-option semantic\.allow_pickle_weights=true.*save_file"):
        _backend(folder, allow_pickle_weights=False)
    with pytest.raises(InputError, match=r"pytorch_model\.bin, a pickle"):
        load_state_dict(folder / "pytorch_model.bin", allow_pickle=False, what="ANCE checkpoint", opt_in="X")
    converted = tmp_path / "bob's $HOME model"  # the command the message prints, run by a shell, on a path to quote
    shutil.copytree(folder, converted)
    with pytest.raises(InputError) as refused:
        _backend(converted, allow_pickle_weights=False)
    command = str(refused.value).split("convert it once: ", 1)[1]
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (converted / "pytorch_model.bin").unlink()
    safe = _backend(converted, allow_pickle_weights=False, query_runtime="torch")
    opted = _backend(folder, allow_pickle_weights=True, query_runtime="torch")
    assert np.abs(safe._encode_queries(QUERIES[:2])[0] - opted._encode_queries(QUERIES[:2])[0]).max() == 0.0
    assert np.abs(opted._encode_queries(QUERIES[:2])[0] - reference(folder, QUERIES[:2], 64)).max() < 1e-5
    st = tmp_path / "st-bin"  # a sentence-transformers model with pickle weights: the same rule
    shutil.copytree(Path(__import__("vdr.retrieve.semantic", fromlist=["x"]).default_model_path()), st)
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file

    torch.save(load_file(str(st / "model.safetensors")), str(st / "pytorch_model.bin"))
    (st / "model.safetensors").unlink()
    with pytest.raises(InputError, match=r"semantic model .*st-bin: its weights are pytorch_model\.bin"):
        _backend(st, allow_pickle_weights=False)
    assert _backend(st, allow_pickle_weights=True, query_runtime="torch")._encode_queries(["river"])[0].shape == (1, 384)
    from vdr.io.weights import pickle_only

    odd = tmp_path / "odd"  # what a loader would unpickle: module subfolders and shards too; not training_args.bin
    for name in ("model.safetensors", "training_args.bin", "2_Dense/pytorch_model.bin", "3_x/pytorch_model-00001-of-00002.bin",
                 "3_x/pytorch_model-00002-of-00002.bin", "3_x/optimizer.pt", "4_y/model.safetensors", "4_y/pytorch_model.bin"):
        (odd / name).parent.mkdir(parents=True, exist_ok=True)
        (odd / name).write_bytes(b"")
    assert pickle_only(odd) == ["2_Dense/pytorch_model.bin", "3_x/pytorch_model-00001-of-00002.bin", "3_x/pytorch_model-00002-of-00002.bin"]


def test_options_from_the_command_line():
    from vdr.retrieve.options import SemanticOptions, check_options

    o = check_options(SemanticOptions, {"model": "/ckpt/ad-hoc-ance-msmarco", "architecture": "ance", "query_max_length": "64",
                                        "passage_max_length": "384", "normalize": "null", "allow_pickle_weights": "true"},
                      backend="semantic", strings=True)
    assert (o.architecture, o.query_max_length, o.passage_max_length, o.normalize, o.allow_pickle_weights) == ("ance", 64, 384, None, True)
    assert check_options(SemanticOptions, {}, backend="semantic").allow_pickle_weights is False


def test_end_to_end_scores_are_inner_products(ance, tmp_path):
    """``vdr evaluate --backend semantic`` on the ANCE checkpoint: each score is the inner product of
    the reference query and passage vectors (float16 store), results.json records the recipe."""
    from tiny_models import make_text_inputs
    from vdr import evaluate

    folder = ance["ance"]
    texts = PASSAGES[:2] + ["Which city lies at the foot of the mountain?"]
    queries = {"q1": "wind revenue", "q2": "the mountain city"}
    d = make_text_inputs(tmp_path / "in", [(56, 56)] * 3, texts, queries, queries, {"q1": {"doc.pdf#2": 1}, "q2": {"doc.pdf#3": 1}})
    res = evaluate(d["corpus"], queries=d["queries"], qrels=d["qrels"], out=tmp_path / "r", backends="semantic", device="cpu",
                   backend_options={"semantic": {"model": str(folder)}}, k=(3,), progress=False, concat=False, n_permutations=20,
                   n_bootstrap=20, cache_dir=tmp_path / "cache")
    run = res.run("semantic", "original").ranking
    qv, pv = reference(folder, list(queries.values()), 64), reference(folder, texts, 384)
    for j, q in enumerate(queries):
        want = {f"doc.pdf#{i + 1}": float(pv[i] @ qv[j]) for i in range(3)}
        assert set(run[q]) == set(want)
        assert max(abs(run[q][p] - want[p]) / abs(want[p]) for p in want) < 2e-3
        assert sorted(run[q], key=lambda p: -run[q][p]) == sorted(want, key=lambda p: -want[p])
    saved = json.loads((tmp_path / "r" / "results.json").read_text())["config"]["backend_config"]["semantic"]
    assert (saved["architecture"], saved["query_max_length"], saved["passage_max_length"], saved["normalize"]) == ("ance", 64, 384, False)


# ------------------------------------------------------------------------------------------ Pyserini itself

FIXTURE = Path(__file__).parent / "data" / "ance_pyserini_1.6.0.json"


@pytest.mark.parametrize("runtime", _runtimes())
def test_equal_to_pyserinis_recorded_vectors(tmp_path, runtime):
    """Pyserini 1.6.0's AnceQueryEncoder / AnceDocumentEncoder (transformers 4.50.0) on the tiny
    checkpoint, recorded by tests/make_ance_fixture.py: vdr's passage vectors equal them, and its
    query vectors equal them for the lower-cased query, because AnceQueryEncoder lower-cases
    queries (its tokenizer's ``do_lower_case``; its recorded tokens show it) and vdr, as
    ConvSearch-R1, does not."""
    from make_ance_fixture import PASSAGES as P, QUERIES as Q, SEED, checkpoint_digest

    rec = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert (rec["versions"]["pyserini"], rec["queries"], rec["passages"]) == ("1.6.0", Q, P)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folder = build_tiny_ance(tmp_path / "ance", weights="bin", architecture="AnceEncoder", seed=SEED)
    if checkpoint_digest(folder) != rec["checkpoint"]["sha256"]:
        pytest.skip(f"the tiny checkpoint built here (torch {__import__('torch').__version__}) is not the one recorded"
                    f" (torch {rec['checkpoint']['built_with_torch']}): rerun tests/make_ance_fixture.py")
    assert rec["query_tokens"][0] == "w" and rec["passage_tokens"][0] == "What"  # "What ..." lower-cased for queries only
    b = _backend(folder, query_runtime=runtime)
    want_q, want_p = np.array(rec["query_vectors"], np.float32), np.array(rec["passage_vectors"], np.float32)
    assert np.abs(b._encode_queries([q.lower() for q in Q])[0] - want_q).max() < 1e-5
    assert np.abs(b.encode(P, max_length=384)[0] - want_p).max() < 1e-5
    mixed = b._encode_queries(Q)[0]
    assert np.abs(mixed[1] - want_q[1]).max() < 1e-5  # "river city": nothing to lower-case
    assert np.abs(mixed[0] - want_q[0]).max() > 1e-3  # "What was ...": Pyserini's query is "what was ..."


_PYSERINI = """
import json, sys
from pyserini.encode import AnceQueryEncoder, AnceDocumentEncoder
folder, queries, passages = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
q = AnceQueryEncoder(folder, device="cpu")
d = AnceDocumentEncoder(folder, device="cpu")
print(json.dumps({"queries": [q.encode(t).tolist() for t in queries],
                  "passages": d.encode(passages, max_length=384).tolist()}))
"""


@pytest.mark.slow
def test_equal_to_pyserinis_own_encoder(ance, tmp_path):
    """Pyserini's AnceQueryEncoder / AnceDocumentEncoder on the same checkpoint (lower-case texts:
    Pyserini's query tokenizer lower-cases under transformers 4.x, vdr does not)."""
    pytest.importorskip("pyserini")
    from vdr.retrieve.pyserini import _java_env, unavailable_reason

    why = unavailable_reason()
    if why:
        pytest.skip(why)
    folder = ance["pyserini"]
    queries, passages = [t.lower() for t in QUERIES[:3]], [t.lower() for t in PASSAGES[:2]]
    # pyserini.encode builds an OpenAI client at import: any key (never used) lets the import pass
    env = {**os.environ, **_java_env(), "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "unused-by-this-test")}
    got = subprocess.run([sys.executable, "-c", _PYSERINI, str(folder), json.dumps(queries), json.dumps(passages)],
                         capture_output=True, text=True, env=env, timeout=600)
    if got.returncode != 0:
        last = got.stderr.strip().splitlines()[-1] if got.stderr.strip() else f"exit {got.returncode}"
        from importlib.metadata import version

        pytest.skip(f"pyserini {version('pyserini')} cannot load the ANCE checkpoint under transformers {version('transformers')}: {last}")
    out = json.loads(got.stdout.strip().splitlines()[-1])
    b = _backend(folder, query_runtime="torch")
    assert np.abs(b._encode_queries(queries)[0] - np.array(out["queries"], dtype=np.float32)).max() < 1e-5
    docs, _ = b.encode(passages, max_length=384)
    assert np.abs(docs - np.array(out["passages"], dtype=np.float32)).max() < 1e-5
