"""The linear data operator on Dask workers: the :mod:`.blocks` functions, one task per row block."""

from __future__ import annotations

import logging
import time

import numpy as np

from ..core.classes import ClassIndex
from ..core.protocols import DataOperator
from ..distributed.execute import BlockRunner, cluster_resources
from . import blocks

logger = logging.getLogger("catdask.distributed")

# Per-pass partial results are combined on the driver up to this many bytes in all.
_INLINE_BYTES = 8 * 1024**2


class DaskDataOperator(DataOperator):
    """Linear data operator on a row-chunked Dask array X (N, D) (mirrors ``NumpyDataOperator``)."""

    def __init__(self, X, classes: ClassIndex, center: np.ndarray | None = None, *,
                 persist: bool | str = "auto"):
        import dask.array as da

        if not isinstance(X, da.Array) or X.ndim != 2:
            raise TypeError("DaskDataOperator needs a 2-D dask array; see "
                            "catdask.distributed.inputs.as_row_chunked")
        if X.numblocks[1] > 1:
            X = X.rechunk({1: -1})
        if X.shape[0] != classes.n_samples:
            raise ValueError(f"X has {X.shape[0]} rows but there are {classes.n_samples} labels.")
        self.classes = classes
        self.n_samples, self.n_features = (int(s) for s in X.shape)
        self._X = X
        self._bounds = np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(int)
        self._runner = BlockRunner()
        code_dtype = np.min_scalar_type(max(classes.n_classes - 1, 0))  # uint8 for K <= 256
        self._codes = [
            self._runner.put(classes.codes[a:b].astype(code_dtype), "codes")
            for a, b in zip(self._bounds[:-1], self._bounds[1:])
        ]
        self._x_blocks = self._runner.array_keys(X)
        self._center = None if center is None else np.asarray(center, dtype=float)
        self._persist = persist
        self._persisted = False
        self._stats: dict | None = None
        self.passes = 0

    def _combine(self, tasks, combine, part_bytes, name):
        """Run one task per block and combine the partial results: on the driver when they are
        small (one network hop fewer per pass), else in a tree on the workers."""
        if part_bytes * len(tasks) <= _INLINE_BYTES:
            return combine(*self._runner.run(tasks, name))
        return self._runner.reduce(tasks, combine, name)

    # ------------------------------------------------------------------ one-pass statistics
    def _statistics(self) -> dict:
        """Class counts, means and scatter matrices (one pass over X, cached)."""
        if self._stats is None:
            K = self.classes.n_classes
            t0 = time.perf_counter()
            tasks = [(blocks.block_class_stats, xb, cb, K)
                     for xb, cb in zip(self._x_blocks, self._codes)]
            part_bytes = 8 * K * (self.n_features + 1) ** 2
            stats = self._combine(tasks, blocks.combine_class_stats, part_bytes, "class-stats")
            self.passes += 1
            if not stats["finite"]:
                raise ValueError("Input X contains NaN or infinity.")
            if not np.array_equal(stats["n"], self.classes.counts):
                raise RuntimeError("class counts from the data pass do not match the labels")
            self._stats = stats
            logger.debug("statistics pass over %d x %d in %.2f s", self.n_samples,
                         self.n_features, time.perf_counter() - t0)
        return self._stats

    def close(self) -> None:
        """Release X's persisted blocks on the cluster."""
        self._runner.release()

    @property
    def center(self) -> np.ndarray:
        """The origin x0 (the training centroid unless given)."""
        if self._center is None:
            s = self._statistics()
            self._center = (s["n"] @ s["mean"]) / self.n_samples
        return self._center

    def class_means(self) -> np.ndarray:
        return self._statistics()["mean"] - self.center

    def class_second_moments(self, origin: str) -> np.ndarray:
        return blocks.class_second_moments(self._statistics(), self.center, origin)

    def covariance_moments(self) -> tuple[float, float]:
        """``(tr C, tr C^2)`` of the total covariance ``C = sum_k R_k(x0) / N``."""
        C = self.class_second_moments("global").sum(axis=0) / self.n_samples
        return float(np.trace(C)), float(np.sum(C * C))

    # ------------------------------------------------------------------ streaming passes
    def _blocks(self):
        """X's row blocks, persisted in worker memory once the solver starts streaming."""
        if not self._persisted and self._persist:
            _, memory = cluster_resources()
            if self._persist is True or self._X.nbytes <= memory // 2:
                self._x_blocks = self._runner.array_keys(self._X, persist=True)
            self._persisted = True
        return zip(self._x_blocks, self._codes, self._bounds[:-1], self._bounds[1:])

    def own_projections(self, W: np.ndarray) -> np.ndarray:
        W = np.asarray(W, dtype=float)
        tasks = [(blocks.block_own_projections, xb, cb, self.center, W)
                 for xb, cb, _, _ in self._blocks()]
        self.passes += 1
        return np.concatenate(self._runner.run(tasks, "own-projections"), axis=1)

    def class_weighted_sums(self, z: np.ndarray) -> np.ndarray:
        z = np.asarray(z, dtype=float)
        K = self.classes.n_classes
        Y_bytes = 8 * z.shape[0] * self.n_features * K
        tasks = [
            (blocks.block_weighted_sums, xb, cb, self.center, np.ascontiguousarray(z[:, a:b]), K)
            for xb, cb, a, b in self._blocks()
        ]
        self.passes += 1
        return self._combine(tasks, blocks.sum_arrays, Y_bytes, "weighted-sums")
