"""The device Gram operator split over the GPUs of a Dask cluster."""

from __future__ import annotations

import math
import uuid

import numpy as np

from ..core.acceleration import held_history
from ..core.classes import ClassIndex
from ..distributed.execute import INLINE_BYTES, BlockRunner, workers_with_resource
from .torch_gram import TorchGramOperator, import_torch

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


def worker_products(token, X_sorted, offsets, kernel, device, items, V, precision, v_offset):
    """One task: the range products ``items`` (``(rows, cols, square)`` each, as
    :meth:`TorchGramOperator._products` takes them) on this worker's ``device``, as float64
    numpy arrays."""
    op = _worker_operator(token, X_sorted, offsets, kernel, device)
    return [part.cpu().numpy() for part in op._products(items, V, precision, v_offset)]


def split_rows(requests, n_tasks):
    """The rows of a batch of range products cut into at most ``n_tasks`` groups of about equal
    work (kernel entries), in order; each group a list of ``(request index, rows)``."""
    work = [max(b - a, 0) * max(d - c, 0) for (a, b), (c, d), _ in requests]
    total = sum(work)
    if total == 0:
        return []
    target = total / n_tasks
    groups: list[list] = []
    group: list = []
    filled = 0
    for i, ((a, b), (c, d), _) in enumerate(requests):
        r = a
        while work[i] and r < b:
            last = len(groups) == n_tasks - 1
            if filled >= target and not last:
                groups.append(group)
                group, filled, last = [], 0, len(groups) == n_tasks - 1
            take = b - r if last else max(1, math.ceil((target - filled) / (d - c)))
            r1 = min(b, r + take)
            group.append((i, (r, r1)))
            filled += (r1 - r) * (d - c)
            r = r1
    groups.append(group)
    return groups


def dask_setup(worker):  # noqa: ARG001 - the signature of Dask's preload hook
    """Dask's preload hook (``dask worker ... --preload catdask.operators.dask_torch_gram``):
    import PyTorch and start CUDA as the worker starts rather than in the first task of its
    first fit, where they are most of the set-up of a fit on a fresh worker."""
    torch = import_torch()
    if torch.cuda.is_available():
        torch.cuda.init()


def release_worker_operator(token):
    """Free a worker's device copy of the fit ``token``."""
    op = _WORKER_OPERATORS.pop(token, None)
    if op is not None:
        op.close()


class DaskTorchGramOperator(TorchGramOperator):
    """:class:`TorchGramOperator` whose Gram products run on the cluster's GPU workers."""

    def __init__(self, X, classes, kernel, *, precision="float64", worker_device="cuda"):
        super().__init__(X, classes, kernel, device="cpu", precision=precision, fused=False)
        self.worker_device = str(worker_device)
        self._runner = BlockRunner()
        self._gpus = _gpu_workers(self._runner.client)
        self._token = uuid.uuid4().hex
        self.round_trips = 0
        (self._X_key,) = self._runner.put_many({"X-sorted": self._Xs}, everywhere=True)

    def _products(self, requests, V, precision, v_offset=0):
        """The batch as one graph on the GPU workers (one round trip): its rows cut into one
        task per GPU, two per GPU with several (a slower or busier GPU's share is then half a
        pass); returns host tensors."""
        torch = self._torch
        outs = [torch.zeros((max(b - a, 0), V.shape[1]), dtype=torch.float64)
                for (a, b), _, _ in requests]
        groups = split_rows(requests, 1 if self._gpus == 1 else 2 * self._gpus)
        if not groups:
            return outs
        # The pass's V in the precision its tiles use (float32 halves the bytes sent), copied
        # into each task while small: a shared graph key is one more worker-to-worker hop.
        Vh = np.ascontiguousarray(V, dtype=precision)
        extra, varg = None, Vh
        if Vh.nbytes * len(groups) > INLINE_BYTES:
            varg = BlockRunner.new_key("V")
            extra = {varg: Vh}
        tasks = [(worker_products, self._token, self._X_key, self._offsets, self.kernel,
                  self.worker_device, [(rows, requests[i][1], requests[i][2]) for i, rows in g],
                  varg, precision, v_offset) for g in groups]
        self.round_trips += 1
        parts = self._runner.run(tasks, "gpu-gram", extra=extra, resources={GPU_RESOURCE: 1})
        for g, results in zip(groups, parts):
            for (i, (r0, r1)), part in zip(g, results):
                a = requests[i][0][0]
                outs[i][r0 - a : r1 - a] = torch.from_numpy(part)
        return outs

    def solver_history(self, capacity: int):
        """Anderson's history on the workers, beside the Gram products, where it is large
        (none without a distributed client: the threaded scheduler runs in the driver's memory)."""
        return held_history(self._runner, capacity, self.n_samples, self.classes.n_classes)

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
    gpus = workers_with_resource(client, GPU_RESOURCE)
    if not gpus:
        n_workers = len(client.scheduler_info(n_workers=-1)["workers"])
        raise ValueError(
            f"device=... with Dask inputs runs the Gram products on workers with a GPU, but "
            f"none of the cluster's {n_workers} workers declares one: start one worker "
            f"per GPU with `dask worker ADDRESS --nworkers 1 --resources {GPU_RESOURCE}=1` "
            "(deploy/gpu-cluster.md).")
    return gpus
