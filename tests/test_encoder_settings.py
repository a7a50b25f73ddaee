"""EncoderSettings is the one source of the encoder options: CLI flags, API keywords, fingerprint.

Also the option records of ingestion (IngestOptions, VidoreOptions). The fingerprint goldens were
computed with the code of main at d5eeae5 (before the settings were built in one place), so a store
written by an older vdr is found again.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

sys.path.insert(0, str(Path(__file__).parent))

import vdr  # noqa: E402
import vdr.encode  # noqa: E402
import vdr.experiment.evaluation  # noqa: E402
from vdr.cli import params as cli_params  # noqa: E402
from vdr.cli import app, main  # noqa: E402
from vdr.encode.settings import EncoderSettings, fingerprints, store_key  # noqa: E402
from vdr.errors import InputError  # noqa: E402
from vdr.ingest import IngestOptions, VidoreOptions, ingest_pdfs, ingest_vidore  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

#: Every command-line field with a value other than its default.
ALL_SET = EncoderSettings(
    "some/colqwen", revision="abc123", compute_dtype="bfloat16", min_pixels=100, max_pixels=2000, store_dtype="float32",
    query_prefix="", n_augmentation=3, device="cpu", attn_implementation="sdpa", trust_remote_code=True, batch_size=3,
    query_batch_size=5, num_workers=1, shard_pages=7,
)
#: The encoder flags `vdr embed` and `vdr evaluate` had before the settings were built in one place.
OLD_FLAGS = ("--batch-size", "--device", "--dtype", "--model-dtype", "--trust-remote-code", "--no-trust-remote-code", "--revision",
             "--query-prefix", "--augmentation-tokens", "--min-pixels", "--max-pixels", "--attn-implementation", "--workers",
             "--shard-pages")


class _Captured(InputError):
    pass


@pytest.fixture()
def capture_embed(monkeypatch):
    """`vdr embed`'s call of vdr.embed, captured: ``seen["settings"]`` (the command then exits 2)."""
    seen: dict = {}

    def fake(corpus_dir, settings, store, progress=True):
        seen.update(settings=settings, corpus_dir=corpus_dir, store=store)
        raise _Captured("captured")

    monkeypatch.setattr(vdr.encode, "embed", fake)
    return seen


@pytest.fixture()
def capture_evaluate(monkeypatch):
    seen: dict = {}

    def fake(corpus_dir=None, **kw):
        seen.update(kw)
        return None

    monkeypatch.setattr(vdr.experiment.evaluation, "evaluate", fake)
    return seen


def _embed(tmp_path, *args) -> int:
    return main(["embed", str(tmp_path / "corpus"), "--store", str(tmp_path / "s"), *args])


# ------------------------------------------------------------------------------ settings <-> CLI flags


def test_settings_to_cli_flags_and_back_through_embed_and_evaluate(tmp_path, capture_embed, capture_evaluate):
    args = ALL_SET.cli_args()
    assert args[:2] == ["--model", "some/colqwen"] and "--trust-remote-code" in args and "--query-prefix" in args
    assert _embed(tmp_path, *args) == 2
    assert capture_embed["settings"] == ALL_SET
    assert main(["evaluate", str(tmp_path), "-o", str(tmp_path / "r"), "--backend", "multimodal", "-q", *args]) == 0
    assert capture_evaluate["encoder"] == ALL_SET
    default = EncoderSettings("m")
    assert default.cli_args() == ["--model", "m"]
    assert _embed(tmp_path, *default.cli_args()) == 2 and capture_embed["settings"] == default


def test_cli_values_are_plain_strings_not_enums(tmp_path, capture_embed):
    assert _embed(tmp_path, "--model", "m", "--store-dtype", "float32", "--model-dtype", "auto", "--attn-implementation", "eager") == 2
    s = capture_embed["settings"]
    assert (s.store_dtype, s.compute_dtype, s.attn_implementation) == ("float32", None, "eager")
    assert type(s.store_dtype) is str and type(s.attn_implementation) is str
    assert s.to_json()["store_dtype"] == "float32"


