"""MTEB 2.x compatibility: vdr corpora as MTEB retrieval tasks, vdr encoders as an MTEB model.

Three pieces, each usable alone:

* **Tasks** -- :func:`make_tasks` turns a vdr corpus folder (from ``vdr ingest``, PDFs or ViDoRe)
  plus queries and qrels, and any rewrite variant of the queries, into MTEB
  :class:`~mteb.abstasks.retrieval.AbsTaskRetrieval` classes over the page images (category
  ``"t2i"``: text queries, image documents; modalities ``["text", "image"]`` as MTEB's ViDoRe
  tasks; main score ``ndcg_at_3`` unless told otherwise). Everything loads from local files; nothing
  touches the Hugging Face hub. :func:`register_task` (done by default) makes ``mteb.get_task(name)``
  and ``mteb.get_tasks(tasks=[...])`` find them.

  **A rewrite variant is its own task** over the same corpus and qrels: the originals are task
  ``NAME``, the variant ``keywords`` is task ``NAME-keywords``. Each has its own
  :class:`~mteb.results.TaskResult` and main score (MTEB averages subsets and splits into one main
  score, which would mix originals and rewrites if variants were subsets).

* **Model** -- :class:`VdrColPaliModel` wraps vdr's
  :class:`~vdr.encode.colpali.LateInteractionEncoder` (every ColPali-family checkpoint that
  colpali-engine runs) as an MTEB encoder, following MTEB's own ``ColPaliEngineWrapper``
  conventions: ``encode`` returns zero-padded ``float32`` multi-vectors ``(n, tokens, dim)``,
  ``similarity`` is MaxSim, the :class:`~mteb.models.ModelMeta` says ``model_type
  ["late-interaction"]``, ``similarity_fn_name "MaxSim"``, ``modalities ["text", "image"]``. Unlike
  the MTEB wrapper, MaxSim ignores the padding rows (vdr's :func:`vdr.retrieve.maxsim.maxsim` on the real
  tokens), so a zero padding vector never wins a max over negative similarities. The query template
  is vdr's explicit one (``"Query: "`` + text + 10 augmentation tokens, as MTEB's wrappers).

* **Engine** -- :class:`MtebBackend` is the multimodal backend of ``vdr evaluate --engine mteb``
  (a :class:`vdr.retrieve.base.Backend`): the corpus, queries and qrels vdr already loaded and
  its page store, scored through :func:`mteb.evaluate`; MTEB's TaskResult JSON goes under
  ``RESULTS_DIR/mteb/``. Any vdr/MTEB difference above 1e-6 warns and is recorded with its reason.

Query-set policy (mteb 2.26, read from ``AbsTaskRetrieval._evaluate_subset`` and
``calculate_retrieval_scores``): MTEB drops queries with **no qrels line at all**
(``_filter_queries_without_positives`` tests ``len(qrels[q]) == 0``) and averages over the queries
**present in the run** (pytrec_eval returns only those; MRR iterates the run). A query whose qrels
hold only grades <= 0 is kept and scores 0 -- as vdr's default ``queries_without_relevant="zero"``.
MTEB's search returns ``max(k_values)`` pages for every query, so its runs cover all queries and
vdr (query set = queries with a qrels line, missing-from-run = 0) averages exactly the same set.
MTEB rounds the means of nDCG/MAP/Recall/Precision/HitRate to 5 decimals (MRR is not rounded).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from dataclasses import dataclass
from typing import Any, ClassVar

from ..corpus import PAGES_FILE, Corpus
from ..errors import InputError
from ..retrieve.options import MtebOptions, check_options, option, options_from
from ..io.formats import load_qrels, load_queries, load_rewrites
from ..metrics.registry import EVALUATE_CUTOFFS, PRIMARY_CUTOFF, parse_cutoffs
from ..types import ORIGINAL, Qrels, QuerySet, Run

try:
    import mteb
    from mteb.models.abs_encoder import AbsEncoder
except ImportError as _e:  # pragma: no cover - depends on the environment
    raise ImportError(f"vdr.integrations.mteb needs MTEB 2.x ({_e}); install it with: pip install 'vdr[mteb]'") from None

__all__ = [
    "make_task",
    "make_tasks",
    "task_name",
    "register_task",
    "registered_tasks",
    "VdrColPaliModel",
    "vdr_model_meta",
    "write_task_module",
    "MtebBackend",
    "main_metric",
    "check_agreement",
    "build",
    "run_from_predictions",
    "MTEB_QUERY_POLICY",
    "DEFAULT_MAIN_SCORE",
    "DEFAULT_K_VALUES",
    "TESTED_MTEB",
]

#: The mteb versions this module was written and tested against (also pinned in pyproject.toml).
TESTED_MTEB = ">=2.26.24,<2.27"
DEFAULT_MAIN_SCORE = "ndcg_at_3"
#: MTEB's own retrieval cutoffs; vdr adds any other cutoff it is asked for.
DEFAULT_K_VALUES = (1, 3, 5, 10, 20, 100, 1000)
#: How MTEB forms the query set, in words (recorded in vdr's results next to MTEB's numbers).
MTEB_QUERY_POLICY = (
    "mteb: queries without any qrels line are dropped; the mean is over the queries present in the run "
    "(MTEB's search returns every query); queries whose qrels hold only grades <= 0 count as 0; "
    "means of ndcg/map/recall/precision/hit_rate rounded to 5 decimals, mrr unrounded"
)

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SCORE_RE = re.compile(r"^(ndcg|map|recall|precision|mrr|hit_rate)_at_(\d+)$")


def _mteb():
    _check_version()
    return mteb


_VERSION_CHECKED: list[bool] = []


def _check_version() -> None:
    """Warn (once per process, on first use -- never at import) when the installed mteb is outside
    :data:`TESTED_MTEB`: the task registry and MTEB's query-set policy are internals that may
    change between minor versions."""
    if _VERSION_CHECKED:
        return
    _VERSION_CHECKED.append(True)
    import warnings
    from importlib.metadata import version

    from packaging.specifiers import SpecifierSet

    from ..errors import VdrWarning

    v = version("mteb")
    if v not in SpecifierSet(TESTED_MTEB):
        warnings.warn(f"mteb {v} is outside the range vdr's MTEB integration was tested with ({TESTED_MTEB});"
                      " run tests/test_mteb.py to check agreement", VdrWarning, stacklevel=3)


def _registry_module():
    _mteb()
    return sys.modules["mteb.get_tasks"]


# --------------------------------------------------------------------------------------------- tasks


def task_name(name: str, variant: str = ORIGINAL) -> str:
    """The MTEB task name of a query variant: ``name`` for the originals, ``name-variant`` otherwise.

    >>> task_name("MyDocs"), task_name("MyDocs", "keywords")
    ('MyDocs', 'MyDocs-keywords')
    """
    return name if variant == ORIGINAL else f"{name}-{variant}"


def _check_name(value: str, what: str) -> str:
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise InputError(f"{what} {value!r} must be letters, digits, '_', '.', '-' (it names files)")
    return value


def _sha256_files(paths: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode("utf-8") + b"\0")
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()


def _main_score(main_score: str, k_values: Sequence[int]) -> str:
    m = _SCORE_RE.match(main_score or "")
    if not m:
        raise InputError(f"main score {main_score!r} must look like ndcg_at_3, mrr_at_10, recall_at_5, map_at_5, precision_at_1, hit_rate_at_3")
    if int(m.group(2)) not in k_values:
        raise InputError(f"main score {main_score!r} needs cutoff {m.group(2)} among the task's k values {list(k_values)}")
    return main_score


def _data_loader(corpus: Corpus, queries: QuerySet, qrels: Qrels):
    """The ``load_data`` method of a vdr task: the split built from the objects given."""
    page_ids = corpus.ids()
    image_paths = [str(corpus.image_path(i)) for i in page_ids]
    query_ids = list(queries)
    relevant = {q: {d: int(g) for d, g in qrels[q].items()} for q in qrels}

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        """Build the split from the local corpus folder, queries and qrels (no hub access).

        ``corpus``: columns ``id`` and ``image`` (a lazily decoded :class:`datasets.Image` of each
        page's PNG); ``queries``: ``id`` and ``text``; ``relevant_docs``: every qrels line, all
        grades (MTEB treats grades <= 0 as non-relevant).

        Raises:
            InputError: a page image file is missing.
        """
        if self.data_loaded:
            return
        from datasets import Dataset, Features, Image, Value

        missing = [(i, p) for i, p in zip(page_ids, image_paths) if not Path(p).is_file()]
        if missing:
            raise InputError(f"{len(missing)} page image(s) are missing, e.g. {missing[0][1]}", id=missing[0][0])
        corpus_ds = Dataset.from_dict(
            {"id": page_ids, "image": image_paths}, features=Features({"id": Value("string"), "image": Image()})
        )
        queries_ds = Dataset.from_dict(
            {"id": query_ids, "text": [queries[q].text for q in query_ids]},
            features=Features({"id": Value("string"), "text": Value("string")}),
        )
        self.dataset = {
            "default": {
                "test": {
                    "corpus": corpus_ds,
                    "queries": queries_ds,
                    "relevant_docs": {q: dict(d) for q, d in relevant.items()},
                    "top_ranked": None,
                }
            }
        }
        self.data_loaded = True

    return load_data


@dataclass(frozen=True)
class TaskSettings:
    """What an MTEB task declares besides its data (:func:`make_tasks`)."""

    label: ClassVar[str] = "MTEB task"

    main_score: str = option(DEFAULT_MAIN_SCORE, "MTEB score key of the main score (default ndcg_at_3)")
    languages: Sequence[str] = option(("eng-Latn",), "The tasks' eval_langs (ISO 639-3 + script)")
    k_values: Sequence[int] = option(DEFAULT_K_VALUES, "Cutoffs MTEB computes (the main score's cutoff must be among them)")
    description: str | None = option(None, "Task description (default: generated from the corpus and variant)", scores=False)


def _build_task_class(*, name: str, variant: str, corpus: Corpus, queries: QuerySet, qrels: Qrels, revision: str,
                      settings: TaskSettings, sources: dict):
    """An AbsTaskRetrieval subclass whose ``load_data`` builds the split from the objects given."""
    _mteb()
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.task_metadata import TaskMetadata

    languages, description = settings.languages, settings.description
    ks = tuple(sorted({int(k) for k in settings.k_values}))
    main = _main_score(settings.main_score, ks)
    full = task_name(name, variant)
    desc = description or (
        f"vdr corpus {corpus.root} ({len(corpus)} pages), {'original queries' if variant == ORIGINAL else f'rewrite variant {variant!r}'}"
        f" ({sum(1 for q in queries if q in qrels)} with qrels); text-to-image page retrieval."
    )
    metadata = TaskMetadata(
        name=full,
        description=desc,
        reference=None,
        dataset={"path": str(corpus.root.resolve()), "revision": revision},
        type="DocumentUnderstanding",
        category="t2i",
        modalities=["text", "image"],
        eval_splits=["test"],
        eval_langs=list(languages),
        main_score=main,
        date=None,
        domains=None,
        task_subtypes=["Image Text Retrieval"],
        license="not specified",
        annotations_creators=None,
        dialect=[],
        sample_creation="found",
        bibtex_citation="",
        adapted_from=[name] if variant != ORIGINAL else None,
        is_public=False,
        contributed_by="vdr",
    )
    load_data = _data_loader(corpus, queries, qrels)

    cls_name = "Vdr_" + re.sub(r"\W", "_", full)
    cls = type(
        cls_name,
        (AbsTaskRetrieval,),
        {
            "__doc__": f"MTEB retrieval task {full!r} built by vdr from local files: {desc}",
            "__module__": __name__,
            "metadata": metadata,
            "k_values": ks,
            "load_data": load_data,
            "vdr_variant": variant,
            "vdr_sources": dict(sources),
            "_vdr_task": True,
        },
    )
    return cls


def _load_variants(
    originals: QuerySet, q_src: Any, rewrites: Mapping[str, str | Path | QuerySet] | None
) -> dict[str, tuple[QuerySet, Any]]:
    """``{variant: (queries, source)}``, the originals first; each rewrite is checked against them."""
    variants: dict[str, tuple[QuerySet, Any]] = {ORIGINAL: (originals, q_src)}
    for v, src in (rewrites or {}).items():
        _check_name(v, "rewrite variant")
        if v == ORIGINAL:
            raise InputError(f"rewrite variant name {ORIGINAL!r} is reserved for the originals")
        qs = src if isinstance(src, QuerySet) else load_rewrites(src, originals, name=v)
        if set(qs) != set(originals):
            raise InputError(f"rewrite variant {v!r} does not have exactly the originals' query ids")
        variants[v] = (qs, src)
    return variants


def _digest(obj: Any) -> str:
    """SHA-256 hex of a file path's bytes, or of a QuerySet's / Qrels' content as sorted JSON."""
    if isinstance(obj, (str, Path)):
        return _sha256_files([Path(obj)])
    if isinstance(obj, QuerySet):
        return hashlib.sha256(json.dumps({q: obj[q].text for q in obj}, sort_keys=True).encode()).hexdigest()
    return hashlib.sha256(json.dumps({q: dict(obj[q]) for q in obj}, sort_keys=True).encode()).hexdigest()


def make_tasks(
    corpus_dir: str | Path | Corpus,
    *,
    name: str,
    queries: str | Path | QuerySet | None = None,
    qrels: str | Path | Qrels | None = None,
    rewrites: Mapping[str, str | Path | QuerySet] | None = None,
    register: bool = True,
    settings: TaskSettings | None = None,
    **kwargs: Any,
) -> dict[str, type]:
    """MTEB retrieval task classes for the originals and each rewrite variant of a vdr corpus.

    Args:
        corpus_dir: a corpus folder (``pages.jsonl`` + ``images/``) written by ``vdr ingest``
            (PDFs or ``--vidore``), or the :class:`~vdr.corpus.Corpus` already loaded from it.
        name: the task name of the originals (letters, digits, ``_ . -``); a variant ``v`` is
            ``name-v`` (see :func:`task_name`).
        queries: BEIR ``queries.jsonl`` (or a :class:`~vdr.types.QuerySet`); default
            ``corpus_dir/queries.jsonl`` (ViDoRe corpora).
        qrels: qrels file (BEIR TSV, TREC or JSON; or a :class:`~vdr.types.Qrels`); default
            ``corpus_dir/qrels.tsv``.
        rewrites: ``{variant: queries.jsonl or QuerySet}``; each must have the originals' ids.
        settings: :class:`TaskSettings`, or its fields as keywords:
        main_score: MTEB score key of the main score (default ``ndcg_at_3``).
        languages: the tasks' ``eval_langs`` (ISO 639-3 + script, default ``["eng-Latn"]``).
        k_values: cutoffs MTEB computes (MTEB's defaults; the main score's cutoff must be among them).
        description: task description (default: generated from the corpus and variant).
        register: add the classes to MTEB's task registry (:func:`register_task`).

    Returns:
        ``{"original": cls, variant: cls, ...}``; instantiate with ``cls()`` or fetch by name with
        ``mteb.get_task(task_name(name, variant))`` when registered.

    Raises:
        InputError: bad names or main score, malformed or misaligned files, qrels queries without
            text, qrels pages that are not in the corpus.
    """
    from ..experiment.inputs import check_inputs

    settings = options_from(TaskSettings, settings, kwargs, backend=name)
    _check_name(name, "task name")
    corpus = corpus_dir if isinstance(corpus_dir, Corpus) else Corpus.load(corpus_dir)
    corpus_dir = Path(corpus.root)
    q_src = queries if queries is not None else corpus_dir / "queries.jsonl"
    r_src = qrels if qrels is not None else corpus_dir / "qrels.tsv"
    originals = q_src if isinstance(q_src, QuerySet) else load_queries(q_src)
    qrels_obj = r_src if isinstance(r_src, Qrels) else load_qrels(r_src)
    qrels_path = Path(r_src) if not isinstance(r_src, Qrels) else Path("<qrels>")
    check_inputs(corpus, originals, qrels_obj, qrels_path)

    variants = _load_variants(originals, q_src, rewrites)
    base = [_sha256_files([corpus_dir / PAGES_FILE]), _digest(qrels_obj if isinstance(r_src, Qrels) else r_src)]
    out: dict[str, type] = {}
    for v, (qs, src) in variants.items():
        revision = hashlib.sha256("\n".join([*base, _digest(qs if isinstance(src, QuerySet) else src)]).encode()).hexdigest()
        sources = {
            "corpus_dir": str(corpus_dir.resolve()),
            "queries": str(Path(q_src).resolve()) if not isinstance(q_src, QuerySet) else None,
            "qrels": str(qrels_path.resolve()) if not isinstance(r_src, Qrels) else None,
            "rewrite": str(Path(src).resolve()) if v != ORIGINAL and not isinstance(src, QuerySet) else None,
        }
        cls = _build_task_class(
            name=name, variant=v, corpus=corpus, queries=qs, qrels=qrels_obj, revision=revision, settings=settings, sources=sources,
        )
        if register:
            register_task(cls)
        out[v] = cls
    return out


def make_task(corpus_dir: str | Path, *, name: str, variant: str = ORIGINAL, rewrite: str | Path | QuerySet | None = None,
              **kwargs: Any) -> type:
    """One task class: the originals (``variant="original"``) or one rewrite variant (``rewrite`` file).

    Keyword arguments are those of :func:`make_tasks`. Returns the class (registered unless
    ``register=False``).
    """
    if variant == ORIGINAL:
        if rewrite is not None:
            raise InputError("a rewrite file needs a variant name other than 'original'")
        return make_tasks(corpus_dir, name=name, **kwargs)[ORIGINAL]
    if rewrite is None:
        raise InputError(f"variant {variant!r} needs its rewrite queries (rewrite=FILE)")
    register = kwargs.pop("register", True)
    classes = make_tasks(corpus_dir, name=name, rewrites={variant: rewrite}, register=False, **kwargs)
    if register:
        register_task(classes[variant])
    return classes[variant]


def register_task(cls: type, *, replace: bool = True) -> type:
    """Add a task class to MTEB's registry so that ``mteb.get_task(name)`` and
    ``mteb.get_tasks(tasks=[name])`` (and filters such as ``mteb.get_tasks(categories=["t2i"],
    exclude_private=False)``) find it.

    A name that belongs to one of MTEB's own tasks is never replaced; a vdr task of the same name is
    replaced (``replace=True``, the default: re-importing a task module or rebuilding the task after
    the files changed) or refused.

    Raises:
        InputError: the name is one of MTEB's tasks, or is taken and ``replace`` is false.
    """
    reg = _registry_module()
    name = cls.metadata.name
    old = reg._TASKS_REGISTRY.get(name)
    if old is not None and old is not cls:
        if not getattr(old, "_vdr_task", False):
            raise InputError(f"task name {name!r} is one of MTEB's own tasks; choose another name")
        if not replace:
            raise InputError(f"task name {name!r} is already registered")
    reg._TASKS_REGISTRY[name] = cls
    reg.TASK_LIST = tuple(t for t in reg.TASK_LIST if t.metadata.name != name) + (cls,)
    return cls


def registered_tasks() -> list[str]:
    """Names of the vdr-built tasks currently in MTEB's registry."""
    reg = _registry_module()
    return sorted(n for n, c in reg._TASKS_REGISTRY.items() if getattr(c, "_vdr_task", False))


# --------------------------------------------------------------------------------------------- model


def _model_meta_for(enc, *, name: str | None, loader_kwargs: dict):
    _mteb()
    from mteb.models.model_meta import ModelMeta, ScoringFunction

    settings = enc.settings
    given = str(getattr(enc, "name_or_path", "") or settings.get("model") or "model")
    repo = (settings.get("source") or {}).get("repo") if isinstance(settings.get("source"), dict) else None
    base = repo or Path(given.rstrip("/")).name or "model"
    meta_name = name or f"vdr/{base.replace('/', '__')}"
    try:
        n_params = int(sum(p.numel() for p in enc.model.parameters()))
    except Exception:  # pragma: no cover - exotic models
        n_params = None
    return ModelMeta(
        loader=_load_from_meta,
        loader_kwargs=dict(loader_kwargs),
        name=meta_name,
        revision=enc.fingerprint,
        release_date=None,
        languages=None,
        n_parameters=n_params,
        memory_usage_mb=None,
        max_tokens=enc.query_limit(),
        embed_dim=enc.dim,
        license=None,
        open_weights=None,
        public_training_code=None,
        public_training_data=None,
        framework=["ColPali", "PyTorch"],
        reference=None,
        similarity_fn_name=ScoringFunction.MAX_SIM,
        use_instructions=True,
        training_datasets=None,
        adapted_from=repo,
        modalities=["text", "image"],
        model_type=["late-interaction"],
    )


def _load_from_meta(name: str, revision: str | None = None, *, model: str, **kwargs: Any) -> "VdrColPaliModel":
    """The ModelMeta loader: ``meta.load_model()`` calls it with the meta's name and revision (the
    encoder fingerprint) and the loader keyword arguments; warns when the reloaded encoder's
    fingerprint differs (changed checkpoint files or settings)."""
    import warnings

    from ..errors import VdrWarning

    m = VdrColPaliModel(model, name=name, **kwargs)
    if revision is not None and m.encoder.fingerprint != revision:
        warnings.warn(f"model {name!r}: encoder fingerprint {m.encoder.fingerprint[:12]} differs from the ModelMeta revision"
                      f" {revision[:12]} (checkpoint files or settings changed)", VdrWarning, stacklevel=2)
    return m


def vdr_model_meta(model: str | Path, *, name: str | None = None, **load_kwargs: Any):
    """The :class:`mteb.models.ModelMeta` of a vdr-wrapped checkpoint (loads it once to read the
    fingerprint, dimension and size); ``meta.load_model()`` -- and ``mteb.evaluate(meta, tasks)`` --
    build a :class:`VdrColPaliModel` with the same settings.

    Args:
        model: local checkpoint folder or hub name (offline: a folder).
        name: ModelMeta name (``org/name``); default ``vdr/<folder or repo name>``.
        load_kwargs: as :class:`VdrColPaliModel`.
    """
    return VdrColPaliModel(model, name=name, **load_kwargs).mteb_model_meta


class VdrColPaliModel(AbsEncoder):
    """vdr's ColPali-family encoder as an MTEB encoder (multi-vector, MaxSim).

    Args:
        model: a local checkpoint folder, a hub name, an :class:`~vdr.encode.settings.EncoderSettings`
            (every option; then the keyword options below must be left unset), or an already loaded
            :class:`~vdr.encode.colpali.LateInteractionEncoder`.
        name: ModelMeta name (``org/name``); default ``vdr/<folder or repo name>``.
        page_store: an :class:`~vdr.encode.store.EmbeddingStore` filled by this encoder: image-only
            inputs whose ``id`` column names stored pages are answered from the store (no forward
            pass; the stored vectors, as vdr's own engine scores them).
        kwargs: encoder options, the keywords of
            :meth:`~vdr.encode.settings.EncoderSettings.from_options` (``device``,
            ``compute_dtype``, ``trust_remote_code``, ``query_prefix``, ``min_pixels``,
            ``max_pixels``, ``revision``, ``attn_implementation``, ...; ``dtype`` is the deprecated
            spelling of ``compute_dtype``); they must be left unset with an
            :class:`~vdr.encode.settings.EncoderSettings` or a loaded encoder. Other keywords are
            ignored (MTEB passes loader keyword arguments it knows, e.g. ``torch_dtype``).

    Attributes:
        encoder: the :class:`~vdr.encode.colpali.LateInteractionEncoder`.
        mteb_model_meta: the :class:`mteb.models.ModelMeta` (revision = the encoder fingerprint).
    """

    def __init__(self, model, *, name: str | None = None, page_store=None, **kwargs: Any) -> None:
        from ..encode.colpali import LateInteractionEncoder
        from ..encode.settings import EncoderSettings

        if isinstance(model, dict) and "model" in model:  # ModelMeta.load_model(): settings as JSON
            model = EncoderSettings.from_json(model)
        _check_version()
        options = {k: v for k, v in kwargs.items() if k in EncoderSettings.keywords()}
        if isinstance(model, LateInteractionEncoder):
            enc = model
        else:
            enc = LateInteractionEncoder.load(model, **options)
        loader_kwargs = {"model": enc.encoder_settings.to_json()}
        self.encoder = enc
        self.page_store = page_store
        self.model = enc.model
        self.device = enc.device
        self.mteb_model_meta = _model_meta_for(enc, name=name, loader_kwargs=loader_kwargs)

    # -------------------------------------------------------------- encoding
    def encode(self, inputs, *, task_metadata=None, hf_split: str | None = None, hf_subset: str | None = None,
               prompt_type=None, **kwargs: Any):
        """Encode an MTEB DataLoader: ``text`` columns as queries (vdr's explicit template),
        ``image`` columns as pages; both present: text and image vectors concatenated per item
        (MTEB's ColPali wrapper convention).

        Returns:
            ``float32`` CPU tensor ``(n, max_tokens, dim)``, each item's real tokens first and
            zero rows after them.
        """
        import torch

        features = getattr(getattr(inputs, "dataset", None), "features", None) or {}
        show = kwargs.get("show_progress_bar", False)
        text_vecs: list[torch.Tensor] | None = [] if "text" in features else None
        image_vecs: list[torch.Tensor] | None = [] if "image" in features else None
        if text_vecs is None and image_vecs is None:
            raise ValueError(f"{type(self).__name__}: inputs have neither a 'text' nor an 'image' column")
        for batch in inputs:
            if text_vecs is None and self._from_store(batch, image_vecs):
                continue
            if text_vecs is not None:
                texts = list(batch["text"])
                text_vecs.extend(self.encoder.encode_queries(texts, batch_size=max(1, len(texts)), progress=False))
            if image_vecs is not None:
                images = [_to_pil(im) for im in batch["image"]]
                image_vecs.extend(self.encoder.encode_pages(images, batch_size=max(1, len(images)), progress=False))
        del show
        if text_vecs is not None and image_vecs is not None:
            if len(text_vecs) != len(image_vecs):
                raise ValueError("the number of texts and images must be the same")
            vecs = [torch.cat([t, i], dim=0) for t, i in zip(text_vecs, image_vecs)]
        else:
            vecs = text_vecs if text_vecs is not None else image_vecs
        return torch.nn.utils.rnn.pad_sequence([v.float() for v in vecs], batch_first=True, padding_value=0.0)

    def _from_store(self, batch, out: list) -> bool:
        """Append the stored vectors of an image-only batch whose ids are all in the page store."""
        ids = batch.get("id") if hasattr(batch, "get") else None
        st = self.page_store
        if st is None or ids is None or not all(isinstance(i, str) and i in st for i in ids):
            return False
        out.extend(st.get(i) for i in ids)
        return True

    # -------------------------------------------------------------- scoring
    def similarity(self, embeddings1, embeddings2):
        """MaxSim of every query (``embeddings1``) against every page (``embeddings2``), float32,
        shape ``(n1, n2)``; all-zero rows (the padding :meth:`encode` added) are left out."""
        from ..retrieve.maxsim import maxsim

        dev = self.device if str(self.device).startswith("cuda") else None
        return maxsim(_unpad(embeddings1), _unpad(embeddings2), device=dev)

    def similarity_pairwise(self, embeddings1, embeddings2):
        """MaxSim of each pair ``(embeddings1[i], embeddings2[i])``, float32, shape ``(n,)``."""
        import torch

        from ..retrieve.maxsim import maxsim

        a, b = _unpad(embeddings1), _unpad(embeddings2)
        if len(a) != len(b):
            raise ValueError(f"{len(a)} vs {len(b)} items")
        return torch.stack([maxsim([x], [y])[0, 0] for x, y in zip(a, b)]) if a else torch.empty(0)

    def __repr__(self) -> str:
        return f"VdrColPaliModel({self.mteb_model_meta.name!r}, {self.encoder!r})"



def _to_pil(x):
    from PIL import Image

    if isinstance(x, Image.Image):
        return x.convert("RGB")
    import torchvision.transforms.functional as F

    return F.to_pil_image(x).convert("RGB")


def _unpad(x) -> list:
    import numpy as np
    import torch

    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    if t.ndim == 2:
        t = t[None]
    if t.ndim != 3:
        raise ValueError(f"multi-vector embeddings must have shape (n, tokens, dim), got {tuple(t.shape)}")
    keep = t.ne(0).any(dim=-1)
    return [t[i][keep[i]] for i in range(t.shape[0])]


# --------------------------------------------------------------------------------------------- module writer


def write_task_module(
    corpus_dir: str | Path,
    *,
    name: str,
    queries: str | Path | None = None,
    qrels: str | Path | None = None,
    rewrites: Mapping[str, str | Path] | None = None,
    main_score: str = DEFAULT_MAIN_SCORE,
    languages: Sequence[str] = ("eng-Latn",),
    out: str | Path | None = None,
) -> str:
    """The source of a small Python module that registers the tasks of :func:`make_tasks` when
    imported; written atomically to ``out`` when given. The inputs are checked first (the same
    checks as :func:`make_tasks`); paths in the module are absolute.

    Returns:
        The module source.
    """
    from importlib.metadata import version

    from ..io.atomic import write_text_atomic

    corpus_dir = Path(corpus_dir).resolve()
    q = Path(queries).resolve() if queries is not None else corpus_dir / "queries.jsonl"
    r = Path(qrels).resolve() if qrels is not None else corpus_dir / "qrels.tsv"
    rw = {k: Path(v).resolve() for k, v in (rewrites or {}).items()}
    classes = make_tasks(corpus_dir, name=name, queries=q, qrels=r, rewrites=rw, main_score=main_score,
                         languages=languages, register=False)
    names = [c.metadata.name for c in classes.values()]
    mv = version("mteb")
    rewrites_src = "{" + ", ".join(f"{k!r}: {str(v)!r}" for k, v in rw.items()) + "}"
    src = f'''"""MTEB retrieval tasks over the vdr corpus {str(corpus_dir)!r}, written by ``vdr mteb-task``.

Importing this module registers, in MTEB's task registry (mteb {mv}; tested range {TESTED_MTEB}):

{chr(10).join(f"* ``{n}``" for n in names)}

The originals are ``{name}``; each rewrite variant ``V`` is its own task ``{name}-V`` over the same
corpus and qrels (text-to-image, main score ``{main_score}``). Data loads from the local files below;
nothing is downloaded. Usage::

    import mteb
    import {Path(out).stem if out else "this_module"}  # registers the tasks
    from vdr.integrations.mteb import VdrColPaliModel

    model = VdrColPaliModel("/path/to/colqwen2.5")  # or any MTEB model with image support
    tasks = mteb.get_tasks(tasks={names!r})
    results = mteb.evaluate(model, tasks, cache=None)
    for r in results.task_results:
        print(r.task_name, r.get_score())
"""

from vdr.integrations.mteb import make_tasks

CORPUS_DIR = {str(corpus_dir)!r}
QUERIES = {str(q)!r}
QRELS = {str(r)!r}
REWRITES = {rewrites_src}

#: {{variant: task class}}, registered on import.
TASKS = make_tasks(
    CORPUS_DIR,
    name={name!r},
    queries=QUERIES,
    qrels=QRELS,
    rewrites=REWRITES,
    main_score={main_score!r},
    languages={list(languages)!r},
)
#: The registered task names, originals first.
TASK_NAMES = [cls.metadata.name for cls in TASKS.values()]
'''
    if out is not None:
        write_text_atomic(Path(out), src)
    return src


# --------------------------------------------------------------------------------------------- engine


def run_from_predictions(predictions: Mapping, *, depth: int | None = None, name: str | None = None) -> Run:
    """A vdr :class:`~vdr.types.Run` from MTEB's retrieval output ``{qid: {docid: score}}`` (the
    ``default``/``test`` entry of a ``*_predictions.json``), each query cut to its ``depth`` best
    pages (trec_eval order: score descending, ties by page id descending)."""
    data: dict[str, dict[str, float]] = {}
    for qid, docs in predictions.items():
        items = sorted(((str(d), float(s)) for d, s in docs.items()), key=lambda x: (x[1], x[0]), reverse=True)
        if depth is not None:
            items = items[:depth]
        data[str(qid)] = dict(items)
    return Run(data, name=name)


def main_metric(dataset: str | None, default: str = DEFAULT_MAIN_SCORE) -> tuple[str, str]:
    """MTEB's main metric for ``dataset`` (a ViDoRe hub name or local folder): the ``main_score``
    of the MTEB task over the same dataset (exact hub path first, then the folder's last name);
    otherwise ``default``.

    ``model`` is a model name or path (with ``batch_size`` default 8, ``device``,
    ``trust_remote_code``), or an :class:`~vdr.encode.settings.EncoderSettings` holding every
    encoder option (``batch_size`` and ``device``, when given, override its fields).

    Returns:
        ``(metric, source)``, e.g. ``("ndcg_at_5", "MTEB task Vidore2ESGReportsRetrieval")``.
    """
    if dataset:
        reg = _registry_module()._TASKS_REGISTRY
        name = Path(str(dataset).rstrip("/")).name
        for exact in (True, False):
            for tname, cls in reg.items():
                path = str((cls.metadata.dataset or {}).get("path", ""))
                if not getattr(cls, "_vdr_task", False) and (path == dataset if exact else path.split("/")[-1] == name):
                    return cls.metadata.main_score, f"MTEB task {tname} (dataset {path})"
    return default, "vdr's task default (no MTEB task for this dataset)"


def check_agreement(variant: str, qrels: Qrels, run: Run, scores: Mapping[str, float],
                    metrics: Sequence[str]) -> tuple[float, list[dict]]:
    """vdr's metrics of ``run`` against MTEB's ``scores`` (a TaskResult's ``scores["test"][0]``) for
    query variant ``variant``; warns (:class:`~vdr.errors.VdrWarning`) on any disagreement.

    vdr's nDCG/MAP/Recall/Precision are rounded to 5 decimals first, as MTEB rounds its means (MRR
    is not rounded). A difference above ``1e-6`` is a disagreement; its reason is looked for in
    the query sets: queries with an empty judgment set (MTEB drops them, vdr averages them as 0),
    qrels queries missing from MTEB's run; otherwise it is reported as unexplained.

    Returns:
        ``(largest absolute difference, disagreements)``; each disagreement is ``{"metric", "vdr",
        "mteb", "difference", "reason"}``.
    """
    from ..metrics import evaluate_run

    ours = evaluate_run(qrels, run, list(metrics)).aggregate
    empty = [q for q in qrels if len(qrels[q]) == 0]
    missing = [q for q in qrels if q not in run and len(qrels[q]) > 0]
    reasons = []
    if empty:
        reasons.append(f"{len(empty)} qrels quer{'y has' if len(empty) == 1 else 'ies have'} an empty judgment set"
                       f" (e.g. {empty[:3]}): MTEB drops them, vdr averages them")
    if missing:
        reasons.append(f"{len(missing)} qrels queries are missing from MTEB's run (e.g. {missing[:3]}): MTEB averages"
                       " over the queries in its run, vdr counts them as 0")
    reason = "; ".join(reasons) or "unexplained (same query set on both sides)"
    worst, out = 0.0, []
    for m in metrics:
        v = ours[m] if m.startswith("mrr") else round(ours[m], 5)
        theirs = float(scores[m.replace("@", "_at_")])
        d = abs(v - theirs)
        worst = max(worst, d)
        if d > DISAGREEMENT_TOLERANCE:
            out.append({"metric": m, "vdr": v, "mteb": theirs, "difference": d, "reason": reason})
    if out:
        import warnings

        from ..errors import VdrWarning

        warnings.warn(f"vdr and MTEB disagree on variant {variant!r} by up to {worst:.3g} ({out[0]['metric']}: vdr"
                      f" {out[0]['vdr']:.6f}, MTEB {out[0]['mteb']:.6f}): {reason}", VdrWarning, stacklevel=2)
    return worst, out


#: Largest vdr/MTEB difference accepted silently.
DISAGREEMENT_TOLERANCE = 1e-6


class MtebBackend:
    """The multimodal backend run through :func:`mteb.evaluate` (``vdr evaluate --engine mteb``),
    as a :class:`~vdr.retrieve.base.Backend`.

    :meth:`index` goes through the multimodal backend's own path (one encoder load, the page
    store filled and reused); :meth:`search` turns the variant into one MTEB task over the corpus
    and qrels already loaded, runs :func:`mteb.evaluate` with :class:`VdrColPaliModel` (pages
    answered from the store, queries encoded by the same encoder), stores MTEB's TaskResult JSON in
    ``out_dir/<task>.json`` and its predictions in ``out_dir/predictions/``, and returns MTEB's run
    cut to ``depth``. Every variant's MTEB scores are compared with vdr's on the same run
    (:func:`check_agreement`): a difference above 1e-6 warns and is recorded with its reason.

    Args:
        encoder: encoder options (see :class:`vdr.retrieve.multimodal.MultimodalBackend`).
        qrels: the qrels already loaded (checked against the corpus by the caller).
        out_dir: folder of MTEB's outputs (``RESULTS_DIR/mteb``).
        ks: vdr's metric cutoffs (MTEB computes them too).
        dataset: the ViDoRe dataset evaluated, if any (names MTEB's main metric, :func:`main_metric`).
        store: the page store folder (default ``CORPUS_DIR/embeddings``).
        progress: progress bars.
        name: the backend's name in results (default ``"multimodal"``).

    Attributes:
        config: the multimodal backend's config plus ``engine``, ``mteb_version``, MTEB model meta
            name and revision, task names, k values, main metric.
        report: the standard keys (``page_forward_passes``, ``cache``, ``index``, ``searches``) plus
            ``task_results``, ``mteb_scores``, ``main_metric`` (``{"name", "source", "values":
            {variant: value}}``), ``max_abs_difference_vdr_vs_mteb`` and ``disagreements`` per
            variant, ``mteb_query_policy`` and ``compared_metrics``.

    Raises:
        BackendUnavailable: no model (at construction).
    """

    def __init__(self, encoder: Any, *, qrels: Qrels, out_dir: str | Path, ks: Sequence[int] = EVALUATE_CUTOFFS,
                 dataset: str | None = None, store: str | Path | None = None, progress: bool = False,
                 name: str = "multimodal") -> None:
        from ..retrieve.multimodal import MultimodalBackend

        self._pages = MultimodalBackend(encoder, store=store, progress=progress, name=name)
        self.name = name
        self.qrels = qrels
        self.out_dir = Path(out_dir)
        self.ks = parse_cutoffs(ks)
        self.k_values = tuple(sorted(set(DEFAULT_K_VALUES) | set(self.ks)))
        self.dataset = dataset
        self.progress = progress
        self.config: dict = dict(self._pages.config, engine="mteb")
        self.report: dict = self._pages.report
        self._model = None
        self._corpus = None

    def index(self, corpus) -> None:
        """Load the encoder and fill the page store (see :meth:`MultimodalBackend.index`); wrap the
        encoder and the store as an MTEB model.

        Raises:
            BackendUnavailable: as :meth:`MultimodalBackend.index`.
        """
        from importlib.metadata import version

        self._pages.index(corpus)
        enc = self._pages.encoder
        self._model = VdrColPaliModel(enc, page_store=self._pages.store)
        self._corpus = corpus
        default = f"ndcg_at_{PRIMARY_CUTOFF if PRIMARY_CUTOFF in self.k_values else min(self.ks)}"
        self._main, source = main_metric(self.dataset, default)
        self.k_values = tuple(sorted(set(self.k_values) | {int(self._main.rsplit("_", 1)[1])}))
        self._base = f"vdr-{_sha256_files([Path(corpus.root) / PAGES_FILE])[:12]}"
        meta = self._model.mteb_model_meta
        self.config = dict(self._pages.config, engine="mteb", mteb_version=version("mteb"), mteb_model=meta.name,
                           mteb_model_revision=meta.revision, mteb_tasks={}, mteb_k_values=list(self.k_values),
                           mteb_main_metric=self._main)
        self.report = self._pages.report
        self.report.update(engine="mteb", task_results={}, mteb_scores={}, max_abs_difference_vdr_vs_mteb={},
                           disagreements={}, main_metric={"name": self._main, "source": source, "values": {}},
                           mteb_query_policy=MTEB_QUERY_POLICY,
                           compared_metrics=[f"{m}@{k}" for k in self.ks for m in ("ndcg", "mrr", "recall")])

    def _task(self, queries: QuerySet, variant: str):
        qdigest = hashlib.sha256(json.dumps(queries.texts(), sort_keys=True).encode()).hexdigest()
        rdigest = hashlib.sha256(json.dumps(self.qrels.to_dict(), sort_keys=True).encode()).hexdigest()
        revision = hashlib.sha256("\n".join([self._base, rdigest, qdigest]).encode()).hexdigest()
        cls = _build_task_class(name=self._base, variant=variant, corpus=self._corpus, queries=queries, qrels=self.qrels,
                                revision=revision, settings=TaskSettings(self._main, ("eng-Latn",), self.k_values),
                                sources={"corpus_dir": str(Path(self._corpus.root).resolve())})
        return cls()

    def search(self, queries: QuerySet, depth: int) -> Run:
        """Run the variant's MTEB task; MTEB's run cut to ``depth`` (trec_eval order).

        Raises:
            InputError: :meth:`index` was not called.
            BackendUnavailable: MTEB failed on the task (its message).
        """
        from ..retrieve.base import BackendUnavailable

        if self._model is None:
            raise InputError("MtebBackend.search: call index(corpus) first")
        variant = queries.name
        task = self._task(queries, variant)
        tname = task.metadata.name
        pred_dir = self.out_dir / "predictions"
        self.out_dir.mkdir(parents=True, exist_ok=True)
        res = mteb.evaluate(self._model, [task], cache=None, prediction_folder=pred_dir,
                            encode_kwargs={"batch_size": self._pages.settings.pages_per_batch},
                            show_progress_bar=self.progress, raise_error=False, co2_tracker=False, overwrite_strategy="always")
        if res.exceptions:
            raise BackendUnavailable("MTEB failed: " + "; ".join(f"{e.task_name}: {e.exception}" for e in res.exceptions))
        tr = res.task_results[0]
        tr.to_disk(self.out_dir / f"{tname}.json")
        pred = json.loads((pred_dir / f"{tname}_predictions.json").read_text(encoding="utf-8"))["default"]["test"]
        s = tr.scores["test"][0]
        worst, bad = check_agreement(variant, self.qrels, run_from_predictions(pred), s, self.report["compared_metrics"])
        r = self.report
        self.config["mteb_tasks"][variant] = tname
        r["task_results"][variant] = f"{self.out_dir.name}/{tname}.json"
        r["mteb_scores"][variant] = {"task": tname, "main_score": s["main_score"], **{k: s[k] for k in sorted(s) if _SCORE_RE.match(k)}}
        r["max_abs_difference_vdr_vs_mteb"][variant] = worst
        r["disagreements"][variant] = bad
        r["main_metric"]["values"][variant] = s[self._main]
        r["searches"][variant] = {"num_queries": len(queries), "task": tname, "depth": depth}
        return run_from_predictions(pred, depth=depth, name=f"{self.name}-{variant}")


def build(ctx) -> MtebBackend:
    """Registry factory of the ``mteb`` entry (``vdr evaluate --engine mteb`` builds it under the
    name ``multimodal``). Options (:class:`vdr.retrieve.options.MtebOptions`): ``encoder`` (see
    :class:`vdr.retrieve.multimodal.MultimodalBackend`; its ``device`` defaults to ``ctx.device``),
    ``store``, ``qrels`` (required), ``out_dir`` (default ``mteb``), ``ks``, ``dataset``.

    Raises:
        BackendUnavailable: no model.
        InputError: no qrels.
    """
    from ..retrieve.multimodal import encoder_option

    o = check_options(MtebOptions, ctx.options, backend=ctx.name)
    if o.qrels is None:
        raise InputError("the mteb backend needs the qrels (option qrels)")
    return MtebBackend(encoder_option(o.encoder, ctx.device), qrels=o.qrels, out_dir=o.out_dir, ks=EVALUATE_CUTOFFS if o.ks is None else o.ks,
                       dataset=o.dataset,
                       store=o.store, progress=ctx.progress, name=ctx.name)


build.Options = MtebOptions
