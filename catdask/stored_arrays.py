"""Reading a stored data set's arrays so that a chunk that cannot be read is an error, never a
fill value.

zarr reads an absent chunk as the fill value; every snapshot is written with all of its chunks
(``write_empty_chunks``), so an absent one is lost (docs/architecture.md).
"""

from __future__ import annotations

import re

import zarr
from zarr.storage import WrapperStore

from .errors import CatdaskError, StoreCorruptError

# A chunk's key under zarr v3's default encoding: "c/<i>/<j>" below the array's path.
_CHUNK_KEY = re.compile(r"(?:^|/)c(?:/\d+)*$")


class ChunkCheckedStore(WrapperStore):
    """A read-only view of a snapshot's zarr store in which an absent chunk is an error.

    Parameters
    ----------
    store : zarr store
        The snapshot's store (a local folder, or an object-store prefix).
    entry : str
        The snapshot, as the error names it (its path or URL).
    """

    def __init__(self, store, entry: str):
        super().__init__(store)
        self.entry = str(entry)

    def _with_store(self, store):
        return type(self)(store, self.entry)

    async def get(self, key, prototype, byte_range=None):
        value = await self._store.get(key, prototype, byte_range)
        if value is None and _CHUNK_KEY.search(key):
            raise StoreCorruptError(
                self.entry,
                f"chunk {key} is missing (deleted, or the store is not visible at this path on "
                "the machine reading it); a missing chunk is never read as a fill value. "
                "Re-ingest the data set if it was deleted.",
            )
        return value


def checked_array(arr: zarr.Array, entry) -> zarr.Array:
    """``arr`` reopened read-only through a :class:`ChunkCheckedStore` (it pickles with it, so
    the check runs wherever the array is read)."""
    if isinstance(arr.store, ChunkCheckedStore):
        return arr
    store = ChunkCheckedStore(arr.store, str(entry))
    return zarr.open_array(store=store, path=arr.path, mode="r", zarr_format=3)


def _read_block(arr, index, asarray=True, lock=None):
    """Dask's getter for one block of a checked array: a chunk that fails its checksum or
    cannot be decompressed becomes a :class:`StoreCorruptError` naming the snapshot and rows."""
    from dask.array.core import getter

    try:
        return getter(arr, index, asarray=asarray, lock=lock)
    except CatdaskError:
        raise
    except (ValueError, RuntimeError) as exc:  # crc32c mismatch: ValueError; bad zstd frame
        rows = index[0] if isinstance(index, tuple) and index else index
        where = f"rows {rows.start}:{rows.stop}" if isinstance(rows, slice) else f"{index}"
        raise StoreCorruptError(
            arr.store.entry,
            f"array {arr.basename!r} {where} cannot be read (a damaged chunk: {exc}). "
            "Re-ingest the data set.",
        ) from exc


def is_checked(arr) -> bool:
    """True for a zarr array opened by :func:`checked_array` (a stored data set's)."""
    return isinstance(arr, zarr.Array) and isinstance(arr.store, ChunkCheckedStore)


def dask_array(arr: zarr.Array, entry=None):
    """A Dask array with one block per stored chunk of ``arr`` (a stored data set's array),
    read through :func:`checked_array` on the workers; ``entry`` may be left out when ``arr``
    is already checked."""
    import dask.array as da
    from dask.base import tokenize

    arr = arr if entry is None and is_checked(arr) else checked_array(arr, entry)
    name = f"stored-{arr.basename}-" + tokenize(arr)
    return da.from_array(arr, chunks=arr.chunks, name=name, getitem=_read_block)
