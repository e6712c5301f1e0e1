"""``check_store``: every problem a store has, and a cleanup that removes only what it verified.

The check verifies each data set's pointer and current snapshot (checksums), every other
snapshot, the temporaries and stray files under ``datasets/`` and ``models/``, loads every model
version with the real loader (arrays, JSON, the estimator rebuilt; never a pickle), and flags
models whose data set now holds other content (stale lineage).

Under load the check tells the truth: it lists each data-set folder (pointer, snapshots,
temporaries) and each model folder's temporaries under the folder's lock, held exclusively,
which a writer holds (shared) while it creates and locks its temporary, and exclusively while
it commits; gc holds it while it removes. So a temporary found unlocked is a crashed writer's,
and a snapshot numbered above the pointer's ``newest_committed`` is a crashed commit's. It then
verifies each snapshot under the readers' shared lock, taken while the listing was made, so
gc cannot remove a snapshot while it is being verified.

``cleanup=True`` first removes temporaries of crashed writers (a running writer's is locked),
points a name whose current snapshot is missing or damaged at the newest snapshot that
verifies, and removes snapshots that are not current, not referred to by a model, not held by a
reader, once the current one verified. It never points a name at an unverified snapshot.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

from ..errors import CatdaskError, StoreCorruptError
from ..names import is_valid_name
from ._atomic import is_temporary, temporary_age, try_lock
from .gc import _LateBlocker, model_references, removal_blocker, remove_snapshot
from .layout import (
    MODEL_COUNTER,
    NAME_LOCK,
    SNAPSHOT_COUNTER,
    changing_store,
    cleanup_temporaries,
    datasets_dir,
    list_entries,
    models_dir,
    resolve_store,
)
from .model_entries import (
    LEGACY_NAMES,
    RUNS,
    WRITING,
    checked_attrs,
    entry_location,
    is_dead_leftover,
    model_listing,
    read_version_node,
    version_key,
)
from .root import StoreRoot, open_store
from .snapshots import (
    current_snapshot_id,
    hold_snapshot,
    name_lock,
    read_pointer,
    snapshot_ids,
    snapshot_number,
    verify_snapshot,
    write_pointer,
)
from .upgrade import upgrade_old_layout

__all__ = ["StoreProblem", "StoreReport", "check_store", "check_models"]

_SNAPSHOT_FILES = {"zarr.json", "X", "y"}


@dataclasses.dataclass(frozen=True)
class StoreProblem:
    """One problem found by :func:`check_store`.

    Attributes
    ----------
    kind : str
        ``temporary`` (left by a crashed writer), ``stray`` (a file or folder the store does
        not write), ``uncommitted`` (a snapshot newer than the current one, or a data set with
        snapshots but no pointer: a write crashed before it committed), ``pointer`` (damaged,
        or naming a missing snapshot), ``corrupt-snapshot`` (fails its checksums),
        ``model`` (a version that does not load), ``unreferenced`` (an old snapshot gc would
        remove; informational), ``stale`` (a model trained on content its data set no longer
        holds; informational).
    path : Path
    message : str
    severity : str
        ``"error"`` (the store is not whole) or ``"info"``.
    """

    kind: str
    path: Path
    message: str
    severity: str = "error"


@dataclasses.dataclass
class StoreReport:
    """What :func:`check_store` found and did.

    ``checked`` has one row per data set and model version (``kind``, ``name``, ``status``:
    ``"ok"`` or the problem); ``removed`` and ``restored`` list what cleanup changed.
    """

    root: Path
    problems: list = dataclasses.field(default_factory=list)
    checked: list = dataclasses.field(default_factory=list)
    removed: list = dataclasses.field(default_factory=list)
    restored: list = dataclasses.field(default_factory=list)

    @property
    def errors(self) -> list:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def ok(self) -> bool:
        """True when the store is whole (informational findings aside)."""
        return not self.errors


def check_store(store=None, *, cleanup: bool = False, older_than_seconds: float = 0.0):
    """Check a store; with ``cleanup``, first repair what can be repaired safely.

    Parameters
    ----------
    store : path, optional
        Store root.
    cleanup : bool, default False
        Remove temporaries of crashed writers and redundant snapshots, and restore the last
        good snapshot of a name whose current one is missing or damaged (see the module
        docstring); the report then describes the store after cleanup.
    older_than_seconds : float, default 0
        With ``cleanup``: only temporaries at least this old (running writers are protected
        by their locks anyway).

    Returns
    -------
    StoreReport

    Raises
    ------
    FileNotFoundError
        The store does not exist.
    StoreWriteError
        With ``cleanup``: the store cannot be written (read-only mount, another user's
        files); a clear one-line message, and nothing was removed (``check`` without cleanup
        only reads, and works on a read-only store).
    """
    root = resolve_store(store)
    if not root.is_dir():
        raise FileNotFoundError(f"store {root} does not exist")
    report = StoreReport(root)
    if cleanup:
        with changing_store(root, "check --cleanup"):
            _cleanup(root, older_than_seconds, report)
    refs = model_references(root)
    _check_datasets(root, refs, report)
    _check_models(root, report)
    return report


# --------------------------------------------------------------------------- cleanup


def _cleanup(root: Path, older_than_seconds: float, report: StoreReport) -> None:
    report.removed += cleanup_temporaries(root, older_than_seconds)
    refs = model_references(root)
    for old_lock in sorted(datasets_dir(root).glob(".lock-*")):
        # Empty swap locks of the older in-place layout: nothing uses them any more.
        if old_lock.is_file() and old_lock.stat().st_size == 0:
            old_lock.unlink()
            report.removed.append(old_lock)
    for name in list_entries(datasets_dir(root)):
        if is_valid_name(name):
            _repair(datasets_dir(root) / name, refs, report)


def _verifies(path: Path) -> bool:
    try:
        verify_snapshot(path)
    except (CatdaskError, OSError):
        return False
    return True


def _repair(folder: Path, refs, report: StoreReport) -> None:
    """Restore a valid current snapshot if needed, then remove redundant snapshots."""
    with name_lock(folder):
        upgraded = upgrade_old_layout(folder)
        if upgraded is not None:
            report.restored.append(f"{folder.name}: old in-place layout -> {upgraded}")
        ids = snapshot_ids(folder)
        current = current_snapshot_id(folder)
        if current is None or not _verifies(folder / current):
            good = next((s for s in reversed(ids) if s != current and _verifies(folder / s)), None)
            if good is None:
                return  # nothing verified to restore: keep everything for a human to look at
            sha = verify_snapshot(folder / good)["content_sha256"]
            write_pointer(folder, folder.name, good, sha)
            report.restored.append(f"{folder.name}: {current or 'no snapshot'} -> {good}")
            current = good
        for snapshot in ids:
            if snapshot == current or not _verifies(folder / snapshot):
                continue  # damaged snapshots stay (reported) unless gc is asked to remove them
            if removal_blocker(folder, snapshot, refs, current, set()) is None:
                # References read again under the snapshot's lock: a version may have been
                # registered since ``refs`` was read (see gc.remove_snapshot).
                late = _LateBlocker(folder.parent.parent, folder, snapshot, current, set())
                if remove_snapshot(folder, snapshot, late):
                    report.removed.append(folder / snapshot)


# --------------------------------------------------------------------------- data sets


def _temporary_problem(child: Path):
    """The problem of an unlocked temporary (call under its folder's lock), None if locked."""
    with try_lock(child) as free:
        if not free:
            return None  # a running writer (or gc) holds it: in use, not a leftover
    try:
        age = temporary_age(child)
    except FileNotFoundError:
        return None
    if age is None:
        return StoreProblem("temporary", child, "left by a crashed writer; its modification "
                            "time lies in the future (a clock set back, or a copied store), so "
                            "its age is unknown: `check --cleanup` removes it (no process "
                            "holds it), whatever --older-than says")
    return StoreProblem("temporary", child, "left by a crashed writer; `check --cleanup` "
                        "removes it")


def _strays(folder: Path, allowed, report: StoreReport, what: str) -> None:
    """Report what ``folder`` holds that the store does not write. ``allowed(child)`` says
    which entries are the store's own; temporaries are checked by their lock."""
    for child in sorted(folder.iterdir()):
        if allowed(child):
            continue
        if is_temporary(child):
            found = _temporary_problem(child)
            if found is not None:
                report.problems.append(found)
            continue
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile by its owner
            kind = "folder" if child.is_dir() else "file"
            if child.exists() or child.is_symlink():
                report.problems.append(StoreProblem(
                    "stray", child, f"a {kind} the store does not write, in {what}; move or "
                    "delete it by hand"))


def _named_entries(parent: Path, report: StoreReport, what: str) -> list:
    """The valid names under ``parent`` (none if it does not exist); anything else is stray."""
    if not parent.is_dir():
        return []
    names = [n for n in list_entries(parent) if is_valid_name(n)]
    # A folder created after the listing is the store's own too (a first ingest or model).
    _strays(parent, lambda c: is_valid_name(c.name) and c.is_dir(), report, what)
    return names


def _check_datasets(root: Path, refs, report: StoreReport) -> None:
    parent = datasets_dir(root)
    for name in _named_entries(parent, report, "datasets/"):
        status = _check_dataset(parent / name, refs, report)
        if status is not None:
            report.checked.append({"kind": "data set", "name": name, "status": status})


def _list_dataset(folder: Path, report: StoreReport):
    """``(pointer or exception, snapshot ids, holds)``, read under the name lock: a consistent
    view (no commit half done, no temporary between creation and lock), with a reader's hold
    on each snapshot so gc keeps it while it is verified."""
    with name_lock(folder):
        ids = snapshot_ids(folder)
        _strays(folder, lambda c: c.name in {"zarr.json", NAME_LOCK, SNAPSHOT_COUNTER}
                or (snapshot_number(c.name) is not None and c.is_dir()),
                report, f"data set {folder.name!r}")
        try:
            pointer = read_pointer(folder)
        except StoreCorruptError as exc:
            pointer = exc
        holds = {s: hold_snapshot(folder / s) for s in ids}
    return pointer, ids, holds


def _check_dataset(folder: Path, refs, report: StoreReport) -> str | None:
    """Problems of one data-set folder; returns the status row (None: not a data set yet)."""
    if not folder.is_dir():
        return None  # a failed first ingest removed its folder since the listing
    pointer, ids, holds = _list_dataset(folder, report)
    try:
        return _check_listed(folder, pointer, ids, refs, report)
    finally:
        for hold in holds.values():
            if hold is not None:
                hold.close()


def _check_listed(folder: Path, pointer, ids, refs, report: StoreReport) -> str | None:
    for snapshot in ids:
        if (folder / snapshot).is_dir():
            _strays(folder / snapshot, lambda c: c.name in _SNAPSHOT_FILES, report,
                    f"snapshot {folder.name}/{snapshot}")

    def problem(kind, path, message, severity="error"):
        report.problems.append(StoreProblem(kind, path, message, severity))
        return message

    status = None
    if isinstance(pointer, StoreCorruptError):
        status = problem("pointer", folder / "zarr.json", pointer.problem)
        pointer = None
    current = pointer.snapshot if pointer else None
    newest = pointer.newest_committed if pointer else 0
    if pointer is None and status is None:
        if not ids:
            problem("empty", folder, "a data-set folder without snapshots (a first ingest "
                    "failed or is running)", "info")
            return None
        status = problem("uncommitted", folder, f"snapshots {', '.join(ids)} but no pointer: "
                         "the first ingest crashed before committing; `check --cleanup` "
                         "commits the newest one that verifies")
    elif pointer is not None and current not in ids:
        status = problem("pointer", folder / "zarr.json", f"points at snapshot {current!r}, "
                         "which is missing; `check --cleanup` restores the last good snapshot")
    for snapshot in ids:
        path = folder / snapshot
        try:
            attrs = verify_snapshot(path)
        except (CatdaskError, OSError) as exc:
            msg = problem("corrupt-snapshot", path, getattr(exc, "problem", str(exc)))
            if snapshot == current:
                status = msg
            continue
        if snapshot == current:
            if attrs["content_sha256"] != pointer.content_sha256:
                status = problem("pointer", folder / "zarr.json", "the pointer's checksum "
                                 f"{pointer.content_sha256} differs from snapshot {snapshot}'s "
                                 f"{attrs['content_sha256']}")
        elif current is not None and snapshot_number(snapshot) > newest:
            problem("uncommitted", path, f"never committed (the newest commit is s{newest}): "
                    "a write crashed before it committed; `check --cleanup` or `gc` removes it")
        elif removal_blocker(folder, snapshot, refs, current, set()) is None:
            problem("unreferenced", path, "an old snapshot no model of this data set refers "
                    "to; `gc` removes it", "info")
    return status or "ok"


# --------------------------------------------------------------------------- models


def check_models(store=None) -> StoreReport:
    """Check's model part alone, on any store :func:`~catdask.store.root.open_store` opens
    (a path, ``s3://bucket/prefix``, a StoreRoot): every version loads, no stray object, no
    uncommitted version of a dead registration."""
    root = open_store(store)
    report = StoreReport(root.path if root.path is not None else root.url)
    _check_models(root, report)
    return report


def _check_models(store, report: StoreReport) -> None:
    """Load every committed version with the real loader; report what the models' prefixes
    hold besides versions and their bookkeeping, and uncommitted versions of dead writers."""
    from .registry_read import load_estimator

    root = open_store(store)
    listing = model_listing(root)

    def problem(kind, key, message):
        report.problems.append(StoreProblem(kind, entry_location(root, key), message))

    for key in listing.other_top:
        problem("stray", key, "an object the store does not write, in models/; move or "
                "delete it by hand")
    for name in sorted(set(listing.versions) | set(listing.other)):
        if not is_valid_name(name):
            problem("stray", f"models/{name}", "a folder the store does not write, in "
                    "models/; move or delete it by hand")
            continue
        for rest in listing.other.get(name, []):
            if rest not in (MODEL_COUNTER, *LEGACY_NAMES) and rest.partition("/")[0] not in (
                    RUNS, WRITING):
                problem("stray", f"models/{name}/{rest}", f"an object the store does not "
                        f"write, in model {name!r}; move or delete it by hand")
        for v in listing.uncommitted(name):
            if is_dead_leftover(root, name, v):
                problem("temporary", version_key(name, v), "an uncommitted version left by a "
                        "crashed registration; `check --cleanup` removes it")
        for v in listing.committed(name):
            path = entry_location(root, version_key(name, v))
            status = "ok"
            try:
                load_estimator(root, name, v)
                meta = checked_attrs(read_version_node(root, name, v), path)["meta"]
            except Exception as exc:  # any failure of the real loader means "does not load"
                status = f"does not load: {exc}"
                report.problems.append(StoreProblem("model", path, status))
            else:
                _check_lineage(root, path, meta, report)
            report.checked.append({"kind": "model", "name": f"{name}:v{v}", "status": status})
    if root.path is not None:  # temporaries of an earlier catdask's registrations
        for folder in sorted(models_dir(root.path).glob("*/")):
            _strays(folder, lambda c: not is_temporary(c), report, f"model {folder.name!r}")


def _check_lineage(root: StoreRoot, path, meta: dict, report: StoreReport) -> None:
    dataset, sha = meta.get("dataset"), meta.get("dataset_sha256")
    if not (isinstance(dataset, str) and isinstance(sha, str) and is_valid_name(dataset)):
        return
    if root.path is None:
        return  # the data sets' pointer on object storage: read by the data-set side's port
    try:
        pointer = read_pointer(datasets_dir(root.path) / dataset)
    except StoreCorruptError:
        return  # reported with the data set
    if pointer is None:
        msg = f"trained on data set {dataset!r}, which is no longer stored"
    elif pointer.content_sha256 != sha:
        msg = (f"stale: trained on content {sha[:12]} of data set {dataset!r}, which now holds "
               f"{pointer.content_sha256[:12]} (snapshot {pointer.snapshot})")
    else:
        return
    report.problems.append(StoreProblem("stale", path, msg, "info"))
