"""The data-set store: labelled tables as zarr v3 groups under ``<root>/datasets/<name>/``.

A data set is one group holding

- ``X``: float64, shape (N, D), chunked by rows (few large blocks, for the Dask engine);
- ``y``: int32 class codes 0..K-1, shape (N,);
- JSON attributes: the classes (original labels, str or int) and their display names, counts,
  provenance (where the data came from, sha256 of the source files), a content checksum of
  X and y, creation time, catdask version, and a checksum of the attributes themselves.

Writes are atomic: the group is built in a ``.tmp-`` sibling and renamed into place.
Ingesting the same content again is a no-op (``written=False``). Ingesting different content
under an existing name replaces it: the old group is renamed aside, the new one renamed in, the
old one deleted. Between those two renames (microseconds) the name is absent; if the process
dies right there, :func:`~catdask.store.layout.cleanup_temporaries` renames the old copy back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import time
import uuid
from pathlib import Path

import numpy as np
import zarr

from ..errors import DatasetNotFoundError, StoreCorruptError, StoreWriteError
from . import _zarr_io
from ._atomic import (
    file_lock,
    fsync_dir,
    fsync_tree,
    make_temp_dir,
    remove_tree,
    rename_no_replace,
)
from ._json import catdask_version, json_sha256, to_json_safe, utc_now
from .layout import ASIDE_PREFIX, datasets_dir, entry_path, list_entries, resolve_store

__all__ = [
    "Dataset",
    "DatasetArrays",
    "DatasetInfo",
    "write_dataset",
    "read_dataset",
    "open_dataset_arrays",
    "verify_dataset",
    "list_datasets",
    "content_sha256",
    "encode_labels",
]

FORMAT = 1
# read_dataset(verify=None) verifies checksums when X is at most this big (in bytes).
AUTO_VERIFY_BYTES = 256 * 2**20
# How long a reader keeps re-reading a data set that is replaced under it.
_READ_RETRY_SECONDS = 30.0
_REQUIRED_ATTRS = {
    "catdask_dataset_format": int,
    "name": str,
    "n_samples": int,
    "n_features": int,
    "n_classes": int,
    "classes": list,
    "classes_kind": str,
    "label_names": list,
    "class_counts": list,
    "content_sha256": str,
    "attrs_sha256": str,
}


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """Summary of a stored data set.

    Attributes
    ----------
    written : bool
        True when this call wrote the data (``write_dataset`` only); False when identical
        content was already stored, and in listings.
    replaced : bool
        True when ``write_dataset`` replaced different content stored under the same name.
    problem : str or None
        Set by :func:`list_datasets` for an entry whose metadata cannot be read.
    """

    name: str
    path: Path
    n_samples: int | None
    n_features: int | None
    n_classes: int | None
    content_sha256: str | None
    created: str | None = None
    written: bool = False
    replaced: bool = False
    problem: str | None = None


@dataclasses.dataclass
class Dataset:
    """A data set read into memory.

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
    """

    name: str
    path: Path
    X: np.ndarray
    y: np.ndarray
    y_codes: np.ndarray
    classes: np.ndarray
    label_names: list
    attrs: dict

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
    """Lazy handles on a stored data set (zarr arrays, or dask arrays with ``dask=True``)."""

    name: str
    path: Path
    X: object
    y_codes: object
    classes: np.ndarray
    label_names: list
    attrs: dict


# --------------------------------------------------------------------------- labels & checksums


def encode_labels(y) -> tuple[np.ndarray, np.ndarray, str]:
    """Class codes, sorted classes and their kind ("int" or "str") for a label vector.

    Float labels are accepted only when integral (e.g. 1.0, 2.0); anything else is refused
    because a class must round-trip exactly through JSON.
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got shape {y.shape}.")
    kind = y.dtype.kind
    if kind == "O":
        if all(isinstance(v, str) for v in y):
            y = y.astype(str)
        elif all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in y):
            y = y.astype(np.int64)
        else:
            raise ValueError("y mixes types or holds objects; labels must be all str or all int.")
        kind = y.dtype.kind
    if kind == "S":
        y = np.char.decode(y, "utf-8")
        kind = "U"
    if kind == "b":
        y = y.astype(np.int64)
        kind = "i"
    if kind == "f":
        if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
            raise ValueError("y holds non-integral float labels; use integer or string labels.")
        y = y.astype(np.int64)
        kind = "i"
    if kind not in "iuU":
        raise ValueError(f"y has dtype {y.dtype}; labels must be integers or strings.")
    classes, codes = np.unique(y, return_inverse=True)
    return codes.astype(np.int32).ravel(), classes, ("str" if kind == "U" else "int")


