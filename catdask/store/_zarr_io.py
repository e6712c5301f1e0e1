"""Safe reading and writing of numeric zarr v3 arrays.

Before zarr opens anything, the JSON metadata (``zarr.json``) is read and checked by hand:
only numeric data types and a short list of compression codecs are accepted. That keeps
loading free of code execution whatever a store was tampered with (no object/string dtypes, no
pickle-based codecs) and turns zarr's low-level errors (``RuntimeError: Zstd decompression
error`` for a truncated chunk) into :class:`~catdask.errors.StoreCorruptError` naming the entry.
"""

from __future__ import annotations

import contextlib

import numpy as np
import zarr

from ..dataset_pointer import location, read_zarr_json
from ..errors import StoreCorruptError
from ..object_store import Backend, settle_writes
from ..object_store.errors import ObjectStoreError

NUMERIC_DTYPES = frozenset(
    [
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    ]
)
# Codecs that only (de)compress or reorder bytes. Anything else (vlen-utf8, vlen-bytes, unknown
# plug-ins) is refused: stores hold numbers only.
_SAFE_CODECS = frozenset(
    [
        "bytes",
        "endian",
        "transpose",
        "zstd",
        "blosc",
        "gzip",
        "crc32c",
        "sharding_indexed",
        "numcodecs.zstd",
        "numcodecs.zlib",
        "numcodecs.gzip",
        "numcodecs.blosc",
        "numcodecs.lz4",
        "numcodecs.bz2",
        "numcodecs.lzma",
        "numcodecs.crc32",
        "numcodecs.crc32c",
        "numcodecs.shuffle",
    ]
)
# Zarr writes fill_value into chunks that are absent; writing every chunk explicitly makes
# "chunk file missing" detectable (nchunks_initialized < nchunks) instead of silently zeros.
_ARRAY_CONFIG = {"write_empty_chunks": True}
# zarr's default compression, then a crc32c of each compressed chunk, which zarr checks on every
# read ("Stored and computed checksum do not match"): a damaged chunk read on a worker is an
# error (catdask.stored_arrays), not numbers. Arrays written before it have no crc32c and read.
_COMPRESSORS = (zarr.codecs.ZstdCodec(), zarr.codecs.Crc32cCodec())


def _relative(key: str, entry_key: str) -> str:
    return key[len(entry_key) + 1:] if key.startswith(entry_key + "/") else key


def read_node(backend: Backend, node_key: str, entry_key: str, *, missing_ok=False):
    """Parse ``<node_key>/zarr.json`` as zarr v3 metadata; any problem is reported against the
    entry ``entry_key``. None when it is absent and ``missing_ok``."""
    meta = read_zarr_json(backend, node_key, entry_key, missing_ok=missing_ok)
    if meta is None and missing_ok:
        return None
    if not isinstance(meta, dict) or meta.get("zarr_format") != 3:
        where = _relative(f"{node_key}/zarr.json", entry_key)
        raise StoreCorruptError(location(backend, entry_key), f"{where} is not zarr v3 metadata")
    return meta


def _check_codecs(codecs, entry, where: str) -> None:
    if not isinstance(codecs, list):
        raise StoreCorruptError(entry, f"{where}: 'codecs' is not a list")
    for codec in codecs:
        name = codec.get("name") if isinstance(codec, dict) else codec
        if name not in _SAFE_CODECS:
            raise StoreCorruptError(
                entry,
                f"{where} uses codec {name!r}, which catdask does not load "
                "(only numeric arrays with standard compression are accepted)",
            )
        if name == "sharding_indexed":
            conf = codec.get("configuration", {})
            _check_codecs(conf.get("codecs", []), entry, where)
            _check_codecs(conf.get("index_codecs", []), entry, where)


def check_array_node(backend: Backend, array_key: str, entry_key: str, *,
                     dtypes=NUMERIC_DTYPES, ndim=None) -> dict:
    """Validate an array's ``zarr.json`` (node type, numeric dtype, safe codecs, ndim)."""
    meta = read_node(backend, array_key, entry_key)
    where = _relative(array_key, entry_key)
    entry = location(backend, entry_key)
    if meta.get("node_type") != "array":
        raise StoreCorruptError(entry, f"{where} is not an array")
    dtype = meta.get("data_type")
    if not isinstance(dtype, str) or dtype not in NUMERIC_DTYPES:
        raise StoreCorruptError(
            entry,
            f"array {where!r} has data type {dtype!r}; only numeric arrays are allowed "
            "(object/string arrays are rejected: stores never hold pickles or objects)",
        )
    if dtype not in dtypes:
        raise StoreCorruptError(
            entry, f"array {where!r} has data type {dtype}, expected one of {sorted(dtypes)}"
        )
    shape = meta.get("shape")
    if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise StoreCorruptError(entry, f"array {where!r} has an invalid shape {shape!r}")
    if ndim is not None and len(shape) != ndim:
        raise StoreCorruptError(
            entry, f"array {where!r} has {len(shape)} dimensions, expected {ndim}"
        )
    _check_codecs(meta.get("codecs", []), entry, f"array {where!r}")
    return meta


