"""The served deployment for real: Prefect server, `catdask serve`, schedules, load, the UI.

Everything runs on 127.0.0.1 in processes this module starts and stops (tests/helpers/procs.py):

1. ``catdask serve`` on its own (Prefect server + embedded Dask cluster + served deployments):
   the UI and the Dask dashboard answer, every socket of the process tree listens on
   127.0.0.1, and SIGTERM to the main process stops the whole tree.
2. The Prefect server ``catdask serve`` starts (``python -m catdask.orchestration.prefect_server
   start --host 127.0.0.1``), started here, and the real ``catdask serve`` pointed at it through
   ``PREFECT_API_URL`` (tests/helpers/serve_catdask.py adds one interval-scheduled train
   deployment that fires a few seconds after start-up): deployments and schedules exist, the
   scheduler creates runs and the runner executes them, a ``prefect deployment run`` of
   ``catdask-train/train`` on iris completes and registers a version, 50 runs triggered at once
   through the API (as from the UI) all complete with 50 distinct versions while every API
   answer is < 500 and the serve tree stays <= 3 GiB (figures printed and written to JSON), and
   headless Chromium renders the finished run and its artifacts.

Every test is ``slow`` (CI runs them); the module takes a few minutes on 2 cores.
Set ``CATDASK_TEST_ARTIFACTS=/some/dir`` to keep the load figures and UI screenshots.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("prefect")
pytest.importorskip("distributed")

from catdask.pipeline import ingest_dataset  # noqa: E402
from catdask.store import list_models, load_estimator, read_dataset  # noqa: E402

from .helpers.procs import (  # noqa: E402
    BIN,
    LOCALHOST,
    Managed,
    child_env,
    free_port,
    http_get,
    listening_sockets,
    seeded_prefect_home,
    start_prefect_server,
    tree_pids,
    wait_http,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

SERVED = ["catdask-retrain/nightly-retrain", "catdask-retrain/retrain-on-new-snapshot",
          "catdask-evaluate/weekly-evaluation",
          "catdask-train/train", "catdask-ingest/ingest", "catdask-train/scheduled-train"]
SCHEDULE_DELAY = 20.0  # seconds from serve start-up to the interval schedule's one run
LOAD_RUNS = 50  # issue 16: "50 served runs triggered at once"
# make test's burst: 20 failed CI once (2 of 20 creations unanswered after 300 s on a machine
# 1.85x slower than this one: Prefect's SQLite serialises every write, and 17 waiting runs
# become Late, which its MarkLateRuns service rewrites every 5 s); 20 at load 6 here took 64 s
# to create. The stress tier keeps issue 16's 50.
SHORT_LOAD_RUNS = 10
SERVE_LIMIT = 3  # CATDASK_SERVE_LIMIT of the served fixture
FINAL_OK = "COMPLETED"


def _keep(path: Path) -> None:
    """Copy ``path`` to $CATDASK_TEST_ARTIFACTS when set (screenshots, load figures)."""
    dest = os.environ.get("CATDASK_TEST_ARTIFACTS")
    if dest:
        Path(dest).mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, Path(dest) / path.name)


@contextlib.contextmanager
def prefect_client(api_url):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: api_url}):
        with get_client(sync_client=True) as client:
            yield client


def _runs(client, ids):
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    return client.read_flow_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=list(ids))),
                                 limit=len(ids) + 1)


def _wait_final(client, ids, timeout, poll=2.0):
    """Poll until every flow run in ``ids`` is in a final state (bounded); returns them."""
    deadline = time.monotonic() + timeout
    while True:
        runs = _runs(client, ids)
        if len(runs) == len(ids) and all(r.state is not None and r.state.is_final() for r in runs):
            return runs
        if time.monotonic() > deadline:
            states = sorted(f"{r.name}:{r.state.type.value if r.state else None}" for r in runs)
            raise AssertionError(f"flow runs not final after {timeout:.0f} s: {states}")
        time.sleep(poll)


def _state(run):
    return run.state.type.value


def _explain(client, run):
    """Last log lines of a flow run (for assertion messages)."""
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id])), limit=200)
    return f"{run.name} {_state(run)}: {run.state.message}\n" + "\n".join(
        log.message for log in logs[-15:])


# ============================================================================ catdask serve alone
def test_catdask_serve_end_to_end_binds_localhost_and_stops(tmp_path):
    """`catdask serve` starts server + cluster + deployments, on 127.0.0.1, and stops cleanly."""
    port, dash = free_port(), free_port()
    env = child_env(seeded_prefect_home(tmp_path / "prefect-home"), PREFECT_RUNNER_POLL_FREQUENCY=2)
    proc = Managed([BIN / "catdask", "--store", tmp_path / "store", "serve", "--port", port,
                    "--dask-dashboard-port", dash], log=tmp_path / "serve.log", env=env)
    try:
        proc.wait_for(r"^Store:\s+\S+", timeout=240)
        text = proc.text()
        ui = re.search(r"^Prefect UI:\s+(\S+)", text, re.M).group(1)
        dashboard = re.search(r"^Dask dashboard:\s+(\S+)", text, re.M).group(1)
        scheduler = re.search(r"^Dask scheduler:\s+(\S+)", text, re.M).group(1)
        assert ui == f"http://{LOCALHOST}:{port}"
        assert dashboard == f"http://{LOCALHOST}:{dash}/status"
        assert scheduler.startswith(f"tcp://{LOCALHOST}:")

        status, body = http_get(ui + "/")
        assert status == 200 and b"<html" in body.lower()
        # The browser UI must talk to *this* server's API, not the default port 4200.
        _, settings = http_get(ui + "/ui-settings")
        assert json.loads(settings)["api_url"] == f"{ui}/api"
        wait_http(dashboard, timeout=30, proc=proc)

        proc.wait_for(r"being served", timeout=180)
        sockets = listening_sockets(tree_pids(proc.pid))
        ports = {p for _, _, p in sockets}
        assert {port, dash, int(scheduler.rsplit(":", 1)[1])} <= ports, sockets
        assert all(ip == LOCALHOST for _, ip, _ in sockets), sockets
        tree = proc.tree()
        assert len(tree) >= 4, [p.cmdline()[:4] for p in tree]  # server, 2 workers, tracker
    finally:
        # SIGTERM to the main process only (as `kill PID` / a service manager would do):
        # catdask serve itself must take the Prefect server and the Dask workers down.
        clean = proc.stop(signal.SIGTERM, timeout=60, group=False)
    assert clean, f"processes left after SIGTERM:\n{proc.tail()}"
    assert proc.proc.returncode == 0, proc.tail()
    with pytest.raises(OSError):
        http_get(f"http://{LOCALHOST}:{port}/api/health", timeout=3)



SIGINT_STOP_SECONDS = 5.0  # issue 28: serve ignored SIGINT for ~105 s under load


def test_serve_stops_on_sigint_within_5_s_under_load(prefect_server, tmp_path):
    """Ctrl-C while served runs are fitting: serve, its runs, its cluster gone in < 5 s.

    Runs before the module's `served` fixture exists (its deployments share these names), on
    a store of its own; the runs left in the queue are deleted afterwards.
    """
    store = tmp_path / "store"
    ingest_dataset("iris", store)
    env = child_env(tmp_path / "serve-home", api_url=prefect_server.api,
                    PREFECT_RUNNER_POLL_FREQUENCY=1, CATDASK_SERVE_LIMIT=2)
    proc = Managed([BIN / "catdask", "--store", store, "serve", "--dask-dashboard-port",
                    free_port()], log=tmp_path / "serve.log", env=env)
    ids = []
    with prefect_client(prefect_server.api) as client:
        try:
            proc.wait_for(r"being served", timeout=240)
            deployment = client.read_deployment_by_name("catdask-train/train")
            ids = [client.create_flow_run_from_deployment(
                deployment.id, parameters={"dataset": "iris", "method": "kcqs",
                                           "n_restarts": 40, "model_name": f"busy-{i}"}).id
                   for i in range(4)]
            deadline = time.monotonic() + 240
            while sum(_state(r) == "RUNNING" for r in _runs(client, ids)) < 2:
                assert time.monotonic() < deadline, [_state(r) for r in _runs(client, ids)]
                assert proc.alive(), proc.tail()
                time.sleep(0.5)
            time.sleep(3.0)  # into the fits
            busy = [_state(r) for r in _runs(client, ids)]
            tree = proc.tree()
            start = time.monotonic()
            os.kill(proc.pid, signal.SIGINT)
            proc.proc.wait(timeout=120)
            seconds = time.monotonic() - start
            # The fork server and multiprocessing's resource tracker see serve's end of
            # their pipes close and exit by themselves, a moment later.
            left = [p.pid for p in proc.survivors(timeout=SIGINT_STOP_SECONDS)]
            print("\n".join(line for line in proc.text().splitlines()
                            if "catdask serve" in line))
            print(f"serve stopped {seconds:.2f} s after SIGINT with runs {busy}, "
                  f"{len(tree)} processes (load {os.getloadavg()[0]:.1f}); left: {left}")
            assert not left, left
            assert proc.proc.returncode == 0, proc.tail()
            assert seconds < SIGINT_STOP_SECONDS, proc.tail()
        finally:
            proc.stop(signal.SIGTERM, timeout=30)
            for run_id in ids:
                with contextlib.suppress(Exception):
                    client.delete_flow_run(run_id)


# ============================================================================ shared fixtures
@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory):
    base = tmp_path_factory.mktemp("prefect-server")
    proc, api = start_prefect_server(
        base / "home", free_port(), base / "server.log", catdask=True,
        # The scheduler service creates runs of new schedules within seconds, not a minute.
        PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS=5,
    )
    yield SimpleNamespace(proc=proc, api=api, url=api.removesuffix("/api"), base=base)
    proc.stop(signal.SIGTERM, timeout=30)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Overrides conftest's empty per-test ``store``: one store holding iris for the module, as
    the served deployments (started once per module) train from it."""
    root = tmp_path_factory.mktemp("served-store") / "store"
    ingest_dataset("iris", root)
    return root


