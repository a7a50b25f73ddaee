"""MaxSim refuses non-finite vectors on every path (issue 34 item 6): the reference path over lists,
packed pages and page sources, ``maxsim`` and ``maxsim_topk``, and the fused kernel (run by Triton's
CPU interpreter in a fresh process, as in tests/test_scoring_fused.py). The error names the query
(position) or the page (id, else position) and the token. On the inputs they accept, the reference
and fused paths agree with the exact float64 MaxSim (``sum_i max_j <q_i, p_j>``, computed here).
"""

from __future__ import annotations

import math

import pytest
import torch

from vdr.errors import InputError
from vdr.retrieve.maxsim import PackedPages, SubsetSource, maxsim, maxsim_topk

from triton_interp import PRELUDE


def _unit(n: int, g: torch.Generator, dim: int = 16, dtype=torch.float32) -> torch.Tensor:
    return torch.nn.functional.normalize(torch.randn(n, dim, generator=g), dim=-1).to(dtype)


def _data(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return [_unit(n, g, dtype=dtype) for n in (3, 5)], [_unit(n, g, dtype=dtype) for n in (2, 4, 7, 1)]


def _exact(qs, ps) -> torch.Tensor:
    return torch.stack([torch.stack([(q.double() @ p.double().T).amax(1).sum() for p in ps]) for q in qs])


BAD = [float("nan"), float("inf"), -float("inf")]


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("layout", ["list", "packed", "source"])
def test_a_non_finite_page_is_refused_naming_it(bad, layout):
    qs, ps = _data()
    ps[2][4, 7] = bad  # page 2, token 4
    ids = ["a", "b", "c", "d"]
    pages = {"list": ps, "packed": PackedPages.pack(ps, ids=ids), "source": SubsetSource(PackedPages.pack(ps, ids=ids), ids)}[layout]
    name = "page 2" + ("" if layout == "list" else " (id 'c')")
    for call in (lambda: maxsim(qs, pages), lambda: maxsim_topk(qs, pages, 2)):
        with pytest.raises(InputError) as e:
            call()
        assert str(e.value).startswith(f"MaxSim: {name} holds a non-finite value (NaN or infinity) in token 4")


@pytest.mark.parametrize("bad", BAD)
def test_a_non_finite_query_is_refused_naming_it(bad):
    qs, ps = _data()
    qs[1][2, 0] = bad
    for call in (lambda: maxsim(qs, ps), lambda: maxsim_topk(qs, PackedPages.pack(ps), 2)):
        with pytest.raises(InputError, match=r"^MaxSim: query 1 holds a non-finite value \(NaN or infinity\) in token 2"):
            call()


def test_an_overflowing_score_is_refused_naming_query_and_page():
    qs, ps = _data()
    ps[1] = ps[1] * 1e20  # finite, but <q, p> ~ 1e20 per token: fine; scaled queries overflow the products
    qs[0] = qs[0] * 1e20
    with pytest.raises(InputError, match=r"MaxSim of query 0 with page 1 is (inf|-inf|nan) \(the products or their sum overflow float32\)"):
        maxsim(qs, ps)


def test_finite_inputs_score_as_the_exact_maxsim():
    qs, ps = _data()
    want = _exact(qs, ps)
    got = maxsim(qs, ps)
    assert torch.isfinite(got).all() and float(((got.double() - want).abs() / want.abs()).max()) <= 1e-6
    top = maxsim_topk(qs, PackedPages.pack(ps, ids=["a", "b", "c", "d"]), 2)
    order = want.argsort(dim=1, descending=True)[:, :2]
    assert top.ids == [[["a", "b", "c", "d"][j] for j in row] for row in order.tolist()]



_SCRIPT = PRELUDE + r"""
from vdr.errors import InputError

calls = []
real = G.packed_maxima
def spy(*a, **k):
    calls.append(1)
    return real(*a, **k)
G.packed_maxima = spy

def err(fn):
    try:
        fn()
    except InputError as e:
        return str(e)
    return None

out = {}
g = torch.Generator().manual_seed(2)
qs = [unit(n, g) for n in (3, 9)]
ps = [unit(n, g) for n in (1, 65, 7)]
ids = ["x", "y", "z"]
exact = torch.stack([torch.stack([(q.double() @ p.double().T).amax(1).sum() for p in ps]) for q in qs])
fused = scoring.maxsim(qs, scoring.PackedPages.pack(ps, ids=ids))
out["fused_calls"] = len(calls)
os.environ["VDR_MAXSIM_FUSED"] = "0"
reference = scoring.maxsim(qs, scoring.PackedPages.pack(ps, ids=ids))
os.environ["VDR_MAXSIM_FUSED"] = "1"
rel = lambda a, b: float(((a.double() - b.double()).abs() / b.double().abs()).max())
out["rel_fused_exact"], out["rel_reference_exact"] = rel(fused, exact), rel(reference, exact)
# large finite 16-bit values: both paths accept them and agree
big = [p * 60000 for p in ps]
bq = [q * 60000 for q in qs]
big_exact = torch.stack([torch.stack([(q.double() @ p.double().T).amax(1).sum() for p in big]) for q in bq])
calls.clear()
big_fused = scoring.maxsim(bq, scoring.PackedPages.pack(big, ids=ids))
out["big_calls"] = len(calls)
os.environ["VDR_MAXSIM_FUSED"] = "0"
big_ref = scoring.maxsim(bq, scoring.PackedPages.pack(big, ids=ids))
os.environ["VDR_MAXSIM_FUSED"] = "1"
out["big_rel"] = [rel(big_fused, big_exact), rel(big_ref, big_exact)]
# a NaN page and a NaN query: refused on the fused path, with the reference path's message
bad = [p.clone() for p in ps]
bad[1][64, 3] = float("nan")
calls.clear()
out["page_fused"] = err(lambda: scoring.maxsim_topk(qs, scoring.PackedPages.pack(bad, ids=ids), 2))
out["page_fused_calls"] = len(calls)
os.environ["VDR_MAXSIM_FUSED"] = "0"
out["page_reference"] = err(lambda: scoring.maxsim_topk(qs, scoring.PackedPages.pack(bad, ids=ids), 2))
os.environ["VDR_MAXSIM_FUSED"] = "1"
badq = [q.clone() for q in qs]
badq[0][1, 0] = float("inf")
out["query_fused"] = err(lambda: scoring.maxsim(badq, ps))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def interpreted() -> dict:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("triton", reason="Triton is not installed (it ships with torch's Linux wheels)")
    env = dict(os.environ, TRITON_INTERPRET="1", VDR_TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_fused_path_refuses_as_the_reference_path(interpreted):
    assert interpreted["fused_calls"] >= 1 and interpreted["big_calls"] >= 1  # the kernel ran on the finite inputs
    want = "MaxSim: page 1 (id 'y') holds a non-finite value (NaN or infinity) in token 64"
    assert interpreted["page_fused"].startswith(want) and interpreted["page_reference"].startswith(want)
    assert interpreted["page_fused_calls"] == 0  # refused before the kernel scored it
    assert interpreted["query_fused"].startswith("MaxSim: query 0 holds a non-finite value (NaN or infinity) in token 1")


def test_fused_and_reference_agree_on_what_they_accept(interpreted):
    assert interpreted["rel_fused_exact"] <= 1e-5 and interpreted["rel_reference_exact"] <= 1e-5
    assert all(r <= 1e-5 for r in interpreted["big_rel"]) and not any(math.isnan(r) for r in interpreted["big_rel"])
