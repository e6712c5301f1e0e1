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

from tests.helpers.procs import BIN, Managed, child_env, free_port, start_prefect_server


def test_start_servers_and_wait_to_be_killed(prefect_api, dask_scheduler, tmp_path):
    from catdask.pipeline import ingest_dataset

    store = tmp_path / "store"
    ingest_dataset("iris", store)
    _, api = start_prefect_server(tmp_path / "home", free_port(), tmp_path / "server.log",
                                  catdask=True)
    serve = Managed([BIN / "catdask", "--store", store, "serve", "--dask-dashboard-port",
                     free_port()], log=tmp_path / "serve.log",
                    env=child_env(tmp_path / "serve-home", api_url=api))
    serve.wait_for(r"being served", timeout=300)
    Path(os.environ["CATDASK_KILL_READY"]).write_text(str(tmp_path))
    time.sleep(900)
