"""A store inside a store: the candidates' registry at ``<store>/candidates/``.

:func:`sub_store` gives a :class:`~catdask.store.root.StoreRoot` whose keys all lie under one
folder of another store, so the registry's code runs unchanged on it, on a local folder (a
plain local backend of the sub-folder) and on S3 (:class:`PrefixedBackend`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from ..object_store import Backend, LocalBackend, ObjectMeta
from .root import StoreRoot, open_store


class PrefixedBackend:
    """Another backend's keys below ``prefix/``, seen as a backend of their own."""

    def __init__(self, inner: Backend, prefix: str):
        self.inner, self.prefix = inner, prefix.strip("/")
        self.url = f"{inner.url.rstrip('/')}/{self.prefix}"
        self.chunk_bytes = inner.chunk_bytes

    def __repr__(self) -> str:
        return f"PrefixedBackend({self.url!r})"

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}"

    def _strip(self, meta: ObjectMeta) -> ObjectMeta:
        return dataclasses.replace(meta, key=meta.key[len(self.prefix) + 1:])

    def get(self, key: str) -> tuple[bytes, str]:
        return self.inner.get(self._key(key))

    def head(self, key: str) -> ObjectMeta | None:
        meta = self.inner.head(self._key(key))
        return None if meta is None else self._strip(meta)

    def put(self, key: str, data: bytes) -> str:
        return self.inner.put(self._key(key), data)

    def put_new(self, key: str, data: bytes) -> str:
        return self.inner.put_new(self._key(key), data)

    def put_if_match(self, key: str, data: bytes, version: str) -> str:
        return self.inner.put_if_match(self._key(key), data, version)

    def list(self, prefix: str) -> Iterator[ObjectMeta]:
        for meta in self.inner.list(self._key(prefix)):
            yield self._strip(meta)

    def list_folders(self, prefix: str) -> Sequence[str]:
        return self.inner.list_folders(self._key(prefix))

    def delete(self, key: str) -> None:
        self.inner.delete(self._key(key))

    def zarr_store(self, prefix: str, *, read_only: bool) -> Any:
        return self.inner.zarr_store(self._key(prefix) if prefix else self.prefix,
                                     read_only=read_only)


def sub_store(store, folder: str) -> StoreRoot:
    """The store made of ``store``'s keys below ``folder/``."""
    root = open_store(store)
    if root.path is not None:
        return StoreRoot(LocalBackend(root.path / folder))
    return StoreRoot(PrefixedBackend(root.backend, folder))
