"""The fused MaxSim kernel of vdr.retrieve.maxsim_gpu, run by Triton's CPU interpreter (no GPU here).

On CUDA the same kernel is compiled; benchmarks/gpu_check.py compares it on the device with the
reference path (float32 similarity matrix), with colpali-engine and with the published fused
kernels. Here the interpreter checks the kernel's indexing and masking over packed pages (offsets,
no padding): page lengths around the tile size, query rows that are not a multiple of the tile,
pages whose every similarity is negative (padding must never floor a maximum), one launch per
block of many pages, the packed pages read in place (no copy, no ``pad_sequence``), the float32
queries x float16 pages case (IEEE float32 products), and scores within 1e-5 (relative) of the
float32 reference. float16 and float32 only: the interpreter computes in NumPy, which has no
bfloat16 (and ignores ``input_precision``, so the TF32 variant is checked on the reference path,
tests/test_maxsim_packed.py).
"""

from __future__ import annotations

import pytest
import torch

from triton_interp import PRELUDE

triton = pytest.importorskip("triton", reason="Triton is not installed (it ships with torch's Linux wheels)")


# the kernel checks run in a fresh process under Triton's interpreter (tests/triton_interp.py)
_SCRIPT = PRELUDE + r"""

def exact_max(Q, rows):
    return torch.stack([(Q.double() @ r.double().T).amax(dim=1) for r in rows], dim=1)

def rel(a, b):
    return float(((a.double() - b.double()).abs() / b.double().abs().clamp_min(1e-30)).max())

out = {}
g = torch.Generator().manual_seed(0)
Q = unit(70, g)
rows = [unit(n, g) for n in (1, 3, 63, 64, 65, 130)]
exact = exact_max(Q, rows)
out["block"] = []
for config in ({}, {"bm": 16, "bn": 16}, {"bm": 128, "bn": 32}):
    got = G.block_maxima(Q, rows, config)
    out["block"].append([list(got.shape), str(got.dtype), float((got - exact).abs().max())])
# float32 queries x float16 pages (vdr's own case) and float32 x float32: IEEE float32 products
out["ieee"] = [float((G.block_maxima(Q.float(), rows) - exact).abs().max()),
               float((G.block_maxima(Q.float(), [r.float() for r in rows]) - exact).abs().max())]
out["modes"] = [G.mode(torch.float16, torch.float16), G.mode(torch.float32, torch.float16),
                G.mode(torch.float32, torch.float32, "tf32"), G.mode(torch.float16, torch.float16, "bf16")]

# every similarity negative: each query token's maximum is negative, and padding must not make it 0
neg = [-r for r in rows]
got = G.block_maxima(Q.abs(), [r.abs().neg() for r in rows])
want = exact_max(Q.abs(), [r.abs().neg() for r in rows])
out["negative"] = {"max_of_maxima": float(got.max()), "diff": float((got - want).abs().max())}

# maxsim over lists, packed pages and a budget that cuts several blocks
g = torch.Generator().manual_seed(1)
qs = [unit(n, g) for n in (5, 30, 17)]
ps = [unit(n, g) for n in (1, 63, 64, 65, 200, 7)]
calls = []
real = G.packed_maxima
def spy(Qk, tokens, offsets, **kw):
    calls.append({"pages": int(offsets.shape[0] - 1), "ptr": tokens.data_ptr(), "q_dtype": str(Qk.dtype), **kw})
    return real(Qk, tokens, offsets, **kw)
G.packed_maxima = spy
def no_padding(*a, **k):
    raise AssertionError("pad_sequence called")
torch.nn.utils.rnn.pad_sequence = no_padding
fused = scoring.maxsim(qs, ps)
list_calls = list(calls)
packed = scoring.PackedPages.pack(ps, ids=[f"p{i}" for i in range(len(ps))])
calls.clear()
fused_packed = scoring.maxsim(qs, packed)
packed_calls = list(calls)
calls.clear()
small = scoring.maxsim(qs, packed, budget_bytes=128 * 2 * 100)  # about 100 tokens per block
budget_calls = list(calls)
planned = [e - s for s, e in scoring._plan_packed([p.shape[0] for p in ps], 128 * 2 * 100, 64, 128, 2)]
calls.clear()
top = scoring.maxsim_topk(qs, packed, 3)
os.environ["VDR_MAXSIM_FUSED"] = "all"
calls.clear()
mixed = scoring.maxsim([q.float() for q in qs], ps)
mixed_calls = list(calls)
os.environ["VDR_MAXSIM_FUSED"] = "0"
reference = scoring.maxsim(qs, ps)
ref_top = scoring.maxsim_topk(qs, packed, 3)
exact = torch.stack([torch.stack([(q.double() @ p.double().T).amax(1).sum() for p in ps]) for q in qs])
out["maxsim"] = {
    "list_calls": [c["pages"] for c in list_calls], "packed_calls": [c["pages"] for c in packed_calls],
    "packed_in_place": [c["ptr"] == packed.tokens.data_ptr() for c in packed_calls],
    "budget_calls": [c["pages"] for c in budget_calls], "planned": planned, "mixed_calls": [[c["pages"], c["q_dtype"]] for c in mixed_calls],
    "shape": list(fused.shape), "rel_vs_reference": rel(fused, reference), "rel_vs_exact": rel(fused, exact),
    "packed_equal": bool(torch.equal(fused_packed, fused)), "budget_equal": bool(torch.equal(small, fused)),
    "mixed_rel_vs_exact": rel(mixed, exact),
    "top_ids": top.ids, "ref_top_ids": ref_top.ids, "top_rel": rel(top.scores, ref_top.scores),
}
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
    r = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_block_maxima_equals_exact_max(interpreted):
    # default tiles, small tiles, tall tiles: every page length around the tile size is exact
    for shape, dtype, diff in interpreted["block"]:
        assert shape == [70, 6] and dtype == "torch.float32"
        assert diff <= 2e-6
    assert all(d <= 2e-6 for d in interpreted["ieee"])
    assert interpreted["modes"] == [0, 1, 2, 3]


def test_padding_never_floors_a_negative_maximum(interpreted):
    neg = interpreted["negative"]
    assert neg["max_of_maxima"] < 0  # zero padding would have made some maxima 0
    assert neg["diff"] <= 2e-6


def test_one_launch_per_block_of_packed_pages_read_in_place(interpreted):
    m = interpreted["maxsim"]
    assert m["list_calls"] == [6] and m["packed_calls"] == [6]  # one launch for all six pages
    assert m["packed_in_place"] == [True]  # PackedPages: the kernel reads its tensor, no copy
    # a small budget: one launch per planned block (pages 1 + 63, then one page each), same scores
    assert m["budget_calls"] == m["planned"] == [2, 1, 1, 1, 1] and m["budget_equal"]
    assert m["packed_equal"]


def test_scores_within_1e5_relative_of_the_float32_reference(interpreted):
    m = interpreted["maxsim"]
    assert m["shape"] == [3, 6]
    assert m["rel_vs_reference"] <= 1e-5 and m["rel_vs_exact"] <= 1e-5
    assert m["mixed_calls"] == [[6, "torch.float32"]] and m["mixed_rel_vs_exact"] <= 1e-5
    assert m["top_ids"] == m["ref_top_ids"] and m["top_rel"] <= 1e-5


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
    assert scoring._fused(torch.device("cpu"), torch.float32, [q.float()], 128, "tf32")  # an opt-in variant
    assert not scoring._fused(torch.device("cpu"), torch.float16, [q], 128, "bf16")  # no bfloat16 in the interpreter
    monkeypatch.setenv("VDR_MAXSIM_FUSED", "all")
    assert scoring._fused(torch.device("cpu"), torch.float32, [q], 128)  # float32 queries, float16 pages: IEEE
    monkeypatch.setenv("VDR_MAXSIM_FUSED", "0")
    assert not scoring._fused(torch.device("cpu"), torch.float16, [q], 128)
