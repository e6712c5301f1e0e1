"""No server outlives a test run killed with SIGKILL (issue 44). Slow.

A pytest run of tests/helpers/servers_to_kill.py (the session's Prefect test server, a local
Dask cluster, a Prefect server and ``catdask serve`` with its cluster) is killed with SIGKILL
once everything is up. 10 s later no process of that run may be alive: they are found by a
marker in their environment (every process of the run inherits it), so nothing else on the
machine is looked at or touched. Before: Prefect's test server was alive 4 minutes later,
``catdask serve`` 75-80 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from .helpers.paths import REPO

pytestmark = pytest.mark.slow

MARKER = "CATDASK_TEST_RUN_MARKER"
GONE_WITHIN_SECONDS = 10.0


def _processes_with(marker):
    found = []
    for process in psutil.process_iter(["pid", "uids"]):
        try:
            if process.uids().real == os.getuid() and \
                    process.environ().get(MARKER) == marker:
                found.append(process)
        except psutil.Error:
            continue
    return found


def test_sigkill_of_a_test_run_leaves_no_server_alive(tmp_path):
    marker, ready = uuid.uuid4().hex, tmp_path / "ready"
    env = dict(os.environ, **{MARKER: marker, "CATDASK_KILL_READY": str(ready)})
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/helpers/servers_to_kill.py"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    left = []
    try:
        deadline = time.monotonic() + 420
        while not ready.exists():
            assert run.poll() is None, f"the pytest run ended ({run.returncode}) before its servers were up"
            assert time.monotonic() < deadline, "the servers did not come up in 420 s"
            time.sleep(1.0)
        started = _processes_with(marker)
        names = sorted({" ".join(p.cmdline()[1:4]) for p in started if p.is_running()})
        run.send_signal(signal.SIGKILL)
        run.wait()
        time.sleep(GONE_WITHIN_SECONDS)
        left = _processes_with(marker)
        described = [(p.pid, " ".join(p.cmdline()[:6])) for p in left]
        print(f"{len(started)} processes of the run; left {GONE_WITHIN_SECONDS:g} s after "
              f"SIGKILL: {described}; load {os.getloadavg()[0]:.1f}")
        assert len(started) >= 6, names  # two Prefect servers, serve, Dask workers, ...
        assert not left, described
    finally:
        for process in _processes_with(marker):  # only the killed run's own processes
            process.kill()
