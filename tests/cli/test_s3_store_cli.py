"""The CLI on an ``s3://`` store (issue 39), against a real S3 server (SeaweedFS).

A store that cannot be used answers in one line, exit 3, within 10 s, never printing a secret;
a usable one runs the pipeline with nothing written on the local disk but the local folder
the docs name (``$XDG_CACHE_HOME/catdask/s3/...``: plots, the Prefect home).
"""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest

from catdask.cli.exits import EXIT_INPUT, EXIT_OK

from ..helpers.s3_server import BUCKET, s3_server  # noqa: F401 - the session fixture
from ..object_store.test_s3_errors import _Handler, http_server
from .test_cli import run_cli

LIMIT_S = 10.0


@pytest.fixture
def s3_env(s3_server, monkeypatch, tmp_path):
    """The server's AWS variables in this process's environment, a private prefix, and a
    home, cache and working folder of the test's own (to see what is written locally)."""
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    for name in ("HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.delenv("CATDASK_STORE", raising=False)
    monkeypatch.delenv("PREFECT_HOME", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return f"s3://{BUCKET}/cli-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def s3_cluster(s3_env, prefect_api, monkeypatch):
    """The session's Prefect API and a cluster of this test's own, started once the server's
    AWS variables are set: each worker reads the store with its own credentials (a task
    carries none), so workers started before them (the module's cluster) could not."""
    from catdask.distributed.cluster import start_local_cluster

    cluster, client = start_local_cluster(2)
    monkeypatch.setenv("CATDASK_SCHEDULER", cluster.scheduler_address)
    try:
        yield cluster.scheduler_address
    finally:
        client.close()
        cluster.close()


def _not_s3(method, path, body):
    return 404, {"Content-Type": "text/html"}, b"<html><body>Not Found</body></html>"


@pytest.mark.parametrize("command", [("datasets",), ("models", "list"), ("check",),
                                     ("ingest", "iris"), ("train", "iris"), ("gc",)])
@pytest.mark.parametrize("fault", ["missing bucket", "wrong secret", "not S3"])
def test_a_store_that_cannot_be_used_answers_in_one_line(capsys, s3_env, s3_server, monkeypatch,
                                                         command, fault):
    url = s3_env
    if fault == "missing bucket":
        url = "s3://no-such-bucket/store"
    elif fault == "wrong secret":
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-" + s3_server.secret[:6])
    with http_server(_Handler, respond=_not_s3) as (_, endpoint):
        if fault == "not S3":
            monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        start = time.monotonic()
        code, out, err = run_cli(capsys, "--store", url, *command)
        elapsed = time.monotonic() - start
    assert code == EXIT_INPUT, (code, err)
    assert len(err.strip().splitlines()) == 1, err
    assert elapsed < LIMIT_S, (elapsed, err)
    assert s3_server.secret not in out + err and "wrong-" not in out + err
    assert os.listdir(".") == []


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_pipeline_on_s3_writes_only_the_named_local_folder(capsys, s3_env, tmp_path,
                                                                s3_cluster):
    """ingest, train (and its cache), models, predict, check, gc and export on ``s3://``."""
    from catdask.store import list_models, load_model_version

    store = s3_env
    code, out, err = run_cli(capsys, "--store", store, "ingest", "iris")
    assert code == EXIT_OK, err
    code, out, err = run_cli(capsys, "--store", store, "train", "iris", "--restarts", "2")
    assert code == EXIT_OK, err
    assert json.loads(out)["version"] == "iris-cqs:v1"
    code, out, err = run_cli(capsys, "--store", store, "train", "iris", "--restarts", "2")
    assert code == EXIT_OK and "not refitted" in err, err  # the train cache, on S3
    assert [str(v) for v in list_models(store)] == ["iris-cqs:v1"]
    assert load_model_version(store, "iris-cqs")[1]["dataset"] == "iris"
    for command in (("models", "list"), ("datasets",), ("check",), ("gc",),
                    ("predict", "iris-cqs", "--dataset", "iris", "--out",
                     str(tmp_path / "predictions.csv"))):
        code, out, err = run_cli(capsys, "--store", store, *command)
        assert code == EXIT_OK, (command, err)
    assert os.listdir(".") == []  # nothing in the working folder
    # MLflow (a file store is refused by MLflow 3; a sqlite one keeps its artifacts in
    # ./mlruns, MLflow's default): from a folder of its own, so the check above stays exact.
    (tmp_path / "mlflow").mkdir()
    os.chdir(tmp_path / "mlflow")  # s3_env's monkeypatch.chdir restores the folder
    code, out, err = run_cli(capsys, "--store", store, "export", "iris-cqs", "--mlflow",
                             f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}")
    assert code == EXIT_OK, err
    # (files: matplotlib's import makes its empty config folder ~/.config/matplotlib)
    written = {p.name for p in (tmp_path / "home").rglob("*") if not p.is_dir()} \
        if (tmp_path / "home").exists() else set()
    assert not written, written  # nothing in the home folder either: the cache is named
    cache = tmp_path / "xdg_cache_home" / "catdask" / "s3" / BUCKET
    assert any(cache.rglob("*.png")), "the category-space plot goes to the named cache"
