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

import contextlib
import errno
import os
from pathlib import Path
from urllib.parse import urlsplit

from .. import settings
from ..object_store import LocalBackend, is_object_store_url, open_backend, url_scheme
from ..errors import StoreWriteError
from ._atomic import (
    READ_ONLY_ERRNOS,
    is_temporary,
    seam_write_in_flight,
    remove_temporaries,
    remove_tree,
    temporary_age,
)
from .root import StoreRoot

DEFAULT_STORE = "catdask-store"
#: The highest version number ever reserved under a model name (never given twice).
MODEL_COUNTER = ".newest-version"
#: The highest snapshot number ever given under a data-set name (never given twice).
SNAPSHOT_COUNTER = ".newest-snapshot"
STORE_ENV = settings.STORE.name




def resolve_store(path=None) -> Path:
    """Absolute path of the store root (not created here; writers create what they need).

    Parameters
    ----------
    path : str or os.PathLike, optional
        Explicit root. Defaults to ``$CATDASK_STORE``, then ``./catdask-store``.

    Raises
    ------
    ValueError
        ``path`` is a URL other than ``file://`` (``s3://bucket/prefix``, ``s3:/bucket``): the
        store lives on a file system only so far, and writing a local folder named ``s3:``
        instead would lose the user's data silently.
    """
    if path is None:
        path = settings.STORE.get() or DEFAULT_STORE
    if hasattr(path, "backend"):  # a StoreRoot (store.root), opened by the caller
        if path.path is None:
            raise ValueError(_url_refusal(path.url))
        return path.path
    if isinstance(path, str) and url_scheme(path) is not None:
        if is_object_store_url(path):
            raise ValueError(_url_refusal(path))
        # The seam's reading of a URL: file:// names a folder, anything else is one line.
        path = _local_backend_root(open_backend(path))
    root = Path(path).expanduser()
    if root.exists() and not root.is_dir():
        # Worded as the CLI's other store messages ("store X does not exist ...").
        raise NotADirectoryError(f"store {root} is a file, not a folder (a store is the folder "
                                 "that holds datasets/ and models/)")
    return root.resolve()


def _url_refusal(url: str) -> str:
    """The one line that refuses an object-store URL; it names the URL without credentials or
    query (``s3://KEY:SECRET@bucket`` or a presigned query must never reach a log)."""
    parts = urlsplit(url)
    shown = f"{parts.scheme.lower()}://{parts.hostname or ''}{parts.path}"
    return (f"the store {shown} is an object-store URL, and this catdask keeps its store on a "
            "file system only (a local folder, or a shared mount on a cluster): give a folder "
            "path with --store or $CATDASK_STORE")


def _local_backend_root(backend) -> Path:
    if not isinstance(backend, LocalBackend):  # an s3:// URL written with a leading space
        raise ValueError(_url_refusal(backend.url.strip()))
    return backend.root


def datasets_dir(root: Path) -> Path:
    return root / "datasets"


def models_dir(root: Path) -> Path:
    return root / "models"


def evaluation_dir(store=None, when=None) -> Path:
    """``<store>/evaluations/<UTC time>`` (an object store's: in its local folder,
    :attr:`~catdask.store.root.StoreRoot.local_folder`): where an evaluation writes its tables unless told
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

    from .root import open_store

    when = datetime.now(timezone.utc) if when is None else when.astimezone(timezone.utc)
    return open_store(store).local_folder / "evaluations" / when.strftime("%Y%m%dT%H%M%SZ")


def local_temporaries(root: Path) -> list[Path]:
    """The ``.tmp-*`` entries of a local store's data sets (``datasets/``, each data set and
    its snapshots, and their lease folders) that no running write can own: earlier versions'
    writer temporaries, and the seam's own older than a minute."""
    found = []
    parent = datasets_dir(root)
    folders = [parent] + ([p for p in parent.iterdir() if p.is_dir()] if parent.is_dir() else [])
    for folder in list(folders[1:]):
        folders += [p for p in folder.iterdir() if p.is_dir() and not is_temporary(p)]
    for folder in folders:
        with contextlib.suppress(FileNotFoundError):
            for entry in folder.iterdir():
                if is_temporary(entry) and not seam_write_in_flight(entry):
                    found.append(entry)
    return sorted(found)


