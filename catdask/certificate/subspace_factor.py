"""The subspace S of the low-rank kernel test (docs/design.md §4c): an incremental pivoted
Cholesky factor of the Gram matrix of ``[w_1..w_K, psi_1..psi_N]``, memory ``N (K + r)``."""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from .eigen import sym

#: Landmark columns fetched per block (one ``columns`` call, N * block kernel entries).
BLOCK = 64
#: A candidate in a block is used as a pivot only while its leftover diagonal is at least this
#: fraction of the largest leftover at the start of the block (else it is nearly in the span).
ACCEPT = 1e-2
#: Columns allocated up front beyond the K axes (the factor grows by copying past them).
INITIAL_RANK = 128
_EPS = np.finfo(float).eps


class SubspaceFactor:
    """Incremental pivoted Cholesky of the Gram matrix of ``[w_1..w_K, psi_1..psi_N]``."""

    def __init__(self, operator, A, capacity, projections=None):
        self.op = operator
        self.A = np.asarray(A, dtype=float)
        K, N = self.A.shape
        if projections is None:
            self.FW = np.asarray(operator.matmul(self.A.T), dtype=float)  # G A^T: one pass
        else:  # the fit's own P = A G (K, N): no pass
            self.FW = np.ascontiguousarray(np.asarray(projections, dtype=float).T)
        self.g = np.asarray(operator.diagonal(), dtype=float)
        WW = sym(self.A @ self.FW)  # A G A^T (= I at a feasible point)
        Lw = scipy.linalg.cholesky(WW, lower=True)
        self.max_columns = int(capacity)
        # Allocated for what the first round may use and reallocated as the limit grows: the
        # whole budget up front was 411 MB at N = 50,000 for a factor that used 261 columns.
        cols = min(self.max_columns, K + INITIAL_RANK)
        self.L = np.empty((N, cols))
        self.LW = np.zeros((K, cols))
        self.L[:, :K] = scipy.linalg.solve_triangular(Lw, self.FW.T, lower=True).T
        self.LW[:, :K] = Lw
        self.m = K
        self.K = K
        self.d = self.g - np.einsum("ij,ij->i", self.L[:, :K], self.L[:, :K])
        self.pivots = []
        self.columns_used = 0
        self._pending = None  # (candidates, their columns, <w, psi>, m at fetch, top leftover)

    @property
    def capacity(self):
        """Most columns the factor may have (K axes and the landmark budget)."""
        return self.max_columns

    def _reserve(self, cols):
        """Room for ``cols`` columns (a copy of the factor when it must grow)."""
        if cols <= self.L.shape[1]:
            return
        L = np.empty((self.L.shape[0], cols))
        L[:, : self.m] = self.L[:, : self.m]
        LW = np.zeros((self.LW.shape[0], cols))
        LW[:, : self.m] = self.LW[:, : self.m]
        self.L, self.LW = L, LW

    def residual(self):
        return float(np.clip(self.d, 0.0, None).sum())

    def grow(self, target, limit=None, block=BLOCK, plan=None):
        """Add pivots until ``sum max(d, 0) <= target`` or ``limit`` (default: the capacity)
        columns are in the factor."""
        limit = self.capacity if limit is None else min(limit, self.capacity)
        plan = limit if plan is None else max(limit, min(plan, self.capacity))
        if self._pending is not None or self.residual() > target:
            self._reserve(plan)
        while (self._pending is not None or self.residual() > target) and self.m < limit:
            if self._pending is None:
                d = np.clip(self.d, 0.0, None)
                d[self.pivots] = 0.0
                b = min(block, plan - self.m)
                cand = np.argpartition(-d, b - 1)[:b] if b < d.size else np.arange(d.size)
                cand = cand[np.argsort(-d[cand])]
                cand = cand[d[cand] > 0]
                if cand.size == 0:
                    return
                C = np.asarray(self.op.columns(cand), dtype=float)  # (N, b)
                self.columns_used += cand.size
                CW = self.A @ C  # <w_k, psi_j>
                m = self.m
                C -= self.L[:, :m] @ self.L[cand, :m].T
                CW -= self.LW[:, :m] @ self.L[cand, :m].T
                self._pending = (cand, C, CW, m, float(self.d[cand[0]]))
            cand, C, CW, m, top = self._pending
            # Pivots already taken from this block have d = 0 (set below).
            local = self.d[cand].copy()
            while True:
                j = int(np.argmax(local))
                if local[j] <= ACCEPT * top:
                    self._pending = None  # the block is used up
                    break
                if self.m >= limit:
                    if self.m >= plan:
                        self._pending = None
                    break
                t = self.m
                s = math.sqrt(local[j])
                col = C[:, j] - self.L[:, m:t] @ self.L[cand[j], m:t]
                colw = CW[:, j] - self.LW[:, m:t] @ self.L[cand[j], m:t]
                self.L[:, t] = col / s
                self.LW[:, t] = colw / s
                self.d -= self.L[:, t] ** 2
                local = self.d[cand].copy()
                local[j] = 0.0
                self.d[cand[j]] = 0.0
                self.pivots.append(int(cand[j]))
                self.m += 1

    def pending(self):
        """Whether a block of candidates is only partly used (a next ``grow`` continues it)."""
        return self._pending is not None

    def leftover(self):
        """``||P_T psi_i||^2`` recomputed from the factor, plus a rounding allowance."""
        L = self.L[:, : self.m]
        sq = np.einsum("ij,ij->i", L, L)
        d = self.g - sq
        guard = 4.0 * (self.m + 2) * _EPS * np.maximum(np.abs(self.g), sq)
        return np.clip(d, 0.0, None) + guard
