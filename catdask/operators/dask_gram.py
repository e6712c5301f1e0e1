"""The Gram operator on Dask workers: the :mod:`.blocks` functions, one task per row block."""

from __future__ import annotations

import logging
import math
import os
import shutil
import tempfile
import time

from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.acceleration import held_history
from ..core.classes import ClassIndex
from ..distributed.execute import INLINE_BYTES, BlockRunner, cluster_resources
from . import blocks
from .gram_base import GRAM_PRECISIONS, BlockGramOperator

if TYPE_CHECKING:
    from ..kernels import Kernel

logger = logging.getLogger("catdask.distributed")

GRAM_CACHE_MODES = ("auto", "recompute", "memory", "zarr")

# Kernel entries per Gram sub-block computed in one call (4M float64 = 32 MiB): big enough for
# BLAS efficiency, small enough that a task's temporaries stay well under a worker's memory.
_GRAM_BLOCK_ENTRIES = 4 * 1024**2
# Kernel entries per task and pass (about 0.5-1 s of work on one core).
_TASK_ENTRIES = 10**8
# A tile-pass task also evaluates at least this many kernel entries per entry of the row band
# it returns: moving and adding a band entry costs about as much as a few kernel entries, so
# this keeps that small and stops the bytes a pass moves from growing as N^3.
_TILE_ENTRIES_PER_BAND_ENTRY = 100


