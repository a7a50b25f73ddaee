"""Pages/s of `vdr ingest` against pdf2image's convert_from_path, same DPI, same run, best of ``--repeat``.

Usage: python benchmarks/rasterize.py [--dpi 144] [--workers 2] [--repeat 3] [--pdf ../shared/pdfs/GeoTopo-komprimiert.pdf]

Rasterization (``ratio``): `vdr.ingest.pdf.rasterize` (the renderer `vdr ingest` uses, pypdfium2,
RGB images) on contiguous page ranges across ``--workers`` processes, as `vdr ingest` renders,
against ``convert_from_path(pdf, dpi=...)`` with its defaults (one pdftoppm process, RGB images in
memory). Also printed: vdr in one process (``ratio_1proc``) and pdf2image with ``thread_count`` =
workers (``ratio_vs_pdf2image_threads``).

End to end (``ratio_end_to_end``, target >= 3): the whole `ingest_pdfs` call (render, text layer,
lossless page images encoded in the workers and written atomically, pages.jsonl, report; OCR off,
``--workers`` processes, pool start included, called from a process running one thread as the
`vdr ingest` command does, so its workers are forked: see ``worker_start_method``) against ``convert_from_path`` followed by
``image.save(path)`` as PNG with PIL's default settings for every page (what a pdf2image user
writes to get the same page files, without a text layer).

Each measurement is repeated ``--repeat`` times, interleaved, and the fastest run counts (the
machine may be shared). The last line printed is JSON with all throughputs and ratios, the
page image encoding `vdr ingest` used (``image_encoding``, from its report) and the bytes of page
images each side wrote.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vdr.ingest import ingest_pdfs  # noqa: E402
from vdr.ingest.pdf import rasterize  # noqa: E402

_ROOT = Path(__file__).resolve().parents[1]
# ../shared beside the checkout (a git worktree one level deeper finds it one level up)
DEFAULT_PDF = next((p for p in (_ROOT.parent / "shared", _ROOT.parents[1] / "shared") if p.is_dir()), _ROOT.parent / "shared") \
    / "pdfs" / "GeoTopo-komprimiert.pdf"


def _render_share(job) -> int:
    pdf, dpi, pages = job
    n = 0
    for _n, im, _d in rasterize(pdf, dpi=dpi, pages=pages):
        n += 1
        im.close()
    return n


def _timed(f):
    t = time.perf_counter()
    n = f()
    return time.perf_counter() - t, n


def vdr_render_1proc(pdf: Path, dpi: float) -> int:
    n = 0
    for _n, im, _d in rasterize(pdf, dpi=dpi):
        n += 1
        im.close()
    return n


def pdf2image_render(pdf: Path, dpi: float, threads: int = 1) -> int:
    from pdf2image import convert_from_path

    images = convert_from_path(str(pdf), dpi=dpi, thread_count=threads)
    for im in images:
        im.close()
    return len(images)


def pdf2image_png(pdf: Path, dpi: float, out: Path) -> int:
    """``convert_from_path`` with its defaults, then every page saved as PNG with PIL's defaults."""
    from pdf2image import convert_from_path

    out.mkdir(parents=True, exist_ok=True)
    images = convert_from_path(str(pdf), dpi=dpi)
    for i, im in enumerate(images, 1):
        im.save(out / f"page-{i}.png")
        im.close()
    return len(images)


