"""Reading a zarr node's ``zarr.json``: the file, decoded as UTF-8 and parsed as JSON.

The one place a store's JSON metadata is read from disk, for the array checks
(:func:`catdask.store._zarr_io.read_node_json`) and the data-set pointer
(:mod:`catdask.store.pointer`); each caller then checks the value against its own format. Like
:mod:`~catdask.store.pointer`, this module imports only the standard library and
:mod:`catdask.errors`, so the leaf pointer module stays a leaf.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import StoreCorruptError

__all__ = ["read_zarr_json", "relative_to_entry"]


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