def test_cli_choices_are_the_field_choices(tmp_path, capsys):
    for f in EncoderSettings.cli_fields():
        if f.metadata["choices"]:
            assert _embed(tmp_path, "--model", "m", f.metadata["flags"][0], "nonsense") == 2
            err = capsys.readouterr().err
            assert "nonsense" in err and all(c in err for c in f.metadata["choices"]), (f.name, err)


def test_api_keywords_are_the_cli_flags():
    fields = {f.name for f in dataclasses.fields(EncoderSettings)}
    assert {name for name, _, _ in cli_params.ENCODER_PARAMS} == (fields - {"model"}) | {"dtype"}
    assert [f.name for f in EncoderSettings.cli_fields()] == [n for n, _, _ in cli_params.ENCODER_PARAMS if n != "dtype"]
    assert set(EncoderSettings.keywords()) == fields | {"model_dtype", "dtype"}
    group = typer.main.get_command(app)
    for cmd in ("embed", "evaluate"):
        params = {p.name: p for p in group.commands[cmd].params}
        flags = {o for p in params.values() for o in (*p.opts, *p.secondary_opts)}
        assert set(OLD_FLAGS) | {"--store-dtype", "--query-batch-size", "--model"} <= flags, cmd
        for f in EncoderSettings.cli_fields():
            p = params[f.name]  # the CLI parameter is named as the API keyword
            assert p.opts[0] == f.metadata["flags"][0] and p.help == f.metadata["help"], (cmd, f.name)
            assert p.default == f.default, (cmd, f.name)  # str Enum defaults compare equal to their value
    # the old defaults are kept; the batch size (issue 28.1): unset means "from free memory on CUDA", 8 on the CPU
    by_flag = {f.metadata["flags"][0]: f.default for f in EncoderSettings.cli_fields()}
    assert by_flag["--batch-size"] is None and EncoderSettings("m").pages_per_batch == 8
    assert EncoderSettings("m").queries_per_batch == 32 and EncoderSettings("m", batch_size=3).pages_per_batch == 3
    assert by_flag["--store-dtype"] == "float16" and by_flag["--query-prefix"] == "Query: "
    assert by_flag["--augmentation-tokens"] == 10 and by_flag["--shard-pages"] == 256 and by_flag["--model-dtype"] is None
    # vdr.embed's option keywords and LateInteractionEncoder.load's are EncoderSettings keywords
    embed_kw = [n for n, p in inspect.signature(vdr.embed).parameters.items() if p.kind is p.KEYWORD_ONLY and n != "progress"]
    assert embed_kw and set(embed_kw) <= fields


def test_from_options_is_the_one_path():
    s = EncoderSettings.from_options("m", batch_size=3, device=None, model_dtype="fp16")
    assert s == EncoderSettings("m", batch_size=3, compute_dtype="float16")
    assert EncoderSettings.from_options({"model": "m", "batch_size": 3}, compute_dtype="float16") == s
    assert EncoderSettings.from_options(s, batch_size=None, shard_pages=9) == s.replace(shard_pages=9)
    assert EncoderSettings.from_options(Path("/x/m")).model == "/x/m"
    assert EncoderSettings("m", compute_dtype="auto").compute_dtype is None
    with pytest.raises(InputError, match=r"unknown encoder option\(s\) \['colour'\]; known: model, revision"):
        EncoderSettings.from_options("m", colour=1)
    with pytest.raises(InputError, match="no model"):
        EncoderSettings.from_options({"batch_size": 2})
    with pytest.raises(InputError, match="model given twice"):
        EncoderSettings.from_options("a", model="b")


