"""Fixtures shared by the test modules (each defined here once).

Stores in ``tmp_path``, ``../shared`` (skip cleanly without it), small data sets, a Prefect API
and a Dask cluster. Functions and constants tests import live in ``tests/helpers/``
(``from .helpers.data import make_blobs``), never here: conftest is not a module to import.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from .helpers.data import make_blobs
from .helpers.paths import SHARED

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
# The CLI honours a server set in the user's Prefect profile (~/.prefect/profiles.toml): a
# developer's own must not steer the tests (a file that does not exist: Prefect's defaults).
os.environ.setdefault("PREFECT_PROFILES_PATH", os.path.join(os.path.dirname(__file__),
                                                            "no-such-profiles.toml"))
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")

# A suite started in the background of a non-interactive shell (`make test &`, nohup) inherits
# SIGINT ignored, and so would every process it starts: the tests that stop `catdask serve`
# with Ctrl-C (SIGINT) would then wait in vain. A handler (unlike SIG_IGN) is not inherited
# across exec, so the children start with SIGINT at its default, as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Every process this run starts inherits the run's marker; tests/helpers/run_watchdog.py ends
# them all once pytest is gone, however it ended (a fresh value per run: a pytest run inside a
# test has its own).
os.environ["CATDASK_PYTEST_RUN"] = uuid.uuid4().hex


_RUN_WATCHDOG: list[subprocess.Popen] = []  # kept: it outlives the run on purpose


def pytest_configure(config):
    _RUN_WATCHDOG.append(subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("helpers") / "run_watchdog.py"),
         str(os.getpid()), os.environ["CATDASK_PYTEST_RUN"]],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True))


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


@pytest.fixture
def blobs():
    """``make_blobs()``: three Gaussian classes of 30 samples in 5 dimensions."""
    return make_blobs()


# ----------------------------------------------------------------------------- stores


@pytest.fixture
def store(tmp_path):
    """Where a test's store goes (``tmp_path / "store"``); nothing is created there yet."""
    return tmp_path / "store"


@pytest.fixture
def iris_store(store):
    """A store holding iris (ingested directly, not through a flow: fast)."""
    from catdask.pipeline import ingest_dataset

    ingest_dataset("iris", store)
    return store


# ----------------------------------------------------------------------------- Prefect + Dask
# Used by tests/orchestration/test_flows.py and tests/cli/test_cli.py: flows run for real against a temporary
# Prefect API (SQLite) and a small LocalCluster.


class _GuardedSubprocess:
    """``subprocess`` as Prefect's server module sees it under :func:`prefect_api`: every
    server it starts gets SIGKILL when this test process dies (``parent_death``).

    Prefect's ``prefect_test_harness`` starts its uvicorn server with ``subprocess.Popen`` and
    stops it only at a normal exit: after SIGKILL of pytest it was alive 4 minutes later
    (issue 44). SIGKILL, not SIGTERM: its database is thrown away, and uvicorn's orderly stop
    waits for the requests in flight. Started from the main thread, as the session fixture is.
    """

    def __getattr__(self, name):
        return getattr(subprocess, name)

    @staticmethod
    def Popen(args, **kwargs):  # noqa: N802 - subprocess's name
        from catdask.orchestration.server import guarded_command

        return subprocess.Popen(guarded_command(args, death_signal=signal.SIGKILL), **kwargs)


@pytest.fixture(scope="session")
def prefect_api():
    """One Prefect test server for the session, which dies with the test run however it ends;
    yields its API URL (for subprocess env)."""
    pytest.importorskip("prefect")
    import prefect.server.api.server as prefect_server_module
    import prefect.settings as ps
    from prefect.settings import temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    updates = {}
    # The heartbeat thread adds about 1 s to the end of every flow run (docs/stack.md). Entered
    # before the harness so its global settings (seen by other threads) carry it too.
    if hasattr(ps, "PREFECT_FLOWS_HEARTBEAT_FREQUENCY"):
        updates[ps.PREFECT_FLOWS_HEARTBEAT_FREQUENCY] = None
    unguarded = prefect_server_module.subprocess
    prefect_server_module.subprocess = _GuardedSubprocess()
    try:
        with temporary_settings(updates), prefect_test_harness(server_startup_timeout=120):
            yield ps.PREFECT_API_URL.value()
    finally:
        prefect_server_module.subprocess = unguarded


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
    """A small cluster per test module; yields the scheduler address (``scheduler=``).

    Made by the production factory, so the tests' workers have the settings a real fit's do
    (127.0.0.1, one BLAS thread per worker, the scheduler configuration).
    """
    import warnings

    pytest.importorskip("distributed")
    from catdask import operators  # noqa: F401  (adds what the workers import as they start)
    from catdask.distributed.cluster import start_local_cluster

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster, client = start_local_cluster(2)
    try:
        yield cluster.scheduler_address
    finally:
        client.close()
        cluster.close()