class DaskGramOperator(BlockGramOperator):
    """Gram operator computed on Dask workers, block by block (mirrors ``NumpyGramOperator``)."""

    def __init__(self, X: np.ndarray, classes: ClassIndex, kernel: Kernel, *,
                 cache: str = "auto", store: str | os.PathLike | None = None,
                 cache_dtype: str | np.dtype = "float64", max_gram_bytes: int = 2 * 1024**3,
                 block_rows: int | None = None, precision: str = "float64",
                 tile_rows: int | None = None):
        if cache not in GRAM_CACHE_MODES:
            raise ValueError(f"cache must be one of {GRAM_CACHE_MODES}; got {cache!r}.")
        cache_dtype = np.dtype(cache_dtype)
        if cache_dtype not in (np.dtype("float32"), np.dtype("float64")):
            raise ValueError(f"cache_dtype must be float32 or float64; got {cache_dtype}.")
        N = np.shape(X)[0]
        threads, memory = cluster_resources()
        # Read once: asking the scheduler is a round trip, and a pass is latency-bound at
        # small N (a worker that joins later still gets tasks, the split just ignores it).
        self._threads = threads
        if block_rows is None:
            # Few, large tasks (docs/stack.md): one per worker thread, more only when a task would
            # exceed _TASK_ENTRIES kernel entries (a second or so), in multiples of the threads.
            n_blocks = threads * max(1, math.ceil(N * N / (threads * _TASK_ENTRIES)))
            block_rows = max(1, math.ceil(N / n_blocks))
        self._init_blocks(X, classes, kernel, block_rows,
                          col_block=max(256, _GRAM_BLOCK_ENTRIES // int(block_rows)),
                          tile_rows=tile_rows)
        self._runner = BlockRunner()

        gram_bytes = N * N * cache_dtype.itemsize
        if cache == "auto":
            if store is not None:
                cache = "zarr"
            elif gram_bytes <= min(max_gram_bytes, memory // 2):
                cache = "memory"
            else:
                cache = "recompute"
        self.cache_mode = cache
        self.uses_tiles = cache == "recompute" and kernel.builtin
        self.cache_dtype = cache_dtype
        self._place_inputs()
        self.set_precision(precision)
        self.store: str | None = None if store is None else str(os.fspath(store))
        self._tmpdir: str | None = None
        if cache == "memory":
            self._build_memory_cache()
        elif cache == "zarr":
            self._build_zarr_cache()
        logger.info("Gram operator: N=%d, %d row blocks of %d, cache=%s (%s, %.3g GB)", N,
                    len(self._rows), self.block_rows, cache, cache_dtype, gram_bytes / 1e9)

    def _place_inputs(self):
        """What every pass reads, put on every worker in one round trip: X sorted by class and,
        for the tile pass, the tile factors in both precisions. The driver then keeps no copy of
        X (:meth:`columns` runs on the workers)."""
        values = {"X-sorted": self._Xs}
        if self.uses_tiles:
            for dtype in GRAM_PRECISIONS:
                values[f"left-{dtype}"], values[f"right-{dtype}"] = self.kernel.tile_factors(
                    self._Xs, dtype)
        keys = self._runner.put_many(values, everywhere=True)
        self._Xd = keys[0]
        if self.uses_tiles:
            for i, dtype in enumerate(GRAM_PRECISIONS):
                self._tile_factors[dtype] = (keys[1 + 2 * i], keys[2 + 2 * i])
        self._token = self._cache_token() if self.cache_mode == "zarr" else None
        # The inverse of the class sort, for columns given in the operator's input order.
        order = self.classes.order
        self._sorted_position = None if order is None else np.argsort(order)
        del self.X, self._Xs

    # ------------------------------------------------------------------ the Gram cache
    def _build_memory_cache(self):
        Xd = self._Xd
        tasks = [(blocks.gram_rows, Xd, rows, self.kernel, self.cache_dtype, self.col_block)
                 for rows in self._rows]
        self._cache = self._runner.persist(tasks, "gram-rows")

    def _cache_token(self):
        from dask.base import tokenize

        return tokenize(self._Xs, self.kernel, str(self.cache_dtype), self.block_rows,
                        self.col_block)

    def _build_zarr_cache(self):
        import zarr

        if self.store is None:
            self._tmpdir = tempfile.mkdtemp(prefix="catdask-gram-")
            self.store = os.path.join(self._tmpdir, "gram.zarr")
        token = self._token
        N = self.n_samples
        try:
            existing = zarr.open_array(self.store, mode="r")
            reuse = existing.attrs.get("catdask_token") == token and existing.shape == (N, N)
        except Exception:  # no store, or not a readable array: build it
            reuse = False
        if not reuse:
            t0 = time.perf_counter()
            # Write under a temporary name, then rename into place: a crash never leaves a
            # half-written cache that a later fit would trust (docs/stack.md, zarr 3).
            tmp = f"{self.store}.tmp-{os.getpid()}-{time.time_ns()}"
            arr = zarr.create_array(
                store=tmp, shape=(N, N), chunks=(self.block_rows, min(N, self.col_block)),
                dtype=self.cache_dtype, compressors=None, overwrite=True,
            )
            Xd = self._Xd
            tasks = [(blocks.gram_rows_to_zarr, Xd, rows, self.kernel, tmp, self.col_block)
                     for rows in self._rows]
            self._runner.run(tasks, "gram-to-zarr")
            arr.attrs["catdask_token"] = token
            if os.path.exists(self.store):
                shutil.rmtree(self.store)
            os.replace(tmp, self.store)
            logger.info("wrote Gram cache %s in %.1f s", self.store, time.perf_counter() - t0)
        self._cache = [self.store] * len(self._rows)

    def solver_history(self, capacity: int):
        """Anderson's history on the workers, beside the Gram products, where it is large
        (none without a distributed client: the threaded scheduler runs in the driver's memory)."""
        return held_history(self._runner, capacity, self.n_samples, self.classes.n_classes)

    def close(self):
        """Release cached blocks and remove a temporary zarr cache."""
        super().close()
        self._runner.release()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    # ------------------------------------------------------------------ how a pass runs
    matvec_without_class_block = True
    #: Kernel entries per tile-pass task, at least (:data:`_TASK_ENTRIES`), and per entry of
    #: the task's row band (:data:`_TILE_ENTRIES_PER_BAND_ENTRY`); an instance may set its own
    #: (benchmarks/cores_ceiling.py sets the former rule, 0 per band entry, as its baseline).
    tile_task_entries: int = _TASK_ENTRIES
    tile_entries_per_band_entry: int = _TILE_ENTRIES_PER_BAND_ENTRY

    def _x_argument(self):
        return self._Xd

    def _tile_tasks(self, func, pairs, dtype, *args, zt=None):
        """Tile pairs in contiguous groups of about equal work, one task per group: one per
        worker thread, more so that a task evaluates at most about :attr:`tile_task_entries`
        kernel entries, or :attr:`tile_entries_per_band_entry` per entry of the row band it
        returns (``zt``'s columns times the classes times N) where that is more. The factors
        are the keys :meth:`_place_inputs` put on every worker."""
        left, right = self._tile_factors[dtype]
        work = np.cumsum((pairs[:, 1] - pairs[:, 0]) * (pairs[:, 3] - pairs[:, 2]))
        threads = self._threads
        band = 0 if zt is None else zt.shape[1] * (len(self._offsets) - 1) * zt.shape[0]
        per_task = max(self.tile_task_entries, self.tile_entries_per_band_entry * band)
        n_tasks = threads * max(1, math.ceil(float(work[-1]) / (threads * per_task)))
        n_tasks = min(n_tasks, len(pairs))
        cuts = np.searchsorted(work, work[-1] * np.arange(1, n_tasks) / n_tasks, side="right")
        groups = [g for g in np.split(pairs, cuts) if len(g)]
        extra = None
        if zt is not None:
            zarg, extra = self._pass_input(zt, "z")
            args = (*args, zarg)
        tasks = [(_one_blas_thread, func, left, right, g, *args, self.kernel) for g in groups]
        return tasks, extra

    def _sum_tasks(self, tasks, name, extra=None, part_nbytes=None, combine=blocks.sum_arrays):
        """Add the tasks' results in a tree on the workers (a few small ones on the driver,
        :meth:`BlockRunner.reduce`); the driver receives one array."""
        return self._runner.reduce(tasks, combine, name, extra=extra,
                                   part_nbytes=part_nbytes)

    def _add_results(self, tasks, name, add, extra=None):
        """Each task's result to the driver as it finishes (:meth:`BlockRunner.accumulate`)."""
        self._runner.accumulate(tasks, add, name, extra=extra)

    def _run(self, tasks, name, extra=None):
        return self._runner.run(tasks, name, extra=extra)

    def _pass_input(self, value, name):
        """A per-pass input that every row-block task reads: inlined in each task while the
        copies are small (saves a worker-to-worker hop per pass), else one shared graph key."""
        if value.nbytes * len(self._rows) <= INLINE_BYTES:
            return value, None
        key = BlockRunner.new_key(name)
        return key, {key: value}

    def _submatrix(self, rows, cols):
        """``G[rows, cols]`` (sorted positions), computed on workers in row pieces."""
        a, b = rows
        step = max(1, _GRAM_BLOCK_ENTRIES // max(1, cols[1] - cols[0]))
        tasks = [(blocks.gram_submatrix, self._Xd, (r, min(r + step, b)), slice(*cols),
                  self.kernel)
                 for r in range(a, b, step)]
        out = np.empty((b - a, cols[1] - cols[0]))
        # Gather a few pieces at a time so the driver never holds the block twice.
        group = 2 * self._threads
        for g in range(0, len(tasks), group):
            for t, piece in zip(range(g, g + group), self._runner.run(tasks[g : g + group])):
                r0 = a + t * step
                out[r0 - a : r0 - a + piece.shape[0]] = piece
        return out

    def columns(self, idx: np.ndarray) -> np.ndarray:
        """``G[:, idx]`` (N, len(idx)) in the operator's input order, computed on the workers
        (the driver holds no X), one task per row block."""
        idx = np.asarray(idx)
        pos = idx if self._sorted_position is None else self._sorted_position[idx]
        tasks = [(blocks.gram_submatrix, self._Xd, rows, pos, self.kernel)
                 for rows in self._rows]
        return self.classes.unsort(np.concatenate(self._runner.run(tasks, "columns")), axis=0)

    def _range_matmul(self, rows, cols, V):
        """``G[rows, cols] @ V`` in row pieces on the workers, never forming the block (a
        Lanczos matvec for the decoupled start of large classes)."""
        a, b = rows
        step = max(1, math.ceil((b - a) / self._threads))
        tasks = [(blocks.gram_range_matmul, self._Xd, (r, min(r + step, b)), cols, V,
                  self.kernel, self.col_block) for r in range(a, b, step)]
        return np.concatenate(self._runner.run(tasks, "class-matvec"), axis=0)


_BLAS_CONTROLLER: list[Any] = []  # this process's threadpoolctl controller, made by the first task


def _one_blas_thread(func, *args):
    """Run ``func`` with one BLAS thread, whatever the worker's own setting (a worker thread is one
    core). The controller is made once per process, by the first task: looking up the BLAS
    libraries on every call cost more than the limit itself.
    """
    if not _BLAS_CONTROLLER:
        from threadpoolctl import ThreadpoolController

        _BLAS_CONTROLLER.append(ThreadpoolController())
    with _BLAS_CONTROLLER[0].limit(limits=1, user_api="blas"):
        return func(*args)
