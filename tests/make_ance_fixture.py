"""Regenerate tests/data/ance_pyserini_1.6.0.json: Pyserini's own ANCE vectors of the tiny checkpoint.

The tiny ANCE checkpoint of ``tiny_st.build_tiny_ance`` (Pyserini's layout: ``AnceEncoder``,
``pytorch_model.bin``, seed 1) is built here with this Python, then encoded by Pyserini's
``AnceQueryEncoder`` / ``AnceDocumentEncoder`` run by ``--pyserini-python`` (a Python with pyserini
and a transformers it supports: Pyserini 1.6.0's ``AnceEncoder`` cannot be loaded by transformers
5, so e.g. a venv with transformers 4.50.0, tokenizers 0.21.1 and huggingface-hub 0.29.3 in front
of the project's packages) with a Java 21+ (``JAVA_HOME``). The fixture records the versions, a
digest of the checkpoint (weights and tokenizer files, so the test knows it rebuilt the same one)
and the vectors; tests/test_ance.py compares vdr with them.

    python tests/make_ance_fixture.py --pyserini-python /path/to/venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tiny_st import build_tiny_ance  # noqa: E402

OUT = Path(__file__).parent / "data" / "ance_pyserini_1.6.0.json"
SEED = 1
QUERIES = ["What was the revenue of the wind division?", "river city", "Which city lies at the foot of the mountain?"]
PASSAGES = ["The quick brown fox jumps over the lazy dog near the river.", "revenue wind alpha beta gamma"]

RUN = """
import json, sys, warnings
warnings.simplefilter("ignore")
from importlib.metadata import version
from pyserini.encode import AnceQueryEncoder, AnceDocumentEncoder
folder, queries, passages = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
q, d = AnceQueryEncoder(folder, device="cpu"), AnceDocumentEncoder(folder, device="cpu")
print(json.dumps({"versions": {m: version(m) for m in ("pyserini", "transformers", "tokenizers", "torch")},
                  "query_tokens": q.tokenizer.tokenize(queries[0]), "passage_tokens": d.tokenizer.tokenize(queries[0]),
                  "query_vectors": [q.encode(t).tolist() for t in queries],
                  "passage_vectors": d.encode(passages, max_length=384).tolist()}))
"""


def checkpoint_digest(folder: Path) -> str:
    """sha256 of the checkpoint's tensors (names, dtypes, shapes, bytes) and tokenizer files."""
    import hashlib

    import torch

    h = hashlib.sha256()
    from vdr.io.weights import load_state_dict

    state = load_state_dict(folder / "pytorch_model.bin", allow_pickle=True, what="the checkpoint built here", opt_in="-")
    for k in sorted(state):
        t = state[k].contiguous()
        h.update(f"{k}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
    for name in ("vocab.json", "merges.txt"):
        h.update((folder / name).read_bytes())
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pyserini-python", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "ance"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            build_tiny_ance(folder, weights="bin", architecture="AnceEncoder", seed=SEED)
        env = {**os.environ, "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "unused-placeholder-for-pyserini-import")}
        got = subprocess.run([args.pyserini_python, "-c", RUN, str(folder), json.dumps(QUERIES), json.dumps(PASSAGES)],
                             capture_output=True, text=True, env=env, check=True)
        out = json.loads(got.stdout.strip().splitlines()[-1])
        import torch

        record = {"tool": "pyserini.encode.AnceQueryEncoder / AnceDocumentEncoder(max_length=384)", **out,
                  "checkpoint": {"builder": "tiny_st.build_tiny_ance(weights='bin', architecture='AnceEncoder')", "seed": SEED,
                                 "sha256": checkpoint_digest(folder), "built_with_torch": torch.__version__},
                  "queries": QUERIES, "passages": PASSAGES}
    for key in ("query_vectors", "passage_vectors"):  # 8 significant digits: far below the test's 1e-5
        record[key] = [[float(f"{x:.8g}") for x in v] for v in record[key]]
    OUT.write_text(json.dumps(record, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