@pytest.fixture(scope="module")
def served(prefect_server, store):
    """The real `catdask serve` against the test's Prefect server (plus scheduled-train)."""
    base = prefect_server.base
    dash = free_port()
    env = child_env(base / "serve-home", api_url=prefect_server.api,
                    PREFECT_RUNNER_POLL_FREQUENCY=2, CATDASK_SERVE_LIMIT=SERVE_LIMIT)
    started = dt.datetime.now(dt.timezone.utc)
    proc = Managed([BIN / "python", "tests/helpers/serve_catdask.py", store, dash, SCHEDULE_DELAY],
                   log=base / "serve.log", env=env)
    try:
        proc.wait_for(r"being served", timeout=240)
        scheduler = re.search(r"^Dask scheduler:\s+(\S+)", proc.text(), re.M).group(1)
        with prefect_client(prefect_server.api) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    deployments = {n: client.read_deployment_by_name(n) for n in SERVED}
                    break
                except Exception:
                    if time.monotonic() > deadline or not proc.alive():
                        raise
                    time.sleep(1)
    except BaseException:
        proc.stop(signal.SIGTERM, timeout=30)
        raise
    yield SimpleNamespace(proc=proc, api=prefect_server.api, dashboard_port=dash,
                          scheduler=scheduler, deployments=deployments, started=started)
    # Ctrl-C (SIGINT) to the main process: the runner, the embedded cluster and every flow
    # run process must go away by themselves.
    clean = proc.stop(signal.SIGINT, timeout=60, group=False)
    assert clean, f"catdask serve did not stop cleanly on SIGINT:\n{proc.tail()}"


