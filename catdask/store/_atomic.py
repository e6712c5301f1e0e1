"""Filesystem primitives that make store writes all-or-nothing, and the crash points.

A model version is written into a private temporary directory beside its final place and
then renamed into place (data sets moved onto the object-store seam with issue 39: their
snapshots are committed by a create-only ``zarr.json``; they use only :func:`crash_point`
and :func:`fsync_tree` here). ``os.rename`` of a directory is atomic on
POSIX and Windows and refuses to replace a non-empty directory, which gives both "no half-written
entry is ever visible" and a lock-free way for concurrent writers to claim distinct names
(zarr itself locks nothing; docs/design.md section 7).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import time
from pathlib import Path

# The file helpers the local object-store backend shares (it sits below the store).
from ..object_store._fs import TMP_PREFIX, flock_fd, fsync_dir, is_temporary_name

# errno values of a store that cannot be written: a read-only mount, or files of another user.
READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})



# Test hook: a callable run with the label of each step of a write, replacement, cleanup or
# gc (``crash_point``). Tests set it to raise or to ``os._exit`` there, to prove that a crash
# at any step loses no data. None in normal use.
_CRASH_HOOK = None


def crash_point(label: str) -> None:
    """Mark a step of a multi-step store update (a fault-injection point for the tests)."""
    if _CRASH_HOOK is not None:
        _CRASH_HOOK(label)


def is_temporary(path: Path) -> bool:
    """True for the store's own temporary directories and files."""
    return is_temporary_name(path.name)


def fsync_tree(path: Path) -> None:
    """Flush every file under ``path`` and the directories themselves to disk.

    A rename is only crash-safe across power loss if the data it points to reached the disk
    first. Best effort: platforms that cannot fsync a directory (Windows) skip that part.
    """
    for dirpath, _dirnames, filenames in os.walk(path):
        for name in filenames:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(dirpath))


def remove_tree(path: Path) -> None:
    """Remove a directory tree, ignoring errors (used on failure paths and for cleanup)."""
    shutil.rmtree(path, ignore_errors=True)
    if path.exists() and not path.is_dir():  # a stray file with that name
        with contextlib.suppress(OSError):
            path.unlink()


def temporary_age(path: Path, now: float | None = None) -> float | None:
    """Seconds since ``path`` was last modified; None when that time lies in the future (a
    clock that was set back, a copied store): its age is unknown. Raises FileNotFoundError."""
    now = time.time() if now is None else now
    age = now - path.lstat().st_mtime
    # A little slack: a file written this instant can look a few ms "younger than now".
    return None if age < -1.0 else max(age, 0.0)


#: The object-store seam's own momentary files (a write's ``.tmp-put-``, the clock probe) hold
#: no lock: younger than this, one is a running write's, never a crashed writer's.
SEAM_TEMPORARY_S = 60.0


def seam_write_in_flight(path: Path, now: float | None = None) -> bool:
    """True for a seam temporary that a running write may still own (or that vanished)."""
    if not path.name.startswith((f"{TMP_PREFIX}put-", f"{TMP_PREFIX}clock-")):
        return False
    try:
        age = temporary_age(path, now)
    except FileNotFoundError:
        return True
    return age is not None and age < SEAM_TEMPORARY_S


def remove_temporaries(parent: Path, older_than_seconds: float) -> list[Path]:
    """Delete ``.tmp-*`` entries directly under ``parent`` at least the given age old whose
    lock is free.

    Only earlier catdask versions wrote such temporaries here (a running writer of theirs held
    its temporary's lock from the moment it was created); a temporary whose modification time
    lies in the future has no known age and is removed when its lock is free.
    """
    removed = []
    if not parent.is_dir():
        return removed
    now = time.time()
    for entry in parent.iterdir():
        if not is_temporary(entry) or seam_write_in_flight(entry, now):
            continue
        try:
            age = temporary_age(entry, now)
        except FileNotFoundError:  # removed meanwhile by its writer
            continue
        if age is not None and age < older_than_seconds:
            continue
        with try_lock(entry) as free:
            if free:  # nobody writes into it: its writer is gone
                remove_tree(entry)
                if not os.path.lexists(entry):
                    removed.append(entry)
                else:  # could not be removed (permissions): say so rather than claim it
                    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(entry))
    return removed


@contextlib.contextmanager
def try_lock(path: Path):
    """Try to take an exclusive lock on ``path`` without waiting; yields True if taken.

    Yields True also when ``path`` vanished meanwhile or cannot be opened (nothing holds
    it), and False while another process (or thread) holds any lock on it.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        yield True
        return
    try:
        yield flock_fd(fd, wait=False)
    finally:
        os.close(fd)
