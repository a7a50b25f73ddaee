"""Build tiny local ViDoRe datasets with the real hub schema (for offline tests)."""

from __future__ import annotations

from pathlib import Path

V2_README = """---
configs:
- config_name: corpus
  data_files:
  - split: test
    path: corpus/test-*
- config_name: queries
  data_files:
  - split: test
    path: queries/test-*
- config_name: qrels
  data_files:
  - split: test
    path: qrels/test-*
---
# tiny ViDoRe V2-style dataset (test fixture)
"""


def _image(color, size=(60, 80), mode="RGB"):
    from PIL import Image

    return Image.new(mode, size, color)


def make_v2(root: Path, *, n_pages: int = 3) -> Path:
    """A BEIR-layout dataset: corpus (int corpus-id, image), queries in 2 languages, qrels."""
    from datasets import Dataset, Features, Image, Value

    root.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text(V2_README)
    for sub in ("corpus", "queries", "qrels"):
        (root / sub).mkdir(exist_ok=True)
    corpus = Dataset.from_dict(
        {"corpus-id": list(range(n_pages)), "image": [_image((40 * i, 0, 0), (60 + i, 80)) for i in range(n_pages)], "doc-id": ["d"] * n_pages},
        features=Features({"corpus-id": Value("int64"), "image": Image(), "doc-id": Value("string")}),
    )
    corpus.to_parquet(str(root / "corpus" / "test-00000-of-00001.parquet"))
    queries = Dataset.from_dict(
        {
            "query-id": [0, 1, 2, 3],
            "query": ["what is red", "quel est rouge", "which page", "quelle page"],
            "language": ["english", "french", "english", "french"],
        },
        features=Features({"query-id": Value("int64"), "query": Value("string"), "language": Value("string")}),
    )
    queries.to_parquet(str(root / "queries" / "test-00000-of-00001.parquet"))
    qrels = Dataset.from_dict(
        {"query-id": [0, 1, 2, 3, 2], "corpus-id": [0, 0, 1, 1, 2], "score": [1, 1, 2, 2, 1]},
        features=Features({"query-id": Value("int64"), "corpus-id": Value("int64"), "score": Value("int64")}),
    )
    qrels.to_parquet(str(root / "qrels" / "test-00000-of-00001.parquet"))
    return root


def make_v1(root: Path) -> Path:
    """A QA-layout (ViDoRe V1) dataset: one config, rows of query/image/image_filename/answer."""
    from datasets import Dataset, Features, Image, Value

    root.mkdir(parents=True, exist_ok=True)
    (root / "data").mkdir(exist_ok=True)
    ds = Dataset.from_dict(
        {
            "query": ["q one", None, "q three"],
            "image": [_image("white"), _image("gray", mode="L"), _image("white")],
            "image_filename": ["docs/a page.png", "docs/b.png", "docs/a page.png"],
            "answer": ["x", None, "z"],
        },
        features=Features({"query": Value("string"), "image": Image(), "image_filename": Value("string"), "answer": Value("string")}),
    )
    ds.to_parquet(str(root / "data" / "test-00000-of-00001.parquet"))
    return root