@pytest.fixture(scope="module")
def triggered_run(served, store):
    """`prefect deployment run catdask-train/train -p dataset=iris` (the documented command)."""
    env = child_env(Path(served.proc.log).parent / "cli-home", api_url=served.api)
    out = subprocess.run(
        [BIN / "prefect", "deployment", "run", "catdask-train/train", "-p", "dataset=iris",
         "-p", "n_restarts=2"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    run_id = re.search(r"UUID: ([0-9a-f-]{36})", out.stdout).group(1)
    with prefect_client(served.api) as client:
        [run] = _wait_final(client, [run_id], timeout=300)
        assert _state(run) == FINAL_OK, _explain(client, run)
    return run


# ============================================================================ schedules
def test_served_deployments_schedules_and_a_scheduled_run(served, store):
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    d = served.deployments
    crons = {name: [(s.schedule.cron, s.active) for s in d[name].schedules]
             for name in ("catdask-retrain/nightly-retrain", "catdask-evaluate/weekly-evaluation")}
    assert crons == {"catdask-retrain/nightly-retrain": [("0 2 * * *", True)],
                     "catdask-evaluate/weekly-evaluation": [("0 3 * * 0", True)]}
    assert d["catdask-train/train"].schedules == [] and d["catdask-ingest/ingest"].schedules == []
    assert d["catdask-train/train"].parameters["store"] == str(store)
    assert not any(dep.paused for dep in d.values())
    [interval] = d["catdask-train/scheduled-train"].schedules
    anchor = interval.schedule.anchor_date

    def runs_of(client, name):
        return client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[d[name].id])))

    with prefect_client(served.api) as client:
        # The server's scheduler creates the nightly runs (02:00 UTC) ahead of time.
        deadline = time.monotonic() + 60
        while not (nightly := runs_of(client, "catdask-retrain/nightly-retrain")):
            assert time.monotonic() < deadline, "no scheduled nightly-retrain runs were created"
            time.sleep(1)
        for run in nightly:
            assert _state(run) == "SCHEDULED" and run.auto_scheduled
            when = run.expected_start_time.astimezone(dt.timezone.utc)
            assert (when.hour, when.minute) == (2, 0) and when > served.started

        # The interval schedule's first run is created by the scheduler, picked up by the
        # runner (poll every 2 s) when due, and completes.
        deadline = time.monotonic() + SCHEDULE_DELAY + 90
        while not (scheduled := runs_of(client, "catdask-train/scheduled-train")):
            assert time.monotonic() < deadline, "the interval schedule created no run"
            time.sleep(1)
        first = min(scheduled, key=lambda r: r.expected_start_time)
        assert first.auto_scheduled
        assert abs((first.expected_start_time - anchor).total_seconds()) < 1
        [run] = _wait_final(client, [first.id], timeout=300)
        assert _state(run) == FINAL_OK, _explain(client, run)
        assert run.start_time >= first.expected_start_time - dt.timedelta(seconds=1)
        lag = (run.start_time - first.expected_start_time).total_seconds()
        print(f"\nscheduled run started {lag:.1f} s after its scheduled time")
    [version] = list_models(store, "iris-scheduled")
    assert version.run_key == f"flow-run:{run.id}"


