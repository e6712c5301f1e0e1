"""The centred Gram ``H G H`` (x0 the feature-space centroid), without forming it."""

from __future__ import annotations

import numpy as np

from ..core.protocols import GramOperator

#: Entries per slab of rows in :meth:`CentredGramOperator.class_gram` (4 MB of float64).
_SLAB_ENTRIES = 512 * 1024


class CentredGramOperator(GramOperator):
    """``G_c = H G H`` (H = I - 11^T/N) on top of any Gram operator, without forming it."""

    def __init__(self, base: GramOperator):
        self.base = base
        self.classes = base.classes
        self.n_samples = base.n_samples
        ones = np.ones((self.n_samples, 1))
        self.row_sums = base.matmul(ones)[:, 0]  # g = G 1
        self.total = float(self.row_sums.sum())  # 1^T G 1
        # Lanczos on the centred class block is worth it exactly when it is for the base.
        self.matvec_without_class_block = base.matvec_without_class_block

    @property
    def uses_tiles(self) -> bool:
        return self.base.uses_tiles

    @property
    def precision(self) -> str:
        return self.base.precision

    def set_precision(self, precision: str) -> None:
        """The tiles of the base's ``class_matmul`` (the centring itself is float64)."""
        self.base.set_precision(precision)

    @property
    def gram_passes(self) -> int:
        return self.base.gram_passes

    def _centre_columns(self, M: np.ndarray, axis: int) -> np.ndarray:
        return M - M.mean(axis=axis, keepdims=True)

    def class_matmul(self, z: np.ndarray) -> np.ndarray:
        N = self.n_samples
        # G H Z = G Z - g s^T / N, with s_k = sum_{i in C_k} z_i (the column sums of Z).
        s = self.classes.sum(z)  # (R, K)
        B = self.base.class_matmul(z) - self.row_sums[None, :, None] * (s[:, None, :] / N)
        return self._centre_columns(B, axis=1)

    def matmul(self, V: np.ndarray) -> np.ndarray:
        HV = self._centre_columns(V, axis=0)
        return self._centre_columns(self.base.matmul(HV), axis=0)

    def solver_history(self, capacity: int):
        return self.base.solver_history(capacity)

    def class_gram(self, k: int) -> np.ndarray:
        return self._centred_rows(self.base.class_gram(k), k, 0)

    def _centred_rows(self, block, k: int, start: int) -> np.ndarray:
        """Rows ``start:`` of class k's block of G (``block``) made rows of H G H's:
        ``G_ij - (g_i + g_j) / N + 1^T G 1 / N^2``, entry by entry in that order, a slab of
        rows at a time, in place when ``block`` is a fresh writable array of its own (else on
        a copy: never into the base's arrays), so no temporary of the block's size (the
        low-rank test asks for blocks of up to 128 MB)."""
        N = self.n_samples
        g = self.row_sums[self.classes.members(k)]
        out = np.asarray(block, dtype=np.float64)
        if out.base is not None or not (out.flags.owndata and out.flags.writeable):
            out = out.copy()
        mean = self.total / N**2
        step = max(1, _SLAB_ENTRIES // max(g.size, 1))
        for a in range(0, out.shape[0], step):
            rows = out[a : a + step]
            first = start + a
            rows -= (g[first : first + rows.shape[0], None] + g[None, :]) / N
            rows += mean
        return out

    @property
    def makes_class_gram_rows(self) -> bool:
        """Whether :meth:`class_gram_rows` works: where the base operator makes row slabs."""
        return self.base.makes_class_gram_rows

    def class_gram_rows(self, k: int, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of :meth:`class_gram`, entry by entry as there (only where
        :attr:`makes_class_gram_rows`)."""
        return self._centred_rows(self.base.class_gram_rows(k, start, stop), k, start)

    def class_matvec(self, k: int, V: np.ndarray) -> np.ndarray:
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

    def class_block_matmul(self, V: np.ndarray) -> np.ndarray:
        """The class blocks of ``H G H`` times V (N, m), all classes in one base pass: the
        corrections of :meth:`class_matvec`, per class."""
        N = self.n_samples
        V = np.asarray(V, dtype=float)
        codes = self.classes.codes
        g = self.row_sums[:, None]
        col_sums = self.classes.sum(V.T).T[codes]  # 1^T V_k, on every row of class k
        g_dot = self.classes.sum((g * V).T).T[codes]  # g_k^T V_k
        out = np.asarray(self.base.class_block_matmul(V), dtype=float)
        out -= g * col_sums / N
        out -= g_dot / N - self.total / N**2 * col_sums
        return out

    def diagonal(self) -> np.ndarray:
        N = self.n_samples
        return self.base.diagonal() - 2 * self.row_sums / N + self.total / N**2

    def columns(self, idx: np.ndarray) -> np.ndarray:
        N = self.n_samples
        # (H G H) e_j = H (G e_j - g / N), with g = G 1.
        C = self.base.columns(idx) - self.row_sums[:, None] / N
        return C - C.mean(axis=0, keepdims=True)

    def close(self) -> None:
        self.base.close()

    def covariance_moments(self) -> tuple[float, float]:
        # tr(HGH) = tr G - 1^T G 1 / N ;  ||HGH||_F^2 = ||G||_F^2 - 2 ||G 1||^2 / N + (1^T G 1)^2 / N^2
        N = self.n_samples
        tr, fro2 = self.base.covariance_moments()
        tr_c = tr - self.total / N**2
        fro2_c = fro2 - 2 * float(self.row_sums @ self.row_sums) / N**3 + self.total**2 / N**4
        return tr_c, max(fro2_c, 0.0)
