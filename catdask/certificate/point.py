"""The point W under test and the class matrices R_k seen from it (docs/design.md section 4)."""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Protocol, runtime_checkable

import numpy as np
import scipy.linalg

from .eigen import top_eig, verified_top


@runtime_checkable
class ClassMatrixOperator(Protocol):
    """The class matrices R_k (D, D) as products, for a D too large to hold K of them."""

    n_features: int  # D
    n_classes: int  # K

    @abstractmethod
    def apply(self, k: int, V: np.ndarray) -> np.ndarray:
        """``R_k @ V`` for V of shape (D, m)."""


class CannotTest(Exception):
    """The inputs are well-formed but the test cannot run on them (the reason says why)."""


def read_inputs(scatter: np.ndarray | ClassMatrixOperator, W: np.ndarray, dense_max_dim: int
                ) -> tuple[np.ndarray | None, ClassMatrixOperator | None, np.ndarray]:
    """``(R or None, operator or None, W)`` from the caller's arguments; operators with
    ``D <= dense_max_dim`` are materialised (K products with I_D). Raises ``ValueError`` for
    malformed input (``scatter`` not (K, D, D) nor an operator, or W not (D, K)).
    """
    operator: ClassMatrixOperator | None = None
    R: np.ndarray | None = None
    if isinstance(scatter, ClassMatrixOperator):
        D, K = int(scatter.n_features), int(scatter.n_classes)
        if D > dense_max_dim:
            operator = scatter
        else:
            eye = np.eye(D)
            R = np.stack([np.asarray(scatter.apply(k, eye), dtype=float) for k in range(K)])
    else:
        R = np.asarray(scatter, dtype=float)
        if R.ndim != 3 or R.shape[1] != R.shape[2]:
            raise ValueError(
                "scatter must have shape (K, D, D) or be an operator with apply(k, V); "
                f"got an array of shape {R.shape}."
            )
        K, D = R.shape[0], R.shape[1]
    W = np.asarray(W, dtype=float)
    if W.shape != (D, K):
        raise ValueError(f"W must have shape (D, K) = ({D}, {K}); got {W.shape}.")
    return R, operator, W


def _power_of_two_unit(largest):
    """A power of two near ``largest = max |R|`` (1.0 for zero matrices)."""
    if largest == 0.0:
        return 1.0
    return math.ldexp(1.0, math.frexp(largest)[1])


