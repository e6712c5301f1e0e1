"""Garbage collection of data-set snapshots: ``gc_store`` removes those nothing refers to.

A snapshot may be removed only when it is not the current one of its name, no model version
of that data set needs it, no live reader's hold and no live writer's lease names it. A model
version records its data set's name, the snapshot id and the content checksum it was trained
on: it needs that snapshot; a version that records no snapshot id (or one that no longer
exists) needs the snapshots of its data set holding its checksum. A model of another data set
never pins a snapshot, even one with equal content.

Removal is a handshake with the readers (:mod:`catdask.dataset_pointer`): gc writes the
snapshot's tombstone lease first, then lists its holds; with none live it deletes the
snapshot's ``zarr.json`` (from then on it does not exist for anyone), then the rest of its
prefix, then the tombstone. A crash part-way leaves an uncommitted prefix, which cleanup
removes. gc also removes what dead writers and readers left: uncommitted prefixes older than
the grace period that no live writer's lease names, and dead leases' records.
"""

from __future__ import annotations

import dataclasses

from ..dataset_pointer import (
    HOLDS,
    LEASE_MARGIN_S,
    LEASE_TTL_S,
    REMOVING,
    hold_snapshot,
    lease_is_live,
    location,
    read_lease,
    read_pointer,
    read_pointer_versioned,
    snapshot_number,
)
from ..errors import CatdaskError, StoreCorruptError
from ..names import is_valid_name
from ..object_store import Backend, PreconditionFailed
from ..object_store.errors import ObjectStoreError
from ..object_store.lease import LeaseHeldError, acquire, server_now
from ._atomic import crash_point
from .layout import changing_store, remove_local_temporaries
from .lease import release_if_dead_here
from .model_entries import remove_uncommitted_versions
from .pointer import write_pointer
from .root import StoreRoot, open_store
from .snapshots import (
    WRITING,
    Listing,
    dataset_names,
    list_dataset,
    remove_entry,
    verify_snapshot,
)
from .upgrade import upgrade_old_layout

#: How old an uncommitted prefix must be before cleanup or gc removes it (a writer's lease
#: protects it while it runs; the grace period is a second guard).
GRACE_S = 3600.0


@dataclasses.dataclass
class GcResult:
    """``removed``/``would_remove``: snapshots (local paths, or URLs on object storage);
    ``kept``: ``(snapshot, reason)`` pairs."""

    removed: list = dataclasses.field(default_factory=list)
    would_remove: list = dataclasses.field(default_factory=list)
    kept: list = dataclasses.field(default_factory=list)


# --------------------------------------------------------------------------- references


def model_references(root: StoreRoot):
    """``(snapshot refs, sha256 refs, unreadable)``: what model versions were trained on.

    ``snapshot refs`` holds ``(dataset, snapshot id)`` pairs (metadata keys ``dataset`` and
    ``dataset_snapshot``), ``sha256 refs`` maps ``(dataset, content checksum)`` (key
    ``dataset_sha256``) to the snapshot ids those versions record (None where a version
    records none); ``unreadable`` lists the versions whose metadata cannot be read (their
    references are unknown).
    """
    from .registry_read import list_models

    snapshots, shas, unreadable = set(), {}, []
    for version in list_models(root, verify=True):  # the versions, not the listing's cache
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


def _snapshot_sha(backend: Backend, key: str) -> str | None:
    from ._zarr_io import read_node

    try:
        sha = (read_node(backend, key, key).get("attributes") or {}).get("content_sha256")
    except StoreCorruptError:
        return None
    return sha if isinstance(sha, str) else None


def removal_blocker(backend: Backend, folder_key: str, snapshot: str, refs,
                    current: str | None, keep: set, committed) -> str | None:
    """Why ``snapshot`` must stay, or None if gc may remove it (``committed``: the data set's
    committed snapshot ids)."""
    if snapshot == current:
        return "current snapshot"
    if snapshot in keep:
        return "kept by retention"
    snapshot_refs, sha_refs, unreadable = refs
    if unreadable:
        return f"model metadata unreadable ({unreadable[0]}): references unknown"
    name = folder_key.rpartition("/")[2]
    if (name, snapshot) in snapshot_refs:
        return "a model version was trained on it"
    sha = _snapshot_sha(backend, f"{folder_key}/{snapshot}")
    if sha is None:
        return None  # damaged attributes: no model can refer to it by checksum
    # A version that records no snapshot id, or one that is gone (a store restored from a
    # backup, older metadata), needs this content of this data set from any snapshot.
    recorded = sha_refs.get((name, sha), set())
    if any(s is None or snapshot_number(s) is None or s not in committed for s in recorded):
        return "a model version was trained on its content"
    if sha_refs.get((None, sha)):  # a version that names no data set: it may be this one
        return "a model version (of no named data set) was trained on its content"
    return None


