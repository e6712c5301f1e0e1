"""Checks that a command can write where it will, before Prefect, Dask or the work start: the
store of ``ingest``, ``train``, ``evaluate`` and ``demo`` (a read-only mount, another user's
folder), and an output path (``--out``, ``plot``'s default file). No heavy import.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from .checks import check_store_creatable, store_choice
from .exits import CliError


def unwritable_reason(path: Path) -> str | None:
    """Why this process cannot write in the existing folder ``path`` (``"Read-only file
    system"``, ``"Permission denied"``), or None when it can."""
    if os.access(path, os.W_OK | os.X_OK):
        return None
    try:
        read_only = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # pragma: no cover - no statvfs (Windows)
        read_only = False
    return os.strerror(errno.EROFS if read_only else errno.EACCES)


def check_store_writable(store, writes: str, subfolders=()):
    """The store of a command that writes it: creatable (:func:`check_store_creatable`) or, when
    it is a folder that exists, writable here, and so are those of its ``subfolders`` that exist.
    ``writes``: what the command writes there, for the message.
    Raises :class:`CliError`: exit code 3, naming the folder, why it cannot be written and what to
    do.
    """
    store_root = check_store_creatable(store)
    root = store_root.path
    if root is None:  # an object store: a denied write is the seam's one-line error
        return store_root
    for folder in (root, *(root / sub for sub in subfolders)):
        reason = unwritable_reason(folder) if folder.is_dir() else None
        if reason:
            _, chosen_by = store_choice(store)
            where = f"check {chosen_by}" if chosen_by else "pass --store"
            inside = f" in {folder}" if folder != root else ""
            raise CliError(f"the store {root} cannot be written ({reason}{inside}): "
                           f"{writes} there. Use a writable store ({where}), or run it as the "
                           "store's owner; reading it (`catdask models`, `predict`, `plot`, "
                           "`check`) still works")
    return store_root


def check_output_writable(path, what: str) -> None:
    """The file or folder ``path`` a command will write can be made here: its nearest existing
    folder is writable (checked before the work, not when writing its result). ``what``: who
    named the path, for the message (``"--out p.csv"``).
    Raises :class:`CliError`: exit code 3, naming the path, the folder and why.
    """
    folder = Path(path).absolute().parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise CliError(f"{what}: cannot be written: {folder} is a file, not a folder")
    reason = unwritable_reason(folder)
    if reason:
        raise CliError(f"{what}: cannot write in {folder} ({reason}); choose a folder you can "
                       "write in")
