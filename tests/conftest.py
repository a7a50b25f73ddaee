"""Session fixtures shared by every test module (built once per test session), and the test tiers.

Test tiers: every test has exactly one, given here (:func:`tier_of`) from the table
:data:`MODULE_TIERS` (each test module's tier), :data:`TEST_TIERS` (single tests above their
module's tier), the fixtures it uses (:data:`MODEL_FIXTURES`) and the tier marks written on it. The
tiers, cheapest first (a test's tier is the last one that applies to it):

* ``core`` -- no reference implementation, no model, no ``../shared``, no browser, no Java: what
  ``make test-fast`` runs (``pytest -m core``). The hand-computed metric goldens are core.
* ``crosscheck`` -- compares against a reference implementation (pytrec_eval, ranx, choix, pandas'
  reader) or reads ``../shared`` (trec_eval's expected outputs, real-world PDFs).
* ``model`` -- builds or loads a torch model (a tiny ColQwen2.5/ColPali, sentence-transformers'
  MiniLM) or imports a model library (colpali-engine, sentence-transformers, mteb).
* ``slow`` -- long-running (torchrun, Java/pyserini, benchmarks, TRL, Triton's interpreter, browser).
* ``gpu`` -- needs CUDA: skipped, with the reason, on a machine without one.

The tier marks a test module writes (``@pytest.mark.slow``, ``pytestmark = pytest.mark.model``)
only raise a test's tier; after collection each test carries exactly one tier mark, so ``-m core``,
``-m crosscheck``, ... partition the suite (``tests/test_layout.py`` checks that every test module
is in the table).

Other markers (declared in pyproject.toml, ``--strict-markers``):

* ``shared("SUBFOLDER")`` -- reads ``../shared/SUBFOLDER`` (see :mod:`shared_data`); skipped, with
  the path looked at, when it is absent (a skip mark added at collection). Tier: at least
  ``crosscheck``.

Nothing is written inside the repository: the session fails (an error at teardown naming the files)
when the repository tree gained files during the run.
"""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

from report_fixtures import lexical_results, sample_corpus  # noqa: F401
from served_fixtures import served_setup  # noqa: F401
from shared_data import REPO_ROOT, missing_reason
from tiny_models import colpali_dir, colqwen, colqwen_dir  # noqa: F401
from tiny_rerank import cross_encoder_dir, monovlm_dir  # noqa: F401
from tiny_st import tiny_st_dir  # noqa: F401

# hypothesis keeps its example database and caches in ./.hypothesis by default: inside the repository
_HYPOTHESIS_HOME = tempfile.TemporaryDirectory(prefix="vdr-hypothesis-")  # removed at exit
set_hypothesis_home_dir(_HYPOTHESIS_HOME.name)
# vdr's user cache (the semantic backend's ONNX export, shared by every corpus): one per test session,
# never the developer's ~/.cache/vdr (subprocesses inherit it)
_USER_CACHE = tempfile.TemporaryDirectory(prefix="vdr-user-cache-")  # removed at exit
os.environ["VDR_CACHE"] = _USER_CACHE.name

#: the tiers, cheapest first: a test's tier is the last one that applies to it
TIERS = ("core", "crosscheck", "model", "slow", "gpu")