def live_leases(backend: Backend, keys, now: float) -> list[str]:
    """The keys among ``keys`` whose lease is live at server time ``now``."""
    return [key for key in keys if lease_is_live(*read_lease(backend, key), now)]


def remove_snapshot(backend: Backend, folder_key: str, snapshot: str,
                    blocker=None) -> str | None:
    """Remove one committed snapshot unless something needs it; returns why it stayed, or
    None once removed.

    The tombstone is written before the holds are listed (the readers' handshake).
    ``blocker``, if given, is called after that and returns why it must stay (or None): the
    caller's view of the model references may be older than a version registered meanwhile by
    a fit that held the snapshot until then.
    """
    tombstone = f"{folder_key}/{REMOVING}/{snapshot}"
    release_if_dead_here(backend, tombstone)  # a killed gc's: its removal is ours to finish
    try:
        lease = acquire(backend, tombstone, "gc", LEASE_TTL_S, margin_s=LEASE_MARGIN_S)
    except LeaseHeldError:
        return "another gc is removing it"
    try:
        reason = _must_stay(backend, folder_key, snapshot, blocker)
    except BaseException:
        lease.release()
        raise
    if reason is not None:
        lease.release()  # a released tombstone is no tombstone (deleting could race a gc)
        return reason
    key = f"{folder_key}/{snapshot}"
    backend.delete(f"{key}/zarr.json")
    crash_point("gc-renamed")
    remove_entry(backend, key)
    for meta in list(backend.list(f"{folder_key}/{HOLDS}/{snapshot}/")):
        backend.delete(meta.key)  # dead holds' records: nothing can hold it any more
    lease.release()
    backend.delete(tombstone)
    return None


def _must_stay(backend: Backend, folder_key: str, snapshot: str, blocker) -> str | None:
    now = server_now(backend)
    holds = [m.key for m in backend.list(f"{folder_key}/{HOLDS}/{snapshot}/")]
    if live_leases(backend, holds, now):
        return "a reader holds it"
    if live_leases(backend, [f"{folder_key}/{WRITING}/{snapshot}"], now):
        return "a writer is committing it"
    try:
        pointer = read_pointer(backend, folder_key)
    except StoreCorruptError as exc:
        return exc.problem
    if pointer is not None and pointer.snapshot == snapshot:
        return "current snapshot"
    return None if blocker is None else blocker()


def abandoned_snapshots(backend: Backend, folder_key: str, uncommitted, now: float) -> list:
    """Those of a listing's ``uncommitted`` snapshots that no live writer or gc works on, and
    still uncommitted: the leases are read themselves, since a listing on object storage can
    miss a lease taken before the objects it shows (docs/operations.md, "Writers' leases")."""
    dead = []
    for snapshot in uncommitted:
        leases = [f"{folder_key}/{WRITING}/{snapshot}", f"{folder_key}/{REMOVING}/{snapshot}"]
        if live_leases(backend, leases, now):
            continue
        if backend.head(f"{folder_key}/{snapshot}/zarr.json") is None:
            dead.append(snapshot)
    return dead


def sweep_leftovers(backend: Backend, folder_key: str, listing: Listing,
                    older_than_seconds: float, now: float) -> list:
    """Remove what dead writers and readers left under one data set: uncommitted prefixes at
    least ``older_than_seconds`` old that no live writer's lease names, and the records of
    dead leases (holds, writers', tombstones of snapshots that are gone). Returns the
    prefixes removed."""
    removed = []
    old = [s for s in listing.uncommitted if now - listing.prefixes[s] >= older_than_seconds]
    for snapshot in abandoned_snapshots(backend, folder_key, old, now):
        remove_entry(backend, f"{folder_key}/{snapshot}")
        removed.append(location(backend, f"{folder_key}/{snapshot}"))
    for snapshot, keys in [*listing.holds.items(), *listing.writing.items()]:
        for key in keys:
            if not lease_is_live(*read_lease(backend, key), now):
                backend.delete(key)
    gone = set(listing.uncommitted) | (set(listing.removing) - set(listing.prefixes))
    for snapshot in gone:
        for key in listing.removing.get(snapshot, []):
            if not lease_is_live(*read_lease(backend, key), now):
                backend.delete(key)  # ids are never reused: no gc will want it again
    return removed


