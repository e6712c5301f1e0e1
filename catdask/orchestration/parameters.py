"""The flows' parameters as the Prefect UI shows them: types that carry their choices and
bounds, and one description per parameter.

Prefect builds a deployment's run form (and the schema its API checks a new run against) from
the flow's signature and the ``Args:`` section of its docstring, so the form offers choices,
shows bounds, and the API refuses a bad run (HTTP 409) before any worker starts it.
:func:`documented` writes the ``Args:`` section from one dictionary per flow (Prefect reads only
Google-style sections).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..method_names import CERTIFY_LEVELS, KERNEL_METHODS, MAX_RESTARTS, METHOD_NAMES

__all__ = ["MethodName", "Origin", "CertifyLevel", "Restarts", "Gamma", "Seed", "Eps", "Tol",
           "MaxIter", "MaxGap", "Splits", "DatasetNames", "TRAIN_HELP", "RETRAIN_HELP",
           "INGEST_HELP", "EVALUATE_HELP", "documented"]

MethodName = Literal[tuple(METHOD_NAMES)]
Origin = Literal["global", "class"]
CertifyLevel = Literal[CERTIFY_LEVELS]
Restarts = Annotated[int, Field(ge=1, le=MAX_RESTARTS)]
Gamma = Annotated[float | None, Field(gt=0)]
Seed = Annotated[int | None, Field(ge=0)]
Eps = Annotated[float, Field(gt=0)]
Tol = Annotated[float, Field(ge=0)]
MaxIter = Annotated[int, Field(ge=1)]
MaxGap = Annotated[float | None, Field(ge=0)]
Splits = Annotated[int, Field(ge=2)]
DatasetNames = Annotated[list[str], Field(min_length=1)]

_KERNEL = " or ".join(KERNEL_METHODS)

#: What each parameter of the ``catdask-train`` flow does (the UI's run form shows it).
TRAIN_HELP = {
    "dataset": "Name of a data set in the store (`catdask datasets` lists them), e.g. iris. "
               "A name not in the store fails the run at once, naming the closest stored one.",
    "method": "cqs or cas (linear), kcqs or kcas (RBF kernel). The quadratic ones (cqs, kcqs) "
              "are tested for global optimality.",
    "origin": "global: classes measured from the training centroid (the default, paper eq. "
              "1); class: from each class's own mean (the paper's Algorithm 1).",
    "n_restarts": f"Starting points, run as one batch (1 to {MAX_RESTARTS}); the best one is "
                  "tested for global optimality.",
    "gamma": f"RBF kernel width, > 0; {_KERNEL} only. Empty: 0.05 / n_features (for "
             "standardised features).",
    "standardise": "Standardise the features (zero mean, unit variance) before fitting.",
    "random_state": "Seed of the random restarts (empty: a different draw every run).",
    "model_name": "Name in the model registry. Empty: DATASET-METHOD, e.g. iris-cqs "
                  "(DATASET-METHOD-ORIGIN for origin class: iris-cqs-class).",
    "store": "Store folder (absolute path). Empty: $CATDASK_STORE of the worker, else "
             "catdask-store in its working folder. Fixed under `catdask serve`.",
    "scheduler": "Dask scheduler address, e.g. tcp://10.0.0.5:8786. Empty: $CATDASK_SCHEDULER, "
                 "else a local cluster for this run. Fixed under `catdask serve`.",
    "allow_uncertified": "Register a cqs / kcqs model even when its global optimality cannot "
                         "be proved (marked uncertified). Off: such a run ends Rejected.",
    "run_key": "Idempotency key of the registration: a rerun with the same key returns the "
               "version it registered. Empty: this flow run's id.",
    "certify": "Strongest global-optimality test (cqs, kcqs): dual (the SDP dual), or moment "
               "(also the level-2 moment relaxation when the dual is not tight; needs SCS).",
    "eps": "CAS smoothing length, relative to the data scale (cas, kcas).",
    "tol": "Stop a restart when its axes change by at most this between two iterations.",
    "max_iter": "Most iterations per restart.",
    "max_gap": "Register a cqs / kcqs model that is not certified when its proved relative "
               "optimality gap is at most this. Empty: only certified models.",
    "refit": "Fit even when a version (or a rejected fit) of this content with this spec is "
             "stored.",
    "replace_spec": "Register under model_name although its latest version has another spec "
                    "(method, origin, gamma, ...): predict MODEL then uses the new one. Off: "
                    "such a run fails, naming both specs.",
    "device": f"PyTorch device for the Gram products, e.g. cuda, cuda:1, cpu ({_KERNEL} only; "
              "needs catdask[gpu]). Empty: no PyTorch.",
}

#: What each parameter of the ``catdask-retrain`` flow does.
RETRAIN_HELP = {
    "store": TRAIN_HELP["store"],
    "scheduler": TRAIN_HELP["scheduler"],
    "allow_uncertified": "Also register models whose recorded spec does not allow uncertified "
                         "models (each new version then records it on).",
    "dataset": "Retrain only the models of this data set. Empty: every registered model.",
    "refit": "Refit every model, also those whose latest version fits its data set's current "
             "content with its spec.",
}


#: What each parameter of the ``catdask-ingest`` flow does.
INGEST_HELP = {
    "names": "Catalog data sets to ingest (`catdask datasets` lists the catalog), e.g. "
             "[\"iris\", \"wine\"].",
    "store": TRAIN_HELP["store"],
    "source_dir": "Folder with the original UCI files, flat or one subfolder per data set. "
                  "Empty: $CATDASK_SOURCE_DIR of the worker.",
    "allow_download": "Download the original files over HTTPS (checked against the catalog's "
                      "sha256) when they are not found locally.",
    "replace": "Replace a stored data set of the same name whose content differs (off: such a "
               "data set is refused).",
}

#: What each parameter of the ``catdask-evaluate`` flow does.
EVALUATE_HELP = {
    "datasets": "Data sets in the store to evaluate. Empty: every stored paper data set.",
    "tables": "The paper's tables to reproduce: table1 (linear + SVM), table2 (kernel + SVM), "
              "table3 (kernel, angle classifier). Empty: all three.",
    "n_splits": "Cross-validation splits (at least 2; the paper's protocol: 10).",
    "quick": "Two data sets and two splits (a smoke test).",
    "out_dir": "Folder for the result tables. Empty: <store>/evaluations/<UTC time>.",
    "store": TRAIN_HELP["store"],
}


def documented(descriptions: dict):
    """Decorator (under ``@flow``): append a Google-style ``Args:`` section, one entry per
    parameter of the function, to its docstring; raises ``ValueError`` at import when a
    parameter has no description (or a description names no parameter)."""

    def add_section(fn):
        import inspect

        names = list(inspect.signature(fn).parameters)
        if set(names) != set(descriptions):
            raise ValueError(f"{fn.__name__}: parameters without a description "
                             f"{sorted(set(names) - set(descriptions))}, descriptions without a "
                             f"parameter {sorted(set(descriptions) - set(names))}")
        lines = [f"    {name}: {descriptions[name]}" for name in names]
        fn.__doc__ = inspect.cleandoc(fn.__doc__ or "") + "\n\nArgs:\n" + "\n".join(lines)
        return fn

    return add_section
