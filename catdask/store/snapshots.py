"""Immutable data-set snapshots and the pointer that names the current one.

::

    <root>/datasets/<name>/zarr.json   the pointer: a zarr v3 group whose attributes name the
                                       current snapshot and its content checksum
    <root>/datasets/<name>/s<N>/       snapshot N: a zarr v3 group (X, y, attributes), never
                                       modified after it is renamed into place
    <root>/datasets/<name>/.newest-snapshot  the highest N ever given (ids are never reused)
    <root>/datasets/<name>/.lock       the name lock: held by writers while they create their
                                       temporary (shared) and while they claim N and move the
                                       pointer (exclusive), by gc/cleanup while they remove
                                       snapshots and by check while it lists the folder
    <root>/datasets/<name>/.tmp-*      temporaries of running (locked) or crashed writers

The pointer's format and the reader's lock live in :mod:`catdask.store.pointer`. The pointer
is replaced in one ``os.replace`` of a fully written temporary file, so it always names one
complete snapshot. A reader resolves the name once (:func:`resolve`), takes a shared
lock on that snapshot and reads only it, whatever writers do to the name meanwhile; gc removes
a snapshot only when it gets the exclusive lock (no reader) and no model refers to it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from ..errors import DatasetNotFoundError, StoreCorruptError
from ..names import did_you_mean
from ..object_store import LocalBackend, NotFound
from . import _zarr_io
from ._atomic import file_lock, rename_no_replace
from .content import check_attrs, verify_content
from .layout import (
    NAME_LOCK,
    SNAPSHOT_COUNTER,
    datasets_dir,
    entry_path,
    list_entries,
    numbered_folders,
    resolve_store,
)
from .pointer import (
    POINTER_FORMAT,
    Pointer,
    SnapshotHold,
    hold_snapshot,
    read_pointer,
    resolve_folder,
    snapshot_number,
    write_pointer,
)

__all__ = [
    "POINTER_FORMAT",
    "Pointer",
    "SnapshotHold",
    "name_dir",
    "snapshot_ids",
    "current_snapshot_id",
    "rename_to_next_snapshot",
    "snapshot_attrs",
    "snapshot_number",
    "read_pointer",
    "write_pointer",
    "name_lock",
    "hold_snapshot",
    "resolve",
    "open_snapshot",
    "verify_snapshot",
]



def name_dir(store, name: str) -> tuple[Path, Path]:
    """``(root, <root>/datasets/<name>)`` after validating ``name``."""
    root = resolve_store(store)
    return root, entry_path(datasets_dir(root), name, "data set")


def snapshot_ids(folder: Path) -> list[str]:
    """Ids of the snapshots under a data-set folder, oldest (lowest N) first."""
    return numbered_folders(folder, snapshot_number)


def current_snapshot_id(folder: Path) -> str | None:
    """The id the pointer names; None when there is no pointer or it is damaged."""
    try:
        pointer = read_pointer(folder)
    except StoreCorruptError:
        return None
    return pointer.snapshot if pointer is not None else None


def rename_to_next_snapshot(tmp: Path, folder: Path) -> str:
    """Rename the finished temporary ``tmp`` to the next free ``s<N>`` of ``folder`` (call
    under the name lock, so no other writer claims N meanwhile); returns the new id.

    N is above every snapshot present, every one ever committed (the pointer's
    ``newest_committed``) and every one ever given (``.newest-snapshot``, which survives a
    damaged pointer, as registry.py's ``.newest-version`` does for model versions): gc may
    have removed the newest snapshot since, and an id that named other content before would
    make the logs, events and model metadata naming it ambiguous.
    """
    try:
        pointer = read_pointer(folder)
    except StoreCorruptError:
        pointer = None  # damaged: the record and the snapshots present still say what was given
    newest = pointer.newest_committed if pointer is not None else 0
    present = max((snapshot_number(s) or 0 for s in snapshot_ids(folder)), default=0)
    number = max(present, newest, _newest_given(folder)) + 1
    snapshot = f"s{number}"
    if not rename_no_replace(tmp, folder / snapshot):
        raise OSError(f"{folder / snapshot} exists although the name lock is held")
    # Until it is recorded the folder itself says the number is taken; a failure to record
    # (a full disk) leaves that, and the snapshot is written all the same.
    with contextlib.suppress(OSError):
        _counter_backend(folder).put(_counter_key(folder), f"{number}\n".encode())
    return snapshot


def _newest_given(folder: Path) -> int:
    try:
        text = _counter_backend(folder).get(_counter_key(folder))[0].strip()
    except NotFound:
        return 0
    return int(text) if text.isdigit() else 0


# The record is a small object written through the store's seam, as the model registry's.
def _counter_backend(folder: Path) -> LocalBackend:
    return LocalBackend(folder.parent.parent)


def _counter_key(folder: Path) -> str:
    return f"{folder.parent.name}/{folder.name}/{SNAPSHOT_COUNTER}"


def name_lock(folder: Path, *, shared: bool = False):
    """The per-name lock (a context manager).

    Exclusive: writers' commits, gc, cleanup and ``check``'s look at a folder's temporaries
    exclude each other. Shared: a writer creating its temporary (``_atomic.locked_temp_dir``),
    so nobody inspecting the folder ever sees a temporary its writer has not locked yet.
    """
    return file_lock(folder / NAME_LOCK, shared=shared)


def resolve(store, name: str) -> tuple[str, Path, SnapshotHold]:
    """Resolve a data-set name to its current snapshot, once: ``(snapshot id, path, hold)``.

    The caller reads only ``path`` and closes ``hold`` when done
    (:func:`~catdask.store.pointer.resolve_folder`).

    Raises
    ------
    DatasetNotFoundError
        No committed data set of that name (the message lists the stored ones).
    StoreCorruptError
        The pointer is damaged or names a snapshot that does not exist.
    """
    root, folder = name_dir(store, name)
    found = resolve_folder(folder)
    if found is None:
        known = [n for n in list_entries(datasets_dir(root)) if _has_pointer(root, n)]
        hint = did_you_mean(name, known)  # a typo: not "ingest it", which would fail too
        raise DatasetNotFoundError(
            f"No data set {name!r} in store {root} (stored: {', '.join(known) or 'none'})"
            + (f"{hint}" if hint else f". Ingest it first, e.g. `catdask ingest {name}`.")
        )
    return found


def _has_pointer(root: Path, name: str) -> bool:
    return (datasets_dir(root) / name / "zarr.json").is_file()


def snapshot_attrs(path: Path) -> dict:
    """A snapshot's checked attributes, read from its ``zarr.json`` only (no array opened)."""
    return check_attrs(_zarr_io.read_node_json(path, path).get("attributes"), path)


def open_snapshot(path: Path):
    """Structural checks of one snapshot: ``(attrs, X, y)`` as zarr arrays, not yet read."""
    meta = _zarr_io.read_node_json(path, path)
    if meta.get("node_type") != "group":
        raise StoreCorruptError(path, "zarr.json does not describe a group")
    attrs = check_attrs(meta.get("attributes"), path)
    group = _zarr_io.open_group_checked(path)
    for arr in ("X", "y"):
        if not (path / arr).is_dir():
            raise StoreCorruptError(path, f"array {arr!r} is missing")
    X = _zarr_io.open_array_checked(group, "X", path, dtypes={"float64"}, ndim=2)
    y = _zarr_io.open_array_checked(group, "y", path, dtypes={"int32", "int64"}, ndim=1)
    n, d = attrs["n_samples"], attrs["n_features"]
    if tuple(X.shape) != (n, d):
        raise StoreCorruptError(
            path, f"X has shape {tuple(X.shape)} but the attributes say ({n}, {d})"
        )
    if y.shape[0] != X.shape[0]:
        raise StoreCorruptError(path, f"y has {y.shape[0]} labels but X has {X.shape[0]} rows")
    return attrs, X, y


def verify_snapshot(path: Path) -> dict:
    """Check one snapshot's structure and checksums block by block; returns its attributes.

    Raises
    ------
    StoreCorruptError
        With the first problem found.
    """
    attrs, X, y = open_snapshot(path)
    for arr, label in ((X, "X"), (y, "y")):
        _zarr_io.check_chunks(arr, path, label)
    try:
        verify_content(path, attrs, X, y)
    except StoreCorruptError:
        raise
    except Exception as exc:
        raise StoreCorruptError(
            path, f"cannot read the arrays (truncated or corrupt chunk?): {exc}"
        ) from exc
    return attrs
