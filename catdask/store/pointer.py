"""The data-set pointer and the reader's lock: the one place their format is spelled.

::

    <root>/datasets/<name>/zarr.json   the pointer: a zarr v3 group whose attributes are
                                       {"catdask_dataset_pointer": 1, "name", "snapshot": "s<N>",
                                        "content_sha256", "updated", "newest_committed": M}
    <root>/datasets/<name>/s<N>/       an immutable snapshot (its own zarr.json, X, y)

``newest_committed`` is the highest snapshot number ever committed under the name: with
content addressing the pointer may move back to an older snapshot that holds the content
again, so a snapshot numbered above it (and only such a one) was renamed in by a write that
crashed before its commit. Pointers written before that field existed lack it; then the
current snapshot's number stands in.

A reader resolves a data-set folder once (:func:`resolve_folder`): it reads the pointer, takes
a shared ``flock`` on the named snapshot's ``zarr.json`` (:func:`hold_snapshot`) and reads only
that snapshot. gc and cleanup remove a snapshot only under the exclusive lock, so a held
snapshot stays.

This module is a leaf: it imports only the standard library, :mod:`catdask.errors`,
:mod:`catdask.store._atomic` and :mod:`catdask.store._node_json` (both standard library only),
so :mod:`catdask.distributed` reads a store's data set through it without depending on the rest
of the store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import os
import re
import uuid
from pathlib import Path

from ..errors import StoreCorruptError
from ._atomic import TMP_PREFIX, crash_point, flock_fd, fsync_dir
from ._node_json import read_zarr_json

__all__ = [
    "POINTER_FORMAT",
    "POINTER_KEY",
    "Pointer",
    "SnapshotHold",
    "is_pointer_attrs",
    "snapshot_number",
    "read_pointer",
    "write_pointer",
    "hold_snapshot",
    "resolve_folder",
]

POINTER_FORMAT = 1
#: The attribute that marks a group's ``zarr.json`` as a data-set pointer.
POINTER_KEY = "catdask_dataset_pointer"
#: The attribute of a snapshot's (and of the old in-place layout's) group metadata.
DATASET_FORMAT_KEY = "catdask_dataset_format"
_SNAPSHOT_DIR = re.compile(r"s([1-9][0-9]*)")
# A reader retries when gc removed the snapshot it resolved (the pointer moved on meanwhile).
_RESOLVE_ATTEMPTS = 100


@dataclasses.dataclass(frozen=True)
class Pointer:
    """What a data-set name points at: the current snapshot's id and content checksum, and the
    highest snapshot number ever committed under the name."""

    snapshot: str
    content_sha256: str
    updated: str | None = None
    newest_committed: int = 0

    def __post_init__(self):
        if self.newest_committed < snapshot_number(self.snapshot):
            object.__setattr__(self, "newest_committed", snapshot_number(self.snapshot))


def snapshot_number(snapshot_id: str) -> int | None:
    """N of a snapshot id ``s<N>``, None for anything else."""
    m = _SNAPSHOT_DIR.fullmatch(snapshot_id) if isinstance(snapshot_id, str) else None
    return int(m.group(1)) if m else None


def is_pointer_attrs(attrs) -> bool:
    """True when a group's attributes are a data-set pointer (of any format)."""
    return isinstance(attrs, dict) and POINTER_KEY in attrs


def read_pointer(folder: Path) -> Pointer | None:
    """The pointer of a data-set folder; None if it has none (never committed).

    Raises
    ------
    StoreCorruptError
        The pointer file exists but is not a valid pointer.
    """
    node = read_zarr_json(folder, folder, missing_ok=True)
    if node is None:
        return None
    if not isinstance(node, dict):
        raise StoreCorruptError(folder, "zarr.json is not a JSON object")
    attrs = node.get("attributes")
    if node.get("node_type") != "group" or not isinstance(attrs, dict):
        raise StoreCorruptError(folder, "the pointer (zarr.json) does not describe a group")
    if attrs.get(POINTER_KEY) != POINTER_FORMAT:
        if DATASET_FORMAT_KEY in attrs:
            raise StoreCorruptError(
                folder,
                "this data set was written by an older catdask (stored in place, without "
                "snapshots); `catdask check --cleanup` (or any re-ingest) upgrades it",
            )
        raise StoreCorruptError(folder, "zarr.json is not a catdask data-set pointer")
    snapshot, sha = attrs.get("snapshot"), attrs.get("content_sha256")
    if not (isinstance(snapshot, str) and snapshot_number(snapshot) and isinstance(sha, str)):
        raise StoreCorruptError(folder, f"the pointer names an invalid snapshot {snapshot!r}")
    newest = attrs.get("newest_committed")
    newest = newest if isinstance(newest, int) and not isinstance(newest, bool) else 0
    return Pointer(snapshot, sha, attrs.get("updated"), newest)


def write_pointer(folder: Path, name: str, snapshot: str, content_sha256: str,
                  newest_committed: int = 0) -> None:
    """Point ``folder``'s name at ``snapshot``: write a temporary file, then one ``os.replace``.

    Call under the name lock. ``newest_committed`` is raised to at least ``snapshot``'s number
    and to the previous pointer's value (when it can be read).
    """
    newest = max(newest_committed, snapshot_number(snapshot) or 0)
    with contextlib.suppress(StoreCorruptError):
        previous = read_pointer(folder)
        if previous is not None:
            newest = max(newest, previous.newest_committed)
    node = {
        "zarr_format": 3,
        "node_type": "group",
        "attributes": {
            POINTER_KEY: POINTER_FORMAT,
            "name": name,
            "snapshot": snapshot,
            "content_sha256": content_sha256,
            "updated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "newest_committed": newest,
        },
    }
    tmp = folder / f"{TMP_PREFIX}pointer-{uuid.uuid4().hex}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            flock_fd(fh.fileno())  # in use (and written under the name lock): cleanup skips it
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
    except (FileNotFoundError, NotADirectoryError):
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


def resolve_folder(folder: Path) -> tuple[str, Path, SnapshotHold] | None:
    """Resolve a data-set folder to its current snapshot, once: ``(snapshot id, path, hold)``.

    The caller reads only ``path`` and closes ``hold`` when done. None when the folder has no
    pointer (nothing committed under the name).

    Raises
    ------
    StoreCorruptError
        The pointer is damaged or names a snapshot that does not exist.
    """
    missing = None
    for _ in range(_RESOLVE_ATTEMPTS):
        pointer = read_pointer(folder) if folder.is_dir() else None
        if pointer is None:
            return None
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
