"""Immutable data-set snapshots and the pointer that names the current one.

::

    <root>/datasets/<name>/zarr.json   the pointer: a zarr v3 group whose attributes name the
                                       current snapshot and its content checksum
    <root>/datasets/<name>/s<N>/       snapshot N: a zarr v3 group (X, y, attributes), never
                                       modified after it is renamed into place
    <root>/datasets/<name>/.lock       held by writers while they claim N and move the pointer,
                                       and by gc/cleanup while they remove snapshots
    <root>/datasets/<name>/.tmp-*      temporaries of running (locked) or crashed writers

The pointer is replaced in one ``os.replace`` of a fully written temporary file, so it always
names one complete snapshot. A reader resolves the name once (:func:`resolve`), takes a shared
lock on that snapshot and reads only it, whatever writers do to the name meanwhile; gc removes
a snapshot only when it gets the exclusive lock (no reader) and no model refers to it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import uuid
from pathlib import Path

from ..errors import DatasetNotFoundError, StoreCorruptError
from . import _zarr_io
from ._atomic import TMP_PREFIX, crash_point, flock_fd, file_lock, fsync_dir
from ._json import utc_now
from .content import check_attrs, verify_content
from .layout import datasets_dir, entry_path, list_entries, resolve_store

__all__ = [
    "POINTER_FORMAT",
    "Pointer",
    "SnapshotHold",
    "name_dir",
    "snapshot_ids",
    "snapshot_number",
    "read_pointer",
    "write_pointer",
    "name_lock",
    "hold_snapshot",
    "resolve",
    "open_snapshot",
    "verify_snapshot",
]

POINTER_FORMAT = 1
NAME_LOCK = ".lock"
_SNAPSHOT_DIR = re.compile(r"s([1-9][0-9]*)")
# A reader retries when gc removed the snapshot it resolved (the pointer moved on meanwhile).
_RESOLVE_ATTEMPTS = 100


@dataclasses.dataclass(frozen=True)
class Pointer:
    """What a data-set name points at: the current snapshot's id and content checksum."""

    snapshot: str
    content_sha256: str
    updated: str | None = None


def name_dir(store, name: str) -> tuple[Path, Path]:
    """``(root, <root>/datasets/<name>)`` after validating ``name``."""
    root = resolve_store(store)
    return root, entry_path(datasets_dir(root), name, "data set")


def snapshot_number(snapshot_id: str) -> int | None:
    """N of a snapshot id ``s<N>``, None for anything else."""
    m = _SNAPSHOT_DIR.fullmatch(snapshot_id)
    return int(m.group(1)) if m else None


def snapshot_ids(folder: Path) -> list[str]:
    """Ids of the snapshots under a data-set folder, oldest (lowest N) first."""
    if not folder.is_dir():
        return []
    found = [p.name for p in folder.iterdir() if snapshot_number(p.name) and p.is_dir()]
    return sorted(found, key=snapshot_number)


def read_pointer(folder: Path) -> Pointer | None:
    """The pointer of a data-set folder; None if it has none (never committed).

    Raises
    ------
    StoreCorruptError
        The pointer file exists but is not a valid pointer.
    """
    try:
        node = _zarr_io.read_node_json(folder, folder)
    except StoreCorruptError:
        if not (folder / "zarr.json").exists():
            return None
        raise
    attrs = node.get("attributes")
    if node.get("node_type") != "group" or not isinstance(attrs, dict):
        raise StoreCorruptError(folder, "the pointer (zarr.json) does not describe a group")
    if attrs.get("catdask_dataset_pointer") != POINTER_FORMAT:
        if "catdask_dataset_format" in attrs:
            raise StoreCorruptError(
                folder,
                "this data set was written by an older catdask (stored in place, without "
                "snapshots); `catdask check --cleanup` (or any re-ingest) upgrades it",
            )
        raise StoreCorruptError(folder, "zarr.json is not a catdask data-set pointer")
    snapshot, sha = attrs.get("snapshot"), attrs.get("content_sha256")
    if not (isinstance(snapshot, str) and snapshot_number(snapshot) and isinstance(sha, str)):
        raise StoreCorruptError(folder, f"the pointer names an invalid snapshot {snapshot!r}")
    return Pointer(snapshot, sha, attrs.get("updated"))