def test_evaluate_api_keywords_build_the_same_settings(tmp_path, monkeypatch):
    seen = {}

    def specs(plan, inputs, options, **kw):
        seen.update(kw)
        raise _Captured("captured")

    monkeypatch.setattr(vdr.experiment.evaluation, "_specs", specs)
    from tiny_models import make_corpus

    corpus = make_corpus(tmp_path / "c", [(60, 60)])
    (tmp_path / "q.jsonl").write_text('{"_id": "q1", "text": "a"}\n')
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tdoc.pdf#1\t1\n")
    with pytest.raises(_Captured):
        vdr.evaluate(corpus, queries=tmp_path / "q.jsonl", qrels=tmp_path / "qrels.tsv", out=tmp_path / "r", backends="multimodal",
                     model="some/colqwen", batch_size=3, trust_remote_code=True, progress=False)
    assert seen["encoder"] == EncoderSettings("some/colqwen", batch_size=3, trust_remote_code=True)


# ------------------------------------------------------------------------------ the deprecated dtype


def test_deprecated_dtype_means_what_it_meant_at_each_place():
    with pytest.warns(DeprecationWarning, match="'dtype' is deprecated.*stored page-vector dtype; use 'store_dtype'"):
        assert EncoderSettings.from_options("m", dtype="float32").store_dtype == "float32"
    with pytest.warns(DeprecationWarning, match="compute dtype; use 'compute_dtype'"):
        s = EncoderSettings.from_options("m", dtype="bf16", dtype_means="compute_dtype")
    assert (s.compute_dtype, s.store_dtype) == ("bfloat16", "float16")
    with pytest.warns(DeprecationWarning), pytest.raises(InputError, match="dtype='float32'.*store_dtype='float16' differ"):
        EncoderSettings.from_options("m", dtype="float32", store_dtype="float16")
    from vdr.retrieve.multimodal import MultimodalBackend

    with pytest.warns(DeprecationWarning):  # backend option mappings: dtype was the stored dtype
        assert MultimodalBackend({"model": "m", "dtype": "float32"}).settings.store_dtype == "float32"
    assert MultimodalBackend({"model": "m", "model_dtype": "fp16"}).settings.compute_dtype == "float16"


def test_cli_dtype_is_the_deprecated_store_dtype(tmp_path, capture_embed, capsys):
    deprecated = "DeprecationWarning: the encoder option 'dtype' is deprecated"
    assert _embed(tmp_path, "--model", "m", "--dtype", "float32") == 2  # the CLI prints warnings itself (stderr)
    err = capsys.readouterr().err
    assert deprecated in err and "use 'store_dtype' (--store-dtype)" in err
    assert capture_embed["settings"].store_dtype == "float32" and capture_embed["settings"].compute_dtype is None
    assert _embed(tmp_path, "--model", "m", "--store-dtype", "float32") == 2
    assert capture_embed["settings"].store_dtype == "float32" and deprecated not in capsys.readouterr().err
    assert _embed(tmp_path, "--model", "m", "--dtype", "float32", "--store-dtype", "float32") == 2  # the same value: accepted
    assert capture_embed["settings"].store_dtype == "float32"
    capture_embed.clear()
    assert _embed(tmp_path, "--model", "m", "--dtype", "float16", "--store-dtype", "float32") == 2  # different: refused
    err = capsys.readouterr().err
    assert "settings" not in capture_embed and "dtype='float16'" in err and "store_dtype='float32' differ" in err


def test_cli_prints_the_deprecation(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-m", "vdr", "embed", str(tmp_path / "missing"), "--model", "m", "--store", str(tmp_path / "s"),
                        "--dtype", "float32"], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "DeprecationWarning: the encoder option 'dtype' is deprecated" in p.stderr and "--store-dtype" in p.stderr


# ------------------------------------------------------------------------------ fingerprint unchanged vs main

#: A fixed encoder record and its fingerprints and store keys, computed by main (d5eeae5):
#: vdr.encode.colpali._fingerprints(RECORD) and vdr.encode.store.store_key(page, dtype).
RECORD = {"format": 2, "model": "vidore/colqwen2.5-v0.2", "revision": "abc", "classes": ["ColQwen2_5", "ColQwen2_5_Processor"],
          "colpali_engine": "0.3.13", "files": {"config.json": "00"}, "weights": {"a.safetensors": "11"},
          "resolution": {"min_pixels": 3136, "max_pixels": 602112}, "padding_side": "left", "compute_dtype": "bfloat16",
          "query_template": {"prefix": "Query: ", "augmentation_token": "<|endoftext|>", "n_augmentation": 10}}