@contextlib.contextmanager
def damage_as_corrupt(entry, what: str):
    """zarr's errors inside as :class:`StoreCorruptError` of ``entry`` ("<what>: <error>"); an
    ObjectStoreError (the medium failed, e.g. a dropped connection: nothing is known about the
    entry) and a StoreCorruptError pass unchanged."""
    try:
        yield
    except (ObjectStoreError, StoreCorruptError):
        raise
    except Exception as exc:  # zarr, zstd and blosc raise a variety of types
        raise StoreCorruptError(entry, f"{what}: {exc}") from exc


def open_group_at(backend: Backend, entry_key: str) -> zarr.Group:
    """Open entry ``entry_key`` read-only as a zarr group after checking its JSON."""
    meta = read_node(backend, entry_key, entry_key)
    entry = location(backend, entry_key)
    if meta.get("node_type") != "group":
        raise StoreCorruptError(entry, "zarr.json does not describe a group")
    with damage_as_corrupt(entry, "zarr cannot open the group"):
        return zarr.open_group(store=backend.zarr_store(entry_key, read_only=True), mode="r")


def open_array_at(group: zarr.Group, name: str, backend: Backend, entry_key: str,
                  **check) -> zarr.Array:
    """Check ``<entry_key>/<name>/zarr.json`` then return the zarr array (not yet read)."""
    check_array_node(backend, f"{entry_key}/{name}", entry_key, **check)
    entry = location(backend, entry_key)
    with damage_as_corrupt(entry, f"zarr cannot open array {name!r}"):
        arr = group[name]
    if not isinstance(arr, zarr.Array):
        raise StoreCorruptError(entry, f"{name!r} is not an array")
    return arr


def check_chunks(arr: zarr.Array, entry, name: str) -> None:
    """Every chunk file of ``arr`` exists (a missing one would read as fill values)."""
    with damage_as_corrupt(entry, f"cannot list chunks of array {name!r}"):
        n_init = arr.nchunks_initialized
    if n_init != arr.nchunks:
        raise StoreCorruptError(
            entry,
            f"array {name!r} has {arr.nchunks - n_init} of {arr.nchunks} chunk file(s) "
            "missing (deleted or never written)",
        )


def read_array(arr: zarr.Array, entry, name: str) -> np.ndarray:
    """Read a whole array, turning missing or damaged chunks into StoreCorruptError."""
    check_chunks(arr, entry, name)
    with damage_as_corrupt(
            entry, f"array {name!r} cannot be read (truncated or corrupt chunk?)"):
        data = arr[...]
    return np.asarray(data)


def write_array(group: zarr.Group, name: str, data: np.ndarray, chunks=None, fill_value=None):
    """Create array ``name`` in ``group`` and write ``data`` (every chunk written explicitly,
    each with a crc32c checksum)."""
    arr = group.create_array(
        name,
        shape=data.shape,
        chunks=chunks if chunks is not None else row_chunks(data.shape, data.dtype.itemsize),
        dtype=data.dtype,
        fill_value=fill_value,
        compressors=_COMPRESSORS,
        config=_ARRAY_CONFIG,
    )
    if data.size:
        try:
            arr[...] = data
        except BaseException:
            settle_writes(arr.store)  # no chunk lands after the writer has cleaned up
            raise
    return arr


class EntryArrays:
    """A writer's view of an entry that is not committed yet (a data set's snapshot, a model's
    version): each array is created as the root array of its own zarr store
    (``<entry>/<name>``), so zarr writes no group document; the entry's ``zarr.json``, written
    last, commits it. Duck-types the ``create_array`` of a group for :func:`write_array`."""

    def __init__(self, backend: Backend, entry_key: str):
        self.backend, self.entry_key = backend, entry_key

    def create_array(self, name: str, **kwargs) -> zarr.Array:
        store = self.backend.zarr_store(f"{self.entry_key}/{name}", read_only=False)
        return zarr.create_array(store=store, **kwargs)


def row_chunks(shape, itemsize: int, target_bytes: int = 32 * 2**20) -> tuple[int, ...]:
    """Chunk shape that splits only the first axis, about ``target_bytes`` per chunk.

    Few large row blocks suit the Dask engine (docs/design.md section 5).
    """
    if len(shape) == 0:
        return ()
    row_bytes = itemsize * int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else itemsize
    rows = max(1, target_bytes // max(1, row_bytes))
    return (max(1, min(int(shape[0]), rows)),) + tuple(max(1, int(s)) for s in shape[1:])
