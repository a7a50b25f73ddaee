"""Typer parameters and argument parsers shared by several commands: the encoder options generated
from :class:`~vdr.encode.settings.EncoderSettings`, ``--backend-option`` / ``--rewrites`` / ``--run``
parsing, metric help, and the ``**options`` signature builder."""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable, Optional

import typer

from . import common
from ..errors import InputError


def parse_rewrites(items: list[str] | None) -> dict[str, str]:
    """``["NAME=FILE", ...]`` -> ``{NAME: FILE}``.

    Raises:
        InputError: an item without ``=``, an empty name or file, or a name given twice.
    """
    rw: dict[str, str] = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise InputError(f"--rewrites takes NAME=FILE, got {item!r}")
        if name in rw:
            raise InputError(f"rewrite variant {name!r} given twice")
        rw[name] = path
    return rw


def on_interrupt(command):
    """Ctrl-C in a command that writes a results folder (``--out``): one line
    ``interrupted; RESULTS_DIR unchanged`` on stderr and exit status 130 (128 + SIGINT), no
    traceback. The folder is unchanged because results are staged and only replace its content at
    the end (:mod:`vdr.io.outdir`)."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except KeyboardInterrupt:
            out = kwargs.get("out")
            typer.echo(f"interrupted; {out} unchanged" if out is not None else "interrupted", err=True)
            raise typer.Exit(130) from None

    return run


BACKEND_OPTION_HELP = (
    "A backend option BACKEND.KEY=VALUE (repeatable; VALUE is converted by the option's type -- 512, 0.9, true, null,"
    " [\"a\"]; a bad key or value is refused with the allowed ones). Common keys: lexical.k1 / .b / .preset / .analyzer /"
    " .max_query_tokens (default 512, null: none) / .method / .stemmer / .stopwords; semantic.long_text (maxp|truncate) /"
    " .passage_max_length / .query_max_length / .window / .stride / .batch_size / .search / .query_prompt / .document_prompt /"
    " .prompt_name / .architecture (ance) / .model / .allow_pickle_weights (read pytorch_model.bin); pyserini.index_dir (an existing"
    " Lucene index) / .preset / .k1 / .b / .threads / .max_query_tokens; hybrid.rrf_k / .fuse. Overrides the dedicated options.")


def parse_backend_options(items: list[str] | None, backends: str) -> dict[str, dict]:
    """``--backend-option BACKEND.KEY=VALUE`` items -> ``{BACKEND: {KEY: VALUE}}``, the
    ``backend_options`` of :func:`vdr.evaluate` and :func:`vdr.rewards.serve.serve`. VALUE is
    converted by the type of the option's field (:func:`vdr.retrieve.options.parse_option`; a
    backend without an options dataclass gets JSON when it parses, else the text).

    Args:
        items: the option values as given.
        backends: the ``--backend`` value (comma-separated names).

    Raises:
        InputError: an item not of the form ``BACKEND.KEY=VALUE``, a key given twice, a backend
            that is not registered (the known names are listed) or not among ``--backend``, an
            unknown KEY or a VALUE of the wrong type (:func:`vdr.retrieve.base.check_backend_options`).
    """
    from ..retrieve.base import available_backends, check_backend_options

    known = available_backends()
    wanted = [b.strip() for b in backends.split(",") if b.strip()]
    raw: dict[str, dict] = {}
    for item in items or []:
        target, sep, value = item.partition("=")
        name, dot, key = target.partition(".")
        if not sep or not dot or not name or not key:
            raise InputError(f"--backend-option takes BACKEND.KEY=VALUE (e.g. lexical.k1=0.9), got {item!r}")
        if name not in known:
            raise InputError(f"--backend-option {item!r}: unknown backend {name!r}; known: {', '.join(known)}")
        if name not in wanted:
            raise InputError(f"--backend-option {item!r}: backend {name!r} is not among --backend {','.join(wanted)}")
        if key in raw.get(name, {}):
            raise InputError(f"--backend-option {name}.{key} given twice")
        raw.setdefault(name, {})[key] = value
    out: dict[str, dict] = {}
    for name, given in raw.items():
        checked = check_backend_options(name, given, strings=True)
        out[name] = dict(checked) if isinstance(checked, dict) else {k: getattr(checked, k) for k in given}
    return out


def parse_variant_runs(items: list[str] | None) -> dict[str, dict[str, str]]:
    """``vdr evaluate --run`` items -> ``{NAME: {VARIANT: FILE}}`` (issue 25.4):

    * ``NAME=FILE``: the system's run of the ``original`` queries (variant ``original``);
    * ``NAME:VARIANT=FILE``: its run of one variant (repeatable, one per variant);
    * ``NAME:*=FILE``: one file reused for EVERY variant, on explicit request only (a system that
      does not see the rewrites; marked in the table: its changes are 0 by construction).

    Raises:
        InputError: an item without ``=``, an empty name, variant or file, a name that cannot name
            files, a variant given twice for one name, ``*`` mixed with per-variant files.
    """
    from ..experiment.inputs import check_name

    out: dict[str, dict[str, str]] = {}
    for item in items or []:
        left, sep, path = item.partition("=")
        name, colon, variant = left.partition(":")
        variant = variant if colon else "original"
        if not sep or not name or not variant or not path:
            raise InputError(f"--run takes NAME=FILE, NAME:VARIANT=FILE or NAME:*=FILE, got {item!r}")
        check_name(name, "run")
        files = out.setdefault(name, {})
        if variant in files:
            raise InputError(f"--run {name}:{variant} given twice ({files[variant]} and {path})")
        files[variant] = path
        if "*" in files and len(files) > 1:
            raise InputError(f"--run {name}: give either NAME:*=FILE (one file for every variant) or one file per variant,"
                             f" not both (got {', '.join(sorted(files))})")
    return out


def list_metrics(value: bool) -> None:
    """``--list-metrics``: print the metric registry and exit 0."""
    if value:
        from ..metrics import describe_metrics

        typer.echo(describe_metrics())
        raise typer.Exit(0)


def cutoffs_text(ks: tuple[int, ...]) -> str:
    """Default cutoffs as the ``--k`` option writes them: ``(3, 5, 10)`` -> ``"3,5,10"``."""
    return ",".join(map(str, ks))


def metric_help() -> str:
    """The help text of ``--metric``: the known metric names (rich markup escaped) and the accepted spellings."""
    from ..metrics import known_metrics

    known = known_metrics().replace("[", "\\[")  # rich reads "[@k]" as markup unless escaped
    return (
        "Metric (repeatable), e.g. -m ndcg@3 -m P@5 -m ndcg_at_10 -m RR; overrides --k. Known: "
        f"{known}. ir_measures, MTEB, ranx and trec_eval spellings are accepted (--list-metrics)."
    )


# ---------------------------------------------------------------------------------- encoder options
# Every encoder option of `embed` and `evaluate` comes from the fields of EncoderSettings (flag names,
# type, default, help in their metadata), and encoder_settings_from_options turns the values back
# into one EncoderSettings, so both commands find the same store.
DEPRECATED_DTYPE_HELP = "Deprecated alias of --store-dtype (the stored page-vector dtype); removed in the next release."


def field_param(f) -> tuple[str, Any, Callable[[], Any]]:
    """``(name, annotation, option factory)`` of a dataclass field that describes its option in its
    ``metadata`` (``flags``, ``type``, ``choices``, ``negative``, ``help``; see
    :meth:`vdr.encode.settings.EncoderSettings.cli_fields`, :func:`vdr.ingest.pdfdir.cli_field`);
    the default is the field's, a choice becomes a ``str`` Enum (typer lists its values)."""
    from enum import Enum

    md = f.metadata
    ann: Any = md["type"]
    default = f.default
    if md["choices"]:
        ann = Enum("".join(w.title() for w in f.name.split("_")), {v: v for v in md["choices"]}, type=str)
        default = None if default is None else ann(default)
    flags = md["flags"] if md["negative"] is None else (f"{md['flags'][0]}/{md['negative']}",)
    panel = panel_of(md.get("panel"))
    return f.name, (Optional[ann] if f.default is None else ann), lambda: typer.Option(default, *flags, help=md["help"], rich_help_panel=panel)


