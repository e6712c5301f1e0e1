"""The lifted (Burer & Park) relaxation of CQS, with a bound proved from its dual data.

Research code beside its benchmark (bench_relaxations.py), not a rung of the certificate:
for CQS it proves exactly what the SDP dual proves (docs/design.md §4d), so the library
does not carry it.

Burer & Park (arXiv:2208.03125) strengthen the block-diagonal relaxation of Gilman, Burer &
Balzano (the one :mod:`.sdp_dual` and :func:`.bounds.full_sdp_bound` use) by lifting the whole
vector ``x = vec(W)`` (``x[k D + a] = W[a, k]``): ``Y = x x^T``, one PSD block of order ``D K``
(``D K + 1`` with the homogenising row, which the sign symmetry below makes idle), the
orthogonality constraints as linear ones on Y, and Kronecker-product constraints. For
``max F(W) = sum_k w_k^T R_k w_k`` over orthonormal W (``F = 2 f``) the relaxation is

    max  sum_k tr(R_k Y_kk)  s.t.  Y PSD,  tr Y_kl = delta_kl,  sum_k Y_kk <= I_D,
         [optional, "kronecker"]  ||M(Y)||_2 <= 1,

with ``M(Y)[(a, l), (k, b)] = Y[(k, a), (l, b)]``, the realignment that turns ``x x^T`` into
``W (x) W^T`` (Kronecker product), whose singular values are all 1 on the Stiefel manifold.
Its dual, which is what is solved here (so no dual variables have to be read back from a
solver), is

    min  tr Lam + tr Z + tr Xi  s.t.  Lam (x) I_D + I_K (x) Z - 2 H(Q) - blockdiag(R_k) PSD,
         Z PSD,  Xi = [[P, Q], [Q^T, R']] PSD,

with ``x^T H(Q) x = <Q, M(x x^T)>`` (Xi = 0 without the Kronecker constraint).

**The bound, for any data** (:func:`lifted_bound`). For every orthonormal W, with
``C = Lam (x) I + I (x) Z - 2 H(Q) - blockdiag(R_k)`` and any Lam, Z, Xi:

    F(W) = x^T (Lam (x) I + I (x) Z - 2 H(Q)) x - x^T C x
         <= tr Lam + tr(Z W W^T) - 2 <Q, M(x x^T)> + K lambda_max(-C)
         <= tr Lam + KyFan_K(Z) + tr P + tr R' + 2 D K max(0, lambda_max(-Xi)) + K lambda_max(-C)

because ``x^T (Lam (x) I) x = sum_kl Lam_kl w_k^T w_l = tr Lam``, ``||x||^2 = K``,
``tr(Z W W^T)`` is at most the sum of the K largest eigenvalues of Z (Ky Fan), and
``<Xi, [[I, M], [M^T, I]]> >= lambda_min(Xi) 2 D K`` since that matrix is PSD with trace 2 D K
on the manifold. Each residual is charged: ``lambda_max(-C)`` and ``lambda_max(-Xi)`` are
proved by a Cholesky factorisation (:func:`.eigen.cholesky_upper`, Rump) plus the rounding of
forming C; the Ky Fan sum is a dense ``eigvalsh`` with the guard that
:func:`.bounds.full_sdp_bound` uses. So the solver's accuracy decides how tight the bound is,
never whether it holds.

**Why it proves no more than the block-diagonal relaxation on CQS** (docs/design.md §4d). The
objective and every constraint are invariant under ``w_k -> s_k w_k`` (``s_k = +-1``), which
maps Y to ``S Y S`` with ``S = diag(s) (x) I_D``, and ``M(S Y S)`` is ``M(Y)`` multiplied by
diagonal orthogonal matrices on both sides (the same norm). The average of the 2^K images of a
feasible Y is feasible (convexity) with the same objective, and it is block-diagonal. A
block-diagonal feasible Y is exactly a feasible point of the block-diagonal relaxation
(``X_k = Y_kk``), and the Kronecker constraint is then implied (``M(Y)^T M(Y) =
blockdiag(X_k^2) <= I``). So both relaxations have the *same value* on every CQS problem: the
lift can only re-prove what the SDP dual already bounds. More generally any relaxation
in the moments of order 2 of W is worth its restriction to block-diagonal Y: the off-diagonal
blocks never help this objective, and a stronger relaxation needs new valid constraints on
the ``X_k`` themselves or higher moments (:mod:`.moment`). Measured on wine, vehicle and
segmentation (class origin): ``benchmarks/bench_relaxations.py``.

Cost: one PSD block of order ``n = D K`` (SCS: an eigendecomposition of order n per iteration,
``n^3`` flops; ``2 n`` more with the Kronecker constraint) and ``(D K)^2 / 2`` variables; the
proof is one Cholesky of order n (and of 2n) and one ``eigvalsh`` of order D.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from catdask.certificate.eigen import NumericalFailure, cholesky_upper, sym

__all__ = ["LiftedBound", "LiftedDual", "estimated_size", "lifted_bound", "realign_adjoint",
           "solve_lifted_dual"]

_EPS = np.finfo(float).eps


@dataclass(frozen=True)
class LiftedDual:
    """Dual data of the lifted relaxation (units of the R_k; F = sum_k w_k^T R_k w_k).

    ``Xi`` is None without the Kronecker constraint. ``value`` is the solver's objective
    (an estimate of the relaxation's value of F, not a proof), ``seconds`` its wall time.
    """

    Lam: np.ndarray
    Z: np.ndarray
    Xi: np.ndarray | None
    value: float
    status: str
    seconds: float
    iterations: int | None


@dataclass(frozen=True)
class LiftedBound:
    """A proved bound on ``max f`` (f = F / 2) and the charges it contains (units of f)."""

    upper_bound: float
    trace_lam: float
    ky_fan_z: float
    kronecker: float
    residual_charge: float
    rounding: float


def estimated_size(D, K, kronecker=False):
    """(order of the largest PSD block, scalar unknowns, flops per SCS iteration) before any
    solve, for a caller deciding whether to run it."""
    n = D * K
    unknowns = K * (K + 1) // 2 + D * (D + 1) // 2
    blocks = [n, D]
    if kronecker:
        unknowns += n * (2 * n + 1)
        blocks.append(2 * n)
    return max(blocks), unknowns, float(sum(b ** 3 for b in blocks))


def _realign_permutation(D, K):
    """Indices such that ``H_unsym.ravel()[i] = Q.ravel()[perm[i]]``:
    ``H_unsym[(k, a), (l, b)] = Q[(a, l), (k, b)]`` (both n x n, n = D K)."""
    k, a, l, b = np.meshgrid(np.arange(K), np.arange(D), np.arange(K), np.arange(D),
                             indexing="ij")
    n = D * K
    rows = (a * K + l).ravel()
    cols = (k * D + b).ravel()
    return rows * n + cols  # flattened in the order (k, a, l, b) = C order of H_unsym


def realign_adjoint(Q, D, K):
    """``H(Q)`` (symmetric, n x n): ``x^T H(Q) x = <Q, M(x x^T)>`` for every x = vec(W)."""
    n = D * K
    H = np.asarray(Q, float).ravel()[_realign_permutation(D, K)].reshape(n, n)
    return sym(H)


def _proved_top(matrix):
    """A proved upper bound on lambda_max(matrix) (Cholesky, widening the slack on failure)."""
    estimate = float(np.linalg.eigvalsh(matrix)[-1])
    width = float(np.max(np.abs(matrix))) * matrix.shape[0] + _EPS
    for extra in (0.0, 1e-13, 1e-10, 1e-7, 1e-4):
        mu = cholesky_upper(matrix, estimate + extra * width)
        if mu is not None:
            return mu
    raise NumericalFailure("no Cholesky factorisation proved a bound on lambda_max")


def lifted_bound(R, Lam, Z, Xi=None):
    """Proved upper bound on ``max f = 1/2 max sum_k w_k^T R_k w_k`` from any dual data.

    Parameters
    ----------
    R : ndarray of shape (K, D, D)
        The class matrices (symmetric).
    Lam : ndarray of shape (K, K)
    Z : ndarray of shape (D, D)
    Xi : ndarray of shape (2 D K, 2 D K), optional
        Multiplier of the Kronecker constraint; its upper-right block Q enters through
        :func:`realign_adjoint`.

    Returns
    -------
    LiftedBound
        Valid whatever the data (the module docstring's inequality, every residual charged).
    """
    R = np.asarray(R, float)
    K, D, _ = R.shape
    n = D * K
    Lam, Z = sym(np.asarray(Lam, float)), sym(np.asarray(Z, float))
    kron_term = 0.0
    if Xi is None and not np.any(Lam - np.diag(np.diag(Lam))):
        # Lam diagonal: C is block-diagonal, lambda_max(-C) the largest over its K blocks
        # ``R_k - Lam_kk I - Z`` (K factorisations of order D instead of one of order D K).
        blocks = [(sym(R[k]) - Z - Lam[k, k] * np.eye(D),
                   np.abs(R[k]) + np.abs(Z) + abs(Lam[k, k]) * np.eye(D)) for k in range(K)]
    else:
        T = np.zeros((n, n))
        for k in range(K):
            T[k * D:(k + 1) * D, k * D:(k + 1) * D] = sym(R[k])
        C = np.kron(Lam, np.eye(D)) + np.kron(np.eye(K), Z) - T
        absolute = np.kron(np.abs(Lam), np.eye(D)) + np.kron(np.eye(K), np.abs(Z)) + np.abs(T)
        if Xi is not None:
            Xi = sym(np.asarray(Xi, float))
            H2 = 2.0 * realign_adjoint(Xi[:n, n:], D, K)
            C -= H2
            absolute += np.abs(H2)
            delta = max(0.0, _proved_top(-Xi))
            kron_term = float(np.trace(Xi[:n, :n]) + np.trace(Xi[n:, n:])) + 2.0 * n * delta
            kron_term += 4.0 * n * _EPS * float(np.sum(np.abs(np.diag(Xi))))
        blocks = [(-C, absolute)]
    # Forming -C adds at most 4 roundings per entry: a matrix E with |E| <= 5 eps |terms|,
    # ||E||_2 <= ||E||_F.
    residual = K * max(_proved_top(minus_c) + 5.0 * _EPS * float(np.linalg.norm(absolute))
                       for minus_c, absolute in blocks)
    z_evals = np.linalg.eigvalsh(Z)
    z_guard = 64.0 * D * _EPS * float(np.max(np.abs(z_evals), initial=0.0))
    ky_fan = float(np.sum(z_evals[-K:])) + K * z_guard
    trace_lam = float(np.trace(Lam))
    total = trace_lam + ky_fan + kron_term + residual
    # sums of at most K + 4 terms (the trace, the Ky Fan sum, the total)
    rounding = (K + 8.0) * _EPS * (abs(trace_lam) + abs(ky_fan) + abs(kron_term) + abs(residual)
                             + float(np.sum(np.abs(np.diag(Lam)))))
    return LiftedBound(upper_bound=0.5 * (total + rounding), trace_lam=0.5 * trace_lam,
                       ky_fan_z=0.5 * ky_fan, kronecker=0.5 * kron_term,
                       residual_charge=0.5 * residual, rounding=0.5 * rounding)


def solve_lifted_dual(R, *, kronecker=False, solver="SCS", eps=1e-8, max_iters=20000,
                      time_limit=60.0):
    """Solve the lifted relaxation's dual (cvxpy; SCS by default) and return its data.

    The class matrices are divided by ``s = max_k ||R_k||_2`` for the solve and the data
    multiplied back, so :func:`lifted_bound` takes them as they come. A solve stopped by its
    iteration or time limit still returns usable (looser) data; a solver with no answer
    raises :class:`~.eigen.NumericalFailure`.
    """
    import cvxpy as cp

    R = np.asarray(R, float)
    K, D, _ = R.shape
    n = D * K
    s = max(float(np.linalg.norm(R[k], 2)) for k in range(K)) or 1.0
    T = np.zeros((n, n))
    for k in range(K):
        T[k * D:(k + 1) * D, k * D:(k + 1) * D] = sym(R[k]) / s
    Lam = cp.Variable((K, K), symmetric=True)
    Z = cp.Variable((D, D), PSD=True)
    C = cp.kron(Lam, np.eye(D)) + cp.kron(np.eye(K), Z) - T
    objective = cp.trace(Lam) + cp.trace(Z)
    Xi = None
    if kronecker:
        Xi = cp.Variable((2 * n, 2 * n), PSD=True)
        perm = _realign_permutation(D, K)
        Hu = cp.reshape(cp.vec(Xi[:n, n:], order="C")[perm], (n, n), order="C")
        C = C - Hu - Hu.T
        objective = objective + cp.trace(Xi)
    problem = cp.Problem(cp.Minimize(objective), [0.5 * (C + C.T) >> 0])
    options = {"eps": eps, "max_iters": max_iters, "time_limit_secs": time_limit} \
        if solver == "SCS" else {}
    t0 = time.perf_counter()
    problem.solve(solver=solver, **options)
    seconds = time.perf_counter() - t0
    if Lam.value is None or Z.value is None:
        raise NumericalFailure(f"{solver} returned status {problem.status}")
    stats = problem.solver_stats
    return LiftedDual(
        Lam=np.asarray(Lam.value) * s, Z=np.asarray(Z.value) * s,
        Xi=None if Xi is None else np.asarray(Xi.value) * s,
        value=float(problem.value) * s if problem.value is not None else math.nan,
        status=str(problem.status), seconds=seconds,
        iterations=None if stats is None else stats.num_iters)
