"""The on-disk store: data sets and the model registry (zarr v3, atomic writes, no pickles).

::

    <root>/datasets/<name>/s<N>/   an immutable data-set snapshot (X, y codes, JSON attributes)
    <root>/datasets/<name>/zarr.json   the pointer naming the current snapshot
    <root>/models/<name>/v<N>/     an immutable model version (numeric arrays, JSON metadata)
    <root>/.training/<name>        a model's training lease (a lease record, released after)

``<root>`` is an explicit path, else ``$CATDASK_STORE``, else ``./catdask-store``.
See :mod:`catdask.store.datasets` (read), :mod:`catdask.store.dataset_writer` (write),
:mod:`catdask.store.snapshots` (snapshots), :mod:`catdask.store.pointer` (the pointer's
writer; its format and the readers' lock are read in :mod:`catdask.dataset_pointer`),
:mod:`catdask.store.registry`
(models), :mod:`catdask.store.lease` (one training of a model at a time) and
:mod:`catdask.store.check` and :mod:`catdask.store.gc`.
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
from .layout import evaluation_dir, resolve_store
from .check import StoreProblem, StoreReport, check_store
from .gc import GcResult, cleanup_temporaries, gc_store
from .registry import ModelVersion, register_estimator, register_model
from .registry_read import (
    compare_versions,
    list_models,
    list_versions,
    load_estimator,
    load_model_version,
    registered_model_names,
)
from .lease import training_lease

__all__ = [
    "training_lease",
    "resolve_store",
    "evaluation_dir",
    "cleanup_temporaries",
    "Dataset",
    "DatasetArrays",
    "DatasetInfo",
    "write_dataset",
    "read_dataset",
    "open_dataset_arrays",
    "verify_dataset",
    "list_datasets",
    "check_store",
    "gc_store",
    "StoreReport",
    "StoreProblem",
    "GcResult",
    "ModelVersion",
    "register_model",
    "load_model_version",
    "list_models",
    "list_versions",
    "compare_versions",
    "register_estimator",
    "load_estimator",
    "registered_model_names",
]
