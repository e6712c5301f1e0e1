"""The verified SDP-dual test (Gilman, Burer & Balzano, arXiv:2205.13653; docs/design.md 4, 3c)."""

from __future__ import annotations

import math

import numpy as np
from .eigen import sym, top_eig
from .kelley_lp import solve_kelley_lp


def _complement_top(point, k):
    """lambda_max(P R_k P) on the complement of W (Rayleigh quotient of a unit q with
    W^T q = 0: a lower bound whatever the eigen-solver's accuracy), and q."""
    W, D = point.W, point.D
    big = 3.0 * point.scale
    if point.dense:
        PR = point.R_all[k] - W @ (W.T @ point.R_all[k])
        PRP = PR - (PR @ W) @ W.T
        lam, q = top_eig(D, matrix=sym(PRP) - big * (W @ W.T))
    else:
        def matvec(x):
            y = x - W @ (W.T @ x)
            z = point.apply(k, y)
            return z - W @ (W.T @ z) - big * (W @ (W.T @ x))

        lam, q = point.top(matvec, shift=point.scale)
    q = q - W @ (W.T @ q)  # exactly orthogonal to W, then the exact Rayleigh quotient
    q /= np.linalg.norm(q)
    return float(q @ point.apply(k, q)), q


def _deflation(point, nu):
    """Weight that sends w_k to the bottom of the spectrum of the restricted M_k."""
    return 3.0 * point.mbound(nu) + point.scale


def _restricted_matrix(point, k, nu):
    """``P_k M_k(nu) P_k - big w_k w_k^T`` as a dense D x D matrix (``P_k = I - w_k w_k^T``)."""
    W, w = point.W, point.W[:, k]
    M = point.R_all[k] - W @ (point.Lam - np.diag(nu)) @ W.T - nu[k] * np.eye(point.D)
    Mw = M @ w
    PMP = M - np.outer(w, Mw) - np.outer(Mw, w) + (w @ Mw) * np.outer(w, w)
    return sym(PMP) - _deflation(point, nu) * np.outer(w, w)


def _restricted_matvec(point, k, nu):
    """Matvec of :func:`_restricted_matrix` without forming it."""
    W, w = point.W, point.W[:, k]
    S = point.Lam - np.diag(nu)
    big = _deflation(point, nu)

    def matvec(x):
        y = x - w * (w @ x)
        z = point.apply(k, y) - W @ (S @ (W.T @ y)) - nu[k] * y
        return z - w * (w @ z) - big * w * (w @ x)

    return matvec


def _margin_pieces(point, nu, v0s):
    """Margin t(nu) and one affine majorant (cut) per piece, from the eigenvectors.
    Returns ``(t, cuts, pairs)`` with cuts ``(c, g)`` meaning ``t(nu') <= c + g @ nu'`` for all
    nu', and ``pairs`` the estimated top pair (value, vector) of each restricted M_k(nu) (what
    :func:`verify_nu` proves by Cholesky above ``dense_max_dim``). The cuts are Rayleigh
    quotients, so they are valid even for inexact eigenvectors."""
    W = point.W
    cuts = []
    # (a): lambda_min(Lambda - diag nu) <= u^T Lambda u - sum_j u_j^2 nu_j.
    lam, U = np.linalg.eigh(point.Lam - np.diag(nu))
    u = U[:, 0]
    cuts.append((float(u @ point.Lam @ u), -(u ** 2)))
    values = [float(lam[0])]
    pairs = []
    # (b): -lambda_max(Q^T M_k Q) <= -v^T M_k(nu') v for a unit v orthogonal to w_k
    # (no such v when D = 1).
    for k in range(point.K) if point.D > 1 else ():
        if point.dense:
            estimate, v = top_eig(point.D, matrix=_restricted_matrix(point, k, nu))
        else:
            estimate, v = point.top(_restricted_matvec(point, k, nu), v0s[k],
                                    shift=2.0 * point.mbound(nu))
            v0s[k] = v
        pairs.append((estimate, v))
        v = v - W[:, k] * (W[:, k] @ v)
        v /= np.linalg.norm(v)
        p = W.T @ v
        c0 = float(v @ point.apply(k, v) - p @ point.Lam @ p)
        g = p ** 2
        g[k] -= v @ v
        # -v^T M_k(nu') v = -c0 - sum_j p_j^2 nu'_j + nu'_k
        cuts.append((-c0, -g))
        values.append(float(-c0 - g @ nu))
    return min(values), cuts, pairs


