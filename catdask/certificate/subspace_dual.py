"""The SDP relaxation's dual at high D, in a growing subspace (docs/design.md §4, "At high D").

``Y = V T V^T`` with V a few times K wide grows round by round; the small model only *chooses*
T: the bound is the dual value at ``V T_+ V^T`` with verified ``nu_k``, valid whatever the choice.
"""

from __future__ import annotations

import importlib.util
import sys
import time

from typing import Any

import numpy as np

from .eigen import sym

#: Smoothing widths (relative to the scale) of the model's maxima, one L-BFGS run each.
SMOOTHING = (1e-2, 1e-3, 1e-4)


def have_small_sdp_solver():
    """Whether cvxpy and Clarabel are installed (the ``sdp`` extra), looked up without importing
    them (importing cvxpy costs about a second; the bound itself never needs it).
    """
    for name in ("cvxpy", "clarabel"):
        if name in sys.modules:
            if sys.modules[name] is None:  # blocked (``sys.modules[name] = None``)
                return False
            continue
        try:
            if importlib.util.find_spec(name) is None:
                return False
        except (ImportError, ValueError):
            return False
    return True


def _orthonormal_extension(V, U, drop=1e-6):
    """``[V, U']`` with U' an orthonormal basis of the part of U orthogonal to V."""
    U = U - V @ (V.T @ U)
    U = U - V @ (V.T @ U)  # twice is enough (Kahan)
    Q, s, _ = np.linalg.svd(U, full_matrices=False)
    keep = s > drop * max(float(s.max()), 1e-300) if s.size else s > 0
    return np.column_stack([V, Q[:, keep]])


def _complement_matvec(point, k, V):
    def matvec(x):
        y = x - V @ (V.T @ x)
        z = point.apply(k, y)
        return z - V @ (V.T @ z)

    return matvec


def _model(point, V, betas, RV):
    """``(A_k, H_k)``: ``V^T R_k V`` and ``C_k C_k^T = (R_k V)^T P (R_k V)`` (m x m)."""
    A, H = [], []
    for k in range(point.K):
        a = sym(V.T @ RV[k])
        A.append(a)
        H.append(sym(RV[k].T @ RV[k] - a @ a))
    return A, H


def _small_dual(point, V, betas, RV, T0, sigma0=None, smoothing=SMOOTHING):
    """T (m x m, PSD) minimising the Schur-complement model of docs/design.md §4, and the final ``log s``."""
    from scipy.optimize import minimize

    K, m = point.K, V.shape[1]
    A, H = _model(point, V, betas, RV)
    unit = max(point.scale, 1e-300)
    evals, evecs = np.linalg.eigh(sym(T0))
    L0 = evecs * np.sqrt(np.maximum(evals, 0.0))
    if sigma0 is None:
        lam_A = np.array([np.linalg.eigvalsh(a)[-1] for a in A])
        sigma0 = np.log(np.maximum(lam_A - betas, 1e-3 * unit) + 1e-3 * unit)
    x = np.concatenate([L0.ravel(), sigma0]) if L0.size else sigma0
    eye = np.eye(m)

    A, H = np.stack(A), np.stack(H)

    def value_grad(x, mu):
        # All K classes in one batched eigh (m is small: Python overhead dominates).
        L = x[: m * m].reshape(m, m)
        s = np.exp(np.clip(x[m * m:], -700.0, 700.0))
        T = L @ L.T
        lam, U = np.linalg.eigh(A - T + H / s[:, None, None])
        top = lam[:, -1]
        w = np.exp((lam - top[:, None]) / mu)
        z = w.sum(axis=1)
        p = w / z[:, None]
        soft = top + mu * np.log(z)
        a_k = betas + s
        hi = np.maximum(a_k, soft)
        ea, eb = np.exp((a_k - hi) / mu), np.exp((soft - hi) / mu)
        nu = hi + mu * np.log(ea + eb)
        q = eb / (ea + eb)
        P = np.matmul(U * p[:, None, :], np.swapaxes(U, 1, 2))  # (K, m, m)
        G = eye - np.tensordot(q, P, axes=1)
        dnu_ds = (1.0 - q) - q * np.einsum("kij,kij->k", P, H) / s**2
        total = float(np.trace(T)) + float(nu.sum())
        return total / unit, np.concatenate([(2.0 * G @ L).ravel(), dnu_ds * s]) / unit

    for mu in smoothing:
        res = minimize(value_grad, x, args=(mu * unit,), jac=True, method="L-BFGS-B",
                       options={"maxiter": point.budget.subspace_model_iterations,
                                "gtol": 1e-10})
        x = res.x
    L = x[: m * m].reshape(m, m)
    return L @ L.T, x[m * m:]


