"""Commands that build corpora: ``vdr ingest``, ``vdr embed`` and the ``vdr convert`` group (public
passage benchmarks into vdr's layout, :mod:`vdr.ingest.convert`)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from . import common
from .common import (
    HistoryOrder, PassageFormat,
)
from ..errors import InputError
from ..progress import counted
from ..text import DEFAULT_MAX_QUERY_TOKENS
from ..ingest.convert import (
    ConcatSpec, convert_beir, convert_msmarco, convert_qrecc, convert_topiocqa, default_specs,
)
from ..io.turn_ids import DEFAULT_ID_SCHEME, ID_SCHEMES, SPLITS
from .params import (
    ENCODER_PARAMS, encoder_settings_from_options, field_param, signature_from,
)


def _ingest_params() -> list[tuple[str, Any, Callable[[], Any]]]:
    """``vdr ingest``'s parameters in ``--help`` order: the PDF options from the fields of
    :class:`~vdr.ingest.pdfdir.IngestOptions`, the ViDoRe ones from
    :class:`~vdr.ingest.vidore.VidoreOptions`, and the command's own."""
    from ..ingest import IngestOptions, VidoreOptions

    p = {name: (name, ann, factory) for name, ann, factory in map(field_param, [*IngestOptions.cli_fields(), *VidoreOptions.cli_fields()])}
    own = {
        "pdf_dir": (Optional[Path], lambda: typer.Argument(None, help="Folder searched recursively for PDFs (omit with --vidore).")),
        "out": (Path, lambda: typer.Option(..., "--out", "-o", rich_help_panel=common.PANEL_RUN, help="Corpus folder to write (pages.jsonl, images/, ingest-report.json).")),
        "password_file": (Optional[Path], lambda: typer.Option(None, "--password-file", rich_help_panel=common.PANEL_INPUTS, help='JSON map {"relative/path.pdf": "password"}.')),
        "strict": (bool, lambda: typer.Option(False, "--strict/--no-strict", rich_help_panel=common.PANEL_RUN, help="Exit with status 1 when any document failed or was partial.")),
        "vidore": (Optional[str], lambda: typer.Option(None, "--vidore", rich_help_panel=common.PANEL_INPUTS, help="Ingest a ViDoRe dataset instead of PDFs: a hub name (vidore/vidore_v3_hr), an MTEB task name"
                                                       " (Vidore3HrRetrieval) or a local folder (hub snapshot or save_to_disk).")),
        "quiet": (bool, common.OPTIONS["quiet"]),
        "passages": (Optional[Path], lambda: typer.Option(None, "--passages", rich_help_panel=common.PANEL_INPUTS, help="Ingest a text-passage collection (file or folder) instead of PDFs.")),
        "passage_format": (PassageFormat, lambda: typer.Option(PassageFormat.auto, "--format", rich_help_panel=common.PANEL_INPUTS, help="--passages format: auto, beir, tsv (DPR/TopiOCQA), msmarco, jsonl (Pyserini), hf.")),
        "overwrite": (bool, lambda: typer.Option(False, "--overwrite/--no-overwrite", rich_help_panel=common.PANEL_RUN, help="Write into an --out folder that is a results folder or holds other files (they stay); a corpus folder of the same kind needs no flag (unchanged PDFs are reused).")),
    }
    p.update({name: (name, *v) for name, v in own.items()})
    order = ("pdf_dir", "out", "dpi", "max_pixels", "rasterizer", "ocr", "ocr_lang", "password", "password_file", "workers", "timeout",
             "strict", "vidore", "revision", "language", "split", "quiet", "passages", "passage_format", "overwrite")
    return [p[name] for name in order]


