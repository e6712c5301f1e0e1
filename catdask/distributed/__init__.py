"""The Dask side: inputs, the cluster, how a pass runs, and the settings of a Dask fit."""

from .cluster import close_embedded_cluster, dask_client_context
from .inputs import is_distributed_input
from .options import gram_options

__all__ = [
    "close_embedded_cluster",
    "dask_client_context",
    "gram_options",
    "is_distributed_input",
]
