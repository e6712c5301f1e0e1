"""A low-rank augmented-Lagrangian (Burer-Monteiro) solver for the lifted relaxation, numpy only.

By the sign symmetry of :mod:`.burer_park` the lifted relaxation of CQS has the value of its
block-diagonal part, so this solver works on that part (what the lift reduces to):

    max  sum_k tr(R_k V_k V_k^T)  s.t.  ||V_k||_F = 1,  sum_k V_k V_k^T + U U^T = I_D,

with ``V_k`` of shape (D, r) (``X_k = V_k V_k^T``, the relaxation's ``Y_kk``) and ``U`` of shape
(D, D) turning ``sum_k X_k <= I`` into an equality. The unit norms are kept by the
parametrisation ``V_k = P_k / ||P_k||_F``; the equality by an augmented Lagrangian with
multiplier Z (D x D), each inner problem solved by L-BFGS (scipy). Z is exactly the dual
variable the proof needs: with ``nu_k = lambda_max(R_k - Z)``, ``(Lam = diag(nu), Z)`` is dual
data for :func:`.burer_park.lifted_bound`, which proves the bound (every residual charged),
so the solver's accuracy decides how tight the bound is, never whether it holds.

Warm start from the fitted W: ``P_k = [w_k, small noise]``, U spanning the complement of W.
Cost per inner iteration: K products ``R_k V_k`` (``D^2 r`` flops each) and ``D^2 (K r + D)`` for
the residual and ``2 D^3`` for ``U U^T`` and ``G U`` (the slack factor U is D x D, which is
what makes D = 784 slow); memory ``O(K D r + D^2)``. Per outer iteration: K ``eigvalsh`` of
order D for nu, the proof (K Cholesky factorisations of order D), and up to
``POLISH_MAX_DIM`` a second candidate Z fitted by least squares to complementary slackness at
the primal factors (``(nu_k I + Z - R_k) V_k = 0``, ``Z U = 0``); the smaller proved bound is
kept. Measured: docs/design.md §4d.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.optimize

from benchmarks.lifted.burer_park import LiftedBound, lifted_bound
from catdask.certificate.eigen import sym

__all__ = ["AlmResult", "alm_lifted_bound"]


@dataclass(frozen=True)
class AlmResult:
    """Outcome of :func:`alm_lifted_bound` (f units: f = F / 2)."""

    bound: LiftedBound
    primal_value: float  # 1/2 sum_k tr(R_k V_k V_k^T) at the last iterate (not a proof)
    infeasibility: float  # ||sum_k V_k V_k^T + U U^T - I||_F at the last iterate
    outer_iterations: int
    inner_iterations: int
    seconds: float


# Largest D for the complementary-slackness polish: a dense least-squares problem with D^2
# unknowns and (K r + D) D rows, about 2 (K r + D) D^5 flops (D = 19, K = 7: 0.3 GFlop;
# D = 30: 3 GFlop) per outer iteration.
POLISH_MAX_DIM = 30


def _polished_multiplier(A, V, U):
    """Z fitted by least squares to complementary slackness at the primal factors:
    ``(nu_k I + Z - A_k) V_k = 0`` and ``Z U = 0`` (unknowns nu and Z = sym(M), row-major
    vec: ``vec(Z V) = (I (x) V^T) vec(Z)``). Only a candidate: the proof recomputes nu. The
    equations say nothing about dual feasibility, so they leave a family of solutions where the
    factors have rank one (at a tight W every nu fits; measured: 1.4% above f on a random
    problem), and the least-norm one is taken; it helped where they have rank two (§4d)."""
    K, D, r = V.shape
    swap = np.zeros((D * D, D * D))
    swap[np.arange(D * D), (np.arange(D * D) % D) * D + np.arange(D * D) // D] = 1.0
    symmetrise = 0.5 * (np.eye(D * D) + swap)
    rows, rhs = [], []
    for k in range(K):
        nu_col = np.zeros((D * r, K))
        nu_col[:, k] = V[k].ravel()
        rows.append(np.hstack([nu_col, np.kron(np.eye(D), V[k].T) @ symmetrise]))
        rhs.append((A[k] @ V[k]).ravel())
    rows.append(np.hstack([np.zeros((D * U.shape[1], K)),
                           np.kron(np.eye(D), U.T) @ symmetrise]))
    rhs.append(np.zeros(D * U.shape[1]))
    theta = np.linalg.lstsq(np.vstack(rows), np.concatenate(rhs), rcond=None)[0]
    return sym(theta[K:].reshape(D, D))


def _dual_data(A, Z):
    """(Lam = diag(nu), Z) with ``nu_k = lambda_max(A_k - Z)``."""
    nu = np.array([np.linalg.eigvalsh(sym(A[k] - Z))[-1] for k in range(A.shape[0])])
    return np.diag(nu), Z


def alm_lifted_bound(R, W, *, rank=2, sigma=10.0, outer=40, inner=200, tol=1e-10,
                     seed=0, max_seconds=math.inf):
    """Solve the lifted relaxation by a low-rank ALM warm-started at W; prove its bound.

    Parameters
    ----------
    R : ndarray of shape (K, D, D)
        Class matrices (F = sum_k w_k^T R_k w_k, f = F / 2).
    W : ndarray of shape (D, K)
        The fitted axes (orthonormal columns).
    rank : int
        Columns r of each factor ``V_k``.
    sigma : float
        Initial penalty (on the scale ``max_k ||R_k||_2 = 1``); doubled when the residual does
        not fall by 4x in an outer iteration.
    outer, inner : int
        Outer (multiplier) iterations and L-BFGS iterations per inner solve.
    tol : float
        Stop when the residual ``||E||_F`` is below it and the proved bound stopped improving.
    max_seconds : float
        Stop after the outer iteration that passes this wall time (the bound is still proved).

    Returns
    -------
    AlmResult
        ``bound`` is the smallest bound proved over the outer iterations.
    """
    R = np.asarray(R, float)
    K, D, _ = R.shape
    s = max(float(np.linalg.norm(R[k], 2)) for k in range(K)) or 1.0
    A = R / s
    rng = np.random.default_rng(seed)
    P0 = 1e-3 * rng.standard_normal((K, D, rank))
    P0[:, :, 0] += np.asarray(W, float).T
    Q, _ = np.linalg.qr(np.column_stack([W, rng.standard_normal((D, D - K))]))
    U0 = np.column_stack([Q[:, K:], 1e-3 * rng.standard_normal((D, K))])
    sizes = (K * D * rank, D * D)
    Z = np.zeros((D, D))
    eye = np.eye(D)

    def unpack(theta):
        P = theta[:sizes[0]].reshape(K, D, rank)
        U = theta[sizes[0]:].reshape(D, D)
        norms = np.sqrt(np.einsum("kdr,kdr->k", P, P))
        return P, norms, P / norms[:, None, None], U

    def residual(V, U):
        return np.einsum("kdr,ker->de", V, V) + U @ U.T - eye

    def lagrangian(theta, Z, sigma):
        P, norms, V, U = unpack(theta)
        AV = np.einsum("kde,ker->kdr", A, V)
        E = residual(V, U)
        G = Z + sigma * E
        value = -np.einsum("kdr,kdr->", V, AV) + np.sum(Z * E) + 0.5 * sigma * np.sum(E * E)
        gV = -2.0 * AV + 2.0 * np.einsum("de,ker->kdr", G, V)
        radial = np.einsum("kdr,kdr->k", gV, V)
        gP = (gV - radial[:, None, None] * V) / norms[:, None, None]
        gU = 2.0 * G @ U
        return value, np.concatenate([gP.ravel(), gU.ravel()])

    theta = np.concatenate([P0.ravel(), U0.ravel()])
    best, previous_norm, inner_total = None, np.inf, 0
    t0 = time.perf_counter()
    for it in range(outer):
        out = scipy.optimize.minimize(lagrangian, theta, args=(Z, sigma), jac=True,
                                      method="L-BFGS-B",
                                      options={"maxiter": inner, "ftol": 1e-16, "gtol": 1e-13})
        theta, inner_total = out.x, inner_total + int(out.nit)
        _, _, V, U = unpack(theta)
        E = residual(V, U)
        Z = sym(Z + sigma * E)
        candidates = [Z]
        if D <= POLISH_MAX_DIM:
            candidates.append(_polished_multiplier(A, V, U))
        improved = False
        for candidate in candidates:
            Lam, Zd = _dual_data(A, candidate)
            proved = lifted_bound(R, Lam * s, Zd * s)
            if best is None or proved.upper_bound < best.upper_bound * (1 - 1e-12):
                best, improved = proved, True
        norm = float(np.linalg.norm(E))
        if (norm <= tol and not improved) or time.perf_counter() - t0 > max_seconds:
            break
        if norm > 0.25 * previous_norm:
            sigma = min(2.0 * sigma, 1e6)
        previous_norm = norm
    assert best is not None
    primal = 0.5 * s * float(np.einsum("kdr,kde,ker->", V, A, V))
    return AlmResult(bound=best, primal_value=primal, infeasibility=float(np.linalg.norm(E)),
                     outer_iterations=it + 1, inner_iterations=inner_total,
                     seconds=time.perf_counter() - t0)
