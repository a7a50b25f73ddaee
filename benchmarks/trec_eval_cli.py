"""End-to-end speed of ``vdr metrics -m all_trec -Q --format trec_eval`` over many runs beside the trec_eval binary.

Issue 34 (item 11): ``-m all_trec -q`` over robust03's 17 runs must take at most twice trec_eval's time, timed
end to end (process start, reading the files, evaluating, printing). Run it as::

    python benchmarks/trec_eval_cli.py --trec-eval /path/to/trec_eval            # 17 runs x 100 queries x 1,000 pages
    python benchmarks/trec_eval_cli.py --trec-eval ./trec_eval --runs 5 --queries 50 --quick-check

trec_eval 10 is built from source (github.com/usnistgov/trec_eval, ``make``); give its path with
``--trec-eval`` or the ``TREC_EVAL`` environment variable. Without it the script prints a JSON line with
``"skipped"`` and exits 0.

Data (deterministic, ``random.Random(--seed)``): a qrels file shaped like robust03's (``--queries`` topics,
each with 300-1,500 judged documents, grades 0/1/2, about 10% relevant) and ``--runs`` TREC run files of
``--depth`` documents per topic, drawn so that judged relevant documents rank higher on average; ids such as
``FBIS3-10082`` (robust03's style); 5% of the scores are ties.

What is timed (``time.perf_counter``), best of ``--repeat``:

* trec_eval: ``trec_eval -q -m all_trec QRELS RUN`` once per run, one process after the other (trec_eval
  takes one run per call), output written to a file;
* vdr: ONE ``python -m vdr metrics QRELS RUN1 ... RUNn -m all_trec -Q --format trec_eval`` process (vdr
  reads the qrels once), output written to a file.

Check: the two outputs hold the same (measure, query) lines, every number equal to 4 decimals (the count of
differing lines is printed; the benchmark fails on any difference).

The last line printed is one JSON object: sizes, both wall times in seconds, ``ratio`` = vdr / trec_eval
(the target is <= 2.0), the same for CPU time (user + system of the child processes: ``cpu_ratio``, steadier
than wall time on a shared machine) and ``differing_lines``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_data(folder: Path, args: argparse.Namespace) -> tuple[Path, list[Path]]:
    """Write the qrels and the runs into ``folder``; return their paths."""
    rng = random.Random(args.seed)
    qrels_lines, judged = [], {}
    for t in range(args.queries):
        qid = str(601 + t)
        docs = [f"FBIS{rng.randint(3, 4)}-{rng.randint(1, 99999)}" for _ in range(rng.randint(300, 1500))]
        docs = list(dict.fromkeys(docs))
        grades = {d: (rng.choice((1, 1, 2)) if rng.random() < 0.1 else 0) for d in docs}
        judged[qid] = grades
        qrels_lines += [f"{qid} 0 {d} {g}" for d, g in grades.items()]
    qrels = folder / "qrels.robust03"
    qrels.write_text("\n".join(qrels_lines) + "\n")
    runs = []
    for r in range(args.runs):
        lines = []
        for qid, grades in judged.items():
            pool = list(grades) + [f"LA{rng.randint(10000, 99999)}-{rng.randint(1, 999)}" for _ in range(args.depth)]
            scored = {d: rng.random() * 10 + 3 * grades.get(d, 0) * rng.random() for d in pool}
            top = sorted(scored.items(), key=lambda kv: -kv[1])[: args.depth]
            for rank, (d, s) in enumerate(top, 1):
                s = round(s, 1) if rng.random() < 0.05 else round(s, 6)
                lines.append(f"{qid} Q0 {d} {rank} {s} run{r}")
        path = folder / f"run{r:02d}.txt"
        path.write_text("\n".join(lines) + "\n")
        runs.append(path)
    return qrels, runs


def _children_cpu() -> float:
    """CPU seconds (user + system) used so far by this process's finished children."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def time_trec_eval(binary: str, qrels: Path, runs: list[Path], out: Path) -> tuple[float, float]:
    """(wall, CPU) seconds for trec_eval -q -m all_trec on each run, one process after the other."""
    c0, t0 = _children_cpu(), time.perf_counter()
    with out.open("w") as f:
        for run in runs:
            subprocess.run([binary, "-q", "-m", "all_trec", str(qrels), str(run)], stdout=f, check=True)
    return time.perf_counter() - t0, _children_cpu() - c0


def time_vdr(qrels: Path, runs: list[Path], out: Path) -> tuple[float, float]:
    """(wall, CPU) seconds for one vdr metrics process over all the runs."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "vdr", "metrics", str(qrels), *map(str, runs), "-m", "all_trec", "-Q", "--format", "trec_eval"]
    c0, t0 = _children_cpu(), time.perf_counter()
    with out.open("w") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.DEVNULL, check=True, env=env)
    return time.perf_counter() - t0, _children_cpu() - c0


def differing_lines(a: Path, b: Path) -> tuple[int, int]:
    """(lines of ``a`` whose (measure, query, value) differ from ``b``'s, lines compared)."""
    la, lb = a.read_text().splitlines(), b.read_text().splitlines()
    diff = abs(len(la) - len(lb))
    for x, y in zip(la, lb):
        if x.split("\t")[:2] != y.split("\t")[:2] or x.split("\t")[2] != y.split("\t")[2]:
            diff += 1
    return diff, max(len(la), len(lb))


def main() -> None:
    """Make the data, time both tools, check their lines agree and print the JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trec-eval", default=os.environ.get("TREC_EVAL"), help="path of the trec_eval 10 binary")
    ap.add_argument("--runs", type=int, default=17)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--depth", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sizes = {"runs": args.runs, "queries": args.queries, "depth": args.depth}
    if not args.trec_eval or not Path(args.trec_eval).exists():
        print(json.dumps({"benchmark": "trec_eval_cli", **sizes, "skipped": "no trec_eval binary (--trec-eval or TREC_EVAL)"}))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        qrels, runs = make_data(folder, args)
        te_out, vdr_out = folder / "trec_eval.out", folder / "vdr.out"
        te = [time_trec_eval(args.trec_eval, qrels, runs, te_out) for _ in range(args.repeat)]
        vd = [time_vdr(qrels, runs, vdr_out) for _ in range(args.repeat)]
        diff, n = differing_lines(te_out, vdr_out)
    te_s, vdr_s = min(t[0] for t in te), min(t[0] for t in vd)
    te_cpu, vdr_cpu = min(t[1] for t in te), min(t[1] for t in vd)
    print(f"trec_eval: {te_s:.3f} s ({te_cpu:.3f} s CPU) for {args.runs} runs; vdr: {vdr_s:.3f} s ({vdr_cpu:.3f} s CPU);"
          f" {diff} of {n} lines differ", file=sys.stderr)
    print(json.dumps({"benchmark": "trec_eval_cli", **sizes, "trec_eval_s": round(te_s, 6), "vdr_s": round(vdr_s, 6),
                      "ratio": round(vdr_s / te_s, 4), "trec_eval_cpu_s": round(te_cpu, 6), "vdr_cpu_s": round(vdr_cpu, 6),
                      "cpu_ratio": round(vdr_cpu / te_cpu, 4), "target_ratio": 2.0, "differing_lines": diff, "lines": n}))
    if diff:
        raise SystemExit(f"{diff} of {n} lines differ from trec_eval's")


if __name__ == "__main__":
    main()