# ============================================================================ a triggered run
def test_triggered_train_run_completes_and_registers(served, store, triggered_run):
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterId,
        LogFilter,
        LogFilterFlowRunId,
    )

    run = triggered_run
    [version] = list_models(store, "iris-cqs")
    assert version.version == 1 and version.run_key == f"flow-run:{run.id}"
    assert version.meta["registration_status"] == "certified" and version.meta["certified"]
    iris = read_dataset(store, "iris")
    model = load_estimator(store, "iris-cqs", 1)
    assert model.transform(iris.X).shape == (150, 3)
    # The reloaded model is the trained one: it reproduces the accuracy recorded at training.
    accuracy = np.mean(model.predict(iris.X) == iris.y)
    assert accuracy == pytest.approx(version.meta["metrics"]["train_accuracy_predict"])

    with prefect_client(served.api) as client:
        keys = {a.key for a in client.read_artifacts(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))}
        assert {"iris-cqs-v1-restarts", "iris-cqs-v1-summary", "iris-cqs-v1-metrics"} <= keys
        # The run process ships its logs in batches, the last at its exit, which can come a
        # few seconds after the API recorded the final state (seen in CI under load): wait.
        deadline = time.monotonic() + 60
        while True:
            logs = "\n".join(log.message for log in client.read_logs(
                LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id])), limit=200))
            if f"scheduler {served.scheduler}" in logs or time.monotonic() > deadline:
                break
            time.sleep(1.0)
    # The flow run (a child process of the runner) used the served cluster, via
    # CATDASK_SCHEDULER, not a cluster of its own.
    assert f"scheduler {served.scheduler}" in logs, logs
    assert f"127.0.0.1:{served.dashboard_port}/status" in logs



