"""The few POSIX file-system helpers both the local backend and ``catdask.store`` use.

They live here, below the store, because the local backend (a lower layer than ``store``, so
``distributed`` can read data sets through it) needs them too; ``catdask.store._atomic``
imports them from here rather than keeping a copy.
"""

from __future__ import annotations

import os
from pathlib import Path

try:
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - Windows: no flock
    _fcntl = None  # type: ignore[assignment]

#: Everything a store writes privately starts with this prefix; listings skip it and cleanups
#: remove it. Valid entry names never start with '.' (names.py).
TMP_PREFIX = ".tmp-"


def is_temporary_name(name: str) -> bool:
    """True for the name (one path component) of a store's own temporary file or folder."""
    return name.startswith(TMP_PREFIX)


def fsync_dir(path: Path) -> None:
    """fsync a directory entry (makes a completed rename durable); no-op where unsupported."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def flock_fd(fd: int, shared: bool = False, wait: bool = True) -> bool:
    """flock ``fd``; False if ``wait`` is False and someone else holds it. Where flock does
    not exist (Windows) this is a no-op that reports success."""
    if _fcntl is None:  # pragma: no cover - Windows
        return True
    flags = (_fcntl.LOCK_SH if shared else _fcntl.LOCK_EX) | (0 if wait else _fcntl.LOCK_NB)
    try:
        _fcntl.flock(fd, flags)
    except BlockingIOError:
        return False
    return True