def subspace_dual_bound(point, directions, nu=None, *, rounds=None):
    """Upper bound on ``max f`` from the relaxation's dual restricted to a growing subspace."""
    t0 = time.perf_counter()
    K, D = point.K, point.D
    V = _orthonormal_extension(point.W, np.column_stack(directions)) if directions else point.W
    best: tuple[float, Any, Any] = (np.inf, None, None)
    estimates = []
    # Start: Y = W (Lambda - diag nu)_+ W^T, the complementary-slackness guess of the test.
    nu = np.diag(point.Lam) if nu is None else nu
    evals, evecs = np.linalg.eigh(point.Lam - np.diag(nu))
    T0 = np.zeros((V.shape[1], V.shape[1]))
    T0[:K, :K] = (evecs * np.maximum(evals, 0.0)) @ evecs.T
    v0s = [None] * K
    b0s = [None] * K
    sigma = None
    rounds = point.budget.subspace_rounds if rounds is None else rounds
    for r in range(max(1, rounds)):
        RV = [point.apply(k, V) for k in range(K)]
        betas = np.empty(K)
        if V.shape[1] < D:
            for k in range(K):
                betas[k], b0s[k] = point.top(_complement_matvec(point, k, V), b0s[k],
                                             shift=point.scale)
        else:
            betas[:] = 0.0
        # Later rounds start from the previous round's T and s (a warm start): the widest
        # smoothing is then skipped (docs/design.md §4).
        T, sigma = _small_dual(point, V, betas, RV, T0, sigma0=sigma,
                               smoothing=SMOOTHING if sigma is None else SMOOTHING[1:])
        Y_matvec_shift = point.scale + 2.0 * float(np.linalg.norm(T, 2))
        total = float(np.trace(T))
        tops, pairs = [], []
        for k in range(K):
            def matvec(x, k=k):
                return point.apply(k, x) - V @ (T @ (V.T @ x))

            lam, v = point.top(matvec, v0s[k], shift=Y_matvec_shift)
            v0s[k] = v
            pairs.append((lam, v))
            tops.append(v)
            total += lam
        estimates.append(0.5 * (total + K * point.round_guard()))
        if total < best[0]:
            best = (total, (V, T), pairs)
        if r + 1 < rounds and V.shape[1] < D:
            m_old = V.shape[1]
            V = _orthonormal_extension(V, np.column_stack(tops))
            T0 = np.zeros((V.shape[1], V.shape[1]))
            T0[:m_old, :m_old] = T  # warm start: the same Y, in the larger subspace
    _, (V, T), pairs = best
    # Verification: nu_k a proved upper bound on lambda_max(R_k - V T V^T) (T is PSD).
    shift = point.scale + 2.0 * float(np.linalg.norm(T, 2))
    total = float(np.trace(T @ (V.T @ V)))
    for k in range(K):
        total += point.top_upper(
            matrix_of=lambda k=k: sym(point.R_all[k] - V @ T @ V.T),
            matvec=lambda x, k=k: point.apply(k, x) - V @ (T @ (V.T @ x)),
            shift=shift, estimate=pairs[k],
        )[0]
    bound = 0.5 * (total + K * point.round_guard())
    return bound, {"m": V.shape[1], "rounds": len(estimates), "estimates": estimates,
                   "seconds": time.perf_counter() - t0, "V": V, "T": T}
