"""The data-set pointer's writer: ``datasets/<name>/zarr.json`` moved by compare-and-swap.

The pointer's format and the readers' hold are read in :mod:`catdask.dataset_pointer` (below
the library, which reads stored data sets through it); this module re-exports them for the
store and writes the pointer. There is no name lock: a writer reads the pointer with its
version, decides, and writes with ``put_if_match`` on that version (``put_new`` where there
was none); a :class:`~catdask.object_store.PreconditionFailed` means another writer moved it
meanwhile, and the caller decides again from the pointer it reads then.
"""

from __future__ import annotations

import datetime as _dt
import json

from ..dataset_pointer import (
    DATASET_FORMAT_KEY,
    POINTER_FORMAT,
    POINTER_KEY,
    Pointer,
    SnapshotHold,
    hold_snapshot,
    is_pointer_attrs,
    read_pointer,
    read_pointer_versioned,
    resolve_pointer,
    snapshot_number,
)
from ..object_store import Backend
from ._atomic import crash_point


def write_pointer(backend: Backend, folder_key: str, name: str, snapshot: str,
                  content_sha256: str, previous, version: str | None) -> str:
    """Point the data set at ``snapshot`` if the pointer is still at ``version`` (None: there
    is none yet); returns the new version.

    ``previous`` is the pointer read at ``version`` (a :class:`Pointer`, a damaged one's
    :class:`StoreCorruptError`, or None): ``newest_committed`` is raised to at least
    ``snapshot``'s number and to its value.

    Raises
    ------
    PreconditionFailed
        Another writer moved the pointer since ``version`` was read: decide again.
    """
    newest = snapshot_number(snapshot) or 0
    if isinstance(previous, Pointer):
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
    data = json.dumps(node, indent=2).encode()
    crash_point("pointer-written")
    key = f"{folder_key}/zarr.json"
    new = backend.put_new(key, data) if version is None else backend.put_if_match(key, data,
                                                                                  version)
    crash_point("pointer-replaced")
    return new
