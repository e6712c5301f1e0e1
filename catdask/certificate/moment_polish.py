"""Complementary-slackness polish of the moment certificate's dual data (docs/design.md 4b)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import lsqr

from .moment_dual import MomentDual

# LSQR per round: at most 300 iterations, stopping once the residual is 1e-4 of the round's
# starting one (the next round starts from what is left; the last round's is charged by the
# proof).
LSQR_ITERS = 300
LSQR_RTOL = 1e-4
# A round must at least halve the proved gap, or the polish stops (alternating projections
# stall, sublinearly, when the iterate is not yet near the dual optimal face).
MIN_PROGRESS = 0.5


def basis_values(ident, Y):
    """``v_b(Y)`` for every Gram block: each basis monomial's value at the point Y (r x K)."""
    y = np.append(np.asarray(Y, dtype=float).T.ravel(), 1.0)  # y[-1] = 1 pads shorter tuples
    out = []
    for basis in ident.bases:
        padded = np.full((len(basis), 2), -1, dtype=np.int64)
        for i, mono in enumerate(basis):
            padded[i, :len(mono)] = mono
        out.append(np.prod(y[padded], axis=1))
    return out


def slackness_system(ident, Y):
    """Sparse map ``(triu Q_b ..., lambda) -> (identity coefficients but the constant, Q_b u_b)``:
    ``(L, keep, units)``, the CSR matrix L, the identity's rows kept (every monomial but the
    constant) and ``u_b = v_b(Y) / ||v_b(Y)||`` per block.
    """
    units, slack = [], []
    for v, size in zip(basis_values(ident, Y), ident.sizes()):
        u = v / np.linalg.norm(v)
        units.append(u)
        iu, ju = np.triu_indices(size)
        k = np.arange(len(iu))
        off = iu != ju
        # (Q u)_i = sum_j Q_ij u_j: the stored entry (i, j), i <= j, reaches row i with u_j
        # and, off the diagonal, row j with u_i.
        rows = np.concatenate([iu, ju[off]])
        cols = np.concatenate([k, k[off]])
        vals = np.concatenate([u[ju], u[iu[off]]])
        slack.append(sp.csr_matrix((vals, (rows, cols)), shape=(size, len(iu))))
    keep = np.ones(ident.n, dtype=bool)
    keep[0] = False  # the constant enters the bound as gamma - rho_0: nothing to match
    top = sp.hstack(list(ident._A) + [ident.multipliers]).tocsr()[keep]
    bottom = sp.hstack([sp.block_diag(slack),
                        sp.csr_matrix((sum(ident.sizes()), ident.n_mult))])
    return sp.vstack([top, bottom]).tocsr(), keep, units


def _psd_part(t, size):
    Q = np.zeros((size, size))
    iu = np.triu_indices(size)
    Q[iu] = t
    Q = Q + np.triu(Q, 1).T
    w, V = np.linalg.eigh(Q)
    return ((V * np.clip(w, 0.0, None)) @ V.T)[iu]


def polish(ident, dual, f_vec, system, prove, target, max_rounds=8, lsqr_iters=LSQR_ITERS):
    """Alternating projections from ``dual`` (a solver iterate) until a proved bound is within
    ``target``, for at most ``max_rounds`` rounds (fewer when a round does not halve the gap)."""
    L, keep, _ = system
    sizes = ident.sizes()
    cuts = np.cumsum([s * (s + 1) // 2 for s in sizes])  # the last cut splits off lambda
    e0 = np.zeros(ident.n)
    e0[0] = 1.0
    target_rhs = np.concatenate([(dual.gamma * e0 - f_vec)[keep], np.zeros(sum(sizes))])
    x = np.concatenate([np.asarray(g, dtype=float) for g in dual.gram] + [dual.multipliers])
    best: tuple[float, Any, MomentDual | None, int] = (np.inf, None, None, 0)
    for rnd in range(1, max_rounds + 1):
        step = lsqr(L, target_rhs - L @ x, atol=1e-15, btol=LSQR_RTOL, iter_lim=lsqr_iters)[0]
        x = x + step
        parts = np.split(x, cuts)
        gram, lam = tuple(parts[:-1]), parts[-1]
        data = MomentDual(dual.basis, dual.scale, dual.gamma, gram, lam, dual.anchor)
        gap, bound = prove(data)
        improved = gap <= MIN_PROGRESS * best[0]
        if gap < best[0]:
            best = (gap, bound, data, rnd)
        if gap <= target or not improved:
            break
        x = np.concatenate([_psd_part(t, s) for t, s in zip(gram, sizes)] + [lam])
    return best
