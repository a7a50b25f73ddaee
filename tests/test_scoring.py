"""MaxSim tests: invariances against a naive unpadded float64 loop, exact masking, fp32 accumulation,
top-k, streaming from a page source, and a cross-check with colpali-engine's score_multi_vector."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vdr.errors import InputError
import vdr.retrieve.maxsim as scoring
from vdr.retrieve.maxsim import _MIN_GEMM, PageSource, _block_cost, _plan_blocks, maxsim, maxsim_topk


def rand(n_tokens, dim=16, seed=0, normalize=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_tokens, dim, generator=g)
    return torch.nn.functional.normalize(x, dim=-1) if normalize else x


def naive(queries, pages):
    """sum_i max_j <q_i, p_j> in float64 over real tokens only."""
    return torch.tensor(
        [[float((q.double() @ p.double().T).max(dim=1).values.sum()) for p in pages] for q in queries], dtype=torch.float64
    )


@pytest.fixture(scope="module")
def data():
    queries = [rand(n, seed=100 + i) for i, n in enumerate([3, 7, 1, 12, 5])]
    pages = [rand(n, seed=i) for i, n in enumerate([4, 40, 1, 17, 9, 100, 33, 2, 60, 8, 21])]
    return queries, pages


def test_matches_naive_loop(data):
    qs, ps = data
    s = maxsim(qs, ps)
    assert s.dtype == torch.float32 and s.shape == (5, 11)
    torch.testing.assert_close(s.double(), naive(qs, ps), rtol=0, atol=1e-5)


def test_score_is_identical_alone_in_any_batch_and_block_size(data):
    qs, ps = data
    full = maxsim(qs, ps)
    alone = torch.stack([maxsim(qs, [p])[:, 0] for p in ps], dim=1)
    assert torch.equal(full, alone)
    for budget in (4 * 28 * 1, 4 * 28 * 50, 4 * 28 * 10_000):  # from one token per block to everything at once
        assert torch.equal(maxsim(qs, ps, budget_bytes=budget), full)
    # reversed page order, and each query alone
    assert torch.equal(maxsim(qs, ps[::-1]), full.flip(1))
    assert torch.equal(torch.cat([maxsim([q], ps) for q in qs]), full)


def test_padding_never_scores_and_cannot_flip_a_ranking():
    # one query token that is anti-aligned with every token of page A: its best similarity with A is
    # -1. Zero padding (A batched with a longer page) would give it 0 instead and lift A above B.
    d = 4
    q = torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 0, 0]])
    page_a = torch.tensor([[-1.0, 0, 0, 0], [-0.6, 0.8, 0, 0]])  # q0: max(-1, -0.6) = -0.6; q1: 0.8 -> MaxSim 0.2
    page_b = torch.tensor([[0.1, 0.4, 0, 0]])  # q0: 0.1; q1: 0.4 -> MaxSim 0.5
    long_page = torch.nn.functional.normalize(torch.rand(50, d), dim=-1)  # non-negative: its own score is unaffected
    s = maxsim([q], [page_a, page_b, long_page])[0]
    assert s[0].item() == pytest.approx(0.2) and s[1].item() == pytest.approx(0.5)
    assert s[1] > s[0]
    from colpali_engine.utils.processing_utils import BaseVisualRetrieverProcessor

    padded = BaseVisualRetrieverProcessor.score_multi_vector([q], [page_a, long_page, page_b], device="cpu")[0]
    assert padded[0].item() == pytest.approx(0.8)  # zero padding lifted page A from 0.2 to 0.8 ...
    assert padded[0] > padded[2]  # ... above page B: the ranking flipped


def test_bf16_and_fp16_inputs_accumulate_in_fp32():
    qs = [rand(24, dim=128, seed=s) for s in range(3)]
    ps = [rand(n, dim=128, seed=50 + n) for n in (30, 31, 64, 90)]
    for dt in (torch.bfloat16, torch.float16):
        q16, p16 = [q.to(dt) for q in qs], [p.to(dt) for p in ps]
        s = maxsim(q16, p16)
        assert s.dtype == torch.float32
        # the same values widened to fp32 give bit-identical scores: nothing was summed in 16 bits
        assert torch.equal(s, maxsim([q.float() for q in q16], [p.float() for p in p16]))
        torch.testing.assert_close(s.double(), naive([q.float() for q in q16], [p.float() for p in p16]), rtol=0, atol=1e-4)
    # summing in bf16 would collapse close scores into ties; fp32 keeps them apart
    q = [torch.full((64, 1), 1.0)]
    pages = [torch.tensor([[1.0 + k / 128]]) for k in range(4)]  # exact in bf16: 1, 1.0078, 1.0156, 1.0234
    s = maxsim([x.bfloat16() for x in q], [p.bfloat16() for p in pages])[0]
    assert len(set(s.tolist())) == 4

    def bf16_running_sum(x):  # what a bf16 accumulator gives: every partial sum rounded to bf16
        acc = torch.zeros((), dtype=torch.bfloat16)
        for _ in range(64):
            acc = acc + x
        return float(acc)

    assert len({bf16_running_sum(p.bfloat16()[0, 0]) for p in pages}) < 4


def test_equals_colpali_engine_where_padding_cannot_matter():
    from colpali_engine.utils.processing_utils import BaseVisualRetrieverProcessor

    # equal-length pages and queries: no padding anywhere, so both must agree within 1e-4
    qs = [rand(20, dim=128, seed=s) for s in range(6)]
    ps = [rand(50, dim=128, seed=100 + s) for s in range(9)]
    ref = BaseVisualRetrieverProcessor.score_multi_vector(qs, ps, device="cpu")
    torch.testing.assert_close(maxsim(qs, ps), ref, rtol=0, atol=1e-4)


def test_topk_matches_full_scores_and_is_budget_invariant(data):
    qs, ps = data
    full = maxsim(qs, ps)
    for budget in (4 * 28 * 3, 1 << 20):
        top = maxsim_topk(qs, ps, 4, budget_bytes=budget)
        assert top.scores.shape == (5, 4) and top.ids is None
        torch.testing.assert_close(top.scores, full.sort(dim=1, descending=True).values[:, :4], rtol=0, atol=0)
        assert torch.equal(full.gather(1, top.indices), top.scores)
    assert maxsim_topk(qs, ps, 50).scores.shape == (5, 11)


class FakeStore:
    """A minimal in-memory PageSource (the protocol the on-disk store implements)."""

    def __init__(self, pages: dict[str, torch.Tensor]):
        self._pages = pages
        self.reads: list[int] = []

    def ids(self):
        return list(self._pages)

    def lengths(self):
        return [p.shape[0] for p in self._pages.values()]

    def iter_blocks(self, max_tokens, ids=None):
        ids = list(self._pages) if ids is None else list(ids)
        i = 0
        while i < len(ids):
            j, tok = i, 0
            while j < len(ids) and (j == i or tok + self._pages[ids[j]].shape[0] <= max_tokens):
                tok += self._pages[ids[j]].shape[0]
                j += 1
            block = [self._pages[x] for x in ids[i:j]]
            self.reads.append(tok)
            yield ids[i:j], torch.cat(block), torch.tensor([b.shape[0] for b in block])
            i = j


def test_page_source_streams_in_bounded_blocks_and_ties_follow_trec_eval(data):
    qs, ps = data
    ids = [f"doc.pdf#{i + 1}" for i in range(len(ps))]
    store = FakeStore(dict(zip(ids, ps)))
    assert isinstance(store, PageSource)
    n_qtok = sum(q.shape[0] for q in qs)
    s = maxsim(qs, store, budget_bytes=4 * n_qtok * 64)
    assert torch.equal(s, maxsim(qs, ps))
    # this budget is below one 64-column block: every page is read and scored alone
    assert sorted(store.reads) == sorted(p.shape[0] for p in ps)
    # identical pages tie: kept in trec_eval order (page id descending: "doc.pdf#9" before "doc.pdf#10")
    same = rand(5, seed=7)
    tie_store = FakeStore({f"doc.pdf#{i}": same for i in range(1, 13)})
    top = maxsim_topk(qs[:1], tie_store, 3, budget_bytes=4 * 3 * 10)
    assert top.ids == [["doc.pdf#9", "doc.pdf#8", "doc.pdf#7"]]


def test_bad_input_is_a_clear_error(data):
    qs, ps = data
    with pytest.raises(InputError, match="no queries"):
        maxsim([], ps)
    with pytest.raises(InputError, match="no pages"):
        maxsim(qs, [])
    with pytest.raises(InputError, match=r"page 0 must have shape"):
        maxsim(qs, [torch.zeros(0, 16)])
    with pytest.raises(InputError, match="dim"):
        maxsim(qs, [torch.zeros(3, 8)])
    with pytest.raises(InputError, match="k must be"):
        maxsim_topk(qs, ps, 0)
    # numpy input works too
    assert torch.equal(maxsim([q.numpy() for q in qs], [p.numpy() for p in ps]), maxsim(qs, ps))
    assert np.isfinite(maxsim(qs, ps).numpy()).all()


def test_block_plan_counts_padding_so_one_long_page_never_pads_the_short_ones():
    # the case: one 8,192-token page among 1,999 pages of 40 tokens, 320 query tokens, dim 128
    lengths = [40] * 1999 + [8192]
    q_rows, dim, budget = 320, 128, 64 * 2**20
    plan = _plan_blocks(lengths, budget, q_rows, dim)
    assert plan[0][0] == 0 and plan[-1][1] == 2000  # consecutive blocks, every page once
    assert all(a[1] == b[0] for a, b in zip(plan, plan[1:]))
    # per padded column: 4 * 320 (similarities) + 8 * 128 (page copy and rows as read) + 1 (mask) = 2,305 bytes
    assert _block_cost(2, 40, q_rows, dim) == 80 * 2305 + 2 * 8 * 320
    for s, e, w in plan:
        assert w == max(lengths[s:e]) or e - s == 1
        assert _block_cost(e - s, w, q_rows, dim) <= budget
    assert plan[-1] == (1999, 2000, 8192)  # the long page alone, not padding the others
    assert all(w == 40 for _, _, w in plan[:-1])
    # padded like today (one block to the longest page) it would need 8.4 GB of float32 pages alone
    assert 2000 * 8192 * 128 * 4 > 8e9
    # a budget below the long page's own block: alone, in chunks of rows that fit
    small = 4 * 2**20
    s, e, w = _plan_blocks(lengths, small, q_rows, dim)[-1]
    assert (s, e) == (1999, 2000) and _MIN_GEMM <= w < 8192
    assert _block_cost(1, w, q_rows, dim) <= small < _block_cost(1, w + 1, q_rows, dim)


def test_long_tail_scores_are_bit_identical_and_every_block_fits_the_budget(monkeypatch):
    dim = 128
    qs = [rand(n, dim=dim, seed=300 + i) for i, n in enumerate([9, 30, 17])]
    pages = [rand(40, dim=dim, seed=i) for i in range(299)]
    pages.insert(150, rand(8192, dim=dim, seed=999))
    budget = 2 * 2**20  # the long page's block alone (64 query rows) would take 8192 * 1281 bytes = 10.5 MB
    q_rows = 64
    calls = []
    real = scoring._block_maxima

    def spy(Q, rows, width, tf32):
        assert Q.shape[0] == q_rows
        calls.append((len(rows), width))
        return real(Q, rows, width, tf32)

    monkeypatch.setattr(scoring, "_block_maxima", spy)
    s = maxsim(qs, pages, budget_bytes=budget)
    assert calls and all(_block_cost(nb, w, q_rows, dim) <= budget for nb, w in calls)
    assert max(w for _, w in calls) < 8192  # the long page was sub-blocked
    assert sum(nb for nb, w in calls if w == 40) == 299  # the short pages were never padded to it
    monkeypatch.setattr(scoring, "_block_maxima", real)
    alone = torch.stack([maxsim(qs, [p])[:, 0] for p in pages], dim=1)  # default budget: the long page in one GEMM
    assert torch.equal(s, alone)
    assert torch.equal(s, maxsim(qs, pages))
    torch.testing.assert_close(s.double(), naive(qs, pages), rtol=0, atol=1e-5)
    # streamed from a page source: the same scores, and no read larger than a planned block
    ids = [f"doc.pdf#{i + 1}" for i in range(len(pages))]
    store = FakeStore(dict(zip(ids, pages)))
    assert torch.equal(maxsim(qs, store, budget_bytes=budget), s)
    assert max(store.reads) == 8192 and sorted(store.reads)[-2] * (4 * q_rows + 8 * dim + 1) <= budget
