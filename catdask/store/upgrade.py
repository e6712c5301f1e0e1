"""Upgrading a data set stored by an older catdask (in place, without snapshots).

Such a folder is itself the zarr group (``<name>/zarr.json``, ``<name>/X``, ``<name>/y``). The
upgrade copies it into a new snapshot, verifies the copy, points the name at it (one
``os.replace`` of ``zarr.json``, which turns the old group metadata into the pointer) and only
then removes the old arrays. A crash before the pointer moves leaves the old layout intact
(plus a temporary or an uncommitted snapshot that cleanup removes); the old arrays are moved
out of view just before the pointer is written.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from ..errors import StoreCorruptError
from . import _zarr_io
from ._atomic import (
    TMP_PREFIX,
    crash_point,
    fsync_tree,
    hold_dir,
    make_temp_dir,
    remove_tree,
)
from .pointer import DATASET_FORMAT_KEY, is_pointer_attrs
from .snapshots import rename_to_next_snapshot, verify_snapshot, write_pointer

__all__ = ["is_old_layout", "upgrade_old_layout"]


def is_old_layout(folder: Path) -> bool:
    """True if ``folder`` holds a data set in the in-place layout of older catdask versions."""
    try:
        attrs = _zarr_io.read_node_json(folder, folder).get("attributes")
    except StoreCorruptError:
        return False
    return (
        isinstance(attrs, dict)
        and DATASET_FORMAT_KEY in attrs
        and not is_pointer_attrs(attrs)
        and (folder / "X").is_dir()
        and (folder / "y").is_dir()
    )


def upgrade_old_layout(folder: Path) -> str | None:
    """Move an old in-place data set into snapshot form; call under the name lock.

    Returns
    -------
    str or None
        The new snapshot id, or None when ``folder`` is not in the old layout or its copy does
        not verify (then nothing changes: the damaged data set stays for a human to look at).
    """
    if not is_old_layout(folder):
        return None
    tmp = make_temp_dir(folder, "s")
    try:
        with hold_dir(tmp):
            for array in ("X", "y"):
                shutil.copytree(folder / array, tmp / array)
            shutil.copy2(folder / "zarr.json", tmp / "zarr.json")
            fsync_tree(tmp)
            try:
                attrs = verify_snapshot(tmp)
            except StoreCorruptError:
                remove_tree(tmp)
                return None
            snapshot = rename_to_next_snapshot(tmp, folder)
    except BaseException:
        remove_tree(tmp)
        raise
    crash_point("upgrade-copied")
    # The old arrays are verified copies of the new snapshot: move them out of view before the
    # pointer replaces the old group metadata, so no state leaves them as strays. A crash in
    # between leaves old metadata without arrays; cleanup then points the name at the newest
    # snapshot that verifies (this one).
    doomed = []
    for array in ("X", "y"):
        doomed.append(folder / f"{TMP_PREFIX}gc-old-{array}-{uuid.uuid4().hex}")
        (folder / array).rename(doomed[-1])
    crash_point("upgrade-moved-aside")
    write_pointer(folder, folder.name, snapshot, attrs["content_sha256"])
    for path in doomed:
        remove_tree(path)
    return snapshot
