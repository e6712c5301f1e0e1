"""In-memory (numpy) operators: the :mod:`.blocks` functions run in this process."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..core.classes import ClassIndex
from ..core.protocols import DataOperator
from . import blocks
from .gram_base import BlockGramOperator

if TYPE_CHECKING:
    from ..kernels import Kernel

#: The covariance moments come from the class statistics when these (K D^2 floats) fit here.
_STATS_FOR_MOMENTS_BYTES = 256 * 2**20


class NumpyDataOperator(DataOperator):
    """Linear data operator on an in-memory matrix X (N, D) with its :class:`ClassIndex`, centred at
    ``center`` (the origin x0; default the mean of X).
    """

    def __init__(self, X: np.ndarray, classes: ClassIndex, center: np.ndarray | None = None):
        X = np.asarray(X, dtype=float)
        self._center = X.mean(axis=0) if center is None else np.asarray(center, dtype=float)
        self.classes = classes
        self.n_samples, self.n_features = X.shape
        # Centre before iterating even for origin="class": an offset of 1e6 otherwise moves W
        # by 1e-4 through cancellation in X^T Z (docs/design.md §3c). Sorted by class, the block
        # functions slice each class instead of gathering it.
        self.X = np.ascontiguousarray(classes.sort_rows(X - self._center))
        self._sorted_codes = classes.sorted().codes
        self._stats: dict | None = None

    @property
    def center(self) -> np.ndarray:
        return self._center

    def own_projections(self, W: np.ndarray) -> np.ndarray:
        u = blocks.block_own_projections(self.X, self._sorted_codes, None, np.asarray(W, float))
        return self.classes.unsort(u)

    def class_weighted_sums(self, z: np.ndarray) -> np.ndarray:
        return blocks.block_weighted_sums(self.X, self._sorted_codes, None,
                                          self.classes.sort(z), self.classes.n_classes)

    def _class_stats(self):
        if self._stats is None:
            self._stats = blocks.block_class_stats(self.X, self._sorted_codes,
                                                   self.classes.n_classes)
        return self._stats

    def class_second_moments(self, origin: str) -> np.ndarray:
        return blocks.class_second_moments(self._class_stats(), np.zeros(self.n_features),
                                           origin)

    def class_means(self) -> np.ndarray:
        # Segment means only: the full class statistics cost K D^2 memory.
        return np.stack([self.X[a:b].mean(axis=0) for _, a, b in self.classes.segments()])

    def covariance_moments(self) -> tuple[float, float]:
        N, D = self.X.shape
        K = self.classes.n_classes
        if self._stats is not None or (D <= N and 8 * K * D * D <= _STATS_FOR_MOMENTS_BYTES):
            # X^T X = sum_k (M2_k + n_k m_k m_k^T) from the class statistics the linear fit
            # computes anyway: one pass over the data instead of two (X is centred here).
            C = self.class_second_moments("global").sum(axis=0) / N
        elif D <= N:
            C = blocks.cross_product(self.X) / N
        else:  # same non-zero spectrum, smaller matrix
            C = blocks.cross_product(self.X.T) / N
        return float(np.trace(C)), float(np.sum(C * C))

    def close(self) -> None:
        """Nothing to release in memory."""


class NumpyGramOperator(BlockGramOperator):
    """Gram operator on in-memory data X (N, D; any order, ``classes`` gives the block structure)."""

    def __init__(self, X: np.ndarray, classes: ClassIndex, kernel: Kernel, *,
                 max_gram_bytes: int = 2 * 1024**3, block_rows: int | None = None,
                 precision: str = "float64", tile_rows: int | None = None):
        N = np.shape(X)[0]
        block_rows = block_rows or max(1, min(N, (256 * 1024**2) // (8 * max(N, 1))))
        self._init_blocks(X, classes, kernel, block_rows, col_block=max(N, 1),
                          tile_rows=tile_rows)
        self._G = kernel.gram(self._Xs) if 8 * N * N <= max_gram_bytes else None
        if self._G is not None:  # the block functions read row blocks of the stored G
            self._cache = [self._G[a:b] for a, b in self._rows]
        # A kernel is symmetric, so G[:, C_k] = G[C_k, :]^T and products may read contiguous
        # rows instead of strided columns. Built-in kernels are symmetric by construction; a
        # user's callable is checked once.
        self._symmetric = self._G is not None and (kernel.builtin or _is_symmetric(self._G))
        self.uses_tiles = self._G is None and kernel.builtin
        self.set_precision(precision)

    @property
    def stores_gram(self) -> bool:
        """True when G is precomputed and kept (otherwise blocks are recomputed per product)."""
        return self._G is not None

    def _run(self, tasks, name, extra=None):
        return [func(*args) for func, *args in tasks]

    def class_matmul(self, z: np.ndarray) -> np.ndarray:
        if not self._symmetric:
            return super().class_matmul(z)
        self.gram_passes += 1
        zs = self.classes.sort(np.asarray(z, dtype=float))
        out = blocks.gram_class_product_by_rows(self._G, self._offsets, zs)  # (R, K, N)
        return self.classes.unsort(out.transpose(0, 2, 1), 1)

    def _submatrix(self, rows, cols):
        if self._G is not None:
            return self._G[rows[0] : rows[1], cols[0] : cols[1]].copy()
        return blocks.gram_submatrix(self._Xs, rows, slice(*cols), self.kernel)

    def _range_matmul(self, rows, cols, V):
        if self._G is not None:
            return self._G[rows[0] : rows[1], cols[0] : cols[1]] @ V
        return blocks.gram_range_matmul(self._Xs, rows, cols, V, self.kernel, self.col_block)

    def columns(self, idx: np.ndarray) -> np.ndarray:
        if self._G is None:
            return super().columns(idx)
        idx = np.asarray(idx)
        pos = idx if self.classes.order is None else np.argsort(self.classes.order)[idx]
        return self.classes.unsort(self._G[:, pos], 0)


def _is_symmetric(G, block_rows=1024):
    """True when ``G`` equals its transpose up to rounding (blockwise: no N x N temporary)."""
    scale = float(np.abs(G).max()) if G.size else 0.0
    atol = 1e-12 * max(scale, np.finfo(float).tiny)
    for a in range(0, G.shape[0], block_rows):
        rows = slice(a, a + block_rows)
        if not np.allclose(G[rows], G[:, rows].T, rtol=1e-12, atol=atol):
            return False
    return True
