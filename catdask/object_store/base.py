"""The few primitives every store backend gives (a local folder, S3): the seam of the store.

Everything about snapshots, pointers, the registry, leases, gc and check is written once,
above these (``catdask.store``); a backend implements only this module's :class:`Backend`.
This is the shape of zarr 3's ``Store`` and of obstore's ``put(mode=...)``: an atomic commit
on object storage needs exactly a create-only write and a compare-and-swap on a version tag.

Keys are ``/``-separated, relative to the store's root, never starting with ``/``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable


@dataclasses.dataclass(frozen=True)
class ObjectMeta:
    """One stored object: its key, size in bytes, version tag and server-side modification time."""

    key: str
    size: int
    #: An opaque tag that changes with every write of the key (the ETag on S3).
    version: str
    #: Seconds since the epoch, by the server's clock (leases and gc's grace period use it).
    last_modified: float


class NotFound(KeyError):
    """The key does not exist."""


class PreconditionFailed(Exception):
    """A conditional write lost: the key exists (create-only) or its version moved (if-match).

    Raised only when the backend is sure the write did not happen: an ambiguous failure (a lost
    response) is resolved by the backend itself, which re-reads the key and compares the write id
    it stamped, before it raises or returns.
    """


@runtime_checkable
class Backend(Protocol):
    """A store's root on one medium. Implementations: ``local.LocalBackend``, ``s3.S3Backend``."""

    #: The store's URL as users write it (a path, or ``s3://bucket/prefix``); never a secret.
    url: str
    #: About how many bytes a chunk of a stored array holds (rows of X per chunk follow it).
    chunk_bytes: int

    def get(self, key: str) -> tuple[bytes, str]:
        """The object's bytes and version tag; :class:`NotFound` if absent."""
        ...

    def head(self, key: str) -> ObjectMeta | None:
        """The object's metadata, or None if absent."""
        ...

    def put(self, key: str, data: bytes) -> str:
        """Write unconditionally; returns the new version. Only for keys nobody else can see yet
        (under a prefix no pointer names)."""
        ...

    def put_new(self, key: str, data: bytes) -> str:
        """Create-only (``If-None-Match: *``); :class:`PreconditionFailed` if the key exists."""
        ...

    def put_if_match(self, key: str, data: bytes, version: str) -> str:
        """Compare-and-swap (``If-Match: version``); :class:`PreconditionFailed` if the key's
        version is no longer ``version`` (or the key is gone)."""
        ...

    def list(self, prefix: str) -> Iterator[ObjectMeta]:
        """Every object whose key starts with ``prefix`` (recursive, any order)."""
        ...

    def list_folders(self, prefix: str) -> Sequence[str]:
        """The names one level below ``prefix`` (``""`` or ending with ``/``) that have keys
        below them (S3's common prefixes), without temporaries; any order. One request on S3
        where :meth:`list` of a large tree takes a page per 1,000 keys."""
        ...

    def delete(self, key: str) -> None:
        """Remove the key; no error if it is already gone."""
        ...

    def zarr_store(self, prefix: str, *, read_only: bool) -> Any:
        """A zarr 3 store rooted at ``prefix`` (``LocalStore`` / ``ObjectStore``)."""
        ...
