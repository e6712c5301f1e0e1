"""The data-set store's public API: labelled tables as immutable zarr v3 snapshots.

A data set ``<name>`` is the prefix ``datasets/<name>/`` of a store (a local folder or S3) of
numbered snapshots and a pointer to the current one (:mod:`catdask.store.snapshots`). Each snapshot holds

- ``X``: float64, shape (N, D), chunked by rows (few large blocks, for the Dask engine);
- ``y``: int32 class codes 0..K-1, shape (N,);
- JSON attributes: classes and display names, counts, provenance, a content checksum of X and
  y, creation time, catdask version and a checksum of the attributes
  (:mod:`catdask.store.content`).

Every read resolves the name to one snapshot first and reads only that snapshot, so a
re-ingest running meanwhile can never mix two contents; the result names the snapshot
(``.snapshot``, ``.path``, ``.sha256``) so a caller can record exactly what it read. Writing is
:func:`~catdask.store.dataset_writer.write_dataset`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from ..dataset_pointer import location
from ..errors import DatasetNotFoundError, StoreCorruptError
from ..names import is_valid_name
from ..stored_arrays import dask_array
from . import _zarr_io
from .content import classes_array, encode_labels, verify_content
from .dataset_writer import DatasetInfo, info_from_attrs, write_dataset
from .pointer import hold_snapshot, read_pointer
from .root import open_store
from .snapshots import (
    SnapshotHold,
    dataset_names,
    name_key,
    open_snapshot,
    resolve,
    snapshot_attrs,
    verify_snapshot,
)

# The reading API (writing, content and snapshot helpers are imported here for callers that
# use this module as the data-set entry point; the package lists the public names).

# read_dataset(verify=None) verifies checksums when X is at most this big (in bytes).
AUTO_VERIFY_BYTES = 256 * 2**20


@dataclasses.dataclass
class Dataset:
    """A data set read into memory from one snapshot.

    Attributes
    ----------
    X : ndarray of float64, shape (n_samples, n_features)
    y : ndarray, shape (n_samples,)
        Original labels (``classes[y_codes]``), int or str.
    y_codes : ndarray of int32
        Class index 0..K-1 of each row.
    classes : ndarray
        Sorted distinct labels.
    label_names : list of str
        Display name of each class (e.g. seeds: 1 -> "Kama").
    attrs : dict
        All stored attributes (provenance, checksums, ...).
    snapshot : str
        Id of the snapshot read (``s<N>``); ``path`` is its folder (its URL on S3).
    """

    name: str
    path: Path | str
    X: np.ndarray
    y: np.ndarray
    y_codes: np.ndarray
    classes: np.ndarray
    label_names: list
    attrs: dict
    snapshot: str = ""

    @property
    def sha256(self) -> str:
        """Content checksum of the snapshot read."""
        return self.attrs["content_sha256"]

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_classes(self) -> int:
        return len(self.classes)


@dataclasses.dataclass
class DatasetArrays:
    """Lazy handles on one immutable snapshot (zarr arrays; with ``dask=True`` X is a Dask
    array and ``y_codes`` a numpy array).

    ``path`` is the snapshot's folder (its URL on S3): whoever re-reads the arrays by path (Dask
    workers) reads the same content, even if the name is re-ingested meanwhile. While this
    object is open it holds the snapshot (a reader's lease), so gc does not remove it; :meth:`close` (or the end of
    a ``with`` block, or garbage collection) releases it.
    """

    name: str
    path: Path | str
    X: object
    y_codes: object
    classes: np.ndarray
    label_names: list
    attrs: dict
    snapshot: str = ""
    _hold: SnapshotHold | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def sha256(self) -> str:
        """Content checksum of the snapshot (what a model trained on it should record)."""
        return self.attrs["content_sha256"]

    def close(self) -> None:
        """Release the snapshot (gc may remove it once no model refers to it)."""
        if self._hold is not None:
            self._hold.close()

    def take_hold(self) -> SnapshotHold | None:
        """Hand the snapshot's hold to the caller (who closes it); :meth:`close` then does
        nothing. A fit keeps it until the model recording the snapshot is registered."""
        hold, self._hold = self._hold, None
        return hold

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _read_snapshot(backend, snapshot: str, key: str, verify) -> Dataset:
    path = location(backend, key)
    attrs, Xa, ya = open_snapshot(backend, key)
    X = _zarr_io.read_array(Xa, path, "X")
    codes = _zarr_io.read_array(ya, path, "y")
    k = attrs["n_classes"]
    if codes.size and (codes.min() < 0 or codes.max() >= k):
        raise StoreCorruptError(path, f"y holds class codes outside 0..{k - 1}")
    if not np.all(np.isfinite(X)):
        raise StoreCorruptError(path, "X holds NaN or inf (a missing or damaged chunk?)")
    if verify is None:
        verify = X.nbytes <= AUTO_VERIFY_BYTES
    if verify:
        verify_content(path, attrs, X, codes)
    classes = classes_array(attrs, path)
    return Dataset(
        attrs["name"],
        path,
        X,
        classes[codes],
        codes.astype(np.int32),
        classes,
        list(attrs["label_names"]),
        attrs,
        snapshot,
    )


def read_dataset(store, name: str, *, verify: bool | None = None,
                 snapshot: str | None = None) -> Dataset:
    """Read the current snapshot of a stored data set into memory, validating it.

    Parameters
    ----------
    store : path, s3:// URL, StoreRoot or None
        The store (see :func:`~catdask.store.root.open_store`).
    name : str
        Data-set name.
    verify : bool or None, default None
        Recompute the content and attribute checksums. None: verify when X is at most
        256 MiB. Structural checks (arrays present, dtypes, shapes, chunk files present and
        readable, finite X, valid codes) always run.
    snapshot : str, optional
        Read this snapshot (``s<N>``, e.g. the one a model records it was trained on) instead
        of the current one.

    Raises
    ------
    DatasetNotFoundError
        No such data set (the message lists the stored ones), or no such snapshot.
    StoreCorruptError
        Missing arrays, wrong dtype or shape, length mismatch, edited attributes, missing,
        truncated or corrupt chunks. Re-ingest the data set to repair it.
    """
    if snapshot is None:
        root, snapshot, key, hold = resolve(store, name)
    else:
        root, snapshot, key, hold = _hold_named_snapshot(store, name, snapshot)
    try:
        return _read_snapshot(root.backend, snapshot, key, verify)
    finally:
        hold.close()


def _hold_named_snapshot(store, name: str, snapshot: str):
    root, folder_key = name_key(store, name)
    hold = hold_snapshot(root.backend, folder_key, snapshot)
    if hold is None:
        raise DatasetNotFoundError(
            f"Data set {name!r} in store {root.url} has no snapshot {snapshot!r} (removed by "
            "gc, or never written); its current content is read without `snapshot=`."
        )
    return root, snapshot, f"{folder_key}/{snapshot}", hold


def open_dataset_arrays(store, name: str, *, dask: bool = False) -> DatasetArrays:
    """Lazy handles on the current snapshot, for out-of-core or Dask computation.

    Runs the structural checks of :func:`read_dataset` (metadata, dtypes, shapes, all chunk
    files present) without reading the data; call :func:`verify_dataset` for checksums.

    Parameters
    ----------
    dask : bool, default False
        Return X as a Dask array (one block per stored chunk, read on the workers; a chunk that
        is missing there or fails its checksum raises :class:`StoreCorruptError`, never reads
        as a fill value) and ``y_codes`` read into memory, instead of zarr arrays.

    Notes
    -----
    The handles read one immutable snapshot by its own path: a re-ingest of the name meanwhile
    creates a new snapshot and never changes what these handles read.
    """
    root, snapshot, key, hold = resolve(store, name)
    path = location(root.backend, key)
    try:
        attrs, Xa, ya = open_snapshot(root.backend, key)
        for arr, label in ((Xa, "X"), (ya, "y")):
            _zarr_io.check_chunks(arr, path, label)
        classes = classes_array(attrs, path)
        X, y = Xa, ya
        if dask:  # X read on the workers, each chunk checked there; labels (N small ints) here
            X, y = dask_array(Xa, path), _zarr_io.read_array(ya, path, "y")
    except BaseException:
        hold.close()
        raise
    return DatasetArrays(
        attrs["name"], path, X, y, classes, list(attrs["label_names"]), attrs, snapshot, hold
    )


def verify_dataset(store, name: str) -> DatasetInfo:
    """Check the current snapshot's checksums block by block (works beyond memory size).

    Raises
    ------
    StoreCorruptError
        With the first problem found.
    """
    root, snapshot, key, hold = resolve(store, name)
    try:
        return info_from_attrs(name, location(root.backend, key),
                               verify_snapshot(root.backend, key), snapshot=snapshot)
    finally:
        hold.close()


def list_datasets(store=None) -> list[DatasetInfo]:
    """Stored data sets (names with a current snapshot), sorted by name.

    Names whose pointer or current snapshot cannot be read are listed with ``problem`` set
    rather than hidden; folders of a first ingest that never committed are not listed
    (:func:`~catdask.store.check.check_store` reports them).
    """
    backend = open_store(store).backend
    out = []
    for name in dataset_names(backend):
        if not is_valid_name(name):
            continue
        folder_key = f"datasets/{name}"
        try:
            pointer = read_pointer(backend, folder_key)
        except StoreCorruptError as exc:
            out.append(info_from_attrs(name, location(backend, folder_key), None,
                                       problem=exc.problem))
            continue
        if pointer is None:
            continue
        key = f"{folder_key}/{pointer.snapshot}"
        path = location(backend, key)
        try:
            attrs = snapshot_attrs(backend, key)
        except StoreCorruptError as exc:
            out.append(info_from_attrs(name, path, None, problem=exc.problem))
        else:
            out.append(info_from_attrs(name, path, attrs, snapshot=pointer.snapshot))
    return out