def _nu_box(point):
    """Necessary interval for each nu_k (padded by tau), whether it is empty, and the top
    complement direction of each R_k (used by the reduced bound)."""
    K, tau, Lam = point.K, point.tau, point.Lam
    hi = np.diag(Lam).copy()
    lo = np.empty(K)
    witness = None
    directions = []
    if K < point.D:
        for k in range(K):
            lo[k], q = _complement_top(point, k)
            directions.append(q)
            if lo[k] > hi[k] + tau and (witness is None or lo[k] - hi[k] > witness[1]):
                witness = (k, lo[k] - hi[k])
    else:
        # K = D: shifting all nu by a constant leaves (b) unchanged; some feasible nu lies
        # above lambda_min(Lambda) + min_j (w_j^T R_k w_j - Lambda_jj) (docs/design.md 3c).
        WRW = np.stack([point.W.T @ point.apply(k, point.W) for k in range(K)])
        lmin = np.linalg.eigvalsh(Lam)[0]
        for k in range(K):
            d = np.diag(WRW[k]) - np.diag(Lam)
            d[k] = 0.0
            lo[k] = lmin + min(0.0, d.min())
    return lo - tau, hi + tau, witness, directions


def _kelley(point, lo, hi):
    """Kelley cutting planes on the concave margin: (best nu, LP upper value, iterations, the
    estimated top pairs at the best nu, the Rayleigh quotients ``v^T M_k v`` of its cuts)."""
    K, tau = point.K, point.tau
    nu = 0.5 * (lo + hi)
    v0s = [None] * K
    A_ub, b_ub = [], []
    best_t, best_nu, upper = -np.inf, nu.copy(), np.inf
    best_pairs, best_low = None, None
    s_cap = float(np.max(hi - lo)) + point.scale + 1.0
    for it in range(point.budget.kelley_max_iter):
        t, cuts, pairs = _margin_pieces(point, nu, v0s)
        if t > best_t:
            best_t, best_nu, best_pairs = t, nu.copy(), pairs
            # cut (c, g) of class k: -v^T M_k(nu) v = c + g @ nu
            best_low = np.array([-(c + g @ nu) for c, g in cuts[1:]])
        for c, g in cuts:  # s <= c + g @ nu  <=>  -g @ nu + s <= c
            A_ub.append(np.append(-g, 1.0))
            b_ub.append(c)
        # max s over the cuts (linprog(method="highs")'s answer, without its overhead)
        status, x, fun = solve_kelley_lp(np.array(A_ub), np.array(b_ub), lo, hi, s_cap)
        if status != 0:
            break
        upper, nu = -fun, x[:K]
        if best_t >= 0 and best_t >= 0.5 * upper:
            break  # certifiable with a comfortable margin
        # Converged; or proved that no nu reaches margin -tau (the LP value bounds the margin
        # everywhere) and came within 10% of the best margin, whose nu seeds the reduced bound.
        if upper - best_t <= max(1e-3 * tau, 0.1 * -upper):
            break
    return best_nu, upper, it + 1, best_pairs, best_low


