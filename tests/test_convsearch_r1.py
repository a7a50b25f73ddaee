"""ConvSearch-R1's files through ``vdr convert`` and ``vdr evaluate`` (issue 24.1).

A small TopiOCQA and a small QReCC dataset are laid out as their releases and ConvSearch-R1's
preprocessing (BeastyZ/ConvSearch-R1: ``preprocess/topiocqa/preprocess.py``,
``preprocess/qrecc/preprocess_v3.py``, ``src/infer/infer.py``, ``src/eval/get_metrics_using_bm25.py``)
write them:

* TopiOCQA: the release's ``topiocqa_dev.json`` (records with ``Conversation_no``, ``Turn_no``,
  ``Question``, ``Answer``, ``Topic``, ``Topic_section``, ``Context`` -- earlier questions and answers
  alternating --, ``Rationale``, ``is_nq``), the DPR gold file ``data/retriever/all_history/dev.json``
  (``conv_id``, ``turn_id``, ``positive_ctxs[].passage_id``), ``full_wiki_segments.tsv``
  (``id<TAB>text<TAB>title``, titles ``Topic [SEP] Section``); ConvSearch-R1's
  ``data/topiocqa/collection/full_wiki_segments.jsonl`` (``{"id", "contents": title + " " + text}``,
  ``ensure_ascii=False``), ``data/topiocqa/dev.json`` (JSON lines: ``qid`` =
  ``topiocqa-dev_<conv>_<turn>``, ``question``, ``positive_ctxs``, ``context``, ...),
  ``data/topiocqa/dev.trec`` (``qid 0 pid 1``, the first positive passage) and the rewriter's
  output (each record of ``dev.json`` plus ``reasoning_content`` and ``rewrite``, written by
  ``jsonlines``: ``ensure_ascii=False``, ``", "``/``": "`` separators, in the order the workers finish).
* QReCC: SCAI-QReCC-21's ``scai-qrecc21-test-turns.json`` (the file ConvSearch-R1 reads:
  ``Conversation_no``, ``Turn_no``, ``Conversation_source``, ``Question``, ``Truth_rewrite``,
  ``Truth_answer``, ``Truth_passages`` with the raw passage ids; no ``Context``), ConvSearch-R1's
  renumbered ``qrecc_collection.jsonl`` (``{"id": "0", "contents"}``, commoncrawl first),
  ``data/qrecc/test.trec`` (``QReCC-Test_<conv>_<turn> 0 pid 1`` per truth passage),
  ``data/qrecc/test_v3.json`` (turns with truth passages; ``context`` built from the earlier records,
  an empty answer written ``UNANSWERABLE``) and the rewriter's output over it.

The release JSON files are written with the field names, types and nesting of the releases; their
indentation is not known here and matters to no reader (ConvSearch-R1 and vdr both parse JSON).
The files ConvSearch-R1 writes are byte-for-byte its writers' output (formats as facts: the
separators, ``ensure_ascii`` and line layout of each call).

The core tests check the id schemes, the mapping of files of the other scheme (both directions),
its ambiguity errors, history from ``Context`` and the disagreement warning. The live tests (slow
tier; they skip, with the reason, without Pyserini or Java 21+) build the Lucene index and run the
search exactly as ConvSearch-R1's ``create_index.sh`` and ``get_metrics_using_bm25.py`` do, score the
run with pytrec_eval, and check that the commands of docs/text-benchmarks.md (``vdr convert`` then ``vdr evaluate
--bm25-preset ... --bm25-analyzer lucene --protocol convsearch --rewrites NAME=FILE``) give the same
MRR@3, NDCG@3, R@10 and R@100, per query.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from vdr.cli import main
from vdr.errors import AlignmentError, InputError, VdrWarning
from vdr.io.formats import load_qrels, load_queries
from vdr.io.turn_ids import map_turn_ids, parse_turn_id, remap_qrels, turn_id
from vdr.types import Qrels, Query

# --------------------------------------------------------------------------------------------- TopiOCQA data

#: full_wiki_segments.tsv rows: (id, title "Topic [SEP] Section", text)
WIKI = [
    ("1", "Eiffel Tower [SEP] Introduction", "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France."),
    ("2", "Eiffel Tower [SEP] Design", "The tower was designed by engineers of the company of Gustave Eiffel; Maurice Koechlin and "
                                       "Emile Nouguier drew the first sketches in 1884."),
    ("3", "Eiffel Tower [SEP] History", "Construction began in January 1887 and the tower was completed in March 1889, two years, "
                                        "two months and five days later."),
    ("4", "Eiffel Tower [SEP] Dimensions", "The tower is 330 metres tall, about the same height as an 81-storey building, and was "
                                           "the tallest man-made structure in the world for 41 years."),
    ("5", "Exposition Universelle (1889) [SEP] Introduction", "The Exposition Universelle of 1889 was a world's fair held in Paris "
                                                              "to celebrate the centennial of the storming of the Bastille; the "
                                                              "Eiffel Tower was built as its entrance arch."),
    ("6", "Gustave Eiffel [SEP] Introduction", "Gustave Eiffel was a French civil engineer whose company built bridges and "
                                               "railway viaducts across Europe."),
    ("7", "Gustave Eiffel [SEP] Works", "Besides the tower, Eiffel's firm built the internal iron frame of the Statue of Liberty "
                                        "and the Garabit viaduct."),
    ("8", "Statue of Liberty [SEP] Introduction", "The Statue of Liberty is a colossal copper statue on Liberty Island in New York "
                                                  "Harbor, a gift from the people of France."),
    ("9", "Champ de Mars [SEP] Introduction", "The Champ de Mars is a large public green space in Paris between the Eiffel Tower "
                                              "and the Ecole Militaire."),
    ("10", "Louvre [SEP] Introduction", "The Louvre is the world's largest art museum and a historic monument in Paris; about "
                                        "38,000 objects are exhibited."),
    ("11", "Louvre [SEP] Collection", "The museum's most famous painting is the Mona Lisa, which hangs in the Salle des Etats "
                                      "behind protective glass."),
    ("12", "Louvre [SEP] History", "The Louvre Palace began as a fortress built in the late 12th century under Philip II; it "
                                   "opened as a museum in 1793."),
    ("13", "Mona Lisa [SEP] Introduction", "The Mona Lisa is a half-length portrait painting by the Italian artist Leonardo da "
                                           "Vinci, painted between 1503 and 1519."),
    ("14", "Mona Lisa [SEP] Theft", "On 21 August 1911 the painting was stolen from the Louvre by Vincenzo Peruggia; it was "
                                    "recovered in Florence two years later."),
    ("15", "Leonardo da Vinci [SEP] Introduction", "Leonardo da Vinci was an Italian polymath of the High Renaissance, active as a "
                                                   "painter, draughtsman, engineer and scientist."),
    ("16", "Great Barrier Reef [SEP] Introduction", "The Great Barrier Reef is the world's largest coral reef system, located in the "
                                                    "Coral Sea off the coast of Queensland, Australia."),
    ("17", "Great Barrier Reef [SEP] Threats", "Climate change causes mass coral bleaching when warming seas stress the corals; "
                                               "runoff and the crown-of-thorns starfish also threaten the reef."),
    ("18", "Great Barrier Reef [SEP] Tourism", "Tourism is an important economic activity: boat tours to the reef leave daily from "
                                               "Cairns and the Whitsunday Islands."),
    ("19", "Queensland [SEP] Introduction", "Queensland is a state in northeastern Australia; its capital is Brisbane."),
    ("20", "Coral bleaching [SEP] Introduction", "Coral bleaching happens when corals expel the algae living in their tissues and "
                                                 "turn white, usually because the water is too warm."),
    ("21", "Cairns [SEP] Introduction", "Cairns is a city in Queensland and a gateway for tourists visiting the Great Barrier Reef."),
    ("22", "Paris [SEP] Introduction", "Paris is the capital and most populous city of France, with museums such as the Louvre "
                                       "and landmarks such as the Eiffel Tower."),
    ("23", "Bastille [SEP] Introduction", "The Bastille was a fortress in Paris; its storming on 14 July 1789 started the French "
                                          "Revolution."),
    ("24", "Vincenzo Peruggia [SEP] Introduction", "Vincenzo Peruggia was an Italian handyman who hid in the Louvre overnight and "
                                                   "walked out with the Mona Lisa under his smock."),
    ("25", "Florence [SEP] Introduction", "Florence is the capital city of the Italian region of Tuscany and the birthplace of "
                                          "the Renaissance."),
    ("26", "Garabit viaduct [SEP] Introduction", "The Garabit viaduct is a railway arch bridge over the Truyere river in France, "
                                                 "designed by Gustave Eiffel and completed in 1884."),
    # passages naming the Eiffel Tower or the Louvre, so that some gold passages rank below 10 (R@10 < R@100)
    *((str(27 + i), title, text) for i, (title, text) in enumerate([
        ("Eiffel Tower [SEP] Lighting", "The Eiffel Tower sparkles with 20,000 light bulbs for five minutes every hour after dark."),
        ("Eiffel Tower [SEP] Tourism", "The Eiffel Tower is the most visited paid monument in the world, with about seven million "
                                       "visitors a year."),
        ("Eiffel Tower [SEP] Restaurants", "Two restaurants operate in the Eiffel Tower: Madame Brasserie and Le Jules Verne."),
        ("Eiffel Tower [SEP] Paint", "The Eiffel Tower is repainted every seven years; about 60 tonnes of paint are used."),
        ("Eiffel Tower [SEP] Radio", "Radio transmitters on the Eiffel Tower saved it from demolition when its permit expired in 1909."),
        ("Eiffel Tower [SEP] In popular culture", "Replicas of the Eiffel Tower stand in Las Vegas, Tokyo and Shenzhen."),
        ("Eiffel Tower [SEP] Elevators", "The lifts of the Eiffel Tower travel a combined 100,000 kilometres a year."),
        ("Louvre [SEP] Pyramid", "The glass pyramid in the courtyard of the Louvre, designed by I. M. Pei, opened in 1989."),
        ("Louvre [SEP] Visitors", "The Louvre welcomed nearly nine million visitors in 2023, making it the most visited museum."),
        ("Louvre [SEP] Departments", "The Louvre's collection is divided into eight curatorial departments, from Egyptian "
                                     "antiquities to paintings."),
        ("Louvre Abu Dhabi [SEP] Introduction", "The Louvre Abu Dhabi is an art museum that borrows the name of the Louvre under a "
                                                "thirty-year agreement."),
    ])),
]

#: conversations: (conv, [(question, answer, topic, section, gold passage id, ConvSearch-R1's rewrite)])
TOPIOCQA_CONVS = [
    (1, [("who designed the eiffel tower?", "Gustave Eiffel's company", "Eiffel Tower", "Design", "2",
          "Who designed the Eiffel Tower?"),
         ("when was it completed?", "in March 1889", "Eiffel Tower", "History", "3", "When was the Eiffel Tower completed?"),
         ("what event was it built for?", "the 1889 world's fair", "Exposition Universelle (1889)", "Introduction", "5",
          "What event was the Eiffel Tower built for?"),
         ("how tall is it?", "330 metres", "Eiffel Tower", "Dimensions", "4", "How tall is the Eiffel Tower?"),
         ("what else did the engineer build?", "the iron frame of the Statue of Liberty", "Gustave Eiffel", "Works", "7",
          "What else did Gustave Eiffel's company build besides the Eiffel Tower?")]),
    (2, [("what is the largest art museum in the world?", "the Louvre", "Louvre", "Introduction", "10",
          "What is the largest art museum in the world?"),
         ("which famous painting hangs there?", "the Mona Lisa", "Louvre", "Collection", "11",
          "Which famous painting hangs in the Louvre museum?"),
         ("who painted it?", "Leonardo da Vinci", "Mona Lisa", "Introduction", "13", "Who painted the Mona Lisa?"),
         ("was it ever stolen?", "yes, in 1911", "Mona Lisa", "Theft", "14", "Was the Mona Lisa ever stolen from the Louvre?")]),
    (3, [("where is the great barrier reef?", "off the coast of Queensland", "Great Barrier Reef", "Introduction", "16",
          "Where is the Great Barrier Reef?"),
         ("what threatens it?", "coral bleaching from warming seas", "Great Barrier Reef", "Threats", "17",
          "What threatens the Great Barrier Reef?"),
         ("can tourists visit it?", "UNANSWERABLE", "Great Barrier Reef", "Tourism", "18",
          "Can tourists visit the Great Barrier Reef by boat?")]),
]


def topiocqa_records() -> list[dict]:
    """The release's ``topiocqa_dev.json`` records (Context: the earlier questions and answers alternating)."""
    out = []
    for conv, turns in TOPIOCQA_CONVS:
        context: list[str] = []
        for no, (q, a, topic, section, pid, _) in enumerate(turns, start=1):
            out.append({"Conversation_no": conv, "Turn_no": no, "Question": q, "Answer": a, "Topic": topic, "Topic_section": section,
                        "Context": list(context), "Rationale": dict((w[0], w[2]) for w in WIKI)[pid].split(";")[0],
                        "is_nq": conv == 1 and no == 1})
            context += [q, a]
    return out


