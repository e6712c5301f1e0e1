"""Writing a data set: a new immutable snapshot, then one atomic pointer update.

The steps (each a :func:`~catdask.store._atomic.crash_point` for the fault tests):

0. content addressing: when the current snapshot already holds this content, nothing is
   written; when another snapshot of the name holds it (and verifies), the pointer moves to
   that snapshot (under the per-name lock) and nothing is written either;
1. build the snapshot in a ``.tmp-s-`` folder of the data set, created already locked (a
   cleanup can tell it from a crashed writer's, see ``_atomic.locked_temp_dir``), and fsync it;
2. under the per-name lock: look at the current snapshot again (identical content: done;
   different content without ``replace``: refuse), rename the folder to the next ``s<N>``;
3. replace the pointer (a temporary file, fsync, ``os.replace``); release the lock.

A crash before 3 leaves the previous pointer, so readers keep the previous content; a crash
after 2 leaves an uncommitted snapshot that ``check`` reports and cleanup/gc remove. The old
snapshot stays until gc finds no model and no reader referring to it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import numpy as np
import zarr

from ..errors import DatasetExistsError, StoreCorruptError, StoreWriteError
from . import _zarr_io
from ._atomic import (
    crash_point,
    fsync_dir,
    fsync_tree,
    locked_temp_dir,
    remove_folder_if_only,
    remove_tree,
)
from ..versions import installed_version
from ._json import json_sha256, to_json_safe, utc_now
from .content import (
    FORMAT,
    check_data,
    content_sha256,
    feature_names_in,
    label_names_for,
    source_sha256,
)
from .layout import NAME_LOCK, space_hint
from .pointer import resolve_folder
from .snapshots import (
    current_snapshot_id,
    hold_snapshot,
    name_dir,
    name_lock,
    read_pointer,
    rename_to_next_snapshot,
    snapshot_attrs,
    snapshot_ids,
    verify_snapshot,
    write_pointer,
)
from .upgrade import is_old_layout, upgrade_old_layout

__all__ = ["DatasetInfo", "write_dataset", "info_from_attrs"]


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """Summary of a stored data set (of its current snapshot).

    Attributes
    ----------
    path : Path
        The snapshot's folder.
    written : bool
        True when this call wrote the data (``write_dataset`` only); False when identical
        content was already stored (current, or in another snapshot of the name that the
        pointer now names again), and in listings.
    replaced : bool
        True when ``write_dataset`` replaced different content stored under the same name
        (by a new snapshot, or by pointing at a stored one that holds the new content).
    problem : str or None
        Set by :func:`~catdask.store.datasets.list_datasets` for an entry whose metadata cannot
        be read.
    snapshot : str or None
        Id of the snapshot (``s<N>``).
    """

    name: str
    path: Path
    n_samples: int | None
    n_features: int | None
    n_classes: int | None
    content_sha256: str | None
    created: str | None = None
    written: bool = False
    replaced: bool = False
    problem: str | None = None
    snapshot: str | None = None


def info_from_attrs(name, path: Path, attrs, *, problem=None, snapshot=None, **flags):
    """A :class:`DatasetInfo` from a snapshot's attributes (missing values become None)."""
    attrs = attrs or {}

    def get(key, typ):
        v = attrs.get(key)
        return v if isinstance(v, typ) and not isinstance(v, bool) else None

    return DatasetInfo(
        name,
        path,
        get("n_samples", int),
        get("n_features", int),
        get("n_classes", int),
        get("content_sha256", str),
        get("created", str),
        problem=problem,
        snapshot=snapshot,
        **flags,
    )