def _classes_json(classes: np.ndarray, kind: str) -> list:
    return [str(c) for c in classes] if kind == "str" else [int(c) for c in classes]


def _label_names(label_names, classes_json: list) -> list[str]:
    if label_names is None:
        return [str(c) for c in classes_json]
    if isinstance(label_names, dict):
        out = []
        for c in classes_json:
            if c in label_names:
                out.append(str(label_names[c]))
            elif str(c) in label_names:
                out.append(str(label_names[str(c)]))
            else:
                out.append(str(c))
        return out
    names = [str(n) for n in label_names]
    if len(names) != len(classes_json):
        raise ValueError(
            f"label_names has {len(names)} entries but y has {len(classes_json)} classes "
            f"{classes_json}; give one name per sorted class or a dict label -> name."
        )
    return names


def content_sha256(X, y_codes, classes_json: list, block_rows: int = 65536) -> str:
    """sha256 over the shape, the classes, X (little-endian float64) and y codes (int32).

    ``X`` and ``y_codes`` may be numpy or zarr arrays; they are hashed in row blocks so a
    large stored data set can be verified without loading it whole.
    """
    n, d = X.shape
    h = hashlib.sha256(b"catdask-dataset-v1\x00")
    h.update(json.dumps({"shape": [int(n), int(d)], "classes": classes_json}).encode())
    for start in range(0, n, block_rows):
        h.update(np.ascontiguousarray(X[start : start + block_rows], dtype="<f8").tobytes())
    h.update(np.ascontiguousarray(y_codes[...], dtype="<i4").tobytes())
    return h.hexdigest()


def _source_sha256(attrs: dict) -> dict:
    """``{file name: sha256}`` from a parser's provenance (its ``files`` list), if present.

    Accepts the provenance itself or attributes that nest it under ``"provenance"``.
    """
    if isinstance(attrs.get("source_sha256"), dict):
        return dict(attrs["source_sha256"])
    files = attrs.get("files")
    if files is None and isinstance(attrs.get("provenance"), dict):
        files = attrs["provenance"].get("files")
    out = {}
    for f in files if isinstance(files, list) else []:
        if isinstance(f, dict) and f.get("name") and f.get("sha256"):
            out[str(f["name"])] = str(f["sha256"])
    return out


# --------------------------------------------------------------------------- writing