def topiocqa_gold() -> list[dict]:
    """The DPR retriever file ``data/retriever/all_history/dev.json`` (same order as the dataset)."""
    wiki = {pid: (title, text) for pid, title, text in WIKI}
    out = []
    for conv, turns in TOPIOCQA_CONVS:
        history: list[str] = []
        for no, (q, a, _, _, pid, _) in enumerate(turns, start=1):
            title, text = wiki[pid]
            out.append({"conv_id": conv, "turn_id": no, "question": " [SEP] ".join(history + [q]), "answers": [a],
                        "positive_ctxs": [{"title": title, "text": text, "score": 1000, "title_score": 1, "passage_id": pid}],
                        "negative_ctxs": [], "hard_negative_ctxs": []})
            history += [q, a]
    return out


def _tsv(rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, delimiter="\t", lineterminator="\n")
    w.writerow(["id", "text", "title"])
    for pid, title, text in rows:
        w.writerow([pid, text, title])
    return buf.getvalue()


def _jsonlines(records) -> str:
    """What ``jsonlines.open(path, "w").write(obj)`` writes: ``ensure_ascii=False``, default separators."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def lay_out_topiocqa(root: Path) -> dict[str, Path]:
    """The release files and ConvSearch-R1's files of the small TopiOCQA set under ``root``."""
    dl = root / "download" / "downloads" / "data"
    files = {"tsv": dl / "wikipedia_split" / "full_wiki_segments.tsv", "dataset": dl / "topiocqa_dataset" / "dev.json",
             "gold": dl / "retriever" / "all_history" / "dev.json", "collection": root / "data/topiocqa/collection/full_wiki_segments.jsonl",
             "eval": root / "data/topiocqa/dev.json", "qrels": root / "data/topiocqa/dev.trec", "rewrites": root / "output/topiocqa_rewrite.jsonl"}
    for p in files.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    files["tsv"].write_text(_tsv(WIKI), encoding="utf-8")
    records, gold = topiocqa_records(), topiocqa_gold()
    files["dataset"].write_text(json.dumps(records, indent=4), encoding="utf-8")
    files["gold"].write_text(json.dumps(gold, indent=4), encoding="utf-8")
    # ConvSearch-R1: the collection as Pyserini JsonCollection ({"id", "contents": title with [SEP] as a space + " " + text})
    files["collection"].write_text(_jsonlines({"id": pid, "contents": " ".join([" ".join(title.split(" [SEP] ")), text])}
                                              for pid, title, text in WIKI), encoding="utf-8")
    evals = [{"qid": f"topiocqa-dev_{g['conv_id']}_{g['turn_id']}", "question": d["Question"], "positive_ctxs": g["positive_ctxs"],
              "context": d["Context"], "conv_id": g["conv_id"], "turn_id": g["turn_id"], "topic": d["Topic"],
              "topic_section": d["Topic_section"]} for g, d in zip(gold, records)]
    files["eval"].write_text(_jsonlines(evals), encoding="utf-8")
    files["qrels"].write_text("".join(f"topiocqa-dev_{g['conv_id']}_{g['turn_id']} 0 {g['positive_ctxs'][0]['passage_id']} 1\n"
                                      for g in gold), encoding="utf-8")
    rewrites = {f"topiocqa-dev_{conv}_{no}": t[5] for conv, turns in TOPIOCQA_CONVS for no, t in enumerate(turns, start=1)}
    out = [dict(e, reasoning_content=f"The query refers to the context; resolve it. ({e['qid']})", rewrite=f" {rewrites[e['qid']]} ")
           for e in reversed(evals)]  # the workers' order, not the dataset's; the rewrite as extracted (surrounding spaces kept)
    files["rewrites"].write_text(_jsonlines(out), encoding="utf-8")
    return files


