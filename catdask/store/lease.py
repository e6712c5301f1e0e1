"""One training of a model at a time per store: the model's training lease.

Two runs that train the same model at once (a scheduled retrain overlapping one that a new
snapshot triggered, or ``catdask train`` typed during the nightly run) would both fit, and the
second would register a second version of the same fit: neither run's train-cache lookup can
see a version that the other has not registered yet. The train flow therefore holds the model's
lease from the moment it is about to fit until it has registered. A second run waits, saying
for whom, and then looks the cache up again: it finds the first run's version (or, with
``refit``, fits anyway, after it).

The lease is an OS file lock (``flock``) on ``<root>/.training/<name>.lock``, a file that
exists only while a run holds (or waits for) the lease: the holder removes it, and the folder
once empty, before it lets go, so a run leaves the store as it found it. The OS drops the lock
when its holder dies, so a crashed or killed run never leaves a model locked (its file stays
behind, harmless, and the next run takes it over). The holder writes who it is into the file
(its description, process, host and start time) so that a waiter can say what it waits for;
the lock, not the file's content, is what excludes. A waiter whose file was removed by the
holder it waited for locks a new one (the rule of :func:`catdask.store._atomic.file_lock`).
Where ``flock`` does not exist (Windows) the lease excludes nothing. On a store that cannot be
written the lease is skipped (no run can register there); where the store does not exist the
lease is not taken, nor the store created: the run then fails on its missing data set.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path

from ..names import validate_name
from ._atomic import flock_fd, is_current_lock_file, open_lock_file
from ._json import utc_now
from .layout import resolve_store

__all__ = ["TRAINING_LEASES", "training_lease", "training_lease_path", "lease_holder",
           "holder_description", "models_in_training"]

#: The folder, in the store's root, of the training leases held now.
TRAINING_LEASES = ".training"


def training_lease_path(root: Path, model_name: str) -> Path:
    """``<root>/.training/<name>.lock`` (the name validated: it cannot leave the folder)."""
    return Path(root) / TRAINING_LEASES / f"{validate_name(model_name, kind='model')}.lock"


def lease_holder(path: Path) -> dict:
    """What the lease file says of its holder (``{}`` when it says nothing readable): only a
    description for messages; whether the lease is held is the lock's business."""
    try:
        text = Path(path).read_text()
        holder = json.loads(text) if text.strip() else {}
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def holder_description(holder: dict, unknown: str = "another run") -> str:
    """``"flow run <id> (pid P on HOST, since T)"`` from what a lease file says (the part in
    brackets only when it says all three; ``unknown`` when it names no holder)."""
    where = (f" (pid {holder['pid']} on {holder['host']}, since {holder['since']})"
             if {"pid", "host", "since"} <= holder.keys() else "")
    return f"{holder.get('holder') or unknown}{where}"


def models_in_training(store) -> list[dict]:
    """The models a run trains now, by what their lease files say: ``{"model", "holder",
    "pid", "host", "since"}`` each, by name. Read without locking (a lock taken to look would
    make a starting run wait for nothing); a file whose holder is a process of this host that
    no longer exists (a killed run) is left out, one from another host is listed as it says.
    """
    folder = resolve_store(store) / TRAINING_LEASES
    found = []
    for path in sorted(folder.glob("*.lock")) if folder.is_dir() else []:
        holder = lease_holder(path)
        if not holder.get("pid"):  # being written, or a waiter's file: nobody holds it yet
            continue
        if holder.get("host") == socket.gethostname() and not _alive(holder["pid"]):
            continue
        found.append({"model": path.stem, **holder})
    return found


def _alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, OverflowError):
        return True  # another user's process: it exists
    return True


def _describe_self(holder: str) -> str:
    return json.dumps({"holder": holder, "pid": os.getpid(), "host": socket.gethostname(),
                       "since": utc_now()})


@contextlib.contextmanager
def training_lease(store, model_name: str, *, holder: str = "", on_wait=None,
                   poll_seconds: float = 1.0, report_every: float = 300.0):
    """Hold ``model_name``'s training lease in ``store`` for the block, waiting for it if
    another run holds it.

    Parameters
    ----------
    store : str or os.PathLike or None
        The store (as :func:`~catdask.store.resolve_store`).
    model_name : str
        The model trained.
    holder : str
        Who holds it, for other runs' messages (e.g. ``"flow run <id>"``).
    on_wait : callable, optional
        ``on_wait(other, waited_seconds)`` when the lease is found held (``other``: what its
        holder wrote, :func:`lease_holder`), then every ``report_every`` seconds of waiting.
    poll_seconds : float
        How often a waiter tries the lock again.

    Yields
    ------
    float
        The seconds waited for the lease (0.0 when it was free).
    """
    root = resolve_store(store)
    path = training_lease_path(root, model_name)
    if not root.is_dir():  # never create a store: a misspelt path must fail as missing, later
        yield 0.0
        return
    start = time.monotonic()
    next_report, waited = start, 0.0
    while True:
        fh = _open(path)
        if fh is None:  # a store that cannot be written: nothing to exclude
            yield 0.0
            return
        if flock_fd(fh.fileno(), wait=False):
            if is_current_lock_file(fh, path):
                break
            fh.close()  # the file its last holder removed as it let go: open the new one
            continue
        fh.close()  # another run holds it
        now = time.monotonic()
        if on_wait is not None and now >= next_report:
            on_wait(lease_holder(path), now - start)
            next_report = now + report_every
        time.sleep(poll_seconds)
        waited = time.monotonic() - start
    with fh:
        with contextlib.suppress(OSError):  # a description only; the lock is held anyway
            fh.truncate(0)
            fh.write(_describe_self(holder).encode())
            fh.flush()
        try:
            yield waited
        finally:
            # Remove the file while still holding its lock (a waiter that then locks the
            # removed file sees it is not the lease any more and opens a new one), then the
            # folder if no other lease is in it; closing the file releases the lock.
            with contextlib.suppress(OSError):
                path.unlink()
            with contextlib.suppress(OSError):
                path.parent.rmdir()


def _open(path: Path):
    """The lease file opened for locking (made with its folder when missing); None where the
    store cannot be written. Retried when another run removes the folder meanwhile."""
    for _ in range(100):
        try:
            return open_lock_file(path)
        except FileNotFoundError:  # the folder was removed between its making and the open
            continue
    return open_lock_file(path)