def _age(path: Path) -> float | None:
    try:
        return temporary_age(path)
    except FileNotFoundError:
        return 0.0


def remove_local_temporaries(root: Path, older_than_seconds: float) -> list[Path]:
    """Remove a local store's leftover ``.tmp-*`` temporaries (:func:`local_temporaries`, and
    models' temporaries whose lock is free) at least ``older_than_seconds`` old."""
    removed: list[Path] = []
    for entry in local_temporaries(root):
        age = _age(entry)
        if age is None or age >= older_than_seconds:
            remove_tree(entry)
            if os.path.lexists(entry):  # could not be removed: say so rather than claim it
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(entry))
            removed.append(entry)
    parent = models_dir(root)
    if parent.is_dir():
        removed += remove_temporaries(parent, older_than_seconds)  # nothing writes here now
        for entry in sorted(parent.iterdir()):
            if not entry.is_dir() or entry.name.startswith("."):
                continue
            # An earlier catdask's registrations wrote (and locked) temporaries here.
            removed += remove_temporaries(entry, older_than_seconds)
    return removed


def space_hint(err) -> str:
    """What to do on a full disk (empty for other errors)."""
    if err in (errno.ENOSPC, errno.EDQUOT):
        return (" To free space, `catdask gc` removes data-set snapshots that no model and no "
                "running reader needs (`catdask gc --dry-run` lists them).")
    return ""


def _read_only_error(root, action: str, err: int, detail: str = "") -> StoreWriteError:
    done = ("stopped at the first file it could not change" if detail
            else "so it changed nothing")
    return StoreWriteError(
        err,
        f"the store {root} cannot be written ({os.strerror(err)}{detail}): {action} removes "
        f"files there, {done}. Run it as the store's owner or on a writable mount; "
        "`catdask check` without --cleanup only reads.",
        str(root),
    )


def require_writable(root: Path | StoreRoot, action: str) -> None:
    """Refuse at once, in one clear line, to change a store that cannot be written.

    Raises
    ------
    StoreWriteError
        (errno EROFS or EACCES) ``root`` is on a read-only mount or not writable by this user.
        An object store's permissions are answered by its first request instead.
    """
    if isinstance(root, StoreRoot):
        if root.path is None:
            return
        root = root.path
    if root.is_dir() and not os.access(root, os.W_OK):
        try:
            st = os.statvfs(root)
            err = errno.EROFS if st.f_flag & os.ST_RDONLY else errno.EACCES
        except (OSError, AttributeError):  # pragma: no cover - no statvfs (Windows)
            err = errno.EACCES
        raise _read_only_error(root, action, err)


@contextlib.contextmanager
def read_only_answer(root: Path | StoreRoot, action: str):
    """Turn a permission or read-only error met while changing the store (a folder of
    another user, a mount made read-only meanwhile) into the same one-line
    :class:`StoreWriteError` as :func:`require_writable`."""
    try:
        yield
    except StoreWriteError:
        raise
    except OSError as exc:
        if exc.errno not in READ_ONLY_ERRNOS:
            raise
        where = f" at {exc.filename}" if exc.filename else ""
        raise _read_only_error(root, action, exc.errno, where) from exc


@contextlib.contextmanager
def changing_store(root: Path | StoreRoot, action: str, *, writes: bool = True):
    """The guard around a maintenance ``action`` that changes the store (``gc``,
    ``check --cleanup``): refuse at once when the store cannot be written
    (:func:`require_writable`; skipped with ``writes=False``, a dry run), and turn a
    permission or read-only error met meanwhile into the same one-line error
    (:func:`read_only_answer`).
    """
    if writes:
        require_writable(root, action)
    with read_only_answer(root, action):
        yield