#: every test module -> its tier (tests/test_layout.py fails when a test module is missing here)
MODULE_TIERS = {
    "test_ance": "model",  # a tiny ANCE checkpoint; the Pyserini comparison is marked slow
    "test_backend_conformance": "core",  # model/slow params and tests marked in the module
    "test_backends": "core",
    "test_backends_text": "core",
    "test_benchmark_smoke": "slow",  # runs benchmarks/*.py --quick in subprocesses
    "test_budget_backends": "core",
    "test_cli": "core",
    "test_cli_help": "core",
    "test_cli_backend_options": "core",
    "test_cli_parity": "core",
    "test_compare": "core",
    "test_compare_runs": "core",
    "test_convert": "core",
    "test_convsearch_r1": "core",  # the live Pyserini tests are marked slow
    "test_corpus": "core",
    "test_dense_scale": "model",  # sentence-transformers' MiniLM
    "test_distributed": "core",  # the torchrun tests are marked slow
    "test_doctests": "core",
    "test_encoders": "model",  # tiny ColQwen2.5 / ColPali checkpoints
    "test_encode_pipeline": "core",  # stand-in processor and forward; the tiny ColQwen2.5 tests are marked model
    "test_gpu": "gpu",
    "test_imports": "core",
    "test_ingest_generated": "core",
    "test_ingest_images": "core",
    "test_ingest_out": "core",
    "test_ingest_pdf": "crosscheck",  # real-world PDFs from ../shared/pdfs
    "test_ingest_perf": "core",
    "test_ingest_robustness": "core",  # the Tesseract tests skip without it
    "test_ingest_unavailable": "core",
    "test_ingest_vidore": "core",
    "test_vidore_evaluate": "core",
    "test_io": "core",
    "test_id_join": "core",  # issue 34.1: lexical backend and run files only
    "test_large_grades": "core",  # issue 34.4
    "test_results_folder_keeps": "core",  # issue 34.2: lexical backend only
    "test_judge_cli": "core",
    "test_judge_fit": "core",
    "test_judge_parse": "core",
    "test_judge_sim": "core",
    "test_layout": "core",
    "test_lexical_scale": "core",
    "test_lucene_analyzer": "core",  # the NLTK cross-check and the live Lucene tests are marked
    "test_llm": "core",
    "test_llm_robustness": "core",  # a local fake OpenAI-compatible server (HTTP 429, content parts)
    "test_options": "core",
    "test_metric_plan": "core",
    "test_metrics_measures": "core",  # the cross-checks are marked, mteb's hole() below
    "test_metrics": "core",  # hand-computed goldens; the pytrec_eval / trec_eval tests are marked crosscheck
    "test_trec_eval_dropin": "crosscheck",  # trec_eval 10 / ir_measures outputs recorded; some read ../shared/trec_eval_ref
    "test_trec_eval_all": "crosscheck",  # trec_eval's own all_trec outputs from ../shared/trec_eval_ref
    "test_mteb": "model",  # mteb imports torch and transformers
    "test_mteb_vidore3": "model",  # a tiny ColQwen2.5 under vdr evaluate and mteb.evaluate (ViDoRe V3 parity)
    "test_page_images": "core",
    "test_passages": "core",
    "test_pipeline": "slow",  # every backend end to end
    "test_protocol": "core",
    "test_pyserini_backend": "core",  # the live (Java) tests are marked slow
    "test_queries_tsv": "core",
    "test_query_groups": "core",
    "test_group_keys": "core",  # canonical group keys, overlapping groups: exact p by enumeration
    "test_holm_reading": "core",  # Holm reading: exact sign-flip enumeration and Holm written in the test
    "test_query_budget": "core",
    "test_query_cache": "core",
    "test_rcp_metric": "core",
    "test_report": "core",
    "test_report_links": "core",  # percent-encoded page links, resolved as a browser resolves them
    "test_report_browser": "slow",  # headless Chromium
    "test_report_notebook": "model",  # nbclient runs the notebook
    "test_rerun_qcache": "core",
    "test_results": "core",
    "test_p_format": "core",  # p never rounded across alpha: exact p by enumeration
    "test_pairs_family": "core",  # one Holm family for --pairs all; the statsmodels check is crosscheck
    "test_rewards": "core",
    "test_rewards_bench_smoke": "slow",
    "test_rewards_trl": "slow",  # TRL's GRPO trainer
    "test_training_health": "core",  # issue 37.4: synthetic training log, fake scorers, one lexical server
    "test_rewrite": "core",
    "test_safe_outputs": "core",
    "test_served_engines": "model",  # Qdrant, LanceDB, fast-plaid (torch) against exact MaxSim; issue 36
    "test_served_audit": "core",  # served systems vs exact MaxSim (issue 36): hand-built runs, a registered BM25-based served backend
    "test_semantic_prompts": "model",  # tiny sentence-transformers models declaring prompts
    "test_semantic_similarity": "model",  # tiny sentence-transformers models declaring similarity_fn_name
    "test_rerank": "model",  # issue 37.3: a tiny cross-encoder and a tiny Qwen2-VL (MonoVLMRanker) built offline
    "test_served": "model",  # issue 36: a tiny ColQwen2.5's page store served compressed; parse tests are plain
    "test_sample_assets": "core",
    "test_samples": "core",  # N samples as one system (issue 37.2): lexical on the bundled sample; the ranx check is crosscheck
    "test_scoring": "core",  # MaxSim on torch tensors; no model
    "test_maxsim_packed": "core",  # packed pages and precision variants on the CPU reference path
    "test_maxsim_finite": "core",  # non-finite vectors refused; the fused-kernel checks (Triton interpreter) are slow
    "test_scoring_fused": "slow",  # the kernel run by Triton's CPU interpreter (an optional library), ~20 s
    "test_serve": "core",
    "test_store": "core",  # the tests with a tiny model are model (fixtures)
    "test_encoder_settings": "core",  # the tests with the tiny ColQwen2.5 are marked model
    "test_text": "core",
    "test_text_encoder": "model",
    "test_textscale_smoke": "slow",
    "test_trec_comments": "core",
    "test_types": "core",
    "test_ux": "core",  # issue 35; the test of every offline backend (MiniLM) and the tiny model's are model
    "test_variant_backends": "model",  # issue 37.1: per-backend variants over the tiny ColQwen2.5 corpus of test_served
}

