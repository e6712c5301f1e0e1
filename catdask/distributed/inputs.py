"""Inputs the Dask backend accepts, turned into row-chunked Dask arrays and labels on the driver.

- a :class:`dask.array.Array` of shape (N, D), chunked by rows (column chunks are merged);
- a :class:`zarr.Array` (opened lazily with :func:`dask.array.from_zarr`);
- a zarr data set: a group (object or path) holding ``X`` (N, D) chunked by rows and ``y``
  (N,) integer codes, with the class labels in its attributes; a data set of a catdask store
  (``<root>/datasets/<name>``, or the ``DatasetArrays`` from
  :func:`catdask.store.datasets.open_dataset_arrays`) is opened through that module.

Labels always come to the driver (N small integers): the Z-step and the per-class bookkeeping
run there (DESIGN.md section 5). Only X stays distributed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

__all__ = [
    "is_distributed_input",
    "as_row_chunked",
    "load_training_data",
    "encode_training_labels",
    "CodedLabels",
    "cluster_resources",
]

# Attribute names under which a data set may record its class labels (codes index into them).
_LABEL_ATTRS = ("classes", "class_labels", "labels", "target_names")


def is_distributed_input(X):
    """True when ``X`` should go to the Dask backend: a Dask array, a zarr array or group, or a
    path to a zarr store. Cheap, and imports neither dask nor zarr when they are not loaded."""
    if isinstance(X, (str, os.PathLike)) or _is_dataset_arrays(X):
        return True
    if "dask.array" in sys.modules:
        import dask.array as da

        if isinstance(X, da.Array):
            return True
    if "zarr" in sys.modules:
        import zarr

        if isinstance(X, (zarr.Array, zarr.Group)):
            return True
    return False


def as_row_chunked(X):
    """A Dask array (N, D) with one chunk across columns and known row chunks."""
    import dask.array as da
    import zarr

    if isinstance(X, (str, os.PathLike)):
        X = zarr.open(str(X), mode="r")
        if isinstance(X, zarr.Group):
            X = X["X"]
    if isinstance(X, zarr.Array):
        X = da.from_zarr(X)
    if not isinstance(X, da.Array):
        X = da.asarray(X)
    if X.ndim != 2:
        raise ValueError(
            f"Expected a 2-D array of patterns (n_samples, n_features); got {X.ndim}-D with shape "
            f"{X.shape}. Reshape your data, e.g. X.reshape(-1, 1) for a single feature."
        )
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError(
            "X has unknown row chunk sizes (e.g. from a filtered Dask array); call "
            "X.compute_chunk_sizes() first."
        )
    if not np.issubdtype(X.dtype, np.number) or np.issubdtype(X.dtype, np.complexfloating):
        raise ValueError(f"X must hold real numbers; got dtype {X.dtype}.")
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})
    return X


class CodedLabels:
    """Labels stored as codes into a list of classes (a data set's ``y`` and its attributes).

    Kept coded so that a fit on N = 1e7 rows does not sort N label strings again.
    """

    def __init__(self, classes, codes):
        self.classes = np.asarray(classes)
        self.codes = np.asarray(codes)
        self.shape = self.codes.shape

    def decode(self):
        return self.classes[self.codes]


def encode_training_labels(y, **kwargs):
    """``(classes_, codes)`` like :func:`catdask.validation.encode_labels` (same checks and
    messages); labels that arrive coded, with sorted distinct classes all present at least
    twice, are used as they are."""
    from ..validation import encode_labels

    if isinstance(y, CodedLabels):
        classes, codes = y.classes, y.codes
        K = classes.shape[0]
        ok = (
            classes.ndim == 1 and K >= 2 and codes.size > 0
            and bool(np.all(classes[1:] > classes[:-1]))
            and int(codes.min()) >= 0 and int(codes.max()) < K
        )
        if ok:
            counts = np.bincount(codes, minlength=K)
            n_features = kwargs.get("n_features")
            ok = bool(np.all(counts >= 2)) and not (
                kwargs.get("linear") and n_features is not None and K > n_features
            )
        if ok:
            return classes, codes.astype(np.intp)
        y = y.decode()  # let the shared validation explain what is wrong
    return encode_labels(y, **kwargs)


def _is_dataset_arrays(X):
    mod = sys.modules.get("catdask.store.datasets")
    return mod is not None and isinstance(X, mod.DatasetArrays)


def _from_dataset_arrays(ds):
    codes = ds.y_codes.compute() if hasattr(ds.y_codes, "compute") else ds.y_codes[:]
    return as_row_chunked(ds.X), CodedLabels(ds.classes, codes)


def _open_dataset(group):
    """``(X, y)`` of a zarr data set: X lazily (Dask), the labels on the driver.

    A group inside a catdask store (``<root>/datasets/<name>``) is opened through
    :func:`catdask.store.datasets.open_dataset_arrays`, which checks its structure; any other
    group needs arrays ``X`` and ``y`` (codes) and may list its labels in an attribute.
    """
    import zarr

    if isinstance(group, (str, os.PathLike)):
        path = Path(group).resolve()
        if path.parent.name == "datasets":
            from ..store.datasets import open_dataset_arrays

            return _from_dataset_arrays(open_dataset_arrays(path.parent.parent, path.name))
        group = zarr.open_group(str(path), mode="r")
    if "X" not in group or "y" not in group:
        raise ValueError(
            f"The zarr group {group.store!s} is not a catdask data set: it needs arrays 'X' "
            f"(n_samples, n_features) and 'y' (n_samples,); found {sorted(group.keys())}."
        )
    codes = np.asarray(group["y"][:])
    labels = next((group.attrs[a] for a in _LABEL_ATTRS if a in group.attrs), None)
    y = CodedLabels(labels, codes) if labels is not None else codes
    return as_row_chunked(group["X"]), y


def load_training_data(X, y):
    """``(X_dask, y)`` for a fit; ``y`` may be None when X is a zarr data set.

    ``y`` comes back as an ndarray, or as :class:`CodedLabels` when read from a data set;
    encode it with :func:`encode_training_labels`.
    """
    import zarr

    if _is_dataset_arrays(X):
        X, y_store = _from_dataset_arrays(X)
        return load_training_data(X, y_store if y is None else y)
    is_group = isinstance(X, zarr.Group)
    if isinstance(X, (str, os.PathLike)):
        is_group = isinstance(zarr.open(str(X), mode="r"), zarr.Group)
    if is_group:
        X, y_store = _open_dataset(X)
        y = y_store if y is None else y
    else:
        X = as_row_chunked(X)
    if y is None:
        raise ValueError(
            "y is required: pass the labels, or a zarr data-set group whose 'y' array holds them."
        )
    if hasattr(y, "compute"):
        y = y.compute()
    if not isinstance(y, CodedLabels):
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
    if y.shape != (X.shape[0],):
        raise ValueError(
            f"X and y have inconsistent numbers of samples: X has {X.shape[0]} rows, y has shape "
            f"{y.shape}."
        )
    return X, y


def cluster_resources():
    """``(threads, memory_bytes)`` of the cluster the current Dask client talks to.

    Without a distributed client: this machine's cores and available memory (the threaded
    scheduler runs in this process).
    """
    try:
        from distributed import default_client

        info = default_client().scheduler_info(n_workers=-1)["workers"]
    except (ImportError, ValueError, TypeError):
        info = None
    if info:
        threads = sum(w.get("nthreads", 1) for w in info.values())
        memory = sum(w.get("memory_limit") or 0 for w in info.values())
        if memory:
            return max(threads, 1), int(memory)
        return max(threads, 1), _available_memory()
    return os.cpu_count() or 1, _available_memory()


def _available_memory():
    import psutil

    return int(psutil.virtual_memory().available)
