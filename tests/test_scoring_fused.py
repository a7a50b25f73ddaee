"""The fused MaxSim kernel of vdr.retrieve.maxsim_gpu, run by Triton's CPU interpreter (no GPU here).

On CUDA the same kernel is compiled; benchmarks/gpu_check.py compares it on the device with the
reference path (float32 similarity matrix) and with colpali-engine. Here the interpreter checks the
kernel's indexing and masking: page lengths around the tile size, a page shorter than the padded
width, query rows that are not a multiple of the tile. float16 only: the interpreter computes in
NumPy, which has no bfloat16.
"""

from __future__ import annotations

import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed (it ships with torch's Linux wheels)")


# Triton picks interpreter mode when it is imported, so the kernel checks run in a fresh process
# with TRITON_INTERPRET=1 from the start. NumPy 2 refuses ``int()`` of a one-element array, which the
# interpreter does for ``range`` bounds: the script gives it a 0-d read.
_SCRIPT = r"""
import json, sys
import triton.runtime.interpreter as interp
_orig = interp._patch_lang_tensor
def _patched(tensor):
    _orig(tensor)
    tensor.__index__ = lambda self: int(self.handle.data.reshape(-1)[0])
interp._patch_lang_tensor = _patched
import os, torch
import vdr.retrieve.maxsim_gpu as G
from vdr.retrieve import maxsim as scoring

def unit(n, g):
    return torch.nn.functional.normalize(torch.randn(n, 128, generator=g), dim=-1).half()

out = {}
g = torch.Generator().manual_seed(0)
Q = unit(70, g)
rows = [unit(n, g) for n in (1, 3, 63, 64, 65, 130)]
exact = torch.stack([(Q.float() @ r.float().T).amax(dim=1) for r in rows], dim=1)
out["block"] = []
for config in ({}, {"bm": 16, "bn": 16}, {"bm": 128, "bn": 32}):
    got = G.block_maxima(Q, rows, config)
    out["block"].append([list(got.shape), str(got.dtype), float((got - exact).abs().max())])

g = torch.Generator().manual_seed(1)
qs = [unit(n, g) for n in (5, 30, 17)]
ps = [unit(n, g) for n in (1, 63, 64, 65, 200, 7)]
calls = []
real = G.block_maxima
G.block_maxima = lambda *a, **k: calls.append(len(a[1])) or real(*a, **k)
fused = scoring.maxsim(qs, ps)
G.block_maxima = real
os.environ["VDR_MAXSIM_FUSED"] = "0"
reference = scoring.maxsim(qs, ps)
exact = torch.stack([torch.stack([(q.float() @ p.float().T).amax(1).sum() for p in ps]) for q in qs])
out["maxsim"] = {"pages_through_kernel": sum(calls), "shape": list(fused.shape),
                 "vs_reference": float((fused - reference).abs().max()), "vs_exact": float((fused - exact).abs().max())}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def interpreted() -> dict:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, TRITON_INTERPRET="1", VDR_TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_block_maxima_equals_exact_max(interpreted):
    # default tiles, small tiles, tall tiles: every page length around the tile size is exact
    for shape, dtype, diff in interpreted["block"]:
        assert shape == [70, 6] and dtype == "torch.float32"
        assert diff <= 2e-6


def test_maxsim_uses_the_fused_path_and_agrees_with_the_reference(interpreted):
    m = interpreted["maxsim"]
    assert m["pages_through_kernel"] == 6 and m["shape"] == [3, 6]
    assert m["vs_reference"] <= 1e-5 and m["vs_exact"] <= 1e-5


def test_fused_path_off_on_cpu_and_for_mixed_dtypes(monkeypatch):
    from vdr.retrieve import maxsim as scoring

    monkeypatch.delenv("VDR_TRITON_INTERPRET", raising=False)
    q = torch.zeros(0, 128, dtype=torch.float16)
    assert not scoring._fused(torch.device("cpu"), torch.float16, [q], 128)  # CPU: the reference path, bit-exact
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("VDR_TRITON_INTERPRET", "1")
    assert scoring._fused(torch.device("cpu"), torch.float16, [q], 128)
    assert not scoring._fused(torch.device("cpu"), torch.float16, [q.float()], 128)  # pages in float32
    assert not scoring._fused(torch.device("cpu"), torch.float32, [q.float()], 128)  # not 16-bit
    assert not scoring._fused(torch.device("cpu"), torch.float16, [torch.zeros(0, 96).half()], 96)  # dim not 2^n
    monkeypatch.setenv("VDR_MAXSIM_FUSED", "0")
    assert not scoring._fused(torch.device("cpu"), torch.float16, [q], 128)
