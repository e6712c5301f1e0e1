"""Library functions behind the Prefect flows: ingest, train-certify-register, reports."""

from ..lazy import lazy_attributes

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

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())