def vdr_ingest(pdf: Path, dpi: float, workers: int, tmp: Path) -> tuple[int, dict]:
    src = tmp / "in"
    src.mkdir(parents=True, exist_ok=True)
    if not (src / pdf.name).exists():
        os.symlink(pdf.resolve(), src / pdf.name)
    report = ingest_pdfs(src, tmp / "out", dpi=dpi, ocr="never", workers=workers, progress=False)
    (doc,) = report.documents
    if doc.status != "ok":
        raise SystemExit(f"vdr failed on {pdf}: {doc.reason}")
    size = sum(p.stat().st_size for p in (tmp / "out" / "images").glob("*.png"))
    return doc.pages, {"image_encoding": dict(report.image_encoding), "image_bytes": size,
                       "worker_start_method": report.extra.get("worker_start_method")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pdf", type=Path, default=DEFAULT_PDF)
    ap.add_argument("--dpi", type=float, default=144)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    workers = max(1, a.workers)
    best: dict[str, float] = {}
    counts: dict[str, int] = {}
    run_info: dict = {}

    def keep(key, seconds, n):
        best[key] = min(best.get(key, float("inf")), seconds)
        counts[key] = n

    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.repeat):
            keep("raster_1proc", *_timed(lambda: vdr_render_1proc(a.pdf, a.dpi)))
            n_r = counts["raster_1proc"]
            # as `vdr ingest` renders: contiguous page ranges across worker processes (started
            # before the clock; shut down before the ingest run, which starts its own pool from a
            # single-threaded process as the `vdr ingest` command does)
            shares = [list(range(1 + i * n_r // workers, 1 + (i + 1) * n_r // workers)) for i in range(workers)]
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("forkserver")) as pool:
                list(pool.map(_render_share, [(str(a.pdf), a.dpi, [1])] * workers))  # start the workers
                keep("raster_par", *_timed(lambda: sum(pool.map(_render_share, [(str(a.pdf), a.dpi, s) for s in shares]))))
            keep("p2i", *_timed(lambda: pdf2image_render(a.pdf, a.dpi)))
            keep("p2i_threads", *_timed(lambda: pdf2image_render(a.pdf, a.dpi, workers)))
            run_dir = Path(tmp) / f"run{r}"
            t = time.perf_counter()
            n, run_info = vdr_ingest(a.pdf, a.dpi, workers, run_dir)
            keep("ingest", time.perf_counter() - t, n)
            keep("p2i_png", *_timed(lambda: pdf2image_png(a.pdf, a.dpi, run_dir / "pdf2image")))
            png_bytes = sum(p.stat().st_size for p in (run_dir / "pdf2image").glob("*.png"))
    n = counts["ingest"]
    if len(set(counts.values())) != 1:
        raise SystemExit(f"page counts differ: {counts}")
    rate = {k: round(n / v, 2) for k, v in best.items()}
    out = {
        "pdf": a.pdf.name,
        "pages": n,
        "dpi": a.dpi,
        "cpus": os.cpu_count(),
        "workers": workers,
        "repeat": a.repeat,
        "image_encoding": run_info.get("image_encoding"),
        "worker_start_method": run_info.get("worker_start_method"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "vdr_rasterize_pages_per_s": rate["raster_par"],
        "vdr_rasterize_1proc_pages_per_s": rate["raster_1proc"],
        "pdf2image_pages_per_s": rate["p2i"],
        "pdf2image_threads_pages_per_s": rate["p2i_threads"],
        "vdr_ingest_pages_per_s": rate["ingest"],
        "pdf2image_png_pages_per_s": rate["p2i_png"],
        "ratio": round(best["p2i"] / best["raster_par"], 2),
        "ratio_1proc": round(best["p2i"] / best["raster_1proc"], 2),
        "ratio_vs_pdf2image_threads": round(best["p2i_threads"] / best["raster_par"], 2),
        "ratio_end_to_end": round(best["p2i_png"] / best["ingest"], 2),
        "vdr_image_bytes": run_info.get("image_bytes"),
        "pdf2image_png_bytes": png_bytes,
    }
    print(f"best of {a.repeat}: vdr rasterize {best['raster_par']:.2f} s on {workers} processes ({best['raster_1proc']:.2f} s in one),"
          f" pdf2image {best['p2i']:.2f} s ({best['p2i_threads']:.2f} s with thread_count={workers});"
          f" vdr ingest {best['ingest']:.2f} s, pdf2image + PNG save {best['p2i_png']:.2f} s ({n} pages)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