# --------------------------------------------------------------------------------------------- QReCC data

#: raw passages of passages.zip: (group, raw id, contents); ConvSearch-R1 numbers commoncrawl first, then wayback
QRECC_PASSAGES = [
    ("commoncrawl", "https://www.britannica.com/biography/William-Shakespeare_p0",
     "William Shakespeare was an English poet, playwright and actor, widely regarded as the greatest writer in the English language."),
    ("commoncrawl", "https://www.britannica.com/biography/William-Shakespeare_p1",
     "Shakespeare was baptised on 26 April 1564 in Stratford-upon-Avon; his birthday is traditionally observed on 23 April."),
    ("commoncrawl", "https://www.britannica.com/topic/Hamlet-by-Shakespeare_p0",
     "Hamlet, Prince of Denmark is a tragedy written by William Shakespeare sometime between 1599 and 1601."),
    ("commoncrawl", "https://en.wikipedia.org/wiki/Stratford-upon-Avon_p0",
     "Stratford-upon-Avon is a market town in Warwickshire, England, on the River Avon, known as the birthplace of Shakespeare."),
    ("commoncrawl", "https://en.wikipedia.org/wiki/Globe_Theatre_p0",
     "The Globe Theatre was a theatre in London associated with William Shakespeare, built in 1599 on the south bank of the Thames."),
    ("commoncrawl", "https://en.wikipedia.org/wiki/Globe_Theatre_p1",
     "The Globe was owned by actors who were shareholders in the Lord Chamberlain's Men, Shakespeare's playing company."),
    ("commoncrawl", "https://en.wikipedia.org/wiki/Globe_Theatre_p2", ""),
    ("commoncrawl", "https://en.wikipedia.org/wiki/Anne_Hathaway_(wife_of_Shakespeare)_p0",
     "Anne Hathaway was the wife of William Shakespeare; they married in 1582 when he was 18."),
    ("wayback", "http://web.archive.org/web/20191120id_/https://www.nationalgeographic.org/encyclopedia/photosynthesis_p0",
     "Photosynthesis is the process by which green plants use sunlight, water and carbon dioxide to create oxygen and energy in "
     "the form of sugar."),
    ("wayback", "http://web.archive.org/web/20191120id_/https://www.nationalgeographic.org/encyclopedia/photosynthesis_p1",
     "Most photosynthesis takes place in the leaves, inside organelles called chloroplasts."),
    ("wayback", "http://web.archive.org/web/20200101id_/https://www.britannica.com/science/chlorophyll_p0",
     "Chlorophyll is the green pigment found in plants, algae and cyanobacteria that absorbs light for photosynthesis."),
    ("wayback", "http://web.archive.org/web/20200101id_/https://www.britannica.com/science/chlorophyll_p1",
     "Chlorophyll absorbs mostly blue and red light and reflects green light, which is why leaves look green."),
    ("wayback", "http://web.archive.org/web/20200101id_/https://www.britannica.com/science/chlorophyll_p2",
     "Leaves appear green because chlorophyll reflects the green wavelengths of sunlight back to our eyes."),
    ("wayback", "http://web.archive.org/web/20200101id_/https://www.britannica.com/science/carotenoid_p0",
     "Carotenoids are yellow, orange and red pigments that become visible in autumn leaves when chlorophyll breaks down."),
    ("wayback", "http://web.archive.org/web/20200101id_/https://en.wikipedia.org/wiki/Cellular_respiration_p0",
     "Cellular respiration releases the energy stored in sugar, using oxygen and giving off carbon dioxide and water."),
    ("wayback", "http://web.archive.org/web/20200101id_/https://en.wikipedia.org/wiki/Thames_p0",
     "The River Thames flows through southern England, including London, to the North Sea."),
    # passages naming William Shakespeare, so that some gold passages rank below 10 (R@10 < R@100)
    *(("wayback", f"http://web.archive.org/web/20200101id_/https://www.shakespeare.org.uk/explore-shakespeare/{slug}_p0", text)
      for slug, text in [
          ("macbeth", "Macbeth is a tragedy by William Shakespeare about a Scottish general who murders the king."),
          ("romeo-juliet", "Romeo and Juliet, an early tragedy by William Shakespeare, tells of two young lovers in Verona."),
          ("sonnets", "William Shakespeare's 154 sonnets were first published together in 1609."),
          ("first-folio", "The First Folio, published in 1623, collected 36 plays of William Shakespeare seven years after his death."),
          ("king-lear", "King Lear is a tragedy written by William Shakespeare in which an old king divides his kingdom."),
          ("tempest", "The Tempest is thought to be one of the last plays William Shakespeare wrote alone."),
          ("othello", "Othello, by William Shakespeare, follows a Venetian general and his jealous ensign Iago."),
          ("twelfth-night", "Twelfth Night is a comedy by William Shakespeare written around 1601 for the end of the Christmas season."),
          ("new-place", "New Place was William Shakespeare's family home in Stratford, bought in 1597; he died there in 1616."),
          ("authorship", "Some writers have doubted that William Shakespeare of Stratford wrote the works attributed to him."),
          ("london-years", "William Shakespeare worked in London as an actor and writer with the company that became the King's Men."),
      ]),
]

