"""Kernel functions (RBF, linear, polynomial or a user callable) as picklable objects."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

_BUILTIN = ("rbf", "linear", "poly")


@dataclass(frozen=True)
class Kernel:
    """``k(X, Y)``: a kernel with its parameters fixed. ``metric``: ``"rbf"``, ``"linear"``,
    ``"poly"``, or a callable ``k(x, y) -> float`` (as in ``pairwise_kernels``) /
    ``k(X, Y) -> ndarray`` when ``vectorised=True``; ``params``: keyword parameters for
    ``pairwise_kernels`` (``gamma``, ``degree``, ``coef0``...).
    """

    metric: str | Callable[..., Any]
    params: dict = field(default_factory=dict)
    vectorised: bool = False

    def __call__(self, X, Y):
        if self.metric == "rbf":
            # Bounded in (0, 1] for finite inputs: no per-entry finiteness check needed.
            return rbf_kernel(X, Y, self.params["gamma"])
        if self.vectorised:  # the metric is then a callable k(X, Y) -> ndarray
            K = np.asarray(cast(Callable[..., Any], self.metric)(X, Y, **self.params),
                           dtype=float)
        else:
            # Imported here: scikit-learn (with SciPy and pandas) is ~140 MiB and 2 s of import
            # in every Dask worker that unpickles a Kernel, and the built-in tiles never use it.
            from sklearn.metrics.pairwise import pairwise_kernels

            K = pairwise_kernels(X, Y, metric=self.metric, filter_params=False, **self.params)
        if not np.all(np.isfinite(K)):
            raise ValueError(
                f"The kernel {self.name} returned non-finite values (NaN or inf) for finite "
                "inputs; check its parameters (e.g. a huge gamma or degree), the scale of X "
                "(standardise it, e.g. with StandardScaler) or the callable."
            )
        return K

    def gram(self, X):
        """``k(X, X)``, the symmetric Gram matrix (RBF: only the upper triangle evaluated)."""
        if self.metric == "rbf":
            return rbf_gram(X, self.params["gamma"])
        return self(X, X)

    def diagonal(self, X):
        """``k(x_i, x_i)`` for every row of X, without forming the Gram matrix (N,)."""
        X = np.asarray(X, dtype=np.float64)
        if self.metric == "rbf":
            return np.ones(X.shape[0])
        if self.metric in ("linear", "poly"):
            sq = np.einsum("ij,ij->i", X, X)
            if self.metric == "linear":
                return sq
            return (self.params["gamma"] * sq + self.params["coef0"]) ** self.params["degree"]
        return np.array([self(row[None, :], row[None, :])[0, 0] for row in X])

    def tile_factors(self, X, dtype):
        """Row factors ``(left, right)`` in ``dtype`` whose products give Gram tiles."""
        if not self.builtin:
            raise ValueError(f"Gram tiles need a built-in kernel; got {self.name}.")
        X = np.asarray(X, dtype=np.float64)
        ones = np.ones((X.shape[0], 1))
        if self.metric == "rbf":
            gamma = _check_gamma(self.params["gamma"])
            Xc = X - X.mean(axis=0) if X.shape[0] else X
            norms = gamma * np.einsum("ij,ij->i", Xc, Xc)[:, None]
            scaled = np.sqrt(2.0 * gamma) * Xc
            left, right = np.hstack([scaled, -norms, ones]), np.hstack([scaled, ones, -norms])
        elif self.metric == "poly":
            left = np.hstack([self.params["gamma"] * X, self.params["coef0"] * ones])
            right = np.hstack([X, ones])
        else:
            left = right = X
        return (np.ascontiguousarray(left, dtype=dtype), np.ascontiguousarray(right, dtype=dtype))

    def finish_tile(self, T, clip=True):
        """Turn ``left[I] @ right[J].T`` (see :meth:`tile_factors`) into ``G[I, J]`` in place."""
        if self.metric == "rbf":
            if clip:
                np.minimum(T, 0.0, out=T)
            np.exp(T, out=T)
        elif self.metric == "poly":
            np.power(T, self.params["degree"], out=T)
        return T

    @property
    def builtin(self):
        """True for the built-in kernels, symmetric by construction (k(x, y) = k(y, x))."""
        return isinstance(self.metric, str) and self.metric in _BUILTIN

    @property
    def name(self):
        return self.metric if isinstance(self.metric, str) else getattr(
            self.metric, "__name__", repr(self.metric)
        )


#: Entries per row slab in :func:`rbf_kernel`: a 2 MiB slab stays in cache through the five
#: elementwise passes.
_RBF_SLAB_ENTRIES = 1 << 18


def rbf_kernel(X, Y, gamma):
    """``exp(-gamma ||x - y||^2)`` for every row pair of X (n, D) and Y (m, D): (n, m)."""
    gamma = _check_gamma(gamma)
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    n, m = X.shape[0], Y.shape[0]
    out = np.empty((n, m))
    xx = gamma * np.einsum("ij,ij->i", X, X)
    yy = gamma * np.einsum("ij,ij->i", Y, Y)
    Yt = (2.0 * gamma) * Y.T
    step = max(1, _RBF_SLAB_ENTRIES // max(m, 1))
    for a in range(0, n, step):
        rows = slice(a, a + step)
        _rbf_slab(out[rows], X[rows], Yt, xx[rows], yy)
    return out


def rbf_gram(X, gamma):
    """The symmetric Gram matrix ``rbf_kernel(X, X, gamma)`` (N, N) at about half the cost: the
    upper triangle one slab of rows at a time, mirrored, so the result is exactly symmetric (which
    the stored-Gram products rely on).
    """
    gamma = _check_gamma(gamma)
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    out = np.empty((n, n))
    xx = gamma * np.einsum("ij,ij->i", X, X)
    Xt = (2.0 * gamma) * X.T
    step = 64  # rows per slab: the mirrored column block is written 64 entries at a time
    for a in range(0, n, step):
        b = min(a + step, n)
        slab = out[a:b, a:]
        _rbf_slab(slab, X[a:b], Xt[:, a:], xx[a:b], xx[a:])
        diag = slab[:, : b - a]
        diag[...] = 0.5 * (diag + diag.T)  # GEMM rounding differs between (i, j) and (j, i)
        out[b:, a:b] = slab[:, b - a :].T
    return out


def _check_gamma(gamma):
    gamma = float(gamma)
    if not np.isfinite(gamma) or gamma < 0:
        raise ValueError(f"The RBF kernel needs a finite gamma >= 0; got {gamma}.")
    return gamma


def _rbf_slab(out, Xa, Yt, xxa, yy):
    """``out = exp(min(0, Xa Yt - xxa - yy))`` in place (Yt and the norms carry gamma)."""
    np.matmul(Xa, Yt, out=out)
    out -= xxa[:, None]
    out -= yy[None, :]
    np.minimum(out, 0.0, out=out)  # -gamma ||x - y||^2 <= 0; rounding can cross zero
    np.exp(out, out=out)


def make_kernel(kernel, *, n_features, gamma=None, degree=3, coef0=1.0, kernel_params=None):
    """Build a :class:`Kernel` from estimator parameters."""
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
