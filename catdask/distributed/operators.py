"""Dask data operators: the numpy operators' interface, computed block by block on workers.

The solver and the problems are shared with the numpy backend (``catdask.operators``); these
classes only provide the same methods. Per iteration, workers compute the heavy products and
per-class partial sums (:mod:`catdask.distributed.blocks`); the driver receives arrays of size
K x N, R x N or K x D x D and does the Z-step and the K x K polar / inverse-square-root work.

- :class:`DaskDataOperator` (linear, DESIGN.md section 2): X stays a row-chunked Dask array.
  One pass builds the class means, scatter matrices and the total covariance's moments; when
  the solver streams (CAS, or class matrices too big to keep), each iteration costs two passes,
  ``own_projections`` (X W) and ``class_weighted_sums`` (X^T Z).
- :class:`DaskGramOperator` (kernel, DESIGN.md section 3): ``G Z`` row block by row block,
  never materialising G. Gram blocks are recomputed every pass, or cached once (in worker
  memory, or in a zarr store as float32/float64) and streamed.

Every product works on all restarts at once (leading axis R), so R restarts share a pass.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import tempfile
import time

import numpy as np

from . import blocks
from .execute import BlockRunner
from .inputs import cluster_resources

__all__ = ["DaskDataOperator", "DaskGramOperator", "GRAM_CACHE_MODES"]

logger = logging.getLogger("catdask.distributed")

GRAM_CACHE_MODES = ("auto", "recompute", "memory", "zarr")

# Kernel entries per Gram sub-block computed in one call (4M float64 = 32 MiB): big enough for
# BLAS efficiency, small enough that a task's temporaries stay well under a worker's memory.
_GRAM_BLOCK_ENTRIES = 4 * 1024**2
# Kernel entries per task and pass (about 0.5-1 s of work on one core).
_TASK_ENTRIES = 10**8
# Per-pass inputs (z, V) are copied into every task up to this many bytes in all.
_INLINE_BYTES = 8 * 1024**2


class DaskDataOperator:
    """Linear data operator on a row-chunked Dask array (mirrors ``NumpyDataOperator``).

    Parameters
    ----------
    X : dask.array.Array of shape (N, D)
        Patterns, chunked by rows (any real dtype; blocks are promoted to float64 on the
        workers, so float32 storage halves I/O without changing the arithmetic).
    classes : ClassIndex
        Class codes of the N rows, in X's order (kept on the driver).
    center : ndarray of shape (D,) or None
        The origin x0; default the mean of X.
    persist : {"auto", True, False}, default="auto"
        Keep X in worker memory once the solver streams it (second pass onwards). ``"auto"``
        persists when X takes at most half of the cluster's memory.

    Attributes
    ----------
    passes : int
        Number of passes over X so far (for benchmarks and tests).
    """

    def __init__(self, X, classes, center=None, *, persist="auto"):
        import dask.array as da

        if not isinstance(X, da.Array) or X.ndim != 2:
            raise TypeError("DaskDataOperator needs a 2-D dask array; see catdask.distributed.inputs")
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
        self._stats = None
        self.passes = 0

    def _combine(self, tasks, combine, part_bytes, name):
        """Run one task per block and combine the partial results: on the driver when they are
        small (one network hop fewer per pass), else in a tree on the workers."""
        if part_bytes * len(tasks) <= _INLINE_BYTES:
            return combine(*self._runner.run(tasks, name))
        return self._runner.reduce(tasks, combine, name)

    # ------------------------------------------------------------------ one-pass statistics
    def _statistics(self):
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

    @property
    def center(self):
        """The origin x0 (the training centroid unless given)."""
        if self._center is None:
            s = self._statistics()
            self._center = (s["n"] @ s["mean"]) / self.n_samples
        return self._center

    def class_means(self):
        """Class means measured from x0, shape (K, D)."""
        return self._statistics()["mean"] - self.center

    def class_second_moments(self, origin):
        """The class matrices R_k (K, D, D): scatter (``"class"``) or moment about x0."""
        s = self._statistics()
        if origin == "class":
            return s["M2"].copy()
        d = s["mean"] - self.center
        return s["M2"] + s["n"][:, None, None] * (d[:, :, None] * d[:, None, :])

    def covariance_moments(self):
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

    def own_projections(self, W):
        """``u[r, i] = w_{y_i}^T (x_i - x0)`` for W of shape (R, D, K); returns (R, N)."""
        W = np.asarray(W, dtype=float)
        tasks = [(blocks.block_own_projections, xb, cb, self.center, W)
                 for xb, cb, _, _ in self._blocks()]
        self.passes += 1
        return np.concatenate(self._runner.run(tasks, "own-projections"), axis=1)

    def class_weighted_sums(self, z):
        """``Y[r, :, k] = sum_{i in C_k} z[r, i] (x_i - x0)`` (paper eq. Ydef); (R, D, K)."""
        z = np.asarray(z, dtype=float)
        K = self.classes.n_classes
        Y_bytes = 8 * z.shape[0] * self.n_features * K
        tasks = [
            (blocks.block_weighted_sums, xb, cb, self.center, np.ascontiguousarray(z[:, a:b]), K)
            for xb, cb, a, b in self._blocks()
        ]
        self.passes += 1
        return self._combine(tasks, blocks.sum_arrays, Y_bytes, "weighted-sums")


class DaskGramOperator:
    """Gram operator computed on Dask workers, block by block (mirrors ``NumpyGramOperator``).

    X (N x D) is small next to G (N x N): it is held on the driver and once on every worker,
    sorted by class so that only class-k columns of G feed column k of ``G Z``. Each product is
    one task per row block ``I`` computing ``G[I, :]`` in sub-blocks of ``k(X_I, X_J)``
    (recompute mode) or reading them from the cache.

    Parameters
    ----------
    X : ndarray of shape (N, D)
        Training patterns in the order ``classes`` refers to (any order; the estimator passes
        them sorted by class).
    classes : ClassIndex
    kernel : catdask.kernels.Kernel
    cache : {"auto", "recompute", "memory", "zarr"}, default="auto"
        ``"recompute"``: evaluate ``k(X_I, X_J)`` in every pass (no O(N^2) memory).
        ``"memory"``: compute the Gram row blocks once and keep them in worker memory.
        ``"zarr"``: compute them once into a zarr store (``store``) and stream them from disk.
        ``"auto"``: ``"zarr"`` when ``store`` is given; else ``"memory"`` when the cache takes
        at most ``max_gram_bytes`` and half the cluster's memory; else ``"recompute"``.
    store : str or None
        Path of the zarr Gram cache. An existing cache built from the same data, kernel and
        dtype is reused; otherwise it is (re)written. None with ``cache="zarr"``: a temporary
        directory removed by :meth:`close`.
    cache_dtype : {"float64", "float32"}, default="float64"
        Storage precision of cached blocks (float32 halves memory and I/O; products are still
        accumulated in float64, so results change at the 1e-7 level).
    max_gram_bytes : int, default=2 GiB
    block_rows : int, optional
        Rows per task (default: one task per worker thread, or more so that a task handles
        at most about 1e8 kernel entries).

    Attributes
    ----------
    cache_mode : str
        The mode in use after resolving ``"auto"``.
    gram_passes : int
        Number of full passes over G so far.
    """

    def __init__(self, X, classes, kernel, *, cache="auto", store=None, cache_dtype="float64",
                 max_gram_bytes=2 * 1024**3, block_rows=None):
        if cache not in GRAM_CACHE_MODES:
            raise ValueError(f"cache must be one of {GRAM_CACHE_MODES}; got {cache!r}.")
        cache_dtype = np.dtype(cache_dtype)
        if cache_dtype not in (np.dtype("float32"), np.dtype("float64")):
            raise ValueError(f"cache_dtype must be float32 or float64; got {cache_dtype}.")
        self.X = np.ascontiguousarray(X, dtype=float)
        self.classes = classes
        self.kernel = kernel
        self.n_samples = N = self.X.shape[0]
        self._order = classes.order
        Xs = self.X if self._order is None else self.X[self._order]
        self._offsets = tuple(int(o) for o in classes.offsets)
        threads, memory = cluster_resources()
        if block_rows is None:
            # Few, large tasks (STACK.md): one per worker thread, more only when a task would
            # exceed _TASK_ENTRIES kernel entries (a second or so), in multiples of the threads.
            n_blocks = threads * max(1, math.ceil(N * N / (threads * _TASK_ENTRIES)))
            block_rows = max(1, math.ceil(N / n_blocks))
        self.block_rows = int(block_rows)
        self.col_block = max(256, _GRAM_BLOCK_ENTRIES // self.block_rows)
        self._rows = [(a, min(a + self.block_rows, N)) for a in range(0, N, self.block_rows)]
        self._runner = BlockRunner()
        self._Xd = self._runner.put(Xs, "X-sorted", everywhere=True)
        self.gram_passes = 0
        self._moments = None

        gram_bytes = N * N * cache_dtype.itemsize
        if cache == "auto":
            if store is not None:
                cache = "zarr"
            elif gram_bytes <= min(max_gram_bytes, memory // 2):
                cache = "memory"
            else:
                cache = "recompute"
        self.cache_mode = cache
        self.cache_dtype = cache_dtype
        self.store = None if store is None else os.fspath(store)
        self._tmpdir = None
        self._cache = [None] * len(self._rows)
        if cache == "memory":
            self._build_memory_cache()
        elif cache == "zarr":
            self._build_zarr_cache()
        logger.info("Gram operator: N=%d, %d row blocks of %d, cache=%s (%s, %.3g GB)", N,
                    len(self._rows), self.block_rows, cache, cache_dtype, gram_bytes / 1e9)

    # ------------------------------------------------------------------ the Gram cache
    def _build_memory_cache(self):
        tasks = [(blocks.gram_rows, self._Xd, rows, self.kernel, self.cache_dtype, self.col_block)
                 for rows in self._rows]
        self._cache = self._runner.persist(tasks, "gram-rows")

    def _cache_token(self):
        from dask.base import tokenize

        return tokenize(self.X if self._order is None else self.X[self._order], self.kernel,
                        str(self.cache_dtype), self.block_rows, self.col_block)

    def _build_zarr_cache(self):
        import zarr

        if self.store is None:
            self._tmpdir = tempfile.mkdtemp(prefix="catdask-gram-")
            self.store = os.path.join(self._tmpdir, "gram.zarr")
        token = self._cache_token()
        N = self.n_samples
        try:
            existing = zarr.open_array(self.store, mode="r")
            reuse = existing.attrs.get("catdask_token") == token and existing.shape == (N, N)
        except Exception:  # no store, or not a readable array: build it
            reuse = False
        if not reuse:
            t0 = time.perf_counter()
            # Write under a temporary name, then rename into place: a crash never leaves a
            # half-written cache that a later fit would trust (STACK.md, zarr 3).
            tmp = f"{self.store}.tmp-{os.getpid()}-{time.time_ns()}"
            arr = zarr.create_array(
                store=tmp, shape=(N, N), chunks=(self.block_rows, min(N, self.col_block)),
                dtype=self.cache_dtype, compressors=None, overwrite=True,
            )
            tasks = [(blocks.gram_rows_to_zarr, self._Xd, rows, self.kernel, tmp, self.col_block)
                     for rows in self._rows]
            self._runner.run(tasks, "gram-to-zarr")
            arr.attrs["catdask_token"] = token
            if os.path.exists(self.store):
                shutil.rmtree(self.store)
            os.replace(tmp, self.store)
            logger.info("wrote Gram cache %s in %.1f s", self.store, time.perf_counter() - t0)
        self._cache = [self.store] * len(self._rows)

    def close(self):
        """Release cached blocks and remove a temporary zarr cache."""
        self._cache = [None] * len(self._rows)
        self._runner.release()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    # ------------------------------------------------------------------ helpers
    def _unsort_rows(self, M, axis):
        if self._order is None:
            return M
        out = np.empty_like(M)
        idx = [slice(None)] * M.ndim
        idx[axis] = self._order
        out[tuple(idx)] = M
        return out

    def _shared_input(self, value, name):
        """A per-pass input that every row-block task reads: inlined in each task while the
        copies are small (saves a worker-to-worker hop per pass), else one shared graph key."""
        if value.nbytes * len(self._rows) <= _INLINE_BYTES:
            return value, None
        key = BlockRunner.new_key(name)
        return key, {key: value}

    def _pass(self, func, *args, name="gram-pass", extra=None):
        """One task per row block: ``func(X_sorted, rows, *args, cache)``; ``extra`` holds
        per-pass inputs (z, V) that every task reads, put into the graph once."""
        self.gram_passes += 1
        tasks = [(func, self._Xd, rows, *args, cache)
                 for rows, cache in zip(self._rows, self._cache)]
        return self._runner.run(tasks, name, extra=extra)

    def _gram_moments(self):
        """Row sums, diagonal and ``||G||_F^2`` in one sweep (cached)."""
        if self._moments is None:
            parts = self._pass(blocks.gram_moments, self.kernel, self.col_block,
                               name="gram-moments")
            sums = self._unsort_rows(np.concatenate([p[0] for p in parts]), 0)
            diag = self._unsort_rows(np.concatenate([p[1] for p in parts]), 0)
            self._moments = (sums, diag, float(sum(p[2] for p in parts)))
        return self._moments

    # ------------------------------------------------------------------ the operator interface
    def class_matmul(self, z):
        """``B[r] = G Z_r`` with ``Z_r[i, y_i] = z[r, i]``: (R, N) -> (R, N, K)."""
        zs = np.ascontiguousarray(self.classes.sort(np.asarray(z, dtype=float)))
        zarg, extra = self._shared_input(zs, "z")
        parts = self._pass(blocks.gram_class_product, self._offsets, zarg, self.kernel,
                           self.col_block, name="gram-product", extra=extra)
        return self._unsort_rows(np.concatenate(parts, axis=1), 1)

    def matmul(self, V):
        """``G V`` for a dense (N, m) V."""
        V = np.asarray(V, dtype=float)
        if V.shape[1] == 1 and np.all(V == 1.0):
            return self._gram_moments()[0][:, None].copy()  # G 1, shared with the moments
        Vs = np.ascontiguousarray(V if self._order is None else V[self._order])
        varg, extra = self._shared_input(Vs, "V")
        parts = self._pass(blocks.gram_matmul, varg, self.kernel, self.col_block,
                           name="gram-matmul", extra=extra)
        return self._unsort_rows(np.concatenate(parts, axis=0), 0)

    def _submatrix(self, rows, cols):
        """``G[rows, cols]`` (sorted positions), computed on workers in row pieces."""
        a, b = rows
        step = max(1, _GRAM_BLOCK_ENTRIES // max(1, cols[1] - cols[0]))
        tasks = [(blocks.gram_submatrix, self._Xd, (r, min(r + step, b)), cols, self.kernel)
                 for r in range(a, b, step)]
        out = np.empty((b - a, cols[1] - cols[0]))
        # Gather a few pieces at a time so the driver never holds the block twice.
        group = 2 * cluster_resources()[0]
        for g in range(0, len(tasks), group):
            for t, piece in zip(range(g, g + group), self._runner.run(tasks[g : g + group])):
                r0 = a + t * step
                out[r0 - a : r0 - a + piece.shape[0]] = piece
        return out

    def class_gram(self, k):
        """The dense class block ``G[C_k, C_k]`` (n_k, n_k)."""
        a, b = self.classes.offsets[k], self.classes.offsets[k + 1]
        return self._submatrix((int(a), int(b)), (int(a), int(b)))

    def class_matvec(self, k, V):
        """``G[C_k, C_k] @ V`` for V of shape (n_k,) or (n_k, m), without forming the block
        (a Lanczos matvec for the decoupled start of large classes)."""
        a, b = int(self.classes.offsets[k]), int(self.classes.offsets[k + 1])
        V = np.asarray(V, dtype=float)
        V2 = V.reshape(b - a, -1)
        step = max(1, math.ceil((b - a) / cluster_resources()[0]))
        tasks = [(blocks.gram_range_matmul, self._Xd, (r, min(r + step, b)), (a, b), V2,
                  self.kernel, self.col_block) for r in range(a, b, step)]
        out = np.concatenate(self._runner.run(tasks, "class-matvec"), axis=0)
        return out.reshape(V.shape)

    def class_rows(self, k):
        """``G[C_k, :]`` as a dense (n_k, N) array (columns in the given order)."""
        a, b = self.classes.offsets[k], self.classes.offsets[k + 1]
        return self._unsort_rows(self._submatrix((int(a), int(b)), (0, self.n_samples)), 1)

    def diagonal(self):
        return self._gram_moments()[1].copy()

    def columns(self, idx):
        """``G[:, idx]`` (N, len(idx)), computed on the driver: N |idx| kernel entries."""
        return self.kernel(self.X, self.X[np.asarray(idx)])

    def covariance_moments(self):
        """``(tr G / N, ||G||_F^2 / N^2)``."""
        _, diag, fro2 = self._gram_moments()
        N = self.n_samples
        return float(diag.sum()) / N, fro2 / N**2