def write_dataset(
    store, name: str, X, y, label_names=None, attrs=None, chunk_rows=None
) -> DatasetInfo:
    """Store a labelled table atomically; a no-op if the same content is already stored.

    Parameters
    ----------
    store : path or None
        Store root (see :func:`~catdask.store.resolve_store`).
    name : str
        Data-set name (validated by :func:`catdask.names.validate_name`).
    X : array-like, shape (n_samples, n_features)
        Finite numbers; stored as float64.
    y : array-like, shape (n_samples,)
        Labels, all int or all str. Stored as codes 0..K-1 plus the sorted classes.
    label_names : list or dict, optional
        Display names per sorted class, or a mapping label -> name. Default: ``str(label)``.
    attrs : dict, optional
        Provenance (JSON-safe), e.g. the ``provenance`` returned by the catalog parsers; a
        ``files`` list with ``name``/``sha256`` entries is also recorded as ``source_sha256``.
    chunk_rows : int, optional
        Rows per chunk of X (default: about 32 MiB per chunk).

    Returns
    -------
    DatasetInfo
        ``written`` is False when identical content (X, y, classes and label names) was
        already stored; ``replaced`` is True when different content was replaced.

    Raises
    ------
    InvalidNameError, ValueError
        Bad name or data (non-finite X, length mismatch, ...).
    StoreWriteError
        The write failed (disk full, permissions); nothing visible changed.
    """
    root = resolve_store(store)
    parent = datasets_dir(root)
    final = entry_path(parent, name, "data set")
    X, codes, classes_json, kind = _check_data(X, y)
    names = _label_names(label_names, classes_json)
    content = content_sha256(X, codes, classes_json)
    provenance = to_json_safe(dict(attrs or {}), "attrs")

    same = _same_content(final, content, names)
    if same:
        return _info_from_attrs(final, same)

    if chunk_rows is None:
        chunk_rows = _zarr_io.row_chunks(X.shape, 8)[0]
    chunk_rows = int(chunk_rows)
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}.")
    meta = {
        "catdask_dataset_format": FORMAT,
        "name": name,
        "n_samples": int(X.shape[0]),
        "n_features": int(X.shape[1]),
        "n_classes": len(classes_json),
        "classes": classes_json,
        "classes_kind": kind,
        "label_names": names,
        "class_counts": np.bincount(codes, minlength=len(classes_json)).tolist(),
        "content_sha256": content,
        "source_sha256": _source_sha256(provenance),
        "provenance": provenance,
        "chunk_rows": chunk_rows,
        "created": utc_now(),
        "catdask_version": catdask_version(),
    }
    meta["attrs_sha256"] = json_sha256(meta)

    tmp = None
    try:
        tmp = make_temp_dir(parent, f"ds-{name}")
        group = zarr.open_group(str(tmp), mode="w")
        rows = min(chunk_rows, X.shape[0])
        # NaN / -1 fill values: a chunk that goes missing reads as an impossible value.
        # y is chunked like X's rows, so Dask blocks of X and y line up.
        _zarr_io.write_array(group, "X", X, chunks=(rows, X.shape[1]), fill_value=np.nan)
        _zarr_io.write_array(group, "y", codes, chunks=(rows,), fill_value=-1)
        group.attrs.put(meta)
        fsync_tree(tmp)
        replaced = _move_into_place(tmp, final, parent, content, names)
        if replaced is None:  # a concurrent writer stored identical content first
            remove_tree(tmp)
            return _info_from_attrs(final, _read_attrs_quietly(final))
    except OSError as exc:
        if tmp is not None:
            remove_tree(tmp)
        raise StoreWriteError(
            exc.errno,
            f"Could not write data set {name!r} to {parent}: {exc}. The temporary "
            "copy was removed; the store is unchanged.",
            str(parent),
        ) from exc
    except BaseException:
        if tmp is not None:
            remove_tree(tmp)
        raise
    fsync_dir(parent)
    return DatasetInfo(
        name,
        final,
        meta["n_samples"],
        meta["n_features"],
        meta["n_classes"],
        content,
        meta["created"],
        written=True,
        replaced=replaced,
    )


def _check_data(X, y):
    X = np.asarray(X)
    if X.dtype.kind not in "biuf":
        raise ValueError(f"X has dtype {X.dtype}; it must be numeric.")
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a non-empty 2-D table, got shape {X.shape}.")
    if not np.all(np.isfinite(X)):
        bad = np.argwhere(~np.isfinite(X))[0]
        raise ValueError(
            f"X has a non-finite value at row {bad[0]}, column {bad[1]}; "
            "impute or drop missing values before storing."
        )
    codes, classes, kind = encode_labels(y)
    if codes.shape[0] != X.shape[0]:
        raise ValueError(f"y has {codes.shape[0]} labels but X has {X.shape[0]} rows.")
    return X, codes, _classes_json(classes, kind), kind


def _read_attrs_quietly(entry: Path) -> dict | None:
    try:
        return _zarr_io.read_node_json(entry, entry).get("attributes") or None
    except StoreCorruptError:
        return None


def _same_content(entry: Path, content: str, names: list) -> dict | None:
    """Attributes of ``entry`` if it holds exactly this content, intact, else None.

    The stored arrays are verified too (block by block), so re-ingesting repairs a damaged
    data set instead of keeping it because its attributes still look right.
    """
    if not entry.is_dir():
        return None
    attrs = _read_attrs_quietly(entry)
    if not (attrs and attrs.get("content_sha256") == content and attrs.get("label_names") == names):
        return None
    try:
        _verify_entry(entry)
    except StoreCorruptError:
        return None
    return attrs


