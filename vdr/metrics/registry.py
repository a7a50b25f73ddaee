"""The metric registry: every metric family declared once, with the names other tools use for it.

A family is one :class:`Family` row of :data:`METRICS`: its canonical name, whether it needs a
cutoff ``k``, its role (quality or diagnostic), its definition, its trec_eval / ir_measures
equivalent, the reference it follows, the spellings of other tools that mean the same measure
(ir_measures, MTEB, ranx, trec_eval) and its kernel (:mod:`vdr.metrics.kernels`). The default
cutoffs are declared here once (:data:`METRICS_CUTOFFS`, :data:`EVALUATE_CUTOFFS`); what a command
computes from them is a :class:`~vdr.metrics.plan.MetricPlan`. :func:`~vdr.metrics.evaluate_run`
dispatches through this table, the CLI help and the "unknown metric" error are built from it, and
:func:`parse_cutoffs` is the one parser of cutoffs.

Accepted spellings (case-insensitive), all mapped to vdr's canonical ``family@k``:

* ``family@k`` (vdr, ranx: ``ndcg@10``, ``hit_rate@3``; ir_measures: ``nDCG@10``, ``P@5``, ``RR@10``);
* ``family_at_k`` (MTEB: ``ndcg_at_10``, ``recall_at_100``);
* ``family_k`` / ``family.k`` (trec_eval / pytrec_eval: ``ndcg_cut_10``, ``P.5``, ``success_3``);
* ``family`` without a cutoff for the families that accept the whole list (``mrr``, ``RR``, ``AP``).

>>> str(parse_metric("nDCG@10")), str(parse_metric("ndcg_at_10")), str(parse_metric("P@5"))
('ndcg@10', 'ndcg@10', 'precision@5')
>>> [str(parse_metric(n)) for n in ("RR", "RR@10", "AP@10", "Success@3", "hit_rate@3", "recall_at_100")]
['mrr', 'mrr@10', 'map@10', 'hit@3', 'hit@3', 'recall@100']
>>> parse_cutoffs("10, 3,5,3")
[3, 5, 10]
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from . import kernels as K

if TYPE_CHECKING:  # the evaluation context; imported for annotations only (no cycle at runtime)
    from .compute import Ranked

__all__ = [
    "Family",
    "METRICS",
    "ROLES",
    "METRICS_CUTOFFS",
    "EVALUATE_CUTOFFS",
    "PRIMARY_CUTOFF",
    "Metric",
    "parse_metric",
    "parse_metrics",
    "parse_cutoffs",
    "KINDS",
    "RECALL_LEVELS",
    "RBP_DEFAULT_P",
    "DEFAULT_P",
    "LEVEL_FAMILIES",
    "TREC_CUTOFFS",
    "RPREC_MULTS",
    "TREC_NICKNAMES",
    "default_metrics",
    "diagnostic_metrics",
    "known_metrics",
    "alias_table",
    "describe_metrics",
    "metric_label",
]


#: The roles of a metric family: ``"quality"`` (compared between systems) or ``"diagnostic"``
#: (judgment coverage and score ties: reported beside the quality metrics, never tested).
ROLES = ("quality", "diagnostic")
#: The kinds of a metric family (how its per-query values aggregate): see :class:`Family`.
KINDS = ("mean", "count", "sum", "run_mean", "gmean")

#: The default cutoffs of ``vdr metrics``, :func:`vdr.metrics` and :func:`~vdr.metrics.evaluate_run`
#: (:func:`default_metrics`) when no metric is named.
METRICS_CUTOFFS: tuple[int, ...] = (1, 3, 5, 10)
#: The default cutoffs of ``vdr evaluate`` / :func:`vdr.evaluate` and ``vdr compare`` /
#: :func:`vdr.compare` (and the MTEB engine ``evaluate`` builds).
EVALUATE_CUTOFFS: tuple[int, ...] = (3, 5, 10)
#: The cutoff of the summary table's headline metrics (``ndcg@3``, ``mrr@3``, ``hole@3``) when the
#: cutoffs include it (else the smallest cutoff).
PRIMARY_CUTOFF = 3


@dataclass(frozen=True)
class Family:
    """One metric family of the registry.

    Attributes:
        name: canonical name (``"ndcg"``); output always uses it (``ndcg@3``).
        needs_k: a cutoff is required (``ndcg@k``); otherwise ``@k`` is optional (``mrr``, ``mrr@3``).
        definition: the formula in words.
        trec_eval: the trec_eval measure computing the same value, or ``None``.
        ir_measures: the ir_measures name of the same measure, or ``None``.
        reference: where the definition comes from.
        aliases: other tools' spellings of the family, lowercase, without the cutoff (``"p"``,
            ``"success"``, ``"hit_rate"``); see the module docstring for the cutoff syntax.
        compute: the family's kernel (:mod:`vdr.metrics.kernels`): ``compute(ctx, k) -> float64
            array (n_queries,)`` on a :class:`~vdr.metrics.compute.Ranked`.
        kind: ``"mean"`` (a per-query value in [0, 1], averaged), ``"count"`` (a per-query count;
            the aggregate is its mean and :attr:`MetricsResult.policy` holds the total), ``"sum"``
            (a per-query count whose aggregate is the SUM over the queries, as trec_eval's ``all``
            line gives ``num_ret``, ``num_rel``, ``num_rel_ret``) or
            ``"run_mean"`` (a per-query value, NaN for the queries absent from the run, averaged
            over the queries present in the run only; a paper-compatible measure) or ``"gmean"``
            (a per-query value whose aggregate is the geometric mean of max(value, 1e-5), as
            trec_eval's ``gm_map`` and ``gm_bpref``).
        label: how tables head the family when it is not vdr's standard measure
            (``"rr_full (paper-compatible: ConvSearch-R1 code)"``); ``None``: its name.
        role: ``"quality"`` (a measure of the ranking, compared between systems and variants by
            ``vdr evaluate`` and ``vdr compare``) or ``"diagnostic"`` (a property of the judgments or
            the scores -- ``judged``, ``hole``, ``ties`` -- shown, never tested); see :data:`ROLES`.
        accepts: the parameters a name of the family may give in ir_measures' syntax:
            ``"rel"`` (the relevance level of this metric, ``P(rel=2)@5``) and ``"p"`` (a real
            parameter: ``RBP(p=0.8)``'s persistence, ``iprec_at_recall_0.10``'s recall level,
            ``rprec_mult_0.20``'s multiple of R).
            A family accepting ``"p"`` has its kernel called as ``compute(ctx, k, p=...)``.

    Raises:
        ValueError: an unknown ``kind`` or ``role`` (a registry bug, caught at import).
    """

    name: str
    needs_k: bool
    definition: str
    trec_eval: str | None
    ir_measures: str | None
    reference: str
    aliases: tuple[str, ...]
    compute: Callable[["Ranked", int | None], np.ndarray]
    kind: str = "mean"
    label: str | None = None
    role: str = "quality"
    accepts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"metric family {self.name!r}: unknown kind {self.kind!r}")
        if self.role not in ROLES:
            raise ValueError(f"metric family {self.name!r}: unknown role {self.role!r}; choose from {', '.join(ROLES)}")

    @property
    def diagnostic(self) -> bool:
        """Whether the family is a diagnostic (shown, never compared): ``judged``, ``hole``, ``ties``."""
        return self.role == "diagnostic"

    @property
    def pattern(self) -> str:
        """``"ndcg@k"``, ``"mrr[@k]"``, ``"iprec_at_recall_R"`` or ``"rprec_mult_X"``: how the family is written."""
        if self.name in LEVEL_FAMILIES:
            return f"{self.name}_{LEVEL_FAMILIES[self.name]}"
        return f"{self.name}@k" if self.needs_k else f"{self.name}[@k]"


# ------------------------------------------------------------------------------------------------
# the table

METRICS: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "ndcg", False,
            "DCG@k / IDCG@k; DCG@k = sum_{rank r <= k} g_r / log2(r + 1), g = grade if grade > 0 else 0;"
            " IDCG@k from ALL the query's qrels grades > 0, sorted descending, cut at k; 0 when IDCG is 0;"
            " without @k the whole ranking and all the qrels grades (trec_eval ndcg)",
            "ndcg_cut_k (ndcg without @k)", "nDCG@k", "Jarvelin & Kekalainen 2002 (linear gain, as trec_eval ndcg_cut / ndcg)",
            ("ndcg_cut",), K.ndcg,
        ),
        Family(
            "ndcg_exp", False, "as ndcg@k with exponential gain g = 2^grade - 1 (grade > 0); without @k the whole ranking",
            None, "nDCG(dcg=exp-log2)@k", "Burges et al. 2005 (RankNet); opt-in, not trec_eval's default",
            ("ndcg_burges",), K.ndcg_exp,
        ),
        Family(
            "ndcg_run", True,
            "as ndcg@k but IDCG@k formed from the retrieved top-k gains only, sorted descending;"
            " inflates scores when relevant pages are missed",
            None, None, "NDCG@3 recipe used for query-rewriting evaluation after Cha et al. 2025 (arXiv 2507.23242); opt-in",
            (), K.ndcg_run,
        ),
        Family(
            "mrr", False, "1 / rank of the first relevant page within the top k (whole list without @k), else 0",
            "recip_rank (-M k for @k)", "RR@k", "Voorhees 1999 (TREC-8 QA); trec_eval recip_rank",
            ("rr", "recip_rank"), K.mrr, accepts=("rel",),
        ),
        Family(
            "rr_full", False,
            "1 / rank of the first relevant page in the whole ranking (no cutoff; top k with @k), averaged over the"
            " queries that have a ranking in the run ONLY (a query missing from the run is left out, not scored 0):"
            " what ConvSearch-R1's released evaluation code reports as 'MRR'. Not MRR@3; shown beside it, labelled",
            None, None,
            "paper-compatible: BeastyZ/ConvSearch-R1 evaluation code (src/eval/get_metrics_using_*.py, print_trec_res:"
            " pytrec_eval recip_rank averaged over the queries in the run); Zhu et al. 2025, arXiv 2505.15776",
            (), K.rr_full, kind="run_mean", label="rr_full (paper-compatible: ConvSearch-R1 code)",
        ),
        Family(
            "recall", True, "relevant pages in the top k / all relevant pages of the query (0 if none)",
            "recall_k", "R@k", "trec_eval recall_k", ("r",), K.recall, accepts=("rel",),
        ),
        Family(
            "precision", True, "relevant pages in the top k / k (fewer than k retrieved still divides by k)",
            "P_k", "P@k", "trec_eval P_k", ("p",), K.precision, accepts=("rel",),
        ),
        Family(
            "hit", True, "1 if any relevant page is in the top k, else 0",
            "success_k", "Success@k", "trec_eval success_k", ("success", "hit_rate"), K.hit, accepts=("rel",),
        ),
        Family(
            "map", False,
            "sum over relevant pages at rank r <= k of (relevant in top r) / r, divided by all relevant pages of the query",
            "map_cut_k (map without @k)", "AP@k", "TREC average precision (Harman 1993); trec_eval map / map_cut_k",
            ("ap", "map_cut"), K.average_precision, accepts=("rel",),
        ),
        Family(
            "judged", True,
            "pages in the top k that have any qrels line for the query (any grade) / k (a run with fewer than k"
            " pages still divides by k). NOT ir_measures' Judged@k, which divides by min(k, retrieved): that is judged_ret@k",
            None, None, "vdr; after ir_measures Judged@k (MacAvaney, Macdonald & Ounis 2022, ECIR) but divided by k",
            (), K.judged, role="diagnostic",
        ),
        Family(
            "judged_ret", False,
            "pages in the top k that have any qrels line for the query / min(k, pages retrieved); 0 for a query"
            " with nothing retrieved: ir_measures' Judged@k (spelled with a capital J: 'Judged@10'; vdr's own"
            " lowercase 'judged@10' divides by k); without @k (ir_measures' bare Judged) the whole ranking",
            None, "Judged@k", "ir_measures 0.4 Judged@k (providers/judged_provider.py; MacAvaney, Macdonald & Ounis 2022, ECIR)",
            (), K.judged_ret, role="diagnostic",
        ),
        Family(
            "hole", True,
            "1 - judged@k: share of the top k without a qrels line for the query; empty slots of a run with fewer"
            " than k pages count as holes. NOT MTEB's Hole_at_k (spelled hole_at_k), which is hole_corpus@k",
            None, None, "vdr (per-query qrels); after MTEB hole@k", (), K.hole, role="diagnostic",
        ),
        Family(
            "hole_corpus", True,
            "pages of the top k that NO query's qrels hold (a corpus-wide judged set), / k; empty slots of a short run"
            " are not holes: MTEB's Hole_at_k (the spelling hole_at_k means this; vdr's hole@k uses the query's own"
            " qrels and counts empty slots). Per query as MTEB; MTEB averages over the run's queries, vdr over the"
            " qrels' query set (a query missing from the run scores 0)",
            None, None, "MTEB 2.x mteb/_evaluators/retrieval_metrics.py hole()", (), K.hole_corpus, role="diagnostic",
        ),
        Family(
            "ties", True,
            "number of tied score groups in the top k: groups of >= 2 pages of the top k (trec_eval order)"
            " with exactly equal scores; their order comes from the corpus-id tie-break, not the system",
            None, None, "Lin & Yang 2019, 'The Impact of Score Ties on Repeatability in Document Ranking' (SIGIR)",
            (), K.ties, role="diagnostic", kind="count",
        ),
        Family(
            "rprec", False,
            "relevant pages in the top R / R, R = the query's relevant pages (0 when R = 0 or nothing is retrieved);"
            " with @k the ranking is first cut at k",
            "Rprec", "Rprec", "Buckley & Voorhees 2005 (TREC: Experiment and Evaluation, ch. 3); trec_eval m_Rprec.c",
            ("r_prec",), K.rprec, accepts=("rel",),
        ),
        Family(
            "bpref", False,
            "1/R * sum over relevant retrieved pages of 1 - min(n, R) / min(N, R), n = judged non-relevant pages"
            " ranked above it, N = judged non-relevant pages of the query (1 when n = 0); pages without a qrels"
            " line are skipped",
            "bpref", "Bpref", "Buckley & Voorhees 2004 (SIGIR), 'Retrieval Evaluation with Incomplete Information'; trec_eval m_bpref.c",
            (), K.bpref, accepts=("rel",),
        ),
        Family(
            "infap", False,
            "inferred AP: 1/R * sum over relevant retrieved pages at rank r of 1/r + (r-1)/r * (J/(r-1)) * (rel + e)"
            " / (rel + nonrel + 2e), J = pages above with a qrels line (grade < 0: pooled but unjudged), rel / nonrel"
            " = judged relevant / non-relevant pages above, e = 1e-5; 1 for a relevant page at rank 1",
            "infAP", "infAP", "Yilmaz & Aslam 2006 (CIKM), 'Estimating Average Precision with Incomplete and Imperfect"
            " Judgments'; trec_eval m_infap.c", (), K.infap, accepts=("rel",),
        ),
        Family(
            "iprec_at_recall", False,
            "interpolated precision at recall level R (0.00, 0.10, ..., 1.00): the highest precision at any rank"
            " at or below the one where round(R * relevant) relevant pages are retrieved; 0 when that many are never"
            " retrieved. Written iprec_at_recall_0.10 (trec_eval's output), iprec_at_recall.0.1 (its -m) or IPrec@0.1"
            " (ir_measures)",
            "iprec_at_recall_0.10 (levels 0.00 ... 1.00)", None, "trec_eval m_iprec_at_recall.c (standard recall-precision graph)",
            ("iprec",), K.iprec_at_recall, accepts=("rel", "p"),
        ),
        Family(
            "11pt_avg", False,
            "mean of the 11 interpolated precisions iprec_at_recall_0.00 ... iprec_at_recall_1.00",
            "11pt_avg", None, "trec_eval m_11pt_avg.c (obsolete; for comparisons with old runs)",
            (), K.eleven_pt_avg, accepts=("rel",),
        ),
        Family(
            "num_ret", False, "pages retrieved for the query (in the top k with @k); the aggregate is the SUM over queries",
            "num_ret", "NumRet", "trec_eval m_num_ret.c", ("numret",), K.num_ret, kind="sum", role="diagnostic",
        ),
        Family(
            "num_rel", False, "relevant pages of the query (grade >= the relevance level); the aggregate is the SUM",
            "num_rel", "NumRel", "trec_eval m_num_rel.c", ("numrel",), K.num_rel, kind="sum", role="diagnostic",
            accepts=("rel",),
        ),
        Family(
            "num_rel_ret", False,
            "relevant pages retrieved (in the top k with @k); the aggregate is the SUM over queries",
            "num_rel_ret", "NumRelRet", "trec_eval m_num_rel_ret.c", ("numrelret",), K.num_rel_ret, kind="sum",
            role="diagnostic", accepts=("rel",),
        ),
        Family(
            "err", False,
            "expected reciprocal rank: sum_{r <= k} R_r / r * prod_{i < r} (1 - R_i), R = (2^grade - 1) / 2^4"
            " (grades 0..4; a grade > 4 is refused, as gdeval does)",
            None, "ERR@k", "Chapelle, Metzler, Zhang & Grinspan 2009 (CIKM); as gdeval.pl (TREC Web track) computes it",
            (), K.err,
        ),
        Family(
            "rbp", False,
            "rank-biased precision, binary: (1 - p) * sum_{r <= k} rel_r * p^(r - 1), rel_r = grade >= the relevance"
            " level; p = 0.8 unless given (RBP(p=0.9)). NOT trec_eval's rbp (graded gains, p = 0.9)",
            None, "RBP(rel=1)", "Moffat & Zobel 2008 (ACM TOIS 27(1)); ir_measures RBP(rel=1) (cwl_eval)",
            (), K.rbp, accepts=("rel", "p"),
        ),
        # ---- the rest of trec_eval 10's -m all_trec (trec_eval's default gains: gain = grade > 0)
        Family(
            "ndcg_rel", False,
            "nDCG averaged over the query's pages of grade > 0: DCG@r / IDCG@r at the rank r of each retrieved one,"
            " the final DCG / IDCG for each one not retrieved; gain = grade; 0 when no page has a grade > 0",
            "ndcg_rel", None, "trec_eval m_ndcg_rel.c (experimental measure)", (), K.ndcg_rel,
        ),
        Family(
            "rndcg", False,
            "mean of nDCG@c over the R levels c (the ranks where the ideal gain drops: the query's pages of each"
            " positive grade, cumulated from the top grade down), plus the whole-list nDCG when more than"
            " (pages of grade > 0) + 1 pages are retrieved; gain = grade; 0 when the query has no relevant page",
            "Rndcg", None, "trec_eval m_Rndcg.c (experimental measure)", (), K.rndcg,
        ),
        Family(
            "g", False,
            "normalized gain: sum over retrieved pages of grade > 0 at rank r of gain / log2(2 + C(r) - S(r)), S(r) the"
            " gain retrieved at ranks <= r, C(r) the sum of max(ideal gain, 1) over ideal ranks <= r; divided by the"
            " query's total gain; gain = grade",
            "G", None, "trec_eval m_G.c (experimental measure, 2008)", (), K.g_measure,
        ),
        Family(
            "bing", False,
            "binary G: 1/R * sum over relevant retrieved pages of 1 / log2(2 + n), n = the pages above it that are not"
            " relevant (judged or not)",
            "binG", None, "trec_eval m_binG.c (experimental measure, 2008)", (), K.bin_g, accepts=("rel",),
        ),
        Family(
            "rbp_graded", False,
            "rank-biased precision as trec_eval computes it: (1 - p) * sum_{r <= k} gain_r * p^(r - 1), gain = grade /"
            " the query's highest grade when that is above 1 (else the grade); p = 0.9 unless given; the relevance"
            " level plays no part. trec_eval calls it rbp; vdr's rbp is ir_measures' binary RBP (p = 0.8)",
            "rbp (trec_eval's name; vdr's rbp is ir_measures' RBP)", None,
            "Moffat & Zobel 2008 (ACM TOIS 27(1)); trec_eval 10 m_rbp.c", (), K.rbp_graded, accepts=("p",),
        ),
        Family(
            "rbp_resid", False,
            "RBP's residual: how far rbp_graded could rise if every unjudged retrieved page (no qrels line or a negative"
            " grade) had gain 1: p^n + (1 - p) * sum over unjudged pages of p^(r - 1), n = pages retrieved; 0 when every"
            " retrieved page is judged; p = 0.9 unless given",
            "rbp_resid", None, "Moffat & Zobel 2008; trec_eval 10 m_rbp_resid.c", (), K.rbp_resid, accepts=("p",),
            role="diagnostic",
        ),
        Family(
            "unj", True,
            "unjudged pages (no qrels line for the query, or a negative grade) in the top k / k; a run shorter than k is"
            " filled with judged pages (empty slots are not unjudged, unlike hole@k)",
            "unj_k", None, "trec_eval 10 m_unjudged.c", (), K.unj, role="diagnostic",
        ),
        Family(
            "relative_p", True,
            "relative precision: relevant pages in the top k / min(k, R) (precision up to R, recall beyond); 0 when R = 0",
            "relative_P_k", None, "trec_eval m_rel_P.c", (), K.relative_precision, accepts=("rel",),
        ),
        Family(
            "rprec_mult", False,
            "precision at c = floor(X * R + 0.9) pages (relevant in the top c / c; a shorter run is filled with"
            " non-relevant pages), X a multiple of R (0.20 ... 2.00); 0 when R = 0. Written rprec_mult_0.20",
            "Rprec_mult_0.20 (multiples 0.20 ... 2.00)", None, "trec_eval m_Rprec_mult.c", (), K.rprec_mult,
            accepts=("rel", "p"),
        ),
        Family(
            "set_p", False, "set precision: relevant retrieved / retrieved (the whole ranking; top k with @k)",
            "set_P", "SetP", "trec_eval m_set_P.c", ("setp",), K.set_precision, accepts=("rel",),
        ),
        Family(
            "set_recall", False, "set recall: relevant retrieved / relevant (0 when R = 0)",
            "set_recall", "SetR", "trec_eval m_set_recall.c", ("setr",), K.set_recall, accepts=("rel",),
        ),
        Family(
            "set_relative_p", False, "relative set precision: relevant retrieved / min(retrieved, R)",
            "set_relative_P", "SetP(relative=True)", "trec_eval m_set_rel_P.c", ("setrelp",), K.set_relative_precision,
            accepts=("rel",),
        ),
        Family(
            "set_map", False, "unranked set AP: relevant retrieved^2 / (retrieved * R), set precision times set recall",
            "set_map", "SetAP", "trec_eval m_set_map.c", ("setap",), K.set_map, accepts=("rel",),
        ),
        Family(
            "set_f", False,
            "set F: (x + 1) * P * R / (x * P + R) of set precision P and set recall R, x = beta (1 unless given:"
            " 2PR / (P + R)); 0 when nothing relevant is retrieved. beta is trec_eval's set_F.x parameter, used as"
            " written (not squared), as trec_eval and ir_measures' SetF(beta=x) do",
            "set_F (set_F.x: beta x)", "SetF", "trec_eval m_set_F.c (van Rijsbergen 1979)", ("setf",), K.set_f,
            accepts=("rel", "p"),
        ),
        Family(
            "utility", False,
            "set utility with trec_eval's default coefficients (1, -1, 0, 0): relevant retrieved - non-relevant retrieved"
            " (a count, averaged; pages without a qrels line are non-relevant)",
            "utility", None, "trec_eval m_utility.c", (), K.utility, accepts=("rel",),
        ),
        Family(
            "num_nonrel_judged_ret", False,
            "judged non-relevant pages retrieved (0 <= grade < the relevance level); the aggregate is the SUM over queries",
            "num_nonrel_judged_ret", None, "trec_eval m_num_nonrel_judged_ret.c", (), K.num_nonrel_judged_ret,
            kind="sum", role="diagnostic", accepts=("rel",),
        ),
        Family(
            "num_q", False, "1 per query of the query set; the aggregate is the SUM: the number of queries averaged",
            "num_q", "NumQ", "trec_eval m_num_q.c", ("numq",), K.num_q, kind="sum", role="diagnostic",
        ),
        Family(
            "gm_map", False,
            "average precision per query (as map); the aggregate is the GEOMETRIC mean exp(mean(log(max(AP, 1e-5))))",
            "gm_map", None, "trec_eval m_gm_map.c (Robertson 2006, GMAP)", (), K.gm_map, kind="gmean", accepts=("rel",),
        ),
        Family(
            "gm_bpref", False,
            "bpref per query (as bpref); the aggregate is the GEOMETRIC mean exp(mean(log(max(bpref, 1e-5))))",
            "gm_bpref", None, "trec_eval m_gm_bpref.c", (), K.gm_bpref, kind="gmean", accepts=("rel",),
        ),
    )
}

DEFAULT_FAMILIES = ("ndcg", "mrr", "recall", "precision", "hit", "map", "judged")
"""The metrics computed at each cutoff when none are named (:func:`default_metrics`)."""
SUMMARY_FAMILIES = (*DEFAULT_FAMILIES, "hole", "ties")
"""The metrics ``vdr evaluate`` and ``vdr compare`` compute at each cutoff (a summary table and its diagnostics)."""


def _build_aliases(families: Iterable[Family]) -> dict[str, str]:
    out: dict[str, str] = {}
    for f in families:
        for a in (f.name, *f.aliases):
            if out.setdefault(a, f.name) != f.name:  # pragma: no cover - a registry bug, caught at import
                raise RuntimeError(f"metric alias {a!r} is declared for both {out[a]!r} and {f.name!r}")
    return out


_ALIASES = _build_aliases(METRICS.values())

# base (lazy, so "ndcg_at_10" splits at "_at_" and "ndcg_cut_10" at the last "_"), ir_measures'
# parameters "(rel=2)", then the separator and the cutoff; matched on the name as written (case kept)
_NAME_RE = re.compile(r"^([a-z0-9][a-z0-9_\-]*?)(?:\(([^()]*)\))?(?:(@|_at_|_|\.)(\d+))?$", re.IGNORECASE)
# trec_eval's interpolated precision and precision at multiples of R: iprec_at_recall_0.10,
# Rprec_mult_0.20, with optional parameters
_IPREC_RE = re.compile(r"^(iprec_at_recall|rprec_mult)_(\d+(?:\.\d+)?)(?:\(([^()]*)\))?$", re.IGNORECASE)
# ir_measures' interpolated precision: IPrec@0.5, IPrec(rel=2)@0.5
_IPREC_AT_RE = re.compile(r"^iprec(?:\(([^()]*)\))?@(\d*\.?\d+)$", re.IGNORECASE)
# trec_eval's list of cutoffs: P.5,10 and ndcg_cut.5,10 (several metrics); ir_measures' P_5,10
_LIST_RE = re.compile(r"^(.*?)\.(\d+(?:\s*,\s*\d+)+)$")
_ULIST_RE = re.compile(r"^(.*?)_(\d+(?:\s*,\s*\d+)+)$")
#: RBP's persistence when none is given (ir_measures' default).
RBP_DEFAULT_P = 0.8
#: The families taking a real parameter ``p``, with its default (a name giving it is written without it).
DEFAULT_P = {"rbp": RBP_DEFAULT_P, "rbp_graded": K.TREC_RBP_P, "rbp_resid": K.TREC_RBP_P, "set_f": 1.0}
#: The name of the real parameter ``p`` where the family's tools call it otherwise (set_F's beta).
P_NAMES = {"set_f": "beta"}
#: trec_eval's families written NAME_X with a real parameter X (the recall level, the multiple of R),
#: with the letter their pattern uses.
LEVEL_FAMILIES = {"iprec_at_recall": "R", "rprec_mult": "X"}
#: trec_eval's default cutoffs of P, recall, ndcg_cut, map_cut and relative_P (``-m P`` = P_5 ... P_1000).
TREC_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
#: trec_eval's default multiples of R of Rprec_mult.
RPREC_MULTS = tuple(round(0.2 * i, 1) for i in range(1, 11))
#: The recall levels of trec_eval's ``iprec_at_recall`` and ``11pt_avg``.
RECALL_LEVELS = tuple(i / 10 for i in range(11))
# ir_measures nDCG(dcg=...): the DCG form -> the family computing it
_DCG_FAMILY = {"log2": "ndcg", "exp-log2": "ndcg_exp"}
# the parameters some families take beyond their Family.accepts (for the error message)
_EXTRA_PARAMS = {"ndcg": ", dcg=log2|exp-log2", "ndcg_exp": ", dcg=log2|exp-log2", "ndcg_run": ", dcg=log2|exp-log2",
                 "set_p": ", relative=true|false", "set_relative_p": ", relative=true|false"}


# trec_eval's measure names that, given without a parameter, stand for its default parameters
_TREC_BARE: dict[str, tuple[str, tuple]] = {
    "p": ("precision", TREC_CUTOFFS), "recall": ("recall", TREC_CUTOFFS), "ndcg_cut": ("ndcg", TREC_CUTOFFS),
    "map_cut": ("map", TREC_CUTOFFS), "relative_p": ("relative_p", TREC_CUTOFFS), "success": ("hit", (1, 5, 10)),
    "unj": ("unj", (5, 10, 20)), "iprec_at_recall": ("iprec_at_recall", RECALL_LEVELS), "rprec_mult": ("rprec_mult", RPREC_MULTS),
}


def alias_table() -> dict[str, str]:
    """``{accepted base spelling: canonical family}``, e.g. ``{"p": "precision", "rr": "mrr", ...}``.

    >>> alias_table()["hit_rate"], alias_table()["success"], alias_table()["ndcg_cut"]
    ('hit', 'hit', 'ndcg')
    """
    return dict(_ALIASES)


def metric_label(name: str) -> str:
    """The column heading of metric ``name`` (canonical): its family's label when it has one
    (paper-compatible measures), else ``name`` itself.

    >>> metric_label("rr_full"), metric_label("ndcg@3")
    ('rr_full (paper-compatible: ConvSearch-R1 code)', 'ndcg@3')
    """
    fam, _, k = name.partition("@")
    f = METRICS.get(fam)
    if f is None or f.label is None:
        return name
    return f.label if not k else f.label.replace(f.name, name, 1)


def known_metrics() -> str:
    """The known families as one line, e.g. ``"ndcg@k, ..., mrr[@k], ..."`` (for help and errors)."""
    return ", ".join(f.pattern for f in METRICS.values())


@dataclass(frozen=True, order=True)
class Metric:
    """A parsed metric name: ``family`` (a key of :data:`METRICS`), cutoff ``k`` (``None`` = whole list)
    and the parameters of ir_measures' syntax: ``rel`` (this metric's relevance level; ``None`` = the
    evaluation's) and ``p`` (RBP's persistence, ``None`` = the family's default; ``iprec_at_recall``'s recall
    level; ``rprec_mult``'s multiple of R).

    >>> str(Metric("ndcg", 3)), str(Metric("mrr")), str(Metric("precision", 5, rel=2)), str(Metric("rbp", p=0.9))
    ('ndcg@3', 'mrr', 'precision(rel=2)@5', 'rbp(p=0.9)')
    >>> str(Metric("iprec_at_recall", p=0.1)), str(Metric("rprec_mult", p=0.2))
    ('iprec_at_recall_0.10', 'rprec_mult_0.20')
    """

    family: str
    k: int | None = None
    rel: int | None = None
    p: float | None = None

    def __str__(self) -> str:
        if self.family in LEVEL_FAMILIES:
            base, params = f"{self.family}_{self.p:.2f}", []
        else:
            base, params = self.family, ([] if self.p is None else [f"{P_NAMES.get(self.family, 'p')}={self.p:g}"])
        if self.rel is not None:
            params.insert(0, f"rel={self.rel}")
        out = base + (f"({','.join(params)})" if params else "")
        return out if self.k is None else f"{out}@{self.k}"

    @property
    def spec(self) -> Family:
        """The family's registry row (:data:`METRICS`).

        Raises:
            KeyError: ``family`` is not a registry family (a :class:`Metric` built by hand).
        """
        return METRICS[self.family]

    @property
    def role(self) -> str:
        """The family's role: ``"quality"`` or ``"diagnostic"`` (:data:`ROLES`).

        >>> Metric("hole", 3).role, parse_metric("nDCG@3").role
        ('diagnostic', 'quality')
        """
        return self.spec.role


#: What an "unknown metric" error says instead of listing every metric (one line).
LIST_METRICS_HINT = "every metric: vdr metrics --list-metrics"


def _did_you_mean(base: str, k: str | None) -> str:
    """`` (did you mean 'ndcg@10'?)`` for a close known spelling, else ``""``; every suggestion parses.
    A known name glued to its cutoff is read as that name at that cutoff (``ndcg3`` -> ``ndcg@3``).

    >>> _did_you_mean("ndcg3", None), _did_you_mean("p5", None)
    (" (did you mean 'ndcg@3'?)", " (did you mean 'precision@5'?)")
    """
    glued = re.match(r"^(.*?[^\d_.\-])[_.\-]?(\d+)$", base) if k is None else None
    if glued and glued.group(1) in _ALIASES:
        try:
            return f" (did you mean {str(parse_metric(f'{_ALIASES[glued.group(1)]}@{int(glued.group(2))}'))!r}?)"
        except InputError:  # a family that takes no cutoff: the spelling suggestions below
            pass
    close = difflib.get_close_matches(base, list(_ALIASES), n=6, cutoff=0.6)
    ratio = {c: difflib.SequenceMatcher(None, base, c).ratio() for c in close}
    close = [c for c in close if ratio[c] >= ratio[close[0]] - 0.05]  # only the closest: 'errr' -> err, not rr/mrr; 'ndgc' -> ndcg, not rndcg
    fams = list(dict.fromkeys(_ALIASES[c] for c in close))[:3]
    names = []
    for f in fams:
        n = f"{f}@{k}" if k else (f"{f}@10" if METRICS[f].needs_k else f)
        if f in LEVEL_FAMILIES:
            n = f"{f}_{'0.10' if f == 'iprec_at_recall' else '1.00'}"
        try:
            parse_metric(n)
        except InputError:  # pragma: no cover - a suggestion must be a valid name
            continue
        names.append(n)
    if not names:
        return ""
    return f" (did you mean {' or '.join(repr(n) for n in names)}?)"


def _param_value(name: str, key: str, val: str):
    """The value of parameter ``key`` of metric ``name``: an int (rel, cutoff), a bool (judged_only), else a float.

    Raises:
        InputError: a value of the wrong type, naming the metric and the parameter."""
    try:
        if key in ("rel", "cutoff"):
            return int(val)
        if key == "judged_only":
            if val.lower() not in ("true", "false"):
                raise ValueError(val)
            return val.lower() == "true"
        return float(val)
    except ValueError:
        kind = {"rel": "an integer", "cutoff": "an integer", "judged_only": "True or False"}.get(key, "a number")
        raise InputError(f"metric {name!r}: {key} must be {kind}, got {val!r}") from None


def _parse_params(name: str, fam: str, text: str | None) -> tuple[str, dict]:
    """The family and ``{"rel": int, "p": float, "cutoff": int, "judged_only": bool}`` given by ir_measures'
    ``(key=value,...)`` syntax (``P(rel=2)@5``, ``RBP(p=0.9)``, ``SetF(beta=2)``, ``P(cutoff=5)``,
    ``nDCG(judged_only=True)``).

    Raises:
        InputError: a parameter the family does not take (never reinterpreted), a value of the wrong type,
            RBP's p outside (0, 1), set_F's beta < 0."""
    out: dict = {}
    if text is None:
        return fam, out
    for item in (x.strip() for x in text.split(",")):
        key, eq, val = (x.strip() for x in item.partition("="))
        key, val = key.lower(), val.strip("'\"")
        if key == "rel" and fam == "num_ret":  # ir_measures: NumRet(rel=N) is NumRelRet
            fam = "num_rel_ret"
        if key == "dcg" and fam in ("ndcg", "ndcg_exp") and val.lower() in _DCG_FAMILY:
            fam = _DCG_FAMILY[val.lower()]
            continue
        if key == "relative" and fam in ("set_p", "set_relative_p") and val.lower() in ("true", "false"):
            fam = "set_relative_p" if val.lower() == "true" else "set_p"  # ir_measures: SetP(relative=True)
            continue
        if key == "beta" and fam == "set_f":  # ir_measures' SetF(beta=x): trec_eval's set_F.x
            key = "p"
        if key == "judged_only" and eq:  # ir_measures' judged_only: trec_eval -J (unjudged pages removed first)
            if _param_value(name, key, val):
                raise InputError(f"metric {name!r}: judged_only=True (trec_eval -J: unjudged pages removed from the"
                                 " ranking first) is not supported; evaluate a run filtered to the judged pages instead")
            continue  # judged_only=False: ir_measures' default
        if not eq or (key not in METRICS[fam].accepts and key != "cutoff"):
            acc = ", ".join(f"{P_NAMES.get(fam, a) if a == 'p' else a}=..." for a in METRICS[fam].accepts)
            acc += _EXTRA_PARAMS.get(fam, "") + ", cutoff=k, judged_only=False"
            raise InputError(f"metric {name!r}: parameter {item!r} is not accepted; {fam} accepts: {acc.lstrip(', ')}")
        out[key] = _param_value(name, key, val)
    if fam in ("rbp", "rbp_graded", "rbp_resid") and "p" in out and not 0 < out["p"] < 1:
        raise InputError(f"metric {name!r}: RBP's persistence p must be in (0, 1), got {out['p']!r}")
    if fam == "set_f" and "p" in out and not out["p"] >= 0:
        raise InputError(f"metric {name!r}: set_F's beta must be >= 0, got {out['p']!r}")
    return fam, out


def _level(name: str, fam: str, level: float) -> float:
    """``level`` checked as a recall level (iprec_at_recall, in [0, 1]) or a multiple of R (rprec_mult, > 0).

    Raises:
        InputError: out of range, naming the metric."""
    if fam == "iprec_at_recall" and not 0 <= level <= 1:
        raise InputError(f"metric {name!r}: the recall level must be in [0, 1]")
    if fam == "rprec_mult" and not level > 0:
        raise InputError(f"metric {name!r}: the multiple of R must be > 0")
    return level


# trec_eval's measures with parameters after a dot (-m P.5,10), by how trec_eval reads them (meas_init.c):
# integer cutoffs (atol each, sorted; 0 and duplicates refused), real cutoffs (atof each, sorted), one real
# parameter (set_F's beta) and name=value pairs (rbp.p=0.95). Keys: trec_eval's names, lowercase.
_TREC_LONG_CUTS = {"p": "precision", "recall": "recall", "ndcg_cut": "ndcg", "map_cut": "map", "relative_p": "relative_p",
                   "success": "hit", "unj": "unj"}
_TREC_REAL_CUTS = {"iprec_at_recall": "iprec_at_recall", "rprec_mult": "rprec_mult"}
_TREC_PAIRS = {"rbp": "rbp_graded", "rbp_resid": "rbp_resid"}
# trec_eval's measures without parameters (trec_eval ignores one given, or refuses it): vdr refuses it
_TREC_NO_PARAMS = ("map", "recip_rank", "rprec", "bpref", "infap", "gm_map", "gm_bpref", "set_p", "set_recall",
                   "set_relative_p", "set_map", "num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret",
                   "bing", "g", "ndcg", "ndcg_rel", "rndcg", "11pt_avg", "utility")
_TREC_DOTTED_RE = re.compile(r"^([a-z0-9_]+?)\.(.*)$", re.IGNORECASE)
_INT_RE = re.compile(r"^\s*(\d+)(?:\.\d*)?\s*$")  # atol reads the digits: P.5.5 is P_5
_REAL_RE = re.compile(r"^\s*(\d+\.?\d*|\.\d+)\s*$")  # atof: iprec_at_recall..25 is 0.25


def _trec_dotted(name: str, text: str) -> list[Metric] | None:
    """trec_eval's ``ROOT.PARAMS`` spelling read as trec_eval 10 reads it, or ``None`` when ``text`` is not one.

    ``P.10,5`` -> precision@5, precision@10 (sorted, as trec_eval); ``P.5.5`` -> precision@5 (atol);
    ``iprec_at_recall..25`` -> iprec_at_recall_0.25; ``Rprec_mult.2`` -> rprec_mult_2.00; ``set_F.2`` -> set_f
    with beta 2; ``rbp.p=0.95`` -> rbp_graded with p 0.95 (trec_eval's rbp).

    Raises:
        InputError: a parameter trec_eval would refuse (a zero or duplicate cutoff, a malformed pair) or
            ignore (``map.5``: vdr refuses rather than print map), or one that is not a number."""
    m = _TREC_DOTTED_RE.match(text)
    root = m.group(1).lower() if m else ""
    if root not in (*_TREC_LONG_CUTS, *_TREC_REAL_CUTS, *_TREC_PAIRS, "set_f", *_TREC_NO_PARAMS):
        return None
    rest = m.group(2)
    if root in _TREC_NO_PARAMS:
        raise InputError(f"metric {name!r}: trec_eval's {m.group(1)} takes no parameter (trec_eval would ignore or"
                         f" refuse {rest!r}); vdr refuses it. A cutoff is written {_ALIASES.get(root, root)}@k")
    if root == "set_f":
        if not _REAL_RE.match(rest):
            raise InputError(f"metric {name!r}: set_F takes one parameter, beta (a number >= 0): set_F.2")
        x = float(rest)
        return [Metric("set_f", p=None if x == 1.0 else x)]
    if root in _TREC_PAIRS:
        key, eq, val = rest.partition("=")
        if key.strip() != "p" or not _REAL_RE.match(val) or not 0 < float(val) < 1:
            raise InputError(f"metric {name!r}: trec_eval's {m.group(1)} takes p=X, the persistence in (0, 1): rbp.p=0.95")
        p = float(val)
        return [Metric(_TREC_PAIRS[root], p=None if p == DEFAULT_P[_TREC_PAIRS[root]] else p)]
    pat = _INT_RE if root in _TREC_LONG_CUTS else _REAL_RE
    found = [pat.match(x) for x in rest.split(",")]
    if not all(found):
        bad = next(x for x, f in zip(rest.split(","), found) if not f)
        raise InputError(f"metric {name!r}: {bad!r} is not a {'cutoff' if pat is _INT_RE else 'number'}; trec_eval"
                         f" writes {m.group(1)}.5,10")
    vals = sorted(int(f.group(1)) if pat is _INT_RE else float(f.group(1)) for f in found)
    if len(set(vals)) < len(vals) or (pat is _INT_RE and vals[0] < 1):
        raise InputError(f"metric {name!r}: {'duplicate' if len(set(vals)) < len(vals) else 'zero'} cutoffs"
                         " (trec_eval refuses them too)")
    if root in _TREC_LONG_CUTS:
        return [Metric(_TREC_LONG_CUTS[root], v) for v in vals]
    fam = _TREC_REAL_CUTS[root]
    return [Metric(fam, p=_level(name, fam, v)) for v in vals]


def parse_metric(name: str | Metric) -> Metric:
    """Parse a metric name in vdr's, ir_measures', MTEB's, ranx's or trec_eval's spelling.

    Names are case-insensitive except one: ``Judged@k`` with a capital J is ir_measures' measure
    (``judged_ret@k``, divided by min(k, retrieved)); ``judged@k`` is vdr's (divided by k). MTEB's
    spelling ``hole_at_k`` is MTEB's measure (``hole_corpus@k``); ``hole@k`` is vdr's. ir_measures'
    parameters are accepted where the family takes them: ``P(rel=2)@5``, ``RR(rel=2)``,
    ``AP(rel=2)@100``, ``RBP(p=0.9)``, ``nDCG(dcg=exp-log2)@10`` (= ``ndcg_exp@10``).

    Returns:
        the canonical :class:`Metric` (``"P@5"`` -> ``Metric("precision", 5)``).

    Raises:
        InputError: an unknown family ("did you mean ...", a name glued to its cutoff read as both),
            a missing cutoff, a cutoff < 1, a parameter the family does not take, a list of metrics
            (``P.5,10``: see :func:`parse_metrics`).

    >>> parse_metric("precision_at_5") == parse_metric("P@5") == Metric("precision", 5)
    True
    >>> [str(parse_metric(n)) for n in ("Judged@10", "judged@10", "hole_at_3", "P(rel=2)@5", "RBP(p=0.8)")]
    ['judged_ret@10', 'judged@10', 'hole_corpus@3', 'precision(rel=2)@5', 'rbp']
    >>> parse_metric("ndcg3")
    Traceback (most recent call last):
    ...
    vdr.errors.InputError: unknown metric 'ndcg3' (did you mean 'ndcg@3'?); every metric: vdr metrics --list-metrics
    """
    if isinstance(name, Metric):
        return name
    if not isinstance(name, str):
        raise InputError(f"a metric name must be a string like 'ndcg@10', got {type(name).__name__} {name!r}")
    text = name.strip()
    dotted = _trec_dotted(name, text)
    if dotted is not None and len(dotted) == 1:
        return dotted[0]
    if dotted is not None or _LIST_RE.match(text) or _ULIST_RE.match(text):
        raise InputError(f"{name!r} names several metrics (trec_eval's list syntax): give it where a list of metrics is"
                         " taken (vdr metrics -m, MetricPlan.parse, parse_metrics)")
    ip, ia = _IPREC_RE.match(text), _IPREC_AT_RE.match(text)
    if ip or ia:
        fam, level, ptext = (ip.group(1).lower(), ip.group(2), ip.group(3)) if ip else ("iprec_at_recall", ia.group(2), ia.group(1))
        _, params = _parse_params(name, fam, ptext)
        return Metric(fam, None, params.get("rel"), _level(name, fam, float(level)))
    m = _NAME_RE.match(text)
    base = m.group(1).lower() if m else ""
    if not m or base not in _ALIASES:
        hint = _did_you_mean(base, m.group(4)) if m else ""
        raise InputError(f"unknown metric {name!r}{hint}; {LIST_METRICS_HINT}")
    fam, sep, k = _ALIASES[base], m.group(3), m.group(4)
    if k is None and m.group(2) is None and base in _TREC_BARE and base not in ("iprec_at_recall", "rprec_mult"):
        first, last = (str(x) for x in _trec_defaults(base)[:: len(_trec_defaults(base)) - 1])
        raise InputError(f"metric {name!r} needs a cutoff, e.g. {fam}@10; trec_eval's bare {name} names several metrics"
                         f" ({first} ... {last}): give it where a list of metrics is taken (vdr metrics -m, parse_metrics)")
    if m.group(1) == "Judged":  # ir_measures' spelling: its own measure (vdr's judged@k divides by k)
        fam = "judged_ret"
    elif fam == "hole" and sep is not None and sep.lower() == "_at_":  # MTEB's spelling: MTEB's measure
        fam = "hole_corpus"
    if fam == "iprec_at_recall":
        raise InputError(f"metric {name!r} needs a recall level, e.g. iprec_at_recall_0.10 (trec_eval's 11 levels 0.00 ... 1.00)")
    if fam == "rprec_mult":
        raise InputError(f"metric {name!r} needs a multiple of R, e.g. rprec_mult_0.20 (trec_eval's 10 multiples 0.20 ... 2.00)")
    fam, params = _parse_params(name, fam, m.group(2))
    if "cutoff" in params:  # ir_measures' P(cutoff=5): P@5
        if k is not None:
            raise InputError(f"metric {name!r} gives its cutoff twice (cutoff= and @{k})")
        k = str(params["cutoff"])
    if fam == "set_f" and k is not None and sep in ("_", "."):  # trec_eval's set_F.2 / set_F_2: beta 2, not a cutoff
        if "p" in params:
            raise InputError(f"metric {name!r} gives set_F's beta twice")
        params["p"], k = float(k), None
    if k is None and METRICS[fam].needs_k:
        raise InputError(f"metric {name!r} needs a cutoff, e.g. {fam}@10")
    if k is not None and int(k) < 1:
        raise InputError(f"metric {name!r}: the cutoff must be >= 1")
    p = params.get("p")
    if fam in DEFAULT_P and p == DEFAULT_P[fam]:
        p = None
    return Metric(fam, None if k is None else int(k), params.get("rel"), p)


def _trec_defaults(base: str) -> list[Metric]:
    """The metrics trec_eval's bare measure name ``base`` (lowercase, a key of ``_TREC_BARE``) stands for."""
    fam, params = _TREC_BARE[base]
    if fam in LEVEL_FAMILIES:
        return [Metric(fam, p=x) for x in params]
    return [Metric(fam, x) for x in params]


def _trec_set(*names: str) -> tuple[Metric, ...]:
    """Metrics in trec_eval's order: vdr family names, or trec_eval's bare names (their default parameters)."""
    out: list[Metric] = []
    for n in names:
        out += _trec_defaults(n) if n in _TREC_BARE else [Metric(n)]
    return tuple(out)


#: trec_eval's nicknames for sets of measures (``-m all_trec``, ``-m official``, ``-m set``) as vdr
#: metrics, in trec_eval's output order; trec_eval's ``runid`` and ``relstring`` (not numbers) are not
#: metrics (see :mod:`vdr.metrics.trec_eval`); trec_eval's ``rbp`` is ``rbp_graded``.
TREC_NICKNAMES: dict[str, tuple[Metric, ...]] = {
    "all_trec": _trec_set(
        "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "rprec", "bpref", "mrr", "iprec_at_recall", "p",
        "recall", "infap", "gm_bpref", "rprec_mult", "utility", "11pt_avg", "bing", "g", "ndcg", "ndcg_rel", "rndcg",
        "ndcg_cut", "map_cut", "relative_p", "success", "set_p", "set_relative_p", "set_recall", "set_map", "set_f",
        "num_nonrel_judged_ret", "rbp_graded", "rbp_resid", "unj",
    ),
    "official": _trec_set("num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "rprec", "bpref", "mrr",
                          "iprec_at_recall", "p"),
    "set": _trec_set("num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_p", "set_relative_p", "set_recall",
                     "set_map", "set_f"),
}


def parse_metrics(names: str | Metric | Iterable[str | Metric]) -> list[Metric]:
    """Parse one or several metric names, expanding trec_eval's cutoff lists, distinct, in order.

    Returns:
        the canonical :class:`Metric` values: ``"P.5,10"`` -> ``[precision@5, precision@10]``.

    Raises:
        InputError: as :func:`parse_metric`.

    trec_eval's measure names without a parameter stand for trec_eval's default parameters (``P`` is
    ``P_5`` ... ``P_1000``; also ``recall``, ``ndcg_cut``, ``map_cut``, ``relative_P``, ``success``, ``unj``,
    ``iprec_at_recall``, ``Rprec_mult``), and its nicknames for sets of measures, ``all_trec``,
    ``official`` and ``set``, for those measures (:data:`TREC_NICKNAMES`; ``runid`` and ``relstring``,
    which are not numbers, are left to :mod:`vdr.metrics.trec_eval`).

    >>> [str(m) for m in parse_metrics(["P.5,10", "ndcg_cut.5,10", "P@5"])]
    ['precision@5', 'precision@10', 'ndcg@5', 'ndcg@10']
    >>> [str(m) for m in parse_metrics("success")], len(parse_metrics("all_trec"))
    (['hit@1', 'hit@5', 'hit@10'], 98)
    """
    items = [names] if isinstance(names, (str, Metric)) else list(names)
    out: list[Metric] = []
    for n in items:
        lm = _LIST_RE.match(n.strip()) if isinstance(n, str) else None
        key = n.strip().lower() if isinstance(n, str) else None
        if key in TREC_NICKNAMES:
            out += TREC_NICKNAMES[key]
        elif key in _TREC_BARE:
            out += _trec_defaults(key)
        elif isinstance(n, str) and _trec_dotted(n, n.strip()) is not None:
            out += _trec_dotted(n, n.strip())
        elif lm or (isinstance(n, str) and _ULIST_RE.match(n.strip())):
            lm = lm or _ULIST_RE.match(n.strip())
            out += [parse_metric(f"{lm.group(1)}.{c.strip()}") for c in lm.group(2).split(",")]
        else:
            out.append(parse_metric(n))
    return list(dict.fromkeys(out))


def parse_cutoffs(k: str | int | Iterable[int], *, single: bool = False) -> list[int]:
    """Parse metric cutoffs: ``"1,3,5,10"``, ``3`` or ``[10, 3]`` -> sorted distinct ``[1, 3, 5, 10]``.

    The one parser of ``k`` (a metric cutoff only; the retrieval depth is ``depth``). Used by
    ``vdr metrics``, ``vdr evaluate`` and ``vdr judge`` alike.

    Args:
        k: a comma-separated string, an integer, or an iterable of integers.
        single: exactly one cutoff is expected (``vdr judge``).

    Returns:
        sorted distinct ``int`` cutoffs, each >= 1.

    Raises:
        InputError: a non-integer (``"a,b"``, ``2.5``, ``True``), a cutoff < 1, no cutoff, or more
            than one with ``single``.

    >>> parse_cutoffs(10), parse_cutoffs([5, 1]), parse_cutoffs("3", single=True)
    ([10], [1, 5], [3])
    """
    if isinstance(k, str):
        try:
            ks = [int(x) for x in k.replace(" ", "").split(",") if x]
        except ValueError:
            raise InputError(f"cutoffs (--k) must be comma-separated integers like 1,3,5,10, got {k!r}") from None
    else:
        items = [k] if isinstance(k, (int, np.integer)) else list(k)
        bad = [x for x in items if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer))]
        if bad:
            raise InputError(f"cutoffs (--k) must be integers, got {bad[0]!r}")
        ks = [int(x) for x in items]
    if not ks or any(x < 1 for x in ks):
        raise InputError(f"cutoffs (--k) must be integers >= 1, got {k!r}")
    out = sorted(dict.fromkeys(ks))
    if single and len(out) != 1:
        raise InputError(f"one cutoff k expected, got {k!r}")
    return out


def default_metrics(ks: str | int | Iterable[int] = METRICS_CUTOFFS) -> list[Metric]:
    """The standard set: ndcg, mrr, recall, precision, hit, map and judged at each cutoff in ``ks``.

    >>> [str(m) for m in default_metrics([3])]
    ['ndcg@3', 'mrr@3', 'recall@3', 'precision@3', 'hit@3', 'map@3', 'judged@3']
    """
    return [Metric(f, k) for f in DEFAULT_FAMILIES for k in parse_cutoffs(ks)]


def diagnostic_metrics(ks: str | int | Iterable[int] = METRICS_CUTOFFS) -> list[Metric]:
    """The diagnostics ``vdr metrics`` adds to the default set: ``ties@k`` at each cutoff.

    >>> [str(m) for m in diagnostic_metrics("3,1")]
    ['ties@1', 'ties@3']
    """
    return [Metric("ties", k) for k in parse_cutoffs(ks)]


_EXTRA_SPELLINGS = {
    "judged_ret": ["Judged@k (ir_measures, capital J)"],
    "hole_corpus": ["hole_at_k (MTEB)"],
    "ndcg_exp": ["nDCG(dcg=exp-log2)@k (ir_measures)"],
    "iprec_at_recall": ["iprec_at_recall_0.00 ... iprec_at_recall_1.00", "iprec_at_recall.0.5,0.25 (trec_eval -m)",
                        "IPrec@0.5 (ir_measures)"],
    "rprec_mult": ["rprec_mult_0.20 ... rprec_mult_2.00", "Rprec_mult_0.20 (trec_eval)", "Rprec_mult.0.5,1.5 (trec_eval -m)"],
    "set_f": ["set_F.x / set_F_x (trec_eval: beta x)", "SetF(beta=x) (ir_measures)"],
    "rbp_graded": ["trec_eval's rbp (in --format trec_eval and -m all_trec; the spelling rbp is ir_measures' RBP)",
                   "rbp.p=X (trec_eval -m: trec_eval's rbp with persistence X)"],
    "set_relative_p": ["SetP(relative=True) (ir_measures)"],
}


def _param_label(family: str, param: str) -> str:
    """``rel=N``, ``p=X`` or ``beta=X``: how the help writes parameter ``param`` of ``family``."""
    return "rel=N" if param == "rel" else f"{P_NAMES.get(family, param)}=X"


def describe_metrics() -> str:
    """The registry as text (``vdr metrics --list-metrics``): per family its pattern, the other
    spellings accepted, the definition, the trec_eval and ir_measures equivalents, the reference,
    the ir_measures parameters it takes and how its aggregate is formed.

    >>> print(describe_metrics().splitlines()[0])
    ndcg[@k]  (also: ndcg_at_k, ndcg_cut@k)
    """
    blocks = []
    for f in METRICS.values():
        if f.name in LEVEL_FAMILIES:
            also = []
        elif f.name == "hole":
            also = []  # hole_at_k is MTEB's measure: hole_corpus
        else:
            also = [f"{f.name}_at_k"] + [s for a in f.aliases
                                         for s in ((f"{a}@k",) if f.needs_k or a in _TREC_BARE else (f"{a}@k", a))]
        also += _EXTRA_SPELLINGS.get(f.name, [])
        params = [a for a in f.accepts if not (a == "p" and f.name in LEVEL_FAMILIES)]
        blocks.append(
            f"{f.pattern}  (also: {', '.join(also) or '-'})\n"
            f"    {f.definition}\n"
            f"    trec_eval: {f.trec_eval or '-'}; ir_measures: {f.ir_measures or '-'}; reference: {f.reference}"
            + (f"; parameters: {', '.join(_param_label(f.name, a) for a in params)}" if params else "")
            + ("; a count per query (aggregate: mean; total in the policy)" if f.kind == "count" else "")
            + ("; a count per query (aggregate: SUM over the queries, as trec_eval's all line)" if f.kind == "sum" else "")
            + ("; averaged over the queries present in the run only (paper-compatible)" if f.kind == "run_mean" else "")
            + ("; aggregate: the GEOMETRIC mean of max(value, 1e-5) (trec_eval's gm_*)" if f.kind == "gmean" else "")
        )
    return "\n".join(blocks) + (
        "\nNames are case-insensitive (nDCG@10 = ndcg@10) except Judged@k, which is ir_measures' judged_ret@k (vdr's"
        " judged@k divides by k); NAME_k and NAME.k (trec_eval, pytrec_eval) and NAME_at_k (MTEB) are accepted for"
        " every name, except hole_at_k, which is MTEB's hole_corpus@k (vdr's hole@k uses the query's own qrels and"
        " counts empty slots); trec_eval's -m parameters are read as trec_eval reads them: cutoff lists sorted (P.10,5 ="
        " P_5 and P_10; P.5.5 = P_5, as its atol), recall levels and multiples of R (iprec_at_recall..25 = 0.25,"
        " Rprec_mult.0.5,1.5), set_F.x's beta, rbp.p=X; a parameter trec_eval's measure does not take (map.5) is"
        " refused. ir_measures' parameters: rel=N (this"
        " metric's relevance level: P(rel=2)@5), p=X (RBP(p=0.9)), beta=X (SetF), cutoff=k (P(cutoff=5) = P@5),"
        " judged_only=False, dcg=exp-log2 (nDCG: ndcg_exp); IPrec@0.5, SetRelP, P_5,10 and bare Judged as ir_measures. The output always uses"
        " the first name of the row, with its parameters: precision(rel=2)@5. trec_eval's bare names stand for its default"
        " parameters (P: P_5 ... P_1000; also recall, ndcg_cut, map_cut, relative_P, success, unj, iprec_at_recall,"
        " Rprec_mult) and its nicknames all_trec, official and set for its sets of measures (vdr metrics --format trec_eval"
        " prints trec_eval's own lines)."
    )
