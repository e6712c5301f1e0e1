"""The on-disk store: data sets and the model registry (zarr v3, atomic writes, no pickles).

::

    <root>/datasets/<name>/      a data set (X, y codes, JSON attributes)
    <root>/models/<name>/v<N>/   an immutable model version (numeric arrays, JSON metadata)

``<root>`` is an explicit path, else ``$CATDASK_STORE``, else ``./catdask-store``.
See :mod:`catdask.store.datasets` and :mod:`catdask.store.registry`.
"""

from .datasets import (
    Dataset,
    DatasetArrays,
    DatasetInfo,
    list_datasets,
    open_dataset_arrays,
    read_dataset,
    verify_dataset,
    write_dataset,
)
from .layout import cleanup_temporaries, resolve_store
from .registry import (
    ModelVersion,
    compare_versions,
    list_models,
    list_versions,
    load_estimator,
    load_model_version,
    register_estimator,
    register_model,
)

__all__ = [
    "resolve_store",
    "cleanup_temporaries",
    "Dataset",
    "DatasetArrays",
    "DatasetInfo",
    "write_dataset",
    "read_dataset",
    "open_dataset_arrays",
    "verify_dataset",
    "list_datasets",
    "ModelVersion",
    "register_model",
    "load_model_version",
    "list_models",
    "list_versions",
    "compare_versions",
    "register_estimator",
    "load_estimator",
]
