"""Inputs the Dask backend accepts, turned into row-chunked Dask arrays and labels on the driver."""

from __future__ import annotations

import os
import sys
import weakref
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from ..core.validation import CodedLabels
from ..stored_arrays import checked_array, dask_array, is_checked

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


def _open_path(path):
    """The zarr array or group at ``path`` (a str or path-like X), else an error saying so."""
    import zarr

    path = os.fspath(path)
    try:
        return zarr.open(path, mode="r")
    except FileNotFoundError as exc:  # also zarr's "no group / array found" for other files
        what = ("X is a path, which catdask reads as a zarr array or data set (a store's "
                f"datasets/<name> group); {path!r}")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{what} does not exist.") from exc
        raise ValueError(
            f"{what} is not one. Load other files first (e.g. pandas.read_csv) and pass the "
            "array, or ingest them into a store (catdask ingest --file PATH --name NAME)."
        ) from exc


def as_row_chunked(X):
    """A Dask array (N, D) with one chunk across columns and known row chunks."""
    import dask.array as da
    import zarr

    if isinstance(X, (str, os.PathLike)):
        X = _open_path(X)
        if isinstance(X, zarr.Group):
            X = _snapshot_arrays(X)[0]
    if isinstance(X, zarr.Array):
        # A stored data set's X (opened checked by _snapshot_arrays) is read with every chunk
        # checked on the workers; a user's own zarr array keeps zarr's fill-value semantics.
        X = dask_array(X) if is_checked(X) else da.from_zarr(X)
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


@runtime_checkable
class LabelledArrays(Protocol):
    """A labelled data set as lazy arrays: patterns ``X`` (N, D), codes ``y_codes`` (N,) and the
    ``classes`` they index (a catdask store's data-set handles satisfy it)."""

    X: object
    y_codes: object
    classes: object


def _is_dataset_arrays(X):
    return not isinstance(X, (str, os.PathLike)) and isinstance(X, LabelledArrays)


def _from_dataset_arrays(ds):
    codes = ds.y_codes.compute() if hasattr(ds.y_codes, "compute") else ds.y_codes[:]
    return as_row_chunked(ds.X), CodedLabels(ds.classes, codes)


def _snapshot_arrays(group):
    """``(X, y, attributes)`` of a data-set group (zarr arrays, None where missing). A store's
    pointer is resolved once to its immutable snapshot under the readers' shared lock, which lives
    as long as the returned X array (and the Dask arrays built on it).
    """
    import zarr

    from ..dataset_pointer import DATASET_FORMAT_KEY, is_pointer_attrs, resolve_folder

    attrs = dict(group.attrs)
    if not is_pointer_attrs(attrs):
        # A catdask snapshot given by its own folder is read checked; other groups as zarr does.
        entry = (_local_folder(group) or group.store) if DATASET_FORMAT_KEY in attrs else None
        return _member(group, "X", entry), _member(group, "y", entry), attrs
    folder = _local_folder(group)
    if folder is None:
        raise ValueError(
            f"The zarr group {group.store!s} is a catdask data-set pointer, which can only be "
            "followed in a store on the local file system; pass the store path, or open it "
            "with catdask.store.open_dataset_arrays."
        )
    found = resolve_folder(folder)
    if found is None:
        raise FileNotFoundError(f"The catdask data set {folder} has no current snapshot.")
    _snapshot, path, hold = found
    try:
        snapshot = zarr.open_group(str(path), mode="r")
        X, y = _member(snapshot, "X", path), _member(snapshot, "y", path)
        attrs = dict(snapshot.attrs)
    except BaseException:
        hold.close()
        raise
    if X is None:
        hold.close()
    else:
        weakref.finalize(X, hold.close)  # released when the last array reading it is gone
    return X, y, attrs


def _member(group, name, checked_entry=None):
    """``group[name]`` or None; opened through :func:`checked_array` (a missing chunk is an
    error) when ``checked_entry`` names the stored data set it belongs to."""
    if name not in group:
        return None
    return group[name] if checked_entry is None else checked_array(group[name], checked_entry)


def _local_folder(group) -> Path | None:
    """The folder of a zarr group on the local file system, None for other stores."""
    root = getattr(group.store, "root", None)
    if root is None:
        return None
    return Path(root) / group.path if group.path else Path(root)


def _open_dataset(group):
    """``(X, y)`` of a zarr data set: X lazily (Dask), the labels on the driver."""
    import zarr

    if isinstance(group, (str, os.PathLike)):
        group = zarr.open_group(os.fspath(group), mode="r")
    X, y, attrs = _snapshot_arrays(group)
    if X is None or y is None:
        raise ValueError(
            f"The zarr group {group.store!s} is not a catdask data set: it needs arrays 'X' "
            f"(n_samples, n_features) and 'y' (n_samples,); found {sorted(group.keys())}."
        )
    codes = np.asarray(y[:])
    labels = next((attrs[a] for a in _LABEL_ATTRS if a in attrs), None)
    y = CodedLabels(labels, codes) if labels is not None else codes
    return as_row_chunked(X), y


def load_training_data(X, y):
    """``(X_dask, y)`` for a fit; ``y`` may be None when X is a zarr data set."""
    import zarr

    if _is_dataset_arrays(X):
        X, y_store = _from_dataset_arrays(X)
        return load_training_data(X, y_store if y is None else y)
    is_group = isinstance(X, zarr.Group)
    if isinstance(X, (str, os.PathLike)):
        is_group = isinstance(_open_path(X), zarr.Group)
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