MAIN_PAGE_FP = "d5e406ba7a15c5c9f922dfaad4189a2e235f7c2f44174d0c329bd1f82357882b"
MAIN_QUERY_FP = "baee3cc083940b8d34a98246e530f5eec28b870584c62a4708362756abf41bc3"
MAIN_KEY_F16 = "67803ff97c2bbcfde196a6109813de6bd19f7fca55adcefc36a7feb3a89ee18b"
MAIN_KEY_F32 = "7d60396e7115c793c06ef72eb015d4558d9aa764d69bd176564c899d56f44237"


def test_fingerprint_and_store_key_are_main_s():
    from vdr.encode.store import store_key as store_store_key

    assert fingerprints(RECORD) == (MAIN_PAGE_FP, MAIN_QUERY_FP)
    assert store_key(MAIN_PAGE_FP, "float16") == store_store_key(MAIN_PAGE_FP, "float16") == MAIN_KEY_F16
    assert EncoderSettings("m", store_dtype="float32").store_key(MAIN_PAGE_FP) == MAIN_KEY_F32
    assert EncoderSettings.from_options("m", dtype_means="store_dtype").store_key(MAIN_PAGE_FP) == MAIN_KEY_F16


#: What main (d5eeae5) put in the record of the tiny ColQwen2.5 (tests/tiny_models.py), without the
#: parts that depend on the checkout (the model folder, the files' and weights' hashes, the
#: colpali-engine version): the settings' whole contribution to the page and query fingerprints.
_TEMPLATE = {"prefix": "Query: ", "augmentation_token": "<|endoftext|>", "n_augmentation": 10}
MAIN_TINY_RECORDS = {
    "default": (dict(device="cpu"), {
        "format": 2, "revision": None, "classes": ["ColQwen2_5", "ColQwen2_5_Processor"],
        "resolution": {"min_pixels": 3136, "max_pixels": 12544, "patch_size": 14, "merge_size": 2, "max_image_tokens": 16,
                       "min_image_tokens": 4},
        "padding_side": "left", "compute_dtype": "float32", "query_template": _TEMPLATE}),
    "custom": (dict(device="cpu", compute_dtype="bfloat16", max_pixels=28 * 28 * 8, query_prefix="", n_augmentation=5,
                    store_dtype="float32"), {
        "format": 2, "revision": None, "classes": ["ColQwen2_5", "ColQwen2_5_Processor"],
        "resolution": {"min_pixels": 3136, "max_pixels": 6272, "patch_size": 14, "merge_size": 2, "max_image_tokens": 8,
                       "min_image_tokens": 4},
        "padding_side": "left", "compute_dtype": "bfloat16",
        "query_template": {"prefix": "", "augmentation_token": "<|endoftext|>", "n_augmentation": 5}}),
}


@pytest.mark.model
@pytest.mark.parametrize("which", sorted(MAIN_TINY_RECORDS))
def test_tiny_colqwen_record_is_main_s(colqwen_dir, which):
    from vdr.encode import LateInteractionEncoder

    options, expected = MAIN_TINY_RECORDS[which]
    s = EncoderSettings.from_options(colqwen_dir, **options)
    enc = LateInteractionEncoder.from_settings(s)
    record = {k: v for k, v in enc.settings.items() if k not in ("files", "weights", "colpali_engine", "model")}
    assert record == expected
    assert (enc.page_fingerprint, enc.query_fingerprint) == fingerprints(enc.settings)
    assert s.store_key(enc.page_fingerprint) == store_key(enc.page_fingerprint, options.get("store_dtype", "float16"))


# ------------------------------------------------------------------------------ store dtype vs compute dtype


