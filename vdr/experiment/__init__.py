"""The experiment: composes the stages (inputs -> backends -> runs -> metrics -> statistics ->
results). :mod:`.inputs` loads and checks corpus, queries, variants and qrels; :mod:`.evaluation`
is :func:`vdr.evaluate`; :mod:`.compare_runs` is :func:`vdr.compare` (runs of several systems).

The names below are read from their modules on first use, so that importing one module of the
package (``vdr.experiment.inputs``) does not import the others."""

_EXPORTS = {
    "evaluate": "evaluation", "EvaluateOptions": "evaluation", "stage_lines": "evaluation", "BACKENDS": "evaluation",
    "ENGINES": "evaluation", "CACHE_DIR_NAME": "evaluation", "compare_runs": "compare_runs",
    "load_inputs": "inputs", "Inputs": "inputs", "InputSettings": "inputs", "RetrievalSettings": "evaluation",
    "MetricSettings": "evaluation", "StatisticsSettings": "evaluation", "RunSettings": "evaluation", "build_variants": "inputs", "check_inputs": "inputs",
}


def __getattr__(name: str):
    """The public names of the package's modules, imported on first use (see :data:`_EXPORTS`)."""
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_EXPORTS)
