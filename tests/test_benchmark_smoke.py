"""Smoke tests of the benchmarks: ``benchmarks/metrics.py --quick`` runs and reports sane numbers; the
long-tail case of ``benchmarks/maxsim.py`` stays within its memory budget.

The metrics one needs the ``bench`` extra (pytrec_eval and ranx); skipped without it. About 5 s once numba's cache is
warm; the first run on a machine compiles ranx's kernels (about 40 s, not counted in the timings).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "metrics.py"


@pytest.mark.slow
@pytest.mark.crosscheck
def test_quick_benchmark_runs_and_agrees_with_pytrec_eval() -> None:
    pytest.importorskip("pytrec_eval")
    pytest.importorskip("ranx")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,  # a shared 2-core machine took more than 180 s
        cwd=SCRIPT.parents[1],
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    res = json.loads(last)
    assert res["benchmark"] == "metrics"
    assert res["queries"] == 2000 and res["depth"] == 100
    assert res["entries"] == 2000 * 100
    for tool in ("vdr", "pytrec_eval", "ranx"):
        assert res[f"{tool}_s"] > 0
        assert res[f"{tool}_entries_per_s"] > 0
    assert res["speedup_vs_pytrec_eval"] > 0 and res["speedup_vs_ranx"] > 0
    assert res["max_abs_diff_vs_pytrec_eval"] < 1e-9
    assert res["ranx_compile_excluded"] is True


@pytest.mark.slow
def test_maxsim_long_tail_case_stays_within_its_budget() -> None:
    """The long-tail case of benchmarks/maxsim.py: one 8,192-token page among 1,999 of 40 tokens.
    Planned by real tokens and padded to the longest page, its one block would take tens of GiB; with
    blocks planned by padded volume, what scoring adds to the child's RSS stays within the budget."""
    spec = importlib.util.spec_from_file_location("vdr_bench_maxsim", SCRIPT.parent / "maxsim.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    res = bench.run_longtail(4, 64)
    assert res["longtail_budget_mib"] == 64 and res["longtail_pages"] == 2000
    assert 0 < res["longtail_scoring_rss_mib"] <= 64
    assert res["longtail_peak_rss_mib"] >= res["longtail_before_rss_mib"]
    assert res["longtail_unplanned_block_mib"] > 50 * 64  # the previous plan: 5.4 GiB, 86x the budget


# ../shared beside the checkout (one level further up from a git worktree under wt/)
SHARED_PDF = next((p for p in (Path(__file__).resolve().parents[k] / "shared" / "pdfs" / "pdflatex-4-pages.pdf" for k in (2, 3))
                   if p.is_file()), Path(__file__).resolve().parents[2] / "shared" / "pdfs" / "pdflatex-4-pages.pdf")


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_PDF.is_file(), reason=f"shared test PDF not found at {SHARED_PDF}")
def test_rasterize_benchmark_reports_both_ratios_and_the_encoding() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT.parent / "rasterize.py"), "--pdf", str(SHARED_PDF), "--dpi", "72", "--repeat", "1"],
        capture_output=True, text=True, timeout=300, cwd=SCRIPT.parents[1],
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["pages"] == 4 and res["workers"] == 2 and res["repeat"] == 1
    assert res["ratio"] > 0 and res["ratio_end_to_end"] > 0
    assert res["image_encoding"]["format"] == "png" and res["image_encoding"]["lossless"] is True
    assert res["vdr_image_bytes"] > 0 and res["pdf2image_png_bytes"] > 0
    assert res["worker_start_method"] == "fork"  # as `vdr ingest` starts its workers


@pytest.mark.slow
def test_encode_pipeline_benchmark_reports_the_issue_keys() -> None:
    """benchmarks/encode_pipeline.py --quick: the real ColQwen2.5 processor (752 image tokens on an A4
    page at its default budget) and ColPali's (1,024 + prompt), and the pipeline's overlap figures."""
    proc = subprocess.run([sys.executable, str(SCRIPT.parent / "encode_pipeline.py"), "--quick", "--workers", "1"],
                          capture_output=True, text=True, timeout=300, cwd=SCRIPT.parents[1])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["benchmark"] == "encode_pipeline" and res["workers"] == 1 and res["page_pixels"] == [1191, 1684]
    assert res["stand_in"] == "async (queued as a CUDA launch)"
    qwen, pali = res["processors"]["colqwen2.5"], res["processors"]["colpali"]
    assert qwen["tokens_per_page"] == 752 and pali["tokens_per_page"] > 1024
    for p in (qwen, pali):
        assert p["preprocess_pages_per_s_per_worker"] > 0 and set(p["runs"]) == {"balanced", "h200_target"}
        for run in p["runs"].values():
            assert run["pages"] == 12 and run["pipeline_s"] > 0
            assert run["overlap_ratio"] == pytest.approx(run["pipeline_s"] / max(run["forward_s"], run["preprocess_s"]), rel=1e-3)
    b = qwen["runs"]["balanced"]
    assert res["overlap_ratio"] == b["overlap_ratio"] and b["forward_s"] == pytest.approx(b["preprocess_s"], rel=1e-3)


