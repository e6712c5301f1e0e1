"""The data-set pointer's writer: one atomic replacement of ``datasets/<name>/zarr.json``.

The pointer's format and the readers' hold are read in :mod:`catdask.dataset_pointer` (below
the library, which reads stored data sets through it); this module re-exports them for the
store and writes the pointer.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import uuid
from pathlib import Path

from ..dataset_pointer import (
    DATASET_FORMAT_KEY,
    POINTER_FORMAT,
    POINTER_KEY,
    Pointer,
    SnapshotHold,
    hold_snapshot,
    is_pointer_attrs,
    read_pointer,
    resolve_folder,
    snapshot_number,
)
from ..errors import StoreCorruptError
from ._atomic import TMP_PREFIX, crash_point, flock_fd, fsync_dir

__all__ = [
    "DATASET_FORMAT_KEY",
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