# ============================================================================ a locked-down API
REDIRECT_TRIES = 10


def test_a_run_cannot_redirect_the_store_or_the_scheduler(served, store, tmp_path):
    """Issue 28: whoever reaches the API cannot point a served run at another store or Dask
    scheduler. Through the API, 10/10 runs naming another value are refused at creation (the
    parameters are frozen); after an API user edits the deployment to take them anyway, the
    run process refuses the run (Failed, saying why), and nothing reaches either target."""
    import socket as socket_module

    from prefect.client.schemas.actions import DeploymentUpdate
    from prefect.exceptions import PrefectHTTPStatusError

    elsewhere = tmp_path / "elsewhere"
    listener = socket_module.socket()
    listener.bind((LOCALHOST, 0))
    listener.listen(16)
    listener.setblocking(False)
    evil = f"tcp://{LOCALHOST}:{listener.getsockname()[1]}"
    train_id = served.deployments["catdask-train/train"].id
    ingest = served.deployments["catdask-ingest/ingest"]
    refused = 0
    with prefect_client(served.api) as client:
        for i in range(REDIRECT_TRIES):
            bad = ({"store": str(elsewhere)} if i % 2 == 0 else {"scheduler": evil})
            with pytest.raises(PrefectHTTPStatusError) as info:
                client.create_flow_run_from_deployment(train_id,
                                                       parameters={"dataset": "iris", **bad})
            assert info.value.response.status_code == 409, info.value
            assert "Validation failed" in info.value.response.text
            refused += 1
        # An API user can also edit the deployment: the run process still refuses.
        original = {"parameters": ingest.parameters,
                    "enforce_parameter_schema": ingest.enforce_parameter_schema}
        client.update_deployment(ingest.id, DeploymentUpdate(
            parameters={"names": ["iris"], "store": str(elsewhere)},
            enforce_parameter_schema=False))
        try:
            run = client.create_flow_run_from_deployment(ingest.id)
            [run] = _wait_final(client, [run.id], timeout=300)
        finally:
            client.update_deployment(ingest.id, DeploymentUpdate(**original))
        assert _state(run) == "FAILED", _explain(client, run)
        assert "refused: this run is served by `catdask serve`" in run.state.message, run.state
    print(f"served API: {refused}/{REDIRECT_TRIES} redirecting runs refused at creation; an "
          f"edited deployment's run ended {_state(run)}: {run.state.message[:120]}")
    assert refused == REDIRECT_TRIES
    assert not elsewhere.exists()
    with pytest.raises(BlockingIOError):
        listener.accept()
    listener.close()
    # serve's console says it in one line, not a traceback.
    assert "Traceback" not in served.proc.text(), served.proc.tail(60)


