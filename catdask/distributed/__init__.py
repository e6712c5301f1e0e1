"""The Dask backend: the same solver, with operators that compute on Dask workers.

The estimators dispatch here by themselves: pass a Dask array (chunked by rows), a zarr array,
or a zarr data set (group object or path) to ``CategorySpace.fit`` /
``KernelCategorySpace.fit``; ``transform`` of such inputs returns a lazy Dask array.

Work runs on the client from :func:`get_client`: the ``CATDASK_SCHEDULER`` address, else the
current Dask client, else an embedded LocalCluster on 127.0.0.1 (dashboard on port 8787).

Modules
-------
- ``operators``: :class:`DaskDataOperator` (X W, X^T Z, class statistics) and
  :class:`DaskGramOperator` (the blocked Gram product G Z and its cache)
- ``blocks``: the numpy functions a worker runs on one block of rows
- ``inputs``: Dask / zarr inputs and labels
- ``cluster``: :func:`get_client` and the embedded cluster
- ``fit``: the estimators' entry points, blockwise transform, :func:`gram_options`
- ``nystroem``: ``KernelCategorySpace(approximation="nystroem")``
"""

from .cluster import close_embedded_cluster, get_client
from .fit import gram_options
from .inputs import is_distributed_input
from .operators import DaskDataOperator, DaskGramOperator

__all__ = [
    "DaskDataOperator",
    "DaskGramOperator",
    "close_embedded_cluster",
    "get_client",
    "gram_options",
    "is_distributed_input",
]