def _move_into_place(tmp: Path, final: Path, parent: Path, content: str, names: list):
    """Rename ``tmp`` to ``final``; returns False (new), True (replaced) or None (identical).

    Retries if other writers race on the same name; the last rename wins, and every reader
    always sees one complete version.
    """
    replaced = False
    for _ in range(100):
        if rename_no_replace(tmp, final):
            return replaced
        if _same_content(final, content, names):
            return None
        aside = parent / f"{ASIDE_PREFIX}{final.name}-{uuid.uuid4().hex}"
        # The name is absent from the first rename to the second; a reader that finds it
        # absent takes this lock and looks again (_dataset_entry).
        with file_lock(_swap_lock_path(parent, final.name)):
            try:
                os.rename(final, aside)
            except FileNotFoundError:
                continue  # another writer moved it aside already; try again
            replaced = True
            try:
                moved = rename_no_replace(tmp, final)
            except OSError:
                # Put the previous version back, so a failed write never hides the data set
                # (if this fails too, cleanup_temporaries restores it from the aside copy).
                with contextlib.suppress(OSError):
                    rename_no_replace(aside, final)
                raise
        if moved:
            remove_tree(aside)
            return replaced
        remove_tree(aside)  # someone else's new version is in place; go round again
    raise OSError(f"Could not rename {tmp} into place at {final}: too many concurrent writers.")


def _info_from_attrs(entry: Path, attrs: dict | None, problem: str | None = None) -> DatasetInfo:
    attrs = attrs or {}

    def get(key, typ):
        v = attrs.get(key)
        return v if isinstance(v, typ) and not isinstance(v, bool) else None

    return DatasetInfo(
        entry.name,
        entry,
        get("n_samples", int),
        get("n_features", int),
        get("n_classes", int),
        get("content_sha256", str),
        get("created", str),
        problem=problem,
    )


# --------------------------------------------------------------------------- reading


def _dataset_entry(store, name: str) -> Path:
    root = resolve_store(store)
    parent = datasets_dir(root)
    entry = entry_path(parent, name, "data set")
    # A replacement in progress leaves the name absent for a moment (old copy aside, new one
    # not yet renamed in), under the swap lock: waiting for that lock and looking again tells
    # "being replaced" from "missing" without guessing from a directory scan (a scan racing
    # the writers' renames missed the aside copy in 1 run in ~10 of the concurrent-replace
    # test). The lock file exists once a data set of this name has been replaced.
    lock = _swap_lock_path(parent, name)
    present = entry.is_dir()
    if not present and lock.is_file():
        with contextlib.suppress(OSError):  # e.g. a read-only store: fall back to one look
            with file_lock(lock):
                # Look while holding it: after release the next writer may swap again.
                present = entry.is_dir()
    if not present:
        known = list_entries(parent)
        raise DatasetNotFoundError(
            f"No data set {name!r} in store {root} (stored: {', '.join(known) or 'none'}). "
            f"Ingest it first, e.g. `catdask ingest {name}`."
        )
    return entry


def _swap_lock_path(parent: Path, name: str) -> Path:
    """Lock file held by a writer while data set ``name`` is absent mid-replacement."""
    return parent / f".lock-{name}"


def _identity(entry: Path):
    """What identifies one immutable copy of a data set: the directory's inode and its
    metadata (an inode alone is not enough: a freed inode is soon reused by a later copy)."""
    try:
        st = entry.stat()
        meta = (entry / "zarr.json").read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (st.st_dev, st.st_ino, hashlib.sha256(meta).hexdigest())


def _consistent(read, store, name: str):
    """Run ``read(entry)`` and make sure the data set was not replaced while it ran.

    Readers open files by path, so a concurrent replacement could mix the old attributes with
    the new arrays. ``_identity`` names one immutable copy: if it changed during the read,
    read again.
    """
    # Each failed attempt means a writer replaced the data set meanwhile; under a burst of
    # replacements keep trying (with a growing pause) for a while rather than a fixed count.
    deadline = time.monotonic() + _READ_RETRY_SECONDS
    pause = 0.001
    while True:
        entry = _dataset_entry(store, name)
        before = _identity(entry)
        try:
            result = read(entry)
        except StoreCorruptError:
            if (before is not None and _identity(entry) == before) or time.monotonic() > deadline:
                raise
        else:
            if before is not None and _identity(entry) == before:
                return result
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{entry}: the data set kept being replaced for {_READ_RETRY_SECONDS:.0f} s "
                    "while it was read; try again when the writers are done"
                )
        time.sleep(pause)
        pause = min(2 * pause, 0.1)