def panel_of(name: str | None) -> str | None:
    """The ``--help`` panel title ``common.PANEL_<NAME>`` of a field's ``panel`` metadata
    (``"encoder"``, ``"run"``, ``"inputs"``, ``"rendering"``), or ``None`` (typer's default panel)."""
    return None if name is None else getattr(common, f"PANEL_{name.upper()}", None)


def _encoder_params() -> list[tuple[str, Any, Callable[[], Any]]]:
    """The parameters of every command-line field of :class:`~vdr.encode.settings.EncoderSettings`
    (:meth:`~vdr.encode.settings.EncoderSettings.cli_fields`), then the deprecated ``--dtype``."""
    from enum import Enum

    from ..encode.settings import STORE_DTYPES, EncoderSettings

    store = Enum("StoreDtype", {v: v for v in STORE_DTYPES}, type=str)
    return [*(field_param(f) for f in EncoderSettings.cli_fields()),
            ("dtype", Optional[store], lambda: typer.Option(None, "--dtype", help=DEPRECATED_DTYPE_HELP, rich_help_panel=panel_of("encoder")))]


ENCODER_PARAMS = _encoder_params()


def encoder_settings_from_options(model: str | None, options: dict):
    """The :class:`~vdr.encode.settings.EncoderSettings` of the encoder options of ``vdr embed`` and
    ``vdr evaluate`` (``options``: the command's values by parameter name; the parameters of
    :data:`ENCODER_PARAMS` are read); ``None`` when no ``--model`` was given. The deprecated
    ``--dtype`` is the stored dtype (a DeprecationWarning is printed).

    Raises:
        InputError: an invalid option value (the setting is named), or ``--dtype`` and
            ``--store-dtype`` with different values.
    """
    if model is None:
        return None
    from ..encode.settings import EncoderSettings

    values = {name: options[name] for name, _, _ in ENCODER_PARAMS}
    if values["dtype"] is not None and values["store_dtype"] == EncoderSettings.__dataclass_fields__["store_dtype"].default:
        values["store_dtype"] = None  # --dtype alone: it gives the stored dtype
    with warnings.catch_warnings():
        warnings.simplefilter("always", DeprecationWarning)  # shown on the command line, not only in __main__
        return EncoderSettings.from_options(model, dtype_means="store_dtype", **values)


def signature_from(params: list[tuple[str, Any, Callable[[], Any]]]):
    """Decorator: give a ``**options`` command the signature ``params`` ((name, annotation, typer
    Argument/Option factory), in ``--help`` order), which typer reads through ``inspect.signature``."""

    def decorate(func):
        func.__signature__ = inspect.Signature([
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=factory(), annotation=ann)
            for name, ann, factory in params
        ])
        func.__annotations__ = {name: ann for name, ann, _ in params} | {"return": None}
        return func

    return decorate