def write_dataset(
    store, name: str, X, y, label_names=None, attrs=None, chunk_rows=None, *, replace=False
) -> DatasetInfo:
    """Store a labelled table as a new snapshot; a no-op if the same content is current.

    Parameters
    ----------
    store : path or None
        Store root (see :func:`~catdask.store.resolve_store`).
    name : str
        Data-set name (validated by :func:`catdask.names.validate_name`).
    X : array-like, shape (n_samples, n_features)
        Finite numbers; stored as float64.
    y : array-like, shape (n_samples,)
        Labels, all int or all str. Stored as codes 0..K-1 plus the sorted classes.
    label_names : list or dict, optional
        Display names per sorted class, or a mapping label -> name. Default: ``str(label)``.
    attrs : dict, optional
        Provenance (JSON-safe), e.g. the ``provenance`` returned by the catalog parsers; a
        ``files`` list with ``name``/``sha256`` entries is also recorded as ``source_sha256``.
    chunk_rows : int, optional
        Rows per chunk of X (default: about 32 MiB per chunk).
    replace : bool, default False
        Allow replacing different content stored under ``name``. The previous snapshot is
        kept (models trained on it refer to it) until gc removes it.

    Returns
    -------
    DatasetInfo
        ``written`` is False when identical content (X, y, classes, label names and the
        feature names of ``attrs``) was
        already current, or was stored in another snapshot of ``name`` (content addressing:
        the pointer then moves to that snapshot, ``replaced`` is True and nothing is
        written); ``replaced`` is True when different content was replaced.

    Raises
    ------
    InvalidNameError, ValueError
        Bad name or data (non-finite X, length mismatch, ...).
    DatasetExistsError
        ``name`` holds different content and ``replace`` is False (names both checksums).
    StoreWriteError
        The write failed (disk full, permissions); the current snapshot is unchanged.
    """
    root, folder = name_dir(store, name)
    X, codes, classes, kind = check_data(X, y)
    names = label_names_for(label_names, classes)
    content = content_sha256(X, codes, classes)
    provenance = to_json_safe(dict(attrs or {}), "attrs")
    # What a snapshot is named by besides its values: a re-ingest that changes only a header
    # is new content (a model's feature names come from it).
    naming = {"label_names": names, "feature_names": feature_names_in(provenance)}

    if is_old_layout(folder):
        with name_lock(folder):
            upgrade_old_layout(folder)
    current = _current_state(folder, content, naming, name, replace)
    if current is not None:
        return current
    try:
        moved = _point_at_stored_copy(folder, content, naming, name, replace)
    except OSError as exc:
        raise _write_error(name, folder, exc) from exc
    if moved is not None:
        return moved
    _refuse_over_damaged_pointer(folder, name, replace)
    if chunk_rows is None:
        chunk_rows = _zarr_io.row_chunks(X.shape, 8)[0]
    chunk_rows = int(chunk_rows)
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}.")
    meta = {
        "catdask_dataset_format": FORMAT,
        "name": name,
        "n_samples": int(X.shape[0]),
        "n_features": int(X.shape[1]),
        "n_classes": len(classes),
        "classes": classes,
        "classes_kind": kind,
        "label_names": names,
        "class_counts": np.bincount(codes, minlength=len(classes)).tolist(),
        "content_sha256": content,
        "source_sha256": source_sha256(provenance),
        "provenance": provenance,
        "chunk_rows": chunk_rows,
        "created": utc_now(),
        "catdask_version": installed_version(),
    }
    meta["attrs_sha256"] = json_sha256(meta)

    created_folder = not folder.exists()
    tmp = None
    try:
        # Created already locked: cleanup and check never see it unlocked while we run.
        with locked_temp_dir(folder, "s", folder / NAME_LOCK) as tmp:
            group = zarr.open_group(str(tmp), mode="a")  # "w" would recreate the locked folder
            rows = min(chunk_rows, X.shape[0])
            # NaN / -1 fill values: a chunk that goes missing reads as an impossible value.
            # y is chunked like X's rows, so Dask blocks of X and y line up.
            _zarr_io.write_array(group, "X", X, chunks=(rows, X.shape[1]), fill_value=np.nan)
            _zarr_io.write_array(group, "y", codes, chunks=(rows,), fill_value=-1)
            group.attrs.put(meta)
            fsync_tree(tmp)
            crash_point("snapshot-written")
            with name_lock(folder):
                current = _current_state(folder, content, naming, name, replace)
                if current is not None:  # a concurrent writer committed meanwhile
                    remove_tree(tmp)
                    return current
                # A concurrent writer may have stored this content meanwhile (then replaced
                # by another): point at that copy rather than storing it twice.
                moved = _move_pointer_to_copy(folder, content, naming, name, replace)
                if moved is not None:
                    remove_tree(tmp)
                    return moved
                _refuse_over_damaged_pointer(folder, name, replace)
                snapshot, replaced = _commit(tmp, folder, name, content)
    except OSError as exc:
        _discard(tmp, folder if created_folder else None)
        raise _write_error(name, folder, exc) from exc
    except BaseException:
        _discard(tmp, folder if created_folder else None)
        raise
    return info_from_attrs(
        name, folder / snapshot, meta, snapshot=snapshot, written=True, replaced=replaced
    )


