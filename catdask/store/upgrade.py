"""Upgrading a data set stored by an older catdask (in place, without snapshots).

Such a data set is itself the zarr group (``<name>/zarr.json``, ``<name>/X``, ``<name>/y``).
The upgrade copies its arrays into a new snapshot, commits and verifies the copy, removes the
old arrays and then points the name at the copy (a compare-and-swap of ``zarr.json`` on the
version read, which turns the old group metadata into the pointer). A crash before the old
arrays go leaves the old layout intact (plus a committed snapshot the pointer never named,
which cleanup removes); one after leaves old metadata without arrays, and cleanup points the
name at the newest snapshot that verifies (the copy).
"""

from __future__ import annotations

from ..dataset_pointer import DATASET_FORMAT_KEY, is_pointer_attrs
from ..errors import StoreCorruptError
from ..object_store import Backend, NotFound, PreconditionFailed
from . import _zarr_io
from ._atomic import crash_point
from .pointer import write_pointer
from .snapshots import next_snapshot_id, remove_entry, verify_snapshot


def is_old_layout(backend: Backend, folder_key: str) -> bool:
    """True if the data set holds the in-place layout of older catdask versions."""
    try:
        attrs = _zarr_io.read_node(backend, folder_key, folder_key).get("attributes")
    except StoreCorruptError:
        return False
    return (
        isinstance(attrs, dict)
        and DATASET_FORMAT_KEY in attrs
        and not is_pointer_attrs(attrs)
        and backend.head(f"{folder_key}/X/zarr.json") is not None
        and backend.head(f"{folder_key}/y/zarr.json") is not None
    )


def upgrade_old_layout(backend: Backend, folder_key: str) -> str | None:
    """Move an old in-place data set into snapshot form.

    Returns
    -------
    str or None
        The new snapshot id, or None when the data set is not in the old layout, its copy does
        not verify, or another process upgraded it meanwhile (then nothing changes here).
    """
    if not is_old_layout(backend, folder_key):
        return None
    try:
        old, version = backend.get(f"{folder_key}/zarr.json")
    except NotFound:
        return None
    snapshot = next_snapshot_id(backend, folder_key)
    key = f"{folder_key}/{snapshot}"
    old_arrays = [m.key for prefix in ("X/", "y/")
                  for m in backend.list(f"{folder_key}/{prefix}")]
    try:
        for source in old_arrays:
            backend.put(f"{key}/{source[len(folder_key) + 1:]}", backend.get(source)[0])
        backend.put_new(f"{key}/zarr.json", old)
        attrs = verify_snapshot(backend, key)
    except (StoreCorruptError, NotFound):
        remove_entry(backend, key)
        return None
    except BaseException:
        remove_entry(backend, key)
        raise
    crash_point("upgrade-copied")
    # The old arrays are verified copies of the new snapshot: they go before the pointer
    # replaces the old group metadata, so no state leaves them as strays.
    for source in old_arrays:
        backend.delete(source)
    crash_point("upgrade-moved-aside")
    try:
        write_pointer(backend, folder_key, folder_key.rpartition("/")[2], snapshot,
                      attrs["content_sha256"], None, version)
    except PreconditionFailed:
        return None  # upgraded (or repaired) by another process meanwhile
    return snapshot
