"""Re-runs cost no page encoding: ``vdr evaluate`` twice on the bundled sample, the second time with
one more rewrite variant.

Usage::

    python benchmarks/rerun.py            # the bundled sample (4 PDFs, 43 pages, 42 queries)

Steps (everything in a temporary folder, removed afterwards):

1. ``vdr ingest assets/sample_corpus/pdfs`` (not timed).
2. First run, timed: ``vdr evaluate CORPUS --backend lexical,semantic,hybrid`` with the
   ``conversational`` rewrites (variants original + conversational). The BM25 index and the
   semantic page vectors are built and cached in ``CORPUS/.vdr-cache/``.
3. Second run, timed: the same plus the ``keywords`` rewrites (one more variant). Both indexes come
   from the cache: ``page_forward_passes_second`` (the sum of ``page_forward_passes`` over the
   backends in ``results.json``) must be 0.

Each run is a fresh ``python -m vdr evaluate`` process (what a user waits for: imports and model
loading included). Then the same two runs again through the Python API in this one process
(``vdr.evaluate``, a new cache folder: a notebook's case, where imports and the semantic model stay
loaded between calls): ``first_inprocess_s``, ``second_inprocess_s``, ``ratio_inprocess``.

The last line printed is one JSON object: ``first_s``, ``second_s``, ``ratio`` (second / first),
``page_forward_passes_first``, ``page_forward_passes_second``, ``cache_hits_second``, the in-process
figures and the per-stage seconds of each CLI run (``timing.json``). Goal (issue 17): 0 forward
passes on the second run, ``ratio`` <= 0.25.

Query vectors are cached per text (:mod:`vdr.retrieve.qcache`), so the second run encodes only
the 42 ``keywords`` texts, with the model's ONNX export (ONNX Runtime; exported once, by the first
run, into the cache) and the cached model spec: the second run imports neither torch nor
sentence-transformers. ``torch_imported_second`` says whether it did (``-X importtime`` of the
second run). ``import_sentence_transformers_s`` (a fresh ``python -c "import
sentence_transformers"``, same run) is what loading the model would cost. The first run's export
is a one-off cost: ``first_export_s`` (the semantic backend's ``report.query_encoder.export_s``)
and ``ratio_without_export`` (second / (first - export)) show the ratio without it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "assets" / "sample_corpus"


def vdr(*args: str, importtime: bool = False) -> float:
    """Run ``python -m vdr ARGS`` from the repository; seconds of wall time. With ``importtime``,
    ``-X importtime`` and the modules imported are kept in :data:`IMPORTED`."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t = time.perf_counter()
    flags = ["-X", "importtime"] if importtime else []
    proc = subprocess.run([sys.executable, *flags, "-m", "vdr", *args], capture_output=True, text=True, env=env, cwd=ROOT)
    took = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"vdr {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    if importtime:
        IMPORTED[:] = [line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    return took


IMPORTED: list[str] = []


def import_floor() -> float:
    """Seconds of a fresh ``python -c "import sentence_transformers"``: what a second run pays
    whenever one query text is new (the model must encode it), whatever vdr caches."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import sentence_transformers"], check=True, capture_output=True)
    return time.perf_counter() - t


def evaluate(corpus: Path, out: Path, variants: list[str], importtime: bool = False) -> tuple[float, dict, dict]:
    args = ["evaluate", str(corpus), "--queries", str(SAMPLE / "queries.jsonl"), "--qrels", str(SAMPLE / "qrels.tsv"),
            "--backend", "lexical,semantic,hybrid", "--quiet", "--out", str(out)]
    for v in variants:
        args += ["--rewrites", f"{v}={SAMPLE / f'rewrites-{v}.jsonl'}"]
    took = vdr(*args, importtime=importtime)
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return took, doc["backend_reports"], json.loads((out / "timing.json").read_text(encoding="utf-8"))


def in_process(corpus: Path, tmp: Path) -> tuple[float, float, int]:
    """The two runs through ``vdr.evaluate`` in this process, with a fresh cache folder."""
    sys.path.insert(0, str(ROOT))
    from vdr.experiment.evaluation import evaluate as run

    kw = dict(queries=SAMPLE / "queries.jsonl", qrels=SAMPLE / "qrels.tsv", backends="lexical,semantic,hybrid",
              progress=False, cache_dir=tmp / "cache-inprocess")
    rw = {v: SAMPLE / f"rewrites-{v}.jsonl" for v in ("conversational", "keywords")}
    t = time.perf_counter()
    run(corpus, out=tmp / "first-ip", rewrites={"conversational": rw["conversational"]}, **kw)
    first = time.perf_counter() - t
    t = time.perf_counter()
    res = run(corpus, out=tmp / "second-ip", rewrites=rw, **kw)
    second = time.perf_counter() - t
    return first, second, sum(r["page_forward_passes"] for r in res.backend_reports.values())


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    with tempfile.TemporaryDirectory(prefix="vdr-rerun-") as tmp:
        tmp = Path(tmp)
        corpus = tmp / "corpus"
        vdr("ingest", str(SAMPLE / "pdfs"), "--out", str(corpus), "--quiet")
        first_s, rep1, t1 = evaluate(corpus, tmp / "first", ["conversational"])
        second_s, rep2, t2 = evaluate(corpus, tmp / "second", ["conversational", "keywords"])
        evaluate(corpus, tmp / "second-importtime", ["conversational", "keywords"], importtime=True)  # not timed
        torch_second = "torch" in IMPORTED
        doc = json.loads((tmp / "second" / "results.json").read_text(encoding="utf-8"))
        runtime = doc["config"].get("backend_config", {}).get("semantic", {}).get("query_runtime")
        floor_s = import_floor()
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the sample's long pages: truncation warnings
            first_ip, second_ip, passes_ip = in_process(corpus, tmp)
    print(f"first run (2 variants, caches empty): {first_s:.2f} s; second run (3 variants, caches warm): {second_s:.2f} s")
    print(f"in one process: first {first_ip:.2f} s, second {second_ip:.2f} s")
    export_s = rep1.get("semantic", {}).get("query_encoder", {}).get("export_s", 0.0)
    print(json.dumps({
        "benchmark": "rerun",
        "first_s": round(first_s, 3),
        "second_s": round(second_s, 3),
        "ratio": round(second_s / first_s, 4),
        "page_forward_passes_first": sum(r["page_forward_passes"] for r in rep1.values()),
        "page_forward_passes_second": sum(r["page_forward_passes"] for r in rep2.values()),
        "cache_hits_second": {b: r["cache"]["hit"] for b, r in rep2.items()},
        "query_cache_hits_second": {v: s.get("query_cache_hit") for v, s in rep2.get("semantic", {}).get("searches", {}).items()},
        "first_export_s": export_s,
        "ratio_without_export": round(second_s / (first_s - export_s), 4),
        "torch_imported_second": torch_second,
        "query_runtime": runtime,
        "import_sentence_transformers_s": round(floor_s, 3),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "first_inprocess_s": round(first_ip, 3),
        "second_inprocess_s": round(second_ip, 3),
        "ratio_inprocess": round(second_ip / first_ip, 4),
        "page_forward_passes_second_inprocess": passes_ip,
        "timing_first": t1,
        "timing_second": t2,
    }))


if __name__ == "__main__":
    main()
