"""``check_store``: every problem a store has, and a cleanup that removes only what it verified.

The check verifies each data set's pointer and current snapshot (checksums), every other
committed snapshot, what crashed writers left and stray objects under ``datasets/`` and
``models/``, loads every model version with the real loader (arrays, JSON, the estimator
rebuilt; never a pickle), and flags models whose data set now holds other content (stale
lineage).

Under load the check tells the truth, with no lock: it holds each snapshot it verifies (a
reader's hold, so gc keeps it meanwhile), and before it calls anything a crashed writer's
leftover it looks again after judging the leases: an uncommitted snapshot is a leftover only
when no live writer's lease and no live gc tombstone names it and it is still uncommitted
after that; a committed snapshot numbered above the pointer's ``newest_committed`` is a
crashed commit's only when no live writer's lease names it and the pointer, read again after
that, still does not cover it. A writer commits before it lets its lease go.

``cleanup=True`` first removes what dead writers left (their leases dead, at least
``older_than_seconds`` old), points a name whose current snapshot is missing or damaged at the
newest snapshot that verifies, and removes snapshots that are not current, not referred to by
a model, not held by a reader, once the current one verified. It never points a name at an
unverified snapshot.
"""

from __future__ import annotations

import contextlib

from ..dataset_pointer import hold_pointed, location, store_now
from ..errors import CatdaskError, StoreCorruptError
from ..names import is_valid_name
from ..object_store import Backend
from ..object_store.errors import ObjectStoreError
from .check_report import StoreProblem, StoreReport, temporary_problem
from .gc import (
    abandoned_snapshots,
    cleanup_temporaries,
    live_leases,
    model_references,
    removal_blocker,
    repair_dataset,
)
from .layout import (
    changing_store,
    local_temporaries,
)
from .model_check import check_models, check_models_into
from .pointer import hold_snapshot, read_pointer
from .root import StoreRoot, open_store
from .snapshots import (
    WRITING,
    Listing,
    dataset_names,
    list_dataset,
    snapshot_number,
    verify_snapshot,
)


def check_store(store=None, *, cleanup: bool = False, older_than_seconds: float = 0.0):
    """Check a store; with ``cleanup``, first repair what can be repaired safely.

    Parameters
    ----------
    store : path, s3:// URL, StoreRoot or None
        The store (see :func:`~catdask.store.root.open_store`).
    cleanup : bool, default False
        Remove what crashed writers left and redundant snapshots, and restore the last
        good snapshot of a name whose current one is missing or damaged (see the module
        docstring); the report then describes the store after cleanup.
    older_than_seconds : float, default 0
        With ``cleanup``: only leftovers at least this old (running writers are protected
        by their leases anyway).

    Returns
    -------
    StoreReport

    Raises
    ------
    FileNotFoundError
        A local store that does not exist.
    StoreWriteError
        With ``cleanup``: the store cannot be written (read-only mount, another user's
        files); a clear one-line message, and nothing was removed (``check`` without cleanup
        only reads, and works on a read-only store).
    """
    root = open_store(store)
    if root.path is not None and not root.path.is_dir():
        raise FileNotFoundError(f"store {root.path} does not exist")
    report = StoreReport(root.path if root.path is not None else root.url)
    if cleanup:
        with changing_store(root, "check --cleanup"):
            _cleanup(root, older_than_seconds, report)
    refs = model_references(root)
    _check_datasets(root, refs, report)
    check_models_into(root, report)
    return report


# --------------------------------------------------------------------------- cleanup


def _cleanup(root: StoreRoot, older_than_seconds: float, report: StoreReport) -> None:
    report.removed += cleanup_temporaries(root, older_than_seconds)
    refs = model_references(root)
    if root.path is not None:
        for old_lock in sorted((root.path / "datasets").glob(".lock-*")):
            # Empty swap locks of the older in-place layout: nothing uses them any more.
            if old_lock.is_file() and old_lock.stat().st_size == 0:
                old_lock.unlink()
                report.removed.append(old_lock)
    for name in dataset_names(root.backend):
        if is_valid_name(name):
            restored, removed = repair_dataset(root, f"datasets/{name}", refs)
            report.restored += restored
            report.removed += removed


# --------------------------------------------------------------------------- data sets


def _check_datasets(root: StoreRoot, refs, report: StoreReport) -> None:
    backend = root.backend
    if root.path is not None:
        for tmp in local_temporaries(root.path):
            found = temporary_problem(tmp)
            if found is not None:
                report.problems.append(found)
    strays = set()
    for meta in backend.list("datasets/"):
        parts = meta.key.split("/")
        if len(parts) == 2 or not is_valid_name(parts[1]):
            strays.add("/".join(parts[:2]))
    for key in sorted(strays):
        report.problems.append(StoreProblem("stray", location(backend, key), "an object the "
                                            "store does not write, in datasets/; move or "
                                            "delete it by hand"))
    for name in dataset_names(backend):
        if not is_valid_name(name):
            continue
        status = _check_dataset(backend, f"datasets/{name}", refs, report)
        if status is not None:
            report.checked.append({"kind": "data set", "name": name, "status": status})


