"""A chunk of a stored data set that cannot be read on a worker is an error, never a fill value.

On a real local Dask cluster (one worker process, so the arrays travel pickled as they do to a
remote worker): a chunk of X deleted after the driver checked the snapshot (or not visible on
the worker), and a chunk with one byte changed, fail the fit with
:class:`~catdask.errors.StoreCorruptError` naming the chunk or rows, through both readers (the
store's :func:`open_dataset_arrays` as ``fit_on_dataset`` uses it, and ``fit(path)``); a
snapshot written before chunks carried a crc32c still reads; the labels are read on the driver.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from catdask import CategorySpace  # noqa: E402
from catdask.distributed.cluster import start_local_cluster  # noqa: E402
from catdask.errors import StoreCorruptError  # noqa: E402
from catdask.pipeline import ModelSpec, fit_on_dataset  # noqa: E402
from catdask.store import _zarr_io, open_dataset_arrays, read_dataset, verify_dataset  # noqa: E402
from catdask.store import datasets as store_datasets  # noqa: E402
from catdask.store import write_dataset  # noqa: E402
from tests.helpers.data import make_blobs  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
SPEC = ModelSpec(n_restarts=1)


@pytest.fixture(scope="module")
def client():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster, c = start_local_cluster(1)
    with c:
        yield c
    cluster.close()


@pytest.fixture
def stored(tmp_path):
    """A store with data set ``blobs`` in 3 row chunks of X; returns (store, snapshot folder)."""
    store = tmp_path / "store"
    X, y = make_blobs(n_per_class=20, n_features=4, n_classes=3, seed=1)
    write_dataset(store, "blobs", X, y, chunk_rows=20)
    with open_dataset_arrays(store, "blobs") as arrays:
        return store, arrays.path, (X, y)


def _damage(snapshot, how):
    chunk = snapshot / "X" / "c" / "1" / "0"
    if how == "delete":
        chunk.unlink()
    else:
        data = bytearray(chunk.read_bytes())
        data[len(data) // 2] ^= 0x01
        chunk.write_bytes(bytes(data))


def _driver_sees_every_chunk(monkeypatch):
    """The driver's own chunk listing passes: as when only the workers lack the chunk."""
    monkeypatch.setattr(store_datasets._zarr_io, "check_chunks", lambda *args: None)


EXPECTED = {"delete": r"chunk X/c/1/0 is missing", "corrupt": r"rows 20:40 .*checksum"}


@pytest.mark.parametrize("how", ["delete", "corrupt"])
def test_fit_on_dataset_fails_on_a_chunk_the_worker_cannot_read(client, stored, monkeypatch, how):
    store, snapshot, _ = stored
    _damage(snapshot, how)
    _driver_sees_every_chunk(monkeypatch)
    with pytest.raises(StoreCorruptError, match=EXPECTED[how]) as err:
        fit_on_dataset(store, "blobs", SPEC, client=client)
    assert str(snapshot) in str(err.value)


@pytest.mark.parametrize("how", ["delete", "corrupt"])
def test_fit_on_a_store_path_fails_on_a_chunk_the_worker_cannot_read(client, stored, how):
    store, snapshot, _ = stored
    _damage(snapshot, how)
    with client.as_current(), pytest.raises(StoreCorruptError, match=EXPECTED[how]) as err:
        CategorySpace(n_restarts=1).fit(store / "datasets" / "blobs", None)
    assert str(snapshot) in str(err.value)


def test_a_chunk_deleted_after_the_handles_opened_fails_the_compute(client, stored):
    store, snapshot, _ = stored
    with open_dataset_arrays(store, "blobs", dask=True) as arrays:
        _damage(snapshot, "delete")
        with pytest.raises(StoreCorruptError, match="chunk X/c/1/0 is missing"):
            client.compute(arrays.X.sum(), sync=True)


def test_the_labels_are_read_on_the_driver(stored):
    store, _, (_, y) = stored
    with open_dataset_arrays(store, "blobs", dask=True) as arrays:
        assert isinstance(arrays.y_codes, np.ndarray)
        np.testing.assert_array_equal(arrays.classes[arrays.y_codes], y)


def test_new_chunks_carry_a_checksum(stored):
    _, snapshot, _ = stored
    for array in ("X", "y"):
        codecs = json.loads((snapshot / array / "zarr.json").read_text())["codecs"]
        assert codecs[-1] == {"name": "crc32c"}


def test_a_snapshot_without_chunk_checksums_still_reads(client, tmp_path, monkeypatch):
    """Written as before the crc32c codec: it reads (and trains) the same; a deleted chunk is
    still an error on the worker."""
    import zarr

    monkeypatch.setattr(_zarr_io, "_COMPRESSORS", (zarr.codecs.ZstdCodec(),))
    store = tmp_path / "store"
    X, y = make_blobs(n_per_class=20, n_features=4, n_classes=3, seed=1)
    write_dataset(store, "blobs", X, y, chunk_rows=20)
    monkeypatch.undo()
    with open_dataset_arrays(store, "blobs", dask=True) as arrays:
        snapshot = arrays.path
        codecs = json.loads((snapshot / "X" / "zarr.json").read_text())["codecs"]
        assert [c["name"] for c in codecs] == ["bytes", "zstd"]
        np.testing.assert_array_equal(client.compute(arrays.X, sync=True), X)
    np.testing.assert_array_equal(read_dataset(store, "blobs").X, X)
    verify_dataset(store, "blobs")
    with client.as_current():
        CategorySpace(n_restarts=1).fit(store / "datasets" / "blobs", None)
    _damage(snapshot, "delete")
    with client.as_current(), pytest.raises(StoreCorruptError, match="chunk X/c/1/0 is missing"):
        CategorySpace(n_restarts=1).fit(store / "datasets" / "blobs", None)
