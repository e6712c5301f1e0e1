"""The operator layer: the heavy products of the solver, and nothing else.

The solver (``catdask.core.solver``) and the problems (``catdask.core.problems``) never touch the data;
they call the two interfaces of :mod:`.protocols` (the linear method's data operator and the
kernel method's Gram operator), so the same loop runs in memory and on Dask workers.

Modules
-------
- ``protocols``: :class:`DataOperator` and :class:`GramOperator`, every method documented
- ``blocks``: the per-block kernels (own projections, ``X^T Z``, class statistics, ``G Z``,
  ``G V``, Gram moments, sub-matrices, rows), each formula once
- ``in_memory``: :class:`NumpyDataOperator`, :class:`NumpyGramOperator` (blocks in this process)
- ``gram_base``: the Gram products as passes of block functions (shared by both backends)
- ``dask_data``, ``dask_gram``: :class:`DaskDataOperator`, :class:`DaskGramOperator` (the same
  block functions, one task per row block on Dask workers)
- ``centred``: :class:`CentredGramOperator`, ``H G H`` for the global origin
- ``factory``: :func:`make_operator`, one entry for numpy, Dask and zarr inputs
"""

from .centred import CentredGramOperator
from .dask_data import DaskDataOperator
from .dask_gram import DaskGramOperator
from .factory import make_operator
from .in_memory import NumpyDataOperator, NumpyGramOperator
from .protocols import DataOperator, GramOperator

__all__ = [
    "CentredGramOperator",
    "DaskDataOperator",
    "DaskGramOperator",
    "DataOperator",
    "GramOperator",
    "NumpyDataOperator",
    "NumpyGramOperator",
    "make_operator",
]