@common.command("ingest")
@signature_from(_ingest_params())
def ingest_command(**o: Any) -> None:
    """Turn a folder of PDFs, or a ViDoRe dataset, into a page corpus (see vdr.ingest / vdr.ingest_vidore);
    or a passage collection into a passage corpus (see vdr.ingest.passages). --out must be missing, empty or a
    corpus folder of the same kind (see vdr.ingest.target)."""
    from .. import distributed as D

    if not D.is_main():
        return
    from ..ingest import IngestOptions, VidoreOptions, ingest_pdfs, ingest_vidore
    from ..ingest.pdfdir import load_password_map
    from ..ingest.target import check_corpus_out

    pdf_dir, out, vidore, passages, password_file = (o[k] for k in ("pdf_dir", "out", "vidore", "passages", "password_file"))
    ocr, progress = o["ocr"], not o["quiet"]  # choice values arrive as plain str (common.install)

    if sum(x is not None for x in (pdf_dir, vidore, passages)) > 1:
        raise InputError("give one of PDF_DIR, --vidore or --passages" if passages is not None
                         else "give either PDF_DIR or --vidore DATASET, not both")
    inputs = [p for p in (pdf_dir, passages, vidore, password_file) if p is not None]
    check_corpus_out(out, "passage" if passages is not None else "page", overwrite=o["overwrite"], inputs=inputs)
    if passages is not None:
        from ..ingest.passages import ingest_passages

        m = ingest_passages(passages, out, format=o["passage_format"]).manifest
        typer.echo(f"{counted(m['counts']['passages'], 'passage')} ({m['format']}, quoting {m['quoting']}; {m['counts']['empty']} empty)"
                   f" -> {out}")
        if m["empty"]:
            typer.echo(f"note: empty passages (first {len(m['empty'])}): {', '.join(m['empty'])}")
        return
    if vidore is not None:
        r = ingest_vidore(vidore, out, options=VidoreOptions(**{f.name: o[f.name] for f in VidoreOptions.cli_fields()},
                                                             ocr="never" if ocr == "auto" else ocr, ocr_lang=o["ocr_lang"], progress=progress))
        langs = ", ".join(f"{k} {v}" for k, v in r.queries_per_language.items())
        typer.echo(f"{r.dataset}@{r.revision}: {counted(r.pages, 'page')}, {counted(r.queries, 'query')} pooled ({langs}),"
                   f" {counted(r.qrels, 'judgment')} -> {out}")
        for note in r.notes:
            typer.echo(f"note: {note}")
        return
    if pdf_dir is None:
        raise InputError("give a folder of PDFs (PDF_DIR) or --vidore DATASET")
    if o["password"] is not None and password_file is not None:
        raise InputError("give either --password or --password-file, not both")
    values = {f.name: o[f.name] for f in IngestOptions.cli_fields()}
    if password_file is not None:
        values["password"] = load_password_map(password_file)
    r = ingest_pdfs(pdf_dir, out, options=IngestOptions(**values, progress=progress))
    c = r.counts()
    skipped = sum(d.skipped for d in r.documents)
    reused = f", {skipped} unchanged since the last run" if skipped else ""
    typer.echo(f"{counted(len(r.documents), 'PDF')}: {c['ok']} ok, {c['partial']} partial, {c['failed']} failed{reused};"
               f" {counted(r.pages, 'page')} -> {out}")
    ocr_done = r.extra.get("ocr_summary") or {}
    if ocr_done.get("ocr"):
        typer.echo(f"OCR: {counted(ocr_done['ocr'], 'page')} ({ocr_done['no_text_layer']} without a text layer, {ocr_done['thin_text_layer']}"
                   f" whose text layer is a thin stamp, page number or footer; {ocr_done['turned']} turned upright first);"
                   " per-page decisions in ingest-report.json")
    for d in r.documents:
        if d.status != "ok":
            typer.echo(f"{d.status}: {d.source}: {d.reason}", err=True)
    if o["strict"] and not r.ok:
        raise typer.Exit(code=1)