#: SCAI-QReCC-21 test turns: (conv, source, [(question, truth rewrite, truth answer, [raw passage ids], ConvSearch-R1 rewrite)])
QRECC_CONVS = [
    (7, "trec", [
        ("who wrote hamlet?", "Who wrote Hamlet?", "William Shakespeare", [QRECC_PASSAGES[2][1]], "Who wrote the play Hamlet?"),
        ("when was he born?", "When was William Shakespeare born?", "He was baptised on 26 April 1564.", [QRECC_PASSAGES[1][1]],
         "When was William Shakespeare born?"),
        ("where?", "Where was William Shakespeare born?", "Stratford-upon-Avon", [QRECC_PASSAGES[3][1]],
         "Where was William Shakespeare born?"),
        ("what is the globe?", "What is the Globe Theatre?", "", [], "What is the Globe Theatre?"),
        ("who owned it?", "Who owned the Globe Theatre?", "actors of the Lord Chamberlain's Men", [QRECC_PASSAGES[5][1]],
         "Who owned Shakespeare's Globe Theatre in London?"),
    ]),
    (12, "quac", [
        ("what is photosynthesis?", "What is photosynthesis?", "the process by which plants turn light into sugar",
         [QRECC_PASSAGES[8][1]], "What is photosynthesis?"),
        ("what pigment does it need?", "What pigment does photosynthesis need?", "chlorophyll", [QRECC_PASSAGES[10][1]],
         "What pigment does photosynthesis in plants need?"),
        ("why is it green?", "Why is chlorophyll green?", "it reflects green light", [QRECC_PASSAGES[11][1], QRECC_PASSAGES[12][1]],
         "Why is the pigment chlorophyll green?"),
    ]),
]


def qrecc_turns() -> list[dict]:
    """``scai-qrecc21-test-turns.json`` records."""
    return [{"Conversation_no": conv, "Turn_no": no, "Conversation_source": src, "Question": q, "Truth_rewrite": rw,
             "Truth_answer": a, "Truth_passages": list(ps)}
            for conv, src, turns in QRECC_CONVS for no, (q, rw, a, ps, _) in enumerate(turns, start=1)]


def lay_out_qrecc(root: Path) -> dict[str, Path]:
    """The SCAI-QReCC-21 turns file and ConvSearch-R1's files of the small QReCC set under ``root``."""
    files = {"dataset": root / "download/qrecc/scai-qrecc21-test-turns.json", "collection": root / "data/qrecc/collection/qrecc_collection.jsonl",
             "eval": root / "data/qrecc/test_v3.json", "qrels": root / "data/qrecc/test.trec", "rewrites": root / "output/qrecc_rewrite.jsonl"}
    for p in files.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    turns = qrecc_turns()
    files["dataset"].write_text(json.dumps(turns, indent=4), encoding="utf-8")
    order = [p for p in QRECC_PASSAGES if p[0] == "commoncrawl"] + [p for p in QRECC_PASSAGES if p[0] != "commoncrawl"]
    raw2pid = {raw: str(i) for i, (_, raw, _) in enumerate(order)}
    files["collection"].write_text("".join(json.dumps({"id": raw2pid[raw], "contents": c}) + "\n" for _, raw, c in order), encoding="utf-8")
    files["qrels"].write_text("".join(f"QReCC-Test_{t['Conversation_no']}_{t['Turn_no']} 0 {raw2pid[r]} 1\n"
                                      for t in turns for r in t["Truth_passages"]), encoding="utf-8")
    evals, context, conv = [], [], None
    for t in turns:
        if t["Conversation_no"] != conv:
            conv, context = t["Conversation_no"], []
        rec = {"qid": f"QReCC-Test_{t['Conversation_no']}_{t['Turn_no']}", "source": t["Conversation_source"], "question": t["Question"],
               "truth_rewrite": t["Truth_rewrite"], "conv_no": t["Conversation_no"], "turn_no": t["Turn_no"], "context": list(context)}
        context += [t["Question"], t["Truth_answer"] or "UNANSWERABLE"]
        if t["Truth_passages"]:
            evals.append(dict(rec, truth_passages=[raw2pid[r] for r in t["Truth_passages"]]))
    files["eval"].write_text("".join(json.dumps(r) + "\n" for r in evals), encoding="utf-8")
    rewrites = {f"QReCC-Test_{conv}_{no}": t[4] for conv, _, ts in QRECC_CONVS for no, t in enumerate(ts, start=1)}
    files["rewrites"].write_text(_jsonlines(dict(e, reasoning_content="resolve the reference", rewrite=rewrites[e["qid"]])
                                            for e in evals[::2] + evals[1::2]), encoding="utf-8")
    return files


def _convert(argv: list[str], capsys) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VdrWarning)
        rc = main(argv)
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    return cap.out


