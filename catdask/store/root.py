"""A store opened on its backend: the one object every store operation starts from.

``open_store(store)`` reads what a user wrote (``--store``, ``$CATDASK_STORE``, or nothing:
``./catdask-store``) into a :class:`StoreRoot`: the backend that holds the bytes (a local
folder or an S3 prefix, :mod:`catdask.object_store`) and the names under it. Every module of
the store reads and writes through ``root.backend`` with keys made here, so the local and the
S3 store are one design above the backend's few primitives.

::

    datasets/<name>/zarr.json            the pointer (moved by compare-and-swap)
    datasets/<name>/s<N>/...             snapshot N; committed when its zarr.json exists
    datasets/<name>/.newest-snapshot     the highest N ever given (compare-and-swap)
    models/<name>/v<N>/...               version N; committed when its zarr.json exists
    models/<name>/.newest-version        the highest N ever given (compare-and-swap)
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from pathlib import Path

from .. import settings
from ..names import validate_name
from ..object_store import Backend, LocalBackend, open_backend
from ..object_store._fs import TMP_PREFIX

DEFAULT_STORE = "catdask-store"


@dataclasses.dataclass(frozen=True)
class StoreRoot:
    """A store: its backend and, for a local store, its folder."""

    backend: Backend

    @property
    def url(self) -> str:
        """The store as users name it (a folder path or ``s3://bucket/prefix``); no secret."""
        return self.backend.url

    @property
    def path(self) -> Path | None:
        """The local folder, or None on object storage (use it only for local-only extras)."""
        return self.backend.root if isinstance(self.backend, LocalBackend) else None

    @property
    def local_folder(self) -> Path:
        """Where this store's local-only files go (plots, evaluation tables, the Prefect home):
        the store folder itself, or for an object store a cache folder on this machine,
        ``$XDG_CACHE_HOME/catdask/s3/<bucket>/<prefix>`` (default ``~/.cache``); not created
        here."""
        if self.path is not None:
            return self.path
        cache = Path(settings.XDG_CACHE_HOME.get() or Path.home() / ".cache")
        scheme, _, rest = self.url.partition("://")
        return cache / "catdask" / scheme / rest.strip("/")

    def exists(self) -> bool:
        """Whether anything is stored here yet (a local folder exists; an object store has an
        object under its prefix: the first request, so a missing bucket or a wrong credential
        raises its one-line error here)."""
        if self.path is not None:
            return self.path.exists()
        return next(iter(self.backend.list("")), None) is not None

    def check_writable(self) -> None:
        """On an object store, one create-only write and its delete: a missing bucket, a wrong
        credential, an endpoint that is not S3 or a server that ignores conditional writes is
        reported now, in one line (:mod:`catdask.object_store.errors`), before any work starts.
        A local store's checks are the CLI's (``cli.writable``)."""
        if self.path is None:
            key = f"{TMP_PREFIX}probe-{uuid.uuid4().hex}"  # no listing shows a .tmp- key
            self.backend.put_new(key, b"")
            self.backend.delete(key)

    def __str__(self) -> str:
        return self.url

    @staticmethod
    def dataset_key(name: str, *parts: str) -> str:
        """``datasets/<name>/<parts...>`` after validating ``name``."""
        return "/".join(("datasets", validate_name(name, kind="data set"), *parts))

    @staticmethod
    def model_key(name: str, *parts: str) -> str:
        """``models/<name>/<parts...>`` after validating ``name``."""
        return "/".join(("models", validate_name(name, kind="model"), *parts))


def open_store(store: str | os.PathLike[str] | StoreRoot | None = None) -> StoreRoot:
    """The store named by ``store``, else ``$CATDASK_STORE``, else ``./catdask-store``.

    Nothing is contacted: a wrong bucket or credential is reported by the first request.

    Raises
    ------
    StoreURLError
        A URL catdask cannot open (``gs://``, ``s3:/bucket``, ...), in one line.
    NotADirectoryError
        A local store path that is a file.
    """
    if isinstance(store, StoreRoot):
        return store
    if store is None:
        store = settings.STORE.get() or DEFAULT_STORE
    backend = open_backend(store)
    if isinstance(backend, LocalBackend):
        root = backend.root
        if root.exists() and not root.is_dir():
            raise NotADirectoryError(f"store {root} is a file, not a folder (a store is the "
                                     "folder that holds datasets/ and models/)")
        backend = LocalBackend(root.resolve(), url=None if backend.url == str(backend.root)
                               else backend.url)
    return StoreRoot(backend)
