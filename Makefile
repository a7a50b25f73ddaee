# vdr — the README's two commands: `make demo` and `make test`.
# Python packages are installed into .venv (no root needed), with the machine pins of constraints.txt;
# the optional system tools as scripts/sysdeps.sh says.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.vdr-installed
# Optional system tools (poppler, tesseract, chromium, a JDK): scripts/sysdeps.sh. `make test` installs the
# Debian packages where it can (root, or sudo without a password, on Debian/Ubuntu: CI), `make demo` tries;
# neither needs root: what is missing is named once, with what it disables, and the rest runs.
SYSDEPS := bash scripts/sysdeps.sh

.PHONY: demo test test-fast lint sysdeps venv bench clean

SAMPLE := assets/sample_corpus

# The main job on the bundled sample: ingest its PDFs, then original vs two rewrite variants on
# every backend that runs offline (the multimodal one needs a ColPali-family checkpoint: MODEL=DIR, which
# also serves its page vectors pooled, int8, binary, MUVERA and through Qdrant, audited against exact MaxSim),
# broken down by the queries' type (evaluate writes the report: out/demo/results/report.html); then every
# pair of the BM25 runs compared (ranx's matrix).
demo: $(STAMP)
	@$(SYSDEPS) try
	$(VENV)/bin/vdr ingest $(SAMPLE)/pdfs --out out/demo/corpus --quiet
	$(VENV)/bin/vdr evaluate out/demo/corpus --queries $(SAMPLE)/queries.jsonl --qrels $(SAMPLE)/qrels.tsv \
		--rewrites conversational=$(SAMPLE)/rewrites-conversational.jsonl \
		--rewrites keywords=$(SAMPLE)/rewrites-keywords.jsonl --group-by type \
		$(if $(MODEL),--model $(MODEL) --serve-as pool:3 --serve-as int8 --serve-as binary --serve-as muvera --serve-as qdrant) \
		--quiet --out out/demo/results
	$(VENV)/bin/vdr compare $(SAMPLE)/qrels.tsv bm25=out/demo/results/runs/lexical.original.trec \
		bm25-conversational=out/demo/results/runs/lexical.conversational.trec \
		bm25-keywords=out/demo/results/runs/lexical.keywords.trec --pairs all \
		--queries $(SAMPLE)/queries.jsonl --corpus out/demo/corpus --quiet --out out/demo/compare

# Every test (tests marked `shared` skip, naming the path, when ../shared is absent).
test: sysdeps $(STAMP)
	$(PY) -m pytest

# The core tier (tests/conftest.py: no reference implementation, model, ../shared, browser or Java;
# the hand-computed goldens included): about 1,000 tests, 2.6 minutes of CPU time.
test-fast: sysdeps $(STAMP)
	$(PY) -m pytest -m core

# pyflakes over vdr/ and tests/, docstrings of vdr's public API ([tool.ruff] in pyproject.toml).
lint: $(STAMP)
	$(VENV)/bin/ruff check vdr tests

bench: $(STAMP)
	$(PY) benchmarks/metrics.py
	$(PY) benchmarks/rasterize.py
	$(PY) benchmarks/maxsim.py
	$(PY) benchmarks/rerun.py
	$(PY) benchmarks/trec_eval_cli.py  # needs TREC_EVAL=/path/to/trec_eval (trec_eval 10 built from source); else prints "skipped"

sysdeps:
	@$(SYSDEPS) install

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

venv: $(STAMP)

# PLAID for the served engines (issue 36, vdr.retrieve.engines): fast-plaid's wheels are built per torch
# version (the suffix .290 = torch 2.9.x) and declare torch==2.9.0 exactly, while constraints.txt pins
# torch 2.9.1; installed with --no-deps it runs on 2.9.1 (measured: tests/test_served_engines.py). Its
# other dependencies (usearch, joblib, filelock) come with the test extra and the package's own.
FAST_PLAID := fast-plaid==1.7.0.290 fastkmeans==0.5.0

$(STAMP): $(VENV)/bin/python pyproject.toml constraints.txt
	$(PIP) install -q -c constraints.txt -e '.[test]'
	$(PIP) install -q --no-deps -c constraints.txt $(FAST_PLAID)
	touch $(STAMP)

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis test-artifacts
