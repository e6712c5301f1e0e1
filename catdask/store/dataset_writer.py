"""Writing a data set: a new immutable snapshot, then the pointer moved by compare-and-swap.

The steps (each a :func:`~catdask.store._atomic.crash_point` for the fault tests):

0. content addressing: when the current snapshot already holds this content, nothing is
   written; when another snapshot of the name holds it (and verifies), the pointer moves to
   that snapshot (held meanwhile, so gc keeps it) and nothing is written either;
1. claim the next id ``s<N>`` (compare-and-swap on the counter) and the writer's lease on it,
   write the arrays in place (``snapshot-started``, ``snapshot-written``);
2. look at the current snapshot again (identical content: done; different content without
   ``replace``: refuse), then commit: the snapshot's ``zarr.json``, written last and
   create-only (``snapshot-renamed``);
3. move the pointer by compare-and-swap, deciding again if another writer moved it meanwhile
   (``pointer-written``, ``pointer-replaced``); release the lease.

A crash before 2 leaves an uncommitted prefix nothing reads, which cleanup removes once no
live lease names it; a crash after 2 leaves a committed snapshot the pointer never named,
which ``check`` reports and cleanup/gc remove. The old snapshot stays until gc finds no model
and no reader referring to it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json

import numpy as np

from ..dataset_pointer import location, read_pointer_versioned
from ..errors import DatasetExistsError, StoreCorruptError, StoreWriteError
from ..object_store import Backend, LocalBackend, ObjectStoreError, PreconditionFailed
from ..object_store.lease import Lease, LeaseHeldError
from . import _zarr_io
from ._atomic import crash_point, fsync_tree
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
from .dataset_info import DatasetInfo, info_from_attrs
from .gc import remove_snapshot
from .layout import SNAPSHOT_COUNTER, space_hint
from .pointer import Pointer, hold_snapshot, resolve_pointer, write_pointer
from .snapshots import (
    list_dataset,
    name_key,
    next_snapshot_id,
    remove_entry,
    snapshot_attrs,
    verify_snapshot,
    writer_lease,
)
from .upgrade import is_old_layout, upgrade_old_layout


def write_dataset(
    store, name: str, X, y, label_names=None, attrs=None, chunk_rows=None, *, replace=False
) -> DatasetInfo:
    """Store a labelled table as a new snapshot; a no-op if the same content is current.

    Parameters
    ----------
    store : path, s3:// URL, StoreRoot or None
        The store (see :func:`~catdask.store.root.open_store`).
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
        Rows per chunk of X (default: about 32 MiB per chunk in a folder, 8 MiB on S3).
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
    root, folder_key = name_key(store, name)
    backend = root.backend
    X, codes, classes, kind = check_data(X, y)
    names = label_names_for(label_names, classes)
    content = content_sha256(X, codes, classes)
    provenance = to_json_safe(dict(attrs or {}), "attrs")
    # What a snapshot is named by besides its values: a re-ingest that changes only a header
    # is new content (a model's feature names come from it).
    want = _Wanted(name, content, {"label_names": names,
                                   "feature_names": feature_names_in(provenance)}, replace)
    if chunk_rows is None:
        chunk_rows = _zarr_io.row_chunks(X.shape, 8, backend.chunk_bytes)[0]
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
    try:
        if is_old_layout(backend, folder_key):
            upgrade_old_layout(backend, folder_key)
        done = _without_writing(backend, folder_key, want)
        if done is not None:
            return done
        _refuse_over_damaged_pointer(backend, folder_key, want)
        with _writing(backend, folder_key) as (snapshot, lease):
            return _write_and_land(backend, folder_key, snapshot, lease, want, X, codes, meta)
    except ObjectStoreError:
        raise  # the seam's errors are one line already
    except OSError as exc:
        raise StoreWriteError(
            exc.errno,
            f"Could not write data set {name!r} to {root.url}: {exc}. The partial copy was "
            f"removed; the store is unchanged.{space_hint(exc.errno)}",
            str(root.url),
        ) from exc


@dataclasses.dataclass(frozen=True)
class _Wanted:
    """What a write asks for: this content, so named, under this name, replacing or not."""

    name: str
    content: str
    naming: dict
    replace: bool


@contextlib.contextmanager
def _writing(backend: Backend, folder_key: str):
    """A new snapshot id and the writer's lease on it, for the block: ``(snapshot, lease)``;
    the lease is released (and its record removed) after. What the block did not commit is
    removed, and a first ingest that failed leaves no data set behind."""
    while True:
        snapshot = next_snapshot_id(backend, folder_key)
        try:
            lease = writer_lease(backend, folder_key, snapshot)
        except LeaseHeldError:
            continue  # the id was given again (a failed first ingest's counter went): next
        break
    try:
        yield snapshot, lease
    except BaseException:
        with contextlib.suppress(Exception):
            _discard(backend, folder_key, snapshot, lease.key)
        raise
    finally:
        lease.release()
        with contextlib.suppress(Exception):
            backend.delete(lease.key)


