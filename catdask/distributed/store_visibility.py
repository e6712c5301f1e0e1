"""Check that every Dask worker reads the stored data set the driver sees, before a fit reads it."""

from __future__ import annotations

import fcntl
import hashlib
import os
import uuid
from pathlib import Path

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


def _object_sha256(url: str, key: str) -> tuple[str | None, str]:
    """Runs on each worker: ``(sha256, "")`` of object ``key`` of the store at ``url``, opened
    with this process's AWS environment, or ``(None, why)`` in one line (no secret in it)."""
    from ..object_store import NotFound, ObjectStoreError, open_backend

    try:
        data, _ = open_backend(url).get(key)
    except NotFound:
        return None, f"{url}/{key} is absent at the worker's endpoint (check AWS_ENDPOINT_URL)"
    except ObjectStoreError as exc:
        return None, str(exc)
    return hashlib.sha256(data).hexdigest(), ""


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


def check_workers_see_store(client, location) -> None:
    """Raise :class:`catdask.errors.WorkerEnvironmentError` when a worker of ``client`` cannot
    read the stored data set's snapshot at ``location`` (a local folder, or its ``s3://`` URL)
    as the driver does."""
    from ..object_store import is_object_store_url

    if client is None:
        return
    if is_object_store_url(location):
        _check_workers_read_object_store(client, location)
    else:
        _check_workers_see_folder(client, location)


def _blind_workers(client, replies: dict, expected: str) -> tuple[list[str], str]:
    """The workers whose reply is not ``expected``, and "N of the M Dask workers of ADDR"."""
    blind = sorted(w for w, digest in replies.items() if digest != expected)
    return blind, f"{len(blind)} of the {len(replies)} Dask workers of {client.scheduler.address}"


def _named(workers: list[str]) -> str:
    return ", ".join(workers[:_NAMED]) + (" ..." if len(workers) > _NAMED else "")


def _check_workers_read_object_store(client, url: str) -> None:
    from ..errors import WorkerEnvironmentError
    from ..object_store import open_backend

    key = "zarr.json"  # the snapshot's metadata: small, and its commit (always present)
    expected = hashlib.sha256(open_backend(url).get(key)[0]).hexdigest()
    replies = client.run(_object_sha256, url, key, on_error="return")
    digests = {w: r[0] if isinstance(r, tuple) else None for w, r in replies.items()}
    blind, who = _blind_workers(client, digests, expected)
    if not blind:
        return
    first = replies[blind[0]]
    if isinstance(first, tuple):
        why = first[1] or "it reads other content there: another server (AWS_ENDPOINT_URL)"
    else:  # the task itself failed (catdask not importable there: the set-up check says so)
        why = f"{type(first).__name__}: {str(first).strip().splitlines()[0][:200]}"
    raise WorkerEnvironmentError(
        f"{who} cannot read the stored data set at {url} ({_named(blind)}: {why}), and the "
        "workers read it themselves: give every worker the store's credentials and endpoint in "
        "its own environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE; "
        "AWS_ENDPOINT_URL, and AWS_ALLOW_HTTP=true for an http endpoint)"
    )


def _check_workers_see_folder(client, folder) -> None:
    """The check of a local snapshot folder ``folder``: a probe file written in its parent
    (removed before returning) must read the same on every worker."""
    from ..errors import WorkerEnvironmentError

    local = _local_folder(folder)
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
    blind, who = _blind_workers(client, replies, hashlib.sha256(content).hexdigest())
    if not blind:
        return
    raise WorkerEnvironmentError(
        f"{who} cannot see the stored data set at {local} ({_named(blind)}), and the workers "
        "read it themselves: mount a shared file system at the same path on every worker, or "
        "keep the store on object storage (--store s3://bucket/prefix), which every worker "
        "reads with its own credentials"
    )
