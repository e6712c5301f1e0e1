"""A stored array on S3 travels into Dask tasks as its URL (issue 40 item 1): the worker
reopens it with its own credentials; no task, pickle or graph carries a secret."""

from __future__ import annotations

import pickle
import uuid

import numpy as np
import pytest
import zarr

from catdask.object_store import AccessDeniedError
from catdask.stored_arrays import checked_array, dask_array

from ..helpers.s3_server import BUCKET


@pytest.fixture
def stored(s3_server, monkeypatch):
    """A checked zarr array of 100 x 3 on a fresh S3 prefix, opened read-only."""
    from catdask.object_store.s3 import S3Backend

    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    backend = S3Backend(BUCKET, f"tasks-{uuid.uuid4().hex[:12]}")
    written = zarr.create_array(backend.zarr_store("X", read_only=False), shape=(100, 3),
                                chunks=(10, 3), dtype="f8")
    written[:] = np.arange(300.0).reshape(100, 3)
    array = zarr.open_array(backend.zarr_store("X", read_only=True), mode="r")
    return checked_array(array, f"{backend.url}/X")


def test_a_pickled_array_holds_its_url_not_the_secret(stored, s3_server, monkeypatch):
    data = pickle.dumps(stored)
    assert s3_server.secret.encode() not in data
    assert pickle.loads(data)[5].tolist() == [15.0, 16.0, 17.0]
    # Reopened with the credentials of where it is unpickled: wrong ones fail its first read
    # there (not the unpickling itself: see the worker test below).
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    reopened = pickle.loads(data)
    with pytest.raises(AccessDeniedError):
        reopened[5]


def test_dask_workers_read_their_blocks_with_their_own_credentials(stored, s3_server):
    from distributed import Client, LocalCluster

    x = dask_array(stored)
    graph = pickle.dumps(dict(x.sum().__dask_graph__()))
    assert s3_server.secret.encode() not in graph
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, env=dict(s3_server.env)) as cluster, \
            Client(cluster) as client:
        assert client.compute(x.sum()).result() == np.arange(300.0).sum()


def test_a_worker_without_credentials_fails_the_read_in_one_line(stored, s3_server):
    """Was: the access check ran while the worker unpickled the task, which failed its message
    handler; the task never ended and the fit waited for ever."""
    from distributed import Client, LocalCluster

    wrong = dict(s3_server.env, AWS_SECRET_ACCESS_KEY="not-the-secret")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, env=wrong) as cluster, Client(cluster) as client:
        with pytest.raises(AccessDeniedError, match="refused the credentials") as info:
            client.compute(dask_array(stored).sum()).result(timeout=60)
    assert "\n" not in str(info.value) and s3_server.secret not in str(info.value)
