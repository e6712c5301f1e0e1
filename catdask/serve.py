"""``catdask serve``: a single-machine deployment of the whole pipeline (127.0.0.1 only).

Starts (1) a Prefect server on ``host:port`` unless ``PREFECT_API_URL`` already points at one,
(2) a local Dask cluster on 127.0.0.1 (dashboard port ``dask_dashboard_port``), and (3) the served
deployments (``flow.serve``-style: scheduled nightly retraining, weekly evaluation, and
on-demand ingest/train), printing the dashboard URLs. Everything binds to 127.0.0.1 unless told
otherwise. Ctrl-C stops all three. See ``deploy/README.md`` for the work-pool alternative.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

from .errors import ServiceStartError

__all__ = ["serve", "start_prefect_server", "wait_for_prefect", "served_deployments"]

NIGHTLY_RETRAIN_CRON = "0 2 * * *"
WEEKLY_EVALUATION_CRON = "0 3 * * 0"


def wait_for_prefect(api_url, timeout=90.0, proc=None):
    """Block until ``{api_url}/health`` answers (Prefect's server needs 4-8 s, STACK.md).

    With ``proc`` (the server process), fail at once if it exits instead of waiting.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ServiceStartError(
                f"`prefect server start` exited with code {proc.returncode} before {api_url} "
                "answered (see its output above)"
            )
        try:
            with urllib.request.urlopen(f"{api_url}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise ServiceStartError(errno.ETIMEDOUT,
                            f"Prefect server at {api_url} did not answer within {timeout:.0f} s")


def start_prefect_server(host="127.0.0.1", port=4200, *, log_file=None):
    """Start ``prefect server start`` as a child process; returns (process, api_url).

    Raises ``OSError(EADDRINUSE)`` at once when ``host:port`` is taken (otherwise the health
    check could answer from whatever server already listens there).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            s.bind((host, port))
        except OSError as exc:
            raise ServiceStartError(
                errno.EADDRINUSE,
                f"{host}:{port} is already in use ({exc.strerror}): another Prefect server or "
                "`catdask serve`? Pick another --port, or set PREFECT_API_URL to use that server",
            ) from exc
    env = dict(os.environ)
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    env.pop("PREFECT_API_URL", None)
    # `--port` alone leaves the UI's API address at the default 4200 (Prefect 3.8): the browser
    # would talk to another server or none. These settings make the UI follow host and port.
    env["PREFECT_SERVER_API_HOST"] = host
    env["PREFECT_SERVER_API_PORT"] = str(port)
    out = open(log_file, "ab") if log_file else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", host, "--port", str(port)],
        env=env, stdout=out, stderr=subprocess.STDOUT,
    )
    api_url = f"http://{host}:{port}/api"
    try:
        wait_for_prefect(api_url, proc=proc)
    except BaseException:  # timeout, early exit, Ctrl-C / SIGTERM while waiting
        _stop_process(proc)
        raise
    return proc, api_url


def _stop_process(proc, timeout=30):
    """Terminate a child process, killing it if it does not exit within ``timeout`` s."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


def _sigterm_to_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def served_deployments(store=None, *, retrain_cron=NIGHTLY_RETRAIN_CRON,
                       evaluation_cron=WEEKLY_EVALUATION_CRON):
    """The deployments a single machine serves (schedules in UTC)."""
    from flows.evaluate import evaluate
    from flows.ingest import ingest
    from flows.train import retrain_registered, train

    return [
        retrain_registered.to_deployment(name="nightly-retrain", cron=retrain_cron,
                                         parameters={"store": store}),
        evaluate.to_deployment(name="weekly-evaluation", cron=evaluation_cron,
                               parameters={"store": store}),
        train.to_deployment(name="train", parameters={"store": store}),
        ingest.to_deployment(name="ingest", parameters={"store": store, "names": ["iris", "wine"]}),
    ]


def serve(host="127.0.0.1", port=4200, dask_dashboard_port=8787, store=None):
    """Run the Prefect server, a local Dask cluster and the served deployments until Ctrl-C."""
    import prefect
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from .distributed.cluster import ENV_SCHEDULER, close_embedded_cluster, embedded_cluster

    server = None
    api_url = os.environ.get("PREFECT_API_URL")
    # SIGTERM during start-up (before the Prefect runner installs its own handler) must not
    # kill this process alone and orphan the Prefect server and the Dask workers.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _sigterm_to_keyboard_interrupt)
    try:
        if not api_url:
            server, api_url = start_prefect_server(host, port)
        client = embedded_cluster(dashboard_port=dask_dashboard_port)
        # Flow runs start in child processes: they find the cluster through the environment.
        os.environ[ENV_SCHEDULER] = client.scheduler.address
        os.environ["PREFECT_API_URL"] = api_url
        print(f"Prefect UI:      {api_url.removesuffix('/api')}")
        print(f"Dask dashboard:  {client.dashboard_link}")
        print(f"Dask scheduler:  {client.scheduler.address}")
        print(f"Store:           {os.path.abspath(store or os.environ.get('CATDASK_STORE', 'catdask-store'))}")
        with temporary_settings(updates={PREFECT_API_URL: api_url}):
            prefect.serve(*served_deployments(store))
    finally:
        close_embedded_cluster()
        if server is not None:
            _stop_process(server)
