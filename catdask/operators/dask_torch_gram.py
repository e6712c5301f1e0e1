"""The device Gram operator split over the GPUs of a Dask cluster.

:class:`DaskTorchGramOperator` is :class:`~catdask.operators.torch_gram.TorchGramOperator` with
one method replaced: the primitive ``G[rows, cols] V`` splits its rows over the workers that
declare a GPU (``dask worker --resources GPU=1``, one worker per GPU, deploy/gpu-cluster.md),
and each task runs the same primitive on its worker's GPU. Every product (``G Z``, the moments,
the class blocks) is written once, in ``TorchGramOperator``; the driver keeps only host tensors.

A worker builds its device copy of X once per fit (:func:`_worker_operator`, keyed by the
fit's token) and reuses it in every pass; a pass ships V (N x R floats) and gets back the
rows' products.
"""

from __future__ import annotations

import math
import uuid

import numpy as np

from ..core.classes import ClassIndex
from ..distributed.execute import BlockRunner
from .torch_gram import TorchGramOperator

__all__ = ["DaskTorchGramOperator", "GPU_RESOURCE"]

#: The Dask worker resource a GPU worker declares (``--resources GPU=1``).
GPU_RESOURCE = "GPU"

# The operators a worker process holds, by token (X on its GPU); one fit's at a time.
_WORKER_OPERATORS: dict[str, TorchGramOperator] = {}


def _worker_operator(token, X_sorted, offsets, kernel, device):
    """This worker's device operator for the fit ``token`` (built on its first task)."""
    op = _WORKER_OPERATORS.get(token)
    if op is None:
        for old in _WORKER_OPERATORS.values():  # a finished fit's tensors
            old.close()
        _WORKER_OPERATORS.clear()
        sizes = np.diff(np.asarray(offsets))
        classes = ClassIndex(np.repeat(np.arange(len(sizes)), sizes), len(sizes))
        op = TorchGramOperator(X_sorted, classes, kernel, device=device)
        _WORKER_OPERATORS[token] = op
    return op


def worker_range_product(token, X_sorted, offsets, kernel, device, rows, cols, V, precision,
                         square):
    """One task: ``G[rows, cols] @ V`` on this worker's ``device``, a float64 numpy array."""
    op = _worker_operator(token, X_sorted, offsets, kernel, device)
    Vd = op._to_device(V, precision)
    return op._range_product(rows, cols, Vd, precision, square=square).cpu().numpy()


def release_worker_operator(token):
    """Free a worker's device copy of the fit ``token``."""
    op = _WORKER_OPERATORS.pop(token, None)
    if op is not None:
        op.close()


class DaskTorchGramOperator(TorchGramOperator):
    """:class:`TorchGramOperator` whose Gram products run on the cluster's GPU workers.

    Parameters
    ----------
    X : ndarray of shape (N, D)
    classes : ClassIndex
    kernel : catdask.kernels.Kernel
    precision : {"float64", "float32"}, default="float64"
    worker_device : str, default="cuda"
        The device each GPU worker computes on (its own GPU: a worker sees the GPU its
        ``CUDA_VISIBLE_DEVICES`` names as "cuda"); "cpu" runs the same tasks on the workers'
        CPUs (the tests' stand-in).

    Raises
    ------
    ValueError
        When no worker of the current cluster declares the ``GPU`` resource (the tasks would
        wait for one forever).
    """

    def __init__(self, X, classes, kernel, *, precision="float64", worker_device="cuda"):
        super().__init__(X, classes, kernel, device="cpu", precision=precision, fused=False)
        self.worker_device = str(worker_device)
        self._runner = BlockRunner()
        self._gpus = _gpu_workers(self._runner.client)
        self._token = uuid.uuid4().hex
        (self._X_key,) = self._runner.put_many({"X-sorted": self._Xs}, everywhere=True)

    def _range_product(self, rows, cols, V, precision, *, square=False):
        """Rows split over the GPU workers, one task each (two per GPU balance the tail)."""
        torch = self._torch
        (a, b), (c, d) = rows, cols
        if b <= a or d <= c:
            return torch.zeros((b - a, V.shape[1]), dtype=torch.float64)
        n_tasks = min(b - a, 2 * self._gpus)
        step = math.ceil((b - a) / n_tasks)
        Vh = V.cpu().numpy()
        key = BlockRunner.new_key("V")
        tasks = [(worker_range_product, self._token, self._X_key, self._offsets, self.kernel,
                  self.worker_device, (r, min(r + step, b)), cols, key, precision, square)
                 for r in range(a, b, step)]
        parts = self._runner.run(tasks, "gpu-gram", extra={key: Vh},
                                 resources={GPU_RESOURCE: 1})
        return torch.from_numpy(np.concatenate(parts, axis=0))

    def close(self) -> None:
        """Free the workers' device copies and the cluster's copy of X."""
        client = self._runner.client
        if client is not None:
            try:
                client.run(release_worker_operator, self._token)
            except Exception:  # noqa: BLE001 - a cluster already gone holds nothing
                pass
        self._runner.release()
        super().close()


def _gpu_workers(client):
    """Number of workers declaring the GPU resource; a ValueError when there are none."""
    if client is None:
        raise ValueError("device=... with Dask inputs needs a distributed cluster whose "
                         "workers have GPUs (dask worker --resources GPU=1); none is running. "
                         "Use numpy inputs for one local GPU.")
    workers = client.scheduler_info(n_workers=-1)["workers"].values()
    gpus = sum(1 for w in workers if w.get("resources", {}).get(GPU_RESOURCE))
    if not gpus:
        raise ValueError(
            f"device=... with Dask inputs runs the Gram products on workers with a GPU, but "
            f"none of the cluster's {len(workers)} workers declares one: start one worker "
            f"per GPU with `dask worker ADDRESS --nworkers 1 --resources {GPU_RESOURCE}=1` "
            "(deploy/gpu-cluster.md).")
    return gpus
