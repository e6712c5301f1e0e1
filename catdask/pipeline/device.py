"""Where a training run's Gram products run: ``ModelSpec.device`` (``catdask train --device``).

With GPU workers (deploy/gpu-cluster.md) X stays a Dask array (:data:`GPU_WORKERS`); otherwise it
is read into this process and the products run on its device (:data:`HOST`).
"""

from __future__ import annotations

from ..errors import ParameterError

#: The products run on this process's device, on X read into memory.
HOST = "host"
#: The products run on the Dask workers that declare a GPU, on the Dask array.
GPU_WORKERS = "gpu-workers"


def check_device(device, *, here=True) -> None:
    """Raise, naming the problem and the fix, unless ``device`` (``"cuda"``, ``"cuda:1"``,
    ``"cpu"``) can run the Gram products: ``ImportError`` without PyTorch (``pip install
    'catdask[gpu]'``), ``ValueError`` for a form PyTorch does not know or, with ``here`` (the
    products run in this process), a device missing here. ``here=False``: on GPU workers, each on
    its own GPU.
    """
    from ..operators.torch_gram import torch_device  # PyTorch: only when a device is asked

    torch_device(device, here=here)


def device_placement(device, client) -> str | None:
    """Where the products of a fit with ``device`` run on ``client``'s cluster (None: no cluster),
    checked: None (no device), :data:`GPU_WORKERS` or :data:`HOST`.
    """
    if device is None:
        return None
    from ..distributed.execute import workers_with_resource
    from ..operators.dask_torch_gram import GPU_RESOURCE

    if workers_with_resource(client, GPU_RESOURCE):
        check_device(device, here=False)
        return GPU_WORKERS
    try:
        check_device(device)
    except ValueError as exc:
        # A ParameterError (a ValueError): the run's device cannot be used here, which its
        # flow reports in one line (catdask.orchestration.input_errors), not as a bug.
        if client is None:
            raise ParameterError(str(exc)) from exc
        # A deployment run names no CLI option: say why the device was needed here.
        raise ParameterError(
            f"the Dask cluster has no worker declaring the {GPU_RESOURCE} resource (start them "
            f"with `dask worker SCHEDULER --resources {GPU_RESOURCE}=1`, deploy/gpu-cluster.md), "
            f"so the products would run in this process: {exc}") from None
    return HOST
