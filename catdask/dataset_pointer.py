"""A stored data set's pointer and the readers' hold: the one place their format is read.

::

    <root>/datasets/<name>/zarr.json   the pointer: a zarr v3 group whose attributes are
                                       {"catdask_dataset_pointer": 1, "name", "snapshot": "s<N>",
                                        "content_sha256", "updated", "newest_committed": M}
    <root>/datasets/<name>/s<N>/       an immutable snapshot (its own zarr.json, X, y)

``newest_committed`` is the highest snapshot number ever committed under the name: with
content addressing the pointer may move back to an older snapshot that holds the content
again, so a snapshot numbered above it (and only such a one) was renamed in by a write that
crashed before its commit; a new snapshot is numbered above it, so no id is given twice.
Pointers written before that field existed lack it; then the current snapshot's number stands
in.

A reader resolves a data-set folder once (:func:`resolve_folder`): it reads the pointer, takes
a shared ``flock`` on the named snapshot's ``zarr.json`` (:func:`hold_snapshot`) and reads only
that snapshot. gc and cleanup remove a snapshot only under the exclusive lock, so a held
snapshot stays. Every ``zarr.json`` the store reads from disk is read here
(:func:`read_zarr_json`).

This module sits below :mod:`catdask.distributed`, which reads a stored data set given to
``fit`` through it, and imports nothing of catdask but :mod:`catdask.errors` and the file
helpers of :mod:`catdask.object_store`: the library imports nothing of the store. The writer
of the pointer is :func:`catdask.store.pointer.write_pointer`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
from pathlib import Path

from .errors import StoreCorruptError
from .object_store._fs import flock_fd

__all__ = [
    "POINTER_FORMAT",
    "POINTER_KEY",
    "DATASET_FORMAT_KEY",
    "Pointer",
    "SnapshotHold",
    "is_pointer_attrs",
    "snapshot_number",
    "read_pointer",
    "hold_snapshot",
    "resolve_folder",
    "read_zarr_json",
    "relative_to_entry",
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
        number = snapshot_number(self.snapshot) or 0
        if self.newest_committed < number:
            object.__setattr__(self, "newest_committed", number)


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


def relative_to_entry(path: Path, entry: Path) -> str:
    """``path`` as named in an error about ``entry``: relative to it when inside it."""
    try:
        return str(path.relative_to(entry))
    except ValueError:
        return str(path)


def read_zarr_json(node_dir: Path, entry: Path, *, missing_ok: bool = False):
    """The parsed JSON value of ``node_dir/zarr.json`` (any JSON type: the caller checks it).

    Parameters
    ----------
    node_dir : Path
        The zarr node (group or array folder).
    entry : Path
        The store entry the problem is reported against (a snapshot, a model version, a
        data-set folder); the file is named relative to it.
    missing_ok : bool, default False
        Return None when the file does not exist instead of raising.

    Raises
    ------
    StoreCorruptError
        The file is missing (unless ``missing_ok``), unreadable, not UTF-8 or not JSON.
    """
    path = node_dir / "zarr.json"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if missing_ok:
            return None
        raise StoreCorruptError(entry, f"{relative_to_entry(path, entry)} is missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreCorruptError(
            entry, f"cannot read {relative_to_entry(path, entry)}: {exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise StoreCorruptError(
            entry, f"{relative_to_entry(path, entry)} is not valid JSON ({exc})") from exc
