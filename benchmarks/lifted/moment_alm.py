"""A low-rank augmented Lagrangian (Burer-Monteiro) for the level-2 moment relaxation, numpy.

The relaxation is the conic problem SCS gets (:func:`catdask.certificate.moment.moment_problem`):
``min c^T x  s.t.  A x + s = b``, ``s = (0, svec(M_b))`` with each Gram block ``M_b`` PSD. Where
the relaxation is tight at the fitted W its optimum is rank one (the moments of W), so each
block is kept as a low-rank factor, ``M_b = V_b V_b^T`` (``V_b`` of shape ``(s_b, rank)``), and the
equality ``A x + s(V) = b`` by an augmented Lagrangian with multiplier z:

    L(x, V; z) = c^T x + z^T (A x + s(V) - b) + sigma / 2 ||A x + s(V) - b||^2.

The moments x enter L quadratically and are eliminated exactly for each V: ``A^T A`` is the
diagonal that the PSD rows give (each svec entry names one moment) plus ``U U^T`` with U the
columns of ``x_0 = 1`` and of the localising equalities, solved by Woodbury with a sparse LU of
``I + U^T D^{-1} U`` (order ``1 + n_mult``) factorised once. What is left, a function of V
alone, goes to L-BFGS; its gradient is ``2 smat(z + sigma r)_b V_b`` per block (the envelope
theorem: x is a minimiser). After each inner solve ``z += sigma r``. sigma stays fixed: growing
it 4x whenever the residual fell less than 4x (the textbook rule) diverged on wine (the
inner solves, stopped at their cap, are too rough for a large sigma's multiplier step).

z has exactly the layout of SCS's dual variables, so each outer iterate goes through the same
proof as SCS's output: ``MomentProblem.prove`` (three candidates, ``dual_bound``) and, when the
certificate has a target, the complementary-slackness polish of docs/design.md 4b. The proof
holds for any data, so the solver's accuracy decides how tight the bound is, never whether it
holds. Warm start at the fitted W: ``V_b = [v_b(Y), small noise]`` (Y the reduced W), x its
moments, z = 0. Cost per L-BFGS step: ``sum_b s_b^2 rank`` flops for ``V V^T`` and the gradient,
sparse products with A (one entry per svec row) and one Woodbury solve. Measured:
docs/design.md 4b ("A low-rank augmented Lagrangian for the moment level").
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.optimize
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from catdask.certificate.moment import _svec_blocks, moment_problem, slackness_setup
from catdask.certificate.moment_polish import basis_values
from catdask.certificate.moment_polish import polish as slackness_polish

__all__ = ["MomentAlmResult", "alm_moment_bound"]


@dataclass(frozen=True)
class MomentAlmResult:
    """Outcome of :func:`alm_moment_bound` (units of f)."""

    upper_bound: float  # proved by dual_bound from the best iterate (or its polish)
    primal_value: float  # c^T x at the last iterate, times -scale (not a proof)
    infeasibility: float  # ||A x + s(V) - b|| at the last iterate
    outer_iterations: int
    inner_iterations: int
    polish_rounds: int
    seconds: float
    history: tuple  # (outer iteration, proved relative gap, residual) per proof


class _Blocks:
    """svec positions of each Gram block's upper triangle in A's PSD rows (``_svec_blocks``,
    shifted past the zero-cone rows)."""

    def __init__(self, ident, first_row):
        self.sizes = ident.sizes()
        self.tri = [np.triu_indices(s) for s in self.sizes]
        pairs = list(_svec_blocks(ident))
        self.rows = [first_row + rows for rows, _ in pairs]
        self.weights = [weights for _, weights in pairs]

    def svec(self, V, out):
        for Vb, rows, w, (iu, ju) in zip(V, self.rows, self.weights, self.tri):
            out[rows] = w * (Vb @ Vb.T)[iu, ju]

    def smat(self, z, b):
        s, (iu, ju) = self.sizes[b], self.tri[b]
        M = np.zeros((s, s))
        M[iu, ju] = z[self.rows[b]] / self.weights[b]
        return M + np.triu(M, 1).T


def alm_moment_bound(R, W, *, rank=2, sigma=10.0, outer=40, inner=200, target_gap=1e-6,
                     prove_every=1, max_seconds=math.inf, polish=True, seed=0):
    """Rigorous bound on ``max 1/2 sum_k w_k^T R_k w_k`` over orthonormal W from the level-2
    moment relaxation solved by the low-rank augmented Lagrangian above, warm-started at W
    (the fitted axes). Stops when a proof reaches ``target_gap`` (relative to f(W)), after
    ``outer`` iterations or ``max_seconds``."""
    t0 = time.perf_counter()
    # The full Gram basis: an anchored one leaves some moments in no Gram block (only in the
    # localising equalities), and then A^T A has no diagonal part to eliminate them with.
    problem = moment_problem(R, W, "full")
    ident, A, b, c = problem.ident, problem.A, problem.b, -problem.f_vec
    n_zero = problem.cones["z"]
    blocks = _Blocks(ident, n_zero)
    m, n = A.shape
    # A^T A = D + U U^T: D from the PSD rows (one entry each), U the zero-cone rows.
    psd = A[n_zero:]
    d = np.asarray(psd.multiply(psd).sum(axis=0)).ravel()
    if np.any(d <= 0):
        raise AssertionError("a moment is in no Gram block; the elimination needs every one")
    U = A[:n_zero].T.tocsc()
    small = (sp.identity(n_zero, format="csc") + U.T @ sp.diags(1.0 / d) @ U).tocsc()
    lu = spla.splu(small)

    def solve_normal(rhs):  # (D + U U^T)^{-1} rhs by Woodbury
        t = rhs / d
        return t - (U @ lu.solve(U.T @ t)) / d

    Y = problem.basis.T @ np.asarray(W, dtype=float)
    Yo = np.linalg.svd(Y, full_matrices=False)
    values = basis_values(ident, Yo[0] @ Yo[2])
    rng = np.random.default_rng(seed)
    V = [np.column_stack([v] + [1e-3 * rng.standard_normal(len(v)) for _ in range(rank - 1)])
         for v in values]
    shapes = [Vb.shape for Vb in V]
    cuts = np.cumsum([a * r for a, r in shapes])[:-1]
    z = np.zeros(m)
    prove, system = slackness_setup(problem, W)
    s_full = np.zeros(m)
    state: dict = {}  # the last evaluation's moments and residual

    def evaluate(flat):
        Vs = [p.reshape(shape) for p, shape in zip(np.split(flat, cuts), shapes)]
        blocks.svec(Vs, s_full)
        x = solve_normal(-(c + A.T @ z) / sigma - A.T @ (s_full - b))
        r = A @ x + s_full - b
        value = c @ x + z @ r + 0.5 * sigma * (r @ r)
        zt = z + sigma * r
        grad = np.concatenate([(2.0 * blocks.smat(zt, i) @ Vb).ravel()
                               for i, Vb in enumerate(Vs)])
        state.update(x=x, r=r)
        return value, grad

    flat = np.concatenate([Vb.ravel() for Vb in V])
    best = (math.inf, None)
    history, n_inner, rounds = [], 0, 0
    for it in range(1, outer + 1):
        res = scipy.optimize.minimize(evaluate, flat, jac=True, method="L-BFGS-B",
                                      options={"maxiter": inner, "gtol": 1e-12, "ftol": 1e-16})
        flat, n_inner = res.x, n_inner + int(res.nit)
        evaluate(flat)
        r = state["r"]
        z = z + sigma * r
        res_norm = float(np.linalg.norm(r))
        if it % prove_every == 0 or it == outer:
            bound, data = problem.prove(z)
            gap = prove(data)[0]
            if polish and gap > target_gap:
                pgap, pbound, pdata, rounds = slackness_polish(
                    ident, problem.dual_data(z), problem.f_vec, system, prove, 0.5 * target_gap)
                if pgap < gap:
                    gap, bound = pgap, pbound
            history.append((it, gap, res_norm))
            if gap < best[0]:
                best = (gap, bound)
            if gap <= target_gap or time.perf_counter() - t0 >= max_seconds:
                break
    return MomentAlmResult(
        upper_bound=float(best[1].upper_bound), primal_value=-problem.scale * float(c @ state["x"]),
        infeasibility=res_norm, outer_iterations=it, inner_iterations=n_inner,
        polish_rounds=rounds, seconds=time.perf_counter() - t0, history=tuple(history))
