"""Immutable data-set snapshots, their ids, and what a data set's keys hold.

::

    datasets/<name>/zarr.json            the pointer naming the current snapshot
    datasets/<name>/s<N>/...             snapshot N, written in place; it exists (for every
                                         reader, lister, gc and check) once its zarr.json does
    datasets/<name>/.newest-snapshot     "<N> <uuid>": the highest N ever given (never reused)
    datasets/<name>/.writing/s<N>        the lease of the writer of snapshot N
    datasets/<name>/.holds/s<N>/<uuid>   readers' holds (leases)
    datasets/<name>/.removing/s<N>       gc's tombstone while it removes snapshot N

Everything goes through the store's backend (:mod:`catdask.object_store`), one design for a
local folder and S3. The pointer's format and the readers' hold live in
:mod:`catdask.dataset_pointer`, its writer in :mod:`catdask.store.pointer`. A reader resolves
the name once (:func:`resolve`), holds that snapshot and reads only it, whatever writers do to
the name meanwhile; gc removes a snapshot only when no hold and no model needs it.
"""

from __future__ import annotations

import dataclasses

from ..dataset_pointer import (
    HOLDS,
    LEASE_MARGIN_S,
    REMOVING,
    SnapshotHold,
    location,
    read_pointer_versioned,
    resolve_pointer,
    snapshot_number,
)
from ..errors import DatasetNotFoundError, StoreCorruptError
from ..names import did_you_mean
from ..object_store import Backend
from ..object_store import lease as leases
from . import _zarr_io
from .content import check_attrs, verify_content
from .ids import take_next_id
from .layout import SNAPSHOT_COUNTER
from .root import StoreRoot, open_store

WRITING = ".writing"
_ARRAYS = {"X", "y"}
_OWN_RECORDS = {"zarr.json", SNAPSHOT_COUNTER, ".lock"}  # .lock: the name lock of older versions


@dataclasses.dataclass
class Listing:
    """What one listing of ``datasets/<name>/`` shows.

    ``committed``: snapshot ids with a ``zarr.json``, lowest first; ``prefixes``: every snapshot
    id with any object (committed or not) -> the newest object's modification time;
    ``holds``/``writing``/``removing``: lease keys by snapshot id; ``strays``: keys the store
    does not write; ``has_pointer``.
    """

    committed: list = dataclasses.field(default_factory=list)
    prefixes: dict = dataclasses.field(default_factory=dict)
    holds: dict = dataclasses.field(default_factory=dict)
    writing: dict = dataclasses.field(default_factory=dict)
    removing: dict = dataclasses.field(default_factory=dict)
    strays: list = dataclasses.field(default_factory=list)
    has_pointer: bool = False

    @property
    def uncommitted(self) -> list:
        """Snapshot ids with objects but no ``zarr.json`` (a running or a dead writer's)."""
        return sorted((s for s in self.prefixes if s not in self.committed),
                      key=snapshot_number)


def name_key(store, name: str) -> tuple[StoreRoot, str]:
    """``(root, "datasets/<name>")`` after validating ``name``; ``store`` is anything
    :func:`~catdask.store.root.open_store` accepts."""
    root = open_store(store)
    return root, root.dataset_key(name)


def list_dataset(backend: Backend, folder_key: str) -> Listing:
    """One listing of a data set's keys, sorted into a :class:`Listing`."""
    out = Listing()
    committed = set()
    for meta in backend.list(folder_key + "/"):
        rel = meta.key[len(folder_key) + 1:]
        parts = rel.split("/")
        head = parts[0]
        if snapshot_number(head) is not None and len(parts) > 1:
            out.prefixes[head] = max(out.prefixes.get(head, 0.0), meta.last_modified)
            if rel == f"{head}/zarr.json":
                committed.add(head)
            elif parts[1] not in _ARRAYS or len(parts) == 2:
                out.strays.append(meta.key)
        elif (head in (HOLDS, WRITING, REMOVING) and len(parts) > 1
              and snapshot_number(parts[1]) is not None):
            bucket = {HOLDS: out.holds, WRITING: out.writing, REMOVING: out.removing}[head]
            bucket.setdefault(parts[1], []).append(meta.key)
        elif rel == "zarr.json":
            out.has_pointer = True
        elif rel not in _OWN_RECORDS:
            out.strays.append(meta.key)
    out.committed = sorted(committed, key=snapshot_number)
    return out


def dataset_names(backend: Backend) -> list[str]:
    """Names under ``datasets/`` that hold anything (sorted); not validated."""
    names = set()
    for meta in backend.list("datasets/"):
        parts = meta.key.split("/")
        if len(parts) > 2:
            names.add(parts[1])
    return sorted(names)