# ============================================================================ load
def _most_at_once(intervals) -> int:
    """Largest number of ``(start, end)`` intervals that overlap at one instant."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals],
                    key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_most_at_once_counts_overlaps():
    assert _most_at_once([(0, 2), (1, 3), (2, 4), (5, 6)]) == 2
    assert _most_at_once([(0, 10), (1, 2), (3, 4), (5, 9), (6, 7)]) == 3


class _Api:
    """Raw HTTP calls to the Prefect API, as the UI makes them, counting every answer's status
    (``"no answer"`` for a refused or timed-out call). Prefect's own client retries a 502/503
    silently, so the burst is driven and watched through this instead."""

    def __init__(self, api: str):
        import threading

        self.api, self.statuses = api, Counter()
        self._lock = threading.Lock()

    def call(self, method: str, path: str, body=None, timeout: float = 30.0):
        """``(status, decoded JSON or None)``; never raises for an HTTP or connection error."""
        import urllib.error
        import urllib.request

        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.api}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                status, payload = r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as exc:
            status, payload = exc.code, None
        except OSError as exc:  # refused, reset or timed out: the API did not answer
            status, payload = f"no answer ({type(exc).__name__}: {exc})"[:120], None
        with self._lock:
            self.statuses[status] += 1
        return status, payload

    def runs(self, ids) -> list[dict]:
        status, runs = self.call("POST", "/flow_runs/filter",
                                 {"flow_runs": {"id": {"any_": list(ids)}}, "limit": len(ids)})
        return runs if status == 200 else []

    def failures(self) -> dict:
        """Answers that are not a success: 5xx, other errors, no answer."""
        return {s: n for s, n in self.statuses.items() if not (isinstance(s, int) and s < 400)}


class _BurstMonitor:
    """During a burst: the peak summed RSS of process trees (every 0.15 s) and the API as a
    user's browser polls it (health, the flow-runs page, the deployment; every 0.5 s)."""

    def __init__(self, api: _Api, deployment_id, trees: dict):
        import threading

        self.api, self.deployment_id, self.trees = api, deployment_id, trees
        self.peak = dict.fromkeys(trees, 0)
        self.peak["total"] = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._sample_memory, daemon=True),
                         threading.Thread(target=self._poll_api, daemon=True)]

    def _sample_memory(self):
        import psutil

        while not self._stop.is_set():
            total = 0
            for name, managed in self.trees.items():
                rss = 0
                for p in managed.tree():
                    with contextlib.suppress(psutil.Error):
                        rss += p.memory_info().rss
                self.peak[name] = max(self.peak[name], rss)
                total += rss
            self.peak["total"] = max(self.peak["total"], total)
            self._stop.wait(0.15)

    def _poll_api(self):
        # 60 s, about what a browser tab waits: at load average 20 on 2 cores, 5 of 1160 calls
        # took longer than 10 s while 20 runs were created at once.
        while not self._stop.is_set():
            self.api.call("GET", "/health", timeout=60)
            self.api.call("POST", "/flow_runs/filter",
                          {"sort": "EXPECTED_START_TIME_DESC", "limit": 50}, timeout=60)
            self.api.call("GET", f"/deployments/{self.deployment_id}", timeout=60)
            self._stop.wait(0.5)

    def __enter__(self):
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)


