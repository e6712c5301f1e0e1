"""Flow-run names that say what a run does (``iris-kcqs``), instead of Prefect's generated
ones (``chocolate-scallop``), which tell runs apart in the UI's list only by clicking them."""

from __future__ import annotations

# More names than this are counted, not listed: a run name is one line of the UI's table.
MAX_LISTED = 3


def _listed(names) -> str:
    """``"iris-wine"``; ``"iris-wine-seeds-and-2-more"`` past :data:`MAX_LISTED` names."""
    names = [str(n) for n in names]
    shown = "-".join(names[:MAX_LISTED])
    extra = len(names) - MAX_LISTED
    return shown + (f"-and-{extra}-more" if extra > 0 else "")


def train_run_name(dataset, method, model_name=None, origin=None) -> str:
    """``catdask-train``'s run name: the registry name the model gets (``"iris-cqs"``, with a
    non-default ``origin``; or the run's own ``model_name``).
    """
    from .model_identity import default_model_name

    return model_name or default_model_name(dataset, method, origin)


def ingest_run_name(names) -> str:
    """``catdask-ingest``'s run name for the data sets ``names``: ``"ingest-iris-wine"``."""
    return f"ingest-{_listed(names) or 'nothing'}"


def retrain_run_name(when, dataset=None) -> str:
    """``catdask-retrain``'s run name for the night of ``when`` (its scheduled start):
    ``"retrain-all-2026-11-24"``, or ``"retrain-iris-2026-11-24"`` for one data set's models.
    """
    return f"retrain-{dataset or 'all'}-{when.date().isoformat()}"


def evaluate_run_name(datasets=None, tables=None, quick=False) -> str:
    """``catdask-evaluate``'s run name: ``"evaluate-table1-iris-wine"``, or with None for every
    table and every stored data set ``"evaluate-all-tables-stored"`` (``-quick`` appended when
    quick).
    """
    parts = ["evaluate", _listed(tables) if tables else "all-tables",
             _listed(datasets) if datasets else "stored"]
    return "-".join(parts) + ("-quick" if quick else "")
