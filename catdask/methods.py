"""The one registry of the paper's methods: name -> estimator class and objective."""

from __future__ import annotations

from typing import NamedTuple

from .estimators import ESTIMATOR_CLASSES, CategorySpace, KernelCategorySpace
from .method_names import METHOD_NAMES, MethodName, method_name


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
        return MethodName(self.kernel, self.objective).paper_name


# The light registry's names (catdask.method_names), each with its estimator class.
METHODS = {
    name: RegisteredMethod(KernelCategorySpace if entry.kernel else CategorySpace, entry.objective)
    for name, entry in METHOD_NAMES.items()
}


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
