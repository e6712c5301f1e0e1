"""Dask workers that cannot read the S3 store are stopped before the fit, in one line naming
the fix (issue 40 item 1; catdask/distributed/store_visibility.py): each worker opens the
snapshot's URL with its own environment, as its reads of X will. Checked against the real S3
server (SeaweedFS) with workers whose environment has no AWS variables, a wrong secret, or a
closed endpoint; workers with the server's credentials pass.
"""

from __future__ import annotations

import re
import time
import uuid

import pytest

from ..helpers.data import make_blobs
from ..helpers.s3_server import BUCKET

pytest.importorskip("distributed")

FIX = ("give every worker the store's credentials and endpoint in its own environment "
       "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE; AWS_ENDPOINT_URL")


def _aws_free(monkeypatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT", "AWS_REGION",
                 "AWS_DEFAULT_REGION", "AWS_ALLOW_HTTP"):
        monkeypatch.delenv(name, raising=False)


def _cluster(env):
    from distributed import LocalCluster

    # Started while the driver's environment has no AWS variable: a worker has only ``env``.
    return LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                        dashboard_address=None, env=env)


def _stored_blobs(s3_server, monkeypatch) -> str:
    from catdask.store import open_dataset_arrays, write_dataset

    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    store = f"s3://{BUCKET}/access-{uuid.uuid4().hex[:12]}"
    X, y = make_blobs(n_per_class=40)
    write_dataset(store, "blobs", X, y, chunk_rows=40)
    with open_dataset_arrays(store, "blobs") as arrays:
        assert str(arrays.path).startswith(store + "/datasets/blobs/s")
    return store


def test_workers_with_the_servers_credentials_pass(s3_server, monkeypatch):
    from distributed import Client

    from catdask.distributed.store_visibility import check_workers_see_store
    from catdask.store import open_dataset_arrays

    _aws_free(monkeypatch)
    with _cluster(dict(s3_server.env)) as cluster, Client(cluster) as client:
        store = _stored_blobs(s3_server, monkeypatch)
        with open_dataset_arrays(store, "blobs") as arrays:
            check_workers_see_store(client, arrays.path)  # no error


@pytest.mark.parametrize("worker_env, problem", [
    # No AWS variable at all: AWS S3 itself, unreachable from the test machine (or, with a
    # network, refusing the missing credentials).
    (lambda server: {}, "no S3 server answered|refused the credentials"),
    (lambda server: {k: v for k, v in server.env.items() if not k.startswith(
        ("AWS_ACCESS", "AWS_SECRET"))}, "refused the credentials"),
    (lambda server: dict(server.env, AWS_SECRET_ACCESS_KEY="not-the-secret"),
     r"refused the credentials \(SignatureDoesNotMatch\)"),
    (lambda server: dict(server.env, AWS_ENDPOINT_URL="http://127.0.0.1:9"),
     "no S3 server answered"),
], ids=["no-aws-env", "no-keys", "wrong-secret", "closed-endpoint"])
def test_a_fit_against_workers_that_cannot_read_the_bucket_stops_first_in_one_line(
        s3_server, monkeypatch, worker_env, problem):
    from distributed import Client

    from catdask.errors import WorkerEnvironmentError
    from catdask.pipeline.spec import ModelSpec
    from catdask.pipeline.training import fit_on_dataset

    _aws_free(monkeypatch)
    with _cluster(worker_env(s3_server)) as cluster, Client(cluster) as client:
        store = _stored_blobs(s3_server, monkeypatch)
        started = time.monotonic()
        with pytest.raises(WorkerEnvironmentError) as info:
            fit_on_dataset(store, "blobs", ModelSpec(method="kcqs", n_restarts=2),
                           client=client)
        seconds = time.monotonic() - started
        # Nothing ran on the workers but the check: no task of the fit was submitted.
        assert not client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.tasks))
    message = str(info.value)
    assert "\n" not in message and s3_server.secret not in message, message
    assert message.startswith(f"2 of the 2 Dask workers of {cluster.scheduler_address} "
                              f"cannot read the stored data set at {store}/datasets/blobs/s")
    assert re.search(problem, message) and FIX in message, message
    assert seconds < 15, seconds  # a closed port is refused at once; a silent one, 2 x 4 s
