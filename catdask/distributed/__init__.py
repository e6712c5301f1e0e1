"""The Dask side: inputs, the cluster, how a pass runs, and the settings of a Dask fit.

The estimators dispatch here by themselves: pass a Dask array (chunked by rows), a zarr array,
or a zarr data set (group object or path) to ``CategorySpace.fit`` /
``KernelCategorySpace.fit``; ``transform`` of such inputs returns a lazy Dask array. The Dask
operators themselves live with the others in :mod:`catdask.operators` (``dask_data``,
``dask_gram``); this package never imports the estimators or the store.

Work runs on the client from :func:`dask_client_context`: the ``CATDASK_SCHEDULER`` address,
else the current Dask client, else an embedded LocalCluster on 127.0.0.1 (dashboard on port
8787).

Modules
-------
- ``inputs``: Dask / zarr inputs and labels, turned into row-chunked Dask arrays
- ``cluster``: :func:`dask_client_context` and the embedded cluster
- ``execute``: ``BlockRunner`` (one pass as one small graph) and ``cluster_resources``
- ``options``: :func:`gram_options`, the Gram cache of a Dask fit
- ``transform``: blockwise ``transform`` of Dask inputs
"""

from .cluster import close_embedded_cluster, dask_client_context
from .inputs import is_distributed_input
from .options import gram_options

__all__ = [
    "close_embedded_cluster",
    "dask_client_context",
    "gram_options",
    "is_distributed_input",
]
