"""Late-interaction encoders with tiny, locally built colpali-engine checkpoints (ColQwen2.5, ColPali)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from tiny_models import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, make_corpus, random_image  # noqa: E402
from vdr.encode import DEFAULT_QUERY_PREFIX, LateInteractionEncoder, QueryTemplate  # noqa: E402
from vdr.errors import InputError, ModelLoadError  # noqa: E402

pytestmark = pytest.mark.model  # every encoder test imports colpali-engine or builds a tiny model

QUERIES = ["What is the revenue in 2023?", "carbon", "Which page shows the carbon emissions of the company in the annual report?"]


@pytest.fixture(scope="module")
def colpali(colpali_dir):
    return LateInteractionEncoder.load(colpali_dir, device="cpu")


def test_class_chosen_from_config(colqwen, colpali):
    assert colqwen.settings["classes"] == ["ColQwen2_5", "ColQwen2_5_Processor"]
    assert type(colqwen.model).__name__ == "ColQwen2_5"
    assert colpali.settings["classes"] == ["ColPali", "ColPaliProcessor"]
    assert colqwen.dtype == torch.float32 and colqwen.device == "cpu"
    assert colqwen.dim == 128


def test_from_pretrained_round_trip(colqwen_dir, colqwen, tmp_path):
    """Save the loaded model again, load it through vdr: identical vectors and fingerprint."""
    colqwen.model.save_pretrained(tmp_path / "again")
    colqwen.processor.save_pretrained(tmp_path / "again")
    again = LateInteractionEncoder.load(tmp_path / "again", device="cpu")
    img = [random_image(120, 90, 1)]
    assert torch.equal(again.encode_pages(img)[0], colqwen.encode_pages(img)[0])
    assert torch.equal(again.encode_queries(["hello"])[0], colqwen.encode_queries(["hello"])[0])


def test_query_template_explicit_and_golden(colqwen, colpali):
    """Golden test on the exact processed input: prefix + text + 10 augmentation tokens, no truncation."""
    assert DEFAULT_QUERY_PREFIX == "Query: "
    assert colqwen.query_template == QueryTemplate("Query: ", "<|endoftext|>", 10)
    assert colpali.query_template == QueryTemplate("Query: ", "<pad>", 10)
    assert colqwen.settings["query_template"] == {"prefix": "Query: ", "augmentation_token": "<|endoftext|>", "n_augmentation": 10}
    tok = colqwen.processor.tokenizer
    want = tok("Query: carbon" + "<|endoftext|>" * 10)["input_ids"]
    assert colqwen.encode_queries(["carbon"])[0].shape[0] == len(want)


@pytest.mark.parametrize("which", ["colqwen", "colpali"])
def test_query_shapes_and_augmentation_kept(which, request):
    """Padding is removed by the attention mask: the augmentation tokens (the pad token itself for
    both families) stay, so a query keeps n_text + 10 (+ specials) tokens whatever its batch."""
    enc = request.getfixturevalue(which)
    tok = enc.processor.tokenizer
    vecs = enc.encode_queries(QUERIES, batch_size=3)
    for q, v in zip(QUERIES, vecs):
        processed = enc.processor.process_texts([enc.query_template.render(q)])
        assert v.shape == (int(processed["attention_mask"].sum()), 128)
        assert v.dtype == torch.float32 and v.device.type == "cpu"
        ids = processed["input_ids"][0]
        aug_id = tok.convert_tokens_to_ids(enc.query_template.augmentation_token)
        assert aug_id == tok.pad_token_id  # so stripping by token id would drop them
        assert int((ids == aug_id).sum()) >= 10
        assert torch.allclose(v.norm(dim=-1), torch.ones(v.shape[0]), atol=1e-5)  # no zeroed (padding) rows
    assert enc.max_query_tokens == max(v.shape[0] for v in vecs)


@pytest.mark.parametrize("which", ["colqwen", "colpali"])
def test_batch_size_invariance(which, request):
    enc = request.getfixturevalue(which)
    imgs = [random_image(w, h, i) for i, (w, h) in enumerate([(100, 80), (300, 200), (56, 56), (500, 400)])]
    one = enc.encode_pages(imgs, batch_size=1)
    three = enc.encode_pages(imgs, batch_size=3)
    for a, b in zip(one, three):
        assert a.shape == b.shape
        assert torch.allclose(a, b, atol=1e-5)
    q1 = enc.encode_queries(QUERIES, batch_size=1)
    q3 = enc.encode_queries(QUERIES, batch_size=3)
    for a, b in zip(q1, q3):
        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-5)


def test_tokens_per_page_match_pixel_budget(colqwen):
    """Image tokens per page = smart-resized area / 28^2, within [min, max] pixels / 28^2."""
    res = colqwen.settings["resolution"]
    assert (res["min_pixels"], res["max_pixels"]) == (QWEN_MIN_PIXELS, QWEN_MAX_PIXELS)
    sizes = [(30, 30), (56, 56), (100, 80), (300, 200), (2000, 2000), (1000, 60)]
    imgs = [random_image(w, h, i) for i, (w, h) in enumerate(sizes)]
    prompt = colqwen.encode_pages([random_image(56, 56, 0)])[0].shape[0] - colqwen.expected_image_tokens(56, 56)
    vecs = colqwen.encode_pages(imgs, batch_size=2)
    for (w, h), v in zip(sizes, vecs):
        n_img = colqwen.expected_image_tokens(w, h)
        assert res["min_image_tokens"] <= n_img <= res["max_image_tokens"]
        assert v.shape == (n_img + prompt, 128)
    assert vecs[4].shape[0] - prompt == res["max_image_tokens"]  # a large square page fills the budget exactly
    # a smaller budget is applied and recorded
    small = LateInteractionEncoder.load(colqwen.name_or_path, device="cpu", max_pixels=28 * 28 * 6)
    assert small.settings["resolution"]["max_image_tokens"] == 6
    assert small.encode_pages([imgs[4]])[0].shape[0] - prompt <= 6


def test_pixel_budget_check_catches_ignored_settings(colqwen_dir):
    enc = LateInteractionEncoder.load(colqwen_dir, device="cpu", max_pixels=28 * 28 * 6)
    enc.settings["resolution"]["max_pixels"] = 1  # not what the processor uses
    enc.processor.image_processor.size = {"shortest_edge": QWEN_MIN_PIXELS, "longest_edge": 28 * 28 * 6}
    real = enc.expected_image_tokens
    enc.expected_image_tokens = lambda w, h: real(w, h) + 1
    with pytest.raises(InputError, match="image tokens"):
        enc.encode_pages([random_image(300, 200, 0)])


def test_fixed_resolution_family_rejects_pixel_budget(colpali_dir):
    with pytest.raises(InputError, match="min/max pixels"):
        LateInteractionEncoder.load(colpali_dir, device="cpu", max_pixels=10000)


def test_pages_from_corpus_and_workers(colqwen, tmp_path):
    corpus_dir = make_corpus(tmp_path / "c", [(100, 80), (300, 200), (56, 56)])
    from vdr.corpus import Corpus

    c = Corpus.load(corpus_dir)
    a = colqwen.encode_pages(c, batch_size=2)
    b = colqwen.encode_pages(c, batch_size=2, num_workers=1)
    paths = [c.image_path(i) for i in c.ids()]
    d = colqwen.encode_pages(paths, batch_size=2)
    for x, y, z in zip(a, b, d):
        assert torch.equal(x, y) and torch.equal(x, z)


def test_oom_halves_batch_and_retries(colqwen):
    imgs = [random_image(100, 80, i) for i in range(4)]  # one image-token bucket: one batch of 4
    ref = colqwen.encode_pages(imgs, batch_size=4)
    real = colqwen._forward_device
    calls = []

    def flaky(inputs):
        n = inputs["input_ids"].shape[0]
        calls.append(n)
        if n > 1:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")
        return real(inputs)

    colqwen._forward_device = flaky
    try:
        out = colqwen.encode_pages(imgs, batch_size=4)
    finally:
        del colqwen._forward_device
        colqwen._batch_cap = None
    assert calls[:3] == [4, 2, 1] and max(calls[3:]) == 1
    for a, b in zip(ref, out):
        assert torch.allclose(a, b, atol=1e-5)


def test_long_query_is_an_error_not_truncated(colqwen):
    limit = colqwen.query_limit()
    assert limit is not None
    with pytest.raises(InputError, match="does not truncate"):
        colqwen.encode_queries(["short", "word " * (limit + 5)], ids=["q1", "q2"])


def test_missing_weights_fail(colqwen_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    bad = tmp_path / "bad"
    bad.mkdir()
    for f in colqwen_dir.iterdir():
        if f.name != "model.safetensors":
            (bad / f.name).write_bytes(f.read_bytes())
    w = load_file(colqwen_dir / "model.safetensors")
    save_file({k: v for k, v in w.items() if "custom_text_proj" not in k}, bad / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ModelLoadError, match="newly initialised.*custom_text_proj"):
        LateInteractionEncoder.load(bad, device="cpu")


def test_no_safetensors_fails(colqwen_dir, tmp_path):
    bad = tmp_path / "nobin"
    bad.mkdir()
    (bad / "config.json").write_text((colqwen_dir / "config.json").read_text())
    with pytest.raises(ModelLoadError, match="safetensors"):
        LateInteractionEncoder.load(bad, device="cpu")


def test_unknown_family_fails(tmp_path):
    d = tmp_path / "bert"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertModel"]}))
    with pytest.raises(ModelLoadError, match="model_type='bert'"):
        LateInteractionEncoder.load(d, device="cpu")


def test_hub_name_offline_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    with pytest.raises(ModelLoadError) as e:
        LateInteractionEncoder.load("vidore/colqwen2.5-v0.2", device="cpu")
    msg = str(e.value)
    assert "vidore/colqwen2.5-v0.2" in msg and "HF_HUB_OFFLINE" in msg and "--model DIR" in msg


def test_missing_local_folder(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        LateInteractionEncoder.load(str(tmp_path / "nope" / "model"), device="cpu")


def test_fingerprint_stable_and_sensitive(colqwen_dir, colqwen):
    """Page settings change both fingerprints; the query template changes the query fingerprint only."""
    again = LateInteractionEncoder.load(colqwen_dir, device="cpu")
    assert (again.fingerprint, again.page_fingerprint) == (colqwen.fingerprint, colqwen.page_fingerprint)
    assert colqwen.fingerprint == colqwen.query_fingerprint != colqwen.page_fingerprint
    bf16 = LateInteractionEncoder.load(colqwen_dir, device="cpu", compute_dtype="bfloat16")
    assert bf16.page_fingerprint != colqwen.page_fingerprint and bf16.query_fingerprint != colqwen.query_fingerprint
    for kw in ({"n_augmentation": 5}, {"query_prefix": ""}):
        other = LateInteractionEncoder.load(colqwen_dir, device="cpu", **kw)
        assert other.query_fingerprint != colqwen.query_fingerprint
        assert other.page_fingerprint == colqwen.page_fingerprint
        assert other.page_settings() == colqwen.page_settings() and "query_template" not in other.page_settings()
    assert colqwen.settings["format"] == 2 and colqwen.describe()["page_fingerprint"] == colqwen.page_fingerprint


def test_encoder_settings_load_and_json(colqwen_dir, colqwen):
    from vdr.encode import EncoderSettings

    s = EncoderSettings(colqwen_dir, device="cpu", compute_dtype="fp32", max_pixels=QWEN_MAX_PIXELS, batch_size=3)
    assert s.model == str(colqwen_dir) and s.compute_dtype == "float32"  # Path -> str, fp32 -> float32
    assert EncoderSettings.from_json(json.dumps(s.to_json())) == s
    enc = LateInteractionEncoder.load(s)
    assert enc.encoder_settings == s and enc.page_fingerprint == colqwen.page_fingerprint  # same resolved settings
    assert LateInteractionEncoder.from_settings(s).fingerprint == enc.fingerprint
    with pytest.raises(InputError, match="not both.*device"):
        LateInteractionEncoder.load(s, device="cpu")
    assert s.queries_per_batch == 12 and s.replace(query_batch_size=5).queries_per_batch == 5
    assert set(s.PAGE_FIELDS) | set(s.QUERY_FIELDS) | set(s.RUN_FIELDS) == set(s.to_json())


@pytest.mark.parametrize("bad, match", [
    (dict(batch_size=0), "batch_size must be an integer >= 1"),
    (dict(store_dtype="bfloat16"), "float16 or float32"),
    (dict(compute_dtype="int8"), "compute_dtype"),
    (dict(min_pixels=10, max_pixels=5), "larger than max_pixels"),
    (dict(n_augmentation=-1), "n_augmentation must be an integer >= 0"),
    (dict(trust_remote_code="yes"), "trust_remote_code"),
    (dict(model=""), "model"),
])
def test_encoder_settings_validated(bad, match):
    from vdr.encode import EncoderSettings

    with pytest.raises(InputError, match=match):
        EncoderSettings(**{"model": "m", **bad})


def test_encoder_settings_from_json_rejects_unknown():
    from vdr.encode import EncoderSettings

    with pytest.raises(InputError, match=r"unknown key\(s\) \['dpi'\]"):
        EncoderSettings.from_json({"model": "m", "dpi": 3})
    with pytest.raises(InputError, match="no 'model'"):
        EncoderSettings.from_json({})
    with pytest.raises(InputError, match="unknown encoder setting"):
        EncoderSettings("m").replace(colour=1)


def test_cli_evaluate_finds_the_store_embed_wrote(colqwen_dir, tmp_path):
    """`vdr evaluate` takes the same encoder options as `vdr embed`: with non-default options it
    reuses every page vector `embed` stored; another query prefix still reuses them."""
    from vdr.cli import main

    corpus = make_corpus(tmp_path / "c", [(100, 80), (56, 56), (300, 200)])
    (tmp_path / "q.jsonl").write_text('{"_id": "q1", "text": "revenue"}\n{"_id": "q2", "text": "carbon"}\n')
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tdoc.pdf#1\t1\nq2\tdoc.pdf#3\t1\n")
    opts = ["--model", str(colqwen_dir), "--store", str(tmp_path / "s"), "--device", "cpu", "--batch-size", "2",
            "--dtype", "float32", "--max-pixels", str(28 * 28 * 8), "--query-prefix", "", "--quiet"]
    assert main(["embed", str(corpus), *opts, "--json", str(tmp_path / "e.json")]) == 0
    emb = json.loads((tmp_path / "e.json").read_text())
    assert emb["encoded"] == 3 and emb["settings"]["max_pixels"] == 28 * 28 * 8 and emb["dtype"] == "float32"
    ev = ["evaluate", str(corpus), "--queries", str(tmp_path / "q.jsonl"), "--qrels", str(tmp_path / "qrels.tsv"),
          "--backend", "multimodal", "--depth", "3", "--k", "1,3"]
    for prefix, out in (("", "r1"), ("Query: ", "r2")):
        o = [x if x != "" else prefix for x in opts]
        assert main([*ev, *o, "--augmentation-tokens", "10", "--out", str(tmp_path / out)]) == 0
    r1, r2 = (json.loads((tmp_path / o / "results.json").read_text()) for o in ("r1", "r2"))
    for r in (r1, r2):
        rep = r["backend_reports"]["multimodal"]
        assert (rep["index"]["encoded"], rep["index"]["reused"]) == (0, 3)  # the store embed wrote, found and reused
        cfg = r["config"]["backend_config"]["multimodal"]
        assert cfg["store"] == emb["store"] and cfg["page_fingerprint"] == emb["fingerprint"]
        assert r["config"]["encoder"]["store_dtype"] == "float32" and cfg["device"] == "cpu"
    c1, c2 = (r["config"]["backend_config"]["multimodal"] for r in (r1, r2))
    assert c1["query_fingerprint"] == emb["query_fingerprint"] != c2["query_fingerprint"]
    assert (c1["query_template"]["prefix"], c2["query_template"]["prefix"]) == ("", "Query: ")


def test_embed_defaults_are_the_encoder_defaults():
    import inspect

    from vdr.encode import N_AUGMENTATION_TOKENS, EncoderSettings

    params = inspect.signature(EncoderSettings).parameters
    assert params["query_prefix"].default == DEFAULT_QUERY_PREFIX == "Query: "
    assert params["n_augmentation"].default == N_AUGMENTATION_TOKENS == 10


def test_import_vdr_stays_light():
    import subprocess

    code = "import sys, vdr; assert 'torch' not in sys.modules, 'torch imported'; vdr.EmbeddingStore; assert 'torch' not in sys.modules"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={"PYTHONPATH": str(Path(__file__).parent.parent), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr


def test_cli_embed(colqwen_dir, tmp_path):
    from vdr.cli import main
    from vdr.encode.store import EmbeddingStore

    corpus = make_corpus(tmp_path / "c", [(100, 80), (56, 56)])
    rc = main(["embed", str(corpus), "--model", str(colqwen_dir), "--store", str(tmp_path / "s"), "--device", "cpu",
               "--batch-size", "2", "--quiet", "--json", str(tmp_path / "r.json")])
    assert rc == 0
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["encoded"] == 2 and rep["encoder"]["query_template"]["prefix"] == "Query: "
    assert len(EmbeddingStore.open(tmp_path / "s")) == 2
    assert main(["embed", str(corpus), "--model", str(tmp_path / "missing" / "x"), "--store", str(tmp_path / "s")]) == 2


@pytest.mark.parametrize("family", ["colqwen", "colpali"])
def test_query_vectors_are_bit_identical_at_any_batch_size(family, colqwen, colpali_dir):
    # queries are batched by token length, so no query is ever padded: batch 1, 4 and 32 agree exactly
    from vdr.encode import LateInteractionEncoder

    enc = colqwen if family == "colqwen" else LateInteractionEncoder.load(colpali_dir, device="cpu")
    texts = ["scope 1 emissions 2023", "board diversity", "water usage by site now", "inflation", "a b c d e f g"] * 3
    ref = enc.encode_queries(texts, 1)
    for bs in (4, 32):
        got = enc.encode_queries(texts, bs)
        assert all(torch.equal(a, b) for a, b in zip(ref, got))
    assert [v.shape[0] for v in ref[:5]] == [v.shape[0] for v in ref[5:10]]


@pytest.mark.parametrize("which", ["colqwen", "colpali"])
def test_corpus_page_vectors_are_bit_identical_at_any_batch_size(which, request, tmp_path):
    # batches of a corpus end where the page size changes: no page is padded, so batch size changes nothing
    import vdr

    enc = request.getfixturevalue(which) if which == "colqwen" else vdr.LateInteractionEncoder.load(request.getfixturevalue("colpali_dir"), device="cpu")
    sizes = [(100, 80), (100, 80), (300, 200), (100, 80), (300, 200), (300, 200), (56, 56)]
    corpus = vdr.Corpus.load(make_corpus(tmp_path / "c", sizes))
    ref = enc.encode_pages(corpus, batch_size=1)
    for bs in (2, 3, 8):
        got = enc.encode_pages(corpus, batch_size=bs)
        assert all(torch.equal(a, b) for a, b in zip(ref, got)), bs


def test_mteb_wrapper_takes_encoder_settings(colqwen_dir):
    """The MTEB model wrapper is configured by the same EncoderSettings; its ModelMeta reloads them."""
    pytest.importorskip("mteb")
    from vdr.encode import EncoderSettings
    from vdr.integrations.mteb import VdrColPaliModel

    s = EncoderSettings(colqwen_dir, device="cpu", query_prefix="", max_pixels=28 * 28 * 8)
    vm = VdrColPaliModel(s)
    assert vm.encoder.encoder_settings == s and vm.encoder.query_template.prefix == ""
    assert vm.mteb_model_meta.revision == vm.encoder.fingerprint
    again = vm.mteb_model_meta.load_model()
    assert again.encoder.encoder_settings == s and again.encoder.fingerprint == vm.encoder.fingerprint
