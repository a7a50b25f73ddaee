"""The experiment: composes the stages (inputs -> backends -> runs -> metrics -> statistics ->
results). :mod:`.inputs` loads and checks corpus, queries, variants and qrels; :mod:`.evaluation`
is :func:`vdr.evaluate`; :mod:`.compare_runs` is :func:`vdr.compare` (runs of several systems)."""

from .compare_runs import compare_runs
from .evaluation import BACKENDS, CACHE_DIR_NAME, ENGINES, EvaluateOptions, evaluate, stage_lines
from .inputs import Inputs, build_variants, check_inputs, load_inputs

__all__ = ["evaluate", "EvaluateOptions", "compare_runs", "stage_lines", "load_inputs", "Inputs", "build_variants",
           "check_inputs", "BACKENDS", "ENGINES", "CACHE_DIR_NAME"]
