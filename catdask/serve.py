"""``catdask serve``: a single-machine deployment of the whole pipeline (127.0.0.1 only).

Starts (1) a Prefect server on ``host:port`` unless ``PREFECT_API_URL`` already points at one,
(2) a local Dask cluster on 127.0.0.1 (dashboard port ``dask_dashboard_port``), and (3) the served
deployments (``flow.serve``-style: scheduled nightly retraining, weekly evaluation, and
on-demand ingest/train), printing the dashboard URLs. Everything binds to 127.0.0.1 unless told
otherwise. Ctrl-C stops all three; the Prefect server also stops if this process is killed.

Load is bounded: at most ``limit`` flow runs execute at once (each in its own process); the
others wait in the queue (state Scheduled/Late) until a slot frees. The default
(:func:`default_run_limit`) follows the machine's cores and memory; set it with ``limit=`` or
``$CATDASK_SERVE_LIMIT``. Each run's process is forked from a server that has already imported
Prefect and catdask (:mod:`catdask.orchestration.preloaded_runs`), and the runner looks for
queued runs every :data:`SERVE_POLL_SECONDS` s, so a freed slot is refilled quickly. See
``deploy/README.md`` for the work-pool alternative.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading

from .orchestration.server import start_prefect_server, stop_process

__all__ = ["serve", "served_deployments", "serving_summary", "default_run_limit",
           "resolve_run_limit"]

NIGHTLY_RETRAIN_CRON = "0 2 * * *"
WEEKLY_EVALUATION_CRON = "0 3 * * 0"
ENV_RUN_LIMIT = "CATDASK_SERVE_LIMIT"
# Memory one flow-run process may take (its Python, Prefect client and the data it loads) on
# top of the shared Dask cluster: a measured served train run on a UCI set peaks near 300 MiB,
# a 27-run burst without a limit reached 8.15 GiB; 2 GiB per run keeps a burst well inside RAM.
GIB_PER_RUN = 2
# How often the runner asks the API for runs to start, unless PREFECT_RUNNER_POLL_FREQUENCY is
# set: Prefect's 10 s left a freed slot idle for 5 s on average while a served iris run takes
# a few seconds; one small query every 2 s costs the API little.
SERVE_POLL_SECONDS = 2.0


def default_run_limit(cores=None, memory_bytes=None):
    """Concurrent flow runs for this machine: ``max(1, min(cores, memory_GiB // 2))``."""
    import psutil

    cores = (os.cpu_count() or 1) if cores is None else cores
    memory_bytes = psutil.virtual_memory().total if memory_bytes is None else memory_bytes
    return max(1, min(int(cores), int(memory_bytes // (GIB_PER_RUN * 2**30))))


def resolve_run_limit(limit=None):
    """``limit``, else ``$CATDASK_SERVE_LIMIT``, else :func:`default_run_limit`; a positive int."""
    source = "limit"
    if limit is None:
        raw = os.environ.get(ENV_RUN_LIMIT, "").strip()
        if not raw:
            return default_run_limit()
        limit, source = raw, f"${ENV_RUN_LIMIT}"
    try:
        value = int(limit)
    except (TypeError, ValueError):
        raise ValueError(f"{source} must be a whole number of flow runs, got {limit!r}") from None
    if value < 1:
        raise ValueError(f"{source} must be at least 1 (concurrent flow runs), got {value}")
    return value


def _poll_seconds():
    """:data:`SERVE_POLL_SECONDS`, or Prefect's ``PREFECT_RUNNER_POLL_FREQUENCY`` when set."""
    from prefect.settings import get_current_settings

    runner = get_current_settings().runner
    if "poll_frequency" in runner.model_fields_set:
        return runner.poll_frequency
    return SERVE_POLL_SECONDS


def _sigterm_to_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def served_deployments(store=None, *, retrain_cron=NIGHTLY_RETRAIN_CRON,
                       evaluation_cron=WEEKLY_EVALUATION_CRON):
    """The deployments a single machine serves (schedules in UTC).

    Their entry points are module paths (``catdask.orchestration.train.train``), so the flow-run
    processes import the installed package: no source checkout is needed.
    """
    from prefect.types.entrypoint import EntrypointType

    from .orchestration.evaluate import evaluate
    from .orchestration.ingest import ingest
    from .orchestration.train import retrain_registered, train

    module = {"entrypoint_type": EntrypointType.MODULE_PATH}
    return [
        retrain_registered.to_deployment(name="nightly-retrain", cron=retrain_cron,
                                         parameters={"store": store}, **module),
        evaluate.to_deployment(name="weekly-evaluation", cron=evaluation_cron,
                               parameters={"store": store}, **module),
        train.to_deployment(name="train", parameters={"store": store}, **module),
        ingest.to_deployment(name="ingest", parameters={"store": store, "names": ["iris", "wine"]},
                             **module),
    ]


def serve(host="127.0.0.1", port=4200, dask_dashboard_port=8787, store=None, limit=None):
    """Run the Prefect server, a local Dask cluster and the served deployments until Ctrl-C.

    Parameters
    ----------
    host, port : str, int
        Where the Prefect server listens (when ``PREFECT_API_URL`` is not set).
    dask_dashboard_port : int
    store : path or None
    limit : int, optional
        Flow runs executing at once; more are queued (default :func:`resolve_run_limit`).
    """
    from prefect.exceptions import TerminationSignal
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from .distributed.cluster import ENV_SCHEDULER, close_embedded_cluster, embedded_cluster
    from .orchestration.preloaded_runs import ServeRunner

    limit = resolve_run_limit(limit)
    server = None
    api_url = os.environ.get("PREFECT_API_URL")
    # SIGTERM during start-up (before the Prefect runner installs its own handler) must not
    # kill this process alone and orphan the Prefect server and the Dask workers.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _sigterm_to_keyboard_interrupt)
    try:
        if not api_url:
            _note(f"starting the Prefect server on {host}:{port} (10-60 s) ...")
            server, api_url = start_prefect_server(host, port)
        _note("starting the Dask cluster ...")
        client = embedded_cluster(dashboard_port=dask_dashboard_port)
        # Flow runs start in child processes: they find the cluster through the environment.
        os.environ[ENV_SCHEDULER] = client.scheduler.address
        os.environ["PREFECT_API_URL"] = api_url
        store_path = os.path.abspath(store or os.environ.get("CATDASK_STORE", "catdask-store"))
        with temporary_settings(updates={PREFECT_API_URL: api_url}):
            # As prefect.serve, but the deployments exist before the summary says how to run
            # them, and the summary names this server (Prefect's own start message suggests a
            # bare `prefect deployment run`, which would look for them in another server).
            runner = ServeRunner(limit=limit, query_seconds=_poll_seconds())
            names = []
            for deployment in served_deployments(store):
                runner.add_preloaded_deployment(deployment)
                names.append(f"{deployment.flow_name}/{deployment.name}")
            print(serving_summary(api_url, client.dashboard_link, client.scheduler.address,
                                  store_path, limit, names), flush=True)
            try:
                asyncio.run(runner.start())
            except (KeyboardInterrupt, TerminationSignal):
                pass  # the normal way to stop: clean up below
    finally:
        _note("stopping ...")
        close_embedded_cluster()
        if server is not None:
            stop_process(server)
        _note("stopped")


def _note(message):
    print(f"catdask serve: {message}", file=sys.stderr, flush=True)


def serving_summary(api_url, dashboard_link, scheduler_address, store_path, limit,
                    deployment_names=()):
    """What ``catdask serve`` prints once everything is up: where to look, what is served,
    and how to start a run from another shell (which needs this server's API address: a bare
    ``prefect`` command would talk to a server of its own)."""
    return "\n".join([
        f"Prefect UI:      {api_url.removesuffix('/api')}",
        f"Dask dashboard:  {dashboard_link}",
        f"Dask scheduler:  {scheduler_address}",
        f"Store:           {store_path}",
        f"Run limit:       {limit} flow runs at once (more wait in the queue)",
        "",
        "Deployments being served: " + (", ".join(sorted(deployment_names)) or "none"),
        "Start a run from the UI (Deployments, Run) or from another shell:",
        f"  export PREFECT_API_URL={api_url}",
        "  prefect deployment run catdask-ingest/ingest --param 'names=[\"iris\"]'",
        "  prefect deployment run catdask-train/train --param dataset=iris --param method=cqs",
        "Stop with Ctrl-C.",
        "",
    ])
