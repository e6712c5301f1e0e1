"""In-memory (numpy) data operators: the heavy products the solver needs, and nothing else.

The solver (``catdask.solver``) and the problems (``catdask.problems``) never touch the data:
they call these small interfaces, so the same loop runs on numpy arrays here and on Dask arrays
in ``catdask.distributed.operators`` (DESIGN.md sections 2, 3 and 5).

Linear data operator (data centred at the training centroid x0, DESIGN.md 3c):

- ``own_projections(W)``: ``u[r, i] = w_{y_i}^T x_i`` for W of shape (R, D, K) -> (R, N)
- ``class_weighted_sums(z)``: ``Y[r, :, k] = sum_{i in C_k} z[r, i] x_i`` -> (R, D, K)
  (paper eq. Ydef; ``Y = X^T Z``)
- ``class_second_moments(origin)``: the R_k (K, D, D): class scatter (``"class"``, paper eq.
  Rkdef) or second moment about x0 (``"global"``, DESIGN.md 3b)
- ``covariance_moments()``: ``(tr C, tr C^2)`` of the total covariance C (sets the CAS scale)

Gram operator (kernel, DESIGN.md section 3):

- ``class_matmul(z)``: ``B[r] = G Z_r`` with ``Z_r[i, y_i] = z[r, i]`` -> (R, N, K); uses the
  block structure of Z, so it costs N^2 R, not N^2 R K
- ``matmul(V)``: ``G V`` for a dense (N, m) V
- ``class_gram(k)``: the dense class block ``G[C_k, C_k]``
- ``covariance_moments()``: ``(tr G/N, ||G||_F^2/N^2)``, the same quantities in feature space
"""

from __future__ import annotations

import numpy as np

from .classes import ClassIndex

__all__ = ["NumpyDataOperator", "NumpyGramOperator", "CentredGramOperator"]


class NumpyDataOperator:
    """Linear data operator on an in-memory matrix, centred at its mean.

    Parameters
    ----------
    X : ndarray of shape (N, D)
    classes : ClassIndex
    center : ndarray of shape (D,) or None
        The origin x0; default the mean of X.
    """

    def __init__(self, X, classes, center=None):
        X = np.asarray(X, dtype=float)
        self.center = X.mean(axis=0) if center is None else np.asarray(center, dtype=float)
        # Centre before iterating even for origin="class": an offset of 1e6 otherwise moves W
        # by 1e-4 through cancellation in X^T Z (DESIGN.md 3c). Sort by class for slicing.
        self.X = np.ascontiguousarray(classes.sort((X - self.center).T).T)
        self.classes = classes
        self.n_samples, self.n_features = X.shape

    def _slices(self):
        return [(k, slice(a, b)) for k, a, b in self.classes.segments()]

    def own_projections(self, W):
        u = np.empty((W.shape[0], self.n_samples))
        for k, sl in self._slices():
            u[:, sl] = (self.X[sl] @ W[:, :, k].T).T
        return self._unsort(u)

    def class_weighted_sums(self, z):
        zs = self.classes.sort(z)
        Y = np.empty((z.shape[0], self.n_features, self.classes.n_classes))
        for k, sl in self._slices():
            Y[:, :, k] = (self.X[sl].T @ zs[:, sl].T).T
        return Y

    def class_second_moments(self, origin):
        D = self.n_features
        R = np.empty((self.classes.n_classes, D, D))
        for k, sl in self._slices():
            Xk = self.X[sl]
            if origin == "class":
                Xk = Xk - Xk.mean(axis=0)
            R[k] = Xk.T @ Xk
        return R

    def class_means(self):
        return np.stack([self.X[sl].mean(axis=0) for _, sl in self._slices()])

    def covariance_moments(self):
        N, D = self.X.shape
        if D <= N:
            C = self.X.T @ self.X / N
        else:  # same non-zero spectrum, smaller matrix
            C = self.X @ self.X.T / N
        return float(np.trace(C)), float(np.sum(C * C))

    def _unsort(self, v):
        if self.classes.order is None:
            return v
        out = np.empty_like(v)
        out[..., self.classes.order] = v
        return out


