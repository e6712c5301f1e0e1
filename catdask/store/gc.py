"""Garbage collection of data-set snapshots: ``gc_store`` removes those nothing refers to.

A snapshot may be removed only when it is not the current one of its name, no model version
refers to it (by snapshot id or content checksum) and no reader holds it (the exclusive lock
on its ``zarr.json`` is free). Removal renames it to a ``.tmp-gc-`` folder first, so a crash
mid-delete never leaves a half-deleted snapshot under a snapshot name.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from pathlib import Path

from ..errors import StoreCorruptError
from ._atomic import TMP_PREFIX, crash_point, hold_dir, remove_tree, try_lock
from .layout import datasets_dir, list_entries, models_dir, resolve_store
from .registry import checked_attrs, version_numbers
from .snapshots import name_lock, read_pointer, snapshot_ids, snapshot_number

__all__ = ["GcResult", "gc_store", "model_references", "removal_blocker", "remove_snapshot"]

@dataclasses.dataclass
class GcResult:
    """``removed``/``would_remove``: snapshot folders; ``kept``: ``(path, reason)`` pairs."""

    removed: list = dataclasses.field(default_factory=list)
    would_remove: list = dataclasses.field(default_factory=list)
    kept: list = dataclasses.field(default_factory=list)


# --------------------------------------------------------------------------- references


def model_references(root: Path):
    """``(snapshot refs, sha256 refs, unreadable)``: what model versions were trained on.

    ``snapshot refs`` holds ``(dataset, snapshot id)`` pairs (metadata key
    ``dataset_snapshot``), ``sha256 refs`` the ``dataset_sha256`` values; ``unreadable`` the
    versions whose metadata cannot be read (their references are unknown).
    """
    snapshots, shas, unreadable = set(), set(), []
    parent = models_dir(root)
    for model in list_entries(parent):
        for v in version_numbers(parent / model):
            path = parent / model / f"v{v}"
            try:
                meta = checked_attrs(path)["meta"]
            except StoreCorruptError:
                unreadable.append(path)
                continue
            if isinstance(meta.get("dataset_snapshot"), str):
                snapshots.add((meta.get("dataset"), meta["dataset_snapshot"]))
            if isinstance(meta.get("dataset_sha256"), str):
                shas.add(meta["dataset_sha256"])
    return snapshots, shas, unreadable


def _snapshot_sha(path: Path) -> str | None:
    from ._zarr_io import read_node_json

    try:
        sha = (read_node_json(path, path).get("attributes") or {}).get("content_sha256")
    except StoreCorruptError:
        return None
    return sha if isinstance(sha, str) else None


def remove_snapshot(folder: Path, snapshot: str, blocker=None) -> bool:
    """Remove one snapshot if no reader holds it (call under the name lock).

    ``blocker``, if given, is called once the snapshot's exclusive lock is taken and returns
    why it must stay (or None): the caller's view of the model references may be older than a
    version registered meanwhile by a fit that held the snapshot until then.
    """
    path = folder / snapshot
    with try_lock(path / "zarr.json") as free:
        if not free:
            return False
        if blocker is not None and blocker() is not None:
            return False
        doomed = folder / f"{TMP_PREFIX}gc-{snapshot}-{uuid.uuid4().hex}"
        os.rename(path, doomed)  # gone from view at once; the rest is deleting garbage
        crash_point("gc-renamed")
    with hold_dir(doomed):  # in use: check does not report it as a crash leftover
        remove_tree(doomed)
    return True


def removal_blocker(folder: Path, snapshot: str, refs, current: str | None, keep: set):
    """Why ``snapshot`` must stay, or None if gc may remove it."""
    if snapshot == current:
        return "current snapshot"
    if snapshot in keep:
        return "kept by retention"
    snapshot_refs, sha_refs, unreadable = refs
    if unreadable:
        return f"model metadata unreadable ({unreadable[0]}): references unknown"
    if (folder.name, snapshot) in snapshot_refs:
        return "a model version was trained on it"
    sha = _snapshot_sha(folder / snapshot)
    if sha is None:
        return None  # damaged attributes: no model can refer to it by checksum
    if sha in sha_refs:
        return "a model version was trained on its content"
    return None


# --------------------------------------------------------------------------- gc


def gc_store(store=None, *, dry_run: bool = False, keep_last: int = 0) -> GcResult:
    """Remove data-set snapshots that no model version and no running reader refers to.

    Parameters
    ----------
    store : path, optional
        Store root.
    dry_run : bool, default False
        Only report what would be removed.
    keep_last : int, default 0
        Also keep this many snapshots before the current one (retention).

    Returns
    -------
    GcResult
    """
    root = resolve_store(store)
    result = GcResult()
    refs = model_references(root)
    for name in list_entries(datasets_dir(root)):
        folder = datasets_dir(root) / name
        with name_lock(folder):
            try:
                pointer = read_pointer(folder)
            except StoreCorruptError as exc:
                result.kept += [(folder / s, exc.problem) for s in snapshot_ids(folder)]
                continue
            if pointer is None:  # never committed: check_store/cleanup decides, not gc
                result.kept += [(folder / s, "no current snapshot") for s in snapshot_ids(folder)]
                continue
            ids = snapshot_ids(folder)
            older = [s for s in ids if snapshot_number(s) < snapshot_number(pointer.snapshot)]
            keep = set(older[-keep_last:]) if keep_last > 0 else set()
            for snapshot in ids:
                reason = removal_blocker(folder, snapshot, refs, pointer.snapshot, keep)
                if reason is not None:
                    result.kept.append((folder / snapshot, reason))
                elif dry_run:
                    result.would_remove.append(folder / snapshot)
                else:
                    late = _LateBlocker(root, folder, snapshot, pointer.snapshot, keep)
                    if remove_snapshot(folder, snapshot, late):
                        result.removed.append(folder / snapshot)
                    else:
                        result.kept.append((folder / snapshot, late.reason or "a reader holds it"))
    return result


class _LateBlocker:
    """:func:`removal_blocker` with the model references read again, under the snapshot's
    exclusive lock: a fit holds its snapshot until its version is registered, so a version
    registered after ``gc_store`` first read the references is seen here."""

    def __init__(self, root, folder, snapshot, current, keep):
        self.args = root, folder, snapshot, current, keep
        self.reason = None

    def __call__(self):
        root, folder, snapshot, current, keep = self.args
        reason = removal_blocker(folder, snapshot, model_references(root), current, keep)
        self.reason = None if reason is None else f"{reason} (registered meanwhile)"
        return self.reason