def cleanup_temporaries(store=None, older_than_seconds: float = 3600.0) -> list:
    """Remove what crashed writers left (data sets' uncommitted snapshots, models' temporaries).

    A data set's uncommitted snapshot prefix goes once no live writer's lease names it and its
    newest object is at least ``older_than_seconds`` old; the records of dead leases go too
    (:func:`~catdask.store.gc.sweep_leftovers`). In a local store, the ``.tmp-*`` temporaries
    of earlier versions go as well, and a model's temporary whose lock is free. Committed
    snapshots and pointers are not touched here: see
    :func:`~catdask.store.check.check_store` (``cleanup=True``) and
    :func:`~catdask.store.gc.gc_store`.

    Parameters
    ----------
    store : path, s3:// URL, StoreRoot or None
        The store (see :func:`~catdask.store.root.open_store`).
    older_than_seconds : float, default 3600
        The grace period: only leftovers at least this old are touched (a second guard besides
        the leases and locks). 0 removes every dead one, which is safe while writers run. A
        local temporary whose modification time lies in the future has no known age and is
        removed when its lock is free.

    Returns
    -------
    list
        What was removed (local paths, or URLs on object storage).
    """
    root = open_store(store)
    backend = root.backend
    removed: list = []
    if root.path is not None:
        removed += remove_local_temporaries(root.path, older_than_seconds)
    now = server_now(backend)
    for name in dataset_names(backend):
        if is_valid_name(name):
            folder_key = f"datasets/{name}"
            removed += sweep_leftovers(backend, folder_key, list_dataset(backend, folder_key),
                                       older_than_seconds, now)
    removed += remove_uncommitted_versions(root, older_than_seconds, now)
    return removed


# --------------------------------------------------------------------------- cleanup


def _verifies(backend: Backend, folder_key: str, snapshot: str | None):
    """The verified attributes of a snapshot, read under a hold (gc keeps it meanwhile); None
    when it does not verify or is gone."""
    hold = None if snapshot is None else hold_snapshot(backend, folder_key, snapshot)
    if hold is None:
        return None
    try:
        return verify_snapshot(backend, f"{folder_key}/{snapshot}")
    except ObjectStoreError:
        raise  # the medium failed: not a reason to point the name at another snapshot
    except (CatdaskError, OSError):
        return None
    finally:
        hold.close()


def _restorable(backend: Backend, folder_key: str, ids: list, current: str | None,
                recorded: str | None):
    """``(snapshot, verified attributes)`` that cleanup points a damaged name at: the newest
    other snapshot that verifies and holds the content the pointer records (``recorded``),
    else the newest that verifies; ``(None, None)`` when none does."""
    others = [s for s in reversed(ids) if s != current]
    same = [s for s in others
            if recorded is not None and _snapshot_sha(backend, f"{folder_key}/{s}") == recorded]
    for snapshot in dict.fromkeys(same + others):
        attrs = _verifies(backend, folder_key, snapshot)
        if attrs:
            return snapshot, attrs
    return None, None


def repair_dataset(root: StoreRoot, folder_key: str, refs) -> tuple[list, list]:
    """``check --cleanup`` of one data set: upgrade the old in-place layout, restore a valid
    current snapshot if needed (:func:`_restorable`), then remove redundant snapshots (none
    after restoring from an unreadable pointer: which was current is then a guess); returns
    ``(what was restored, what was removed)``."""
    backend, name = root.backend, folder_key.rpartition("/")[2]
    restored: list = []
    removed: list = []
    upgraded = upgrade_old_layout(backend, folder_key)
    if upgraded is not None:
        restored.append(f"{name}: old in-place layout -> {upgraded}")
    pointer, version = read_pointer_versioned(backend, folder_key)
    ids = list_dataset(backend, folder_key).committed
    unreadable = isinstance(pointer, StoreCorruptError)
    current = None if unreadable or pointer is None else pointer.snapshot
    if _verifies(backend, folder_key, current) is None:
        recorded = None if current is None else pointer.content_sha256
        good, attrs = _restorable(backend, folder_key, ids, current, recorded)
        if good is None:
            return restored, removed  # nothing verified to restore: all stays for a human
        try:
            write_pointer(backend, folder_key, name, good, attrs["content_sha256"], pointer,
                          version)
        except PreconditionFailed:
            return restored, removed  # a writer moved the pointer meanwhile: sound again
        if unreadable:
            # Which content was current is unknown (content addressing may have moved the
            # pointer back to an older snapshot): the others stay, for gc or a human to judge.
            restored.append(f"{name}: unreadable pointer -> {good} (the newest that verifies; "
                            "the other snapshots stay)")
            return restored, removed
        restored.append(f"{name}: {current or 'no snapshot'} -> {good}")
        current = good
    for snapshot in ids:
        key = f"{folder_key}/{snapshot}"
        if snapshot == current or _verifies(backend, folder_key, snapshot) is None:
            continue  # damaged snapshots stay (reported) unless gc is asked to remove them
        if removal_blocker(backend, folder_key, snapshot, refs, current, set(), ids) is None:
            # References read again after the tombstone: a version may have been registered
            # since ``refs`` was read (see gc.remove_snapshot).
            late = LateBlocker(root, folder_key, snapshot, current, set())
            if remove_snapshot(backend, folder_key, snapshot, late) is None:
                removed.append(location(backend, key))
    return restored, removed


