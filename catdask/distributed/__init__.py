"""The Dask side: inputs, the cluster, how a pass runs, and the settings of a Dask fit.

Pass a Dask array (chunked by rows), a zarr array or a zarr data set to
``CategorySpace.fit`` / ``KernelCategorySpace.fit``; ``transform`` of such inputs returns a lazy
Dask array. Work runs on the client from :func:`dask_client_context` (``CATDASK_SCHEDULER``, else
the current client, else an embedded LocalCluster on 127.0.0.1). The Dask operators live in
:mod:`catdask.operators`; this package never imports the estimators or the store.
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
