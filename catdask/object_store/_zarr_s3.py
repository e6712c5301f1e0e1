"""zarr's ``ObjectStore`` for the S3 backend (:mod:`catdask.object_store.s3`): each chunk in one
PUT, and pickled as the store's URL and prefix, never its credentials."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import AsyncGenerator, Callable
from typing import Any

from .errors import ObjectStoreError

# A DEBUG line per object read, so that a Dask worker's log shows what it read from where
# (DASK_LOGGING='{"catdask.object_store": "debug"}' on the worker); the endpoint, never a secret.
_reads = logging.getLogger("catdask.object_store")

#: How long a failed writer waits for its other chunk uploads (one upload's retries, 30 s,
#: and a dead connection's timeout, 120 s, in s3.py).
SETTLE_TIMEOUT_S = 180.0


def settle_writes(zarr_store: Any) -> None:
    """After a write through ``zarr_store`` failed: refuse its further writes and wait for
    those in flight, so that nothing lands after the writer has cleaned up. On S3 only: a
    failed upload is retried while zarr's other chunk uploads run on."""
    store_class: Any = single_put_store_class()
    if isinstance(zarr_store, store_class):
        zarr_store.settle(SETTLE_TIMEOUT_S)


@functools.cache
def single_put_store_class() -> type:
    """zarr's ``ObjectStore`` writing each chunk in one PUT: obstore's default multipart upload
    for more than 5 MiB made a 32 MiB chunk (the store's size) 30% slower on SeaweedFS, and a
    chunk is in memory anyway. Made on first use: importing zarr's store imports obstore."""
    from zarr.storage import ObjectStore

    class SinglePutObjectStore(ObjectStore):
        """Pickled as ``(url, prefix)`` and reopened from the environment where it is
        unpickled: a Dask worker reads with its own credentials, and no task carries one
        (obstore's store would pickle its configuration, secret included)."""

        def __init__(self, store: Any, *, read_only: bool = False,
                     reopen: tuple[Callable[..., Any], tuple[str, str]] | None = None,
                     first_use: Callable[[], Any] | None = None,
                     errors: Callable[[BaseException, str, str], ObjectStoreError]
                     | None = None):
            super().__init__(store, read_only=read_only)
            self._reopen = reopen  # (function, (url, prefix)): reopens it where unpickled
            # The backend's one-line errors: obstore's own (a dropped connection's is a
            # 20-line Rust debug dump) read as a damaged chunk to zarr's callers.
            self._errors = errors
            # The access check of a store reopened by unpickling, run on its first read: in
            # the task that reads, whose error (wrong credentials: one line) reaches the
            # caller. Run while unpickling, it failed the worker's message handler and the
            # fit waited for ever.
            self._first_use = first_use
            # Chunk PUTs in flight. zarr writes an array's chunks as concurrent tasks and
            # raises the first failure while the others run on (obstore retries them): one
            # could land after the writer has failed and its entry was removed, an object of
            # no snapshot that `check` reports. settle() waits for them.
            self._writes = threading.Condition()
            self._writing, self._refusing = 0, False

        def _error(self, exc: Exception, op: str, key: str) -> Exception:
            if self._errors is None or isinstance(exc, ObjectStoreError):
                return exc
            return self._errors(exc, op, f"{self.store.prefix or ''}/{key}".lstrip("/"))

        async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
            if self._first_use is not None:
                check, self._first_use = self._first_use, None
                check()
            try:
                value = await super().get(key, prototype, byte_range)
            except Exception as exc:  # noqa: BLE001 - classified
                raise self._error(exc, "get", key) from None
            if value is not None and _reads.isEnabledFor(logging.DEBUG):
                _reads.debug("read s3://%s/%s (%d bytes) from %s", self.store.config.get(
                    "bucket", "?"), f"{self.store.prefix}/{key}".lstrip("/"), len(value),
                    self.store.config.get("endpoint", "AWS S3"))
            return value

        async def exists(self, key: str) -> bool:
            try:
                return await super().exists(key)
            except Exception as exc:  # noqa: BLE001 - classified
                raise self._error(exc, "head", key) from None

        async def _list(self, prefix: str | None = None) -> AsyncGenerator[Any, None]:
            try:
                async for item in super()._list(prefix):
                    yield item
            except Exception as exc:  # noqa: BLE001 - classified
                raise self._error(exc, "list", prefix or "") from None

        def __reduce__(self) -> Any:
            if self._reopen is None:  # a copy zarr made (with_read_only): not re-openable
                raise TypeError("this zarr store of an S3 store is not pickled (it would carry "
                                "credentials); open the store's URL where it is used")
            function, (url, prefix) = self._reopen
            return function, (url, prefix, self.read_only)

        async def set(self, key: str, value: Any) -> None:
            import obstore

            self._check_writable()
            with self._writes:
                if self._refusing:  # a chunk write failed: the writer is giving up
                    raise self._error(RuntimeError("an earlier write of this array failed"),
                                      "put", key)
                self._writing += 1
            try:
                await obstore.put_async(self.store, key, value.as_buffer_like(),
                                        use_multipart=False)
            except Exception as exc:  # noqa: BLE001 - classified
                with self._writes:
                    self._refusing = True
                raise self._error(exc, "put", key) from None
            finally:
                with self._writes:
                    self._writing -= 1
                    self._writes.notify_all()

        def settle(self, timeout_s: float) -> None:
            """Refuse new writes and wait until none is in flight (after a failed write of
            an array, before its writer removes what it wrote)."""
            with self._writes:
                self._refusing = True
                self._writes.wait_for(lambda: self._writing == 0, timeout=timeout_s)

    return SinglePutObjectStore
