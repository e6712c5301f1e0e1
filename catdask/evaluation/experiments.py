"""The paper's three tables as experiments: which methods, which preprocessing, and a runner."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .compared_methods import paper_methods
from .protocol import C_GRID, GAMMA_FACTORS, MethodResult, evaluate_method


@dataclass(frozen=True)
class Experiment:
    """One of the paper's tables: which methods, which preprocessing, which paper numbers."""

    key: str  # "table1", "table2", "table3"
    title: str
    methods: tuple  # names in paper_methods()
    preprocessing: str = "standardise"
    #: Subsample larger data sets to this many rows (kernel tables; recorded per result).
    max_samples: int | None = None


def paper_experiments(*, kernel_max_samples=2000):
    """Our protocol for each of the paper's three tables."""
    t1 = ("CQS-global", "CQS-class", "CAS-global", "CAS-class", "LS-LDA", "PCA", "MC-FLD")
    t2 = ("K-CQS-global", "K-CQS-class", "K-CAS-global", "K-CAS-class", "K-PCA", "K-MC-FLD")
    t3 = ("K-CQS-A-global", "K-CQS-A-class", "K-CAS-A-global", "K-CAS-A-class",
          "CQS-A-global", "CQS-A-class", "CAS-A-global", "CAS-A-class")
    return {
        "table1": Experiment("table1", "Linear dimensionality reduction w/ SVM classification", t1,
                             preprocessing="none"),
        "table2": Experiment("table2", "Kernel dimensionality reduction w/ SVM classification", t2,
                             max_samples=kernel_max_samples),
        "table3": Experiment("table3", "Kernel dimensionality reduction w/ angle classification",
                             t3, max_samples=kernel_max_samples),
    }


@dataclass
class ExperimentResult:
    """All results of one experiment (table), plus the data sets it had to skip and why."""

    experiment: Experiment
    results: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)


def run_experiment(experiment, datasets, *, loader=None, methods=None, n_splits=10,
                   random_state=0, inner_folds=3, n_jobs=1, progress=print, settings=None):
    """Run one table's methods (default :func:`paper_methods`) on the named data sets: an
    :class:`ExperimentResult` whose ``settings["seconds"]`` is the experiment's wall time."""
    if loader is None:
        from .data import load_xy as loader
    methods = paper_methods() if methods is None else methods
    say = progress or (lambda *_: None)
    out = ExperimentResult(experiment, settings=dict(
        n_splits=n_splits, random_state=random_state, inner_folds=inner_folds,
        preprocessing=experiment.preprocessing, max_samples=experiment.max_samples,
        C_grid=list(C_GRID), gamma_factors=list(GAMMA_FACTORS), **(settings or {}),
    ))
    start = time.perf_counter()
    for name in datasets:
        try:
            X, y = loader(name)
        except FileNotFoundError as exc:
            out.skipped[name] = str(exc)
            say(f"[{experiment.key}] skipping {name}: {exc}")
            continue
        for mname in experiment.methods:
            method = methods[mname]
            say(f"[{experiment.key}] {name:<12} {mname:<16} {n_splits} splits ...")
            t0 = time.perf_counter()
            try:
                res = evaluate_method(
                    method, X, y, dataset=name, n_splits=n_splits,
                    preprocessing=experiment.preprocessing, random_state=random_state,
                    inner_folds=inner_folds, max_samples=experiment.max_samples, n_jobs=n_jobs,
                )
            except Exception as exc:  # one failing method must not lose the whole table
                res = MethodResult(name, mname, method.paper_column, np.array([]),
                                   preprocessing=experiment.preprocessing,
                                   n_samples_total=len(y), error=f"{type(exc).__name__}: {exc}")
            out.results.append(res)
            if res.error:
                say(f"[{experiment.key}] {name:<12} {mname:<16} FAILED {res.error}")
            else:
                warn = f"  ({res.n_warnings} convergence warnings)" if res.n_warnings else ""
                say(f"[{experiment.key}] {name:<12} {mname:<16} {100 * res.mean:6.2f} "
                    f"± {100 * res.std:5.2f}  {time.perf_counter() - t0:7.1f} s{warn}")
    out.settings["seconds"] = round(time.perf_counter() - start, 1)
    return out