def _discard(backend: Backend, folder_key: str, snapshot: str, lease_key: str) -> None:
    """Remove a failed write's uncommitted snapshot; when nothing else is stored under the
    name (a first ingest), the id counter too: no id it gave was ever seen."""
    key = f"{folder_key}/{snapshot}"
    if backend.head(f"{key}/zarr.json") is not None:
        return
    remove_entry(backend, key)
    counter = f"{folder_key}/{SNAPSHOT_COUNTER}"
    if {m.key for m in backend.list(folder_key + "/")} <= {counter, lease_key}:
        backend.delete(counter)


def _write_and_land(backend: Backend, folder_key: str, snapshot: str, lease: Lease,
                    want: _Wanted, X, codes, meta: dict) -> DatasetInfo:
    key = f"{folder_key}/{snapshot}"
    arrays = _zarr_io.EntryArrays(backend, key)
    rows = min(int(meta["chunk_rows"]), X.shape[0])
    # NaN / -1 fill values: a chunk that goes missing reads as an impossible value.
    # y is chunked like X's rows, so Dask blocks of X and y line up.
    _zarr_io.write_array(arrays, "X", X, chunks=(rows, X.shape[1]), fill_value=np.nan)
    crash_point("snapshot-started")
    _zarr_io.write_array(arrays, "y", codes, chunks=(rows,), fill_value=-1)
    if isinstance(backend, LocalBackend):  # on a disk: durable before it is committed
        fsync_tree(backend.root / key)
    crash_point("snapshot-written")
    # A concurrent writer may have stored this content meanwhile: use it, not a second copy.
    done = _without_writing(backend, folder_key, want)
    if done is not None:
        remove_entry(backend, key)
        return done
    _refuse_over_damaged_pointer(backend, folder_key, want)
    lease.check()
    node = {"zarr_format": 3, "node_type": "group", "attributes": meta}
    backend.put_new(f"{key}/zarr.json", json.dumps(node, indent=2).encode())
    crash_point("snapshot-renamed")
    try:
        landed = _land(backend, folder_key, snapshot, want)
    except BaseException:
        _drop_own(backend, folder_key, snapshot, lease)  # committed, but never named
        raise
    if isinstance(landed, DatasetInfo):  # identical content landed meanwhile
        _drop_own(backend, folder_key, snapshot, lease)
        return landed
    return info_from_attrs(want.name, location(backend, key), meta, snapshot=snapshot,
                           written=True, replaced=landed)


def _drop_own(backend: Backend, folder_key: str, snapshot: str, lease: Lease) -> None:
    """Remove the writer's own committed snapshot that the pointer never named: its lease
    goes first (gc's rules keep a snapshot a live writer's lease names), then the snapshot as
    gc removes one (another writer may hold it meanwhile: then it stays, as that one's)."""
    lease.release()
    remove_snapshot(backend, folder_key, snapshot)


def _land(backend: Backend, folder_key: str, snapshot: str, want: _Wanted,
          newest_only: bool = False):
    """Point the name at committed ``snapshot`` by compare-and-swap, deciding again from the
    pointer whenever another writer moved it: True/False (moved; whether it replaced a
    pointer), or the :class:`DatasetInfo` of identical content made current meanwhile.

    Raises
    ------
    DatasetExistsError, StoreCorruptError
        Other content became current (without ``replace``), or the pointer is damaged.
    """
    while True:
        pointer, version = read_pointer_versioned(backend, folder_key)
        if isinstance(pointer, Pointer) and pointer.snapshot == snapshot:
            return True  # pragma: no cover - only a retry after a lost response gets here
        if not newest_only:
            _refuse_over_damaged_pointer(backend, folder_key, want, pointer)
        if isinstance(pointer, Pointer):
            current = _current_state(backend, folder_key, want)
            if current is not None:
                return current
        try:
            write_pointer(backend, folder_key, want.name, snapshot, want.content, pointer,
                          version)
        except PreconditionFailed:
            continue  # another writer moved it: decide again
        return pointer is not None


def _refuse_over_damaged_pointer(backend: Backend, folder_key: str, want: _Wanted,
                                 pointer=False) -> None:
    """Refuse to commit new content under a damaged pointer unless told to ``replace``.

    A pointer that cannot be read, or that names a snapshot that is missing or whose metadata
    cannot be read, hides which content is current: committing other content over it would
    replace that content without ``--replace``, and the next gc would then remove its only
    copy. The content the pointer records may be written again (that repairs it); only the
    newest snapshot that verifies (what ``check --cleanup`` restores) may be named again
    without ``replace``, when it holds this content (:func:`_held_stored_copy`).

    Raises
    ------
    StoreCorruptError
        One line naming the damage and ``catdask check --cleanup``, which restores the newest
        committed snapshot that verifies.
    """
    if want.replace:
        return
    if pointer is False:
        pointer, _version = read_pointer_versioned(backend, folder_key)
    damage = _blocking_damage(backend, folder_key, want, pointer)
    if damage is None:
        return
    raise StoreCorruptError(
        location(backend, folder_key),
        f"data set {want.name!r} is damaged ({damage}); nothing was written, so no stored "
        "content is replaced: run `catdask check --cleanup` to restore its newest committed "
        "snapshot that verifies, then ingest again (with --replace to replace that content)",
    )


