"""Shared fixtures: small data sets and the location of ../shared (skip cleanly without it)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(autouse=True)
def _isolated_dask_scheduler_setting():
    """Undo a ``scheduler="dask.distributed"`` setting that a test's client did not reset.

    A distributed Client sets it on creation and resets it in ``close()``; a test that kills
    the scheduler under its client can end before that reset, and every later test computing
    a Dask collection without a client would then fail with "no Client active".
    """
    import dask

    before = dask.config.get("scheduler", None)
    yield
    if dask.config.get("scheduler", None) != before:
        dask.config.set(scheduler=before)


@pytest.fixture(scope="session")
def shared_dir():
    """``../shared`` beside the checkout; tests that need it skip (saying why) when absent."""
    if not SHARED.is_dir():
        pytest.skip(f"../shared not present at {SHARED}: UCI files and paper unavailable")
    return SHARED


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def make_blobs(n_per_class=30, n_features=5, n_classes=3, spread=3.0, seed=0):
    """Gaussian classes with distinct means and anisotropic covariances."""
    r = np.random.default_rng(seed)
    X, y = [], []
    for k in range(n_classes):
        A = r.standard_normal((n_features, n_features))
        X.append(r.standard_normal((n_per_class, n_features)) @ A + spread * r.standard_normal(n_features))
        y.append(np.full(n_per_class, k))
    return np.vstack(X), np.concatenate(y)


@pytest.fixture
def blobs():
    return make_blobs()


# ----------------------------------------------------------------------------- Prefect + Dask
# Used by tests/test_flows.py and tests/test_cli.py: flows run for real against a temporary
# Prefect API (SQLite) and a small LocalCluster.


@pytest.fixture(scope="session")
def prefect_api():
    """One Prefect test server for the session; yields its API URL (for subprocess env)."""
    pytest.importorskip("prefect")
    import prefect.settings as ps
    from prefect.settings import temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    updates = {}
    # The heartbeat thread adds about 1 s to the end of every flow run (STACK.md). Entered
    # before the harness so its global settings (seen by other threads) carry it too.
    if hasattr(ps, "PREFECT_FLOWS_HEARTBEAT_FREQUENCY"):
        updates[ps.PREFECT_FLOWS_HEARTBEAT_FREQUENCY] = None
    with temporary_settings(updates), prefect_test_harness(server_startup_timeout=120):
        yield ps.PREFECT_API_URL.value()


@pytest.fixture
def prefect_env(prefect_api):
    """Environment for a subprocess that runs flows against the session's Prefect server."""
    env = dict(os.environ)
    env.update(
        PREFECT_API_URL=prefect_api,
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        MPLBACKEND="Agg",
    )
    env.pop("CATDASK_SCHEDULER", None)
    env.pop("CATDASK_STORE", None)
    return env


@pytest.fixture(scope="module")
def dask_scheduler():
    """A small LocalCluster per test module; yields the scheduler address (``scheduler=``)."""
    import warnings

    distributed = pytest.importorskip("distributed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=":0"
        )
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()
