"""Low-rank factorisation of a Gram matrix by pivoted Cholesky, ``G ~= L L^T``."""

from __future__ import annotations

import numpy as np


def pivoted_cholesky(diagonal, columns, *, rtol=1e-12, max_rank=1000, return_pivots=False):
    """Greedy pivoted Cholesky factor ``L`` (N, r) of a PSD matrix G given by its ``diagonal`` and
    ``columns(idx) -> (N, len(idx))``, stopped when ``trace(G - L L^T) <= rtol * trace(G)``, or
    unconverged at rank ``max_rank``.
    Returns ``(L, residual_trace, converged)``, and with ``return_pivots`` the pivots too: the rows
    of G chosen in order, whose kernel columns span the factor (``L L^T = G[:, P] G[P, P]^{-1}
    G[P, :]``, the Nystroem approximation on the landmarks P)."""
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
