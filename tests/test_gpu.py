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
