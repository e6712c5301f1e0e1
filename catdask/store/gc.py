"""Garbage collection of data-set snapshots: ``gc_store`` removes those nothing refers to.

A snapshot may be removed only when it is not the current one of its name, no model version
of that data set needs it and no reader holds it (the exclusive lock on its ``zarr.json`` is
free). A model version records its data set's name, the snapshot id and the content checksum
it was trained on: it needs that snapshot; a version that records no snapshot id (or one that
no longer exists) needs the snapshots of its data set holding its checksum. A model of
another data set never pins a snapshot, even one with equal content. Removal renames it to a ``.tmp-gc-`` folder first, so a crash
mid-delete never leaves a half-deleted snapshot under a snapshot name.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from pathlib import Path

from ..errors import StoreCorruptError
from ._atomic import TMP_PREFIX, crash_point, hold_dir, remove_tree, try_lock
from .layout import changing_store, datasets_dir, list_entries, resolve_store
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

    ``snapshot refs`` holds ``(dataset, snapshot id)`` pairs (metadata keys ``dataset`` and
    ``dataset_snapshot``), ``sha256 refs`` maps ``(dataset, content checksum)`` (key
    ``dataset_sha256``) to the snapshot ids those versions record (None where a version
    records none); ``unreadable`` lists the versions whose metadata cannot be read (their
    references are unknown).
    """
    from .registry_read import list_models

    snapshots, shas, unreadable = set(), {}, []
    for version in list_models(root):
        if version.problem is not None:
            unreadable.append(version.path)
            continue
        meta = version.meta
        dataset = meta.get("dataset")
        snapshot = meta.get("dataset_snapshot")
        snapshot = snapshot if isinstance(snapshot, str) else None
        if snapshot is not None:
            snapshots.add((dataset, snapshot))
        if isinstance(meta.get("dataset_sha256"), str):
            shas.setdefault((dataset, meta["dataset_sha256"]), set()).add(snapshot)
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
    # A version that records no snapshot id, or one that is gone (a store restored from a
    # backup, older metadata), needs this content of this data set from any snapshot.
    recorded = sha_refs.get((folder.name, sha), set())
    if any(s is None or snapshot_number(s) is None or not (folder / s).is_dir()
           for s in recorded):
        return "a model version was trained on its content"
    if sha_refs.get((None, sha)):  # a version that names no data set: it may be this one
        return "a model version (of no named data set) was trained on its content"
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
        Also keep this many committed snapshots besides the current one, the highest-numbered
        (retention).

    Returns
    -------
    GcResult

    Raises
    ------
    StoreWriteError
        The store cannot be written (read-only mount, another user's files); nothing was
        removed.
    """
    root = resolve_store(store)
    with changing_store(root, "gc", writes=not dry_run):
        return _gc(root, dry_run, keep_last)


def _gc(root: Path, dry_run: bool, keep_last: int) -> GcResult:
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
            if pointer.snapshot not in ids:  # lost: an older one may be the only good copy
                result.kept += [(folder / s, f"the pointer names {pointer.snapshot}, which is "
                                 "missing; `check --cleanup` restores the newest that verifies")
                                for s in ids]
                continue
            # Content addressing moves the pointer back to an older snapshot that holds the
            # content again, so "older" means every committed one but the current.
            older = [s for s in ids if s != pointer.snapshot
                     and snapshot_number(s) <= pointer.newest_committed]
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
