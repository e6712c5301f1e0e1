"""One training of a model at a time per store: the model's training lease.

Two runs that train the same model at once (a scheduled retrain overlapping one that a new
snapshot triggered, or ``catdask train`` typed during the nightly run) would both fit, and the
second would register a second version of the same fit: neither run's train-cache lookup can
see a version that the other has not registered yet. The train flow therefore holds the model's
lease from the moment it is about to fit until it has registered. A second run waits, saying
for whom, and then looks the cache up again: it finds the first run's version (or, with
``refit``, fits anyway, after it).

The lease is an object-store lease (:mod:`catdask.object_store.lease`) at
``.training/<name>`` in the store, on a local folder and on S3 alike: a small record naming
its holder (description, process, host, start time), renewed by a heartbeat, that another run
may take over once it has expired (its holder died) or was released. A holder on this host
whose process is gone is known dead at once: its lease is taken over without waiting for the
ttl. A released lease stays as a small "released" record (the seam has no conditional delete).
On a store that cannot be written the lease is skipped (no run can register there); a local
store that does not exist is not created: the run then fails on its missing data set.
"""

from __future__ import annotations

import contextlib
import errno
import json
import time
from typing import Any

from ..dataset_pointer import holder_is_dead_here, read_lease, store_now
from ..dataset_pointer import lease_is_live as live_lease
from ..names import validate_name
from ..object_store import Backend, NotFound, ObjectStoreError, PreconditionFailed
from ..object_store import lease as object_lease
from ._json import utc_now
from .root import open_store

#: The prefix, in the store's root, of the models' training leases.
TRAINING_LEASES = ".training"
#: Seconds a training lease lives without a renewal (its heartbeat renews it every third).
TRAINING_LEASE_TTL_S = 60.0
_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


def training_lease_key(model_name: str) -> str:
    """``.training/<name>`` (the name validated: it cannot leave the prefix)."""
    return f"{TRAINING_LEASES}/{validate_name(model_name, kind='model')}"


def holder_description(holder: dict, unknown: str = "another run") -> str:
    """``"flow run <id> (pid P on HOST, since T)"`` from a lease's description (the part in
    brackets only when it says all three; ``unknown`` when it names no holder)."""
    where = (f" (pid {holder['pid']} on {holder['host']}, since {holder['since']})"
             if {"pid", "host", "since"} <= holder.keys() else "")
    return f"{holder.get('holder') or unknown}{where}"


def _describe(record: dict[str, Any]) -> dict[str, Any]:
    """``{"holder", "pid", "host", "since"}`` of a lease record (the holder field carries the
    description and the start time as JSON; a foreign record's holder is taken as it is)."""
    out: dict[str, Any] = {k: record[k] for k in ("pid", "host") if k in record}
    try:
        said = json.loads(record.get("holder", ""))
    except (TypeError, ValueError):
        said = None
    if isinstance(said, dict):
        out.update(holder=said.get("holder", ""), since=said.get("since"))
    else:
        out["holder"] = record.get("holder", "")
    return out


def lease_is_live(backend: Backend, key: str) -> bool:
    """Whether a holder holds the lease at ``key`` now: it exists, is not released, its holder
    is not a dead process of this host, and it has not expired by the backend's clock."""
    return live_lease(*read_lease(backend, key), store_now(backend))


def release_if_dead_here(backend: Backend, key: str) -> None:
    """Mark the lease released when its holder is a dead process of this host (so it is taken
    over now, not after its ttl); compare-and-swap over exactly the record judged."""
    try:
        data, version = backend.get(key)
        record = json.loads(data)
    except (NotFound, ValueError):
        return
    if not isinstance(record, dict) or record.get("released") or not holder_is_dead_here(record):
        return
    with contextlib.suppress(PreconditionFailed):
        backend.put_if_match(key, json.dumps(dict(record, released=True)).encode(), version)


def models_in_training(store) -> list[dict]:
    """The models a run trains now, by their live leases: ``{"model", "holder", "pid",
    "host", "since"}`` each, by name. Released and expired leases, and those of dead processes
    of this host, are left out."""
    backend = open_store(store).backend
    found = []
    keys = sorted(m.key for m in backend.list(f"{TRAINING_LEASES}/"))
    for key in keys:
        model = key[len(TRAINING_LEASES) + 1:]
        if "/" in model or model.endswith(".lock") or not lease_is_live(backend, key):
            continue  # ".lock": an earlier catdask's lock file
        record = object_lease.lease_record(backend, key)
        if record is not None:
            found.append({"model": model, **_describe(record)})
    return found


def _cannot_write(exc: OSError) -> bool:
    """A local store that cannot be written (S3's refusals are the seam's one-line errors)."""
    if isinstance(exc, ObjectStoreError):
        return False
    return isinstance(exc, PermissionError) or exc.errno in _READ_ONLY


@contextlib.contextmanager
def training_lease(store, model_name: str, *, holder: str = "", on_wait=None,
                   poll_seconds: float = 1.0, report_every: float = 300.0,
                   ttl_s: float | None = None):
    """Hold ``model_name``'s training lease in ``store`` for the block, waiting for it if
    another run holds it.

    Parameters
    ----------
    store : str or os.PathLike or StoreRoot or None
        The store (as :func:`~catdask.store.root.open_store`: a path, ``s3://...``).
    model_name : str
        The model trained.
    holder : str
        Who holds it, for other runs' messages (e.g. ``"flow run <id>"``).
    on_wait : callable, optional
        ``on_wait(other, waited_seconds)`` when the lease is found held (``other``: its
        holder's ``{"holder", "pid", "host", "since"}``), then every ``report_every`` seconds.
    poll_seconds : float
        How often a waiter tries again.
    ttl_s : float, optional
        The lease's life without a renewal (default :data:`TRAINING_LEASE_TTL_S`): how long a
        killed holder on another host keeps the model.

    Yields
    ------
    float
        The seconds waited for the lease (0.0 when it was free).
    """
    root = open_store(store)
    key = training_lease_key(model_name)
    if root.path is not None and not root.path.is_dir():
        yield 0.0  # never create a store: a misspelt path must fail as missing, later
        return
    described = json.dumps({"holder": holder, "since": utc_now()})
    ttl = TRAINING_LEASE_TTL_S if ttl_s is None else ttl_s
    start = time.monotonic()
    next_report, waited = start, 0.0
    while True:
        release_if_dead_here(root.backend, key)
        try:
            lease = object_lease.acquire(root.backend, key, described, ttl)
            break
        except object_lease.LeaseHeldError as held:
            now = time.monotonic()
            if on_wait is not None and now >= next_report:
                on_wait(_describe(held.record), now - start)
                next_report = now + report_every
            time.sleep(poll_seconds)
            waited = time.monotonic() - start
        except OSError as exc:
            if not _cannot_write(exc):
                raise
            yield 0.0  # a store that cannot be written: no run can register, nothing to exclude
            return
    try:
        yield waited
    finally:
        lease.release()