def write_pointer(folder: Path, name: str, snapshot: str, content_sha256: str) -> None:
    """Point ``folder``'s name at ``snapshot``: write a temporary file, then one ``os.replace``."""
    node = {
        "zarr_format": 3,
        "node_type": "group",
        "attributes": {
            "catdask_dataset_pointer": POINTER_FORMAT,
            "name": name,
            "snapshot": snapshot,
            "content_sha256": content_sha256,
            "updated": utc_now(),
        },
    }
    tmp = folder / f"{TMP_PREFIX}pointer-{uuid.uuid4().hex}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            flock_fd(fh.fileno())  # in use: cleanup and check leave it alone
            json.dump(node, fh, indent=2)
            fh.flush()
            os.fsync(fh.fileno())
        crash_point("pointer-written")
        os.replace(tmp, folder / "zarr.json")
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    crash_point("pointer-replaced")
    fsync_dir(folder)


def name_lock(folder: Path):
    """The per-name lock (a context manager): writers' commits and gc exclude each other."""
    return file_lock(folder / NAME_LOCK)


class SnapshotHold:
    """A shared lock on one snapshot: gc does not remove it while held.

    Released by :meth:`close` (or when the object is garbage collected, or the process dies).
    """

    def __init__(self, fd: int | None):
        self._fd = fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self):  # pragma: no cover - depends on the garbage collector
        with contextlib.suppress(Exception):
            self.close()

    def __reduce__(self):
        # A copy (pickle, deepcopy: e.g. a task result that holds one) holds nothing: two
        # objects owning one descriptor would close it twice, the second time someone else's.
        return type(self), (None,)


def hold_snapshot(path: Path) -> SnapshotHold | None:
    """Take a shared lock on snapshot ``path``; None if it was removed (or is being removed).

    The lock is on the snapshot's ``zarr.json``. gc renames a snapshot away while holding the
    exclusive lock, so after getting the shared lock the path must still lead to the same
    file: otherwise the snapshot is gone and the caller resolves the name again.
    """
    try:
        fd = os.open(path / "zarr.json", os.O_RDONLY)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    try:
        flock_fd(fd, shared=True)
        now = os.stat(path / "zarr.json")
        held = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
            os.close(fd)
            return None
    except FileNotFoundError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return SnapshotHold(fd)


def resolve(store, name: str) -> tuple[str, Path, SnapshotHold]:
    """Resolve a data-set name to its current snapshot, once: ``(snapshot id, path, hold)``.

    The caller reads only ``path`` and closes ``hold`` when done.

    Raises
    ------
    DatasetNotFoundError
        No committed data set of that name (the message lists the stored ones).
    StoreCorruptError
        The pointer is damaged or names a snapshot that does not exist.
    """
    root, folder = name_dir(store, name)
    missing = None
    for _ in range(_RESOLVE_ATTEMPTS):
        pointer = read_pointer(folder) if folder.is_dir() else None
        if pointer is None:
            known = [n for n in list_entries(datasets_dir(root)) if _has_pointer(root, n)]
            raise DatasetNotFoundError(
                f"No data set {name!r} in store {root} (stored: {', '.join(known) or 'none'}). "
                f"Ingest it first, e.g. `catdask ingest {name}`."
            )
        path = folder / pointer.snapshot
        hold = hold_snapshot(path)
        if hold is not None:
            return pointer.snapshot, path, hold
        if missing == pointer.snapshot:  # the pointer still names it: it is really gone
            break
        missing = pointer.snapshot
    raise StoreCorruptError(
        folder,
        f"the current snapshot {missing!r} is missing; run `catdask check --cleanup` to "
        "restore the last good snapshot, or re-ingest the data set",
    )


def _has_pointer(root: Path, name: str) -> bool:
    return (datasets_dir(root) / name / "zarr.json").is_file()


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
