"""RCP-nDCG@k and pooling on hand-checked cases."""

import math

import numpy as np
import pytest

from vdr import Run
from vdr.judge import Calibration, ItemParams, build_pools, gain, rcp_ndcg


def cal():
    items = ItemParams(np.array([1.0]), np.array([0.0]))  # g(theta) = sigmoid(theta)
    return Calibration(items, {"q": 1.0}, {"q": 0.0}, {"q": {"a": 2.0, "b": 0.0, "c": -2.0}})


def test_rcp_ndcg_hand_checked_and_outside_pool_counted():
    c = cal()
    g = {d: float(gain(t, c.items)) for d, t in {"a": 2.0, "b": 0.0, "c": -2.0}.items()}
    ideal = g["a"] + g["b"] / math.log2(3)
    run = Run({"q": {"b": 3.0, "x": 2.0, "a": 1.0}})
    vals, outside = rcp_ndcg(run, c, ["q"], 3)
    assert vals["q"] == pytest.approx((g["b"] + 0 + g["a"] / 2) / (ideal + g["c"] / 2))
    assert outside == {"q": 1}
    vals, _ = rcp_ndcg(Run({"q": {"a": 2.0, "b": 1.0}}), c, ["q"], 2)
    assert vals["q"] == pytest.approx(1.0)
    vals, outside = rcp_ndcg(Run({"other": {"a": 1.0}}), c, ["q"], 3)  # query missing from the run
    assert vals == {"q": 0.0} and outside == {"q": 0}


def test_pools_union_of_topk_and_judged_pages():
    r1 = Run({"q": {"a": 3.0, "b": 2.0, "c": 1.0}})
    r2 = Run({"q": {"d": 5.0, "a": 4.0, "e": 0.1}})
    pools = build_pools([r1, r2], {"q": {"z": 0, "a": 2}}, 2, ["q", "empty"])
    assert pools == {"q": ["a", "b", "d", "z"], "empty": []}