def _write_error(name: str, folder: Path, exc: OSError) -> StoreWriteError:
    return StoreWriteError(
        exc.errno,
        f"Could not write data set {name!r} to {folder}: {exc}. The temporary copy was "
        f"removed; the store is unchanged.{space_hint(exc.errno)}",
        str(folder),
    )


def _discard(tmp: Path | None, new_folder: Path | None) -> None:
    """Remove a failed write's temporary (and the data-set folder if this write made it and it
    holds nothing else but its name lock)."""
    if tmp is not None and tmp.exists():
        remove_tree(tmp)
    if new_folder is not None:
        with contextlib.suppress(OSError):
            remove_folder_if_only(new_folder, NAME_LOCK)


def _commit(tmp: Path, folder: Path, name: str, content: str) -> tuple[str, bool]:
    """Rename ``tmp`` to the next ``s<N>`` and point the name at it (under the name lock)."""
    try:
        replacing = read_pointer(folder) is not None
    except StoreCorruptError:
        replacing = True  # a damaged pointer is replaced by a valid one
    snapshot = rename_to_next_snapshot(tmp, folder)
    crash_point("snapshot-renamed")
    fsync_dir(folder)
    write_pointer(folder, name, snapshot, content)
    return snapshot, replacing


def _pointer_damage(folder: Path) -> str | None:
    """What is wrong with the pointer of ``folder`` (unreadable, or naming a missing
    snapshot); None when it is sound or absent."""
    try:
        pointer = read_pointer(folder)
    except StoreCorruptError as exc:
        return exc.problem.rstrip(".")
    if pointer is None or (folder / pointer.snapshot / "zarr.json").is_file():
        return None
    return f"it names snapshot {pointer.snapshot!r}, which is missing"


def _refuse_over_damaged_pointer(folder: Path, name: str, replace: bool) -> None:
    """Refuse to commit new content under a damaged pointer unless told to ``replace``.

    A pointer that cannot be read (or names a missing snapshot) hides which content is current:
    committing other content over it would replace that content without ``--replace``, and
    the next gc would then remove its only copy. Only the newest snapshot that verifies (what
    ``check --cleanup`` restores) may be named again without ``replace``, when it holds this
    content (:func:`_held_stored_copy`).

    Raises
    ------
    StoreCorruptError
        One line naming the damage and ``catdask check --cleanup``, which restores the newest
        committed snapshot that verifies.
    """
    damage = None if replace else _pointer_damage(folder)
    if damage is None:
        return
    raise StoreCorruptError(
        folder,
        f"the pointer of data set {name!r} is damaged ({damage}); nothing was "
        "written, so no stored content is replaced: run `catdask check --cleanup` to restore "
        "its newest committed snapshot that verifies, then ingest again (with --replace to "
        "replace that content)",
    )