@pytest.mark.slow
def test_gpu_check_dry_run_on_the_cpu_lists_every_maxsim_path() -> None:
    """benchmarks/gpu_check.py --dry-run: the MaxSim comparison at small sizes on the CPU, the peers'
    presence, colpali-engine's backend pinned; vdr's exact paths equal the float32 reference."""
    proc = subprocess.run([sys.executable, str(SCRIPT.parent / "gpu_check.py"), "--dry-run", "--device", "cpu"],
                          capture_output=True, text=True, timeout=300, cwd=SCRIPT.parents[1])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    mc = res["maxsim_compare"]
    assert res["dry_run"] is True and mc["colpali_scores_backend"] == "torch"
    assert set(mc["peers"]) == {"flash-maxsim", "late-interaction-kernels", "colpali-engine"}
    for p in mc["peers"].values():
        assert p["available"] or p["why"]
    for shape in ("vidore_v2", "issue_shape"):
        paths = mc[shape]["paths"]
        for name in ("vdr_exact", "vdr_exact_packed", "vdr_topk100_packed", "vdr_reference_path", "vdr_fp32_queries"):
            assert paths[name]["seconds"] > 0 and paths[name]["max_rel_diff"] <= 1e-5, (shape, name)
        for name in ("vdr_tf32_variant", "vdr_bf16_variant", "colpali_engine"):
            assert 0 < paths[name]["max_rel_diff"] < 1e-2, (shape, name)  # not exact, and named so
        assert paths["flash_maxsim"]["skipped"] and paths["late_interaction_kernels"]["skipped"]  # need CUDA


@pytest.mark.slow
def test_gpu_check_small_on_the_cpu_times_colpali_engines_readme_loop() -> None:
    """benchmarks/gpu_check.py --small on the CPU (tiny random ColQwen2.5): the encode figures carry
    the FLOP count, the model-FLOPs utilisation and colpali-engine's README loop on the same pages,
    whose vectors equal vdr's (float32 on the CPU: no bf16 rounding)."""
    proc = subprocess.run([sys.executable, str(SCRIPT.parent / "gpu_check.py"), "--small", "--device", "cpu", "--pages", "4",
                           "--batch-size", "2", "--encode-seconds", "5", "--readme-seconds", "5", "--encode-only"],
                          capture_output=True, text=True, timeout=600, cwd=SCRIPT.parents[1])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    enc = json.loads(proc.stdout.strip().splitlines()[-1])["encode"]
    assert enc["pages"] == 4 and enc["flops_per_page"] > 0 and enc["model_tflops_per_s"] > 0 and enc["mfu_vs_bf16_matmul"] > 0
    assert enc["mfu_vs_bf16_matmul"] == pytest.approx(enc["model_tflops_per_s"] / enc["bf16_matmul_tflops"], rel=2e-3)
    assert enc["colpali_readme_loop"]["pages"] == 4 and enc["colpali_readme_loop"]["batch_size"] == 2
    assert enc["vs_colpali_readme_loop"] == pytest.approx(enc["pages_per_s"] / enc["colpali_readme_loop"]["pages_per_s"], rel=1e-2)
    agree = enc["vectors_vs_readme_loop"]
    assert agree["same_token_counts"] and agree["pages"] == 2 and agree["max_abs_diff"] <= 1e-5 and agree["min_token_cosine"] > 0.9999


@pytest.mark.slow
def test_trec_eval_cli_benchmark_small(tmp_path) -> None:
    """benchmarks/trec_eval_cli.py on 2 small runs: without a trec_eval binary one JSON line saying "skipped";
    with one (TREC_EVAL), the lines agree and the ratio is vdr_s / trec_eval_s."""
    import os

    script = SCRIPT.parent / "trec_eval_cli.py"
    small = ["--runs", "2", "--queries", "5", "--depth", "50"]
    env = {k: v for k, v in os.environ.items() if k != "TREC_EVAL"}
    proc = subprocess.run([sys.executable, str(script), *small], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["benchmark"] == "trec_eval_cli" and res["runs"] == 2 and "trec_eval binary" in res["skipped"]
    binary = os.environ.get("TREC_EVAL")
    if not binary or not Path(binary).exists():
        pytest.skip("TREC_EVAL (a trec_eval 10 binary) not set: the timed comparison was not run")
    proc = subprocess.run([sys.executable, str(script), *small, "--trec-eval", binary], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["differing_lines"] == 0 and res["lines"] > 2 * 5 * 90
    assert res["ratio"] == pytest.approx(res["vdr_s"] / res["trec_eval_s"], rel=1e-3)


@pytest.mark.slow
def test_served_benchmark_quick() -> None:
    """benchmarks/served.py --quick (issue 36): one JSON line per system, storage ratios as the formats
    define them (float16 store: int8 half, binary 1/16), fp16 storage is the exact system (overlap 1)."""
    script = SCRIPT.parent / "served.py"
    proc = subprocess.run([sys.executable, str(script), "--quick", "--systems", "fp16,int8,binary,pool:3"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = {d["system"]: d for d in map(json.loads, proc.stdout.strip().splitlines())}
    assert list(lines) == ["multimodal-fp16", "multimodal-int8", "multimodal-binary", "multimodal-pool3"]
    assert lines["multimodal-fp16"]["overlap@10"] == 1.0 and lines["multimodal-fp16"]["storage_ratio"] == 1.0
    assert lines["multimodal-int8"]["storage_ratio"] == 0.5 and lines["multimodal-binary"]["storage_ratio"] == 0.0625
    assert 0 < lines["multimodal-pool3"]["storage_ratio"] <= 1 / 3 and lines["multimodal-pool3"]["pages"] == 40
    for d in lines.values():
        assert d["time_ratio"] == pytest.approx(d["ms_per_query"] / d["exact_ms_per_query"], rel=1e-9)
        assert 0 <= d["overlap@10"] <= 1
