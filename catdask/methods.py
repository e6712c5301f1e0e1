"""The one registry of the paper's methods: name -> estimator class and objective.

Used by the training pipeline (``ModelSpec.method``), the evaluation protocol
(:func:`catdask.evaluation.compared_methods.paper_methods`) and the model files
(:mod:`catdask.model_io`, by class name through :data:`ESTIMATOR_CLASSES`).
"""

from __future__ import annotations

from typing import NamedTuple

from .estimators import CategorySpace, KernelCategorySpace

__all__ = ["METHODS", "ESTIMATOR_CLASSES", "RegisteredMethod", "make_estimator", "method_name"]


class RegisteredMethod(NamedTuple):
    """``(estimator_class, objective)``; unpacks as a pair."""

    estimator_class: type
    objective: str

    @property
    def kernel(self):
        """Whether the method is a kernel method (K-CQS, K-CAS)."""
        return self.estimator_class is KernelCategorySpace

    @property
    def paper_name(self):
        """The column name in the paper's tables: ``"CQS"``, ``"CAS"``, ``"K-CQS"``, ``"K-CAS"``."""
        short = "CQS" if self.objective == "quadratic" else "CAS"
        return f"K-{short}" if self.kernel else short


# Method names as in the paper's tables, lower case (the CLI's and ModelSpec's names).
METHODS = {
    "cqs": RegisteredMethod(CategorySpace, "quadratic"),
    "cas": RegisteredMethod(CategorySpace, "absolute"),
    "kcqs": RegisteredMethod(KernelCategorySpace, "quadratic"),
    "kcas": RegisteredMethod(KernelCategorySpace, "absolute"),
}

# Estimator classes by class name, as recorded in model files.
ESTIMATOR_CLASSES = {cls.__name__: cls for cls in (CategorySpace, KernelCategorySpace)}


def method_name(*, kernel, objective):
    """The registry name of the method with this kernel flag and objective.

    Examples
    --------
    >>> method_name(kernel=True, objective="quadratic")
    'kcqs'
    """
    for name, entry in METHODS.items():
        if entry.kernel == bool(kernel) and entry.objective == objective:
            return name
    raise ValueError(
        f"No method with kernel={kernel!r} and objective={objective!r}; "
        "objective must be 'quadratic' or 'absolute'."
    )


def make_estimator(method, **params):
    """An unfitted estimator for a registered method.

    Parameters
    ----------
    method : str
        One of :data:`METHODS` (``"cqs"``, ``"cas"``, ``"kcqs"``, ``"kcas"``).
    **params
        Estimator parameters other than ``objective`` (e.g. ``origin``, ``n_restarts``,
        ``gamma`` for kernel methods).

    Returns
    -------
    CategorySpace or KernelCategorySpace

    Examples
    --------
    >>> make_estimator("kcqs", origin="class").objective
    'quadratic'
    """
    if method not in METHODS:
        raise ValueError(f"Unknown method {method!r}; use one of {sorted(METHODS)}.")
    if "objective" in params:
        raise ValueError(
            f"objective is fixed by the method ({method!r} is {METHODS[method].objective!r}); "
            "do not pass it."
        )
    cls, objective = METHODS[method]
    return cls(objective=objective, **params)
