"""A stored data set's pointer and the readers' hold: the one place their format is read.

::

    datasets/<name>/zarr.json            the pointer: a zarr v3 group whose attributes are
                                         {"catdask_dataset_pointer": 1, "name", "snapshot": "s<N>",
                                          "content_sha256", "updated", "newest_committed": M}
    datasets/<name>/s<N>/                snapshot N (its own zarr.json, X, y); it exists for
                                         every reader once its zarr.json does
    datasets/<name>/.holds/s<N>/<uuid>   a reader's hold on snapshot N (a lease)
    datasets/<name>/.removing/s<N>       gc's tombstone while it removes snapshot N (a lease)

``newest_committed`` is the highest snapshot number ever committed under the name: with
content addressing the pointer may move back to an older snapshot that holds the content
again, so a committed snapshot numbered above it (and only such a one) was committed by a
write that died before it moved the pointer. Pointers written before that field existed lack
it; then the current snapshot's number stands in.

A reader resolves a data set once (:func:`resolve_pointer`): it reads the pointer and holds
the named snapshot (:func:`hold_snapshot`), then reads only that snapshot. Holds and gc meet
in a handshake where each side writes first and reads the other's record after: the reader
writes its hold, then checks that no tombstone names the snapshot; gc writes the tombstone,
then lists the holds. So at least one of them sees the other, and a held snapshot stays. All
of it goes through an object-store backend (:mod:`catdask.object_store`): one design for a
local folder and S3.

This module sits below :mod:`catdask.distributed`, which reads a stored data set given to
``fit`` through it, and imports nothing of catdask but :mod:`catdask.errors` and
:mod:`catdask.object_store`: the library imports nothing of the store. The writer of the
pointer is :func:`catdask.store.pointer.write_pointer`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import re
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from .errors import StoreCorruptError
from .object_store import Backend, LocalBackend, NotFound, ObjectMeta
from .object_store.lease import Lease, acquire, server_now

POINTER_FORMAT = 1
#: The attribute that marks a group's ``zarr.json`` as a data-set pointer.
POINTER_KEY = "catdask_dataset_pointer"
#: The attribute of a snapshot's (and of the old in-place layout's) group metadata.
DATASET_FORMAT_KEY = "catdask_dataset_format"
HOLDS = ".holds"
REMOVING = ".removing"
#: Seconds a reader's hold, a writer's lease and gc's tombstone stay valid without renewal (a
#: heartbeat renews them every third of it); the margin is added when judging another's. Tests
#: shorten them here.
LEASE_TTL_S = 30.0
LEASE_MARGIN_S = 2.0
_READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
_SNAPSHOT_DIR = re.compile(r"s([1-9][0-9]*)")
# A reader retries when gc removed the snapshot it resolved (the pointer moved on meanwhile).
_RESOLVE_ATTEMPTS = 100


@dataclasses.dataclass(frozen=True)
class Pointer:
    """What a data-set name points at: the current snapshot's id and content checksum, and the
    highest snapshot number ever committed under the name."""

    snapshot: str
    content_sha256: str
    updated: str | None = None
    newest_committed: int = 0

    def __post_init__(self):
        number = snapshot_number(self.snapshot) or 0
        if self.newest_committed < number:
            object.__setattr__(self, "newest_committed", number)


def snapshot_number(snapshot_id: str) -> int | None:
    """N of a snapshot id ``s<N>``, None for anything else."""
    m = _SNAPSHOT_DIR.fullmatch(snapshot_id) if isinstance(snapshot_id, str) else None
    return int(m.group(1)) if m else None


def is_pointer_attrs(attrs) -> bool:
    """True when a group's attributes are a data-set pointer (of any format)."""
    return isinstance(attrs, dict) and POINTER_KEY in attrs


def location(backend: Backend, key: str) -> Any:
    """How messages and results name ``key``: its path in a local store (a :class:`Path`),
    else its URL (``s3://bucket/prefix/key``; never a secret)."""
    if isinstance(backend, LocalBackend):
        return backend.root / key if key else backend.root
    return f"{backend.url.rstrip('/')}/{key}" if key else backend.url


