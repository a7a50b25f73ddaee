"""Data parallelism under torchrun (gloo, 2 CPU processes, tiny local ColQwen2.5).

* sharding helpers and the top-k merge (exact, including the page-id-descending tie rule);
* rank writers of the embedding store and their merge;
* ``torchrun -m vdr embed``: the same store as one process (ids, order, bit-identical vectors);
  a rank SIGKILLed after committing a shard leaves a store the next torchrun run completes;
* ``torchrun -m vdr evaluate``: byte-identical ``results.json`` and run files;
* streaming MaxSim from the store: peak RSS does not grow with the number of pages.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from vdr import distributed as D
from vdr.retrieve.maxsim import SubsetSource, TopK, maxsim_topk, merge_topk
from vdr.encode.store import JOURNAL_FILE, SHARDS_DIR, EmbeddingStore

from tiny_models import make_corpus  # noqa: F401  (session fixture)

ROOT = Path(__file__).resolve().parents[1]
# 10 pages, mixed sizes: with batch size 2 the ranks get 3 and 2 batches
SIZES = [(56, 56), (100, 80), (300, 200), (56, 56), (120, 90), (80, 120), (200, 150), (56, 112), (90, 90), (150, 60)]


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests")])
    env["VDR_DIST_BACKEND"] = "gloo"
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["OMP_NUM_THREADS"] = "1"  # the same in every process (torchrun's default), reference included
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(args: list[str], cwd: Path, *, script: Path | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    """``python -m torch.distributed.run --nproc_per_node 2 -m vdr ARGS`` (or a script instead of ``-m vdr``); the
    timeout only catches a hang (two ranks loading torch on a loaded 2-core machine take minutes)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(_free_port())]
    cmd += [str(script)] if script is not None else ["-m", "vdr"]
    return subprocess.run(cmd + args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)


