"""``train --device`` checks that run before Prefect or Dask is imported: PyTorch, the device
here, and GPU workers on the cluster named by ``--scheduler`` (the other argument checks are in
:mod:`.checks`).
"""

from __future__ import annotations

from .exits import CliError, usage_error


def check_device(device: str | None, scheduler: str | None) -> None:
    """``train --device``: PyTorch installed, a device it knows and, without a scheduler, present
    here. With a scheduler the fit checks the device once connected
    (:func:`catdask.pipeline.device.device_placement`).
    Raises :class:`CliError`: exit code 2 for a form PyTorch does not know; 3 without PyTorch or the
    device.
    """
    if device is None:
        return
    from catdask.pipeline.device import check_device as check

    try:
        check(device, here=False)
    except ImportError as exc:
        raise CliError(f"argument --device {device}: {_device_reason(device, exc)}") from None
    except ValueError as exc:
        raise usage_error(f"argument --device: {exc}") from None
    if scheduler is None:
        try:
            check(device)
        except ValueError as exc:
            raise CliError(f"argument --device {device}: {_device_reason(device, exc)}") from None


def check_gpu_workers(device: str | None, address: str | None, identity: dict | None) -> None:
    """``train --device --scheduler``: a cluster with no GPU worker leaves the products to this
    process, so the device must exist here; say so before the flow starts. ``identity`` is the
    scheduler's reply to the address probe (None: the fit checks when it connects).
    Raises :class:`CliError`: exit code 3, one line: the cluster has no GPU workers and this process
    lacks the device.
    """
    if device is None or identity is None:
        return
    from catdask.distributed.execute import count_with_resource
    from catdask.operators.dask_torch_gram import GPU_RESOURCE
    from catdask.pipeline.device import check_device as check

    if count_with_resource(identity.get("workers") or {}, GPU_RESOURCE):
        return
    try:
        check(device)
    except ValueError as exc:
        # The local reason's first clause ("PyTorch sees no CUDA GPU here"): the line is about
        # the cluster; its fix is to start GPU workers (deploy/gpu-cluster.md).
        here = _device_reason(device, exc).split(": ")[0].split("; ")[0]
        raise CliError(
            f"argument --device {device}: the Dask cluster at {address} has no worker declaring "
            f"the {GPU_RESOURCE} resource, and the fit cannot run here instead ({here}): start "
            f"one worker per GPU with `CUDA_VISIBLE_DEVICES=0 dask worker {address} "
            f"--resources {GPU_RESOURCE}=1` (deploy/gpu-cluster.md), or leave out --device"
        ) from None


def _device_reason(device: str, exc: Exception) -> str:
    """The library's device message in the command's terms: without its ``device='cuda':``
    prefix (the line names ``--device cuda`` already) and with the options instead of the
    Python values (``device='cpu' or None``: ``--device cpu, or leave --device out``)."""
    reason = str(exc)
    for prefix in (f"device={device!r}: ", "device=... "):
        reason = reason.removeprefix(prefix)
    return reason.replace("use device='cpu' or None.",
                          "use --device cpu, or leave --device out (the default: no PyTorch).")
