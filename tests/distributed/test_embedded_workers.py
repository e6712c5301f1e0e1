"""The embedded Dask cluster after losing a worker for good (issue 16: "a lost embedded worker
is replaced or the fit says it runs degraded").

A nanny restarts a killed worker; when that restart fails (seen in 4 of 33 worker kills: the
worker killed again while it started), distributed never retries. Here the loss is made
deterministic by closing the worker's nanny, which ends the worker and every restart of it.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from catdask import KernelCategorySpace  # noqa: E402
from catdask.core.progress import solver_progress  # noqa: E402
from catdask.distributed import cluster as cluster_module  # noqa: E402
from catdask.distributed.cluster import (  # noqa: E402
    close_embedded_cluster,
    dask_client_context,
    embedded_cluster,
)
from tests.helpers.data import make_blobs  # noqa: E402

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def embedded(monkeypatch):
    """A fresh 2-worker embedded cluster, with no other client current (so that
    ``dask_client_context`` picks the embedded one); a short restart grace."""
    monkeypatch.delenv(cluster_module.ENV_SCHEDULER, raising=False)
    monkeypatch.setattr(cluster_module, "WORKER_RESTART_GRACE_SECONDS", 3.0)
    close_embedded_cluster()
    if cluster_module._current_client() is not None:
        pytest.skip("another Dask client is current in this process")
    client = embedded_cluster(n_workers=2, dashboard_port=0)
    yield client, cluster_module._EMBEDDED["cluster"]
    close_embedded_cluster()


def _lose_worker_for_good(cluster, client):
    """Close one worker's nanny (the worker exits and is never restarted); its pid."""
    name = sorted(cluster.workers)[0]
    pid = cluster.workers[name].pid
    cluster.sync(cluster.workers[name].close, reason="test: worker lost for good")
    return pid


def _worker_pids(client):
    return set(client.run(os.getpid).values())


@pytest.mark.slow
def test_a_worker_lost_before_a_fit_is_replaced(embedded, caplog):
    client, cluster = embedded
    pids = _worker_pids(client)
    lost = _lose_worker_for_good(cluster, client)
    client.wait_for_workers(1)
    assert len(cluster_module._worker_names(client)) == 1
    with caplog.at_level(logging.WARNING, logger="catdask.distributed"):
        with dask_client_context() as c:
            assert c is client
            # The replacement joined before the work starts: the fit runs at full size.
            assert len(c.run(os.getpid)) == 2
    assert "lost and not restarted" in caplog.text, caplog.text
    assert "back at 2 workers" in caplog.text
    now = _worker_pids(client)
    assert len(now) == 2 and lost not in now and len(now & pids) == 1


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.slow
def test_a_worker_lost_mid_fit_the_fit_completes_says_so_and_the_cluster_recovers(embedded,
                                                                                   caplog):
    import dask.array as da

    client, cluster = embedded
    X, y = make_blobs(n_per_class=200, n_features=5, n_classes=3, seed=13)
    kw = dict(gamma=0.05, n_restarts=2, init="random", tol=1e-7, max_iter=12, random_state=0,
              certify=False)
    reference = KernelCategorySpace(**kw).fit(X, y)
    lost = []

    def lose_at_iteration_3(iteration, *args):
        if iteration == 3 and not lost:
            lost.append(_lose_worker_for_good(cluster, client))

    estimator = KernelCategorySpace(**kw)
    with caplog.at_level(logging.WARNING, logger="catdask.distributed"):
        with dask_client_context(), solver_progress(lose_at_iteration_3):
            estimator.fit(da.from_array(X, chunks=(200, -1)), y)
    assert lost
    # The same fit as in-process numpy, computed partly on the worker that was lost.
    assert estimator.n_iter_ == reference.n_iter_
    np.testing.assert_allclose(estimator.objective_, reference.objective_, rtol=1e-9)
    np.testing.assert_allclose(estimator.dual_coef_, reference.dual_coef_, rtol=1e-6,
                               atol=1e-9)
    assert "lost a worker during this work: 1 of 2 workers left" in caplog.text, caplog.text
    assert "back at 2 workers" in caplog.text
    assert len(_worker_pids(client)) == 2 and lost[0] not in _worker_pids(client)