def _evaluate(argv: list[str], capsys) -> tuple[dict, list[str]]:
    """``vdr evaluate`` through the CLI -> (results.json, the lines it printed on stderr: its warnings)."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        rc = main(argv + ["--permutations", "10", "--bootstrap", "10", "-q"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    out = Path(argv[argv.index("--out") + 1])
    return json.loads((out / "results.json").read_text()), cap.err.splitlines()


def _no_ties(values: dict) -> dict:
    return {m: v for m, v in values.items() if not m.startswith("ties@")}


def _per_query(doc: dict, backend: str, variant: str) -> dict:
    return next(r for r in doc["runs"] if r["backend"] == backend and r["variant"] == variant)["per_query"]


# --------------------------------------------------------------------------------------------- ids


def test_turn_ids_of_both_schemes():
    assert turn_id("12", 3, scheme="convsearch", benchmark="topiocqa", split="train") == "topiocqa-train_12_3"
    assert turn_id("12", 3, scheme="convsearch", benchmark="qrecc", split="train") == "QReCC-Train_12_3"
    assert parse_turn_id("topiocqa-dev_205_14") == ("topiocqa-dev", "205", "14")
    assert parse_turn_id("QReCC-Test_7_2") == ("QReCC-Test", "7", "2") and parse_turn_id("7_2") == (None, "7", "2")
    assert parse_turn_id("QRECC-Test_7_2") is None and parse_turn_id("doc7_2") is None and parse_turn_id("7_2_1") is None
    with pytest.raises(InputError, match="no ConvSearch-R1 id prefix for qrecc split 'dev'"):
        turn_id("1", 1, scheme="convsearch", benchmark="qrecc", split="dev")
    with pytest.raises(InputError, match="unknown id scheme 'bare'"):
        turn_id("1", 1, scheme="bare", benchmark="qrecc", split="test")


def test_mapping_both_directions_is_counted():
    m = map_turn_ids(["1_1", "2_3", "unrelated", "topiocqa-dev_9_9"], ["topiocqa-dev_1_1", "topiocqa-dev_2_3", "topiocqa-dev_9_9"],
                     what="qrels")
    assert m.mapped == {"1_1": "topiocqa-dev_1_1", "2_3": "topiocqa-dev_2_3"} and m.not_mapped == 1  # 'unrelated' stays
    assert m.to_json() == {"file": "qrels", "num_mapped": 2, "from": ["conv_turn"], "to": ["convsearch"], "prefixes": ["topiocqa-dev"],
                           "examples": {"1_1": "topiocqa-dev_1_1", "2_3": "topiocqa-dev_2_3"}, "num_not_mapped": 1}
    back = map_turn_ids(["QReCC-Test_7_2", "QReCC-Test_7_3", "7_4"], ["7_2", "7_3", "7_4"], what="run 'x'")
    assert back.mapped == {"QReCC-Test_7_2": "7_2", "QReCC-Test_7_3": "7_3"} and back.to_json()["from"] == ["convsearch"]
    assert not map_turn_ids(["7_2"], ["7_2"], what="same scheme")  # nothing to map: empty, false
    q, m = remap_qrels(Qrels({"1_1": {"p": 1}}), {"QReCC-Test_1_1"})
    assert q.to_dict() == {"QReCC-Test_1_1": {"p": 1}} and m.to_json()["num_mapped"] == 1


def test_ambiguous_mappings_are_errors_naming_the_ids():
    with pytest.raises(InputError, match=r"1 id\(s\) match more than one query id: '1_1' -> \['QReCC-Test_1_1', 'topiocqa-dev_1_1'\]"):
        map_turn_ids(["1_1"], ["topiocqa-dev_1_1", "QReCC-Test_1_1"], what="qrels")
    with pytest.raises(InputError, match=r"'topiocqa-dev_1_1' <- \['topiocqa-dev_1_1', '1_1'\]"):
        map_turn_ids(["topiocqa-dev_1_1", "1_1"], ["topiocqa-dev_1_1"], what="rewrite variant 'x'")
    with pytest.raises(InputError, match=r"ids of 2 ConvSearch-R1 splits \(topiocqa-dev, topiocqa-train\).*'topiocqa-dev_1_1'.*"
                                         r"'topiocqa-train_2_1'"):
        map_turn_ids(["topiocqa-dev_1_1", "topiocqa-train_2_1"], ["1_1", "2_1"], what="run 'x'")
    with pytest.raises(InputError, match=r"ids of 2 ConvSearch-R1 splits"):  # the same turn of two splits
        map_turn_ids(["topiocqa-dev_1_1", "topiocqa-train_1_1"], ["1_1"], what="qrels")


# --------------------------------------------------------------------------------------------- convert


def test_convert_topiocqa_writes_convsearch_ids_and_records_the_scheme(tmp_path, capsys):
    f = lay_out_topiocqa(tmp_path)
    out = _convert(["convert", "topiocqa", "--dataset", str(f["dataset"]), "--gold", str(f["gold"]), "--collection", str(f["tsv"]),
                    "--out", str(tmp_path / "conv")], capsys)
    assert "query ids: topiocqa-dev_<Conversation_no>_<Turn_no> (convsearch; split dev from the dataset file name)" in out
    assert "history: 12 from Context, 0 from earlier records" in out
    rep = json.loads((tmp_path / "conv" / "conversion.json").read_text())
    s = rep["id_scheme"]
    assert (s["scheme"], s["format"], s["split"], s["convsearch_prefix"]) == ("convsearch", "topiocqa-dev_<Conversation_no>_<Turn_no>",
                                                                             "dev", "topiocqa-dev")
    qs = load_queries(tmp_path / "conv" / "queries.jsonl")
    evals = [json.loads(x) for x in f["eval"].read_text().splitlines()]
    assert list(qs.ids()) == [e["qid"] for e in evals]  # ConvSearch-R1's ids, in its order
    assert load_qrels(tmp_path / "conv" / "qrels.tsv") == load_qrels(f["qrels"])  # its qrels, as they are
    for e in evals:  # its context, pair by pair
        q = qs[e["qid"]]
        assert q.text == e["question"] and [x for pair in q.turns() for x in pair] == e["context"]
    # the hint passes no variant with the built-in concat's texts
    assert "concat-q=" not in rep["evaluate"] and "--rewrites concat-qa=" in rep["evaluate"]
    assert "same_texts_as" in rep["variants"]["concat-q"] and "evaluate with: " + rep["evaluate"] in out
    assert "--bm25-preset topiocqa --bm25-analyzer lucene --protocol convsearch" in rep["evaluate"]


def test_convert_conv_turn_scheme_and_gold_given_as_trec(tmp_path, capsys):
    f = lay_out_topiocqa(tmp_path)
    _convert(["convert", "topiocqa", "--dataset", str(f["dataset"]), "--gold", str(f["qrels"]), "--out", str(tmp_path / "conv"),
              "--id-scheme", "conv_turn"], capsys)
    rep = json.loads((tmp_path / "conv" / "conversion.json").read_text())
    assert rep["id_scheme"]["scheme"] == "conv_turn" and rep["id_scheme"]["split_from"] == "the gold ids' prefix"
    assert list(load_queries(tmp_path / "conv" / "queries.jsonl").ids())[:3] == ["1_1", "1_2", "1_3"]
    assert load_qrels(tmp_path / "conv" / "qrels.tsv").to_dict()["3_3"] == {"18": 1}


def test_convsearch_r1s_own_processed_files_convert_alike(tmp_path, capsys):
    """``data/topiocqa/dev.json`` (lower-case fields, ``context``) with ``dev.trec`` as gold gives the
    queries and qrels of the release files."""
    f = lay_out_topiocqa(tmp_path)
    _convert(["convert", "topiocqa", "--dataset", str(f["dataset"]), "--gold", str(f["gold"]), "--out", str(tmp_path / "a")], capsys)
    _convert(["convert", "topiocqa", "--dataset", str(f["eval"]), "--gold", str(f["qrels"]), "--out", str(tmp_path / "b")], capsys)
    assert load_queries(tmp_path / "a" / "queries.jsonl").queries == load_queries(tmp_path / "b" / "queries.jsonl").queries
    assert load_qrels(tmp_path / "a" / "qrels.tsv") == load_qrels(tmp_path / "b" / "qrels.tsv")


def test_split_from_the_ids_and_contradictions(tmp_path, capsys):
    f = lay_out_qrecc(tmp_path)
    train_qrels = tmp_path / "train.trec"
    train_qrels.write_text(f["qrels"].read_text().replace("QReCC-Test", "QReCC-Train"), encoding="utf-8")
    _convert(["convert", "qrecc", "--dataset", str(f["dataset"]), "--qrels", str(train_qrels), "--out", str(tmp_path / "c")], capsys)
    assert next(iter(load_queries(tmp_path / "c" / "queries.jsonl").ids())) == "QReCC-Train_7_1"
    rc = main(["convert", "qrecc", "--dataset", str(f["dataset"]), "--qrels", str(train_qrels), "--out", str(tmp_path / "d"),
               "--split", "test"])
    assert rc == 2 and "--split test but the qrels ids are ConvSearch-R1's QReCC-Train_..." in capsys.readouterr().err
    mixed = tmp_path / "mixed.trec"
    mixed.write_text(f["qrels"].read_text() + "QReCC-Train_7_1 0 2 1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"mix ConvSearch-R1 splits \(QReCC-Test, QReCC-Train\)"):
        from vdr.ingest.convert import convert_qrecc

        convert_qrecc(f["dataset"], mixed, tmp_path / "e")
    with pytest.raises(InputError, match="prefixes of another benchmark"):
        from vdr.ingest.convert import convert_topiocqa

        convert_topiocqa(f["dataset"], f["qrels"], tmp_path / "f")


def test_qrecc_scai_turns_file_history_from_records(tmp_path, capsys):
    f = lay_out_qrecc(tmp_path)
    out = _convert(["convert", "qrecc", "--dataset", str(f["dataset"]), "--qrels", str(f["qrels"]), "--collection", str(f["collection"]),
                    "--out", str(tmp_path / "conv")], capsys)
    assert "query ids: QReCC-Test_<Conversation_no>_<Turn_no> (convsearch; split test from the qrels ids' prefix)" in out
    qs = load_queries(tmp_path / "conv" / "queries.jsonl")
    evals = [json.loads(x) for x in f["eval"].read_text().splitlines()]
    assert list(qs.ids()) == [e["qid"] for e in evals]  # the turns with truth passages: QReCC-Test_7_4 has none
    q = qs["QReCC-Test_7_5"]  # history from the earlier records, the turn without passages included
    assert q.history == ("who wrote hamlet?", "when was he born?", "where?", "what is the globe?")
    assert q.answers[-1] == "[no answer]" and evals[3]["context"][-1] == "UNANSWERABLE"  # vdr's placeholder; ConvSearch-R1's word
    assert [x for e in evals for x in e["context"][::2]] == [x for e in evals for x in qs[e["qid"]].history]
    human = {json.loads(x)["_id"]: json.loads(x)["text"] for x in (tmp_path / "conv/variants/human.jsonl").read_text().splitlines()}
    assert human == {e["qid"]: e["truth_rewrite"] for e in evals}


def test_history_from_context_for_a_file_of_evaluation_turns_only(tmp_path):
    from vdr.ingest.convert import convert_topiocqa

    only = [r for r in topiocqa_records() if r["Turn_no"] == 3]  # a filtered test set: no earlier record in the file
    (tmp_path / "only.json").write_text(json.dumps(only), encoding="utf-8")
    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps([g for g in topiocqa_gold() if g["turn_id"] == 3]), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error", VdrWarning)  # Context is there: no warning
        rep = convert_topiocqa(tmp_path / "only.json", gold, tmp_path / "c", id_scheme="conv_turn", split="dev")
    qs = load_queries(tmp_path / "c" / "queries.jsonl")
    assert qs["1_3"] == Query("what event was it built for?", ("who designed the eiffel tower?", "when was it completed?"),
                              ("Gustave Eiffel's company", "in March 1889"))
    assert rep["counts"]["history_from_context"] == 3 and rep["counts"]["history_incomplete"]["count"] == 0
    # without Context the same file has no history, and the converter says so
    (tmp_path / "bare.json").write_text(json.dumps([{k: v for k, v in r.items() if k != "Context"} for r in only]), encoding="utf-8")
    with pytest.warns(VdrWarning, match=r"3 turn\(s\) have no Context and not all earlier turns.*1_3, 2_3, 3_3"):
        rep = convert_topiocqa(tmp_path / "bare.json", gold, tmp_path / "d", id_scheme="conv_turn", split="dev")
    assert load_queries(tmp_path / "d" / "queries.jsonl")["1_3"].history == ()
    assert rep["counts"]["history_incomplete"] == {"count": 3, "examples": ["1_3", "2_3", "3_3"]}


def test_context_disagreeing_with_earlier_records_is_warned_naming_the_turns(tmp_path):
    from vdr.ingest.convert import convert_topiocqa

    f = lay_out_topiocqa(tmp_path)
    records = topiocqa_records()
    records[3]["Context"][2] = "when was it finished?"  # 1_4 remembers turn 2's question otherwise
    records[8]["Context"] = records[8]["Context"][:4]  # 2_4 lacks turn 3
    (tmp_path / "d.json").write_text(json.dumps(records), encoding="utf-8")
    with pytest.warns(VdrWarning, match=r"2 turn\(s\) carry a Context that differs from the earlier records.*"
                                        r"topiocqa-dev_1_4 \(turn 2\), topiocqa-dev_2_4 \(turn 3\)"):
        rep = convert_topiocqa(tmp_path / "d.json", f["gold"], tmp_path / "c")
    assert rep["counts"]["history_disagreements"] == {"count": 2, "examples": [{"query": "topiocqa-dev_1_4", "turns": [2]},
                                                                               {"query": "topiocqa-dev_2_4", "turns": [3]}]}
    qs = load_queries(tmp_path / "c" / "queries.jsonl")
    assert qs["topiocqa-dev_1_4"].history[1] == "when was it finished?"  # Context wins
    assert qs["topiocqa-dev_2_4"].history == ("what is the largest art museum in the world?", "which famous painting hangs there?")


def test_malformed_context_is_an_error(tmp_path):
    from vdr.ingest.convert import load_turns

    (tmp_path / "d.json").write_text(json.dumps([{"Conversation_no": 1, "Turn_no": 2, "Question": "q", "Context": ["q1"]}]))
    with pytest.raises(InputError, match=r"entry 1: 'Context' must alternate questions and answers .* got 1") as e:
        load_turns(tmp_path / "d.json")
    assert e.value.id == "1_2"


# --------------------------------------------------------------------------------------------- evaluate: mapping


def _lexical_run_as_convsearch_writes_it(doc_dir: Path, variant: str, target: Path, qid_of) -> None:
    """A run in the layout of ConvSearch-R1's ``get_metrics_using_bm25.py``: ``qid Q0 docid rank
    200-rank score`` (six fields; the fifth, an integer, is what its evaluation reads as the score)."""
    lines = []
    for ln in (doc_dir / "runs" / f"lexical.{variant}.trec").read_text().splitlines():
        q, _, d, rank, score, _ = ln.split()
        lines.append(f"{qid_of(q)} Q0 {d} {rank} {-int(rank) + 200} {score}\n")
    target.write_text("".join(lines), encoding="utf-8")


def test_files_of_the_other_scheme_are_mapped_and_recorded(tmp_path, capsys):
    """ConvSearch-R1's rewrite file, qrels and run against a ``conv_turn`` conversion give the values
    of the ``convsearch`` conversion; the mapping is recorded in results.json; and the reverse
    direction (``<conv>_<turn>`` files against ConvSearch-R1's ids) maps too."""
    f = lay_out_topiocqa(tmp_path)
    lex = ["--backend", "lexical", "--bm25-preset", "topiocqa", "--protocol", "convsearch"]
    _convert(["convert", "topiocqa", "--dataset", str(f["dataset"]), "--gold", str(f["gold"]), "--collection", str(f["tsv"]),
              "--out", str(tmp_path / "cs")], capsys)
    ref, notes = _evaluate(["evaluate", str(tmp_path / "cs"), *lex, "--rewrites", f"r1={f['rewrites']}", "--out", str(tmp_path / "ref")],
                           capsys)
    assert "id_mapping" not in ref["config"] and not any("mapped" in n for n in notes)  # same scheme: nothing mapped
    run, run0 = tmp_path / "r1.trec", tmp_path / "original.trec"
    _lexical_run_as_convsearch_writes_it(tmp_path / "ref", "r1", run, lambda q: q)
    _lexical_run_as_convsearch_writes_it(tmp_path / "ref", "original", run0, lambda q: q)

    _convert(["convert", "topiocqa", "--dataset", str(f["dataset"]), "--gold", str(f["gold"]), "--collection", str(f["tsv"]),
              "--out", str(tmp_path / "ct"), "--id-scheme", "conv_turn"], capsys)
    doc, notes = _evaluate(["evaluate", str(tmp_path / "ct"), *lex, "--qrels", str(f["qrels"]), "--rewrites", f"r1={f['rewrites']}",
                            "--run", f"theirs={run0}", "--run", f"theirs:r1={run}", "--out", str(tmp_path / "res")], capsys)
    m = doc["config"]["id_mapping"]
    assert m["qrels"]["num_mapped"] == 12 and m["qrels"]["from"] == ["convsearch"] and m["qrels"]["prefixes"] == ["topiocqa-dev"]
    assert m["rewrites"]["r1"]["num_mapped"] == 12 and m["rewrites"]["r1"]["examples"]["topiocqa-dev_3_3"] == "3_3"
    searches = doc["backend_reports"]["theirs"]["searches"]
    assert searches["r1"]["id_mapping"]["num_mapped"] == 12 and searches["r1"]["num_queries_missing"] == 0
    assert any("rewrite variant 'r1': 12 query id(s) mapped from the convsearch id scheme" in n for n in notes)
    assert any("qrels: 12 query id(s) mapped" in n for n in notes) and any("run 'theirs': 12 query id(s) mapped" in n for n in notes)
    to_ct = {q: f"{parse_turn_id(q).conv}_{parse_turn_id(q).turn}" for q in _per_query(ref, "lexical", "r1")}
    assert {to_ct[q]: v for q, v in _per_query(ref, "lexical", "r1").items()} == _per_query(doc, "lexical", "r1")
    # the run file read back gives the values of the run it was written from (but ties@k: its scores are 200 - rank)
    assert {to_ct[q]: _no_ties(v) for q, v in _per_query(ref, "lexical", "r1").items()} == \
        {q: _no_ties(v) for q, v in _per_query(doc, "theirs", "r1").items()}
    assert {to_ct[q]: v for q, v in _per_query(ref, "lexical", "original").items()} == _per_query(doc, "lexical", "original")
    assert {to_ct[q]: _no_ties(v) for q, v in _per_query(ref, "lexical", "original").items()} == \
        {q: _no_ties(v) for q, v in _per_query(doc, "theirs", "original").items()}

    # the reverse direction: <conv>_<turn> rewrites, qrels and run against ConvSearch-R1's ids
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps({"_id": to_ct[q], "text": t}) + "\n"
                            for q, t in {json.loads(x)["qid"]: json.loads(x)["rewrite"] for x in f["rewrites"].read_text().splitlines()}.items()))
    bare_run, bare_run0 = tmp_path / "bare.trec", tmp_path / "bare0.trec"
    _lexical_run_as_convsearch_writes_it(tmp_path / "ref", "r1", bare_run, lambda q: to_ct[q])
    _lexical_run_as_convsearch_writes_it(tmp_path / "ref", "original", bare_run0, lambda q: to_ct[q])
    doc, _ = _evaluate(["evaluate", str(tmp_path / "cs"), *lex, "--qrels", str(tmp_path / "ct" / "qrels.tsv"), "--rewrites", f"r1={bare}",
                        "--run", f"theirs={bare_run0}", "--run", f"theirs:r1={bare_run}", "--out", str(tmp_path / "res2")], capsys)
    m = doc["config"]["id_mapping"]
    assert m["rewrites"]["r1"]["from"] == ["conv_turn"] and m["qrels"]["examples"]["1_1"] == "topiocqa-dev_1_1"
    assert _per_query(doc, "lexical", "r1") == _per_query(ref, "lexical", "r1")
    assert {q: _no_ties(v) for q, v in _per_query(doc, "theirs", "r1").items()} == \
        {q: _no_ties(v) for q, v in _per_query(ref, "lexical", "r1").items()}