class NumpyGramOperator:
    """Gram operator on in-memory data: precomputed Gram or blocks recomputed per product.

    Parameters
    ----------
    X : ndarray of shape (N, D)
        Training patterns (any order; products use ``classes`` for the block structure).
    classes : ClassIndex
    kernel : catdask.kernels.Kernel
    max_gram_bytes : int
        Precompute and keep G when it needs at most this many bytes; otherwise recompute
        row blocks ``k(X_I, X)`` in every product (never materialising G).
    block_rows : int or None
        Rows per block when recomputing.
    """

    def __init__(self, X, classes, kernel, *, max_gram_bytes=2 * 1024**3, block_rows=None):
        self.X = np.asarray(X, dtype=float)
        self.classes = classes
        self.kernel = kernel
        self.n_samples = self.X.shape[0]
        N = self.n_samples
        self.block_rows = block_rows or max(1, min(N, (256 * 1024**2) // (8 * max(N, 1))))
        # Everything below works in class-sorted order (rows and columns of G), so class k's
        # columns are one contiguous slice and no product ever permutes a Gram block;
        # results are put back in the caller's order, which costs O(N K) per product.
        order = classes.order
        self._Xs = self.X if order is None else self.X[order]
        self._inverse = None if order is None else np.argsort(order)
        self._G = kernel.gram(self._Xs) if 8 * N * N <= max_gram_bytes else None
        # A kernel is symmetric, so G[:, C_k] = G[C_k, :]^T and products may read contiguous
        # rows instead of strided columns (measured 1.2x faster for one restart, 1.6x for 8).
        # Built-in kernels are symmetric by construction; a user's callable is checked once.
        self._symmetric = self._G is not None and (kernel.builtin or _is_symmetric(self._G))
        self.gram_passes = 0  # number of full passes over G (for benchmarks and tests)

    @property
    def stores_gram(self):
        """True when G is precomputed and kept (otherwise blocks are recomputed per product)."""
        return self._G is not None

    def _row_blocks(self):
        """Yield ``(rows, G_s[rows, :])`` of the class-sorted Gram: stored or recomputed."""
        self.gram_passes += 1
        for a in range(0, self.n_samples, self.block_rows):
            rows = slice(a, min(a + self.block_rows, self.n_samples))
            yield rows, (self._G[rows] if self._G is not None
                         else self.kernel(self._Xs[rows], self._Xs))

    def _unsort(self, M, axis=0):
        """Sorted positions along ``axis`` back to the caller's order."""
        return M if self._inverse is None else np.take(M, self._inverse, axis=axis)

    def class_matmul(self, z):
        R, N, K = z.shape[0], self.n_samples, self.classes.n_classes
        out = np.empty((R, N, K))
        zs = self.classes.sort(z)
        segs = self.classes.segments()
        if self._symmetric:
            self.gram_passes += 1
            for k, a, b in segs:
                # Column k of G Z is G[:, C_k] z_k = (z_k^T G[C_k, :])^T (DESIGN.md section 3).
                out[:, :, k] = zs[:, a:b] @ self._G[a:b]
            return self._unsort(out, axis=1)
        for rows, Gb in self._row_blocks():
            for k, a, b in segs:
                # Only class-k columns of G feed column k of G Z (DESIGN.md section 3).
                out[:, rows, k] = (Gb[:, a:b] @ zs[:, a:b].T).T
        return self._unsort(out, axis=1)

    def matmul(self, V):
        Vs = V if self.classes.order is None else V[self.classes.order]
        out = np.empty((self.n_samples, V.shape[1]))
        for rows, Gb in self._row_blocks():
            out[rows] = Gb @ Vs
        return self._unsort(out)

    def _class_slice(self, k):
        return slice(int(self.classes.offsets[k]), int(self.classes.offsets[k + 1]))

    def class_gram(self, k):
        """``G[C_k, C_k]`` (n_k, n_k), rows and columns in the class's sorted order."""
        ck = self._class_slice(k)
        if self._G is not None:
            return self._G[ck, ck].copy()
        return self.kernel(self._Xs[ck], self._Xs[ck])

    def class_rows(self, k):
        """``G[C_k, :]`` as a dense (n_k, N) array (columns in the caller's order)."""
        ck = self._class_slice(k)
        rows = self._G[ck] if self._G is not None else self.kernel(self._Xs[ck], self._Xs)
        return self._unsort(rows, axis=1)

    def diagonal(self):
        if self._G is not None:
            return self._unsort(np.diag(self._G).copy())
        return np.array([self.kernel(x[None], x[None])[0, 0] for x in self.X])

    def columns(self, idx):
        """``G[:, idx]`` as a dense (N, len(idx)) array."""
        if self._G is None:
            return self.kernel(self.X, self.X[idx])
        idx = np.asarray(idx)
        cols = self._G[:, idx if self._inverse is None else self._inverse[idx]]
        return self._unsort(cols)

    def covariance_moments(self):
        # tr(G) and ||G||_F do not depend on the order of the points.
        N = self.n_samples
        tr = fro2 = 0.0
        for rows, Gb in self._row_blocks():
            tr += float(np.trace(Gb[:, rows]))
            fro2 += float(np.sum(Gb * Gb))
        return tr / N, fro2 / N**2


class CentredGramOperator:
    """``G_c = H G H`` (H = I - 11^T/N) on top of any Gram operator, without forming it.

    Used for ``origin="global"``: x0 is the feature-space centroid (DESIGN.md 3b). Each product
    costs one product with the base operator plus O(N R K).
    """

    def __init__(self, base):
        self.base = base
        self.classes = base.classes
        self.n_samples = base.n_samples
        ones = np.ones((self.n_samples, 1))
        self.row_sums = base.matmul(ones)[:, 0]  # g = G 1
        self.total = float(self.row_sums.sum())  # 1^T G 1
        if hasattr(base, "class_matvec"):
            # Only offered when the base can multiply by a class block without forming it
            # (the decoupled start checks for it before choosing Lanczos over a dense block).
            self.class_matvec = self._class_matvec

    @property
    def gram_passes(self):
        return self.base.gram_passes

    def _centre_columns(self, M, axis):
        return M - M.mean(axis=axis, keepdims=True)

    def class_matmul(self, z):
        N = self.n_samples
        # G H Z = G Z - g s^T / N, with s_k = sum_{i in C_k} z_i (the column sums of Z).
        s = self.classes.sum(z)  # (R, K)
        B = self.base.class_matmul(z) - self.row_sums[None, :, None] * (s[:, None, :] / N)
        return self._centre_columns(B, axis=1)

    def matmul(self, V):
        HV = self._centre_columns(V, axis=0)
        return self._centre_columns(self.base.matmul(HV), axis=0)

    def class_gram(self, k):
        N = self.n_samples
        idx = self.classes.members(k)
        g = self.row_sums[idx]
        return self.base.class_gram(k) - (g[:, None] + g[None, :]) / N + self.total / N**2

    def _class_matvec(self, k, V):
        # Same block as class_gram(k), applied to V: G_kk V - g_k (1^T V) / N - 1 (g_k^T V) / N
        # + 1 (1^T G 1 / N^2)(1^T V).
        N = self.n_samples
        g = self.row_sums[self.classes.members(k)]
        V = np.asarray(V, dtype=float)
        V2 = V.reshape(g.size, -1)
        col_sums = V2.sum(axis=0)
        out = np.asarray(self.base.class_matvec(k, V2), dtype=float).reshape(V2.shape)
        out -= np.outer(g, col_sums) / N
        out -= (g @ V2 / N - self.total / N**2 * col_sums)[None, :]
        return out.reshape(V.shape)

    def diagonal(self):
        N = self.n_samples
        return self.base.diagonal() - 2 * self.row_sums / N + self.total / N**2

    def columns(self, idx):
        N = self.n_samples
        # (H G H) e_j = H (G e_j - g / N), with g = G 1.
        C = self.base.columns(idx) - self.row_sums[:, None] / N
        return C - C.mean(axis=0, keepdims=True)

    def covariance_moments(self):
        # tr(HGH) = tr G - 1^T G 1 / N ;  ||HGH||_F^2 = ||G||_F^2 - 2 ||G 1||^2 / N + (1^T G 1)^2 / N^2
        N = self.n_samples
        tr, fro2 = self.base.covariance_moments()
        tr_c = tr - self.total / N**2
        fro2_c = fro2 - 2 * float(self.row_sums @ self.row_sums) / N**3 + self.total**2 / N**4
        return tr_c, max(fro2_c, 0.0)


def _is_symmetric(G, block_rows=1024):
    """True when ``G`` equals its transpose up to rounding (blockwise: no N x N temporary)."""
    scale = float(np.abs(G).max()) if G.size else 0.0
    atol = 1e-12 * max(scale, np.finfo(float).tiny)
    for a in range(0, G.shape[0], block_rows):
        rows = slice(a, a + block_rows)
        if not np.allclose(G[rows], G[:, rows].T, rtol=1e-12, atol=atol):
            return False
    return True
