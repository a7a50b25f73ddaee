"""The gpu tier: MaxSim on a CUDA device gives the CPU's scores (every test here is skipped, with the
reason, on a machine without CUDA; tests/conftest.py gives this module the ``gpu`` tier).

The inputs are float16 unit vectors, the dtype of a page store: the CUDA path (the fused Triton
kernel where it applies, else float32 GEMMs) accumulates in float32, as the CPU path does, so the
two agree to float32 rounding of sums of at most 40 products of magnitude <= 1.
"""

from __future__ import annotations

import torch

from vdr.retrieve.maxsim import maxsim, maxsim_topk


def _unit(n: int, g: torch.Generator) -> torch.Tensor:
    return torch.nn.functional.normalize(torch.randn(n, 128, generator=g), dim=-1).half()


def test_maxsim_on_cuda_equals_the_cpu():
    g = torch.Generator().manual_seed(0)
    queries = [_unit(n, g) for n in (1, 5, 17, 40)]
    pages = [_unit(n, g) for n in (1, 7, 63, 64, 65, 200, 700)]
    cpu = maxsim(queries, pages, device="cpu")
    cuda = maxsim(queries, pages, device="cuda")
    assert cuda.shape == cpu.shape == (4, 7) and cuda.dtype == torch.float32 and cuda.device.type == "cpu"
    assert float((cuda - cpu).abs().max()) < 1e-3 * 40
    top_cpu = maxsim_topk(queries, pages, 3, device="cpu")
    top_cuda = maxsim_topk(queries, pages, 3, device="cuda")
    # the pages chosen on the device score, on the CPU, what the CPU's best pages score (ties aside)
    assert float((cpu.gather(1, top_cuda.indices) - top_cpu.scores).abs().max()) < 1e-3 * 40


def test_packed_fused_paths_on_cuda_are_exact_and_the_variants_opt_in():
    """Issue 28.2 on a GPU: packed pages through the fused kernel (16-bit pairs by default, float32
    queries with float16 pages under VDR_MAXSIM_FUSED=all) within 1e-5 relative of the float32
    reference; top-k computed on the device; the TF32 / bfloat16 variants differ, within their rounding."""
    import os

    from vdr.retrieve.maxsim import PackedPages

    g = torch.Generator().manual_seed(1)
    q32 = [torch.nn.functional.normalize(torch.randn(n, 128, generator=g), dim=-1) for n in (3, 20, 33, 40)]
    q16 = [q.half() for q in q32]
    pages = [_unit(n, g) for n in (1, 63, 64, 65, 700, 777, 1100)]
    ref16 = maxsim([q.float() for q in q16], [p.float() for p in pages], device="cpu")
    ref32 = maxsim(q32, [p.float() for p in pages], device="cpu")

    def rel(a, b):
        return float(((a - b).abs() / b.abs()).max())

    packed = PackedPages.pack(pages, device="cuda", ids=[f"p{i}" for i in range(len(pages))])
    assert rel(maxsim(q16, packed, device="cuda"), ref16) <= 1e-5
    assert rel(maxsim(q16, pages, device="cuda"), ref16) <= 1e-5
    old = os.environ.get("VDR_MAXSIM_FUSED")
    os.environ["VDR_MAXSIM_FUSED"] = "all"
    try:
        assert rel(maxsim(q32, packed, device="cuda"), ref32) <= 1e-5  # IEEE float32 products in the kernel
    finally:
        os.environ.pop("VDR_MAXSIM_FUSED") if old is None else os.environ.update(VDR_MAXSIM_FUSED=old)
    top = maxsim_topk(q16, packed, 3, device="cuda")
    assert rel(top.scores, ref16.gather(1, top.indices)) <= 1e-5 and top.ids is not None
    # per product <= 2u (Cauchy-Schwarz, unit vectors), u the unit roundoff; TF32 conversion may truncate: 2u per side
    for precision, bound in (("tf32", 40 * 4 * 2**-11), ("bf16", 40 * 2 * 2**-8)):
        got = maxsim(q32, packed, device="cuda", precision=precision)
        assert 0 < float((got - ref32).abs().max()) <= bound