def _report_strays(backend: Backend, folder_key: str, listing: Listing,
                   report: StoreReport) -> None:
    """One finding per stray file or folder (its top name under the data set or snapshot)."""
    tops = set()
    for key in listing.strays:
        parts = key[len(folder_key) + 1:].split("/")
        depth = 2 if snapshot_number(parts[0]) is not None else 1
        tops.add("/".join([folder_key, *parts[:depth]]))
    for key in sorted(tops):
        inside = key[len(folder_key) + 1:].split("/")
        what = (f"snapshot {folder_key.rpartition('/')[2]}/{inside[0]}" if len(inside) > 1
                else f"data set {folder_key.rpartition('/')[2]!r}")
        report.problems.append(StoreProblem("stray", location(backend, key), "an object the "
                                            f"store does not write, in {what}; move or delete "
                                            "it by hand"))


def _dead_uncommitted(backend: Backend, folder_key: str, listing: Listing, now: float):
    """The uncommitted snapshots no live writer or gc works on (:func:`abandoned_snapshots`),
    still holding objects when looked at again."""
    return [s for s in abandoned_snapshots(backend, folder_key, listing.uncommitted, now)
            if next(backend.list(f"{folder_key}/{s}/"), None)]


def _hold_current(backend: Backend, folder_key: str):
    """``(pointer or its error, hold or None)`` (:func:`~catdask.dataset_pointer.hold_pointed`;
    a hold of None with a pointer means it names a snapshot that is missing)."""
    try:
        return hold_pointed(backend, folder_key)
    except StoreCorruptError as exc:
        return exc, None


def _check_dataset(backend: Backend, folder_key: str, refs, report: StoreReport):
    """Problems of one data set; returns the status row (None: not a data set yet)."""
    pointer, current_hold = _hold_current(backend, folder_key)
    listing = list_dataset(backend, folder_key)
    holds = [current_hold] if current_hold is not None else []
    try:
        return _check_listed(backend, folder_key, pointer, listing, holds, refs, report)
    finally:
        for hold in holds:
            hold.close()


def _check_listed(backend: Backend, folder_key: str, pointer, listing: Listing, holds, refs,
                  report: StoreReport) -> str | None:
    _report_strays(backend, folder_key, listing, report)
    now = store_now(backend)

    def problem(kind, key, message, severity="error"):
        report.problems.append(StoreProblem(kind, location(backend, key), message, severity))
        return message

    for snapshot in _dead_uncommitted(backend, folder_key, listing, now):
        problem("temporary", f"{folder_key}/{snapshot}", "an uncommitted snapshot left by a "
                "crashed writer; `check --cleanup` removes it")
    status = None
    if isinstance(pointer, StoreCorruptError):
        status = problem("pointer", f"{folder_key}/zarr.json", pointer.problem)
        pointer = None
    current = pointer.snapshot if pointer else None
    ids = list(listing.committed)
    if current is not None and not holds:
        status = problem("pointer", f"{folder_key}/zarr.json", f"points at snapshot "
                         f"{current!r}, which is missing; `check --cleanup` restores the last "
                         "good snapshot")
    elif current is not None and current not in ids:
        ids.append(current)  # committed after the listing
    if pointer is None and status is None:
        if not ids:
            problem("empty", folder_key, "a data set without snapshots (a first ingest "
                    "failed or is running)", "info")
            return None
        status = problem("uncommitted", folder_key, f"snapshots {', '.join(ids)} but no "
                         "pointer: the first ingest crashed before committing; `check "
                         "--cleanup` commits the newest one that verifies")
    for snapshot in sorted(ids, key=snapshot_number):
        key = f"{folder_key}/{snapshot}"
        if snapshot != current:
            hold = hold_snapshot(backend, folder_key, snapshot)
            if hold is None:
                continue  # removed by gc since the listing
            holds.append(hold)
        elif not holds:
            continue
        try:
            attrs = verify_snapshot(backend, key)
        except ObjectStoreError:
            raise  # the medium failed: say so, not that the snapshot is damaged
        except (CatdaskError, OSError) as exc:
            msg = problem("corrupt-snapshot", key, getattr(exc, "problem", str(exc)))
            if snapshot == current:
                status = msg
            continue
        if snapshot == current:
            if attrs["content_sha256"] != pointer.content_sha256:
                status = problem("pointer", f"{folder_key}/zarr.json", "the pointer's checksum "
                                 f"{pointer.content_sha256} differs from snapshot {snapshot}'s "
                                 f"{attrs['content_sha256']}")
        elif current is not None and snapshot_number(snapshot) > pointer.newest_committed:
            if not _crashed_commit(backend, folder_key, snapshot, listing):
                continue
            problem("uncommitted", key, f"never committed (the newest commit is "
                    f"s{pointer.newest_committed}): a write crashed before it committed; "
                    "`check --cleanup` or `gc` removes it")
        elif removal_blocker(backend, folder_key, snapshot, refs, current, set(), ids) is None:
            problem("unreferenced", key, "an old snapshot no model of this data set refers "
                    "to; `gc` removes it", "info")
    return status or "ok"


def _crashed_commit(backend: Backend, folder_key: str, snapshot: str, listing: Listing) -> bool:
    """Whether a committed snapshot above the pointer's ``newest_committed`` is a dead
    writer's: no live lease of its writer, and the pointer, read again after judging that,
    still does not cover it."""
    key = f"{folder_key}/{WRITING}/{snapshot}"
    if live_leases(backend, [key], store_now(backend)):
        return False
    with contextlib.suppress(StoreCorruptError):
        again = read_pointer(backend, folder_key)
        if again is not None and again.newest_committed >= (snapshot_number(snapshot) or 0):
            return False
    return True
