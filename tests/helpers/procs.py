"""Start, watch and stop the servers the deployment tests need, on 127.0.0.1 only.

Every process is started in its own session (process group) with its output in a log file,
and :meth:`Managed.stop` signals the group, waits a bounded time, then SIGKILLs the group and
every descendant it saw, so no test leaves a server, a Dask worker or a flow run behind.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

from .paths import REPO

BIN = Path(sys.executable).parent
LOCALHOST = "127.0.0.1"


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port that was free a moment ago on ``host``."""
    return free_ports(1, host)[0]


def free_ports(count: int, host: str = LOCALHOST, avoid=()) -> list[int]:
    """``count`` distinct TCP ports, free a moment ago on ``host``, none of ``avoid``: all are
    held open until all are chosen (one at a time, the kernel gave the same port twice: weed's
    S3 and master ports once collided, and the session's S3 server never started)."""
    with contextlib.ExitStack() as held:
        ports: list[int] = []
        while len(ports) < count:
            s = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind((host, 0))
            port = s.getsockname()[1]
            if port not in avoid:
                ports.append(port)
        return ports


def child_env(home: Path, api_url: str | None = None, **extra) -> dict:
    """Environment for a Prefect process with its own home and no telemetry."""
    env = dict(os.environ)
    for key in ("PREFECT_API_URL", "PREFECT_API_KEY", "PREFECT_PROFILE", "CATDASK_SCHEDULER",
                "CATDASK_STORE"):
        env.pop(key, None)
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW="ignore",
        PYTHONUNBUFFERED="1",
        MPLBACKEND="Agg",
    )
    if api_url:
        env["PREFECT_API_URL"] = api_url
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Managed:
    """A child process in its own process group, logging to ``log``.

    It gets ``death_signal`` when the test process dies, however it dies
    (:func:`catdask.orchestration.server.guarded_command`: a killed test run left a served
    store with its Dask workers running for 50 minutes and a Prefect server for 68). Create
    it from the main thread (Linux signals the child when the *thread* that started it ends).
    """

    def __init__(self, args, *, log: Path, env=None, cwd=REPO, death_signal=signal.SIGTERM):
        from catdask.orchestration.server import guarded_command

        self.args = [str(a) for a in args]
        self.log = Path(log)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._out = open(self.log, "ab")
        self.proc = subprocess.Popen(
            guarded_command(self.args, death_signal=death_signal), env=env, cwd=str(cwd),
            stdout=self._out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        self.pid = self.proc.pid
        self._seen: dict[int, psutil.Process] = {}

    # ------------------------------------------------------------------ observing
    def alive(self) -> bool:
        return self.proc.poll() is None

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.text().splitlines()[-n:])

    def tree(self) -> list[psutil.Process]:
        """The process and its live descendants (remembered for :meth:`stop`)."""
        try:
            root = psutil.Process(self.pid)
            procs = [root] + root.children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        for p in procs:
            self._seen.setdefault(p.pid, p)
        return procs

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        """Wait until the log matches ``pattern``; fail early if the process exits."""
        rx = re.compile(pattern, re.M)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = rx.search(self.text())
            if m:
                return m
            if not self.alive():
                raise AssertionError(
                    f"{self.args[:3]} exited with {self.proc.returncode} before printing "
                    f"{pattern!r}:\n{self.tail()}"
                )
            time.sleep(0.25)
        raise AssertionError(f"no {pattern!r} from {self.args[:3]} in {timeout:.0f} s:\n{self.tail()}")

    # ------------------------------------------------------------------ stopping
    def stop(self, sig=signal.SIGTERM, timeout: float = 30.0, *, group: bool = True) -> bool:
        """Signal (the group or just the process), wait, then SIGKILL whatever is left.

        Returns True if everything exited within ``timeout`` without SIGKILL.
        """
        self.tree()
        clean = True
        if self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if group:
                    os.killpg(self.pid, sig)
                else:
                    os.kill(self.pid, sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                clean = False
        leftovers = self.survivors(timeout=0 if not clean else min(timeout, 15.0))
        if leftovers or self.alive():
            clean = False
        self.kill()
        return clean

    def survivors(self, timeout: float = 0.0) -> list[psutil.Process]:
        """Remembered descendants still running after waiting up to ``timeout`` s."""
        procs = [p for p in self._seen.values() if p.pid != self.pid]
        _, alive = psutil.wait_procs(procs, timeout=timeout)
        return alive

    def kill(self) -> None:
        """SIGKILL the group and every remembered descendant (idempotent)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        for p in list(self._seen.values()):
            with contextlib.suppress(psutil.Error):
                p.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        psutil.wait_procs(list(self._seen.values()), timeout=5)
        if not self._out.closed:
            self._out.close()


def wait_http(url: str, timeout: float, proc: Managed | None = None) -> bytes:
    """GET ``url`` until it answers 200 (bounded); returns the body."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise AssertionError(f"process exited ({proc.proc.returncode}) while waiting for "
                                 f"{url}:\n{proc.tail()}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return r.read()
                last = r.status
        except (OSError, urllib.error.URLError) as exc:
            last = exc
        time.sleep(0.5)
    tail = f"\n{proc.tail()}" if proc is not None else ""
    raise AssertionError(f"{url} did not answer 200 within {timeout:.0f} s (last: {last}){tail}")


def http_get(url: str, timeout: float = 10.0) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


def listening_sockets(pids) -> list[tuple[int, str, int]]:
    """``(pid, ip, port)`` of every listening TCP socket of the given processes."""
    out = []
    for pid in pids:
        try:
            conns = psutil.Process(pid).net_connections(kind="inet")
        except psutil.Error:
            continue
        out += [(pid, c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN]
    return out


def tree_pids(pid: int) -> list[int]:
    try:
        root = psutil.Process(pid)
        return [root.pid] + [c.pid for c in root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


_TEMPLATE: dict[str, Path | None] = {}


def seeded_prefect_home(home: Path) -> Path:
    """``home`` with an already migrated Prefect database (copied from a per-session template).

    A fresh PREFECT_HOME costs about 11 s of CPU in database migrations at server start; the
    template is migrated once (``prefect server database upgrade -y``) and copied. When that
    fails, ``home`` is left empty and the server migrates it itself.
    """
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    if "db" not in _TEMPLATE:
        _TEMPLATE["db"] = None
        template = Path(tempfile.mkdtemp(prefix="catdask-prefect-template-"))
        atexit.register(shutil.rmtree, template, True)
        try:
            from catdask.orchestration.server import guarded_command

            # Guarded: a killed test run left it migrating for minutes on a loaded machine.
            subprocess.run(guarded_command([BIN / "prefect", "server", "database", "upgrade",
                                            "-y"], death_signal=signal.SIGKILL),
                           env=child_env(template), capture_output=True, timeout=300, check=True)
            if (template / "prefect.db").is_file():
                _TEMPLATE["db"] = template / "prefect.db"
        except (subprocess.SubprocessError, OSError):
            pass
    if _TEMPLATE["db"] is not None and not (home / "prefect.db").exists():
        shutil.copy2(_TEMPLATE["db"], home / "prefect.db")
    return home


def start_prefect_server(home: Path, port: int, log: Path, *, catdask: bool = False,
                         **extra_env) -> tuple[Managed, str]:
    """``prefect server start --host 127.0.0.1 --port PORT`` with its own PREFECT_HOME.

    ``PREFECT_SERVER_API_HOST/PORT`` are set as well: with only ``--port`` Prefect 3.8's UI
    still points the browser at port 4200 (its ``/ui-settings`` reports the default port).
    With ``catdask=True``, the server ``catdask serve`` starts instead
    (``python -m catdask.orchestration.prefect_server start``: the same app, SQLite lock
    conflicts retried inside the server).
    """
    env = child_env(seeded_prefect_home(home), PREFECT_SERVER_API_HOST=LOCALHOST,
                    PREFECT_SERVER_API_PORT=port, **extra_env)
    command = ([BIN / "python", "-m", "catdask.orchestration.prefect_server"] if catdask
               else [BIN / "prefect", "server"])
    # SIGKILL when the test run dies: a test's server holds nothing worth an orderly stop, and
    # uvicorn's waits for the requests in flight (a killed tests/test_deployment.py left it
    # busy in SQLAlchemy more than 22 s).
    proc = Managed([*command, "start", "--host", LOCALHOST, "--port", port], log=log, env=env,
                   death_signal=signal.SIGKILL)
    api = f"http://{LOCALHOST}:{port}/api"
    try:
        wait_http(f"{api}/health", timeout=180, proc=proc)
    except BaseException:
        proc.stop()
        raise
    return proc, api


def serve_iris(tmp_path: Path, **serve_env) -> tuple[Managed, str, Managed, Path]:
    """iris ingested into ``tmp_path/store``, a Prefect server of ``catdask serve``'s kind and
    ``catdask serve`` against it, serving; returns (server, api url, serve, store)."""
    from catdask.pipeline import ingest_dataset

    store = tmp_path / "store"
    ingest_dataset("iris", store)
    server, api = start_prefect_server(tmp_path / "home", free_port(), tmp_path / "server.log",
                                       catdask=True)
    serve = Managed([BIN / "catdask", "--store", store, "serve", "--dask-dashboard-port",
                     free_port()], log=tmp_path / "serve.log",
                    env=child_env(tmp_path / "serve-home", api_url=api, **serve_env))
    try:
        serve.wait_for(r"being served", timeout=300)
    except BaseException:
        serve.stop()
        server.stop()
        raise
    return server, api, serve, store
