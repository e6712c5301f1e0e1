"""Largest eigenvalues for the certificate: estimates for the search, verified upper bounds."""

from __future__ import annotations

import numpy as np
import scipy.linalg
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh

from .budget import DEFAULT_BUDGET

# From strongest to weakest; a certificate records the weakest one it relied on.
EIGEN_CHECKS = ("dense", "lanczos+cholesky", "lanczos")
# Lanczos accuracy (relative to a shifted, well-separated eigenvalue; see top_eig).
_LANCZOS_TOL = 1e-10
_EPS = np.finfo(float).eps


class NumericalFailure(RuntimeError):
    """A numerical method gave no answer on well-formed input (Lanczos did not converge, a
    conic solver returned no solution): the certificate says "not certified", never a bug."""


def sym(A):
    """Symmetric part ``(A + A^T) / 2``."""
    return 0.5 * (A + A.T)


def weakest_check(checks):
    """The weakest of several ``eigen_check`` labels (None when there are none)."""
    ranked = [EIGEN_CHECKS.index(c) for c in checks if c is not None]
    return EIGEN_CHECKS[max(ranked)] if ranked else None


def _lanczos_top(n, matvec, shift, v0):
    """Top eigenvector of ``A + shift I`` by ARPACK (raises NumericalFailure if it never
    converges)."""
    op = LinearOperator(
        (n, n), matvec=lambda x: matvec(np.ravel(x)) + shift * np.ravel(x), dtype=float
    )
    # ncv = 16: with a warm start the first cycle usually converges; at D = 784 (K = 10) the
    # test's 90 runs took 1,794 matvecs instead of 2,250 with ncv = 24 (always 25 per run).
    for ncv in (min(n - 1, 16), min(n - 1, 64)):
        try:
            _, V = eigsh(op, k=1, which="LA", v0=v0, tol=_LANCZOS_TOL, ncv=ncv,
                         maxiter=max(1000, 20 * n))
            return V[:, 0] / np.linalg.norm(V[:, 0])
        except ArpackNoConvergence:
            continue
    raise NumericalFailure(f"Lanczos (eigsh) did not converge on a {n} x {n} operator")


def _rayleigh_upper(v, Av):
    """Rayleigh quotient plus the residual norm ``||A v - theta v||``: an upper bound on
    lambda_max once v belongs to the top eigenvalue."""
    theta = float(v @ Av)
    return theta + float(np.linalg.norm(Av - theta * v))


def top_eig(n, *, matrix=None, matvec=None, shift=0.0, v0=None):
    """Estimate of the largest eigenvalue of a symmetric matrix or operator, and a unit vector."""
    if matrix is None and n <= 8:  # too small for ARPACK
        matrix = sym(np.column_stack([matvec(e) for e in np.eye(n)]))
    if matrix is not None:
        _, V = scipy.linalg.eigh(matrix, subset_by_index=[n - 1, n - 1], driver="evx")
        v = V[:, 0]
        return _rayleigh_upper(v, matrix @ v), v
    v = _lanczos_top(n, matvec, shift, v0)
    return _rayleigh_upper(v, matvec(v)), v


def _cholesky_proves(matrix, mu):
    """Whether a Cholesky factorisation proves ``lambda_max(matrix) < mu``."""
    n = matrix.shape[0]
    B = -matrix.astype(float, copy=True)
    B[np.diag_indices(n)] += mu
    trace = float(np.trace(B))
    if not trace > 0:
        return False
    B[np.diag_indices(n)] -= 4.0 * (n + 2) * _EPS * trace
    try:
        scipy.linalg.cholesky(B, lower=True, overwrite_a=True, check_finite=False)
    except np.linalg.LinAlgError:
        return False
    return True


def cholesky_upper(matrix, estimate, *, shift=0.0):
    """A verified upper bound on lambda_max(matrix) near ``estimate``, or None."""
    n = matrix.shape[0]
    width = float(np.max(np.abs(np.diag(matrix)))) + abs(estimate) + abs(shift)
    unit = 16.0 * (n + 2) * _EPS * n * max(width, _EPS)
    for slack in (1.0, 16.0, 256.0):
        mu = estimate + slack * unit
        if _cholesky_proves(matrix, mu):
            return float(mu)
    return None


def verified_top(n, *, matrix=None, matvec=None, shift=0.0, v0=None, estimate=None,
                 budget=DEFAULT_BUDGET):
    """A verified upper bound on lambda_max of a symmetric matrix (order ``n``) or operator.
    Returns ``(upper, v, check)``: the bound, a unit vector with Rayleigh quotient close to it, and
    how the bound was obtained (one of :data:`EIGEN_CHECKS`)."""
    if matrix is None:
        upper, v = top_eig(n, matvec=matvec, shift=shift, v0=v0)
        return upper, v, "dense" if n <= 8 else "lanczos"
    if estimate is not None and n > budget.dense_max_dim:
        # One Cholesky (n^3 / 3 flops) instead of a reduction to tridiagonal form (4 n^3 / 3).
        mu = cholesky_upper(matrix, float(estimate[0]), shift=shift)
        if mu is not None:
            return mu, estimate[1], "lanczos+cholesky"
    if n <= budget.verify_dense_max_dim:
        upper, v = top_eig(n, matrix=matrix)
        return upper, v, "dense"
    try:
        v = _lanczos_top(n, lambda x: matrix @ x, shift, v0)
    except (NumericalFailure, ArpackError):
        v = None
    if v is not None:
        estimate = _rayleigh_upper(v, matrix @ v)
        # Room for the rounding allowance of _cholesky_proves and the estimate's own error.
        mu = cholesky_upper(matrix, estimate, shift=shift)
        if mu is not None:
            return mu, v, "lanczos+cholesky"
    upper, v = top_eig(n, matrix=matrix)  # Lanczos missed the top: dense eigh decides
    return upper, v, "dense"