def _timestamp(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _burst(served, prefect_server, store, tmp_path, n_runs: int, model_name: str) -> dict:
    """Trigger ``n_runs`` train runs at once through the API, watch them to the end, check the
    registry; returns the figures (printed and written to JSON)."""
    from concurrent.futures import ThreadPoolExecutor

    deployment = served.deployments["catdask-train/train"]
    # refit: every run fits and registers (the same spec would otherwise find the first
    # version in the train cache, which is not the load this test measures).
    params = {"dataset": "iris", "n_restarts": 2, "model_name": model_name, "refit": True}
    api = _Api(served.api)
    monitor = _BurstMonitor(api, deployment.id,
                            {"serve_tree": served.proc, "prefect_server": prefect_server.proc})
    with monitor:
        t0 = time.time()
        # All at once, as n users pressing Run in the UI (its POST create_flow_run).
        with ThreadPoolExecutor(max_workers=n_runs) as pool:
            created = list(pool.map(
                # A browser waits minutes for an answer: on 2 cores at load average 35 the 50
                # creations took longer than 30 s; a 5xx, not slowness, is the failure here.
                lambda _: api.call("POST", f"/deployments/{deployment.id}/create_flow_run",
                                   {"parameters": params}, timeout=300), range(n_runs)))
        submitted = time.time() - t0
        assert [s for s, _ in created] == [201] * n_runs, [s for s, _ in created]
        ids = [run["id"] for _, run in created]
        # 2-4 runs a minute on 2 cores at load average 20-35 (other work), many more when idle.
        deadline = time.monotonic() + 120 + 30 * n_runs
        while True:
            runs = api.runs(ids)
            states = [(r.get("state") or {}).get("type") for r in runs]
            if len(runs) == n_runs and all(s in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")
                                           for s in states):
                break
            counts = sorted(Counter(states).items(), key=str)
            assert time.monotonic() < deadline, f"not final after {time.time() - t0:.0f} s: {counts}"
            time.sleep(2.0)
    failed = [r for r in runs if r["state"]["type"] != FINAL_OK]
    if failed:
        with prefect_client(served.api) as client:
            explained = [_explain(client, client.read_flow_run(r["id"])) for r in failed[:3]]
        raise AssertionError(f"{len(failed)} of {n_runs} runs not Completed:\n\n"
                             + "\n\n".join(explained))

    starts = [_timestamp(r["start_time"]) for r in runs]
    ends = [_timestamp(r["end_time"]) for r in runs]
    durations = [end - start for start, end in zip(starts, ends)]
    wall = max(ends) - t0
    figures = {
        "runs": n_runs,
        "parameters": params,
        "serve_limit": SERVE_LIMIT,
        "most_runs_at_once": _most_at_once(list(zip(starts, ends))),
        "peak_rss_serve_tree_gib": round(monitor.peak["serve_tree"] / 2**30, 3),
        "peak_rss_prefect_server_gib": round(monitor.peak["prefect_server"] / 2**30, 3),
        "peak_rss_serve_tree_and_server_gib": round(monitor.peak["total"] / 2**30, 3),
        "api_statuses": {str(k): v for k, v in sorted(api.statuses.items(), key=str)},
        "cpu_count": os.cpu_count(),
        "submit_seconds": round(submitted, 2),
        "wall_seconds_submit_to_last_completion": round(wall, 1),
        "throughput_runs_per_minute": round(n_runs / wall * 60, 2),
        "median_run_seconds_running_to_completed": round(float(np.median(durations)), 1),
        "slowest_run_seconds_running_to_completed": round(max(durations), 1),
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
    }
    path = tmp_path / f"load_test_{n_runs}_runs.json"
    path.write_text(json.dumps(figures, indent=2))
    _keep(path)
    print(f"\nload test figures ({path}):\n{json.dumps(figures, indent=2)}")

    # Bounded load: never more than SERVE_LIMIT runs at once (the rest waited in the queue),
    # memory bounded, and the API never failed a call: no 5xx, no refused or reset connection.
    # A poll the server had not answered within 30 s is slowness, not failure (CI, 2 cores with
    # 3 fits and the API on them: 4 polls in one 50-run burst); it is counted in
    # `api_statuses` and must stay rare.
    assert 1 <= figures["most_runs_at_once"] <= SERVE_LIMIT, figures
    assert monitor.peak["serve_tree"] <= 3 * 2**30, figures
    failures = api.failures()
    slow = {s: n for s, n in failures.items() if str(s).startswith("no answer (TimeoutError")}
    assert {s: n for s, n in failures.items() if s not in slow} == {}, figures
    assert sum(slow.values()) <= 0.02 * sum(api.statuses.values()), figures

    # The registry: v1..vN, one per flow run (run_key = flow-run id), each loads and predicts.
    versions = list_models(store, model_name)
    assert [v.version for v in versions] == list(range(1, n_runs + 1))
    assert sorted(v.run_key for v in versions) == sorted(f"flow-run:{i}" for i in ids)
    assert all(v.problem is None for v in versions)
    iris = read_dataset(store, "iris")
    for v in versions:
        model = load_estimator(store, model_name, v.version)
        accuracy = np.mean(model.predict(iris.X) == iris.y)
        assert accuracy == pytest.approx(v.meta["metrics"]["train_accuracy_predict"])
    leftovers = [p.name for p in (Path(store) / "models" / model_name).iterdir()
                 if p.name.startswith(".tmp-")]
    assert leftovers == []
    return figures


@pytest.mark.stress
@pytest.mark.timeout(300 + 36 * LOAD_RUNS)
def test_load_fifty_served_runs_at_once(served, prefect_server, store, tmp_path):
    """Issue 16's goal: 50 train runs triggered at once through the API all complete, at most
    SERVE_LIMIT at a time, the serve tree's summed RSS stays <= 3 GiB and no call gets a 5xx.

    Takes 12-25 minutes on 2 cores shared with other work at load average 20-35 (see the
    10-run variant); the runs themselves are not what limits it."""
    _burst(served, prefect_server, store, tmp_path, LOAD_RUNS, "iris-load")


@pytest.mark.timeout(300 + 36 * SHORT_LOAD_RUNS)
def test_load_ten_served_runs_at_once(served, prefect_server, store, tmp_path):
    """The same burst with 10 runs, in a few minutes."""
    _burst(served, prefect_server, store, tmp_path, SHORT_LOAD_RUNS, "iris-load-short")


# ============================================================================ the UI
def _chromium(url, out_dir: Path, screenshot: Path) -> str:
    """Headless Chromium after 15 s of virtual time: writes a screenshot, returns the DOM."""
    out = subprocess.run(
        [shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
         f"--user-data-dir={out_dir / 'chromium-profile'}", "--window-size=1400,1000",
         "--virtual-time-budget=15000", f"--screenshot={screenshot}", "--dump-dom", url],
        capture_output=True, timeout=120, text=True, check=True,
    )
    _keep(screenshot)
    return out.stdout


@pytest.mark.timeout(300)
def test_prefect_ui_shows_finished_run_and_artifacts(served, triggered_run, tmp_path):
    """The UI (served by the test's server) renders the finished run and its summary artifact."""
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed (CI installs Debian's `chromium` in .ci/run)")
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterKey,
        FlowRunFilter,
        FlowRunFilterId,
    )

    ui = served.api.removesuffix("/api")
    run = triggered_run
    shot = tmp_path / "ui_flow_run.png"
    dom = _chromium(f"{ui}/runs/flow-run/{run.id}", tmp_path, shot)
    print(f"\nscreenshot of flow run {run.name}: {shot}")
    assert shot.stat().st_size > 10_000
    assert "Can't connect to Server API" not in dom
    assert f"Flow Run: {run.name}" in dom and "Completed" in dom, dom[-3000:]

    with prefect_client(served.api) as client:
        [summary] = client.read_artifacts(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])),
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["iris-cqs-v1-summary"])))
    shot = tmp_path / "ui_train_summary_artifact.png"
    dom = _chromium(f"{ui}/artifacts/artifact/{summary.id}", tmp_path, shot)
    print(f"screenshot of its iris-cqs-v1-summary artifact: {shot}")
    for text in ("iris-cqs-v1-summary", run.name, "CQS on", "iris-cqs:v1",
                 "certified global optimum", "data:image/png;base64,"):
        assert text in dom, (text, dom[-3000:])
