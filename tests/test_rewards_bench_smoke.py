"""Smoke test of ``benchmarks/rewards.py --quick``: it runs and reports sane numbers."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
pytest.importorskip("psutil")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "rewards.py"


@pytest.mark.slow
def test_quick_rewards_benchmark() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=600, cwd=SCRIPT.parents[1])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["benchmark"] == "rewards" and res["passages"] == 5000
    assert res["rewards_per_s"] > 0 and 0 <= res["search_share"] <= 1
    assert 0 < res["p50_ms_64"] <= res["p95_ms_64"]
    assert res["load_requests"] > 0 and res["load_errors"] == 0
    assert 0 < res["cache_entries"] <= res["cache_size"]
    assert 0 < res["server_search_ms_64"] < res["p95_ms_64"]
    assert res["dense_passages"] == 2000 and res["dense_rewards_per_s"] > 0
    assert res["multimodal_pages"] == 16 and res["multimodal_rewards_per_s"] > 0
    assert res["load_seconds"] == 5.0 and res["load_rss_growth_mib"] is not None