@pytest.mark.model
@pytest.mark.parametrize("compute, stored", [("bfloat16", "float32"), ("float32", "float16")])
def test_store_holds_store_dtype_model_runs_in_compute_dtype(colqwen_dir, tmp_path, compute, stored):
    import torch

    from tiny_models import make_corpus
    from vdr.encode import EmbeddingStore, LateInteractionEncoder

    corpus = make_corpus(tmp_path / "c", [(100, 80), (56, 56)])
    s = EncoderSettings(colqwen_dir, device="cpu", compute_dtype=compute, store_dtype=stored, batch_size=2)
    enc = LateInteractionEncoder.from_settings(s)
    assert {p.dtype for p in enc.model.parameters()} == {getattr(torch, compute)} and enc.dtype == getattr(torch, compute)
    rep = vdr.embed(corpus, enc, tmp_path / "s", progress=False)
    assert rep.dtype == stored and rep.encoder["compute_dtype"] == compute
    store = EmbeddingStore.open(rep.store)
    assert store.meta["dtype"] == stored and store.path.name == s.store_key(enc.page_fingerprint)[:16]
    ref = enc.encode_pages(vdr.Corpus.load(corpus), batch_size=2)
    for pid, v in zip(vdr.Corpus.load(corpus).ids(), ref):
        got = store.get(pid)
        assert got.dtype == getattr(torch, stored) and v.dtype == torch.float32  # vectors leave the model as float32
        assert torch.equal(got, v.to(getattr(torch, stored)))


@pytest.mark.model
def test_load_dtype_is_the_deprecated_compute_dtype(colqwen_dir):
    import torch

    from vdr.encode import LateInteractionEncoder

    with pytest.warns(DeprecationWarning, match="compute dtype; use 'compute_dtype'"):
        enc = LateInteractionEncoder.load(colqwen_dir, device="cpu", dtype="bfloat16")
    assert enc.dtype == torch.bfloat16 and enc.encoder_settings.compute_dtype == "bfloat16"
    assert enc.encoder_settings.store_dtype == "float16"
    same = LateInteractionEncoder.load(colqwen_dir, device="cpu", compute_dtype=torch.bfloat16)
    assert same.page_fingerprint == enc.page_fingerprint
    assert len(inspect.signature(LateInteractionEncoder.load).parameters) <= 8


# ------------------------------------------------------------------------------ ingest option records


def test_ingest_options_defaults_are_the_old_keyword_defaults():
    assert dataclasses.asdict(IngestOptions()) == {"dpi": 144.0, "max_pixels": 2048 * 2048, "rasterizer": "pdfium", "ocr": "auto",
                                                   "ocr_lang": "eng", "password": None, "workers": None, "timeout": 300.0,
                                                   "progress": True}
    assert dataclasses.asdict(VidoreOptions()) == {"revision": None, "language": None, "split": "test", "ocr": "never",
                                                   "ocr_lang": "eng", "max_pixels": 2048 * 2048, "cache_dir": None, "progress": True}


def test_ingest_unknown_keyword_is_named(tmp_path):
    with pytest.raises(TypeError, match=r"ingest_pdfs\(\) got unknown option\(s\) 'dpii'; known: dpi, max_pixels"):
        vdr.ingest(tmp_path, tmp_path / "out", dpii=3)
    with pytest.raises(TypeError, match=r"ingest_vidore\(\) got unknown option\(s\) 'langauge'"):
        ingest_vidore(tmp_path, tmp_path / "out", langauge="english")
    with pytest.raises(TypeError, match="options must be IngestOptions"):
        ingest_pdfs(tmp_path, tmp_path / "out", options={"dpi": 3})
    assert not (tmp_path / "out").exists()


def test_ingest_options_record_equals_keywords(tmp_path):
    import pdf_factory as pf

    pf.text_pdf(tmp_path / "in" / "a.pdf", ["one", "two"])
    kw = ingest_pdfs(tmp_path / "in", tmp_path / "kw", dpi=36, ocr="never", workers=1, progress=False)
    base = IngestOptions(dpi=50, ocr="never", workers=1, progress=False)
    rec = vdr.ingest(tmp_path / "in", tmp_path / "rec", options=base, dpi=36)  # keywords override the record's fields
    assert rec.settings == kw.settings == {"dpi": 36.0, "max_pixels": 2048 * 2048, "rasterizer": "pdfium", "ocr": "never", "ocr_lang": "eng"}
    assert rec.pages == kw.pages == 2 and base.dpi == 50
    assert (tmp_path / "kw" / "pages.jsonl").read_bytes() == (tmp_path / "rec" / "pages.jsonl").read_bytes()


