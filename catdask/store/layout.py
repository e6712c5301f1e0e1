"""Where the store lives and how it is laid out on disk.

::

    <root>/datasets/<name>/s<N>/     immutable data-set snapshots (zarr v3 groups)
    <root>/datasets/<name>/zarr.json the pointer to the current snapshot
    <root>/models/<name>/v<N>/       one zarr v3 group per immutable model version
    .../.tmp-*                       private temporaries of running (or crashed) writers

The root is, in order: the ``path`` argument, the ``CATDASK_STORE`` environment variable,
``./catdask-store``.
"""

from __future__ import annotations

from pathlib import Path

from .. import settings
from ..names import validate_name
from ._atomic import file_lock, remove_temporaries

__all__ = [
    "DEFAULT_STORE",
    "STORE_ENV",
    "resolve_store",
    "datasets_dir",
    "models_dir",
    "evaluation_dir",
    "entry_path",
    "cleanup_temporaries",
]

DEFAULT_STORE = "catdask-store"
STORE_ENV = settings.STORE.name


def resolve_store(path=None) -> Path:
    """Absolute path of the store root (not created here; writers create what they need).

    Parameters
    ----------
    path : str or os.PathLike, optional
        Explicit root. Defaults to ``$CATDASK_STORE``, then ``./catdask-store``.
    """
    if path is None:
        path = settings.STORE.get() or DEFAULT_STORE
    root = Path(path).expanduser()
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"Store root {root} exists but is not a directory.")
    return root.resolve()


def datasets_dir(root: Path) -> Path:
    return root / "datasets"


def models_dir(root: Path) -> Path:
    return root / "models"


def evaluation_dir(store=None, when=None) -> Path:
    """``<store>/evaluations/<UTC time>``: where an evaluation writes its tables unless told
    otherwise, so that neither ``catdask evaluate`` nor a served evaluation run writes into
    the folder it happens to run from.

    Parameters
    ----------
    store : str or os.PathLike, optional
        The store root (see :func:`resolve_store`).
    when : datetime, optional
        The time in the folder's name (default: now), as ``YYYYmmddTHHMMSSZ`` in UTC.
    """
    from datetime import datetime, timezone

    when = datetime.now(timezone.utc) if when is None else when.astimezone(timezone.utc)
    return resolve_store(store) / "evaluations" / when.strftime("%Y%m%dT%H%M%SZ")


def entry_path(parent: Path, name: str, kind: str) -> Path:
    """``parent/name`` after validating ``name`` (so it cannot leave ``parent``)."""
    return parent / validate_name(name, kind=kind)


def list_entries(parent: Path) -> list[str]:
    """Sorted names of the visible (non-dot) directories under ``parent``."""
    if not parent.is_dir():
        return []
    return sorted(p.name for p in parent.iterdir() if p.is_dir() and not p.name.startswith("."))


def cleanup_temporaries(store=None, older_than_seconds: float = 3600.0) -> list[Path]:
    """Remove temporaries left by crashed writers (data sets, their snapshots, models).

    A running writer holds a lock on its temporary, which is never removed; a crashed one's
    is. Snapshots and pointers are not touched here: see
    :func:`~catdask.store.check.check_store` (``cleanup=True``) and
    :func:`~catdask.store.gc.gc_store`.

    Parameters
    ----------
    store : path, optional
        Store root (see :func:`resolve_store`).
    older_than_seconds : float, default 3600
        Only temporaries at least this old are touched (a second guard besides the lock, and
        the only one where the OS has no advisory locks). 0 removes every unlocked one.

    Returns
    -------
    list of Path
        The temporaries removed.
    """
    root = resolve_store(store)
    removed: list[Path] = []
    for parent in (datasets_dir(root), models_dir(root)):
        if not parent.is_dir():
            continue
        removed += remove_temporaries(parent, older_than_seconds)
        for entry in sorted(parent.iterdir()):
            if not entry.is_dir() or entry.name.startswith("."):
                continue
            if parent == models_dir(root):
                removed += remove_temporaries(entry, older_than_seconds)
                continue
            # A data set's pointer temporary is written under the name lock (unlocked file):
            # take that lock so a commit in progress keeps it.
            with file_lock(entry / ".lock"):
                removed += remove_temporaries(entry, older_than_seconds)
    return removed