#: single tests above their module's tier, as ``module::function``
TEST_TIERS = {
    "test_maxsim_finite::test_fused_path_refuses_as_the_reference_path": "slow",  # Triton's CPU interpreter
    "test_maxsim_finite::test_fused_and_reference_agree_on_what_they_accept": "slow",
    "test_pairs_family::test_one_family_one_holm_p_and_the_pair_verdict": "crosscheck",  # statsmodels' Holm
    "test_backends::test_multimodal_and_mteb_backends_without_a_model_are_unavailable": "model",  # imports mteb
    "test_backends::test_mteb_disagreement_is_reported_with_its_reason": "model",
    "test_backends::test_mteb_main_metric_of_vidore_v2_datasets": "model",
    "test_compare_runs::test_compare_cli_values_hand_computed_and_pytrec_eval": "crosscheck",
    "test_compare_runs::test_pairs_all_against_ranx": "crosscheck",
    "test_samples::test_rrf_fusion_equals_ranx": "crosscheck",
    "test_convert::test_evaluate_converted_topiocqa_lexical_matches_pytrec_eval": "crosscheck",
    "test_convert::test_evaluate_drop_missing_judged_is_labelled": "crosscheck",  # pytrec_eval
    "test_judge_fit::test_bt_gradient_and_choix_crosscheck": "crosscheck",
    "test_judge_sim::test_reversed_windows_cancel_position_bias": "slow",  # a long simulated judge run
    "test_metrics_measures::test_hole_at_k_is_mtebs_hole": "model",  # imports mteb
    "test_metrics_measures::test_against_recorded_ir_measures_values": "crosscheck",
    "test_metrics_measures::test_against_ir_measures_itself": "crosscheck",
    "test_passages::test_pandas_default_quoting_loses_msmarco_passages": "crosscheck",  # pandas' own reader
    "test_protocol::test_rr_full_equals_the_convsearch_r1_evaluation_code": "crosscheck",  # pytrec_eval
      "test_scoring::test_padding_never_scores_and_cannot_flip_a_ranking": "model",  # colpali-engine
    "test_scoring::test_equals_colpali_engine_where_padding_cannot_matter": "model",
    "test_text::test_semantic_sees_the_same_text_for_every_encoding": "model",  # sentence-transformers
}

#: fixtures that build or load a torch model: a test using any of them is at least ``model``
MODEL_FIXTURES = frozenset({"colqwen", "colqwen_dir", "colpali_dir", "tiny_st_dir", "served_setup", "cross_encoder_dir", "monovlm_dir"})