def _parse_json(data: bytes, where: str, entry) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise StoreCorruptError(entry, f"cannot read {where}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise StoreCorruptError(entry, f"{where} is not valid JSON ({exc})") from exc


def read_zarr_json(backend: Backend, node_key: str, entry_key: str, *, missing_ok=False):
    """The parsed JSON value of ``<node_key>/zarr.json`` (any JSON type: the caller checks it).

    Problems are reported against the store entry ``entry_key`` (a snapshot, a model version,
    a data set), the file named relative to it. None when it is absent and ``missing_ok``.

    Raises
    ------
    StoreCorruptError
        The object is missing (unless ``missing_ok``), not UTF-8 or not JSON.
    """
    key = f"{node_key}/zarr.json" if node_key else "zarr.json"
    where = key[len(entry_key) + 1:] if key.startswith(entry_key + "/") else key
    entry = location(backend, entry_key)
    try:
        data, _version = backend.get(key)
    except NotFound:
        if missing_ok:
            return None
        raise StoreCorruptError(entry, f"{where} is missing") from None
    except IsADirectoryError as exc:  # pragma: no cover - a hand-made folder at the key
        raise StoreCorruptError(entry, f"cannot read {where}: {exc}") from exc
    return _parse_json(data, where, entry)


def parse_pointer(node, entry) -> Pointer:
    """The :class:`Pointer` a parsed ``zarr.json`` describes; StoreCorruptError otherwise."""
    if not isinstance(node, dict):
        raise StoreCorruptError(entry, "zarr.json is not a JSON object")
    attrs = node.get("attributes")
    if node.get("node_type") != "group" or not isinstance(attrs, dict):
        raise StoreCorruptError(entry, "the pointer (zarr.json) does not describe a group")
    if attrs.get(POINTER_KEY) != POINTER_FORMAT:
        if DATASET_FORMAT_KEY in attrs:
            raise StoreCorruptError(
                entry,
                "this data set was written by an older catdask (stored in place, without "
                "snapshots); `catdask check --cleanup` (or any re-ingest) upgrades it",
            )
        raise StoreCorruptError(entry, "zarr.json is not a catdask data-set pointer")
    snapshot, sha = attrs.get("snapshot"), attrs.get("content_sha256")
    if not (isinstance(snapshot, str) and snapshot_number(snapshot) and isinstance(sha, str)):
        raise StoreCorruptError(entry, f"the pointer names an invalid snapshot {snapshot!r}")
    newest = attrs.get("newest_committed")
    newest = newest if isinstance(newest, int) and not isinstance(newest, bool) else 0
    return Pointer(snapshot, sha, attrs.get("updated"), newest)


def read_pointer_versioned(backend: Backend, folder_key: str):
    """``(pointer, version)`` of a data set: ``(None, None)`` without a pointer; the pointer is
    a :class:`StoreCorruptError` (returned, not raised) when it is damaged, so a writer can
    replace exactly the version it judged."""
    entry = location(backend, folder_key)
    try:
        data, version = backend.get(f"{folder_key}/zarr.json")
    except NotFound:
        return None, None
    try:
        return parse_pointer(_parse_json(data, "zarr.json", entry), entry), version
    except StoreCorruptError as exc:
        return exc, version


def read_pointer(backend: Backend, folder_key: str) -> Pointer | None:
    """The pointer of a data set; None if it has none (never committed).

    Raises
    ------
    StoreCorruptError
        The pointer exists but is not a valid pointer.
    """
    pointer, _version = read_pointer_versioned(backend, folder_key)
    if isinstance(pointer, StoreCorruptError):
        raise pointer
    return pointer


def _pid_alive(pid) -> bool:
    try:
        pid = int(pid)
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, OverflowError, TypeError):
        return True  # another user's process, or no pid: assume it runs
    try:  # Linux: a killed process its parent has not reaped yet (a zombie) is dead too
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[:1] != ["Z"]
    except OSError:
        return True


def holder_is_dead_here(record: dict) -> bool:
    """Whether a lease record names a process of this machine that no longer runs."""
    return record.get("host") == socket.gethostname() and not _pid_alive(record.get("pid"))


def lease_is_live(record: dict | None, meta: ObjectMeta | None, now: float) -> bool:
    """Whether a lease (its record and object metadata) still holds at server time ``now``:
    not released, not expired, and, when it names a process of this machine, that process
    runs (a killed writer's or reader's lease is dead at once, not only after its ttl)."""
    if record is None or meta is None or record.get("released"):
        return False
    if holder_is_dead_here(record):
        return False
    ttl = float(record.get("ttl_s", 0) or 0)
    return meta.last_modified + ttl + LEASE_MARGIN_S > now


def read_lease(backend: Backend, key: str) -> tuple[dict | None, ObjectMeta | None]:
    """A lease's record and metadata, ``(None, None)`` when absent."""
    meta = backend.head(key)
    if meta is None:
        return None, None
    try:
        data, _version = backend.get(key)
    except NotFound:
        return None, None
    try:
        record = json.loads(data)
    except ValueError:
        record = None
    return (record if isinstance(record, dict) else {"released": True}), meta


def _read_only(exc: OSError) -> bool:
    return isinstance(exc, PermissionError) or exc.errno in _READ_ONLY_ERRNOS


def store_now(backend: Backend) -> float:
    """The backend's clock (:func:`~catdask.object_store.lease.server_now`); this machine's on
    a store this process cannot write (a read-only mount or read-only credentials)."""
    try:
        return server_now(backend)
    except OSError as exc:
        if not _read_only(exc):
            raise
        return time.time()


