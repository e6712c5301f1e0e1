"""The Gram operator's products, once, over row blocks of a class-sorted G.

Every product is one pass of a :mod:`.blocks` function over G's row blocks; subclasses say how a
pass runs and where a block comes from (recomputed, stored, a cache).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.classes import ClassIndex
from ..core.protocols import GramOperator
from . import blocks, gram_tiles

if TYPE_CHECKING:
    from ..kernels import Kernel

#: Precisions of the recomputed Gram tiles in ``G Z``.
GRAM_PRECISIONS = ("float64", "float32")

#: Rows (= columns) of a square Gram tile: a 384^2 float32 tile stays in L2 between its two
#: products with Z (row- and column-wise); larger tiles leave the cache (docs/benchmarks.md).
GRAM_TILE = 384


class BlockGramOperator(GramOperator):
    """Gram products as passes of block functions over row blocks."""

    matvec_without_class_block = False
    makes_class_gram_rows: bool = True  # class_gram_rows below
    # Plain attributes here (read-only properties of the interface); _init_blocks sets them.
    gram_passes: int = 0
    uses_tiles: bool = False
    precision: str = "float64"

    def _init_blocks(self, X: np.ndarray, classes: ClassIndex, kernel: Kernel, block_rows: int,
                     col_block: int, tile_rows: int | None = None) -> None:
        self.X = np.ascontiguousarray(X, dtype=float)
        self.classes = classes
        self.kernel = kernel
        self.n_samples = N = self.X.shape[0]
        self._Xs = classes.sort_rows(self.X)
        self._offsets = tuple(int(o) for o in classes.offsets)
        self.block_rows = int(block_rows)
        self.col_block = int(col_block)
        self._rows = [(a, min(a + self.block_rows, N)) for a in range(0, N, self.block_rows)]
        self._cache: list[Any] = [None] * len(self._rows)
        self.gram_passes = 0  # number of full passes over G (for benchmarks and tests)
        self._moments: tuple[np.ndarray, np.ndarray, float] | None = None
        self.uses_tiles = False  # subclasses: True when G Z runs on symmetric tiles
        self.precision = "float64"
        self.tile_rows = int(tile_rows or GRAM_TILE)
        self._tile_pairs = gram_tiles.symmetric_tile_pairs(N, self.tile_rows)
        # dtype name -> (left, right) (or their keys on a cluster)
        self._tile_factors: dict[str, tuple[Any, Any]] = {}
        # the class blocks' tiles (class_block_matmul)
        self._class_tile_pairs: np.ndarray | None = None

    def set_precision(self, precision: str) -> None:
        """Evaluate the recomputed tiles of ``G Z`` in ``"float32"`` or ``"float64"``."""
        if precision not in GRAM_PRECISIONS:
            raise ValueError(f"precision must be one of {GRAM_PRECISIONS}; got {precision!r}.")
        self.precision = precision

    def _factors(self, dtype):
        """The kernel's tile factors in ``dtype`` (computed once per dtype)."""
        if dtype not in self._tile_factors:
            self._tile_factors[dtype] = self.kernel.tile_factors(self._Xs, dtype)
        return self._tile_factors[dtype]

    def _tile_tasks(self, func, pairs, dtype, *args, zt=None):
        """``(tasks, extra)``: one pass of ``func(left, right, pairs, *args[, zt], kernel)``
        over the tile ``pairs`` with the tile factors in ``dtype`` (subclasses split the pairs
        into groups, one task each, whose results add up)."""
        left, right = self._factors(dtype)
        tail = (*args, zt) if zt is not None else args
        return [(func, left, right, pairs, *tail, self.kernel)], None

    def _sum_tasks(self, tasks, name, extra=None, part_nbytes=None, combine=blocks.sum_arrays):
        """Run ``tasks`` and return the sum of their results (``combine``: equally shaped
        arrays), each of at most ``part_nbytes`` bytes."""
        return combine(*self._run(tasks, name, extra=extra))

    def _add_results(self, tasks, name, add, extra=None):
        """Run ``tasks`` and call ``add(result)`` for each result (in any order)."""
        for part in self._run(tasks, name, extra=extra):
            add(part)

    def _tiled_class_matmul(self, zs, pairs=None):
        """``G Z`` from the symmetric tiles; ``zs`` (R, N) sorted, result (R, N, K) sorted."""
        if pairs is None:
            self.gram_passes += 1
            pairs = self._tile_pairs
        zt = np.ascontiguousarray(zs.T, dtype=self.precision)
        tasks, extra = self._tile_tasks(gram_tiles.gram_symmetric_class_product, pairs,
                                        self.precision, self._offsets, zt=zt)
        K, (R, N) = len(self._offsets) - 1, zs.shape
        # The sum in float64 whatever the tiles' dtype, added into its (K, N, R) view of an
        # (R, K, N) array, the layout of the stored-Gram product (blocks.
        # gram_class_product_by_rows; the W-step reads rows of B^T): no second array.
        out = np.zeros((R, K, N))
        acc = out.transpose(1, 2, 0)

        def add(part):  # a task's rows and classes of the sum, in the tile dtype
            gram_tiles.add_class_product_part(acc, part)

        self._add_results(tasks, "gram-tiles", add, extra)
        return out.transpose(0, 2, 1)  # (R, N, K)

    def class_block_matmul(self, V: np.ndarray) -> np.ndarray:
        """``diag(G_11, ..., G_KK) V``: every class block times its rows of V."""
        V = np.asarray(V, dtype=float)
        Vs = np.ascontiguousarray(self.classes.sort_rows(V))  # (N, m) sorted
        if not self.uses_tiles:
            out = np.empty_like(Vs)
            for k in range(self.classes.n_classes):
                a, b = self._class_range(k)
                if b > a:
                    out[a:b] = self._range_matmul((a, b), (a, b), Vs[a:b])
            return self.classes.unsort(out, 0)
        if self._class_tile_pairs is None:
            self._class_tile_pairs = gram_tiles.class_diagonal_tile_pairs(self._offsets,
                                                                       self.tile_rows)
        # (m, N, K), one class per row
        B = self._tiled_class_matmul(np.ascontiguousarray(Vs.T), self._class_tile_pairs)
        return self.classes.unsort(B.sum(axis=2).T, 0)

    # ------------------------------------------------------------------ how a pass runs
    def _run(self, tasks, name, extra=None):
        """Run ``(func, *args)`` tasks; returns their results in order."""
        raise NotImplementedError

    def _pass_input(self, value, name):
        """``(argument, extra)`` for a per-pass input (z, V) that every row-block task reads."""
        return value, None

    def _x_argument(self):
        """What the block functions receive as the sorted X."""
        return self._Xs

    def _submatrix(self, rows, cols):
        """``G[rows, cols]`` (sorted positions) as a dense array."""
        raise NotImplementedError

    def _range_matmul(self, rows, cols, V):
        """``G[rows, cols] @ V`` (sorted positions) without forming the block when possible."""
        raise NotImplementedError

    def _pass(self, func, *args, name="gram-pass", extra=None):
        """One task per row block: ``func(X_sorted, rows, *args, cache)``."""
        self.gram_passes += 1
        Xs = self._x_argument()
        tasks = [(func, Xs, rows, *args, cache) for rows, cache in zip(self._rows, self._cache)]
        return self._run(tasks, name, extra=extra)

    def close(self) -> None:
        """Release cached blocks (subclasses also remove what they wrote)."""
        self._cache = [None] * len(self._rows)
        self._tile_factors = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ the products
    def _gram_moments(self) -> tuple[np.ndarray, np.ndarray, float]:
        """Row sums ``G 1``, diagonal and ``||G||_F^2`` in one sweep (cached)."""
        if self._moments is None and self.uses_tiles:
            # Half of G's entries (symmetric tiles) in float64: the centring and the CAS
            # scale must be exact whatever precision the products use later.
            tasks, extra = self._tile_tasks(gram_tiles.gram_symmetric_moments, self._tile_pairs,
                                            "float64")
            self.gram_passes += 1
            N = self.n_samples
            packed = self._sum_tasks(tasks, "gram-moments", extra, part_nbytes=8 * (2 * N + 1))
            self._moments = (self.classes.unsort(packed[:N], 0),
                             self.classes.unsort(packed[N : 2 * N], 0), float(packed[2 * N]))
        if self._moments is None:
            parts = self._pass(blocks.gram_moments, self.kernel, self.col_block,
                               name="gram-moments")
            sums = self.classes.unsort(np.concatenate([p[0] for p in parts]), 0)
            diag = self.classes.unsort(np.concatenate([p[1] for p in parts]), 0)
            self._moments = (sums, diag, float(sum(p[2] for p in parts)))
        return self._moments

    def class_matmul(self, z: np.ndarray) -> np.ndarray:
        zs = np.ascontiguousarray(self.classes.sort(np.asarray(z, dtype=float)))
        if self.uses_tiles:
            return self.classes.unsort(self._tiled_class_matmul(zs), 1)
        zarg, extra = self._pass_input(zs, "z")
        parts = self._pass(blocks.gram_class_product, self._offsets, zarg, self.kernel,
                           self.col_block, name="gram-product", extra=extra)
        # The blocks' B^T (R, K, n) joined, returned as the (R, N, K) view (the layout of
        # the tile pass: the W-step reads rows of B^T).
        return self.classes.unsort(np.concatenate(parts, axis=2).transpose(0, 2, 1), 1)

    def matmul(self, V: np.ndarray) -> np.ndarray:
        """``G V`` for a dense (N, m) V (``G 1`` comes from the cached moments sweep)."""
        V = np.asarray(V, dtype=float)
        if V.shape[1] == 1 and np.all(V == 1.0):
            return self._gram_moments()[0][:, None].copy()
        Vs = np.ascontiguousarray(self.classes.sort_rows(V))
        varg, extra = self._pass_input(Vs, "V")
        parts = self._pass(blocks.gram_matmul, varg, self.kernel, self.col_block,
                           name="gram-matmul", extra=extra)
        return self.classes.unsort(np.concatenate(parts, axis=0), 0)

    def _class_range(self, k: int) -> tuple[int, int]:
        return int(self._offsets[k]), int(self._offsets[k + 1])

    def class_gram(self, k: int) -> np.ndarray:
        """The dense class block ``G[C_k, C_k]`` (n_k, n_k), in the class's sorted order."""
        ck = self._class_range(k)
        return self._submatrix(ck, ck)

    def class_gram_rows(self, k: int, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of :meth:`class_gram` (``G[C_k, C_k]``), a fresh array: a class
        block too large to hold whole, a slab at a time (the low-rank test's class-block pass:
        ``n_k^2`` kernel entries instead of ``N n_k`` through :meth:`columns`)."""
        a, b = self._class_range(k)
        return self._submatrix((a + start, min(a + stop, b)), (a, b))

    def class_matvec(self, k: int, V: np.ndarray) -> np.ndarray:
        ck = self._class_range(k)
        V = np.asarray(V, dtype=float)
        return self._range_matmul(ck, ck, V.reshape(ck[1] - ck[0], -1)).reshape(V.shape)

    def diagonal(self) -> np.ndarray:
        """The diagonal of G (N,), from the moments sweep."""
        return self._gram_moments()[1].copy()

    def columns(self, idx: np.ndarray) -> np.ndarray:
        """``G[:, idx]`` (N, len(idx)), computed here: N |idx| kernel entries."""
        return self.kernel(self.X, self.X[np.asarray(idx)])

    def covariance_moments(self) -> tuple[float, float]:
        """``(tr G / N, ||G||_F^2 / N^2)``; tr and the norm do not depend on the order."""
        _, diag, fro2 = self._gram_moments()
        N = self.n_samples
        return float(diag.sum()) / N, fro2 / N**2
