"""Regenerate tests/data/ir_measures_0.4.3.json: random qrels and runs (numeric ids, as gdeval.pl wants;
many score ties) and the values ir_measures computes for them.

Run with a Python that has ir-measures (0.4.3), pytrec-eval-terrier, cwl-eval and perl on PATH:
    python tests/make_ir_measures_fixture.py
test_metrics_measures.py compares vdr with the recorded values (and with ir_measures itself when installed).
"""

import json
import random
from pathlib import Path

import ir_measures

MEASURES = ["Judged@5", "Judged@20", "ERR@5", "ERR@10", "ERR@20", "RBP(rel=1,p=0.8)", "RBP(rel=2,p=0.9)", "P(rel=2)@5",
            "RR(rel=2)", "AP(rel=2)@100", 'nDCG(dcg="exp-log2")@10', "nDCG", "Rprec", "Bpref", "infAP", "NumRet", "NumRel",
            "NumRelRet", "NumRelRet(rel=2)"]


def data(seed: int, ties: bool):
    rng = random.Random(seed)
    qrels, run = {}, {}
    for q in range(1, 13):
        qid = str(q)
        docs = [str(d) for d in rng.sample(range(100, 160), 30)]
        qrels[qid] = {d: rng.choice([-1, 0, 0, 0, 1, 1, 2, 3, 4]) for d in docs[:rng.randint(1, 15)]}
        if q == 12:
            continue  # a query without a ranking
        n = rng.randint(1, 25)
        ret = rng.sample(docs[:20] + [str(d) for d in range(200, 215)], n)
        run[qid] = {d: (float(rng.randint(0, 6)) if ties else rng.random() * 10) for d in ret}
    return qrels, run


def main():
    out = {"ir_measures": ir_measures.__version__, "measures": MEASURES, "cases": []}
    for seed, ties in [(1, True), (2, False), (3, True)]:
        qrels, run = data(seed, ties)
        vals = {}
        for m in ir_measures.iter_calc(list(map(ir_measures.parse_measure, MEASURES)), qrels, run):
            vals.setdefault(str(m.measure), {})[m.query_id] = m.value
        out["cases"].append({"seed": seed, "ties": ties, "qrels": qrels, "run": run, "values": vals})
    path = Path(__file__).parent / "data" / f"ir_measures_{ir_measures.__version__}.json"
    path.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n")
    print(path)


if __name__ == "__main__":
    main()
