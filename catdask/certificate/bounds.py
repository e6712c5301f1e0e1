"""Upper bounds on ``max f`` when W is not certified (docs/design.md section 4)."""

from __future__ import annotations

import math

import numpy as np

from .eigen import NumericalFailure, sym, top_eig



def trivial_bound(point):
    """``sum_k lambda_max(R_k) / 2`` (Y = 0 in the dual; lambda_max verified)."""
    return 0.5 * float(np.sum(point.lam_max_R) + point.K * point.round_guard())


def _subspace(point, directions):
    """Orthonormal V = [W, Q']: W plus the top complement direction of each R_k."""
    W = point.W
    if not directions:
        return W
    Q = np.column_stack(directions)
    Q = Q - W @ (W.T @ Q)
    U, s, _ = np.linalg.svd(Q, full_matrices=False)
    U = U[:, s > 1e-8 * s.max()]
    U = U - W @ (W.T @ U)  # re-orthogonalise against W
    U = np.linalg.qr(U)[0]
    return np.column_stack([W, U])


def _shifted_matvec(point, k, V, T):
    return lambda x: point.apply(k, x) - V @ (T @ (V.T @ x))


def _dual_value_estimate(point, T, V, v0s):
    """Estimated dual value and a subgradient at ``Y = V T V^T``,
    ``nu_k = lambda_max(R_k - V T V^T)`` (estimates: the search only)."""
    total = float(np.trace(T @ (V.T @ V)))
    g = np.eye(T.shape[0])
    for k in range(point.K):
        if point.dense:
            lam, v = top_eig(point.D, matrix=sym(point.R_all[k] - V @ T @ V.T))
        else:
            lam, v = point.top(_shifted_matvec(point, k, V, T), v0s[k],
                               shift=point.scale + 2.0 * float(np.linalg.norm(T, 2)))
            v0s[k] = v
        total += lam
        p = V.T @ v
        g -= np.outer(p, p)
    return total + point.K * point.round_guard(), g


def _dual_value_verified(point, T, V):
    """Dual value at ``Y = V T V^T`` with every ``nu_k`` a verified upper bound."""
    total = float(np.trace(T @ (V.T @ V)))
    shift = point.scale + 2.0 * float(np.linalg.norm(T, 2))
    for k in range(point.K):
        total += point.top_upper(
            matrix_of=lambda k=k: sym(point.R_all[k] - V @ T @ V.T),
            matvec=_shifted_matvec(point, k, V, T), shift=shift,
        )[0]
    return total + point.K * point.round_guard()


def reduced_bound(point, nu, directions, steps=None, out=None):
    """Cheap bound: dual value of ``Y = V T V^T`` minimised over PSD T (small)."""
    steps = point.budget.reduced_steps if steps is None else steps
    V = _subspace(point, directions)
    m = V.shape[1]
    if nu is None:
        nu = np.diag(point.Lam)
    T = np.zeros((m, m))
    evals, evecs = np.linalg.eigh(point.Lam - np.diag(nu))
    T[:point.K, :point.K] = (evecs * np.maximum(evals, 0.0)) @ evecs.T
    v0s = [None] * point.K
    target = 2.0 * point.f
    history, best_T = [np.inf], T
    for _ in range(steps):
        h, g = _dual_value_estimate(point, T, V, v0s)
        if h < history[-1]:
            best_T = T
        history.append(min(h, history[-1]))
        best = history[-1]
        gg = float(np.sum(g * g))
        if best - target <= point.tau or gg == 0:
            break
        if len(history) > 4 and history[-4] - best <= 0.02 * (best - target):
            break  # stalled (the target 2 f(W) is below the optimum unless W is certified)
        T = T - (h - target) / gg * g
        evals, evecs = np.linalg.eigh(sym(T))
        T = (evecs * np.maximum(evals, 0.0)) @ evecs.T
    if out is not None:  # the dual point, in the caller's units (Y = V T V^T)
        out["V"], out["T"] = V, best_T * point.unit
    if point.dense:
        return 0.5 * history[-1]  # dense eigh throughout: already verified
    return 0.5 * _dual_value_verified(point, best_T, V)


def full_sdp_bound(point):
    """Full SDP relaxation's dual (arXiv:2205.13653), solved by Clarabel, made safe."""
    import cvxpy as cp

    K, D = point.K, point.D
    R = point.R_all if point.R_all is not None else np.stack(
        [sym(point.apply(k, np.eye(D))) for k in range(K)])
    s = point.scale
    Y = cp.Variable((D, D), PSD=True)
    nu = cp.Variable(K)
    eye = np.eye(D)
    cons = [Y + nu[k] * eye - R[k] / s >> 0 for k in range(K)]
    prob = cp.Problem(cp.Minimize(cp.sum(nu) + cp.trace(Y)), cons)
    prob.solve(solver=cp.CLARABEL)
    if Y.value is None:
        raise NumericalFailure(f"Clarabel returned status {prob.status}")
    evals, evecs = np.linalg.eigh(sym(np.asarray(Y.value)) * s)
    Yp = (evecs * np.maximum(evals, 0.0)) @ evecs.T
    nus = np.array([np.linalg.eigvalsh(sym(R[k] - Yp))[-1] for k in range(K)])
    guard = 64.0 * D * np.finfo(float).eps * (s + float(np.max(np.maximum(evals, 0.0))))
    return 0.5 * float(np.sum(nus) + K * guard + np.trace(Yp))


def want_full_sdp(full_sdp, D, max_sdp_dim):
    """(whether to solve the full SDP, why not) for the given setting and size."""
    if full_sdp is False:
        return False, "not requested (full_sdp=False)"
    if full_sdp == "auto" and D > max_sdp_dim:
        return False, f"too large (D = {D} > max_sdp_dim = {max_sdp_dim})"
    try:
        import clarabel  # noqa: F401
        import cvxpy  # noqa: F401
    except ImportError:
        return False, "cvxpy/clarabel not installed (pip install catdask[sdp])"
    return True, ""


def relative_gap(upper, f, tau):
    """``(upper - f) / |f|`` clipped at 0 (absolute against ``tau`` when ``f = 0``)."""
    if not np.isfinite(upper):
        return math.inf
    excess = max(0.0, upper - f)
    if abs(f) > 0:
        return excess / abs(f)
    return 0.0 if excess <= tau else math.inf
