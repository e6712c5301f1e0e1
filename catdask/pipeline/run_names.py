"""Flow-run names that say what a run does (``iris-kcqs``), instead of Prefect's generated
ones (``chocolate-scallop``), which tell runs apart in the UI's list only by clicking them.

The train flow names its runs with a template on its parameters (:data:`TRAIN_RUN_NAME`);
the other flows' parameters are lists or optional, so their names are built here.
"""

from __future__ import annotations

__all__ = ["TRAIN_RUN_NAME", "ingest_run_name", "retrain_run_name", "evaluate_run_name"]

#: ``catdask-train``'s run name, formatted by Prefect with the run's parameters.
TRAIN_RUN_NAME = "{dataset}-{method}"
# More names than this are counted, not listed: a run name is one line of the UI's table.
MAX_LISTED = 3


def _listed(names) -> str:
    """``"iris-wine"``; ``"iris-wine-seeds-and-2-more"`` past :data:`MAX_LISTED` names."""
    names = [str(n) for n in names]
    shown = "-".join(names[:MAX_LISTED])
    extra = len(names) - MAX_LISTED
    return shown + (f"-and-{extra}-more" if extra > 0 else "")


def ingest_run_name(names) -> str:
    """``catdask-ingest``'s run name: ``"ingest-iris-wine"``.

    Parameters
    ----------
    names : list of str
        The data sets the run ingests.
    """
    return f"ingest-{_listed(names) or 'nothing'}"


def retrain_run_name(when, dataset=None) -> str:
    """``catdask-retrain``'s run name: ``"retrain-all-2026-11-24"``, the night it is for
    (``"retrain-iris-2026-11-24"`` when it retrains the models of one data set).

    Parameters
    ----------
    when : datetime.datetime
        The run's scheduled start (the night whose models it retrains).
    dataset : str, optional
        The one data set whose models it retrains (a run started by a new snapshot).
    """
    return f"retrain-{dataset or 'all'}-{when.date().isoformat()}"


def evaluate_run_name(datasets=None, tables=None, quick=False) -> str:
    """``catdask-evaluate``'s run name: ``"evaluate-table1-iris-wine"``,
    ``"evaluate-all-tables-stored-quick"``.

    Parameters
    ----------
    datasets : list of str, optional
        None: every stored data set of the paper.
    tables : list of str, optional
        None: every table.
    quick : bool
    """
    parts = ["evaluate", _listed(tables) if tables else "all-tables",
             _listed(datasets) if datasets else "stored"]
    return "-".join(parts) + ("-quick" if quick else "")