def next_snapshot_id(backend: Backend, folder_key: str) -> str:
    """Claim the next snapshot id of a data set by compare-and-swap on its counter
    (:mod:`catdask.store.ids`, the same protocol as the models' version numbers).

    N is above every id the counter gave (it survives a damaged pointer) and, where the counter
    may lag (absent, damaged, or an earlier catdask's), above every snapshot present (committed
    or not) and every one ever committed (the pointer's ``newest_committed``): gc may have
    removed the newest snapshot since, and an id that named other content before would make
    the logs, events and model metadata naming it ambiguous.
    """
    def present() -> list[int]:
        pointer, _ = read_pointer_versioned(backend, folder_key)
        newest = pointer.newest_committed if not isinstance(pointer, (Exception, type(None))) \
            else 0
        listing = list_dataset(backend, folder_key)
        return [newest, *(snapshot_number(s) or 0 for s in [*listing.prefixes, *listing.writing])]

    number, _tag = take_next_id(backend, f"{folder_key}/{SNAPSHOT_COUNTER}", present)
    return f"s{number}"


def writer_lease(backend: Backend, folder_key: str, snapshot: str) -> leases.Lease:
    """The lease a writer holds while it writes ``snapshot`` (cleanup leaves its objects)."""
    from ..dataset_pointer import LEASE_TTL_S

    return leases.acquire(backend, f"{folder_key}/{WRITING}/{snapshot}",
                          f"the writer of {folder_key}/{snapshot}", LEASE_TTL_S,
                          margin_s=LEASE_MARGIN_S)


def resolve(store, name: str) -> tuple[StoreRoot, str, str, SnapshotHold]:
    """Resolve a data-set name to its current snapshot, once:
    ``(root, snapshot id, snapshot key, hold)``. The caller reads only that snapshot and
    closes ``hold`` when done.

    Raises
    ------
    DatasetNotFoundError
        No committed data set of that name (the message lists the stored ones).
    StoreCorruptError
        The pointer is damaged or names a snapshot that does not exist.
    """
    root, folder_key = name_key(store, name)
    found = resolve_pointer(root.backend, folder_key)
    if found is None:
        backend = root.backend
        known = [n for n in dataset_names(backend)
                 if backend.head(f"datasets/{n}/zarr.json") is not None]
        hint = did_you_mean(name, known)  # a typo: not "ingest it", which would fail too
        raise DatasetNotFoundError(
            f"No data set {name!r} in store {root.url} (stored: {', '.join(known) or 'none'})"
            + (f"{hint}" if hint else f". Ingest it first, e.g. `catdask ingest {name}`.")
        )
    snapshot, hold = found
    return root, snapshot, f"{folder_key}/{snapshot}", hold


def snapshot_attrs(backend: Backend, key: str) -> dict:
    """A snapshot's checked attributes, read from its ``zarr.json`` only (no array opened)."""
    node = _zarr_io.read_node(backend, key, key)
    return check_attrs(node.get("attributes"), location(backend, key))


def open_snapshot(backend: Backend, key: str):
    """Structural checks of one snapshot: ``(attrs, X, y)`` as zarr arrays, not yet read."""
    entry = location(backend, key)
    meta = _zarr_io.read_node(backend, key, key)
    if meta.get("node_type") != "group":
        raise StoreCorruptError(entry, "zarr.json does not describe a group")
    attrs = check_attrs(meta.get("attributes"), entry)
    group = _zarr_io.open_group_at(backend, key)
    for arr in ("X", "y"):
        if backend.head(f"{key}/{arr}/zarr.json") is None:
            raise StoreCorruptError(entry, f"array {arr!r} is missing")
    X = _zarr_io.open_array_at(group, "X", backend, key, dtypes={"float64"}, ndim=2)
    y = _zarr_io.open_array_at(group, "y", backend, key, dtypes={"int32", "int64"}, ndim=1)
    n, d = attrs["n_samples"], attrs["n_features"]
    if tuple(X.shape) != (n, d):
        raise StoreCorruptError(
            entry, f"X has shape {tuple(X.shape)} but the attributes say ({n}, {d})"
        )
    if y.shape[0] != X.shape[0]:
        raise StoreCorruptError(entry, f"y has {y.shape[0]} labels but X has {X.shape[0]} rows")
    return attrs, X, y


def verify_snapshot(backend: Backend, key: str) -> dict:
    """Check one snapshot's structure and checksums block by block; returns its attributes.

    Raises
    ------
    StoreCorruptError
        With the first problem found.
    """
    entry = location(backend, key)
    attrs, X, y = open_snapshot(backend, key)
    for arr, label in ((X, "X"), (y, "y")):
        _zarr_io.check_chunks(arr, entry, label)
    with _zarr_io.damage_as_corrupt(
            entry, "cannot read the arrays (truncated or corrupt chunk?)"):
        verify_content(entry, attrs, X, y)
    return attrs


def remove_entry(backend: Backend, key: str) -> None:
    """Delete every object of entry ``key``: its ``zarr.json`` first (from then on it does not
    exist for anyone), then the rest. A crash part-way leaves an uncommitted prefix, which
    cleanup removes."""
    backend.delete(f"{key}/zarr.json")
    for meta in list(backend.list(key + "/")):
        backend.delete(meta.key)