def single(args: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    """``python -m vdr ARGS`` in one process (same environment as :func:`torchrun`)."""
    return subprocess.run([sys.executable, "-m", "vdr", *args], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=timeout)


def assert_same_store(a_dir: Path, b_dir: Path) -> None:
    a, b = EmbeddingStore.open(a_dir), EmbeddingStore.open(b_dir)
    assert a.ids() == b.ids()  # same pages in the same order
    assert a.path.name == b.path.name and a.meta["key"] == b.meta["key"]
    for pid in a.ids():
        assert a.content_hash(pid) == b.content_hash(pid)
        assert torch.equal(a.get(pid), b.get(pid)), pid  # bit for bit
    # merged: no rank journal left, every shard on disk named by the journal
    assert not list(b.path.glob("journal.rank-*.jsonl"))
    named = {json.loads(line).get("shard") for line in (b.path / JOURNAL_FILE).read_text().splitlines()}
    assert {p.name for p in (b.path / SHARDS_DIR).iterdir()} <= named


# ---------------------------------------------------------------------------------------- helpers
def test_single_process_defaults(monkeypatch):
    for k in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    assert not D.launched_by_torchrun() and not D.is_distributed() and not D.init()
    assert (D.rank(), D.world_size(), D.is_main()) == (0, 1, True)
    assert D.all_gather_object(3) == [3] and D.gather_object(3) == [3] and D.broadcast_object(3) == 3
    assert D.shard([1, 2, 3]) == [1, 2, 3] and D.device_for_rank("cpu") == "cpu"
    assert D.run_on_main(lambda x: x + 1, 1) == 2
    D.barrier()


@pytest.mark.parametrize("n", [0, 1, 5, 10, 11])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_shard_contiguous_and_complete(n, world):
    items = list(range(n))
    parts = [D.shard(items, r, world) for r in range(world)]
    assert sum(parts, []) == items  # contiguous, in rank order, exact cover
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    for bs in (1, 2, 3):
        parts = [D.shard_batches(items, bs, r, world) for r in range(world)]
        assert sum(parts, []) == items
        starts = [sum(map(len, parts[:r])) for r in range(world)]
        assert all(s % bs == 0 for s, p in zip(starts, parts) if p)  # every part starts on a batch boundary: whole batches


def _tie_pages(n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    # small integer vectors: many exactly equal scores, so the tie rule decides
    return [torch.randint(-1, 2, (int(torch.randint(1, 4, (1,), generator=g)), 4), generator=g).float() for _ in range(n)]


class _ListSource:
    def __init__(self, ids, vecs):
        self._ids, self._vecs = list(ids), dict(zip(ids, vecs))

    def ids(self):
        return list(self._ids)

    def lengths(self):
        return [self._vecs[i].shape[0] for i in self._ids]

    def iter_blocks(self, max_tokens, ids=None):
        for pid in (self._ids if ids is None else ids):
            v = self._vecs[pid]
            yield [pid], v, torch.tensor([v.shape[0]])


@pytest.mark.parametrize("world", [2, 3, 5])
def test_merge_topk_is_exactly_the_global_topk(world):
    ids = [f"p{i}" for i in range(37)]
    src = _ListSource(ids, _tie_pages(37))
    g = torch.Generator().manual_seed(1)
    queries = [torch.randint(-1, 2, (3, 4), generator=g).float() for _ in range(6)]
    for k in (1, 5, 37):
        full = maxsim_topk(queries, src, k)
        parts = []
        for r in range(world):
            a, b = D.shard_bounds(len(ids), r, world)
            t = maxsim_topk(queries, SubsetSource(src, ids[a:b]), min(k, b - a))
            parts.append(TopK(t.scores, t.indices + a, t.ids))
        merged = merge_topk(parts, k, id_order=ids)
        assert merged.ids == full.ids
        assert torch.equal(merged.scores, full.scores) and torch.equal(merged.indices, full.indices)
    assert len({s for row in full.scores.tolist() for s in row}) < full.scores.numel()  # ties were present


# ----------------------------------------------------------------------------------- rank writers
def _writer(root, rank=None):
    return EmbeddingStore.open_for_writing(root, encoder_fingerprint="fp", encoder_settings={}, dtype="float16", dim=4, rank=rank)


def _vec(i):
    return torch.full((i % 3 + 1, 4), float(i))


def test_rank_writers_merge_into_the_single_writer_store(tmp_path):
    ids = [f"d#{i}" for i in range(9)]
    with _writer(tmp_path / "ref") as w:
        for i, pid in enumerate(ids):
            w.add(pid, f"h{i}", _vec(i))
            if w.pending == 2:
                w.commit()
    _writer(tmp_path / "s").close()  # the main writer creates the store
    writers = [_writer(tmp_path / "s", r) for r in range(2)]
    for r, w in enumerate(writers):
        for i in range(*D.shard_bounds(len(ids), r, 2)):
            w.add(ids[i], f"h{i}", _vec(i))
            if w.pending == 2:
                w.commit()
    with pytest.raises(Exception, match="rank 0"):
        _writer(tmp_path / "s")  # cannot merge while a rank writer is active
    for w in writers:
        w.close()
    before = EmbeddingStore.open(tmp_path / "s")  # readers fold rank journals in
    assert before.ids() == ids and list(before.path.glob("journal.rank-*.jsonl"))
    assert all(n.startswith(("r0-", "r1-")) for n in os.listdir(before.path / SHARDS_DIR))
    _writer(tmp_path / "s").close()  # merge
    assert_same_store(tmp_path / "ref", tmp_path / "s")


def test_torn_rank_journal_and_orphans_are_cleaned(tmp_path):
    _writer(tmp_path).close()
    w = _writer(tmp_path, 1)
    w.add("a", "h", _vec(1))
    w.commit()
    w.add("b", "h", _vec(2))
    w.commit()
    w.close()
    st = EmbeddingStore.open(tmp_path)
    jp = st.path / "journal.rank-1.jsonl"
    lines = jp.read_bytes().splitlines(keepends=True)
    jp.write_bytes(lines[0] + lines[1][: len(lines[1]) // 2])  # torn tail: page b lost
    (st.path / SHARDS_DIR / ".r1-000009-x.safetensors.tmp").write_bytes(b"junk")
    w = _writer(tmp_path, 1)  # the rank writer cleans its own leftovers and continues numbering
    assert w.ids() == ["a"] and not (st.path / SHARDS_DIR / ".r1-000009-x.safetensors.tmp").exists()
    w.close()
    with _writer(tmp_path) as m:
        assert m.ids() == ["a"]
    assert len(os.listdir(st.path / SHARDS_DIR)) == 1 and not jp.exists()


# ------------------------------------------------------------------------------- torchrun: embed
_KILL_RANK1 = textwrap.dedent("""
    # torchrun worker: rank 1 is SIGKILLed right after committing its first shard
    import os, signal, sys
    from vdr.encode.store import EmbeddingStore
    if os.environ.get("RANK") == "1":
        EmbeddingStore._after_commit_hook = lambda self, name: os.kill(os.getpid(), signal.SIGKILL)
    from vdr.cli import main
    sys.exit(main())
""")


@pytest.fixture(scope="module")
def embed_ref(tmp_path_factory, colqwen_dir):  # noqa: F811
    """The corpus (page 4 a byte copy of page 1) and a single-process store (batch size 2, one page per shard)."""
    from vdr.corpus import Corpus

    root = tmp_path_factory.mktemp("embed")
    corpus = make_corpus(root / "corpus", SIZES)
    c = Corpus.load(corpus)
    shutil.copyfile(c.image_path("doc.pdf#1"), c.image_path("doc.pdf#4"))  # a duplicate page: encoded once
    p = single(["embed", str(corpus), "--model", str(colqwen_dir), "--store", str(root / "ref"), "--batch-size", "2",
                "--shard-pages", "1", "--quiet"], root)
    assert p.returncode == 0, p.stderr[-3000:]
    return root, corpus


@pytest.mark.slow
def test_torchrun_embed_equals_single_process(embed_ref, colqwen_dir):  # noqa: F811
    root, corpus = embed_ref
    p = torchrun(["embed", str(corpus), "--model", str(colqwen_dir), "--store", str(root / "dist"), "--batch-size", "2",
                  "--shard-pages", "1", "--quiet", "--json", str(root / "dist.json")], root)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.count(" pages: ") == 1  # only rank 0 prints
    rep = json.loads((root / "dist.json").read_text())
    assert (rep["pages"], rep["encoded"], rep["copied"], rep["reused"]) == (len(SIZES), len(SIZES) - 1, 1, 0)
    assert rep["duplicate_of"] == {"doc.pdf#4": "doc.pdf#1"}
    assert_same_store(root / "ref", root / "dist")
    shards = os.listdir(EmbeddingStore.open(root / "dist").path / SHARDS_DIR)
    assert {n[:3] for n in shards} == {"r0-", "r1-"}  # both ranks wrote their own shards


@pytest.mark.slow
def test_torchrun_rank_killed_then_resumed(embed_ref, colqwen_dir, tmp_path):  # noqa: F811
    root, corpus = embed_ref
    script = tmp_path / "kill_rank1.py"
    script.write_text(_KILL_RANK1)
    args = ["embed", str(corpus), "--model", str(colqwen_dir), "--store", str(tmp_path / "s"), "--batch-size", "2",
            "--shard-pages", "1", "--quiet"]
    p = torchrun(args, tmp_path, script=script)
    assert p.returncode != 0
    assert "Signals.SIGKILL" in p.stderr or "SIGKILL" in p.stderr or "-9" in p.stderr, p.stderr[-3000:]
    partial = EmbeddingStore.open(tmp_path / "s")
    assert 0 < len(partial) < len(SIZES)
    assert list(partial.path.glob("journal.rank-1.jsonl"))  # rank 1's committed shard is there, unmerged
    p = torchrun(args + ["--json", str(tmp_path / "r.json")], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["reused"] == len(partial) and rep["encoded"] + rep["copied"] == len(SIZES) - len(partial)
    a, b = EmbeddingStore.open(root / "ref"), EmbeddingStore.open(tmp_path / "s")
    assert sorted(a.ids()) == sorted(b.ids())
    for pid in a.ids():
        assert torch.equal(a.get(pid), b.get(pid)), pid
    assert not list(b.path.glob("journal.rank-*.jsonl"))


# ---------------------------------------------------------------------------- torchrun: evaluate
def _eval_inputs(folder: Path) -> None:
    """A corpus with page texts (for the lexical backend), queries, qrels and two rewrite variants."""
    import dataclasses

    from vdr.corpus import Corpus, write_pages

    make_corpus(folder / "corpus", SIZES)
    words = ["revenue", "carbon", "table", "figure", "chart", "emissions", "company", "report", "page", "document"]
    pages = [dataclasses.replace(p, text=f"{words[i]} {words[(i * 3) % 10]} page {i}", text_source="pdf")
             for i, p in enumerate(Corpus.load(folder / "corpus").pages())]
    write_pages(folder / "corpus" / "pages.jsonl", pages)
    with open(folder / "queries.jsonl", "w") as fq, open(folder / "kw.jsonl", "w") as fk, \
            open(folder / "vague.jsonl", "w") as fv, open(folder / "qrels.tsv", "w") as fr:
        fr.write("query-id\tcorpus-id\tscore\n")
        for i in range(7):
            fq.write(json.dumps({"_id": f"q{i}", "text": f"which page shows the {words[i]}"}) + "\n")
            fk.write(json.dumps({"_id": f"q{i}", "text": f"{words[i]} {words[(i * 3) % 10]}"}) + "\n")
            fv.write(json.dumps({"_id": f"q{i}", "text": "what does it say"}) + "\n")
            fr.write(f"q{i}\t{pages[i].corpus_id}\t2\nq{i}\t{pages[(i + 3) % 10].corpus_id}\t1\n")


@pytest.mark.slow
def test_torchrun_evaluate_results_byte_identical(tmp_path, colqwen_dir):  # noqa: F811
    # results.json records the (absolute) input paths: both runs use the same folder, one after the other
    work = tmp_path / "work"
    work.mkdir()
    _eval_inputs(work)
    args = ["evaluate", "corpus", "--queries", "queries.jsonl", "--qrels", "qrels.tsv", "--rewrites", "kw=kw.jsonl",
            "--rewrites", "vague=vague.jsonl", "--backend", "multimodal,lexical,hybrid", "--model", str(colqwen_dir),
            "--batch-size", "2", "--depth", "10", "--quiet", "--out", "results"]
    p1 = single(args, work)
    assert p1.returncode == 0, p1.stderr[-3000:]
    a = tmp_path / "single"
    a.mkdir()
    shutil.move(work / "results", a / "results")
    shutil.rmtree(work / "corpus" / "embeddings")  # the torchrun run embeds from scratch too
    shutil.rmtree(work / "corpus" / ".vdr-cache")  # and builds the BM25 index again (same cache facts)
    p2 = torchrun(args, work)
    b = work
    assert p2.returncode == 0, p2.stderr[-3000:]
    assert p2.stdout.count("results: ") == 1  # only rank 0 prints
    res = json.loads((a / "results" / "results.json").read_text())
    assert res["skipped"] == {} and {r["backend"] for r in res["runs"]} == {"multimodal", "lexical", "hybrid"}
    assert (a / "results" / "results.json").read_bytes() == (b / "results" / "results.json").read_bytes()
    assert (a / "results" / "per_query.csv").read_bytes() == (b / "results" / "per_query.csv").read_bytes()
    runs = sorted(p.name for p in (a / "results" / "runs").iterdir())
    assert runs == sorted(p.name for p in (b / "results" / "runs").iterdir())
    for name in runs:
        assert (a / "results" / "runs" / name).read_bytes() == (b / "results" / "runs" / name).read_bytes(), name
    assert sorted(os.listdir(b / "results")) == sorted(os.listdir(a / "results"))


# --------------------------------------------------------------------------- streaming, bounded RSS
_RSS_CHILD = textwrap.dedent("""
    import sys, torch
    from vdr.retrieve.maxsim import maxsim_topk
    from vdr.encode.store import EmbeddingStore
    st = EmbeddingStore.open(sys.argv[1])
    g = torch.Generator().manual_seed(0)
    qs = [torch.nn.functional.normalize(torch.randn(20, 128, generator=g), dim=-1) for _ in range(16)]
    top = maxsim_topk(qs, st, 10)
    assert top.scores.shape == (16, 10)
    # VmHWM: this process' own peak (ru_maxrss survives execve and could report the parent's)
    hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    print(hwm * 1024, len(st))
""")


def _fake_store(root: Path, n_pages: int, tokens: int = 64, dim: int = 128) -> Path:
    g = torch.Generator().manual_seed(n_pages)
    w = EmbeddingStore.open_for_writing(root, encoder_fingerprint="fp", encoder_settings={}, dtype="float16", dim=dim)
    with w:
        for i in range(n_pages):
            w.add(f"doc.pdf#{i + 1}", "h", torch.randn(tokens, dim, generator=g))
            if w.pending >= 256:  # vdr embed's default shard size
                w.commit()
    return root


@pytest.mark.slow
def test_streaming_maxsim_peak_rss_does_not_grow_with_pages(tmp_path):
    rss = {}
    for n in (2_000, 20_000):
        store = _fake_store(tmp_path / f"s{n}", n)
        p = subprocess.run([sys.executable, "-c", _RSS_CHILD, str(store)], env=_env(), capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        peak, pages = map(int, p.stdout.split())
        assert pages == n
        rss[n] = peak
        shutil.rmtree(store)
    # 20,000 pages x 64 tokens x 128 dims of float16 = 328 MB on disk; 2,000 pages = 33 MB
    assert rss[20_000] - rss[2_000] < 200 * 2**20, rss  # growth < 200 MB for 10x the pages


# ------------------------------------------------------------------------------ the batch script
SCRIPT = ROOT / "scripts" / "vdr_batch.sh"


def _script_env(**kw) -> dict:
    env = {k: v for k, v in _env().items() if not k.startswith("SLURM_")}
    env.update({k: str(v) for k, v in kw.items()})
    return env


def test_batch_script_syntax():
    p = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "#SBATCH" in SCRIPT.read_text()


def test_batch_script_dry_run(tmp_path):
    env = _script_env(DRY_RUN=1, SLURM_JOB_ID=4242, NPROC_PER_NODE=4, PDFS="/data/pdfs", QUERIES="q.jsonl",
                      QRELS="qrels.tsv", REWRITES="kw=rw-kw.jsonl conv=rw-conv.jsonl", OUT_ROOT=tmp_path / "jobs",
                      MODELS="/models/colqwen2.5-v0.2 vidore/colpali-v1.3", PYTHON="python3")
    p = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr
    cmds = [line[2:] for line in p.stdout.splitlines() if line.startswith("+ ")]
    jobs = tmp_path / "jobs"
    assert cmds[0] == f"python3 -m vdr ingest /data/pdfs --out {jobs}/corpus --quiet"
    launch = "python3 -m torch.distributed.run --standalone --nnodes 1 --nproc_per_node 4 -m vdr"
    assert len(cmds) == 5
    for i, tag in ((1, "colqwen2.5-v0.2"), (3, "colpali-v1.3")):
        emb, ev = cmds[i], cmds[i + 1]
        assert emb.startswith(f"{launch} embed {jobs}/corpus --model ")
        assert f"--store {jobs}/store" in emb and f"--json {jobs}/4242/{tag}/embed.json" in emb
        assert ev.startswith(f"{launch} evaluate {jobs}/corpus --queries q.jsonl --qrels qrels.tsv"
                             " --rewrites kw=rw-kw.jsonl --rewrites conv=rw-conv.jsonl")
        assert f"--out {jobs}/4242/{tag}/results" in ev and "--backend multimodal,lexical,hybrid" in ev
    assert not jobs.exists()  # a dry run writes nothing


def test_batch_script_multi_node_dry_run(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text("#!/bin/sh\necho node-a\necho node-b\n")
    (fake / "scontrol").chmod(0o755)
    env = _script_env(DRY_RUN=1, SLURM_JOB_ID=9, SLURM_JOB_NUM_NODES=2, SLURM_JOB_NODELIST="node-[a-b]", NPROC_PER_NODE=8,
                      CORPUS="/c", MODELS="/m/colqwen", PYTHON="python3", PATH=f"{fake}:{os.environ['PATH']}")
    p = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr
    cmds = [line[2:] for line in p.stdout.splitlines() if line.startswith("+ ")]
    assert len(cmds) == 2  # no ingest: CORPUS given
    assert cmds[0].startswith("srun --nodes 2 --ntasks-per-node 1 python3 -m torch.distributed.run --nnodes 2"
                              " --nproc_per_node 8 --rdzv_id 9 --rdzv_backend c10d --rdzv_endpoint node-a:29500 -m vdr embed /c")


def test_batch_script_first_host_without_sigpipe(tmp_path):
    """A long host list: the script reads scontrol's whole output (a pipe into ``head -n 1`` under
    ``pipefail`` failed with status 141 when head exited before scontrol finished writing)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text("#!/bin/sh\nseq -f 'node-%g' 1 200000\n")
    (fake / "scontrol").chmod(0o755)
    env = _script_env(DRY_RUN=1, SLURM_JOB_ID=9, SLURM_JOB_NUM_NODES=3, SLURM_JOB_NODELIST="node-[1-200000]",
                      NPROC_PER_NODE=1, CORPUS="/c", MODELS="/m/colqwen", PYTHON="python3", PATH=f"{fake}:{os.environ['PATH']}")
    p = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr
    cmds = [line[2:] for line in p.stdout.splitlines() if line.startswith("+ ")]
    assert len(cmds) == 2 and all("--rdzv_endpoint node-1:29500 " in c for c in cmds)
    body = [ln for ln in SCRIPT.read_text().splitlines() if not ln.lstrip().startswith("#")]
    assert not [ln for ln in body if "| head" in ln or "|head" in ln]


@pytest.mark.slow
def test_batch_script_runs_text_backends(tmp_path):
    """A real (not dry) run: one process, lexical backend, logs and results in the job folder."""
    _eval_inputs(tmp_path)
    env = _script_env(JOB_ID="j1", NPROC_PER_NODE=1, CORPUS=tmp_path / "corpus", QUERIES=tmp_path / "queries.jsonl",
                      QRELS=tmp_path / "qrels.tsv", REWRITES=f"kw={tmp_path / 'kw.jsonl'}", BACKENDS="lexical",
                      OUT_ROOT=tmp_path / "jobs", PYTHON=sys.executable)
    p = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=180)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    job = tmp_path / "jobs" / "j1"
    res = json.loads((job / "text-only" / "results" / "results.json").read_text())
    assert {(r["backend"], r["variant"]) for r in res["runs"]} == {("lexical", "original"), ("lexical", "kw")}
    assert "results:" in (job / "logs" / "evaluate.log").read_text()
    assert "JOB_ID=j1" in (job / "job.env").read_text()


# --------------------------------------------------------------------------- the prepared GPU check
@pytest.mark.model
def test_gpu_check_runs_small_on_cpu(tmp_path):
    """benchmarks/gpu_check.py on the CPU (``--small`` is chosen without CUDA): one JSON line. Its
    speed is not asserted here (a timed unit test fails on a loaded machine; speed targets live in
    the benchmarks); the subprocess timeout only catches a hang."""
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--device", "cpu", "--pages", "4",
                        "--batch-size", "2", "--maxsim-pages", "64"], env=_env(), capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["small"] is True and out["model"]["dim"] == 128
    enc, ms = out["encode"], out["maxsim"]
    assert enc["pages"] == 4 and enc["pages_per_s"] > 0 and enc["tokens_per_page"] > 0 and enc["workers"] == 1
    assert ms["gflops"] > 0 and ms["pages"] == 64 and {"bf16", "fp32", "maxsim_block_shape"} <= set(ms["matmul_tflops"])


@pytest.mark.model
def test_gpu_check_full_size_matches_colqwen2_5_3b():
    """The full-size model has Qwen2.5-VL-3B's dimensions (built on the meta device: no memory, no time)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    proc = gpu_check.build_processor(768)
    model, cfg = gpu_check.build_model(proc, False, "meta", torch.bfloat16, "sdpa")
    d = gpu_check.describe_config(cfg, model)
    assert d["text"] == {"hidden_size": 2048, "num_hidden_layers": 36, "num_attention_heads": 16, "num_key_value_heads": 2,
                         "intermediate_size": 11008, "vocab_size": 151936}
    assert d["vision"] == {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16, "patch_size": 14,
                           "spatial_merge_size": 2, "out_hidden_size": 2048}
    assert d["dim"] == 128 and 3.7e9 < d["parameters"] < 3.8e9  # Qwen2.5-VL-3B: 3.75 B with tied embeddings