def _checked_attrs(entry: Path) -> dict:
    meta = _zarr_io.read_node_json(entry, entry)
    if meta.get("node_type") != "group":
        raise StoreCorruptError(entry, "zarr.json does not describe a group")
    attrs = meta.get("attributes")
    if not isinstance(attrs, dict):
        raise StoreCorruptError(entry, "the group has no attributes")
    for key, typ in _REQUIRED_ATTRS.items():
        if key not in attrs:
            raise StoreCorruptError(entry, f"attribute {key!r} is missing")
        if not isinstance(attrs[key], typ) or isinstance(attrs[key], bool):
            raise StoreCorruptError(
                entry,
                f"attribute {key!r} should be {typ.__name__}, found {type(attrs[key]).__name__}",
            )
    if attrs["catdask_dataset_format"] != FORMAT:
        raise StoreCorruptError(
            entry,
            f"unknown data-set format {attrs['catdask_dataset_format']} "
            f"(this catdask reads format {FORMAT}); upgrade catdask",
        )
    k = attrs["n_classes"]
    if (
        len(attrs["classes"]) != k
        or len(attrs["label_names"]) != k
        or len(attrs["class_counts"]) != k
    ):
        raise StoreCorruptError(
            entry, f"classes, label_names and class_counts must each have n_classes={k} entries"
        )
    if attrs["classes_kind"] not in ("int", "str"):
        raise StoreCorruptError(
            entry, f"classes_kind is {attrs['classes_kind']!r}, expected int or str"
        )
    return attrs


def _open_checked(entry: Path):
    attrs = _checked_attrs(entry)
    group = _zarr_io.open_group_checked(entry)
    for arr in ("X", "y"):
        if not (entry / arr).is_dir():
            raise StoreCorruptError(entry, f"array {arr!r} is missing")
    X = _zarr_io.open_array_checked(group, "X", entry, dtypes={"float64"}, ndim=2)
    y = _zarr_io.open_array_checked(group, "y", entry, dtypes={"int32", "int64"}, ndim=1)
    n, d = attrs["n_samples"], attrs["n_features"]
    if tuple(X.shape) != (n, d):
        raise StoreCorruptError(
            entry, f"X has shape {tuple(X.shape)} but the attributes say ({n}, {d})"
        )
    if y.shape[0] != X.shape[0]:
        raise StoreCorruptError(entry, f"y has {y.shape[0]} labels but X has {X.shape[0]} rows")
    return attrs, X, y


def _classes_array(attrs: dict, entry: Path) -> np.ndarray:
    classes, kind = attrs["classes"], attrs["classes_kind"]
    want = str if kind == "str" else int
    if not isinstance(classes, list) or not all(
        isinstance(c, want) and not isinstance(c, bool) for c in classes
    ):
        raise StoreCorruptError(
            entry, f"the class labels in the attributes are not all {want.__name__}s"
        )
    if kind == "str":
        return np.array([str(c) for c in attrs["classes"]], dtype=str)
    return np.array(attrs["classes"], dtype=np.int64)


def read_dataset(store, name: str, *, verify: bool | None = None) -> Dataset:
    """Read a stored data set into memory, validating it.

    Parameters
    ----------
    store : path or None
        Store root.
    name : str
        Data-set name.
    verify : bool or None, default None
        Recompute the content and attribute checksums. None: verify when X is at most
        256 MiB. Structural checks (arrays present, dtypes, shapes, chunk files present and
        readable, finite X, valid codes) always run.

    Raises
    ------
    DatasetNotFoundError
        No such data set (the message lists the stored ones).
    StoreCorruptError
        Missing arrays, wrong dtype or shape, length mismatch, edited attributes, missing,
        truncated or corrupt chunks. Re-ingest the data set to repair it.
    """
    return _consistent(lambda entry: _read_entry(entry, verify), store, name)


def _read_entry(entry: Path, verify) -> Dataset:
    attrs, Xa, ya = _open_checked(entry)
    X = _zarr_io.read_array(Xa, entry, "X")
    codes = _zarr_io.read_array(ya, entry, "y")
    k = attrs["n_classes"]
    if codes.size and (codes.min() < 0 or codes.max() >= k):
        raise StoreCorruptError(entry, f"y holds class codes outside 0..{k - 1}")
    if not np.all(np.isfinite(X)):
        raise StoreCorruptError(entry, "X holds NaN or inf (a missing or damaged chunk?)")
    if verify is None:
        verify = X.nbytes <= AUTO_VERIFY_BYTES
    if verify:
        _verify(entry, attrs, X, codes)
    classes = _classes_array(attrs, entry)
    return Dataset(
        attrs["name"],
        entry,
        X,
        classes[codes],
        codes.astype(np.int32),
        classes,
        list(attrs["label_names"]),
        attrs,
    )


