"""Second-level moment relaxation (Lasserre) of the CQS problem: a rigorous upper bound on max f.

The problem is ``max f(W) = 1/2 sum_k w_k^T R_k w_k`` over W (D x K) with ``W^T W = I_K``
(paper eqs. (5)-(6); docs/design.md section 4). The SDP-dual test certifies most optima; where it
is not tight (e.g. wine with ``origin="class"``), the level-2 moment / sum-of-squares relaxation
usually is. This module solves its sum-of-squares side directly,

    minimise gamma  s.t.  gamma - f(x) = sum_b v_b(x)^T Q_b v_b(x) + sum_j lambda_j h_j(x) m_j(x),
                          Q_b PSD,

an identity between polynomials of degree <= 4 in ``x = vec(W)`` where ``h_j`` are the
orthonormality constraints ``w_k^T w_l - delta_kl`` and ``m_j`` monomials of degree <= 2. Any
feasible ``(gamma, Q, lambda)`` gives ``f(W) <= gamma`` for every orthonormal W.

Two exact reductions keep it affordable:

* **Sign symmetry.** f and the constraint set are invariant under ``w_k -> -w_k`` for each k, so
  the certificate can be taken invariant too: only monomials of even degree in every ``w_k``
  appear, and the Gram matrix of the SOS splits into blocks by parity pattern: one block
  ``[1, x_ki x_kj]`` (size ``1 + K r (r+1)/2``), K blocks ``[x_ki]`` (size r) and one block
  ``[x_ki x_lj]`` per pair k < l (size r^2).
* **Common null space.** If every R_k vanishes on a subspace, max f over the Stiefel manifold equals
  max f over the Stiefel manifold of the complement (f is convex, so its maximum over the
  spectral-norm ball, the convex hull of the Stiefel manifold, is attained on the manifold, and
  projecting W onto the complement stays in the ball and keeps f). The problem is solved in
  ``r = max(rank, K)`` dimensions.

**Rigour.** A numerical solver returns an approximately feasible certificate. It is repaired:
each ``Q_b`` is projected onto the PSD cone, the free multipliers ``lambda`` are refitted by least
squares, and the remaining coefficient residual ``rho`` of the identity is charged to the bound:
for orthonormal W every monomial satisfies ``|x^alpha| <= 1``, so
``f(W) <= gamma + ||rho||_1`` (plus ``|lambda_min(Q_b)| * max ||v_b(x)||^2`` for rounding below
zero after the projection). The returned bound holds whatever the solver's accuracy; a loose
solve only makes it looser.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import lsqr

__all__ = [
    "MomentBound",
    "RelaxationTooLarge",
    "moment_relaxation_bound",
    "moment_relaxation_size",
    "MAX_PSD_BLOCK",
    "MAX_MOMENTS",
    "MAX_SOLVE_SECONDS",
]

# Size guard. Measured with SCS on this project's 2-core machines: wine (class origin; largest
# block 274, 30,577 moments) 9 s; vehicle (685, 200,071) about 160 s; segmentation after the
# null-space reduction (736, 248,921) about 425 s.
MAX_PSD_BLOCK = 800
MAX_MOMENTS = 300_000
# Solver time limit (s): segmentation (the largest case the guard admits) solves in about 230 s.
MAX_SOLVE_SECONDS = 900.0


class RelaxationTooLarge(ValueError):
    """The relaxation would exceed the size guard; the message says what it would cost."""


@dataclass(frozen=True)
class MomentBound:
    """Outcome of the level-2 moment relaxation.

    Attributes
    ----------
    upper_bound : float
        A rigorous upper bound on ``max f`` (scale ``1/2 sum_k w_k^T R_k w_k``).
    solver_value : float
        The solver's optimal value before the repair (not rigorous).
    residual_l1 : float
        ``||rho||_1`` of the repaired identity, in the units of f.
    psd_slack : float
        What rounding below zero after the PSD projection added to the bound, in units of f.
    n_moments : int
        Number of moments (even-parity monomials of degree <= 4) in the identity.
    block_sizes : tuple of int
        Sizes of the PSD blocks.
    reduced_dim : int
        Dimension after removing the common null space of the R_k (``D`` if none).
    solver : str
    status : str
        The solver's status string.
    seconds : float
    """

    upper_bound: float
    solver_value: float
    residual_l1: float
    psd_slack: float
    n_moments: int
    block_sizes: tuple
    reduced_dim: int
    solver: str
    status: str
    seconds: float


# --------------------------------------------------------------------------------------------
# Reduction and sizes


def _reduce(R, rank_tol=1e-10):
    """Project out the common null space of the R_k: returns (R reduced, r)."""
    K, D, _ = R.shape
    total = R.sum(axis=0)  # PSD sum: its null space is the common null space
    evals, evecs = np.linalg.eigh((total + total.T) / 2)
    keep = evals > rank_tol * max(evals[-1], 0.0)
    r = max(int(keep.sum()), K)
    if r >= D:
        return R, D
    Q = evecs[:, -r:]  # the top r eigenvectors span the range (plus null directions if r > rank)
    # Batched matrix products: an unoptimised einsum over "di,kde,ej" costs K D^2 r^2 (4 s at
    # D = 178, K = 3, measured), the two products 2 K D^2 r.
    return Q.T @ R @ Q, r


def _block_sizes(K, r):
    return [1 + K * r * (r + 1) // 2] + [r] * K + [r * r] * (K * (K - 1) // 2)


def _count_moments(K, r):
    """Even-parity monomials of degree <= 4 in K blocks of r variables."""
    pairs = r * (r + 1) // 2  # degree-2 monomials inside one block
    quads = math.comb(r + 3, 4)  # degree-4 monomials inside one block
    return 1 + K * pairs + K * quads + math.comb(K, 2) * pairs * pairs


def moment_relaxation_size(R):
    """Size of the level-2 relaxation for class matrices R (K, D, D) without building it.

    Returns
    -------
    dict
        ``reduced_dim``, ``n_moments``, ``block_sizes`` and ``largest_block``.
    """
    R = _as_stack(R)
    _, r = _reduce(R)
    K = R.shape[0]
    sizes = _block_sizes(K, r)
    return {"reduced_dim": r, "n_moments": _count_moments(K, r), "block_sizes": sizes,
            "largest_block": max(sizes)}


def _as_stack(R):
    R = np.asarray(R, dtype=float)
    if R.ndim != 3 or R.shape[1] != R.shape[2]:
        raise ValueError(f"R must have shape (K, D, D). Got {R.shape} instead.")
    if not np.all(np.isfinite(R)):
        raise ValueError("R contains NaN or infinite values.")
    K, D, _ = R.shape
    if K > D:
        raise ValueError(f"Need K <= D for orthonormal W. Got K = {K} and D = {D}.")
    return (R + R.transpose(0, 2, 1)) / 2


# --------------------------------------------------------------------------------------------
# The polynomial identity as sparse linear maps onto monomial coefficients


class _Monomials:
    """Index of monomials (sorted tuples of variable numbers ``k * r + i``)."""

    def __init__(self):
        self.index = {(): 0}

    def __call__(self, mono):
        key = tuple(sorted(mono))
        idx = self.index.get(key)
        if idx is None:
            idx = self.index[key] = len(self.index)
        return idx

    def __len__(self):
        return len(self.index)


def _bases(K, r):
    """The monomial bases v_b (lists of tuples), block by block, in ``_block_sizes`` order."""
    var = lambda k, i: k * r + i  # noqa: E731
    b0 = [()] + [(var(k, i), var(k, j)) for k in range(K) for i in range(r) for j in range(i, r)]
    linear = [[(var(k, i),) for i in range(r)] for k in range(K)]
    cross = [[(var(k, i), var(l, j)) for i in range(r) for j in range(r)]
             for k in range(K) for l in range(k + 1, K)]
    return [b0] + linear + cross


def _gram_map(basis, monos):
    """Sparse A with ``(A vec_F(Q))_alpha = sum_{v_i v_j = x^alpha} Q_ij`` (Q symmetric)."""
    s = len(basis)
    rows, cols = [], []
    for i in range(s):
        bi = basis[i]
        for j in range(i, s):
            a = monos(bi + basis[j])
            rows.append(a)
            cols.append(i + j * s)
            if i != j:
                rows.append(a)
                cols.append(j + i * s)
    return rows, cols, s * s


def _multiplier_map(K, r, b0, cross_bases, monos):
    """Sparse columns ``coeff(h_j m_j)`` for every constraint-times-monomial product."""
    var = lambda k, i: k * r + i  # noqa: E731
    rows, cols, vals = [], [], []
    col = 0
    # h_kk = sum_i x_ki^2 - 1, times every parity-0 monomial of degree <= 2.
    for k in range(K):
        for m in b0:
            for i in range(r):
                rows.append(monos(m + (var(k, i), var(k, i))))
                cols.append(col)
                vals.append(1.0)
            rows.append(monos(m))
            cols.append(col)
            vals.append(-1.0)
            col += 1
    # h_kl = sum_i x_ki x_li (k < l), times every monomial x_k'i x_l'j of the same parity.
    pair = 0
    for k in range(K):
        for l in range(k + 1, K):
            for m in cross_bases[pair]:
                for i in range(r):
                    rows.append(monos(m + (var(k, i), var(l, i))))
                    cols.append(col)
                    vals.append(1.0)
                col += 1
            pair += 1
    return rows, cols, vals, col


def _objective_coefficients(R, monos):
    K, r, _ = R.shape
    f = {}
    for k in range(K):
        for i in range(r):
            f[monos((k * r + i, k * r + i))] = 0.5 * R[k, i, i]
            for j in range(i + 1, r):
                f[monos((k * r + i, k * r + j))] = R[k, i, j]
    return f


# --------------------------------------------------------------------------------------------
# Solve and repair


def moment_relaxation_bound(R, *, solver="SCS", eps=1e-8, max_iters=200_000,
                            max_seconds=MAX_SOLVE_SECONDS, max_psd_block=MAX_PSD_BLOCK,
                            max_moments=MAX_MOMENTS, verbose=False):
    """Rigorous upper bound on ``max 1/2 sum_k w_k^T R_k w_k`` over orthonormal W (level 2).

    Parameters
    ----------
    R : array-like of shape (K, D, D)
        The class matrices (symmetric PSD).
    solver : str, default="SCS"
        A cvxpy SDP solver (``"SCS"`` or ``"CLARABEL"``). Needs the ``sdp`` extra.
    eps : float, default=1e-8
        Solver accuracy (SCS ``eps_abs``/``eps_rel``, Clarabel ``tol_gap_*``). Measured on
        segmentation with the class origin: 1e-8 and 1e-9 give the same rigorous gap (1.6e-7)
        after the repair; 1e-8 took 199 s, 1e-9 230 s, or far longer when SCS narrowly misses it.
    max_iters : int, default=200000
        SCS iteration limit.
    max_seconds : float, default=MAX_SOLVE_SECONDS
        Solver time limit. A solve stopped by it still gives a rigorous bound (the repair below
        charges whatever residual is left), only a looser one. Measured on segmentation with
        the class origin: SCS met ``eps=1e-9`` after about 750 iterations in one run and, from
        the same data up to round-off (1e-15), missed it by a hair at the same point in
        another, then wandered past 20 minutes; the limit bounds such runs.
    max_psd_block, max_moments : int
        Size guard: larger relaxations raise :class:`RelaxationTooLarge` before anything is built.
    verbose : bool, default=False
        Show the solver's log.

    Returns
    -------
    MomentBound

    Raises
    ------
    RelaxationTooLarge
        When the relaxation exceeds the size guard (the message gives its size).
    ImportError
        When cvxpy is not installed (``pip install catdask[sdp]``).
    """
    t0 = time.perf_counter()
    R = _as_stack(R)
    size = moment_relaxation_size(R)
    if size["largest_block"] > max_psd_block or size["n_moments"] > max_moments:
        raise RelaxationTooLarge(
            f"the level-2 moment relaxation would need {size['n_moments']:,} moments and a PSD "
            f"block of size {size['largest_block']} (K = {R.shape[0]}, reduced D = "
            f"{size['reduced_dim']}); the guard allows {max_moments:,} moments and blocks up to "
            f"{max_psd_block} (for scale: 200,071 moments / block 685 took about 160 s with SCS "
            "on 2 cores)"
        )
    try:
        import cvxpy as cp
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("the moment relaxation needs cvxpy: pip install 'catdask[sdp]'") from exc

    scale = float(max(np.linalg.norm(Rk, 2) for Rk in R)) or 1.0
    Rr, r = _reduce(R / scale)
    K = Rr.shape[0]
    monos = _Monomials()
    bases = _bases(K, r)
    gram_maps = [_gram_map(b, monos) for b in bases]
    m_rows, m_cols, m_vals, n_mult = _multiplier_map(K, r, bases[0], bases[1 + K:], monos)
    f_coef = _objective_coefficients(Rr, monos)
    n = len(monos)
    A_Q = [sp.csr_matrix((np.ones(len(rw)), (rw, cl)), shape=(n, nc)) for rw, cl, nc in gram_maps]
    A_lam = sp.csr_matrix((m_vals, (m_rows, m_cols)), shape=(n, n_mult))
    f_vec = np.zeros(n)
    for a, c in f_coef.items():
        f_vec[a] += c
    e0 = np.zeros(n)
    e0[0] = 1.0

    # gamma e0 - f = sum_b A_b vec(Q_b) + A_lam lambda
    Qs = [cp.Variable((len(b), len(b)), PSD=True) for b in bases]
    lam = cp.Variable(n_mult)
    gamma = cp.Variable()
    identity = sum(A @ cp.vec(Q, order="F") for A, Q in zip(A_Q, Qs)) + A_lam @ lam
    prob = cp.Problem(cp.Minimize(gamma), [identity == gamma * e0 - f_vec])
    solver = solver.upper()
    opts = ({"eps_abs": eps, "eps_rel": eps, "max_iters": max_iters,
             "time_limit_secs": float(max_seconds)} if solver == "SCS" else
            {"tol_gap_abs": eps, "tol_gap_rel": eps, "tol_feas": eps,
             "time_limit": float(max_seconds)})
    with warnings.catch_warnings():
        # "Solution may be inaccurate" (e.g. stopped by the time limit): the repair below makes
        # any returned point a rigorous bound; `status` records what the solver said.
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        prob.solve(solver=solver, verbose=verbose, **opts)
    if gamma.value is None:
        raise RuntimeError(f"the moment relaxation solver returned no solution ({prob.status})")

    # Repair: PSD projection, least-squares multipliers, residual charged to the bound.
    g = float(gamma.value)
    q_parts, psd_slack = [], 0.0
    bound_sq = [1.0 + K] + [1.0] * (len(bases) - 1)  # max ||v_b(x)||^2 over orthonormal W
    for Q, c in zip(Qs, bound_sq):
        Qv = (Q.value + Q.value.T) / 2
        w, V = np.linalg.eigh(Qv)
        Qp = (V * np.clip(w, 0.0, None)) @ V.T
        Qp = (Qp + Qp.T) / 2
        lmin = float(np.linalg.eigvalsh(Qp)[0])
        psd_slack += c * max(0.0, -lmin)
        q_parts.append(Qp.ravel(order="F"))
    target = g * e0 - f_vec - sum(A @ q for A, q in zip(A_Q, q_parts))
    lam0 = np.asarray(lam.value, dtype=float)
    sol = lsqr(A_lam, target - A_lam @ lam0, atol=1e-15, btol=1e-15, iter_lim=10 * n_mult)
    lam_fit = lam0 + sol[0]
    resid = target - A_lam @ lam_fit
    # Rounding in forming the residual itself: a few ulps of the largest terms involved.
    rounding = 64 * np.finfo(float).eps * (abs(g) + np.abs(f_vec).sum() + np.abs(resid).sum())
    l1 = float(np.abs(resid).sum())
    upper = scale * (g + l1 + psd_slack + rounding)
    return MomentBound(
        upper_bound=float(upper), solver_value=scale * g, residual_l1=scale * l1,
        psd_slack=scale * psd_slack, n_moments=n, block_sizes=tuple(len(b) for b in bases),
        reduced_dim=r, solver=solver, status=str(prob.status),
        seconds=time.perf_counter() - t0,
    )
