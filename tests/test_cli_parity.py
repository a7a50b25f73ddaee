"""The command line against the Python API (issue 14, items 5 and 6): every evaluation option of
``vdr.evaluate`` reachable from ``vdr evaluate``, ``-q/--quiet`` and ``--log-level`` on every command,
``--version``, choices and flag pairs in ``--help``; stage lines, the semantic backend's progress and
``timing.json``."""

from __future__ import annotations

import inspect
import json
import logging
import os
from enum import Enum

import pytest
import typer.main

import vdr
import vdr.experiment.evaluation
from vdr.cli import common
from vdr.cli import app, main

_API_EVALUATE = vdr.experiment.evaluation.evaluate  # before any test replaces it

TEXTS = [
    "Annual report: company revenue grew 12 percent, driven by cloud services.",
    "Pets and animal care: dogs, cats and veterinary clinics.",
    "Renewable energy: wind and solar capacity cut carbon emissions.",
    "Revenue of the cloud division and its growth outlook.",
    "Factory emissions and carbon accounting for manufacturers.",
    "",
]
QUERIES = {"q1": "company revenue growth", "q2": "pets and animal care", "q3": "wind solar emissions", "q4": "football championship"}
KEYWORDS = {"q1": "revenue cloud", "q2": "dogs cats", "q3": "carbon factory", "q4": "football"}
QRELS = {"q1": {"doc.pdf#1": 1}, "q2": {"doc.pdf#2": 2}, "q3": {"doc.pdf#3": 1, "doc.pdf#5": 0}, "q4": {"doc.pdf#6": 0}}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A 6-page corpus with page texts (the last empty), queries, a keywords rewrite and qrels
    (q4 has no relevant page)."""
    from tiny_models import make_text_inputs

    return make_text_inputs(tmp_path_factory.mktemp("parity"), [(28, 28)] * len(TEXTS), TEXTS, QUERIES, KEYWORDS, QRELS)


def _commands() -> dict:
    """``{"name" or "group name": click command}`` of every command, sub-commands of groups
    (``vdr convert topiocqa``) included."""

    out = {}
    for name, cmd in typer.main.get_command(app).commands.items():
        if hasattr(cmd, "commands"):  # a group (typer vendors its own click)
            out.update({f"{name} {sub}": c for sub, c in cmd.commands.items()})
        else:
            out[name] = cmd
    return out


# ------------------------------------------------------------------------------------------ --version, --help


def test_version_prints_the_package_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"vdr {vdr.__version__}\n"


def test_every_command_help_has_quiet_log_level_pairs_and_choices(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # wide enough that rich truncates nothing
    assert main(["--help"]) == 0
    root = capsys.readouterr().out
    assert "--version" in root and "<bool>" not in root
    assert main(["convert", "--help"]) == 0  # a group's own help (vdr convert)
    assert "<bool>" not in capsys.readouterr().out
    commands = _commands()
    assert {"metrics", "ingest", "evaluate", "report", "embed", "judge", "serve", "rewrite", "mteb-task"} <= set(commands)
    for name, cmd in commands.items():
        assert main([*name.split(), "--help"]) == 0, name
        out = capsys.readouterr().out
        assert "--quiet" in out and "-q" in out and "--log-level" in out, name
        assert "<bool>" not in out, name
        assert "[debug|info|warning|error]" in out, name  # a choice is shown with its values
        for p in cmd.params:  # a setting given as a flag has its negation (actions such as --list-metrics do not)
            if getattr(p, "is_flag", False) and not p.is_eager:
                assert p.secondary_opts, f"{name} {p.opts}: give it a --x/--no-x pair"
        callback = cmd.callback.__wrapped__ if hasattr(cmd.callback, "__wrapped__") else cmd.callback
        for p in inspect.signature(callback, eval_str=True).parameters.values():
            ann = common._plain(p.annotation)
            if isinstance(ann, type) and issubclass(ann, Enum):
                assert "[" + "|".join(m.value for m in ann) + "]" in out, (name, p.name)
    assert main(["ingest", "--help"]) == 0
    out = capsys.readouterr().out
    assert "[pdfium|poppler]" in out and "[auto|always|never]" in out and "--no-strict" in out
    assert main(["evaluate", "--help"]) == 0
    out = capsys.readouterr().out
    for opt in ("--relevance-level", "--exclude-queries-without-relevant", "--keep-all-queries", "--permutations", "--bootstrap",
                "--no-concat", "--semantic-model", "--rrf-k", "--bm25-k1", "--bm25-b", "--bm25-delta", "--bm25-stemmer",
                "--bm25-stopwords", "--bm25-no-lower", "[lucene|robertson|atire|bm25l|bm25+]", "[vdr|mteb]", "--no-cache"):
        assert opt in out, opt


def test_a_value_outside_the_choices_is_a_usage_error(tmp_path, capsys):
    rc = main(["ingest", str(tmp_path), "-o", str(tmp_path / "c"), "--rasterizer", "ghostscript"])
    err = capsys.readouterr().err
    assert rc == 2 and "ghostscript" in err and "pdfium" in err and "Traceback" not in err
    rc = main(["evaluate", str(tmp_path), "-o", str(tmp_path / "r"), "--bm25-method", "bm26"])
    assert rc == 2 and "bm26" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ options reach the API


def _capture_evaluate(monkeypatch) -> dict:
    seen: dict = {}

    def fake(corpus_dir=None, **kw):
        seen.update(kw, corpus_dir=corpus_dir, env={k: os.environ.get(k) for k in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS",
                                                                               "TRANSFORMERS_VERBOSITY")})
        logging.getLogger("bm25s").setLevel(logging.DEBUG)  # what `import bm25s` does
        logging.getLogger("bm25s").debug("bm25s debug line")
        logging.getLogger("mteb").info("mteb info line")
        return None  # as on a torchrun rank other than 0: nothing printed

    monkeypatch.setattr(vdr.experiment.evaluation, "evaluate", fake)
    return seen


def test_evaluate_options_reach_the_api(tmp_path, monkeypatch, capsys):
    seen = _capture_evaluate(monkeypatch)
    rc = main(["evaluate", str(tmp_path), "-o", str(tmp_path / "r"), "--backend", "lexical,hybrid",
               "--relevance-level", "2", "--exclude-queries-without-relevant", "--permutations", "500", "--bootstrap", "300",
               "--no-concat", "--semantic-model", "my/minilm", "--rrf-k", "30", "--bm25-k1", "1.2", "--bm25-b", "0.4",
               "--bm25-method", "bm25+", "--bm25-delta", "1", "--bm25-stemmer", "none", "--bm25-stopwords", "de", "--bm25-no-lower",
               "--engine", "mteb", "--no-cache", "--dtype", "float32", "--model", "some/colqwen", "--attn-implementation", "sdpa",
               "--vidore-revision", "abc123", "--vidore-language", "english", "--macro-average", "-q"])
    assert rc == 0, capsys.readouterr().err
    assert seen["relevance_level"] == 2 and seen["queries_without_relevant"] == "exclude"
    assert seen["n_permutations"] == 500 and seen["n_bootstrap"] == 300
    assert seen["concat"] is False and seen["semantic_model"] == "my/minilm" and seen["rrf_k"] == 30.0
    assert seen["bm25"] == {"k1": 1.2, "b": 0.4, "method": "bm25+", "delta": 1.0, "stemmer": None, "stopwords": "de", "lower": False}
    assert seen["engine"] == "mteb" and type(seen["engine"]) is str  # choice values reach the API as plain str
    assert type(seen["bm25"]["method"]) is str
    assert seen["cache_dir"] is False and seen["progress"] is False and seen["macro_average"] is True
    assert seen["vidore_revision"] == "abc123" and seen["vidore_language"] == "english"
    enc = seen["encoder"]
    assert enc.model == "some/colqwen" and enc.store_dtype == "float32" and enc.attn_implementation == "sdpa"
    assert seen["env"] == {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error"}
    err = capsys.readouterr().err
    assert "bm25s debug line" not in err and "mteb info line" not in err


def test_evaluate_defaults_are_the_api_defaults(tmp_path, monkeypatch, capsys):
    seen = _capture_evaluate(monkeypatch)
    assert main(["evaluate", str(tmp_path), "-o", str(tmp_path / "r")]) == 0
    defaults = {n: p.default for n, p in inspect.signature(_API_EVALUATE).parameters.items()}
    for name in ("relevance_level", "queries_without_relevant", "n_permutations", "n_bootstrap", "concat", "semantic_model",
                 "rrf_k", "bm25", "vidore_revision", "vidore_language", "depth", "seed", "macro_average", "engine"):
        assert seen[name] == defaults[name], name
    assert seen["progress"] is True and seen["cache_dir"] is None
    assert seen["report"] is True and defaults["report"] is False  # issue 35.3: the command writes the report, --no-report not
    assert main(["evaluate", str(tmp_path), "-o", str(tmp_path / "r"), "--no-report"]) == 0 and seen["report"] is False
    assert seen["env"]["TQDM_DISABLE"] is None and seen["env"]["TRANSFORMERS_VERBOSITY"] == "warning"


def test_log_level_debug_shows_library_debug_lines(tmp_path, monkeypatch, capsys):
    _capture_evaluate(monkeypatch)
    assert main(["evaluate", str(tmp_path), "-o", str(tmp_path / "r"), "--log-level", "debug"]) == 0
    err = capsys.readouterr().err
    assert "DEBUG bm25s: bm25s debug line" in err and "INFO mteb: mteb info line" in err
    assert main(["evaluate", str(tmp_path), "-o", str(tmp_path / "r")]) == 0  # default: warning and above only
    err = capsys.readouterr().err
    assert "bm25s debug line" not in err and "mteb info line" not in err


def test_output_settings_are_restored(capsys):
    before = {k: os.environ.get(k) for k in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY")}
    handlers, bm25s_level = list(logging.getLogger().handlers), logging.getLogger("bm25s").level
    with common.output(quiet=True):
        assert os.environ["TQDM_DISABLE"] == "1" and os.environ["TRANSFORMERS_VERBOSITY"] == "error"
        logging.getLogger("bm25s").setLevel(logging.DEBUG)
        logging.getLogger("bm25s").warning("hidden by quiet")
        logging.getLogger("bm25s").error("shown even when quiet")
    assert {k: os.environ.get(k) for k in before} == before
    assert logging.getLogger().handlers == handlers and logging.getLogger("bm25s").level == bm25s_level
    err = capsys.readouterr().err
    assert "hidden by quiet" not in err and "ERROR bm25s: shown even when quiet" in err
    with pytest.raises(ValueError, match="unknown log level"):
        with common.output(quiet=False, log_level="loud"):
            pass


def test_quiet_option_on_a_command_registered_late(capsys):
    """A command added after vdr.cli was imported (another module, a plugin) gets the common options too."""
    @app.command("zz-probe")
    def probe(flag: bool = typer.Option(False, "--flag/--no-flag", help="A flag.")) -> None:
        typer.echo(f"flag={flag} tqdm={os.environ.get('TQDM_DISABLE')}")

    try:
        assert main(["zz-probe", "-q", "--flag"]) == 0
        assert capsys.readouterr().out == "flag=True tqdm=1\n"
    finally:
        app.registered_commands[:] = [c for c in app.registered_commands if c.name != "zz-probe"]


# ------------------------------------------------------------------------------------------ stage lines, progress, timing


def test_stage_lines_and_quiet(data, tmp_path, capsys):
    args = ["evaluate", str(data["corpus"]), "--queries", str(data["queries"]), "--qrels", str(data["qrels"]),
            "--rewrites", f"kw={data['kw']}", "--backend", "lexical", "--permutations", "100", "--bootstrap", "100"]
    assert main(args + ["--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    for line in ("load: 6 pages in ", "build lexical: ", "index lexical: 6 pages in ", "search lexical/original: 4 queries in ",
                 "search lexical/kw: 4 queries in ", "metrics: 2 runs in ", "statistics: 4 comparisons in ", "write: ", "total: "):
        assert sum(ln.startswith(line) for ln in err.splitlines()) == 1, (line, err)
    assert main(args + ["--out", str(tmp_path / "b"), "-q"]) == 0
    err = capsys.readouterr().err
    assert "search lexical" not in err and "total:" not in err


def test_exclude_queries_without_relevant_reaches_the_metrics(data, tmp_path, capsys):
    base = ["evaluate", str(data["corpus"]), "--queries", str(data["queries"]), "--qrels", str(data["qrels"]), "--backend", "lexical",
            "--permutations", "100", "--bootstrap", "100", "-q"]
    assert main(base + ["--out", str(tmp_path / "keep")]) == 0
    assert main(base + ["--out", str(tmp_path / "excl"), "--exclude-queries-without-relevant", "--bm25-k1", "0.9"]) == 0
    keep = json.loads((tmp_path / "keep" / "results.json").read_text())
    excl = json.loads((tmp_path / "excl" / "results.json").read_text())
    assert keep["config"]["queries_without_relevant"] == "zero" and excl["config"]["queries_without_relevant"] == "exclude"
    assert excl["config"]["backend_config"]["lexical"]["k1"] == 0.9
    v_keep = vdr.Results.load(tmp_path / "keep").run("lexical", "original").metrics
    v_excl = vdr.Results.load(tmp_path / "excl").run("lexical", "original").metrics
    assert list(v_keep.query_ids) == ["q1", "q2", "q3", "q4"] and list(v_excl.query_ids) == ["q1", "q2", "q3"]
    # q4 has no relevant page: it scores 0 when kept, so the kept mean is 3/4 of the excluded one
    assert v_keep.aggregate["ndcg@3"] == pytest.approx(v_excl.aggregate["ndcg@3"] * 3 / 4)


@pytest.mark.model  # the semantic backend loads sentence-transformers' MiniLM
def test_timing_json_every_stage_and_semantic_progress(data, tmp_path, monkeypatch, capsys):
    import vdr.progress

    bars = []
    real_bar = vdr.progress.progress_bar

    def recording_bar(description, total, unit, *, enabled=True):
        done = []
        bars.append({"description": description, "total": total, "unit": unit, "enabled": enabled, "done": done})
        with real_bar(description, total, unit, enabled=enabled) as advance:
            yield lambda n=1: (done.append(n), advance(n))

    from contextlib import contextmanager

    monkeypatch.setattr(vdr.progress, "progress_bar", contextmanager(recording_bar))
    out = tmp_path / "r"
    vdr.experiment.evaluation.evaluate(data["corpus"], queries=data["queries"], qrels=data["qrels"], rewrites={"kw": data["kw"]}, out=out,
                            backends="lexical,semantic,hybrid", cache_dir=False, n_permutations=100, n_bootstrap=100, device="cpu")
    t = json.loads((out / "timing.json").read_text())
    assert set(t) == {"load", "build", "index", "search", "metrics", "statistics", "results", "write", "total"}
    backends = {"lexical", "semantic", "hybrid"}
    assert set(t["build"]) == set(t["index"]) == set(t["search"]) == backends
    assert all(set(t["search"][b]) == {"original", "kw"} for b in backends)

    def total(node):
        return sum(total(v) if isinstance(v, dict) else v for v in node.values())

    stages = total({k: v for k, v in t.items() if k != "total"})
    assert t["total"] >= stages > 0
    assert all(isinstance(v, float) and v >= 0 for v in [t["load"], t["metrics"], t["statistics"], t["results"], t["write"]])
    # the semantic backend reports its encoding: the 6 pages (5 with text, encoded in MaxP windows), then 4 queries per variant
    pages = [b for b in bars if b["unit"] == "page"]
    queries = [b for b in bars if b["unit"] == "query"]
    assert [(b["description"], b["total"], sum(b["done"]), b["enabled"]) for b in pages] == [("encode pages (semantic)", 6, 6, True)]
    assert [(b["total"], sum(b["done"])) for b in queries] == [(4, 4), (4, 4)]
    err = capsys.readouterr().err
    assert "index semantic: 6 pages in " in err and "search hybrid/kw: 4 queries in " in err