def sdp_dual_test(point):
    """Search nu (Kelley cutting planes, docs/design.md 3c) at ``point``, then verify it by
    eigenvalues.
    Returns a dict: ``passed``, ``margin`` (normalised; verified, or estimated while deferred),
    ``nu``, ``bound`` (the verified dual bound at nu, or None), ``bound_low`` and ``verify`` (None
    unless deferred), ``reason``, ``iterations``, ``directions`` (the top complement direction of
    each R_k) and ``refuted`` (the nu interval is empty: a better W exists)."""
    lo, hi, witness, directions = _nu_box(point)
    if witness is not None:
        k, excess = witness
        return {
            "passed": False, "margin": -excess, "nu": None, "bound": None, "iterations": 0,
            "directions": directions, "bound_low": None, "verify": None, "refuted": True,
            "reason": (
                f"nu interval empty for class {k}: a direction orthogonal to W raises "
                f"w_{k}^T R_{k} w_{k} by {excess * point.unit:.3g}, so a better W exists (W is "
                "not a global maximiser)"
            ),
        }
    lo = np.minimum(lo, hi)
    best_nu, upper, iterations, pairs, rayleigh = _kelley(point, lo, hi)
    result = {"nu": best_nu, "iterations": iterations, "directions": directions,
              "bound_low": None, "verify": None, "refuted": False}
    if upper < -point.tau and not point.dense and pairs is not None and point.D > 1:
        # No nu passes: verifying this one (K eigenvalue bounds of order D) can only give its
        # dual bound, which often cannot beat the subspace bound; let the caller decide.
        estimated = _nu_bound(point, best_nu, [c for c, _ in pairs])
        guard = 64.0 * point.D * np.finfo(float).eps * point.mbound(best_nu)
        low = _nu_bound(point, best_nu, rayleigh - guard)
        result.update(passed=False, margin=estimated["margin"], bound=None,
                      bound_low=low["bound"] - point.K * point.round_guard(),
                      verify=lambda: verify_nu(point, best_nu, pairs))
    else:
        verified = verify_nu(point, best_nu, None if point.dense else pairs,
                             known=pairs if point.dense else None)
        result.update(passed=verified["margin"] >= -point.tau, margin=verified["margin"],
                      bound=verified["bound"])
    if result["passed"]:
        reason = "certified"
    elif upper < -point.tau:
        reason = (
            f"not certified: no nu passes the SDP-dual test (best margin <= "
            f"{upper / point.scale:.2e} * scale; the relaxation is not tight at W or W is not "
            "global)"
        )
    else:
        reason = (
            f"not certified: best nu found has verified margin "
            f"{result['margin'] / point.scale:.2e} * scale < -tol"
        )
    residual = max(point.asymmetry, point.stationarity)
    if not result["passed"] and residual > point.tol:
        # Not even stationary (paper eq. (50)): a nearby W is better.
        reason += f"; W is not a stationary point (first-order residual {residual:.1e})"
    result["reason"] = reason
    return result


def _nu_bound(point, nu, tops):
    """Margin at nu and the dual bound it yields, given ``tops[k] >= lambda_max(Q^T M_k Q)``."""
    W, K = point.W, point.K
    S = point.Lam - np.diag(nu)
    evals, evecs = np.linalg.eigh(S)
    m_a = float(evals[0])
    bmax = np.empty(K)
    for k in range(K):
        w = W[:, k]
        Mw = point.apply(k, w) - W @ (S @ (W.T @ w)) - nu[k] * w
        a = float(w @ Mw)
        if point.D == 1:  # M_k is the 1 x 1 matrix [a]
            bmax[k] = a
            continue
        c = float(tops[k])
        b = float(np.linalg.norm(Mw - w * a))
        bmax[k] = 0.5 * (a + c) + math.hypot(0.5 * (a - c), b)
    margin = min(m_a, float(-bmax.max()))
    # Dual-feasible point: Y = W S_+ W^T (S_+ >= S, so M_k only decreases), nu_k + bmax_k.
    S_plus = (evecs * np.maximum(evals, 0.0)) @ evecs.T
    bound2 = float(np.sum(nu + bmax) + np.trace(S_plus @ (W.T @ W))) + K * point.round_guard()
    return {"margin": margin, "bound": 0.5 * bound2}


def verify_nu(point, nu, estimates=None, known=None):
    """Verified margin at nu by eigenvalue upper bounds, and the dual bound it yields."""
    if known is not None and point.D > 1 and point.verifies_dense(point.D):
        return _nu_bound(point, nu, [point.top_upper_known(pair)[0] for pair in known])
    tops = []
    for k in range(point.K if point.D > 1 else 0):
        tops.append(point.top_upper(
            matrix_of=lambda k=k: _restricted_matrix(point, k, nu),
            matvec=_restricted_matvec(point, k, nu), shift=2.0 * point.mbound(nu),
            estimate=None if estimates is None else estimates[k],
        )[0])
    if point.D == 1:
        tops = [0.0] * point.K
    return _nu_bound(point, nu, tops)