def _current_state(folder: Path, content: str, naming: dict, name: str, replace: bool):
    """What to do given the current snapshot: a :class:`DatasetInfo` when it already holds
    this content intact (nothing to write), None to go on writing.

    Raises
    ------
    DatasetExistsError
        The current snapshot holds different content and ``replace`` is False.
    """
    try:
        found = resolve_folder(folder)
    except StoreCorruptError:
        return None  # a damaged pointer or a missing current snapshot: a new one repairs it
    if found is None:
        return None
    current, path, hold = found
    try:
        try:
            attrs = snapshot_attrs(path)
        except StoreCorruptError:
            return None  # unreadable: nothing readable is lost by writing a new snapshot
        stored = attrs["content_sha256"]
        if stored == content and _named_as(attrs, naming):
            try:
                verify_snapshot(path)
            except StoreCorruptError:
                return None  # damaged: re-ingesting the same content repairs it
            return info_from_attrs(name, path, attrs, snapshot=current)
        if stored != content and not replace:
            raise DatasetExistsError(name, stored, content)
        return None
    finally:
        hold.close()


def _named_as(attrs: dict, naming: dict) -> bool:
    """Whether a snapshot's attributes carry these label names and feature names."""
    return (attrs.get("label_names") == naming["label_names"]
            and feature_names_in(attrs.get("provenance")) == naming["feature_names"])


@contextlib.contextmanager
def _held_stored_copy(folder: Path, content: str, naming: dict, newest_only: bool = False):
    """The id of a snapshot of ``folder`` other than the current one that holds this content
    with these label and feature names and verifies, held (so gc keeps it) while the block
    runs; None if there is none. The newest such snapshot is preferred. ``newest_only``
    (a damaged pointer, no ``replace``): only the newest snapshot that verifies qualifies."""
    exclude = current_snapshot_id(folder)
    for snapshot in reversed(snapshot_ids(folder)):
        if snapshot == exclude:
            continue
        path = folder / snapshot
        try:
            attrs = snapshot_attrs(path)
        except StoreCorruptError:
            continue
        matches = attrs["content_sha256"] == content and _named_as(attrs, naming)
        if not (matches or newest_only):
            continue
        hold = hold_snapshot(path)
        if hold is None:
            continue  # removed by gc meanwhile
        try:
            verify_snapshot(path)
        except StoreCorruptError:
            hold.close()
            continue  # damaged: never point a name at it
        if not matches:  # the newest good snapshot holds other content: it stays current
            hold.close()
            break
        try:
            yield snapshot
        finally:
            hold.close()
        return
    yield None


def _point_at_stored_copy(folder: Path, content: str, naming: dict, name: str, replace: bool):
    """Content addressing: point the name at a stored snapshot of the same content, if any
    (verified outside the name lock, then committed under it); a :class:`DatasetInfo` with
    ``written=False``, or None when no such snapshot exists."""
    if not folder.is_dir():
        return None
    newest_only = not replace and _pointer_damage(folder) is not None
    with _held_stored_copy(folder, content, naming, newest_only) as snapshot:
        if snapshot is None:
            return None
        with name_lock(folder):
            current = _current_state(folder, content, naming, name, replace)
            if current is not None:  # a concurrent writer committed this content meanwhile
                return current
            if not (replace or newest_only) and _pointer_damage(folder) is not None:
                return None  # damaged meanwhile: decided again under the lock
            return _commit_copy(folder, snapshot, content, name)


def _move_pointer_to_copy(folder: Path, content: str, naming: dict, name: str,
                          replace: bool):
    """Under the name lock: point at a stored copy of this content if one exists."""
    newest_only = not replace and _pointer_damage(folder) is not None
    with _held_stored_copy(folder, content, naming, newest_only) as snapshot:
        return None if snapshot is None else _commit_copy(folder, snapshot, content, name)


def _commit_copy(folder: Path, snapshot: str, content: str, name: str) -> DatasetInfo:
    """Point the name at stored ``snapshot`` (held by the caller, under the name lock)."""
    path = folder / snapshot
    attrs = snapshot_attrs(path)
    write_pointer(folder, name, snapshot, content)
    return info_from_attrs(name, path, attrs, snapshot=snapshot, written=False, replaced=True)