# --------------------------------------------------------------------------- gc


def gc_store(store=None, *, dry_run: bool = False, keep_last: int = 0,
             older_than_seconds: float = GRACE_S) -> GcResult:
    """Remove data-set snapshots that no model version and no running reader refers to.

    Parameters
    ----------
    store : path, s3:// URL, StoreRoot or None
        The store (see :func:`~catdask.store.root.open_store`).
    dry_run : bool, default False
        Only report what would be removed.
    keep_last : int, default 0
        Also keep this many committed snapshots besides the current one, the highest-numbered
        (retention).
    older_than_seconds : float, default 3600
        The grace period: what dead writers left (uncommitted snapshots) is removed only once
        this old.

    Returns
    -------
    GcResult

    Raises
    ------
    StoreWriteError
        The store cannot be written (read-only mount, another user's files); nothing was
        removed.
    """
    root = open_store(store)
    with changing_store(root, "gc", writes=not dry_run):
        return _gc(root, dry_run, keep_last, older_than_seconds)


def _gc(root: StoreRoot, dry_run: bool, keep_last: int, older_than: float) -> GcResult:
    result = GcResult()
    backend = root.backend
    refs = model_references(root)
    for name in dataset_names(backend):
        if not is_valid_name(name):
            continue
        folder_key = f"datasets/{name}"
        listing = list_dataset(backend, folder_key)
        if not dry_run:
            sweep_leftovers(backend, folder_key, listing, older_than, server_now(backend))
        ids = listing.committed

        def where(s):
            return location(backend, f"{folder_key}/{s}")

        try:
            pointer = read_pointer(backend, folder_key)
        except StoreCorruptError as exc:
            result.kept += [(where(s), exc.problem) for s in ids]
            continue
        if pointer is None:  # never committed: check_store/cleanup decides, not gc
            result.kept += [(where(s), "no current snapshot") for s in ids]
            continue
        # Lost, or its metadata unreadable: an older one may be the only good copy.
        lost = ("missing" if pointer.snapshot not in ids else "damaged"
                if _snapshot_sha(backend, f"{folder_key}/{pointer.snapshot}") is None else None)
        if lost is not None:
            result.kept += [(where(s), f"the pointer names {pointer.snapshot}, which is "
                             f"{lost}; `check --cleanup` restores the newest that verifies")
                            for s in ids]
            continue
        # Content addressing moves the pointer back to an older snapshot that holds the
        # content again, so "older" means every committed one but the current.
        older = [s for s in ids if s != pointer.snapshot
                 and (snapshot_number(s) or 0) <= pointer.newest_committed]
        keep = set(older[-keep_last:]) if keep_last > 0 else set()
        for snapshot in ids:
            reason = removal_blocker(backend, folder_key, snapshot, refs, pointer.snapshot,
                                     keep, ids)
            if reason is not None:
                result.kept.append((where(snapshot), reason))
            elif dry_run:
                result.would_remove.append(where(snapshot))
            else:
                late = LateBlocker(root, folder_key, snapshot, pointer.snapshot, keep)
                why = remove_snapshot(backend, folder_key, snapshot, late)
                if why is None:
                    result.removed.append(where(snapshot))
                else:
                    result.kept.append((where(snapshot), why))
    return result


class LateBlocker:
    """:func:`removal_blocker` with the model references read again, after the tombstone is
    written: a fit holds its snapshot until its version is registered, so a version
    registered after ``gc_store`` first read the references is seen here."""

    def __init__(self, root, folder_key, snapshot, current, keep):
        self.args = root, folder_key, snapshot, current, keep

    def __call__(self):
        root, folder_key, snapshot, current, keep = self.args
        committed = list_dataset(root.backend, folder_key).committed + [snapshot]
        reason = removal_blocker(root.backend, folder_key, snapshot, model_references(root),
                                 current, keep, committed)
        return None if reason is None else f"{reason} (registered meanwhile)"
