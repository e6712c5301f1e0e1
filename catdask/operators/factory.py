"""One way in: :func:`make_operator` picks the operator for the data it is given."""

from __future__ import annotations

from typing import TYPE_CHECKING, overload

import numpy as np

from ..distributed.inputs import as_row_chunked, is_distributed_input
from ..distributed.options import gram_cache_settings
from .dask_data import DaskDataOperator
from .dask_gram import DaskGramOperator
from .in_memory import NumpyDataOperator, NumpyGramOperator

if TYPE_CHECKING:
    from ..core.classes import ClassIndex
    from ..core.protocols import DataOperator, GramOperator
    from ..kernels import Kernel

__all__ = ["make_operator"]


@overload
def make_operator(X, classes: ClassIndex, kernel: None = None, *,
                  center: np.ndarray | None = None, max_gram_bytes: int = ...,
                  distributed: bool | None = None, precision: str = ...,
                  device=None) -> DataOperator: ...


@overload
def make_operator(X, classes: ClassIndex, kernel: Kernel, *,
                  center: np.ndarray | None = None, max_gram_bytes: int = ...,
                  distributed: bool | None = None, precision: str = ...,
                  device=None) -> GramOperator: ...


def make_operator(X, classes: ClassIndex, kernel: Kernel | None = None, *,
                  center: np.ndarray | None = None, max_gram_bytes: int = 2 * 1024**3,
                  distributed: bool | None = None,
                  precision: str = "float64", device=None) -> DataOperator | GramOperator:
    """The data operator (linear method) or Gram operator (kernel method) for ``X``.

    Parameters
    ----------
    X : ndarray, dask.array.Array, zarr.Array or path of a zarr array, shape (N, D)
        The training patterns, in the order of ``classes``.
    classes : ClassIndex
        Class codes of the N rows.
    kernel : catdask.kernels.Kernel or None
        None: the linear data operator (:class:`~catdask.core.protocols.DataOperator`); a
        kernel: the Gram operator of ``k(X, X)`` (:class:`~catdask.core.protocols.GramOperator`).
    center : ndarray of shape (D,), optional
        Linear only: the origin x0 (default the mean of X).
    max_gram_bytes : int
        Kernel only: keep G (in memory) or its cached blocks (on the workers) up to this size.
    distributed : bool, optional
        Compute on Dask workers. Default: when X is a Dask / zarr input. For the kernel method
        X itself is brought into memory (N x D is small next to G) and only G is distributed;
        the Gram cache settings come from :func:`catdask.distributed.gram_options`.
    precision : {"float64", "float32"}, default="float64"
        Kernel only: precision of the recomputed Gram tiles of ``G Z`` (changeable later with
        ``set_precision``).
    device : str or torch.device, optional
        Kernel only: compute the Gram products with PyTorch on this device ("cuda", "cuda:1",
        "cpu"; :class:`~catdask.operators.torch_gram.TorchGramOperator`). With a distributed
        input the workers' tile tasks run on their own GPUs
        (:class:`~catdask.operators.DaskGramOperator` ``device``).

    Returns
    -------
    DataOperator or GramOperator
        Close it (``close()``, or ``contextlib.closing``) to release cluster memory and
        temporary Gram caches.
    """
    if distributed is None:
        distributed = is_distributed_input(X)
    if kernel is None:
        if distributed:
            return DaskDataOperator(as_row_chunked(X), classes, center)
        return NumpyDataOperator(X, classes, center)
    if is_distributed_input(X):
        X = np.asarray(as_row_chunked(X).compute(), dtype=np.float64)
    if distributed and device is not None:
        from .dask_torch_gram import DaskTorchGramOperator  # PyTorch is an optional extra

        return DaskTorchGramOperator(X, classes, kernel, precision=precision,
                                     worker_device=device)
    if distributed:
        return DaskGramOperator(X, classes, kernel, max_gram_bytes=max_gram_bytes,
                                precision=precision, **gram_cache_settings())
    if device is not None:
        from .torch_gram import TorchGramOperator  # PyTorch is an optional extra

        return TorchGramOperator(X, classes, kernel, device=device, precision=precision)
    return NumpyGramOperator(X, classes, kernel, max_gram_bytes=max_gram_bytes,
                             precision=precision)