def _verify(entry: Path, attrs: dict, X, codes) -> None:
    stored = {k: v for k, v in attrs.items() if k != "attrs_sha256"}
    if json_sha256(stored) != attrs["attrs_sha256"]:
        raise StoreCorruptError(
            entry,
            "the attributes were modified after writing (attrs_sha256 "
            "mismatch); re-ingest the data set",
        )
    got = content_sha256(X, codes, attrs["classes"])
    if got != attrs["content_sha256"]:
        raise StoreCorruptError(
            entry,
            f"content checksum mismatch: expected {attrs['content_sha256']}, "
            f"got {got}; the arrays were modified or damaged, re-ingest",
        )
    counts = np.bincount(np.asarray(codes[...]), minlength=attrs["n_classes"]).tolist()
    if counts != attrs["class_counts"]:
        raise StoreCorruptError(
            entry, f"class counts {counts} differ from the attributes {attrs['class_counts']}"
        )


def open_dataset_arrays(store, name: str, *, dask: bool = False) -> DatasetArrays:
    """Lazy handles on a stored data set, for out-of-core or Dask computation.

    Runs the structural checks of :func:`read_dataset` (metadata, dtypes, shapes, all chunk
    files present) without reading the data; call :func:`verify_dataset` for checksums.

    Parameters
    ----------
    dask : bool, default False
        Return ``dask.array.from_zarr`` arrays (one block per stored chunk) instead of zarr
        arrays.

    Notes
    -----
    The handles read by path. If the data set is replaced (re-ingested with different
    content) while they are in use, later reads see the new arrays; long computations should
    record ``attrs["content_sha256"]`` and check it again at the end.
    """

    def structure(entry):
        attrs, Xa, ya = _open_checked(entry)
        for arr, label in ((Xa, "X"), (ya, "y")):
            _check_chunks(arr, entry, label)
        return entry, attrs, Xa, ya

    entry, attrs, Xa, ya = _consistent(structure, store, name)
    X, y = Xa, ya
    if dask:
        import dask.array as da

        X, y = da.from_zarr(Xa), da.from_zarr(ya)
    return DatasetArrays(
        attrs["name"], entry, X, y, _classes_array(attrs, entry), list(attrs["label_names"]), attrs
    )


def verify_dataset(store, name: str) -> DatasetInfo:
    """Check a stored data set's checksums block by block (works for data larger than memory).

    Raises
    ------
    StoreCorruptError
        With the first problem found.
    """
    return _consistent(_verify_entry, store, name)


def _verify_entry(entry: Path) -> DatasetInfo:
    attrs, X, y = _open_checked(entry)
    for arr, label in ((X, "X"), (y, "y")):
        _check_chunks(arr, entry, label)
    try:
        _verify(entry, attrs, X, y)
    except StoreCorruptError:
        raise
    except Exception as exc:
        raise StoreCorruptError(
            entry, f"cannot read the arrays (truncated or corrupt chunk?): {exc}"
        ) from exc
    return _info_from_attrs(entry, attrs)


def _check_chunks(arr, entry: Path, label: str) -> None:
    try:
        n_init = arr.nchunks_initialized
    except Exception as exc:
        raise StoreCorruptError(entry, f"cannot list chunks of {label!r}: {exc}") from exc
    if n_init != arr.nchunks:
        raise StoreCorruptError(
            entry, f"array {label!r} has {arr.nchunks - n_init} chunk file(s) missing"
        )


def list_datasets(store=None) -> list[DatasetInfo]:
    """Stored data sets, sorted by name (temporaries never appear).

    Entries whose metadata cannot be read are listed with ``problem`` set rather than hidden.
    """
    parent = datasets_dir(resolve_store(store))
    out = []
    for name in list_entries(parent):
        entry = parent / name
        try:
            out.append(_info_from_attrs(entry, _checked_attrs(entry)))
        except StoreCorruptError as exc:
            out.append(_info_from_attrs(entry, None, problem=exc.problem))
    return out
