"""``catdask serve`` plus one test deployment whose schedule fires within seconds.

Usage::

    python tests/helpers/serve_catdask.py STORE DASK_DASHBOARD_PORT ANCHOR_DELAY_SECONDS

Runs the real command (``catdask.cli.main(["--store", STORE, "serve", ...])``: the served
deployments of :func:`catdask.serve.served_deployments`, the embedded Dask cluster, and the
Prefect server named by ``PREFECT_API_URL``), with ``served_deployments`` wrapped to add
``catdask-train/scheduled-train``: an interval schedule (hourly) anchored
``ANCHOR_DELAY_SECONDS`` after start-up, so exactly one scheduled run fires during a test.
"""

from __future__ import annotations

import datetime as dt
import sys


def main(argv):
    store, dashboard_port, delay = argv[0], argv[1], float(argv[2])

    import catdask.serve as serve_mod
    from prefect.schedules import Interval
    from prefect.types.entrypoint import EntrypointType

    from catdask.cli import main as cli_main
    from catdask.orchestration.train import train

    original = serve_mod.served_deployments

    def with_test_deployment(store=None, **kwargs):
        anchor = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=delay)
        extra = train.to_deployment(
            name="scheduled-train", entrypoint_type=EntrypointType.MODULE_PATH,
            schedule=Interval(dt.timedelta(hours=1), anchor_date=anchor, timezone="UTC"),
            parameters={"store": store, "dataset": "iris", "n_restarts": 2,
                        "model_name": "iris-scheduled"},
        )
        return original(store, **kwargs) + [extra]

    serve_mod.served_deployments = with_test_deployment
    return cli_main(["--store", store, "serve", "--dask-dashboard-port", dashboard_port])


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # As the `catdask` console script ends (catdask.cli.run): the interpreter's teardown waited
    # on a Prefect worker thread, the helper alive a minute after serve said "stopped".
    from catdask.cli import runtime
    from catdask.cli.main import _exit_without_teardown

    if runtime.exit_without_teardown:
        _exit_without_teardown(code)
    sys.exit(code)
