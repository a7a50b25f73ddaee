"""The served-systems fixture (issue 36), shared by tests/test_served.py and tests/test_variant_backends.py:
two of the bundled sample's PDFs ingested (15 pages), 6 queries from their own words, keyword rewrites,
and the exact multimodal backend (a tiny ColQwen2.5) indexed once per session."""

from __future__ import annotations

import json
import shutil

import pytest

import vdr
from report_fixtures import SAMPLE

PDFS = ["state-crime-brief.pdf", "environment-factbook.pdf"]


@pytest.fixture(scope="session")
def served_setup(tmp_path_factory, colqwen_dir):
    from vdr.ingest import ingest_pdfs
    from vdr.retrieve.multimodal import MultimodalBackend

    src = tmp_path_factory.mktemp("pdfs")
    for name in PDFS:
        shutil.copy(SAMPLE / "pdfs" / name, src / name)
    root = tmp_path_factory.mktemp("served")
    ingest_pdfs(src, root / "corpus", dpi=40, ocr="never", workers=1, progress=False)
    corpus = vdr.Corpus.load(root / "corpus")
    pages = [p for p in corpus.pages() if len(p.text.split()) >= 8][:6]
    with open(root / "q.jsonl", "w") as fq, open(root / "kw.jsonl", "w") as fk, open(root / "qrels.tsv", "w") as fr:
        fr.write("query-id\tcorpus-id\tscore\n")
        for i, p in enumerate(pages):
            words = [w for w in p.text.split() if w.isalpha() and len(w) > 3]
            fq.write(json.dumps({"_id": f"q{i}", "text": " ".join(words[2:5])}) + "\n")
            fk.write(json.dumps({"_id": f"q{i}", "text": " ".join(words[:10])}) + "\n")
            fr.write(f"q{i}\t{p.corpus_id}\t1\n")
    exact = MultimodalBackend({"model": str(colqwen_dir), "device": "cpu"}, store=root / "store")
    exact.index(corpus)
    queries = vdr.load_queries(root / "q.jsonl")
    return {"root": root, "corpus": corpus, "exact": exact, "queries": queries, "model": str(colqwen_dir)}
