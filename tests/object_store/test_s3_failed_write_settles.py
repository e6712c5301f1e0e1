"""A failed array write on S3 leaves nothing landing afterwards (issue 39, a connection that
drops mid-upload): zarr writes an array's chunks as concurrent tasks and raises the first
failure while the others run on. Seen as ``check --cleanup`` reporting an object of an entry
it had just removed, after a write whose every upload was cut."""

from __future__ import annotations

import asyncio
import time
import uuid

import numpy as np
import pytest

from catdask.object_store import ObjectStoreError
from catdask.store import _zarr_io

from ..helpers.s3_server import BUCKET


def test_no_chunk_lands_after_a_failed_array_write(s3_server, monkeypatch):
    import obstore

    from catdask.object_store.s3 import S3Backend

    backend = S3Backend(BUCKET, f"settle-{uuid.uuid4().hex[:12]}", environ=s3_server.env)
    real_put = obstore.put_async
    calls: list[str] = []

    async def first_fails_others_are_slow(store, key, *args, **kwargs):
        if key.endswith("zarr.json"):  # the array's metadata, written before its chunks
            return await real_put(store, key, *args, **kwargs)
        calls.append(key)
        if len(calls) == 1:
            await asyncio.sleep(0.05)  # the others have started
            raise ConnectionResetError("connection reset by peer (planted)")
        await asyncio.sleep(1.0)  # an upload still being retried
        return await real_put(store, key, *args, **kwargs)

    monkeypatch.setattr(obstore, "put_async", first_fails_others_are_slow)
    arrays = _zarr_io.EntryArrays(backend, "entry")
    with pytest.raises(ObjectStoreError):
        _zarr_io.write_array(arrays, "X", np.arange(80.0).reshape(40, 2), chunks=(5, 2))
    assert len(calls) > 2, "the chunk writes did not overlap: the test did not test"
    landed = sorted(m.key for m in backend.list("entry/"))
    time.sleep(1.5)  # longer than any planted upload takes
    assert sorted(m.key for m in backend.list("entry/")) == landed, \
        "a chunk write landed after write_array had failed"