_EMBED_PARAMS: list[tuple[str, Any, Callable[[], Any]]] = [
    ("corpus_dir", Path, lambda: typer.Argument(..., help="Corpus folder (pages.jsonl + images/), as written by `vdr ingest`.")),
    ("model", str, lambda: typer.Option(..., "--model", rich_help_panel=common.PANEL_ENCODER, help="Hub name (e.g. vidore/colqwen2.5-v0.2) or local checkpoint folder.")),
    ("store", Path, lambda: typer.Option(..., "--store", rich_help_panel=common.PANEL_ENCODER, help="Embedding store folder (vectors go to a sub-folder per model/page settings).")),
    *ENCODER_PARAMS,
    ("json_out", Optional[Path], lambda: typer.Option(None, "--json", rich_help_panel=common.PANEL_RUN, help="Write the embed report as JSON.")),
    ("quiet", bool, common.OPTIONS["quiet"]),
]


@common.command("embed")
@signature_from(_EMBED_PARAMS)
def embed_command(**o: Any) -> None:
    """Encode a corpus' page images into a resumable embedding store (see vdr.embed)."""
    import json

    from .. import distributed as D
    from ..encode import embed
    from ..io.atomic import write_text_atomic

    corpus_dir, store, json_out, quiet = o["corpus_dir"], o["store"], o["json_out"], o["quiet"]
    settings = encoder_settings_from_options(o["model"], o)
    r = embed(corpus_dir, settings, store, progress=not quiet)
    if not D.is_main():
        return
    t = r.tokens_per_page
    dup = f", {r.copied} copied from duplicate pages" if r.copied else ""
    typer.echo(f"{counted(r.pages, 'page')}: {r.encoded} encoded, {r.reused} reused{dup}, {r.removed} removed"
               f" ({r.duplicates} duplicate page images in the corpus); tokens/page {t['min']}-{t['max']} (mean {t['mean']});"
               f" {r.pages_per_second} pages/s; {r.seconds} s -> {r.store}")
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(r.to_json(), indent=1) + "\n")
        typer.echo(f"wrote {json_out}")


# --------------------------------------------------------------------------------------------- CLI

