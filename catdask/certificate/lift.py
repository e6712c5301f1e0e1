"""The lifts of docs/design.md §4c: a bound on the compressed problem (on a subspace S that
contains the fitted axes) made into a bound on the full kernel problem."""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from .certify import one_blas_thread
from .eigen import sym, verified_top

_EPS = np.finfo(float).eps


def _delta(nu, eps, rho):
    """The root ``delta >= max(0, eps - nu)`` of ``delta (nu + delta - eps) = rho eps``."""
    b = nu - eps
    c = rho * eps
    if c <= 0:
        return max(0.0, -b)
    if b >= 0:
        return 2.0 * c / (b + math.sqrt(b * b + 4.0 * c))  # no cancellation
    return 0.5 * (-b + math.sqrt(b * b + 4.0 * c))


def lifted_dual_bound(R_S, W_S, nu, eps, rho=None, gamma2=None, Y=None, cross=None, *,
                      cache=None, key=None, above=math.inf):
    """Lemma 2 (docs/design.md §4c): an upper bound on ``max f`` of the full problem.
    Returns ``(bound on max f, rho)``."""
    with one_blas_thread():
        if cache is None or key is None:
            return _lifted_dual_bound(R_S, W_S, nu, eps, rho, gamma2, Y, cross, {}, above)
        if rho is None:
            rho = cache.get("rho")
        entry = cache.setdefault(("point", key), {})
        bound, rho = _lifted_dual_bound(R_S, W_S, nu, eps, rho, gamma2, Y, cross, entry,
                                        above)
        cache["rho"] = rho
        return bound, rho


def _dual_point(R_S, W_S, nu, Y):
    """``(Y_S, S_+)``: the PSD Y of the compressed dual point and the PSD factor in W's terms."""
    K = len(R_S)
    if Y is None:
        G = np.column_stack([R_S[k] @ W_S[:, k] for k in range(K)])
        Lam = sym(W_S.T @ G)
        evals, evecs = np.linalg.eigh(Lam - np.diag(nu))
        S_plus = (evecs * np.maximum(evals, 0.0)) @ evecs.T
        Y = sym(W_S @ S_plus @ W_S.T)
    else:  # a given PSD Y_S (its negative part, rounding only, dropped)
        evals, evecs = np.linalg.eigh(sym(Y))
        S_plus = np.diag(np.maximum(evals, 0.0))
        Y = sym((evecs * np.maximum(evals, 0.0)) @ evecs.T)
    return Y, S_plus


def _lifted_dual_bound(R_S, W_S, nu, eps, rho, gamma2, Y, cross, memo, above):
    """The bound; ``memo`` keeps this dual point's eps-free parts between calls (see caller)."""
    K, m = len(R_S), R_S.shape[1]
    if "Y" not in memo:
        Y, S_plus = _dual_point(R_S, W_S, nu, Y)
        memo["Y"], memo["S_norm"] = Y, float(np.linalg.norm(S_plus, 2))
    Y = memo["Y"]
    if rho is None:
        rho = np.array([verified_top(m, matrix=R_S[k])[0] for k in range(K)])
    guard = 64.0 * m * _EPS * (float(np.max(rho)) + memo["S_norm"])
    trace = float(np.trace(Y))
    tops = memo.setdefault("nu", {})
    margins = memo.setdefault("margin", {})
    bases = [sym(R_S[k] - Y) for k in range(K)]
    for k in range(K):
        if (k, guard) not in tops:  # (nu'_k, a Rayleigh quotient theta_k <= lambda_max)
            upper, v, _ = verified_top(m, matrix=bases[k])
            tops[(k, guard)] = (upper + guard, float(v @ bases[k] @ v))
    lemma2 = [tops[(k, guard)][0] + _delta(tops[(k, guard)][0], float(eps[k]),
                                           float(rho[k]) + guard) for k in range(K)]
    if (gamma2 is None and cross is None) or \
            0.5 * (trace + sum(tops[(k, guard)][1] for k in range(K))) >= above:
        total = trace
        for value in lemma2:  # summed in the order of the loop below
            total += value
        return 0.5 * total, rho
    total = trace
    for k in range(K):
        base = bases[k]
        nu_k = tops[(k, guard)][0]
        best = lemma2[k]  # Lemma 2
        if gamma2 is not None:
            mk = (k, guard, float(eps[k]), float(gamma2[k]))
            if mk not in margins:
                margins[mk] = _margin_lift(R_S[k], base, W_S[:, k], nu_k, float(eps[k]),
                                           float(gamma2[k]), guard)
            best = min(best, margins[mk])
        if cross is not None and cross[k] is not None and math.isfinite(float(eps[k])):
            Z_k, a_k = cross[k]
            best = min(best, _schur_lift(base, nu_k, float(eps[k]), Z_k, a_k, guard))
        total += best
    return 0.5 * total, rho