@pytest.mark.slow
def test_a_cluster_that_cannot_replace_its_worker_says_it_runs_degraded(embedded, caplog,
                                                                        monkeypatch):
    client, cluster = embedded
    _lose_worker_for_good(cluster, client)
    client.wait_for_workers(1)
    with monkeypatch.context() as patch, \
            caplog.at_level(logging.WARNING, logger="catdask.distributed"):
        patch.setattr(cluster, "scale", lambda n: None)  # no new worker can start
        n, expected = cluster_module.restore_embedded_workers(timeout=1.0)
    assert (n, expected) == (1, 2)
    assert "runs degraded: 1 of 2 workers" in caplog.text, caplog.text


def _restarting_worker(known_pids, timeout=30.0):
    """The pid of a new worker process (a child of this process not in ``known_pids``)."""
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in psutil.Process().children():
            try:
                if child.pid not in known_pids and "spawn_main" in " ".join(child.cmdline()):
                    return child.pid
            except psutil.Error:
                continue
        time.sleep(0.01)
    return None


@pytest.mark.stress
@pytest.mark.timeout(900)
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_33_worker_kills_fits_identical_and_cluster_back_at_full_size(embedded, caplog):
    """Issue 16's goal: 33 `kill -9`s of embedded workers during kernel fits (every third one
    followed by a kill of the nanny's restarted worker while it starts, the case in which
    distributed gives the worker up): every fit equals the undisturbed one, and after each the
    cluster is back at 2 workers or has said it runs degraded."""
    import dask.array as da

    client, cluster = embedded
    X, y = make_blobs(n_per_class=200, n_features=5, n_classes=3, seed=13)
    kw = dict(gamma=0.05, n_restarts=2, init="random", tol=1e-7, max_iter=10, random_state=0,
              certify=False)
    reference = KernelCategorySpace(**kw).fit(X, y)
    kills, full_size, said_degraded, replaced = 0, 0, 0, 0
    for trial in range(22):
        pids = sorted(_worker_pids(client))
        double = trial % 2 == 1  # 11 trials of two kills, 11 of one: 33 kills
        killed = []

        def kill_mid_fit(iteration, *args, pids=pids, double=double, killed=killed, trial=trial):
            if iteration == 2 + trial % 5 and not killed:
                victim = pids[trial % 2]
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)
                if double:
                    def kill_the_restart():
                        new = _restarting_worker(set(pids))
                        if new is not None:
                            os.kill(new, signal.SIGKILL)
                            killed.append(new)
                    threading.Thread(target=kill_the_restart, daemon=True).start()

        estimator = KernelCategorySpace(**kw)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="catdask.distributed"):
            with dask_client_context(), solver_progress(kill_mid_fit):
                estimator.fit(da.from_array(X, chunks=(200, -1)), y)
            time.sleep(0.5)
            n, expected = cluster_module.restore_embedded_workers()
        kills += len(killed)
        assert killed, f"trial {trial}: the fit ended before the kill"
        assert estimator.n_iter_ == reference.n_iter_
        np.testing.assert_allclose(estimator.objective_, reference.objective_, rtol=1e-9)
        np.testing.assert_allclose(estimator.dual_coef_, reference.dual_coef_, rtol=1e-6,
                                   atol=1e-9)
        full_size += n == expected == 2
        said_degraded += n < expected and "runs degraded" in caplog.text
        replaced += "starting replacements" in caplog.text
        assert n == expected or "runs degraded" in caplog.text, caplog.text
    print(f"\ngoal 5: {kills} worker kills in 22 fits; every fit identical to the undisturbed "
          f"one; cluster back at full size after {full_size} of 22 fits, said degraded after "
          f"{said_degraded}; a lost worker replaced by catdask after {replaced}")
    assert kills >= 33