convert_app = typer.Typer(help="Convert public passage benchmarks (TopiOCQA, QReCC, MS MARCO, BEIR) into vdr's layout.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)

_ORDER = typer.Option(HistoryOrder("oldest-first"), "--history-order", help="Concatenated history: oldest-first (h1..hn q) or newest-first (q hn..h1).")
_SEP = typer.Option(" ", "--history-separator", help="Separator between concatenated pieces.")
_BUDGET = typer.Option(DEFAULT_MAX_QUERY_TOKENS, "--history-budget", help="Whitespace-token budget of concatenations (oldest turns dropped first, question kept); 0: none.")
IdScheme = Enum("IdScheme", {s: s for s in ID_SCHEMES}, type=str)
TopiocqaSplit = Enum("TopiocqaSplit", {s: s for s in SPLITS["topiocqa"]}, type=str)
QreccSplit = Enum("QreccSplit", {s: s for s in SPLITS["qrecc"]}, type=str)
_SCHEME = typer.Option(IdScheme(DEFAULT_ID_SCHEME), "--id-scheme",
                       help="Query ids: convsearch (ConvSearch-R1's, e.g. topiocqa-dev_<conv>_<turn>, QReCC-Test_<conv>_<turn>) or"
                            " conv_turn (<conv>_<turn>). vdr evaluate maps files written in the other scheme.")


def _specs(order: str, separator: str, budget: int) -> list[ConcatSpec]:
    return default_specs(order, separator, budget if budget > 0 else None)


def _value(choice: Any) -> Any:
    return getattr(choice, "value", choice)


def _echo(report: dict, out: Path) -> None:
    c = report["counts"]
    dropped = (f"; {counted(c['dropped_without_gold'], 'turn')} without gold dropped (kept in history)"
               if "dropped_without_gold" in c else "")
    typer.echo(f"{counted(c['queries'], 'query')} -> {out}{dropped}")
    s = report.get("id_scheme")
    if s:
        typer.echo(f"query ids: {s['format']} ({s['scheme']}; split {s['split']} from {s['split_from']})")
    if "history_from_context" in c:
        typer.echo(f"history: {c['history_from_context']} from Context, {c['history_from_records']} from earlier records"
                   + (f"; {c['history_disagreements']['count']} disagree (see conversion.json)" if c["history_disagreements"]["count"] else ""))
    g = report.get("gold_without_turn", {})
    if g.get("count"):
        typer.echo(f"note: {counted(g['count'], 'gold entry', 'gold entries')} without a dataset turn, e.g. {', '.join(g['examples'][:5])}")
    if report.get("evaluate"):
        typer.echo("evaluate with: " + report["evaluate"])


@convert_app.command("topiocqa")
def topiocqa_command(
    dataset: Path = typer.Option(..., "--dataset", help="TopiOCQA dataset JSON (e.g. topiocqa_dev.json; history from each record's Context)."),
    gold: Path = typer.Option(..., "--gold", help="Gold passages: DPR JSON (positive_ctxs[].passage_id, conv_id, turn_id) or TREC qrels (ConvSearch-R1's dev.trec)."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder to write."),
    collection: Optional[Path] = typer.Option(None, "--collection", help="full_wiki_segments.tsv (omit to reuse a corpus ingested elsewhere)."),
    order: HistoryOrder = _ORDER, separator: str = _SEP, budget: int = _BUDGET,
    id_scheme: IdScheme = _SCHEME,
    split: Optional[TopiocqaSplit] = typer.Option(None, "--split", help="The split named in the ids (default: the gold ids' prefix, else the dataset file name, else dev)."),
) -> None:
    """TopiOCQA -> corpus, queries.jsonl (with history), qrels.tsv, variants/."""
    _echo(convert_topiocqa(dataset, gold, out, collection=collection, specs=_specs(order, separator, budget),
                           id_scheme=_value(id_scheme), split=_value(split)), out)


@convert_app.command("qrecc")
def qrecc_command(
    dataset: Path = typer.Option(..., "--dataset", help="QReCC dataset JSON (qrecc_test.json, or scai-qrecc21-test-turns.json as ConvSearch-R1 reads it)."),
    qrels: Path = typer.Option(..., "--qrels", help="TREC qrels with query ids QReCC-Test_<conv>_<turn> (ConvSearch-R1's test.trec) or <conv>_<turn>."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder to write."),
    collection: Optional[Path] = typer.Option(None, "--collection", help="Passage collection (Pyserini jsonl file or folder, ...)."),
    collection_format: PassageFormat = typer.Option(PassageFormat.auto, "--collection-format", help="Collection format (auto: by file name and content)."),
    order: HistoryOrder = _ORDER, separator: str = _SEP, budget: int = _BUDGET,
    id_scheme: IdScheme = _SCHEME,
    split: Optional[QreccSplit] = typer.Option(None, "--split", help="The split named in the ids (default: the qrels ids' prefix, else the dataset file name, else test)."),
) -> None:
    """QReCC -> corpus, queries.jsonl (with history), qrels.tsv, variants/ (human rewrite included)."""
    _echo(convert_qrecc(dataset, qrels, out, collection=collection, collection_format=collection_format,
                        specs=_specs(order, separator, budget), id_scheme=_value(id_scheme), split=_value(split)), out)


@convert_app.command("msmarco")
def msmarco_command(
    queries: Path = typer.Option(..., "--queries", help="queries.*.tsv (qid<TAB>text)."),
    qrels: Path = typer.Option(..., "--qrels", help="qrels (MS MARCO 'qid 0 pid grade', TREC or BEIR TSV)."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder to write."),
    collection: Optional[Path] = typer.Option(None, "--collection", help="collection.tsv (pid<TAB>text, no quoting)."),
) -> None:
    """MS MARCO passage ranking -> corpus, queries.jsonl, qrels.tsv."""
    _echo(convert_msmarco(queries, qrels, out, collection=collection), out)


@convert_app.command("beir")
def beir_command(
    beir_dir: Path = typer.Argument(..., help="BEIR dataset folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv)."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder to write."),
    split: str = typer.Option("test", "--split", help="Qrels split."),
) -> None:
    """A BEIR dataset -> corpus, queries.jsonl, qrels.tsv."""
    _echo(convert_beir(beir_dir, out, split=split), out)
