"""Where the store lives and how it is laid out on disk.

::

    <root>/datasets/<name>/          one zarr v3 group per data set
    <root>/models/<name>/v<N>/       one zarr v3 group per immutable model version
    .../.tmp-*                       private temporaries of running (or crashed) writers

The root is, in order: the ``path`` argument, the ``CATDASK_STORE`` environment variable,
``./catdask-store``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..names import is_valid_name, validate_name
from ._atomic import TMP_PREFIX, is_temporary, remove_temporaries

__all__ = [
    "DEFAULT_STORE",
    "STORE_ENV",
    "resolve_store",
    "datasets_dir",
    "models_dir",
    "entry_path",
    "cleanup_temporaries",
]

DEFAULT_STORE = "catdask-store"
STORE_ENV = "CATDASK_STORE"
ASIDE_PREFIX = TMP_PREFIX + "aside-"


def resolve_store(path=None) -> Path:
    """Absolute path of the store root (not created here; writers create what they need).

    Parameters
    ----------
    path : str or os.PathLike, optional
        Explicit root. Defaults to ``$CATDASK_STORE``, then ``./catdask-store``.
    """
    if path is None:
        path = os.environ.get(STORE_ENV) or DEFAULT_STORE
    root = Path(path).expanduser()
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"Store root {root} exists but is not a directory.")
    return root.resolve()


def datasets_dir(root: Path) -> Path:
    return root / "datasets"


def models_dir(root: Path) -> Path:
    return root / "models"


def entry_path(parent: Path, name: str, kind: str) -> Path:
    """``parent/name`` after validating ``name`` (so it cannot leave ``parent``)."""
    return parent / validate_name(name, kind=kind)


def list_entries(parent: Path) -> list[str]:
    """Sorted names of the visible (non-dot) directories under ``parent``."""
    if not parent.is_dir():
        return []
    return sorted(p.name for p in parent.iterdir() if p.is_dir() and not p.name.startswith("."))


def cleanup_temporaries(store=None, older_than_seconds: float = 3600.0) -> list[Path]:
    """Remove temporaries left by crashed writers; restore a data set lost mid-replace.

    A data-set replacement renames the old version aside (``.tmp-aside-<name>-<id>``), renames
    the new one into place, then deletes the old one. If a crash happened between the two
    renames, the data set is missing and its old copy is still aside: it is renamed back
    instead of being deleted.

    Parameters
    ----------
    store : path, optional
        Store root (see :func:`resolve_store`).
    older_than_seconds : float, default 3600
        Only temporaries at least this old are touched, so writers still running are safe.
        Use 0 when no writer can be running.

    Returns
    -------
    list of Path
        The temporaries removed (restored ones are not included).
    """
    root = resolve_store(store)
    removed: list[Path] = []
    ds = datasets_dir(root)
    if ds.is_dir():
        _restore_orphaned_asides(ds, older_than_seconds)
        removed += remove_temporaries(ds, older_than_seconds)
    md = models_dir(root)
    if md.is_dir():
        removed += remove_temporaries(md, older_than_seconds)
        for model in md.iterdir():
            if model.is_dir() and not model.name.startswith("."):
                removed += remove_temporaries(model, older_than_seconds)
    return removed


def _restore_orphaned_asides(ds: Path, older_than_seconds: float) -> None:
    now = time.time()
    for entry in sorted(ds.iterdir()):
        if not (is_temporary(entry) and entry.name.startswith(ASIDE_PREFIX)):
            continue
        name = entry.name[len(ASIDE_PREFIX) :].rsplit("-", 1)[0]
        target = ds / name
        try:
            old = now - entry.lstat().st_mtime >= older_than_seconds
        except FileNotFoundError:
            continue
        if old and is_valid_name(name) and not target.exists():
            try:
                os.rename(entry, target)
            except OSError:
                pass  # keep the only copy; the next cleanup tries again