def _margin_lift(R_k, base, w, nu0, eps, g2, guard, factors=(1.0, 0.3, 0.1)):
    """Lemma 2' (docs/design.md §4c): the smallest ``nu''`` over a few ``t`` with

    ``nu'' >= lambda_max(R^S - Y_S + t P_u R^S P_u + s u u^T)`` (``base = R^S - Y_S``) and
    ``nu'' >= eps (1 + 1/t) + gamma^2 / s``, ``s = 2 gamma^2 / nu0``. At
    ``t0 = 2 eps / (nu0 - 2 eps)`` the second condition is ``nu'' >= nu0``, which the first
    implies; a smaller t trades the two. A margin of the compressed certificate off the axis
    absorbs ``t P_u R^S P_u + s u u^T`` entirely, and then the lift costs nothing.
    """
    if not (nu0 > 2.0 * eps and eps >= 0.0):
        return math.inf
    m = base.shape[0]
    u = w / np.linalg.norm(w)
    s = 2.0 * g2 / nu0
    Ru = R_k @ u
    PRP = sym(R_k - np.outer(u, Ru) - np.outer(Ru, u) + float(u @ Ru) * np.outer(u, u))
    t0 = 2.0 * eps / (nu0 - 2.0 * eps)
    best = math.inf
    for c in factors if eps > 0 else (0.0,):
        t = c * t0
        need = (eps * (1.0 + 1.0 / t) if eps > 0 else 0.0) + (g2 / s if s > 0 else 0.0)
        lam = verified_top(m, matrix=sym(base + t * PRP + s * np.outer(u, u)))[0] + guard
        best = min(best, max(lam, need))
    return best


def _schur_lift(base, nu0, eps, Z, a, guard, steps=30):
    """Lemma 2'' (docs/design.md §4c): the smallest ``nu''`` found with ``nu'' > eps`` and

    ``nu'' >= lambda_max(R^S - Y_S + (Z + a I) / (nu'' - eps))`` (``base = R^S - Y_S``),

    ``Z + a I >= C_k C_k^T`` the exact cross term. ``g(nu) = h(nu) - nu`` with
    ``h(nu) = lambda_max(base + Z' / (nu - eps))`` is convex and decreasing on ``nu > eps``, so
    Newton's method from a point with ``g > 0`` climbs to its root from below (``h'(nu) =
    -v^T Z' v / (nu - eps)^2``, v the top eigenvector); a point just above the root is then
    checked. All of this uses estimates: only the final value is verified, and it is valid
    whatever they were (``max(hi, verified)`` satisfies both conditions: a larger nu only
    shrinks ``Z' / (nu - eps)``).
    """
    m = base.shape[0]
    Zt = sym(Z) + a * np.eye(m)
    scale = max(abs(nu0), eps, float(np.max(np.abs(np.diag(Zt)))), _EPS)

    def g(nu):  # an estimate, for the search only: (g, g')
        w, V = scipy.linalg.eigh(sym(base + Zt / (nu - eps)), subset_by_index=[m - 1, m - 1],
                                 driver="evx")
        v = V[:, 0]
        return float(w[0]) - nu, -float(v @ Zt @ v) / (nu - eps) ** 2 - 1.0

    x = max(nu0, eps + 1e-9 * scale)
    gx, dg = g(x)
    for _ in range(steps):
        if gx <= 1e-12 * scale:
            break
        x = x - gx / dg
        gx, dg = g(x)
    hi, step = x, max(2.0 * abs(gx), 1e-12 * scale)
    for _ in range(60):  # g(hi) <= 0 (on estimates)
        if g(hi)[0] <= 0.0:
            break
        hi = x + step
        step *= 4.0
    else:
        return math.inf
    mat = sym(base + Zt / (hi - eps))
    extra = 8.0 * m * _EPS * float(np.max(np.abs(Zt))) / (hi - eps)
    upper = verified_top(m, matrix=mat)[0] + guard + extra
    return max(hi, upper)


def sqrt_lift_bound(upper_S, eps):
    """Lemma 3: ``max f <= (sqrt(2 U_S) + sqrt(sum eps))^2 / 2`` from any compressed bound."""
    if not math.isfinite(upper_S):
        return math.inf
    return 0.5 * (math.sqrt(max(2.0 * upper_S, 0.0)) + math.sqrt(float(np.sum(eps)))) ** 2
