"""Check that every Dask worker sees a local store at the driver's path, before a fit reads it.

A worker on another host that does not mount the store would fail the fit only once it is under
way. So the driver writes a probe file with random content beside the snapshot (a locked
``.tmp-`` name, which the store's ``check`` and ``gc`` treat as a running writer's temporary) and
one ``Client.run`` asks every worker whether it reads the same bytes at the same path; a
read-only store uses the snapshot's own ``zarr.json``. A worker that does not see it stops the
run in one line. An object-store URL needs no check.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import uuid
from pathlib import Path

__all__ = ["check_workers_see_folder"]

_PROBE_PREFIX = ".tmp-visibility-"
#: How many worker addresses the message names.
_NAMED = 3


def _file_sha256(path: str) -> str | None:
    """Runs on each worker: the sha256 of the file at ``path``, None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _local_folder(folder) -> Path | None:
    if not isinstance(folder, (str, os.PathLike)) or "://" in os.fspath(folder):
        return None
    path = Path(folder)
    return path if path.is_dir() else None


def _link_unnamed(fd: int, path: Path) -> None:
    """Give the unnamed (``O_TMPFILE``) file open as ``fd`` the name ``path``: linkat with
    AT_SYMLINK_FOLLOW on ``/proc/self/fd/<fd>`` (a plain ``link`` of that path fails with
    EXDEV; ``src_dir_fd`` makes Python call linkat)."""
    proc = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.link(str(fd), path, src_dir_fd=proc, follow_symlinks=True)
    finally:
        os.close(proc)


def _write_probe(parent: Path):
    """A new file in ``parent`` with random content, locked: ``(path, content, open file)``, or None
    where the driver cannot write there. Created unnamed (``O_TMPFILE``), locked, then linked in,
    so it never appears as an unlocked (crashed) temporary.
    """
    content = uuid.uuid4().bytes * 2
    probe = parent / f"{_PROBE_PREFIX}{uuid.uuid4().hex}"
    try:
        try:
            fd = os.open(parent, os.O_TMPFILE | os.O_WRONLY, 0o644)
            unnamed = True
        except (AttributeError, OSError):  # not Linux, or a file system without it
            fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            unnamed = False
    except OSError:
        return None
    file = os.fdopen(fd, "wb")
    try:
        fcntl.flock(file, fcntl.LOCK_EX)
        file.write(content)
        file.flush()
        if unnamed:
            _link_unnamed(fd, probe)
    except OSError:
        file.close()
        if not unnamed:
            probe.unlink(missing_ok=True)
        return None
    return probe, content, file


def check_workers_see_folder(client, folder) -> None:
    """Raise :class:`catdask.errors.WorkerEnvironmentError` when a worker of ``client`` does
    not see the local folder ``folder`` (a stored data set's snapshot) at the same path.

    No-op without a client, or when ``folder`` is not a folder on this machine (an object-store
    location). The probe is written in ``folder``'s parent and removed before returning.
    """
    from ..errors import WorkerEnvironmentError

    local = _local_folder(folder) if client is not None else None
    if local is None:
        return
    written = _write_probe(local.parent)
    if written is not None:
        probe, content, held = written
    else:  # a read-only store: the snapshot's metadata, read the same way
        probe = local / "zarr.json"
        content = probe.read_bytes()
    try:
        replies = client.run(_file_sha256, str(probe), on_error="return")
    finally:
        if written is not None:
            probe.unlink(missing_ok=True)
            held.close()  # the lock goes after the name: never an unlocked probe to report
    expected = hashlib.sha256(content).hexdigest()
    blind = sorted(w for w, digest in replies.items() if digest != expected)
    if not blind:
        return
    named = ", ".join(blind[:_NAMED]) + (" ..." if len(blind) > _NAMED else "")
    raise WorkerEnvironmentError(
        f"{len(blind)} of the {len(replies)} Dask workers of {client.scheduler.address} cannot "
        f"see the stored data set at {local} ({named}), and the workers read it "
        "themselves: mount a shared file system at the same path on every worker (a store on "
        "object storage, s3://, is not supported yet: docs/operations.md, Object storage)"
    )
