"""A throw-away Dask cluster in its own process (so a test can SIGKILL the scheduler).

Usage: ``python tests/helpers/dask_cluster.py [N_WORKERS]``. Prints the scheduler address on
one line, then sleeps until killed (at most an hour). Binds 127.0.0.1, no dashboard.
"""

from __future__ import annotations

import sys
import time

if __name__ == "__main__":
    from catdask.distributed.cluster import start_local_cluster

    n_workers = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    # the production factory, so the test cluster has the settings a real fit uses
    cluster, client = start_local_cluster(n_workers, dashboard_address=None)
    print(f"SCHEDULER {cluster.scheduler_address}", flush=True)
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline:
        time.sleep(1)
    client.close()
    cluster.close()