def test_ambiguous_or_incomplete_mapping_of_a_rewrite_file_is_an_error(tmp_path, capsys):
    from vdr.experiment.inputs import load_inputs

    f = lay_out_topiocqa(tmp_path)
    _convert(["convert", "topiocqa", "--dataset", str(f["dataset"]), "--gold", str(f["gold"]), "--out", str(tmp_path / "ct"),
              "--collection", str(f["tsv"]), "--id-scheme", "conv_turn"], capsys)
    lines = f["rewrites"].read_text().splitlines()
    both = tmp_path / "both.jsonl"  # a file holding 1_1 under both schemes
    both.write_text("\n".join(lines + [json.dumps({"qid": "1_1", "rewrite": "again"})]) + "\n")
    with pytest.raises(InputError, match=r"rewrite variant 'x': ambiguous id mapping.*'1_1' <- \['topiocqa-dev_1_1', '1_1'\]"):
        load_inputs(tmp_path / "ct", rewrites={"x": both})
    short = tmp_path / "short.jsonl"
    short.write_text("\n".join(ln for ln in lines if '"topiocqa-dev_2_2"' not in ln) + "\n")
    with pytest.raises(AlignmentError, match=r"missing from the variant: '2_2'.*after mapping 11 id\(s\)"):
        load_inputs(tmp_path / "ct", rewrites={"x": short})