def test_vidore_options_record_equals_keywords(tmp_path):
    from vidore_fixture import make_v2

    v2 = make_v2(tmp_path / "esg_reports_v2")
    kw = ingest_vidore(v2, tmp_path / "kw", language="english", cache_dir=tmp_path / "cache", progress=False)
    rec = ingest_vidore(v2, tmp_path / "rec", options=VidoreOptions(language="english", cache_dir=tmp_path / "cache", progress=False))
    assert (rec.pages, rec.queries, rec.qrels, rec.language) == (kw.pages, kw.queries, kw.qrels, "english") == (3, 2, 3, "english")
    assert (tmp_path / "kw" / "queries.jsonl").read_bytes() == (tmp_path / "rec" / "queries.jsonl").read_bytes()


def _too_many_parameters(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
            names = names[1:] if names[:1] in (["self"], ["cls"]) else names
            if len(names) > 8:
                out.append(f"{path.name}:{node.name} ({len(names)})")
    return out


def test_no_function_of_encode_and_ingest_takes_more_than_8_parameters():
    files = [*sorted((REPO / "vdr" / "encode").glob("*.py")), REPO / "vdr" / "distributed.py",
             *(REPO / "vdr" / "ingest" / f for f in ("pdf.py", "pdfdir.py", "vidore.py", "__init__.py"))]
    assert [x for f in files for x in _too_many_parameters(f)] == []


#: `vdr ingest`'s flags before its signature came from the option records.
OLD_INGEST_FLAGS = {"--out", "-o", "--dpi", "--max-pixels", "--rasterizer", "--ocr", "--ocr-lang", "--password", "--password-file",
                    "--workers", "--timeout", "--strict", "--no-strict", "--vidore", "--revision", "--language", "--split", "--quiet", "-q",
                    "--no-quiet", "--passages", "--format", "--overwrite", "--no-overwrite"}


def test_cli_ingest_keeps_its_flags_and_fills_the_option_records(tmp_path, monkeypatch):
    ingest_module = sys.modules["vdr.ingest"]  # vdr.ingest, the attribute, is the function
    params = typer.main.get_command(app).commands["ingest"].params
    assert OLD_INGEST_FLAGS <= {o for p in params for o in (*p.opts, *p.secondary_opts)}
    seen: dict = {}

    def fake(source, out, options=None, **kw):
        seen.update(source=source, options=options, kw=kw)
        raise _Captured("captured")

    monkeypatch.setattr(ingest_module, "ingest_pdfs", fake)
    monkeypatch.setattr(ingest_module, "ingest_vidore", fake)
    assert main(["ingest", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--dpi", "50", "--rasterizer", "poppler", "--ocr", "never",
                 "--workers", "2", "--timeout", "9", "--password", "pw", "-q"]) == 2
    assert seen["options"] == IngestOptions(dpi=50.0, rasterizer="poppler", ocr="never", workers=2, timeout=9.0, password="pw", progress=False)
    assert type(seen["options"].rasterizer) is str and seen["kw"] == {}
    assert main(["ingest", "-o", str(tmp_path / "out"), str(tmp_path / "in")]) == 2
    assert seen["options"] == IngestOptions()
    assert main(["ingest", "--vidore", "vidore/x", "-o", str(tmp_path / "v"), "--language", "english", "--split", "dev", "--ocr-lang", "deu"]) == 2
    assert seen["source"] == "vidore/x"
    assert seen["options"] == VidoreOptions(language="english", split="dev", ocr="never", ocr_lang="deu")  # --ocr auto: never for ViDoRe
