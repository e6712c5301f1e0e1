"""Not collected by the suite: the pytest run that tests/test_killed_run_leaves_no_server.py
starts and kills with SIGKILL once its servers are up.

It starts what the suite starts: the session's Prefect test server (``prefect_api``), a
module's local Dask cluster (``dask_scheduler``), a Prefect server of ``catdask serve``'s kind
(tests/helpers/procs.py) and ``catdask serve`` against it, with its own Dask cluster and fork
server. Then it touches ``$CATDASK_KILL_READY`` and waits to be killed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.helpers.procs import serve_iris


def test_start_servers_and_wait_to_be_killed(prefect_api, dask_scheduler, tmp_path):
    serve_iris(tmp_path)
    Path(os.environ["CATDASK_KILL_READY"]).write_text(str(tmp_path))
    time.sleep(900)
