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
"""

from __future__ import annotations

import os
import signal
import sys
import time

import psutil
import pytest

from .helpers.kill_check import CHECKPOINTS, kill_run
from .helpers.procs import Managed, child_env

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


@pytest.mark.slow
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
