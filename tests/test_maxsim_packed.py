"""MaxSim over packed pages and the opt-in precision variants, on the CPU reference path (issue 28.2).

The fused kernel itself is checked in Triton's interpreter (tests/test_scoring_fused.py); here:
:class:`PackedPages` (offsets, views, ids and the tie rule), the packed block plan, the TF32 and
bfloat16 roundings (:func:`round_to`) and the variants' scores, which must equal the exact scores of
the rounded vectors.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vdr.errors import InputError
from vdr.retrieve.maxsim import PRECISIONS, PackedPages, _plan_packed, maxsim, maxsim_topk, round_to


def unit(n: int, seed: int, dim: int = 32, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(n, dim, generator=g), dim=-1).to(dtype)


@pytest.fixture(scope="module")
def data():
    queries = [unit(n, 100 + i) for i, n in enumerate((3, 9, 1, 14))]
    pages = [unit(n, i) for i, n in enumerate((5, 1, 40, 17, 64, 65, 2, 30))]
    return queries, pages


def test_packed_pages_score_as_the_list_and_their_blocks_are_views(data):
    qs, ps = data
    packed = PackedPages.pack(ps)
    assert packed.tokens.shape == (sum(p.shape[0] for p in ps), 32) and len(packed) == 8
    assert packed.lengths().tolist() == [5, 1, 40, 17, 64, 65, 2, 30]
    assert packed.offsets.tolist() == [0, 5, 6, 46, 63, 127, 192, 194, 224]
    tokens, offs = packed.block(2, 5)
    assert tokens.data_ptr() == packed.tokens[6:].data_ptr() and offs.tolist() == [0, 40, 57, 121]  # a view, offsets from 0
    assert torch.equal(tokens[40:57], ps[3])
    assert torch.equal(maxsim(qs, packed), maxsim(qs, ps))  # bit-identical on the CPU
    (ids, block, lens), = list(packed.iter_blocks(10_000, ["2", "3"]))
    assert ids == ["2", "3"] and block.data_ptr() == tokens.data_ptr() and lens.tolist() == [40, 17]
    blocks = list(packed.iter_blocks(50, ["7", "0", "1"]))  # out of order: copied, at most 50 tokens per block
    assert [b[0] for b in blocks] == [["7", "0", "1"]] and torch.equal(blocks[0][1], torch.cat([ps[7], ps[0], ps[1]]))


def test_packed_pages_ties_follow_the_ids_like_a_store(data):
    qs, _ = data
    same = unit(4, 7)
    pages = [same, same, same]  # three equal scores
    by_position = maxsim_topk(qs, PackedPages.pack(pages), 3)
    assert by_position.ids is None and by_position.indices[0].tolist() == [0, 1, 2]  # a list's rule: position
    named = maxsim_topk(qs, PackedPages.pack(pages, ids=["a.pdf#1", "c.pdf#1", "b.pdf#1"]), 3)
    assert named.ids[0] == ["c.pdf#1", "b.pdf#1", "a.pdf#1"]  # trec_eval's rule: page id descending


def test_packed_pages_refuse_bad_layouts():
    t = torch.zeros(5, 4)
    for offsets in ([0, 5, 5], [1, 5], [0, 4], [0], [[0, 5]]):
        with pytest.raises(InputError, match="offsets"):
            PackedPages(t, offsets)
    with pytest.raises(InputError, match="2 ids for 1 pages"):
        PackedPages(t, [0, 5], ["a", "b"])
    with pytest.raises(InputError, match="2-D float"):
        PackedPages(torch.zeros(5, 4, dtype=torch.int64), [0, 5])
    with pytest.raises(InputError, match="different embedding dims"):
        PackedPages.pack([torch.zeros(2, 4), torch.zeros(2, 8)])


def test_packed_plan_bounds_each_block_and_covers_every_page_once():
    lengths = [700, 800, 750, 1100, 5, 900, 3000, 20]
    q_rows, dim, budget = 1024, 128, 700_000
    plan = _plan_packed(lengths, budget, q_rows, dim, 2)
    assert [p for s, e in plan for p in range(s, e)] == list(range(len(lengths)))  # in order, each once
    for s, e in plan:
        cost = sum(lengths[s:e]) * dim * 2 + 8 * q_rows * (e - s)
        assert cost <= budget or e - s == 1  # a page over the budget alone
    assert plan == [(0, 3), (3, 6), (6, 7), (7, 8)]  # 3,000 tokens: 768,000 + 8,192 bytes, over the budget: alone
    import vdr.retrieve.maxsim_gpu as G

    old = G.MAX_PAGES_PER_LAUNCH
    G.MAX_PAGES_PER_LAUNCH = 3
    try:
        assert max(e - s for s, e in _plan_packed([1] * 10, 10**9, 64, 16, 2)) == 3  # one launch's grid at most
    finally:
        G.MAX_PAGES_PER_LAUNCH = old


def test_round_to_tf32_and_bf16():
    x = torch.tensor([1.0 + 2**-10, 1.0 + 2**-11, 1.0 + 2**-12, -(1.0 + 2**-11), 3.0, 1.0 + 2**-7 + 2**-9])
    # TF32 keeps 10 mantissa bits: 2**-10 survives, 2**-11 is a tie (away from zero), 2**-12 rounds down
    assert round_to(x, "tf32").tolist() == [1.0 + 2**-10, 1.0 + 2**-10, 1.0, -(1.0 + 2**-10), 3.0, 1.0 + 2**-7 + 2**-9]
    # bfloat16 keeps 7: 1 + 2**-7 + 2**-9 -> 1 + 2**-7 (nearest); ties to even: 1 + 2**-8 -> 1
    assert round_to(torch.tensor([1.0 + 2**-7 + 2**-9, 1.0 + 2**-8, 1.0 + 3 * 2**-8]), "bf16").tolist() == [
        1.0 + 2**-7, 1.0, 1.0 + 2**-6]
    assert torch.equal(round_to(x, "exact"), x)
    with pytest.raises(InputError, match="precision must be one of exact, tf32, bf16"):
        round_to(x, "fp8")


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_precision_variants_score_the_rounded_vectors_exactly(data, precision):
    qs, ps = data
    got = maxsim(qs, ps, precision=precision)
    want = maxsim([round_to(q, precision) for q in qs], [round_to(p, precision) for p in ps])
    assert torch.equal(got, want)
    exact = maxsim(qs, ps)
    # each side rounded by at most u relative: a dot product of unit vectors moves by <= 2u + u^2 (Cauchy-Schwarz),
    # and so does each query token's maximum; a query's score by its token count times that
    u = {"tf32": 2**-11, "bf16": 2**-8}[precision]
    err = (got - exact).abs().max(dim=1).values
    tokens = torch.tensor([q.shape[0] for q in qs], dtype=torch.float32)
    assert bool((err <= tokens * (2 * u + u * u) * 1.001).all()) and float(err.max()) > 0  # opt-in: not exact
    top = maxsim_topk(qs, ps, 3, precision=precision)
    assert torch.equal(top.scores, got.sort(dim=1, descending=True, stable=True).values[:, :3])
    assert PRECISIONS == ("exact", "tf32", "bf16")


def test_an_unknown_precision_is_an_input_error(data):
    qs, ps = data
    with pytest.raises(InputError, match="precision must be one of"):
        maxsim(qs, ps, precision="fp16")


def test_topk_lists_stay_on_the_scoring_device_until_the_end(data, monkeypatch):
    # the running lists are never copied to the CPU block by block: only the final (queries, k) lists are
    qs, ps = data
    moved = []
    real = torch.Tensor.cpu

    def spy(self, *a, **k):
        moved.append(tuple(self.shape))
        return real(self, *a, **k)

    monkeypatch.setattr(torch.Tensor, "cpu", spy)
    top = maxsim_topk(qs, ps, 2, budget_bytes=4 * 28 * 300)  # several blocks
    monkeypatch.undo()
    assert moved == [(4, 2), (4, 2)] and top.scores.shape == (4, 2)
    ref = maxsim(qs, ps)
    assert torch.equal(top.scores, ref.sort(dim=1, descending=True, stable=True).values[:, :2])
    assert np.array_equal(top.indices.numpy(), ref.argsort(dim=1, descending=True, stable=True)[:, :2].numpy())
