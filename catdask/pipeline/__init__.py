"""Library functions behind the Prefect flows: ingest, train-certify-register, reports.

The flows in :mod:`catdask.orchestration` only orchestrate (retries, artifacts, logging);
everything they run is here, importable and testable without Prefect.
"""

# The public names load on first use (PEP 562): `catdask.pipeline.model_cache` and `.spec`,
# which the CLI asks before anything heavy is imported, must not pull in scikit-learn.
_LAZY = {
    "ingest_dataset": ".ingest",
    "ingest_file": ".ingest",
    "ModelSpec": ".spec",
    "FitOutcome": ".training",
    "fit_on_dataset": ".training",
    "registration_decision": ".training",
    "register_outcome": ".training",
}

__all__ = [
    "ingest_dataset",
    "ingest_file",
    "ModelSpec",
    "FitOutcome",
    "fit_on_dataset",
    "registration_decision",
    "register_outcome",
]


def __getattr__(name):
    if name in _LAZY:
        from importlib import import_module

        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