def being_removed(backend: Backend, folder_key: str, snapshot: str) -> bool:
    """True while a live gc tombstone names ``snapshot``."""
    record, meta = read_lease(backend, f"{folder_key}/{REMOVING}/{snapshot}")
    if record is None or record.get("released"):
        return False
    return lease_is_live(record, meta, store_now(backend))


class SnapshotHold:
    """A reader's hold on one snapshot (a lease): gc does not remove the snapshot while held.

    Released by :meth:`close` (or when the object is garbage collected); a reader that dies
    leaves a lease that expires (at once, for gc on the same machine).
    """

    def __init__(self, lease: Lease | None):
        self._lease = lease

    def close(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()
            with contextlib.suppress(Exception):  # a leftover record is removed by gc
                lease.backend.delete(lease.key)

    def __del__(self):  # pragma: no cover - depends on the garbage collector
        with contextlib.suppress(Exception):
            self.close()

    def __reduce__(self):
        # A copy (pickle, deepcopy: e.g. a task result that holds one) holds nothing: a hold
        # belongs to the process that took it and must not travel into a Dask task.
        return type(self), (None,)


def hold_snapshot(backend: Backend, folder_key: str, snapshot: str) -> SnapshotHold | None:
    """Hold snapshot ``snapshot`` of a data set; None if it is not committed (or is being
    removed). The hold is written first, then the tombstone and the snapshot are checked: gc
    writes its tombstone first and lists the holds after, so one of the two sees the other."""
    if snapshot_number(snapshot) is None:
        return None
    try:
        lease = acquire(backend, f"{folder_key}/{HOLDS}/{snapshot}/{uuid.uuid4().hex}",
                        f"a reader of {snapshot}", LEASE_TTL_S, margin_s=LEASE_MARGIN_S)
    except OSError as exc:
        if not _read_only(exc):
            raise
        # A store this process cannot write: a hold cannot be written, and no gc runs with
        # these rights; the snapshot is read unheld.
        committed = backend.head(f"{folder_key}/{snapshot}/zarr.json") is not None
        return SnapshotHold(None) if committed else None
    hold = SnapshotHold(lease)
    try:
        if (being_removed(backend, folder_key, snapshot)
                or backend.head(f"{folder_key}/{snapshot}/zarr.json") is None):
            hold.close()
            return None
    except BaseException:
        hold.close()
        raise
    return hold


def hold_pointed(backend: Backend, folder_key: str):
    """``(pointer, hold)``: the pointer, read again until the snapshot it names is held; the
    hold is None when there is no pointer, or when the pointer still names a snapshot that is
    not committed after it was read twice (missing). A snapshot that gc is deciding about (a
    live tombstone) is waited for: gc never removes the current one, so it lets go at once.

    Raises
    ------
    StoreCorruptError
        The pointer is damaged.
    """
    missing = None
    for attempt in range(_RESOLVE_ATTEMPTS):
        pointer = read_pointer(backend, folder_key)
        if pointer is None:
            return None, None
        hold = hold_snapshot(backend, folder_key, pointer.snapshot)
        if hold is not None:
            return pointer, hold
        if backend.head(f"{folder_key}/{pointer.snapshot}/zarr.json") is not None:
            time.sleep(0.01 * min(attempt + 1, 20))  # being judged by gc (a tombstone)
            continue
        if missing == pointer.snapshot:  # the pointer still names it: it is really gone
            return pointer, None
        missing = pointer.snapshot
    return pointer, None


def resolve_pointer(backend: Backend, folder_key: str) -> tuple[str, SnapshotHold] | None:
    """Resolve a data set to its current snapshot, once: ``(snapshot id, hold)``.

    The caller reads only that snapshot and closes ``hold`` when done. None when the data
    set has no pointer (nothing committed under the name).

    Raises
    ------
    StoreCorruptError
        The pointer is damaged or names a snapshot that does not exist.
    """
    pointer, hold = hold_pointed(backend, folder_key)
    if pointer is None:
        return None
    if hold is not None:
        return pointer.snapshot, hold
    raise StoreCorruptError(
        location(backend, folder_key),
        f"the current snapshot {pointer.snapshot!r} is missing; run `catdask check --cleanup` "
        "to restore the last good snapshot, or re-ingest the data set",
    )


def resolve_folder(folder: Path) -> tuple[str, Path, SnapshotHold] | None:
    """:func:`resolve_pointer` for a data set given by its local folder:
    ``(snapshot id, snapshot folder, hold)`` or None."""
    found = resolve_pointer(LocalBackend(folder.parent), folder.name)
    if found is None:
        return None
    snapshot, hold = found
    return snapshot, folder / snapshot, hold
