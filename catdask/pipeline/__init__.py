"""Library functions behind the Prefect flows: ingest, train-certify-register, reports.

The flows in :mod:`catdask.orchestration` only orchestrate (retries, artifacts, logging);
everything they run is here, importable and testable without Prefect.
"""

from .ingest import ingest_dataset, ingest_file
from .training import FitOutcome, ModelSpec, fit_on_dataset, register_outcome, registration_decision

__all__ = [
    "ingest_dataset",
    "ingest_file",
    "ModelSpec",
    "FitOutcome",
    "fit_on_dataset",
    "registration_decision",
    "register_outcome",
]
