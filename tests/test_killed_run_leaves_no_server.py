"""No server outlives a test run killed with SIGKILL (issue 44). Slow, but for the first test.

A pytest run is killed with SIGKILL (only pytest, as ``kill -9`` does); 10 s later no process
of that run may be alive. They are found by a marker in their environment (every process of the
run inherits it; tests/helpers/kill_check.py), so nothing else on the machine is looked at or
touched. Two kinds of run:

- tests/helpers/servers_to_kill.py, killed once everything is up: the session's Prefect test
  server, a local Dask cluster, a Prefect server and ``catdask serve`` with its cluster;
- the suite's two files that start the most servers, killed at a fixed moment (during set-up
  or mid-test, whatever runs then on this machine).

Before: Prefect's test server was alive 4 minutes later, ``catdask serve`` 75-80 s, and the
deployment tests' Prefect server, busy in SQLAlchemy, more than 22 s.

And the other side: ``catdask serve`` and its served runs stop within seconds once the API they
serve is killed, with a run in flight.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from .helpers.kill_check import CHECKPOINTS, describe, kill_run
from .helpers.procs import Managed, child_env, serve_iris

GONE_WITHIN_SECONDS = CHECKPOINTS[-1]


def test_a_guarded_child_that_ignores_sigterm_gets_the_death_signal_asked_for(tmp_path):
    """guarded_command(death_signal=SIGKILL), as the suite's Prefect servers are started: a
    child whose orderly stop never ends (here: SIGTERM ignored) dies with its parent."""
    child_code = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                  "time.sleep(600)")
    code = ("import signal, subprocess, sys, time\n"
            "from catdask.orchestration.server import guarded_command\n"
            f"child = subprocess.Popen(guarded_command([sys.executable, '-c', {child_code!r}], "
            "death_signal=signal.SIGKILL))\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(600)\n")
    parent = Managed([sys.executable, "-c", code], log=tmp_path / "parent.log",
                     env=child_env(tmp_path))
    try:
        child = psutil.Process(int(parent.wait_for(r"^(\d+)$", timeout=60).group(1)))
        time.sleep(0.5)
        assert child.cmdline()[-1] == child_code and child.ppid() == parent.pid
        os.kill(parent.pid, signal.SIGKILL)
        _, alive = psutil.wait_procs([child], timeout=5)
        assert alive == [], "the guarded child outlived its SIGKILLed parent"
    finally:
        parent.kill()


@pytest.mark.slow
def test_sigkill_of_a_test_run_leaves_no_server_alive(tmp_path):
    ready = tmp_path / "ready"
    result = kill_run("tests/helpers/servers_to_kill.py", 0, ready=ready,
                      extra_env={"CATDASK_KILL_READY": str(ready)})
    print(result.line())
    assert result.ended_early is None, result.line()
    assert len(result.before) >= 6, result.before  # two Prefect servers, serve, Dask workers
    assert not result.alive[GONE_WITHIN_SECONDS], result.line()


@pytest.mark.stress
@pytest.mark.parametrize("path, seconds", [
    ("tests/orchestration/test_flows.py", 40),
    ("tests/test_deployment.py", 95),
])
def test_sigkill_of_a_suite_file_leaves_no_process_alive(path, seconds):
    result = kill_run(path, seconds)
    print(result.line())
    if result.ended_early is not None:
        pytest.skip(f"{path} ended before {seconds} s on this machine: nothing to kill")
    assert not result.alive[GONE_WITHIN_SECONDS], result.line()


def _runs_in_flight(api, store, timeout, count=3):
    """Start ``count`` served train runs of a kernel fit with many restarts (through the API, as
    the UI does) and wait for the solver's progress artifact of one: runs in flight, one fitting
    and talking to the API, the others waiting for its training lease. The fit must outlast the
    artifact's first 3 s: iris's linear fit (1,000 restarts) took 7 s in all on a quiet
    machine and published none."""
    import numpy as np
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from catdask.method_names import MAX_RESTARTS
    from catdask.store import write_dataset

    rng = np.random.default_rng(0)
    X = rng.standard_normal((1000, 10)) + np.repeat(np.eye(4, 10) * 2, 250, axis=0)
    write_dataset(store, "blobs", X, np.repeat(np.arange(4), 250))
    with temporary_settings(updates={PREFECT_API_URL: api}), \
            get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name("catdask-train/train")
        runs = [client.create_flow_run_from_deployment(
            deployment.id, parameters={"dataset": "blobs", "method": "kcqs",
                                       "n_restarts": MAX_RESTARTS})
            for _ in range(count)]
        mine = ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[r.id for r in runs]))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(a.type == "progress" for a in client.read_artifacts(artifact_filter=mine)):
                return
            time.sleep(0.5)
    raise AssertionError(f"no served run published progress in {timeout} s")


@pytest.mark.slow
@pytest.mark.parametrize("serve_gets_sigterm", [False, True],
                         ids=["api-killed", "api-killed-and-serve-sigtermed"])
def test_serve_and_its_runs_stop_within_seconds_once_their_api_is_killed(tmp_path,
                                                                         serve_gets_sigterm):
    """The API's server SIGKILLed while served runs are in flight; with ``serve_gets_sigterm``, serve
    gets SIGTERM at that moment too, as from its guard when a test run dies. Before: Prefect's
    runner gave each run process 30 s after SIGTERM, one after the other, and the run spent them
    retrying against the dead API (serve's tree alive 20 s later, 8 processes of 8)."""
    from catdask.serve import API_LOST_SECONDS

    server, api, serve, store = serve_iris(tmp_path, PREFECT_RUNNER_POLL_FREQUENCY=1,
                                           CATDASK_SERVE_LIMIT=3)
    try:
        _runs_in_flight(api, store, timeout=180)
        tree = serve.tree()
        server.kill()
        if serve_gets_sigterm:
            os.kill(serve.pid, signal.SIGTERM)
        killed = time.monotonic()
        deadline = killed + API_LOST_SECONDS + GONE_WITHIN_SECONDS
        with contextlib.suppress(subprocess.TimeoutExpired):  # serve: waited by its Popen
            serve.proc.wait(timeout=deadline - time.monotonic())
        _, alive = psutil.wait_procs([p for p in tree if p.pid != serve.pid],
                                     timeout=max(0.0, deadline - time.monotonic()))
        print(f"serve's tree ({len(tree)} processes): {len(alive)} alive "
              f"{time.monotonic() - killed:.1f} s after the API's kill; serve's exit code "
              f"{serve.proc.returncode}")
        assert serve.proc.returncode == (0 if serve_gets_sigterm else 3), serve.tail()
        assert not alive, (describe(alive), serve.tail())
    finally:
        serve.kill()
        server.kill()