class StationaryPoint:
    """What the tests share: R_k, the point W, Lambda, the scale, eigen-solvers."""

    def __init__(self, inputs, *, tol, budget, rng):
        self.notes = []
        self.rng = rng
        self.budget = budget
        dense_max_dim = budget.dense_max_dim
        self.eigen_checks = []
        R, self._operator, W = inputs
        D, K = W.shape
        self.D, self.K = D, K
        self.unit = 1.0
        if R is not None:
            # max and min propagate NaN and inf: no temporary arrays (49 MB each at D = 784,
            # K = 10) for the finiteness test and the unit.
            high, low = (float(R.max()), float(R.min())) if R.size else (0.0, 0.0)
            if not (math.isfinite(high) and math.isfinite(low)):
                raise CannotTest("the class matrices contain non-finite values (overflow?)")
            self.unit = _power_of_two_unit(max(high, -low))
            R = R / self.unit
            R += R.transpose(0, 2, 1)  # numpy copies the overlapping operand first
            R *= 0.5
        self.R_all = R  # dense R_k whenever available (array input of any size)
        self.dense = R is not None and D <= dense_max_dim
        self.W = self._checked_point(W)
        self._first_order()
        self._scale()
        self.tol = tol
        self.tau = tol * self.scale

    def _checked_point(self, W):
        D, K = self.D, self.K
        if not 1 <= K <= D:
            raise CannotTest(
                f"need D >= K >= 1 for an orthonormal W; values supplied were D = {D} and "
                f"K = {K} (rank-deficient data: the class matrices have fewer dimensions than "
                "there are classes)"
            )
        if not np.all(np.isfinite(W)):
            raise CannotTest("W contains non-finite values")
        orth = float(np.linalg.norm(W.T @ W - np.eye(K), 2))
        if orth > 1e-2:
            raise CannotTest(
                f"W must have orthonormal columns; ||W^T W - I||_2 = {orth:.2e} (on "
                "rank-deficient data the fitted axes can be degenerate)"
            )
        if orth > 1e-10:
            U, _, Vt = np.linalg.svd(W, full_matrices=False)
            W = U @ Vt
            self.notes.append(f"W was re-orthonormalised (||W^T W - I|| = {orth:.1e})")
        return W

    def _first_order(self):
        """Lambda, f(W) and the first-order residuals (paper eq. (50))."""
        W, K = self.W, self.K
        G = np.column_stack([self.apply(k, W[:, k]) for k in range(K)])
        Lam = W.T @ G
        self.Lam = 0.5 * (Lam + Lam.T)
        self.f = 0.5 * float(np.trace(Lam))
        nL, nG = np.linalg.norm(Lam), np.linalg.norm(G)
        self.asymmetry = float(np.linalg.norm(Lam - Lam.T) / nL) if nL > 0 else 0.0
        self.stationarity = float(np.linalg.norm(G - W @ self.Lam) / nG) if nG > 0 else 0.0
        self.lam_norm = float(np.linalg.norm(self.Lam, 2))

    def _scale(self):
        """``scale = max_k ||R_k||_2`` (tolerances) and verified ``lambda_max(R_k)`` (trivial
        bound)."""
        K = self.K
        self._lam_max_R = None
        self.lam_low_R = np.empty(K)  # Rayleigh quotients: lower bounds on lambda_max(R_k)
        norms = np.empty(K)
        if self.dense:
            self._lam_max_R = np.empty(K)
            for k in range(K):
                ev = scipy.linalg.eigh(self.R_all[k], eigvals_only=True)
                self._lam_max_R[k], norms[k] = ev[-1], max(abs(ev[0]), abs(ev[-1]))
                self.lam_low_R[k] = ev[-1]
                self.eigen_checks.append("dense")
        else:
            self._top_R = []
            for k in range(K):
                estimate, v = self.top(lambda x, k=k: self.apply(k, x))
                self._top_R.append((estimate, v))
                self.lam_low_R[k] = float(v @ self.apply(k, v)) / float(v @ v)
                norms[k] = abs(estimate)
        scale = float(norms.max())
        self.scale = scale if scale > 0 else 1.0

    @property
    def lam_max_R(self):
        """Verified upper bounds on ``lambda_max(R_k)`` (computed on first use above
        ``dense_max_dim``: a Cholesky factorisation proves each Lanczos estimate of
        :meth:`_scale` for arrays, Lanczos alone for operators)."""
        if self._lam_max_R is None and self.R_all is None:
            # Operators: the Lanczos estimates are all there is (what verified_top would
            # compute again from the same matvecs).
            self._lam_max_R = np.array([estimate for estimate, _ in self._top_R])
            self.eigen_checks.append("lanczos")
        elif self._lam_max_R is None:
            self._lam_max_R = np.array([
                self.top_upper(matrix_of=lambda k=k: self.R_all[k],
                               matvec=lambda x, k=k: self.apply(k, x),
                               estimate=self._top_R[k])[0]
                for k in range(self.K)])
        return self._lam_max_R

    def apply(self, k, v):
        """R_k @ v for a vector v (D,) or a block (D, m) (normalised scale)."""
        if self.R_all is not None:
            return self.R_all[k] @ v
        if v.ndim == 1:
            return np.asarray(self._operator.apply(k, v[:, None]), dtype=float)[:, 0]
        return np.asarray(self._operator.apply(k, v), dtype=float)

    def top(self, matvec, v0=None, shift=0.0, n=None):
        """Estimated top eigenpair of a D x D (or n x n) operator by Lanczos (for the search)."""
        n = self.D if n is None else n
        if v0 is None:
            v0 = self.rng.standard_normal(n)
        return top_eig(n, matvec=matvec, shift=shift, v0=v0)

    def top_upper(self, *, matrix_of, matvec, shift=0.0, n=None, estimate=None):
        """Verified upper bound on lambda_max (recording how it was verified)."""
        n = self.D if n is None else n
        matrix = matrix_of() if self.R_all is not None else None
        upper, v, check = verified_top(
            n, matrix=matrix, matvec=matvec, shift=shift, v0=self.rng.standard_normal(n),
            estimate=estimate, budget=self.budget,
        )
        self.eigen_checks.append(check)
        return upper, v

    def verifies_dense(self, n):
        """Whether :meth:`top_upper` of an n x n matrix is a dense ``eigh`` (``top_eig``)."""
        return self.R_all is not None and n <= self.budget.verify_dense_max_dim

    def top_upper_known(self, pair):
        """:meth:`top_upper` of a matrix whose dense top pair ``top_eig`` gave already
        (``verifies_dense``): that pair, recorded as dense, and the same draw from ``rng``, so
        the stream later Lanczos starts and subspace searches read is unchanged."""
        self.rng.standard_normal(self.D)
        self.eigen_checks.append("dense")
        return pair

    def mbound(self, nu):
        """An upper bound on ||M_k(nu)||_2 (M_k as in docs/design.md section 4, (b))."""
        return self.scale + self.lam_norm + 2.0 * float(np.max(np.abs(nu)))

    def round_guard(self):
        """Allowance for rounding in the eigenvalues that make a bound valid."""
        return 64.0 * self.D * np.finfo(float).eps * (self.scale + self.lam_norm)