# --------------------------------------------------------------------------------------------- live: Pyserini


def _pyserini_reason() -> str | None:
    from vdr.retrieve.pyserini import unavailable_reason

    return unavailable_reason()


_REFERENCE = r'''
import json, sys
from pyserini.search.lucene import LuceneSearcher

index, queries, k1, b, out = sys.argv[1:6]
qids, texts = [], []
with open(queries, encoding="utf-8") as f:
    for line in f:
        rec = json.loads(line)
        qids.append(rec["qid"])
        texts.append(" ".join(rec["rewrite"].split(" ")[:512]))
searcher = LuceneSearcher(index)
searcher.set_bm25(float(k1), float(b))
hits = searcher.batch_search(texts, qids, k=100, threads=1)
with open(out, "w") as f:
    for q in qids:
        for i, h in enumerate(hits.get(q, [])):
            docid = json.loads(searcher.doc(h.docid).raw())["id"]
            f.write("{} {} {} {} {} {}".format(q, "Q0", docid, i + 1, -i - 1 + 200, h.score) + "\n")
'''


def _pyserini_run(collection_dir: Path, rewrites: Path, k1: float, b: float, work: Path) -> Path:
    """ConvSearch-R1's BM25 evaluation run: ``python -m pyserini.index`` as ``index/bm25/create_index.sh``
    (JsonCollection, DefaultLuceneDocumentGenerator, -storeRaw), then ``LuceneSearcher.set_bm25(k1, b)``,
    ``batch_search(k=100)`` of each rewrite's first 512 space-separated words, and its run-file lines
    (``get_metrics_using_bm25.py``)."""
    from vdr.retrieve.pyserini import find_java

    home, _ = find_java()
    env = dict(os.environ, JAVA_HOME=str(home), PATH=f"{home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    env.setdefault("OPENAI_API_KEY", "unused-placeholder")  # Pyserini 1.x builds an OpenAI client when its searchers are imported
    index = work / "index"
    subprocess.run([sys.executable, "-m", "pyserini.index", "-collection", "JsonCollection", "-generator", "DefaultLuceneDocumentGenerator",
                    "-threads", "1", "-input", str(collection_dir), "-index", str(index), "-storeRaw"], env=env, check=True,
                   capture_output=True, cwd=work)
    script = work / "reference.py"
    script.write_text(_REFERENCE, encoding="utf-8")
    run = work / "pyserini.trec"
    subprocess.run([sys.executable, str(script), str(index), str(rewrites), str(k1), str(b), str(run)], env=env, check=True,
                   capture_output=True, cwd=work)
    return run


def _pytrec_values(qrels_path: Path, run_path: Path) -> dict[str, dict[str, float]]:
    """Per query MRR@3, NDCG@3, R@10, R@100 and the full-list RR of ConvSearch-R1's run, by pytrec_eval
    (its ``print_res``: the fifth field is the score; MRR@3 is ``recip_rank`` of the top 3)."""
    import pytrec_eval

    qrels: dict = {}
    for ln in qrels_path.read_text().splitlines():
        q, _, d, g = ln.split()
        qrels.setdefault(q, {})[d] = int(g)
    run: dict = {}
    for ln in run_path.read_text().splitlines():
        f = ln.split(" ")
        run.setdefault(f[0], {})[f[2]] = int(f[4])
    top3 = {q: dict(sorted(d.items(), key=lambda kv: -kv[1])[:3]) for q, d in run.items()}
    full = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "ndcg_cut.3", "recall.10", "recall.100"}).evaluate(run)
    rr3 = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top3)
    return {q: {"mrr@3": rr3.get(q, {}).get("recip_rank", 0.0), "ndcg@3": v["ndcg_cut_3"], "recall@10": v["recall_10"],
                "recall@100": v["recall_100"], "rr_full": v["recip_rank"]} for q, v in full.items()}


