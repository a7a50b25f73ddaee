"""Smoke test of the metrics benchmark: ``benchmarks/metrics.py --quick`` runs and reports sane numbers.

Needs the ``bench`` extra (pytrec_eval and ranx); skipped without it. About 5 s once numba's cache is
warm; the first run on a machine compiles ranx's kernels (about 40 s, not counted in the timings).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pytrec_eval")
pytest.importorskip("ranx")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "metrics.py"


@pytest.mark.slow
@pytest.mark.crosscheck
def test_quick_benchmark_runs_and_agrees_with_pytrec_eval() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        capture_output=True,
        text=True,
        timeout=180,
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
