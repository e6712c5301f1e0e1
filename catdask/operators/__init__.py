"""The operator layer: the heavy products of the solver, and nothing else."""

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

