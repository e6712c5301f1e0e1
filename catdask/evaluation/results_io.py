"""Read written result tables back, and merge runs over different data sets into one table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


#: Settings that define the protocol: two runs can share a table only if these agree.
PROTOCOL_SETTINGS = ("n_splits", "random_state", "inner_folds", "preprocessing", "max_samples",
                     "C_grid", "gamma_factors", "tol", "n_restarts", "select_restarts")


def read_experiment(json_path, experiment):
    """The :class:`ExperimentResult` that :func:`write_experiment` wrote to ``json_path`` (a
    ``<key>.json``) for ``experiment`` (raises ``ValueError`` when the file is another
    experiment's); fields missing from older files take :class:`MethodResult`'s defaults.
    """
    from .experiments import ExperimentResult
    from .protocol import MethodResult

    path = Path(json_path)
    data = json.loads(path.read_text())
    if data.get("experiment") != experiment.key:
        raise ValueError(f"{path} holds experiment {data.get('experiment')!r}, not "
                         f"{experiment.key!r}.")
    results = [MethodResult(**{**r, "accuracies": np.asarray(r["accuracies"], float)})
               for r in data["results"]]
    return ExperimentResult(experiment, results=results, skipped=dict(data["skipped"]),
                            settings=dict(data["settings"]))


def _runs(exp_result):
    """The runs that produced a table: ``[{"datasets": [...], "seconds": s}, ...]``."""
    if exp_result.settings.get("runs"):
        return [dict(r) for r in exp_result.settings["runs"]]
    names = list(dict.fromkeys(r.dataset for r in exp_result.results))
    return [{"datasets": names, "seconds": exp_result.settings.get("seconds", 0.0)}]


def merge_experiments(base, update, order=None):
    """``base`` with the data sets of ``update`` put in (replacing their rows and skip notes), so a
    table gains data sets without re-running the others. Both must be the same experiment and
    protocol (``ValueError`` names the setting that differs); ``order``: the merged data-set order."""
    from .data import PAPER_DATASETS
    from .experiments import ExperimentResult

    if base.experiment.key != update.experiment.key:
        raise ValueError(f"Cannot merge {update.experiment.key!r} into {base.experiment.key!r}.")
    differ = [k for k in PROTOCOL_SETTINGS
              if base.settings.get(k) != update.settings.get(k)]
    if differ:
        detail = ", ".join(f"{k}: {base.settings.get(k)!r} vs {update.settings.get(k)!r}"
                           for k in differ)
        raise ValueError(f"Cannot merge {update.experiment.key}: the runs used different "
                         f"protocol settings ({detail}).")
    new = list(dict.fromkeys([r.dataset for r in update.results] + list(update.skipped)))
    kept = [r for r in base.results if r.dataset not in new]
    results = kept + list(update.results)
    rank = {name: i for i, name in enumerate(order or PAPER_DATASETS)}
    first_seen = {name: i for i, name in enumerate(dict.fromkeys(r.dataset for r in results))}
    results.sort(key=lambda r: (rank.get(r.dataset, len(rank)), first_seen[r.dataset]))
    skipped = {k: v for k, v in base.skipped.items() if k not in new}
    skipped.update(update.skipped)
    runs = [r for r in _runs(base) if set(r["datasets"]) - set(new)]
    for r in runs:
        r["datasets"] = [d for d in r["datasets"] if d not in new]
    runs += _runs(update)
    settings = {**base.settings, "runs": runs,
                "seconds": round(sum(r["seconds"] for r in runs), 1)}
    return ExperimentResult(base.experiment, results=results, skipped=skipped, settings=settings)
