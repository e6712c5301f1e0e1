"""Prefect API servers that never outlive the process that started them (127.0.0.1 only).

- :func:`start_prefect_server`: ``prefect server start`` with UI and services, for
  ``catdask serve`` (through :mod:`.prefect_server`);
- :func:`temporary_prefect_server`: the lightweight API a CLI command needs when no
  ``PREFECT_API_URL`` is set: the command of Prefect's own ``SubprocessASGIServer``, started
  here so that it can be tied to this process.

Both run under :mod:`.parent_death`, so a killed CLI does not orphan them. Start them from the
main thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from ..errors import ServiceStartError
from .prefect_server import STOP_GRACE_SECONDS

__all__ = ["guarded_command", "start_prefect_server", "temporary_prefect_server",
           "wait_for_prefect", "stop_process", "default_log_file", "api_health", "api_gone",
           "api_answers_at_once"]

LOCALHOST = "127.0.0.1"
_LAUNCHER = Path(__file__).with_name("parent_death.py")


def guarded_command(command, parent_pid=None, death_signal=signal.SIGTERM):
    """``command`` wrapped so that it receives ``death_signal`` when ``parent_pid`` (default:
    this process) dies; pass the result to :class:`subprocess.Popen` from this process."""
    parent = os.getpid() if parent_pid is None else int(parent_pid)
    return [sys.executable, str(_LAUNCHER), str(parent), str(int(death_signal)), "--",
            *map(str, command)]


def wait_for_prefect(api_url, timeout=90.0, proc=None, log_file=None):
    """Block until ``{api_url}/health`` answers (a Prefect server needs 4-8 s, more on a
    loaded machine). With ``proc`` (the server process), fail at once if it exits; the error
    names ``log_file``, where its output went."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            where = f"its output is in {log_file}" if log_file else "its output was discarded"
            raise ServiceStartError(
                f"the Prefect server exited with code {proc.returncode} before {api_url} "
                f"answered ({where})"
            )
        try:
            with urllib.request.urlopen(f"{api_url}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise ServiceStartError(errno.ETIMEDOUT,
                            f"Prefect server at {api_url} did not answer within {timeout:.0f} s")


def api_health(api_url, timeout) -> str:
    """``"ok"`` when the Prefect API's health check answers within ``timeout`` s, ``"gone"``
    when nothing listens at its address (connection refused), else ``"busy"``."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout) as answer:
            return "ok" if answer.status == 200 else "busy"
    except urllib.error.URLError as exc:
        refused = isinstance(getattr(exc, "reason", None), ConnectionRefusedError)
        return "gone" if refused else "busy"
    except ConnectionRefusedError:
        return "gone"
    except OSError:  # a timeout, a reset: someone is there
        return "busy"


def api_gone(api_url) -> bool:
    """Whether the API's server is gone. A slow answer is a busy server, not a gone one: under
    a burst of 20 served runs the health check of a live API took over a second."""
    return api_health(api_url, timeout=5.0) == "gone"


def api_answers_at_once(api_url) -> bool:
    """Whether the API answers at once: only then is it worth reporting to it while stopping."""
    return api_url is not None and api_health(api_url, timeout=2.0) == "ok"


def _check_port_free(host, port):
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


def _free_port(host=LOCALHOST):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def default_log_file(name):
    """``<PREFECT_HOME>/<name>``: where a server's output goes unless told otherwise, so that
    a server that fails to start can be diagnosed."""
    from prefect.settings import get_current_settings

    home = Path(get_current_settings().home).expanduser()
    home.mkdir(parents=True, exist_ok=True)
    return home / name


def _launch(command, env, host, port, log_file, timeout):
    out = open(log_file, "ab") if log_file else subprocess.DEVNULL
    try:
        # Its own session: a terminal's Ctrl-C would kill it under the interrupted command.
        # This process stops the server when it ends, and parent_death's signal reaches it in
        # any session.
        proc = subprocess.Popen(guarded_command(command), env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    finally:
        if log_file:
            out.close()  # the child holds its own descriptor
    api_url = f"http://{host}:{port}/api"
    try:
        wait_for_prefect(api_url, timeout=timeout, proc=proc, log_file=log_file)
    except BaseException:  # timeout, early exit, Ctrl-C / SIGTERM while waiting
        stop_process(proc)
        raise
    return proc, api_url


def start_prefect_server(host=LOCALHOST, port=4200, *, log_file=None, timeout=90.0):
    """Start ``prefect server start`` (UI and services; :mod:`.prefect_server`) as a guarded
    child; returns ``(process, api_url)``.

    Raises ``ServiceStartError(EADDRINUSE)`` at once when ``host:port`` is taken (otherwise the
    health check could answer from whatever server already listens there).
    """
    _check_port_free(host, port)
    env = dict(os.environ)
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    env.pop("PREFECT_API_URL", None)
    # `--port` alone leaves the UI's API address at the default 4200 (Prefect 3.8): the browser
    # would talk to another server or none. These settings make the UI follow host and port.
    env["PREFECT_SERVER_API_HOST"] = host
    env["PREFECT_SERVER_API_PORT"] = str(port)
    command = [sys.executable, "-m", "catdask.orchestration.prefect_server", "start",
               "--host", host, "--port", str(port)]
    if log_file is None:
        log_file = default_log_file("server.log")
    return _launch(command, env, host, port, log_file, timeout)


def _temporary_server_env():
    from prefect.settings import get_current_settings

    env = dict(os.environ)
    env.update(get_current_settings().to_environment_variables(exclude_unset=True))
    env.pop("PREFECT_API_URL", None)
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # As Prefect's SubprocessASGIServer: no UI, only the services an ephemeral server runs.
    env.update(PREFECT_UI_ENABLED="0", PREFECT__SERVER_EPHEMERAL="1", PREFECT__SERVER_FINAL="1")
    return env


@contextlib.contextmanager
def temporary_prefect_server(*, timeout=None, log_file=None):
    """Within the block, flows report to a Prefect API: ``PREFECT_API_URL`` when it is set, else a
    temporary server on a free 127.0.0.1 port that stops when the block ends or this process dies.
    Yields the API URL. Call it from the main thread before the first flow runs (a flow run without
    an API would start Prefect's own unguarded server). ``timeout``: seconds to wait for the server
    (default ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``); ``log_file``: its output
    (default ``<PREFECT_HOME>/temporary-server.log``).
    """
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
        temporary_settings,
    )

    existing = PREFECT_API_URL.value()
    if existing:
        yield existing
        return
    if timeout is None:
        timeout = float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())
    port = _free_port()
    command = [sys.executable, "-m", "uvicorn", "--factory",
               "prefect.server.api.server:create_app", "--host", LOCALHOST, "--port", str(port),
               "--log-level", "error", "--lifespan", "on",
               "--timeout-graceful-shutdown", str(STOP_GRACE_SECONDS)]
    if log_file is None:
        log_file = default_log_file("temporary-server.log")
    proc, api_url = _launch(command, _temporary_server_env(), LOCALHOST, port, log_file, timeout)
    previous = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = api_url  # for child processes
    try:
        with temporary_settings(updates={PREFECT_API_URL: api_url}):
            yield api_url
    finally:
        _flush_to_api()
        if previous is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = previous
        stop_process(proc)


def _flush_to_api(timeout=10.0):
    """Send the logs and events still queued to the server before it stops (otherwise
    Prefect sends them at exit, to a server that is gone, and prints errors)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        with contextlib.suppress(Exception):
            worker.drain_all(timeout=timeout)


def stop_process(proc, timeout=30):
    """Terminate a child process, killing it if it does not exit within ``timeout`` s."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)
