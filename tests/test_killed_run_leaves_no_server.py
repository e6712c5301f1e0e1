"""No server outlives a test run killed with SIGKILL (issue 44). Slow.

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
"""

from __future__ import annotations

import pytest

from .helpers.kill_check import CHECKPOINTS, kill_run

pytestmark = pytest.mark.slow

GONE_WITHIN_SECONDS = CHECKPOINTS[-1]


def test_sigkill_of_a_test_run_leaves_no_server_alive(tmp_path):
    ready = tmp_path / "ready"
    result = kill_run("tests/helpers/servers_to_kill.py", 0, ready=ready,
                      extra_env={"CATDASK_KILL_READY": str(ready)})
    print(result.line())
    assert result.ended_early is None, result.line()
    assert len(result.before) >= 6, result.before  # two Prefect servers, serve, Dask workers
    assert not result.alive[GONE_WITHIN_SECONDS], result.line()


@pytest.mark.parametrize("path, seconds", [
    ("tests/orchestration/test_flows.py", 40),
    ("tests/test_deployment.py", 40),
    ("tests/test_deployment.py", 95),
])
def test_sigkill_of_a_suite_file_leaves_no_process_alive(path, seconds):
    result = kill_run(path, seconds)
    print(result.line())
    if result.ended_early is not None:
        pytest.skip(f"{path} ended before {seconds} s on this machine: nothing to kill")
    assert not result.alive[GONE_WITHIN_SECONDS], result.line()