def tier_of(module: str, function: str, fixtures=(), marks=()) -> str:
    """The one tier of test ``function`` of test module ``module`` (file stem) that uses
    ``fixtures`` and carries the marks named ``marks``: the most expensive of its module's tier,
    its own entry in :data:`TEST_TIERS`, ``model`` for a :data:`MODEL_FIXTURES` fixture,
    ``crosscheck`` for a ``shared`` mark, and the tier marks written on it. A module missing from
    :data:`MODULE_TIERS` counts as ``core`` here (and fails tests/test_layout.py)."""
    found = {MODULE_TIERS.get(module, "core"), TEST_TIERS.get(f"{module}::{function}", "core")}
    if MODEL_FIXTURES & set(fixtures):
        found.add("model")
    if "shared" in marks:
        found.add("crosscheck")
    found.update(m for m in marks if m in TIERS)
    return max(found, key=TIERS.index)


def _cuda_missing() -> str | None:
    """Why a ``gpu`` test cannot run here, or ``None`` when CUDA is available."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return "torch is not installed"
    return None if torch.cuda.is_available() else "needs CUDA (torch.cuda.is_available() is False)"


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the tier marks
def pytest_collection_modifyitems(config, items):
    """Give every test its one tier mark (:func:`tier_of`); skip, with the reason, ``gpu`` tests
    without CUDA and ``shared`` tests without their ``../shared`` folder."""
    tiers = [tier_of(item.path.stem, getattr(item, "originalname", item.name), getattr(item, "fixturenames", ()),
                     {m.name for m in item.iter_markers()}) for item in items]
    # the tier marks written in the modules (on a test, a class or the module) are replaced by the
    # one tier computed above, so that each test carries exactly one
    for item in items:
        for node in item.listchain():
            if any(m.name in TIERS for m in node.own_markers):
                node.own_markers[:] = [m for m in node.own_markers if m.name not in TIERS]
    no_cuda = "unknown"
    for item, tier in zip(items, tiers):
        item.add_marker(getattr(pytest.mark, tier))
        if tier == "gpu":
            if no_cuda == "unknown":
                no_cuda = _cuda_missing()
            if no_cuda:
                item.add_marker(pytest.mark.skip(reason=f"gpu tier: {no_cuda}"))
        for mark in item.iter_markers("shared"):
            reason = missing_reason(*mark.args)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


# ------------------------------------------------------------------ nothing written into the repository
#: written by Python and pytest themselves, not by tests
_OWN = {"__pycache__", ".pytest_cache", ".git", ".venv"}


def _repo_files() -> set[str]:
    found = set()
    for dirpath, dirnames, filenames in os.walk(REPO_ROOT):
        dirnames[:] = [d for d in dirnames if d not in _OWN and not d.endswith(".egg-info")]
        rel = os.path.relpath(dirpath, REPO_ROOT)
        found.update(os.path.normpath(os.path.join(rel, f)) for f in filenames)
        if not filenames and not dirnames:
            found.add(rel + os.sep)  # an empty folder counts too
    return found


@pytest.fixture(scope="session", autouse=True)
def repository_stays_clean():
    """Fail the session when a test wrote files into the repository (tests use ``tmp_path``)."""
    before = _repo_files()
    yield
    new = sorted(_repo_files() - before)
    if new:
        shown = "\n  ".join(new[:20]) + (f"\n  ... and {len(new) - 20} more" if len(new) > 20 else "")
        pytest.fail(f"the tests wrote {len(new)} file(s) into the repository {REPO_ROOT} (use tmp_path):\n  {shown}",
                    pytrace=False)


@pytest.fixture(autouse=True)
def _no_terminal_width(monkeypatch):
    """The CLI fits its tables to ``COLUMNS`` (vdr.progress.console_width): tests see whole lines,
    whatever the shell running them exports; a test that wants a width sets it."""
    monkeypatch.delenv("COLUMNS", raising=False)
