"""The operator layer: the heavy products of the solver, and nothing else.

Every operator here implements one of the two interfaces of :mod:`catdask.core.protocols` (the
linear method's data, the kernel method's Gram matrix), so the same solver loop runs in memory,
on Dask workers and on a GPU. ``blocks`` and ``gram_tiles`` hold each formula once;
``in_memory``, ``gram_base``, ``dask_data``, ``dask_gram``, ``torch_gram`` (with ``fused_rbf``)
and ``dask_torch_gram`` say where the products run; ``centred`` is ``H G H`` for the global
origin. Which operator a fit uses is decided once, by
:class:`catdask.estimators.target.ComputeTarget`.
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

__all__ = ["CentredGramOperator", "DaskDataOperator", "DaskGramOperator", "DataOperator",
           "GramOperator", "NumpyDataOperator", "NumpyGramOperator", "TorchGramOperator"]

