"""``catdask serve``: a single-machine deployment of the whole pipeline (127.0.0.1 only).

Starts a Prefect server (unless ``PREFECT_API_URL`` points at one), a local Dask cluster (unless
a scheduler is given) and the served deployments (nightly retraining, weekly evaluation, a
retrain that a new snapshot triggers, on-demand ingest/train), printing the dashboard URLs. The
Prefect API started here always requires a credential (:mod:`catdask.orchestration.api_auth`);
the store, the scheduler and the code of every served run are fixed here
(:mod:`catdask.orchestration.served`). Ctrl-C stops all three; the Prefect server also stops if
this process is killed, and serve stops if it does (:class:`~catdask.errors.ServiceLostError`).

At most ``limit`` flow runs execute at once (:func:`default_run_limit` from the cores and
memory, or ``$CATDASK_SERVE_LIMIT``), each in a process forked from a preloaded server
(:mod:`catdask.orchestration.preloaded_runs`); the rest wait queued. See ``deploy/README.md``
for the work-pool alternative.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading

from . import settings
from .errors import ServiceLostError
from .orchestration.api_auth import (UnauthenticatedBindError, api_auth_for_bind, is_loopback,
                                     serve_api_auth)
from .orchestration.server import (api_answers_at_once, api_gone, api_health, default_log_file,
                                   start_prefect_server, stop_process)

__all__ = ["serve", "served_deployments", "serving_summary", "default_run_limit",
           "resolve_run_limit", "api_auth_for_bind", "is_loopback", "UnauthenticatedBindError"]

NIGHTLY_RETRAIN_CRON = "0 2 * * *"
WEEKLY_EVALUATION_CRON = "0 3 * * 0"
ENV_RUN_LIMIT = settings.SERVE_LIMIT.name
# Memory one flow-run process may take on top of the shared Dask cluster (a served UCI train run
# peaks near 300 MiB).
GIB_PER_RUN = 2
# How often the runner asks the API for runs to start, unless PREFECT_RUNNER_POLL_FREQUENCY is
# set (Prefect's 10 s would leave a freed slot idle).
SERVE_POLL_SECONDS = 2.0
#: Seconds a Dask worker gets to finish its task when serve stops (then it is killed).
STOP_WORKER_SECONDS = 1.0
#: How often serve checks that its Prefect server is still running (and its API answers).
SERVER_WATCH_SECONDS = 1.0
#: Seconds a Prefect API that serve did not start may refuse connections before serve stops.
API_LOST_SECONDS = 5.0
#: Seconds a run process gets after SIGTERM when the API is gone (its crash report cannot land).
API_LOST_RUN_GRACE_SECONDS = 1.0
_SIGTERM_SEEN = threading.Event()  # checked again: its KeyboardInterrupt is lost in gc callbacks


def default_run_limit(cores=None, memory_bytes=None):
    """Concurrent flow runs for this machine: ``max(1, min(cores, memory_GiB // 2))``."""
    from .distributed.host import usable_cores, usable_memory_bytes

    cores = usable_cores() if cores is None else cores
    memory_bytes = usable_memory_bytes() if memory_bytes is None else memory_bytes
    return max(1, min(int(cores), int(memory_bytes // (GIB_PER_RUN * 2**30))))


def resolve_run_limit(limit=None):
    """``limit``, else ``$CATDASK_SERVE_LIMIT``, else :func:`default_run_limit`; a positive int."""
    source = "limit"
    if limit is None:
        raw = (settings.SERVE_LIMIT.get() or "").strip()
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
    _SIGTERM_SEEN.set()
    raise KeyboardInterrupt(f"signal {signum}")


def served_deployments(store=None, *, scheduler=None, retrain_cron=NIGHTLY_RETRAIN_CRON,
                       evaluation_cron=WEEKLY_EVALUATION_CRON):
    """The deployments a single machine serves (schedules in UTC).

    Entry points are module paths, so runs import the installed package. Every deployment gets the
    store as an absolute path, resolved now. The store (and ``scheduler``, when given) are frozen
    parameters and the schema is closed, so the API refuses a run that names another value or an
    unknown parameter; the run processes check again (:mod:`catdask.orchestration.served`).
    """
    from prefect.types.entrypoint import EntrypointType
    from prefect.utilities.annotations import freeze

    from .orchestration.evaluate import evaluate
    from .orchestration.events import retrain_trigger
    from .orchestration.ingest import ingest
    from .orchestration.served import close_parameter_schema
    from .orchestration.train import retrain_registered, train
    from .store.root import open_store

    store = open_store(store).url
    module = {"entrypoint_type": EntrypointType.MODULE_PATH}
    pinned = {"store": freeze(store)}
    computing = dict(pinned, **({"scheduler": freeze(str(scheduler))} if scheduler else {}))
    return [close_parameter_schema(d) for d in [
        retrain_registered.to_deployment(name="nightly-retrain", cron=retrain_cron,
                                         parameters=dict(computing), **module),
        evaluate.to_deployment(name="weekly-evaluation", cron=evaluation_cron,
                               parameters=dict(pinned), **module),
        # A new snapshot in this store retrains the models of its data set (orchestration.events).
        retrain_registered.to_deployment(name="retrain-on-new-snapshot",
                                         parameters=dict(computing),
                                         triggers=[retrain_trigger(store)], **module),
        train.to_deployment(name="train", parameters=dict(computing), **module),
        ingest.to_deployment(name="ingest", parameters={**pinned, "names": ["iris", "wine"]},
                             **module),
    ]]


def work_pool_deployments(names):
    """Those of ``names`` (``"flow/deployment"``) that the Prefect server of ``PREFECT_API_URL``
    already has as work-pool deployments (``prefect deploy`` of ``deploy/prefect.yaml``), as
    ``"name (work pool P)"``: serving would replace them, and pause them when it stops.
    """
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    found = []
    with get_client(sync_client=True) as client:
        for name in names:
            try:
                deployment = client.read_deployment_by_name(name)
            except ObjectNotFound:
                continue
            if deployment.work_pool_name:
                found.append(f"{name} (work pool {deployment.work_pool_name})")
    return found


def _refuse_work_pool_clash(names, api_url):
    clash = work_pool_deployments(names)
    if clash:
        from .errors import ServiceStartError

        raise ServiceStartError(
            f"the Prefect server at {api_url} already has work-pool deployments of the same "
            f"names: {', '.join(clash)}; serving would replace them and pause them when serve "
            "stops. Serve on another Prefect server (unset PREFECT_API_URL, or another "
            "PREFECT_HOME), or delete them first (prefect deployment delete NAME)")


def _dask_client(scheduler, dashboard_port):
    """``(client, owned)``: a client of the given scheduler (closed by the caller), else of
    the embedded local cluster (started here, closed with :func:`close_embedded_cluster`)."""
    from . import operators  # noqa: F401  (adds what the workers import as they start)
    from .distributed.cluster import connect_scheduler, embedded_cluster

    if scheduler:
        from .distributed.worker_check import check_worker_software

        _note(f"using the Dask scheduler at {scheduler}")
        client = connect_scheduler(scheduler)
        try:  # refused now rather than in every served run
            check_worker_software(client, scheduler)
        except BaseException:
            client.close()
            raise
        return client, True
    _note("starting the Dask cluster ...")
    return embedded_cluster(dashboard_port=dashboard_port), False


def _server_gone_message(server, log_file):
    return (f"the Prefect server (pid {server.pid}) exited with code {server.returncode} while "
            f"serving; the UI and the served deployments are gone (its output is in "
            f"{log_file})")


class _MutedOnceServerGone(logging.Filter):
    """Drops console records once ``server`` has exited: Prefect's observers lose their
    websocket at that moment and log a page of connection tracebacks before serve notices
    (checked every :data:`SERVER_WATCH_SECONDS`) and says in one line what happened."""

    #: How long a record with a traceback waits for the server's exit to be seen.
    EXIT_GRACE_SECONDS = 2.0

    def __init__(self, server):
        super().__init__()
        self.server = server

    def filter(self, record):
        if self.server.poll() is not None:
            return False
        if record.exc_info is None:
            return True
        # The kernel closes a killed server's sockets before its exit status can be reaped:
        # the websocket's traceback can arrive while poll() still says "running".
        try:
            self.server.wait(timeout=self.EXIT_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            return True  # a real error while the server is up: show it
        return False


def _mute_console_once_gone(server):
    """Attach :class:`_MutedOnceServerGone` to the console handlers (unless logging is at
    INFO or finer, as with ``catdask -v``, where the details are wanted)."""
    root = logging.getLogger()
    if server is None or root.getEffectiveLevel() <= logging.INFO:
        return
    for handler in root.handlers:
        handler.addFilter(_MutedOnceServerGone(server))


async def _serve_while_server_runs(runner, server, log_file=None, api_url=None):
    """Run ``runner`` until it stops, or until ``server`` (our Prefect server child; None when the
    API is someone else's) exits, or the API at ``api_url`` has refused connections for
    :data:`API_LOST_SECONDS`: then stop the runner without talking to the dead API and raise
    :class:`ServiceLostError`. Stopped otherwise (Ctrl-C, SIGTERM, also one whose
    KeyboardInterrupt a gc callback swallowed) while the API does not answer, the runner does not
    try to pause the deployments either. Either way without an API, the run processes are
    stopped before the runner: Prefect's runner gives each 30 s after SIGTERM, one after the
    other, and a run's crash report retries against the dead API all that time.
    """
    import time

    from .orchestration.preloaded_runs import stop_run_processes

    run = asyncio.ensure_future(runner.start())
    if server is None and api_url is None:
        return await run
    if server is not None:
        _mute_console_once_gone(server)
    silent_since = None
    try:
        while not run.done():
            await asyncio.wait({run}, timeout=SERVER_WATCH_SECONDS)
            if run.done():
                break
            if _SIGTERM_SEEN.is_set():  # its KeyboardInterrupt was lost in a gc callback
                raise asyncio.CancelledError  # stopped as by Ctrl-C (below)
            lost = None
            if server is not None:
                lost = _server_gone_message(server, log_file) if server.poll() is not None else None
            elif not await asyncio.to_thread(api_gone, api_url):
                silent_since = None
            else:
                silent_since = silent_since or time.monotonic()
                if time.monotonic() - silent_since >= API_LOST_SECONDS:
                    lost = (f"the Prefect API at {api_url} has refused connections for "
                            f"{API_LOST_SECONDS:g} s (its server is gone); the served "
                            "deployments are unreachable. Start serve again once it answers")
            if lost:
                # Pausing the deployments needs the API: a runner that tried retried a minute.
                runner.pause_on_shutdown = False
                stop_run_processes(API_LOST_RUN_GRACE_SECONDS)
                run.cancel()
                with contextlib.suppress(BaseException):
                    await run
                raise ServiceLostError(lost)
    except asyncio.CancelledError:  # Ctrl-C or SIGTERM: the runner stops after this
        health = "ok" if api_url is None else await asyncio.to_thread(api_health, api_url, 2.0)
        if health != "ok":
            runner.pause_on_shutdown = False
        if health == "gone":  # a busy API still gets the runs' crash reports
            stop_run_processes(API_LOST_RUN_GRACE_SECONDS)
        raise
    return run.result()


def serve(host="127.0.0.1", port=4200, dask_dashboard_port=8787, store=None, limit=None,
          scheduler=None):
    """Run the Prefect server, a local Dask cluster and the served deployments until Ctrl-C.

    Parameters
    ----------
    host, port : str, int
        Where the Prefect server listens (when ``PREFECT_API_URL`` is not set). The Dask
        cluster always binds 127.0.0.1.
    dask_dashboard_port : int
        The embedded cluster's dashboard (unused with ``scheduler``).
    store : path or None
    limit : int, optional
        Flow runs executing at once; more are queued (default :func:`resolve_run_limit`).
    scheduler : str, optional
        A running Dask scheduler (``tcp://host:8786``) the served runs compute on; default
        ``$CATDASK_SCHEDULER``, else an embedded local cluster started here.

    Raises
    ------
    catdask.errors.ServiceLostError
        When the Prefect server started here exits while serving.
    catdask.errors.SchedulerConnectionError
        When ``scheduler`` does not answer as a Dask scheduler.
    catdask.errors.ServiceStartError
        When the Prefect server already has work-pool deployments of the served names
        (:func:`work_pool_deployments`); nothing is served.
    UnauthenticatedBindError
        When ``host`` is not loopback and ``PREFECT_SERVER_API_AUTH_STRING`` is not set
        (:func:`api_auth_for_bind`); nothing is started.
    """
    from prefect.exceptions import TerminationSignal
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    from .distributed.cluster import (ENV_SCHEDULER, close_embedded_cluster,
                                      quiet_embedded_workers)
    from .orchestration.preloaded_runs import (RUN_STOP_GRACE_SECONDS, ServeRunner,
                                               stop_fork_server, stop_run_processes)
    from .orchestration.served import pin_served_runs
    from .store.root import open_store

    limit = resolve_run_limit(limit)
    scheduler = scheduler or settings.SCHEDULER.get()
    server = client = owned_client = log_file = None
    api_url = settings.PREFECT_API_URL.get()
    # Before anything starts: the credential of the server started here (configured or new).
    auth, generated = (None, False) if api_url else serve_api_auth(host)
    # SIGTERM during start-up (before the Prefect runner installs its own handler) must not
    # kill this process alone and orphan the Prefect server and the Dask workers.
    parent, previous_sigterm = os.getppid(), None
    if threading.current_thread() is threading.main_thread():
        _SIGTERM_SEEN.clear()
        previous_sigterm = signal.signal(signal.SIGTERM, _sigterm_to_keyboard_interrupt)
    try:
        if not api_url:
            # The server requires it; serve's runner and its run processes present it.
            os.environ["PREFECT_SERVER_API_AUTH_STRING"] = auth
            os.environ["PREFECT_API_AUTH_STRING"] = auth
            _note(f"starting the Prefect server on {host}:{port} (10-60 s) ...")
            log_file = default_log_file("server.log")
            server, api_url = start_prefect_server(host, port, log_file=log_file)
        client, owned = _dask_client(scheduler, dask_dashboard_port)
        owned_client = client if owned else None
        # Flow runs start in child processes: they find the cluster through the environment.
        scheduler_address = scheduler or client.scheduler.address
        os.environ[ENV_SCHEDULER] = scheduler_address
        os.environ["PREFECT_API_URL"] = api_url
        store_path = open_store(store).url
        # Fixed now, for every run: the run processes refuse a parameter naming others.
        pin_served_runs(store_path, scheduler_address)
        updates = {PREFECT_API_URL: api_url}
        auth_string = settings.PREFECT_API_AUTH_STRING.get()
        if auth_string:
            updates[PREFECT_API_AUTH_STRING] = auth_string
        with temporary_settings(updates=updates):
            # As prefect.serve, but the deployments exist before the summary says how to run
            # them, and the summary names this server (Prefect's own names none).
            deployments = served_deployments(store_path, scheduler=scheduler_address)
            names = [f"{d.flow_name}/{d.name}" for d in deployments]
            _refuse_work_pool_clash(names, api_url)
            runner = ServeRunner(limit=limit, query_seconds=_poll_seconds())
            for deployment in deployments:
                runner.add_preloaded_deployment(deployment)
            print(serving_summary(api_url, client.dashboard_link, scheduler_address,
                                  store_path, limit, names, auth=auth, generated=generated),
                  flush=True)
            try:
                _SIGTERM_SEEN.is_set() and _sigterm_to_keyboard_interrupt(signal.SIGTERM, None)
                asyncio.run(_serve_while_server_runs(runner, server, log_file, api_url))
            except (KeyboardInterrupt, TerminationSignal, asyncio.CancelledError):
                pass  # the normal way to stop: clean up below
    finally:
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a repeat: a traceback halfway
        _note("stopping ...")
        quiet_embedded_workers()  # as Ctrl-C does (their logs would follow "stopping")
        # Before the server: the runs report their crash to it, unless it or serve's parent died.
        stop_run_processes(RUN_STOP_GRACE_SECONDS if api_answers_at_once(api_url)
                           else API_LOST_RUN_GRACE_SECONDS,
                           lambda: os.getppid() == parent and api_answers_at_once(api_url))
        stop_fork_server()
        if owned_client is not None:
            owned_client.close()
        close_embedded_cluster(worker_timeout=STOP_WORKER_SECONDS)
        if server is not None:
            stop_process(server)
        # A run the runner was still starting when the signal came can be born after the first
        # sweep, and would retry a dead API: stop it now.
        stop_run_processes(0.0)
        _note("stopped")
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, previous_sigterm)


def _note(message):
    print(f"catdask serve: {message}", file=sys.stderr, flush=True)


def serving_summary(api_url, dashboard_link, scheduler_address, store_path, limit,
                    deployment_names=(), *, auth=None, generated=False):
    """What ``catdask serve`` prints once everything is up: where to look, what is served,
    and how to start a run from another shell (which needs this server's API address: a bare
    ``prefect`` command would talk to a server of its own, and ``auth``, the credential of a
    server serve started: the UI asks for it)."""
    if auth:
        where = ("generated for this start; set PREFECT_SERVER_API_AUTH_STRING to choose one"
                 if generated else "PREFECT_SERVER_API_AUTH_STRING")
        credential = [f"API credential:  {auth} ({where})"]
        export_auth = [f"  export PREFECT_API_AUTH_STRING={shlex.quote(auth)}"]
    else:
        credential = export_auth = []
    return "\n".join([
        f"Prefect UI:      {api_url.removesuffix('/api')}",
        *credential,
        f"Dask dashboard:  {dashboard_link}",
        f"Dask scheduler:  {scheduler_address}",
        f"Store:           {store_path}",
        f"Run limit:       {limit} flow runs at once (more wait in the queue)",
        "",
        "Deployments being served: " + (", ".join(sorted(deployment_names)) or "none"),
        "Start a run from the UI (Deployments, Run) or from another shell:",
        f"  export PREFECT_API_URL={api_url}",
        *export_auth,
        "  prefect deployment run catdask-ingest/ingest --param 'names=[\"iris\"]'",
        "  prefect deployment run catdask-train/train --param dataset=iris --param method=cqs",
        "Stop with Ctrl-C.",
        "",
    ])