def _blocking_damage(backend: Backend, folder_key: str, want: _Wanted, pointer) -> str | None:
    """What is wrong with a pointer read by :func:`read_pointer_versioned` that stops this
    write without ``replace``: the pointer is unreadable, or names a snapshot that is missing
    or whose metadata cannot be read (its content is then unknown, or its labels lost) and
    records other content than this. None when the write may go on."""
    if want.replace or pointer is None:
        return None
    if isinstance(pointer, StoreCorruptError):
        return f"its pointer: {pointer.problem.rstrip('.')}"
    if pointer.content_sha256 == want.content:
        return None  # the content the pointer records: writing it again repairs the name
    key = f"{folder_key}/{pointer.snapshot}"
    damage = None
    if backend.head(f"{key}/zarr.json") is None:
        damage = f"its pointer names snapshot {pointer.snapshot!r}, which is missing"
    else:
        try:
            snapshot_attrs(backend, key)
        except StoreCorruptError as exc:
            damage = f"its current snapshot {pointer.snapshot!r}: {exc.problem.rstrip('.')}"
    if damage is not None:
        again, _version = read_pointer_versioned(backend, folder_key)
        if not (isinstance(again, Pointer) and again.snapshot == pointer.snapshot):
            return None  # the pointer moved (gc may then remove what it named): judged again
    return damage


def _current_state(backend: Backend, folder_key: str, want: _Wanted):
    """What to do given the current snapshot: a :class:`DatasetInfo` when it already holds
    this content intact (nothing to write), None to go on writing.

    Raises
    ------
    DatasetExistsError
        The current snapshot holds different content and ``replace`` is False.
    """
    try:
        found = resolve_pointer(backend, folder_key)
    except StoreCorruptError:
        return None  # a damaged pointer or a missing current snapshot: a new one repairs it
    if found is None:
        return None
    current, hold = found
    key = f"{folder_key}/{current}"
    try:
        try:
            attrs = snapshot_attrs(backend, key)
        except StoreCorruptError:
            return None  # unreadable: the caller refuses other content without replace
        stored = attrs["content_sha256"]
        if stored == want.content and _named_as(attrs, want.naming):
            try:
                verify_snapshot(backend, key)
            except StoreCorruptError:
                return None  # damaged: re-ingesting the same content repairs it
            return info_from_attrs(want.name, location(backend, key), attrs, snapshot=current)
        if stored != want.content and not want.replace:
            raise DatasetExistsError(want.name, stored, want.content)
        return None
    finally:
        hold.close()


def _named_as(attrs: dict, naming: dict) -> bool:
    """Whether a snapshot's attributes carry these label names and feature names."""
    return (attrs.get("label_names") == naming["label_names"]
            and feature_names_in(attrs.get("provenance")) == naming["feature_names"])


@contextlib.contextmanager
def _held_stored_copy(backend: Backend, folder_key: str, want: _Wanted, current,
                      newest_only: bool):
    """The id of a committed snapshot other than ``current`` that holds this content with
    these label and feature names and verifies, held (so gc keeps it) while the block runs;
    None if there is none. The newest such snapshot is preferred. ``newest_only`` (a damaged
    pointer, no ``replace``): only the newest snapshot that verifies qualifies."""
    for snapshot in reversed(list_dataset(backend, folder_key).committed):
        if snapshot == current:
            continue
        key = f"{folder_key}/{snapshot}"
        try:
            attrs = snapshot_attrs(backend, key)
        except StoreCorruptError:
            continue
        matches = attrs["content_sha256"] == want.content and _named_as(attrs, want.naming)
        if not (matches or newest_only):
            continue
        hold = hold_snapshot(backend, folder_key, snapshot)
        if hold is None:
            continue  # removed by gc meanwhile
        try:
            verify_snapshot(backend, key)
        except StoreCorruptError:
            hold.close()
            continue  # damaged: never point a name at it
        if not matches:  # the newest good snapshot holds other content: it stays current
            hold.close()
            break
        try:
            yield snapshot, attrs
        finally:
            hold.close()
        return
    yield None, None


def _without_writing(backend: Backend, folder_key: str, want: _Wanted):
    """A :class:`DatasetInfo` when nothing needs writing: the current snapshot holds this
    content, or a stored one does and the pointer now names it (content addressing,
    ``written=False``); None otherwise."""
    current = _current_state(backend, folder_key, want)
    if current is not None:
        return current
    pointer, _version = read_pointer_versioned(backend, folder_key)
    newest_only = _blocking_damage(backend, folder_key, want, pointer) is not None
    named = pointer.snapshot if isinstance(pointer, Pointer) else None
    with _held_stored_copy(backend, folder_key, want, named, newest_only) as (snapshot, attrs):
        if snapshot is None:
            return None
        landed = _land(backend, folder_key, snapshot, want, newest_only)
        if isinstance(landed, DatasetInfo):
            return landed
        return info_from_attrs(want.name, location(backend, f"{folder_key}/{snapshot}"),
                               attrs, snapshot=snapshot, written=False, replaced=True)
