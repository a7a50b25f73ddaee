"""N samples of a rewriter as ONE system (issue 37.2).

An RL rewriter sampled at temperature > 0 gives several rewrites per query. A rewrite file whose
``text`` is a LIST (one text per sample, the same count on every line) is an *N-sample variant*::

    {"_id": "q1", "text": ["first sample", "second sample", "third sample"]}

(``vdr rewrite --samples N`` writes it, :func:`vdr.rewrite.samples.rewrite_samples`). A vdr that
predates samples refuses such a file loudly (``text`` must be a string) instead of reading one
sample as if it were the variant.

How it is evaluated (:func:`vdr.evaluate`):

* each sample ``i`` (1-based) is searched on every backend as a hidden member variant
  ``NAME.s<i>`` (its run ``runs/<backend>.NAME.s<i>.trec``, its metrics in results.json
  ``sample_runs``); members are never rows of the tables nor tests;
* ``NAME`` (the mean): per query the mean over the N samples of each metric; compared with the
  originals by the usual paired tests, ONE test per compared metric in the backend's Holm family.
  Its spread across samples (:func:`spread`): the N per-sample means, their mean, standard
  deviation (ddof 1) and a 95% Student-t interval over the samples ``mean +- t(0.975, N-1) sd /
  sqrt(N)`` (the form of "intervals over 5 runs", arXiv 2512.16802); it has no run file (no single
  ranking);
* ``NAME.rrf``: reciprocal rank fusion of the N sample runs (Cormack, Clarke & Buettcher 2009,
  ``sum_i 1 / (60 + rank_i)``, 1-based ranks in trec_eval order; the fused ``depth`` best kept): a
  system of its own, with its run file, compared with the originals like any variant (one more test
  per metric). It equals ``ranx.fuse(runs, method="rrf")`` (ranx 0.3.21: ``k`` 60 by default,
  1-based ranks) on the same ranks, scores and order (tests/test_samples.py); ranx orders tied
  scores by numba's unstable argsort where vdr follows trec_eval (corpus id descending), so on runs
  with ties ranx must be given the ranks (e.g. score ``-rank``) to agree;
* ``NAME.best-of-N``: per query the best value over the samples of each metric: an ORACLE upper
  bound (it picks the sample with the qrels), labelled so, never tested, never in a verdict nor a
  Holm family; no run file;
* disagreement: the share of queries whose samples disagree on hit@k (some samples retrieve a
  relevant page in the top k, some do not), k the primary metric's cutoff (the smallest cutoff when
  it has none).

With ``--macro-average`` the macro rows of the three systems are the unweighted means of the
backends' rows, as every macro row is. results.json: ``samples`` (one record per N-sample
variant, :func:`record`) and ``sample_runs`` (the members, as ``runs`` entries).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import AlignmentError, InputError
from ..metrics import MetricsResult
from ..retrieve.hybrid import RRF_K, reciprocal_rank_fusion
from ..types import Query, QuerySet, Run

__all__ = ["SampleVariant", "is_samples_file", "load_sample_variant", "load_sample_variants", "fuse_samples", "fold_samples",
           "spread", "SampleFold", "derived_names", "reported_variants", "oracle_variants", "SAMPLES_RRF_K"]

#: The RRF constant of ``NAME.rrf`` (Cormack et al. 2009; ranx's rrf default too).
SAMPLES_RRF_K = RRF_K


@dataclass(frozen=True)
class SampleVariant:
    """An N-sample rewrite variant.

    Attributes:
        name: the variant's name (its mean row).
        members: the hidden member variants ``NAME.s1 .. NAME.sN``, searched like any variant.
        source: the file it was read from.
    """

    name: str
    members: tuple[str, ...]
    source: str = ""

    @property
    def n(self) -> int:
        """Number of samples N."""
        return len(self.members)

    @property
    def rrf(self) -> str:
        """Name of the RRF-fused system ``NAME.rrf``."""
        return f"{self.name}.rrf"

    @property
    def best(self) -> str:
        """Name of the oracle best-of-N row ``NAME.best-of-N``."""
        return f"{self.name}.best-of-{self.n}"

    def derived(self) -> tuple[str, str, str]:
        """``(NAME, NAME.rrf, NAME.best-of-N)``: the rows reported for the variant, in table order."""
        return self.name, self.rrf, self.best


# --------------------------------------------------------------------------------------------- reading


def is_samples_file(path: str | Path) -> bool:
    """Whether the rewrite file ``path`` holds samples: its first JSON line's ``text`` is a list.

    A file that cannot be read as JSON lines is not one (its own loader then names the problem).
    """
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    obj = json.loads(line)
                    return isinstance(obj, dict) and isinstance(obj.get("text"), list)
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return False


def load_sample_variant(path: str | Path, originals: QuerySet, name: str) -> list[QuerySet]:
    """Read an N-sample rewrite file: one :class:`~vdr.types.QuerySet` per sample.

    Args:
        path: JSON lines ``{"_id": id, "text": [text_1, ..., text_N]}`` (N >= 1, the same N on every
            line); other fields are the query's attributes (``--group-by``), as in any queries file.
        originals: the original queries (the ids must be exactly theirs).
        name: the variant's name; sample ``i`` is the member ``NAME.s<i>`` (1-based).

    Returns:
        ``[QuerySet NAME.s1, ..., QuerySet NAME.sN]``, queries in the file's order.

    Raises:
        InputError: invalid JSON, a line that is no object, a missing ``_id``, a ``text`` that is
            not a non-empty list of non-empty strings, a count of samples differing from the first
            line's, an id given twice (file, line and id named).
        AlignmentError: ids missing from the file or not among the originals (named, with lines).
    """
    path = Path(path)
    texts: dict[str, list[str]] = {}
    lines: dict[str, int] = {}
    n = None
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            qid, samples = _sample_line(line, path, no)
            if n is None:
                n = len(samples)
            if len(samples) != n:
                raise InputError(f"{len(samples)} samples where the first line has {n} (every query needs the same number of"
                                 " samples: sample i of each query makes run i)", path=path, line=no, id=qid)
            if qid in texts:
                raise InputError(f"query id given twice (first on line {lines[qid]})", path=path, line=no, id=qid)
            texts[qid], lines[qid] = samples, no
    if n is None:
        raise InputError("no queries in the samples file", path=path)
    missing = [q for q in originals.ids() if q not in texts]
    extra = [q for q in texts if q not in originals.queries]
    if missing or extra:
        raise AlignmentError(f"samples variant {name!r} does not match the original queries: {len(missing)} original id(s) missing"
                             f" (first {missing[:10]}), {len(extra)} id(s) not among the originals (first"
                             f" {[(q, lines[q]) for q in extra[:10]]}, with their lines)", path=path)
    return [QuerySet({q: Query(texts[q][i]) for q in texts}, name=f"{name}.s{i + 1}", source=str(path), lines=lines)
            for i in range(n)]


def _sample_line(line: str, path: Path, no: int) -> tuple[str, list[str]]:
    """One line of a samples file -> ``(query id, [texts])``; see :func:`load_sample_variant`."""
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise InputError(f"invalid JSON ({e})", path=path, line=no) from None
    if not isinstance(obj, dict) or "_id" not in obj:
        raise InputError("expected a JSON object with '_id' and 'text' (a list of samples)", path=path, line=no)
    qid = str(obj["_id"]).strip()
    if not qid:
        raise InputError("empty '_id'", path=path, line=no)
    samples = obj.get("text")
    if not isinstance(samples, list) or not samples:
        raise InputError("'text' must be a non-empty list of sample texts in a samples file (the first line's 'text' is a list)",
                         path=path, line=no, id=qid)
    for i, s in enumerate(samples, 1):
        if not isinstance(s, str) or not s.strip():
            raise InputError(f"sample {i} is empty or not a string", path=path, line=no, id=qid)
    return qid, samples


def load_sample_variants(originals: QuerySet, files: Mapping[str, str | Path],
                         taken: Sequence[str] = ()) -> tuple[dict[str, QuerySet], dict[str, SampleVariant]]:
    """Every N-sample variant of ``files``: their member query sets and their records.

    Args:
        originals: the original queries.
        files: ``{variant name: samples file}`` (names already checked, :func:`~vdr.experiment.inputs.check_name`).
        taken: the other variants' names (a member or derived name must not be one of them).

    Returns:
        ``({member name: QuerySet}, {variant name: SampleVariant})``, in ``files`` order.

    Raises:
        InputError: see :func:`load_sample_variant`; a member or derived name (``NAME.s1``,
            ``NAME.rrf``, ``NAME.best-of-N``) that another variant already has.
    """
    members: dict[str, QuerySet] = {}
    records: dict[str, SampleVariant] = {}
    used = set(taken) | set(files)
    for name, path in files.items():
        sets = load_sample_variant(path, originals, name)
        rec = SampleVariant(name, tuple(s.name for s in sets), str(path))
        clash = sorted(used & {*rec.members, rec.rrf, rec.best})
        if clash:
            raise InputError(f"samples variant {name!r}: the name(s) {clash} it reports under are taken by another variant;"
                             " rename one of them", path=path)
        used |= {*rec.members, rec.rrf, rec.best}
        members.update({s.name: s for s in sets})
        records[name] = rec
    return members, records


# --------------------------------------------------------------------------------------------- names


def derived_names(samples: Mapping[str, SampleVariant]) -> list[str]:
    """Every row name the N-sample variants report (``NAME``, ``NAME.rrf``, ``NAME.best-of-N``)."""
    return [x for rec in samples.values() for x in rec.derived()]


def oracle_variants(samples: Mapping) -> set[str]:
    """The oracle best-of-N rows (never tested): from :class:`SampleVariant` records or results.json's
    ``samples`` (:func:`record` dicts)."""
    return {rec.best if isinstance(rec, SampleVariant) else str(rec.get("best")) for rec in samples.values()}


def reported_variants(variants: Mapping[str, QuerySet], samples: Mapping[str, SampleVariant]) -> dict[str, QuerySet]:
    """``variants`` with each N-sample variant's members replaced by its three rows, in place of the
    first member. Their query texts are those of sample 1 (all samples: results.json ``samples``)."""
    first = {rec.members[0]: rec for rec in samples.values()}
    hidden = {m for rec in samples.values() for m in rec.members}
    out: dict[str, QuerySet] = {}
    for name, qs in variants.items():
        if name in first:
            for row in first[name].derived():
                out[row] = QuerySet(dict(qs.queries), name=row, source=qs.source)
        elif name not in hidden:
            out[name] = qs
    return out


# --------------------------------------------------------------------------------------------- fusion


def fuse_samples(runs: Sequence[Run], *, depth: int | None = None, name: str = "rrf") -> Run:
    """RRF of the N sample runs of one backend (:func:`vdr.retrieve.hybrid.reciprocal_rank_fusion`,
    constant :data:`SAMPLES_RRF_K` = 60, 1-based ranks in trec_eval order), the fused ``depth`` best
    kept per query (``None``: all).

    Raises:
        InputError: no runs; a bad ``depth``.
    """
    return reciprocal_rank_fusion(list(runs), SAMPLES_RRF_K, top=depth, name=name)


# --------------------------------------------------------------------------------------------- spread


def spread(per_sample_means: Sequence[float], confidence: float = 0.95) -> dict:
    """The spread of a metric across samples: ``{"per_sample", "mean", "sd", "ci95"}``.

    ``sd`` is the sample standard deviation (ddof 1) of the N per-sample means; ``ci95`` the
    Student-t interval ``mean +- t((1 + confidence) / 2, N - 1) * sd / sqrt(N)`` (Student 1908);
    both ``None`` for N = 1; ``sd`` 0 and ``ci95`` ``[mean, mean]`` for identical samples.

    Raises:
        InputError: no value.
    """
    x = np.asarray(list(per_sample_means), dtype=np.float64)
    if x.size == 0:
        raise InputError("no samples")
    mean = float(_mean(x))
    if x.size == 1:
        return {"per_sample": x.tolist(), "mean": mean, "sd": None, "ci95": None}
    sd = float((x - x[0]).std(ddof=1))
    if sd == 0.0:
        return {"per_sample": x.tolist(), "mean": mean, "sd": 0.0, "ci95": [mean, mean]}
    from scipy.stats import t

    half = float(t.ppf((1 + confidence) / 2, x.size - 1)) * sd / math.sqrt(x.size)
    return {"per_sample": x.tolist(), "mean": mean, "sd": sd, "ci95": [mean - half, mean + half]}


# --------------------------------------------------------------------------------------------- fold


@dataclass
class SampleFold:
    """What :func:`fold_samples` returns.

    Attributes:
        runs: the run results with each N-sample variant's members replaced by its three rows.
        sample_runs: the members' run results (hidden; results.json ``sample_runs``).
        record: ``{variant: record}`` for results.json ``samples`` (:func:`record`).
    """

    runs: list
    sample_runs: list = field(default_factory=list)
    record: dict = field(default_factory=dict)


def fold_samples(run_results: Sequence, samples: Mapping[str, SampleVariant], score, *, primary: str, hit_metric: str,
                 depth: int | None = None) -> SampleFold:
    """Replace the member runs of each N-sample variant by its rows: the mean, the RRF fusion and
    the oracle best-of-N (see the module docstring), per backend; macro rows are the mean of the
    backends' rows (their ``policy.macro_average_of``).

    Args:
        run_results: :class:`~vdr.results.RunResult` of every backend x variant (members included,
            rankings in memory), backend-major, macro rows last.
        samples: the N-sample variants.
        score: ``score(backend, run, metrics)`` -> :class:`~vdr.metrics.MetricsResult` of a ranking
            against the qrels as every run is scored (``metrics`` ``None``: the evaluation's metrics).
        primary: the metric that picks the best sample of a query (best-of-N).
        hit_metric: ``hit@k`` of the disagreement share.
        depth: pages kept per query in the fused run.

    Returns:
        :class:`SampleFold`.

    Raises:
        InputError: a backend with runs of some samples of a variant but not of all (named).
    """
    from ..results import RunResult

    if not samples:
        return SampleFold(list(run_results))
    by_key = {(r.backend, r.variant): r for r in run_results}
    rows: dict[tuple[str, str], list] = {}
    record = {name: _record_head(rec, hit_metric) for name, rec in samples.items()}
    for b in dict.fromkeys(r.backend for r in run_results if r.backend != "macro"):
        for name, rec in samples.items():
            have = [by_key.get((b, m)) for m in rec.members]
            if all(h is None for h in have):
                continue
            if any(h is None for h in have):
                lack = [m for m, h in zip(rec.members, have) if h is None]
                raise InputError(f"backend {b!r} has runs of some samples of {name!r} but not of {lack}; give every sample's run")
            rows[(b, name)] = _backend_rows(b, rec, have, score, primary, depth, RunResult)
            record[name]["backends"][b] = _backend_record(b, have, score, hit_metric)
    for r in run_results:
        if r.backend == "macro" and r.variant in {rec.members[0] for rec in samples.values()}:
            rec = next(x for x in samples.values() if x.members[0] == r.variant)
            parts = [rows[(b, rec.name)] for b in r.metrics.policy.get("macro_average_of", ()) if (b, rec.name) in rows]
            rows[("macro", rec.name)] = [_macro_row(rec, i, [p[i] for p in parts], r, RunResult) for i in range(3)]
    return _assemble(run_results, samples, rows, record)


def _assemble(run_results: Sequence, samples: Mapping[str, SampleVariant], rows: dict, record: dict) -> SampleFold:
    """The fold's run list: each variant's three rows where its first member was; members aside."""
    first = {rec.members[0]: rec for rec in samples.values()}
    hidden = {m for rec in samples.values() for m in rec.members}
    out, members = [], []
    for r in run_results:
        if r.variant in first and (r.backend, first[r.variant].name) in rows:
            out += rows[(r.backend, first[r.variant].name)]
        if r.variant in hidden:
            if r.backend != "macro":
                members.append(r)
        else:
            out.append(r)
    return SampleFold(out, members, record)


def _mean(x: np.ndarray) -> np.ndarray:
    """The mean over axis 0 as ``x[0] + mean(x - x[0])``: exactly ``x[0]`` where every row equals
    it (N identical samples give the single sample's values bit for bit; a plain mean of three
    ``2/3`` is not ``2/3`` in floating point)."""
    return x[0] + (x - x[0]).mean(axis=0)


def _stack(results: Sequence, metric: str) -> np.ndarray:
    """``(N, queries)`` values of ``metric`` over the member results."""
    return np.stack([np.asarray(r.metrics.values[metric], dtype=np.float64) for r in results])


def _backend_rows(b: str, rec: SampleVariant, have: Sequence, score, primary: str, depth: int | None, RunResult) -> list:
    """The mean, RRF and best-of-N :class:`~vdr.results.RunResult` of one backend."""
    ids = have[0].metrics.query_ids
    for h in have[1:]:
        if tuple(h.metrics.query_ids) != tuple(ids):
            raise AlignmentError(f"backend {b!r}: the samples of {rec.name!r} were scored on different query sets")
    names = list(have[0].metrics.values)
    pol = dict(have[0].metrics.policy)
    mean = {m: _mean(_stack(have, m)) for m in names}
    prim = np.nan_to_num(_stack(have, primary), nan=-np.inf)
    pick = prim.argmax(axis=0)  # the first best sample of each query (ties: the lower index)
    best = {m: _stack(have, m)[pick, np.arange(len(ids))] for m in names}
    fused = fuse_samples([h.ranking for h in have], depth=depth, name=f"{b}/{rec.rrf}")
    return [RunResult(b, rec.name, None, MetricsResult(ids, mean, dict(pol, samples={"n": rec.n, "row": "mean over samples"}))),
            RunResult(b, rec.rrf, f"runs/{b}.{rec.rrf}.trec", score(b, fused, None), ranking=fused),
            RunResult(b, rec.best, None, MetricsResult(ids, best, dict(pol, samples={
                "n": rec.n, "row": f"oracle best-of-{rec.n}: per query the sample best on {primary}; not tested"})))]


def _macro_row(rec: SampleVariant, i: int, parts: Sequence, like, RunResult):
    """Row ``i`` (mean, rrf, best) of the macro backend: the mean of the backends' rows."""
    name = rec.derived()[i]
    vals = {m: _mean(np.stack([p.metrics.values[m] for p in parts])) for m in like.metrics.values}
    return RunResult("macro", name, None, MetricsResult(like.metrics.query_ids, vals, dict(like.metrics.policy)))


def _record_head(rec: SampleVariant, hit_metric: str) -> dict:
    """results.json ``samples[NAME]`` without its backends."""
    return {"n": rec.n, "source": rec.source, "members": list(rec.members), "mean": rec.name, "rrf": rec.rrf, "best": rec.best,
            "rrf_k": SAMPLES_RRF_K, "disagreement_metric": hit_metric,
            "policy": {"mean": "per query the mean over the samples of each metric; tested against the originals (one test per metric)",
                       "spread": "per-sample means; sd (ddof 1); 95% Student-t interval over the samples",
                       "rrf": "reciprocal rank fusion of the sample runs, sum 1/(rrf_k + rank), 1-based ranks (Cormack et al. 2009);"
                              " tested like any variant",
                       "best": "oracle upper bound: per query the sample best on the primary metric; never tested",
                       "disagreement": f"share of queries whose samples disagree on {hit_metric}"},
            "backends": {}}


def _backend_record(b: str, have: Sequence, score, hit_metric: str) -> dict:
    """``samples[NAME].backends[b]``: the spread of every metric and the disagreement share."""
    names = list(have[0].metrics.values)
    out = {"spread": {m: spread([h.metrics.aggregate[m] for h in have]) for m in names},
           "run_files": [h.run_file for h in have]}
    hits = np.stack([np.asarray(score(b, h.ranking, [hit_metric]).values[hit_metric]) > 0 for h in have])
    split = hits.any(axis=0) & ~hits.all(axis=0)
    ids = have[0].metrics.query_ids
    out["disagreement"] = {"metric": hit_metric, "share": float(split.mean()) if split.size else 0.0,
                           "queries": int(split.sum()), "num_queries": int(split.size),
                           "examples": [q for q, s in zip(ids, split) if s][:20]}
    return out
