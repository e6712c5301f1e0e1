"""Low-rank factorisation of a Gram matrix by pivoted Cholesky, ``G ~= L L^T``.

Used to certify kernel fits: with ``G = L L^T`` the kernel problem is exactly the linear one on
the rows of L (features in an r-dimensional isometric copy of the data span, docs/design.md
§4 "Kernel version"), so the linear certificate applies to ``W = L^T A^T``. Pivoted
Cholesky needs only the diagonal and r columns of G (N r kernel evaluations, N r^2 flops): no
N x N eigendecomposition.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pivoted_cholesky"]


def pivoted_cholesky(diagonal, columns, *, rtol=1e-12, max_rank=1000, return_pivots=False):
    """Greedy pivoted Cholesky factor of a PSD matrix given by its diagonal and columns.

    Parameters
    ----------
    diagonal : ndarray of shape (N,)
    columns : callable
        ``columns(idx) -> ndarray (N, len(idx))``, the matrix's columns ``idx``.
    rtol : float
        Stop when the trace of the residual ``G - L L^T`` is at most ``rtol * trace(G)``.
    max_rank : int
        Stop (unconverged) at this rank.
    return_pivots : bool
        Also return the pivots, the rows of G chosen in order (their kernel columns span the
        factor: ``L L^T = G[:, P] G[P, P]^{-1} G[P, :]``, the Nystroem approximation on the
        landmarks P).

    Returns
    -------
    L : ndarray of shape (N, r)
    residual_trace : float
        ``trace(G - L L^T)`` (>= 0); the factor is exact to this trace.
    converged : bool
    pivots : ndarray of shape (r,)
        Only with ``return_pivots``.
    """
    d = np.array(diagonal, dtype=float)
    N = d.shape[0]
    total = max(float(d.sum()), np.finfo(float).tiny)
    L = np.zeros((N, min(max_rank, N)))
    pivots: list[int] = []
    while len(pivots) < L.shape[1]:
        if d.clip(min=0).sum() <= rtol * total:
            break
        j = int(np.argmax(d))
        if d[j] <= 0:
            break
        r = len(pivots)
        col = columns(np.array([j]))[:, 0] - L[:, :r] @ L[j, :r]
        L[:, r] = col / np.sqrt(d[j])
        d -= L[:, r] ** 2
        d[j] = 0.0
        pivots.append(j)
    residual = float(d.clip(min=0).sum())
    out = (L[:, :len(pivots)], residual, residual <= rtol * total)
    return (*out, np.array(pivots, dtype=np.intp)) if return_pivots else out
