"""Kernel functions (RBF, linear, polynomial or a user callable) as picklable objects.

A :class:`Kernel` is shipped to Dask workers, so it is a small frozen dataclass rather than a
closure. Parameters follow :func:`sklearn.metrics.pairwise.pairwise_kernels`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sklearn.metrics.pairwise import pairwise_kernels

__all__ = ["Kernel", "make_kernel"]

_BUILTIN = ("rbf", "linear", "poly")


@dataclass(frozen=True)
class Kernel:
    """``k(X, Y)``: a kernel with its parameters fixed.

    Parameters
    ----------
    metric : str or callable
        ``"rbf"``, ``"linear"``, ``"poly"``, or a callable ``k(x, y) -> float`` (as in
        ``pairwise_kernels``) / ``k(X, Y) -> ndarray`` when ``vectorised=True``.
    params : dict
        Keyword parameters for ``pairwise_kernels`` (``gamma``, ``degree``, ``coef0``...).
    """

    metric: object
    params: dict = field(default_factory=dict)
    vectorised: bool = False

    def __call__(self, X, Y):
        if self.vectorised:
            K = np.asarray(self.metric(X, Y, **self.params), dtype=float)
        else:
            K = pairwise_kernels(X, Y, metric=self.metric, filter_params=False, **self.params)
        if not np.all(np.isfinite(K)):
            raise ValueError(
                f"The kernel {self.name} returned non-finite values (NaN or inf) for finite "
                "inputs; check its parameters (e.g. a huge gamma or degree) or the callable."
            )
        return K

    @property
    def name(self):
        return self.metric if isinstance(self.metric, str) else getattr(
            self.metric, "__name__", repr(self.metric)
        )


def make_kernel(kernel, *, n_features, gamma=None, degree=3, coef0=1.0, kernel_params=None):
    """Build a :class:`Kernel` from estimator parameters.

    ``gamma=None`` means ``1 / n_features`` for ``"rbf"`` and ``"poly"``, as in scikit-learn.
    """
    if callable(kernel):
        return Kernel(kernel, dict(kernel_params or {}))
    if kernel not in _BUILTIN:
        raise ValueError(f"Unknown kernel {kernel!r}; use one of {_BUILTIN} or a callable.")
    params = {}
    if kernel in ("rbf", "poly"):
        params["gamma"] = 1.0 / n_features if gamma is None else float(gamma)
    if kernel == "poly":
        params.update(degree=degree, coef0=coef0)
    return Kernel(kernel, params)
