"""A floor under the SDP relaxation of CQS: a feasible primal point in a subspace.

Research code, not a rung of the certificate (nothing in the library calls it): a feasible
point ``X_k = V Z_k V^T`` of the primal relaxation (``Z_k PSD, tr Z_k = 1, sum_k Z_k <= I``)
has value ``sum_k tr(A_k Z_k) <= max of the relaxation``, so when that value exceeds F(W) no
dual point, hence no nu of the SDP-dual test, can certify W: the relaxation is not tight
there, whatever the search. With V the subspace dual bound's final subspace it measured the
relaxation's value on digits to within ``F(W) (1 + [6.4e-3, 7.0e-3])`` (docs/design.md §4,
"At high D"); the interior-point solve takes minutes there, so it is not in the default path.
"""

from __future__ import annotations

import numpy as np

from catdask.certificate.eigen import sym

__all__ = ["primal_floor"]


def primal_floor(point, V):
    """Value of a feasible primal point ``X_k = V Z_k V^T`` (a lower bound on the relaxation's
    maximum, on the F = 2 f scale, or None), made exactly feasible after the solver.

    ``point`` is a :class:`catdask.certificate.point.StationaryPoint`, ``V`` an orthonormal
    (D, m) basis (``subspace_dual_bound``'s final ``info["V"]``).
    """
    import cvxpy as cp

    m, K = V.shape[1], point.K
    RV = [point.apply(k, V) for k in range(K)]
    A = [sym(V.T @ RV[k]) for k in range(K)]
    Z = [cp.Variable((m, m), PSD=True) for _ in range(K)]
    problem = cp.Problem(
        cp.Maximize(sum(cp.trace(A[k] @ Z[k]) for k in range(K))),
        [cp.trace(Z[k]) == 1 for k in range(K)] + [np.eye(m) - sum(Z) >> 0],  # type: ignore[operator]
    )
    problem.solve(solver=cp.CLARABEL)
    if any(z.value is None for z in Z):
        return None
    # Repair: PSD part and unit trace; if sum Z_k exceeds I (by the solver's tolerance), use
    # X_k = V Z_k V^T / top + (1 - 1/top) q_k q_k^T with q_1..q_K orthonormal and orthogonal to
    # V: feasible, and worth at least value / top since every q_k^T R_k q_k >= 0.
    Zs = []
    for z in Z:
        evals, evecs = np.linalg.eigh(sym(np.asarray(z.value)))
        zp = (evecs * np.maximum(evals, 0.0)) @ evecs.T
        tr = float(np.trace(zp))
        if not tr > 0:
            return None
        Zs.append(zp / tr)
    top = float(np.linalg.eigvalsh(sum(Zs))[-1]) * (1.0 + 1e-12)
    if top > 1.0 and point.D < m + K:
        return None
    value = sum(float(np.sum(A[k] * Zs[k])) for k in range(K))
    return value / max(1.0, top) - K * point.round_guard()