def _anserini_order(run_path: Path) -> dict[str, list[str]]:
    """Each query's ranking in Anserini's order (``io.anserini.rerank.lib.TiebreakerReranker``, applied
    by every Pyserini BM25 search): float32 scores rounded to 1e-4 (Java ``Math.round(score * 1e4f)``),
    ties by collection docid, ascending."""
    import numpy as np

    rows: dict[str, list[tuple[int, str]]] = {}
    for ln in run_path.read_text().splitlines():
        q, _, d, _, score, _ = ln.split()
        rows.setdefault(q, []).append((math.floor(float(np.float32(score) * np.float32(1e4)) + 0.5), d))
    return {q: [d for _, d in sorted(r, key=lambda x: (-x[0], x[1]))] for q, r in rows.items()}


def _check_equal(doc: dict, variant: str, ref: dict, qrels: Path, runs: tuple[Path, Path]) -> None:
    """vdr's MRR@3, NDCG@3, R@10, R@100 equal the Pyserini run's, per query and on average; and vdr's
    ranking, put in Anserini's tie order, is Pyserini's ranking (so any other difference -- the
    full-list RR here -- comes from the tie order alone: vdr breaks exact ties by docid descending,
    as trec_eval; Anserini rounds to 1e-4 and breaks ties by docid ascending)."""
    got = _per_query(doc, "lexical", variant)
    judged = set(load_qrels(qrels))
    assert set(got) == judged and set(ref) == judged  # every judged query ranked by both
    metrics = ("mrr@3", "ndcg@3", "recall@10", "recall@100")
    diffs = {q: {m: (got[q][m], ref[q][m]) for m in metrics if got[q][m] != pytest.approx(ref[q][m], abs=1e-12)} for q in ref}
    assert not {q: d for q, d in diffs.items() if d}, diffs
    agg = next(r for r in doc["runs"] if r["backend"] == "lexical" and r["variant"] == variant)["aggregate"]
    for m in metrics:
        assert agg[m] == pytest.approx(sum(v[m] for v in ref.values()) / len(ref), abs=1e-12)
    vdr_run, pyserini_run = runs
    theirs = {q: [ln.split()[2] for ln in pyserini_run.read_text().splitlines() if ln.split()[0] == q] for q in judged}
    assert _anserini_order(vdr_run) == theirs


@pytest.mark.slow
@pytest.mark.skipif(_pyserini_reason() is not None, reason=str(_pyserini_reason()))
@pytest.mark.parametrize(("name", "lay_out", "k1", "b", "sources"), [
    ("topiocqa", lay_out_topiocqa, 0.9, 0.4, lambda f: ["--collection", str(f["tsv"]), "--dataset", str(f["dataset"]), "--gold", str(f["gold"])]),
    ("qrecc", lay_out_qrecc, 0.82, 0.68, lambda f: ["--collection", str(f["collection"]), "--dataset", str(f["dataset"]), "--qrels", str(f["qrels"])]),
])
def test_readme_commands_equal_pyserini(tmp_path, capsys, name, lay_out, k1, b, sources):
    """The convert + evaluate commands of docs/text-benchmarks.md for ``name`` (its BM25 preset ``k1``/``b``) equal Pyserini's run."""
    pytest.importorskip("pytrec_eval")
    f = lay_out(tmp_path)
    theirs = _pyserini_run(f["collection"].parent, f["rewrites"], k1, b, tmp_path)
    ref = _pytrec_values(f["qrels"], theirs)
    _convert(["convert", name, *sources(f), "--out", str(tmp_path / f"corpora/{name}")], capsys)
    doc, _ = _evaluate(["evaluate", str(tmp_path / f"corpora/{name}"), "--backend", "lexical", "--bm25-preset", name,
                        "--bm25-analyzer", "lucene", "--protocol", "convsearch", "--rewrites", f"convsearch-r1={f['rewrites']}",
                        "--out", str(tmp_path / f"results/{name}")], capsys)
    _check_equal(doc, "convsearch-r1", ref, f["qrels"], (tmp_path / f"results/{name}/runs/lexical.convsearch-r1.trec", theirs))
