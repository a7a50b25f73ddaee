"""File formats (BEIR, TREC, pytrec_eval JSON) and atomic writes."""

from .atomic import atomic_write, write_bytes_atomic, write_text_atomic
from .formats import (
    load_qrels, load_queries, load_query_fields, load_query_groups, load_rewrites, load_run, read_query_fields, save_qrels, save_queries,
    save_run,
)

__all__ = [
    "atomic_write",
    "write_text_atomic",
    "write_bytes_atomic",
    "load_qrels",
    "load_run",
    "load_queries",
    "load_rewrites",
    "load_query_fields",
    "load_query_groups",
    "read_query_fields",
    "save_qrels",
    "save_run",
    "save_queries",
]
