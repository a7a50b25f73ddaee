"""Pages/s of `vdr ingest`'s rasterization against pdf2image's convert_from_path, same DPI, same run.

Usage: python benchmarks/rasterize.py [--dpi 144] [--workers N] [--pdf ../shared/pdfs/GeoTopo-komprimiert.pdf]

Rasterization (the headline ``ratio``): `vdr.ingest.pdf.rasterize` (the renderer `vdr ingest`
uses, pypdfium2, RGB images) on contiguous page ranges across ``--workers`` processes (default: the
CPU count), as `vdr ingest` renders, against `convert_from_path(pdf, dpi=...)` with its defaults
(one pdftoppm process, RGB images in memory). Also printed: vdr in one process (``ratio_1proc``)
and pdf2image with ``thread_count`` = workers (``ratio_vs_pdf2image_threads``). End to end (``ratio_end_to_end``): the whole
`ingest_pdfs` call (render, text layer, PNG encoded and written atomically, pages.jsonl, report;
OCR off, default worker processes) against the same pdf2image call, which writes nothing.
The last line printed is JSON with all throughputs and both ratios (target >= 3.5).
"""

from __future__ import annotations

import argparse
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vdr.ingest import ingest_pdfs  # noqa: E402
from vdr.ingest.pdf import rasterize  # noqa: E402

DEFAULT_PDF = Path(__file__).resolve().parents[2] / "shared" / "pdfs" / "GeoTopo-komprimiert.pdf"


def _render_share(job) -> int:
    pdf, dpi, pages = job
    n = 0
    for _n, im, _d in rasterize(pdf, dpi=dpi, pages=pages):
        n += 1
        im.close()
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pdf", type=Path, default=DEFAULT_PDF)
    ap.add_argument("--dpi", type=float, default=144)
    ap.add_argument("--workers", type=int, default=None)
    a = ap.parse_args()
    from pdf2image import convert_from_path

    workers = max(1, a.workers or os.cpu_count() or 1)
    t = time.perf_counter()
    n_r = 0
    for _n, im, _d in rasterize(a.pdf, dpi=a.dpi):
        n_r += 1
        im.close()
    raster_s = time.perf_counter() - t
    # as `vdr ingest` renders: contiguous page ranges across worker processes
    shares = [list(range(1 + i * n_r // workers, 1 + (i + 1) * n_r // workers)) for i in range(workers)]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("forkserver")) as pool:
        list(pool.map(_render_share, [(str(a.pdf), a.dpi, [1])] * workers))  # start the workers
        t = time.perf_counter()
        n_par = sum(pool.map(_render_share, [(str(a.pdf), a.dpi, s) for s in shares]))
        par_s = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in"
        src.mkdir()
        os.symlink(a.pdf.resolve(), src / a.pdf.name)
        t = time.perf_counter()
        report = ingest_pdfs(src, Path(tmp) / "out", dpi=a.dpi, ocr="never", workers=a.workers, progress=False)
        vdr_s = time.perf_counter() - t
        (doc,) = report.documents
        if doc.status != "ok":
            raise SystemExit(f"vdr failed on {a.pdf}: {doc.reason}")
        n = doc.pages
    t = time.perf_counter()
    images = convert_from_path(str(a.pdf), dpi=a.dpi)
    p2i_s = time.perf_counter() - t
    for im in images:
        im.close()
    t = time.perf_counter()
    images_mt = convert_from_path(str(a.pdf), dpi=a.dpi, thread_count=workers)
    p2i_mt_s = time.perf_counter() - t
    for im in images_mt:
        im.close()
    if not (len(images) == n == n_r == n_par == len(images_mt)):
        raise SystemExit(f"page counts differ: vdr {n}, pdf2image {len(images)}")
    out = {
        "pdf": a.pdf.name,
        "pages": n,
        "dpi": a.dpi,
        "cpus": os.cpu_count(),
        "workers": workers,
        "vdr_rasterize_pages_per_s": round(n / par_s, 2),
        "vdr_rasterize_1proc_pages_per_s": round(n / raster_s, 2),
        "pdf2image_threads_pages_per_s": round(n / p2i_mt_s, 2),
        "vdr_ingest_pages_per_s": round(n / vdr_s, 2),
        "pdf2image_pages_per_s": round(n / p2i_s, 2),
        "ratio": round(p2i_s / par_s, 2),
        "ratio_1proc": round(p2i_s / raster_s, 2),
        "ratio_vs_pdf2image_threads": round(p2i_mt_s / par_s, 2),
        "ratio_end_to_end": round(p2i_s / vdr_s, 2),
    }
    print(f"vdr rasterize: {n_par} pages in {par_s:.2f} s on {workers} worker processes ({raster_s:.2f} s in one); vdr ingest: {n} pages in {vdr_s:.2f} s;"
          f" pdf2image: {len(images)} pages in {p2i_s:.2f} s ({p2i_mt_s:.2f} s with thread_count={workers})")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
