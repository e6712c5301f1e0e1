"""The operator layer: the heavy products of the solver, and nothing else.

The solver (``catdask.core.solver``) and the problems (``catdask.core.problems``) never touch the data;
they call the two interfaces of :mod:`catdask.core.protocols` (the linear method's data operator
and the kernel method's Gram operator), so the same loop runs in memory and on Dask workers.
Every operator here subclasses one of them (the type checker holds it to the interface); the
interfaces live in the core, which imports no operator.

Modules
-------
- ``blocks``: the per-block kernels (own projections, ``X^T Z``, class statistics, ``G Z``,
  ``G V``, Gram moments, sub-matrices, rows), each formula once
- ``in_memory``: :class:`NumpyDataOperator`, :class:`NumpyGramOperator` (blocks in this process)
- ``gram_base``: the Gram products as passes of block functions (shared by both backends)
- ``dask_data``, ``dask_gram``: :class:`DaskDataOperator`, :class:`DaskGramOperator` (the same
  block functions, one task per row block on Dask workers)
- ``torch_gram``: :class:`TorchGramOperator`, the Gram products with PyTorch on a device (a GPU),
  over ``fused_rbf``'s fused Triton kernel for RBF on a GPU; ``dask_torch_gram``: the same
  products split over Dask workers that have a GPU
- ``centred``: :class:`CentredGramOperator`, ``H G H`` for the global origin

Which operator a fit uses is decided once, by :class:`catdask.estimators.target.ComputeTarget`.
"""

from .centred import CentredGramOperator
from .dask_data import DaskDataOperator
from .dask_gram import DaskGramOperator
from .in_memory import NumpyDataOperator, NumpyGramOperator
from .torch_gram import TorchGramOperator
from ..core.protocols import DataOperator, GramOperator
from ..distributed.preloads import add_worker_imports

# What the operators' tasks unpickle on a worker: local clusters' workers import it as they
# start (catdask.distributed.worker_setup), not the first tasks of the first fit.
add_worker_imports("catdask.kernels", "catdask.operators.blocks", "catdask.operators.gram_tiles",
                   "catdask.operators.dask_gram")

__all__ = [
    "CentredGramOperator",
    "DaskDataOperator",
    "DaskGramOperator",
    "DataOperator",
    "GramOperator",
    "NumpyDataOperator",
    "NumpyGramOperator",
    "TorchGramOperator",
]

