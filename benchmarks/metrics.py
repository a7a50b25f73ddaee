"""Speed benchmark of vdr's metrics beside pytrec_eval and ranx, on the same data in the same run.

Run it with ``make bench`` (installs the ``bench`` extra, then runs ``python benchmarks/metrics.py``)
or directly::

    python benchmarks/metrics.py                       # 100,000 queries x 100 retrieved pages
    python benchmarks/metrics.py --repeat 3            # best of 3 runs per tool
    python benchmarks/metrics.py --queries 20000 --depth 50 --seed 1
    python benchmarks/metrics.py --quick               # 2,000 queries, for smoke tests

Data (deterministic, seeded NumPy): ``--queries`` query ids (``"q0"``, ``"q1"``, ...), each with
``--depth`` distinct retrieved pages drawn from a pool of 1,000,000 page ids (``"p0"`` ... ``"p999999"``,
so ids have different lengths and byte order differs from numeric order) with float64 scores; in
20% of the queries the scores are rounded to 2 decimals, which makes many exact ties. Each query has
5-20 judged pages with grades -1, 0, 1, 2 (about 80% of them retrieved, the rest not); judged pages
get a score boost with their grade so the metrics are not trivially near 0.

What is timed (``time.perf_counter``), for each tool, is the whole path from the same in-memory
pytrec_eval-style dicts ``{qid: {docid: grade}}`` and ``{qid: {docid: score}}`` to per-query values of
the same measures (nDCG@3, nDCG@10, P@5, recall@10, MRR, MAP@10), in each tool's native output:

* vdr: ``vdr.evaluate_run(vdr.Qrels(qrels), vdr.Run(run), names)`` -- construction (which validates
  ids, grades and scores) included; output: one float64 array per metric.
* pytrec_eval: ``pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)`` -- construction
  included; output: ``{qid: {measure: value}}``.
* ranx: ``ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), metrics, return_mean=False,
  save_results_in_run=False)`` -- construction included; output: one array per metric. ranx compiles
  its kernels with numba on first use (or loads them from numba's on-disk cache); one warm-up call on
  the first 20 queries runs before timing, so compile time is NOT counted against ranx. ranx runs its
  kernels on all numba threads (the count is printed); vdr and pytrec_eval use one thread.

Each tool is run ``--repeat`` times (interleaved) and its best time is reported.

Checks (the benchmark exits with an AssertionError if they fail):

* vdr's per-query values equal pytrec_eval's within 1e-9 on every query and measure (max abs diff printed).
* ranx: on queries whose run holds no tied scores, ranx's per-query values equal vdr's within 1e-9.
  On queries with ties the definitions differ: trec_eval (and vdr) break score ties by doc id,
  descending; ranx orders tied scores by an unstable argsort, so a tied relevant page may land at a
  different rank. For the whole query set the differences of the means are printed, not asserted.

The last line printed is one JSON object: sizes, seconds, entries per second (entries = retrieved
(query, page) pairs), vdr's speedups and the max abs diff against pytrec_eval.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import warnings
from importlib.metadata import version

import numpy as np

POOL = 1_000_000
TIE_SHARE = 0.2
GRADES = np.array([-1, 0, 1, 2])
GRADE_P = np.array([0.03, 0.47, 0.30, 0.20])

# the same measure set under each tool's names: (vdr, pytrec_eval result key, ranx)
MEASURES = [
    ("ndcg@3", "ndcg_cut_3", "ndcg@3"),  # ranx "ndcg" is Jarvelin & Kekalainen (linear gain); "ndcg_burges" is exp
    ("ndcg@10", "ndcg_cut_10", "ndcg@10"),
    ("precision@5", "P_5", "precision@5"),
    ("recall@10", "recall_10", "recall@10"),
    ("mrr", "recip_rank", "mrr"),
    ("map@10", "map_cut_10", "map@10"),
]
PYTREC_MEASURES = {"ndcg_cut.3,10", "P.5", "recall.10", "recip_rank", "map_cut.10"}


def make_data(n_queries: int, depth: int, seed: int) -> tuple[dict, dict, np.ndarray]:
    """Synthetic ``(qrels, run, has_ties)``: pytrec_eval-style dicts and a per-query tie flag."""
    if depth > POOL // 2:
        raise SystemExit(f"--depth must be at most {POOL // 2}")
    rng = np.random.default_rng(seed)
    docs = rng.integers(0, POOL, size=(n_queries, depth))
    while True:  # distinct pages within a query: redraw the (rare) rows with duplicates
        s = np.sort(docs, axis=1)
        bad = np.nonzero((s[:, 1:] == s[:, :-1]).any(axis=1))[0]
        if len(bad) == 0:
            break
        docs[bad] = rng.integers(0, POOL, size=(len(bad), depth))
    scores = rng.standard_normal((n_queries, depth))

    n_judged = rng.integers(5, 21, size=n_queries)
    n_in_run = np.minimum(rng.binomial(n_judged, 0.8), depth)
    n_out = n_judged - n_in_run
    grades = rng.choice(GRADES, p=GRADE_P, size=(n_queries, 20))
    # judged-and-retrieved pages are columns 0..n_in_run-1 (columns are in random order anyway);
    # boost their scores with the grade so relevant pages tend to rank high
    col = np.arange(depth)
    in_run = col[None, :] < n_in_run[:, None]
    g_cols = np.zeros((n_queries, depth))
    w = min(depth, 20)
    g_cols[:, :w] = np.maximum(grades[:, :w], 0)
    scores += np.where(in_run, 0.8 * g_cols, 0.0)
    has_ties = rng.random(n_queries) < TIE_SHARE
    scores[has_ties] = np.round(scores[has_ties], 2)
    # shuffle the column (dict insertion) order per query
    perm = np.argsort(rng.random((n_queries, depth)), axis=1)
    rows = np.arange(n_queries)[:, None]
    docs_p, scores_p, inrun_p = docs[rows, perm], scores[rows, perm], in_run[rows, perm]
    out_docs = rng.integers(0, POOL, size=(n_queries, 20))

    names = [f"p{i}" for i in range(POOL)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    docs_l, scores_l, out_l, grades_l = docs_p.tolist(), scores_p.tolist(), out_docs.tolist(), grades.tolist()
    perm_l = perm.tolist()
    for i in range(n_queries):
        qid = f"q{i}"
        drow = docs_l[i]
        run[qid] = dict(zip([names[d] for d in drow], scores_l[i]))
        judged_cols = np.nonzero(inrun_p[i])[0]  # the boosted columns, after the shuffle
        # grade of boosted column c (pre-shuffle index perm[i, c]) is grades[i, perm[i, c]]
        q: dict[str, int] = {}
        g = grades_l[i]
        for c in judged_cols.tolist():
            q[names[drow[c]]] = g[perm_l[i][c]]
        # judged pages that were not retrieved (skip the rare collisions with retrieved ones)
        gi = int(n_in_run[i])
        in_row = set(drow)
        for j in range(int(n_out[i])):
            d = out_l[i][j]
            if d not in in_row and names[d] not in q:
                q[names[d]] = g[(gi + j) % 20]
        qrels[qid] = q
    sorted_scores = np.sort(scores, axis=1)
    ties = (sorted_scores[:, 1:] == sorted_scores[:, :-1]).any(axis=1)
    return qrels, run, ties


def run_vdr(qrels: dict, run: dict) -> tuple[float, object]:
    import vdr

    names = [m[0] for m in MEASURES]
    t0 = time.perf_counter()
    res = vdr.evaluate_run(vdr.Qrels(qrels), vdr.Run(run), names)
    return time.perf_counter() - t0, res


def run_pytrec_eval(qrels: dict, run: dict) -> tuple[float, dict]:
    import pytrec_eval

    t0 = time.perf_counter()
    res = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES).evaluate(run)
    return time.perf_counter() - t0, res


def run_ranx(qrels: dict, run: dict) -> tuple[float, tuple[list[str], dict]]:
    import ranx

    metrics = [m[2] for m in MEASURES]
    t0 = time.perf_counter()
    r_run = ranx.Run(run)
    res = ranx.evaluate(ranx.Qrels(qrels), r_run, metrics, return_mean=False, save_results_in_run=False)
    dt = time.perf_counter() - t0
    return dt, (list(r_run.get_query_ids()), res)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="2,000 queries (smoke test)")
    a = ap.parse_args(argv)
    if a.quick:
        a.queries = 2_000
    if a.queries < 20 or a.depth < 1 or a.repeat < 1:
        ap.error("need --queries >= 20, --depth >= 1, --repeat >= 1")

    import numba
    import pytrec_eval  # noqa: F401  (fail early if missing)
    import ranx  # noqa: F401

    # ranx casts doc-id hashes uint64 -> int64 inside its kernels; numba warns on every call
    warnings.filterwarnings("ignore", category=numba.NumbaTypeSafetyWarning)

    t0 = time.perf_counter()
    qrels, run, ties = make_data(a.queries, a.depth, a.seed)
    entries = sum(len(d) for d in run.values())
    judgments = sum(len(d) for d in qrels.values())
    print(
        f"data: {a.queries} queries x {a.depth} pages = {entries} entries, {judgments} judgments,"
        f" {int(ties.sum())} queries with tied scores (seed {a.seed}, {time.perf_counter() - t0:.1f} s to generate)"
    )

    # ranx warm-up: numba compilation / cache loading, on 20 queries of the same data (>= 10 queries,
    # since ranx.evaluate pins numba to 1 thread for fewer than 10 queries, and the same id dtypes)
    few = [f"q{i}" for i in range(20)]
    t0 = time.perf_counter()
    run_ranx({q: qrels[q] for q in few}, {q: run[q] for q in few})
    print(f"ranx warm-up (numba JIT compile / cache load, NOT timed below): {time.perf_counter() - t0:.2f} s")
    print(
        f"versions: vdr {version('vdr')}, pytrec_eval-terrier {version('pytrec-eval-terrier')}, ranx {version('ranx')}"
        f" (numba {numba.__version__}, {numba.get_num_threads()} threads)"
    )

    best = {"vdr": np.inf, "pytrec_eval": np.inf, "ranx": np.inf}
    out: dict[str, object] = {}
    for rep in range(a.repeat):
        for name, fn in (("vdr", run_vdr), ("pytrec_eval", run_pytrec_eval), ("ranx", run_ranx)):
            out.pop(name, None)
            gc.collect()
            dt, res = fn(qrels, run)
            best[name] = min(best[name], dt)
            out[name] = res
            print(f"  run {rep + 1}/{a.repeat} {name:<12} {dt:8.3f} s  {entries / dt:14,.0f} entries/s")

    # ---- checks
    v = out["vdr"]
    qids = list(v.query_ids)
    pt = out["pytrec_eval"]
    assert set(pt) == set(qids), "pytrec_eval and vdr evaluated different query sets"
    max_diff = 0.0
    for vname, pname, _ in MEASURES:
        ref = np.array([pt[q][pname] for q in qids])
        d = float(np.max(np.abs(v.values[vname] - ref)))
        print(f"  {vname:<12} vs pytrec_eval {pname:<12} max abs diff {d:.3g}")
        max_diff = max(max_diff, d)
    assert max_diff < 1e-9, f"vdr differs from pytrec_eval by {max_diff}"

    r_ids, r_res = out["ranx"]
    pos = {q: i for i, q in enumerate(r_ids)}
    assert set(pos) == set(qids), "ranx and vdr evaluated different query sets"
    idx = np.array([pos[q] for q in qids])
    no_tie = ~ties[np.array([int(q[1:]) for q in qids])]
    ranx_mean_diff = {}
    for vname, _, rname in MEASURES:
        rv = np.asarray(r_res[rname], dtype=np.float64)[idx]
        vv = v.values[vname]
        d_nt = float(np.max(np.abs(vv[no_tie] - rv[no_tie]))) if no_tie.any() else 0.0
        md = float(vv.mean() - rv.mean())
        ranx_mean_diff[vname] = md
        print(
            f"  {vname:<12} vs ranx {rname:<12} max abs diff on {int(no_tie.sum())} tie-free queries {d_nt:.3g};"
            f" mean diff on all queries {md:+.3g} (vdr {vv.mean():.6f}, ranx {rv.mean():.6f})"
        )
        # definitions match on tie-free queries; with ties ranx's order is not trec_eval's (see docstring)
        assert d_nt < 1e-9, f"vdr differs from ranx on tie-free queries for {vname}: {d_nt}"

    sv, sp, sr = best["vdr"], best["pytrec_eval"], best["ranx"]
    print(
        f"best of {a.repeat}: vdr {sv:.3f} s, pytrec_eval {sp:.3f} s, ranx {sr:.3f} s (ranx compile excluded);"
        f" vdr is {sp / sv:.2f}x pytrec_eval and {sr / sv:.2f}x ranx"
    )
    result = {
        "benchmark": "metrics",
        "queries": a.queries,
        "depth": a.depth,
        "entries": entries,
        "judgments": judgments,
        "seed": a.seed,
        "repeat": a.repeat,
        "vdr_s": sv,
        "pytrec_eval_s": sp,
        "ranx_s": sr,
        "vdr_entries_per_s": entries / sv,
        "pytrec_eval_entries_per_s": entries / sp,
        "ranx_entries_per_s": entries / sr,
        "speedup_vs_pytrec_eval": sp / sv,
        "speedup_vs_ranx": sr / sv,
        "max_abs_diff_vs_pytrec_eval": max_diff,
        "ranx_mean_diff": ranx_mean_diff,
        "ranx_compile_excluded": True,
        "ranx_numba_threads": numba.get_num_threads(),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
