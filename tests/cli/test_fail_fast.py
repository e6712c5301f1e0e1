"""Issue 28's slow or silent failures, answered in one line and fast.

- ``train`` / ``serve --scheduler`` at a port that speaks HTTP (``python -m http.server``):
  exit 3, one line, < 10 s (was: nothing for 724 s), and the library's ``connect_scheduler``
  gives up within its timeout; a real scheduler still passes the same checks;
- ``PREFECT_API_URL`` at a web server that is not Prefect: exit 3, one line (was exit 1 after
  20 s).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time

import pytest

from catdask.cli.exits import EXIT_INPUT

from tests.helpers.procs import LOCALHOST, free_port
from .test_cli import FAST_EXIT_SECONDS, SCHEDULER_EXIT_SECONDS, _timed_script
from .test_cli import two_versions  # noqa: F401 - a fixture

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def http_server(tmp_path_factory):
    """``python -m http.server`` on 127.0.0.1; yields its port."""
    import socket

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", LOCALHOST,
                             "--directory", str(tmp_path_factory.mktemp("www"))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection((LOCALHOST, port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_API", "CATDASK_"))}
    env.update(extra)
    return env


@pytest.mark.parametrize("command", [["train", "iris"], ["serve"]], ids=" ".join)
@pytest.mark.slow
def test_a_scheduler_port_that_speaks_http_fails_fast_in_one_line(iris_store, tmp_path,
                                                                  http_server, command):
    address = f"tcp://{LOCALHOST}:{http_server}"
    r, wall, _ = _timed_script([*command, "--scheduler", address, "--store", iris_store],
                               _clean_env(), tmp_path, tmp_path)
    assert r.returncode == EXIT_INPUT, r.stderr
    assert r.stderr.splitlines() == [r.stderr.strip()], r.stderr
    assert r.stderr.startswith(f"catdask {command[0]}: error: cannot connect to the Dask "
                               f"scheduler at {address}: it accepts connections but sends no "
                               "Dask handshake"), r.stderr
    assert "a web server answers there (HTTP/1.0 404" in r.stderr, r.stderr
    print(f"{' '.join(command)} --scheduler <http.server>: exit {r.returncode} in {wall:.2f} s "
          f"(load {os.getloadavg()[0]:.1f})")
    assert wall < SCHEDULER_EXIT_SECONDS, f"{wall:.2f} s"
    assert sorted(p.name for p in iris_store.iterdir()) == ["datasets"]


def test_connect_scheduler_gives_up_on_a_silent_port_within_its_timeout(http_server):
    """The library path the served runs take (no CLI probe before it)."""
    from catdask.distributed.cluster import connect_scheduler
    from catdask.errors import SchedulerConnectionError

    start = time.monotonic()
    with pytest.raises(SchedulerConnectionError, match="no Dask handshake within 2 s"):
        connect_scheduler(f"tcp://{LOCALHOST}:{http_server}", timeout=2)
    assert time.monotonic() - start < 6


@pytest.mark.slow
def test_the_dashboard_port_names_the_scheduler_address(dask_scheduler):
    """The commonest wrong address: the dashboard's port (8787) for the scheduler's (8786).
    Both probes name the scheduler's address, which its HTTP server reports."""
    from distributed import Client

    from catdask.cli.exits import CliError
    from catdask.cli.runtime import check_scheduler
    from catdask.distributed.probe import probe_scheduler
    from catdask.errors import SchedulerConnectionError

    with Client(dask_scheduler, set_as_default=False) as client:
        port = client.scheduler_info()["services"]["dashboard"]
    wrong = f"tcp://{LOCALHOST}:{port}"
    expected = f"it is the dashboard (HTTP) of the Dask scheduler at {dask_scheduler}; give"
    with pytest.raises(CliError, match=re.escape(expected)):
        check_scheduler(wrong)
    with pytest.raises(SchedulerConnectionError, match=re.escape(expected)):
        probe_scheduler(wrong, timeout=2)


def test_a_dashboard_reply_cut_at_the_read_limit_still_names_the_scheduler(monkeypatch):
    """A large cluster's identity JSON may exceed what is read: its opening names it."""
    import socket
    import threading

    from catdask.distributed import probe

    monkeypatch.setattr(probe, "_HTTP_REPLY_MAX_BYTES", 4096)
    body = (b'{"type": "Scheduler", "id": "Scheduler-1", "address": "tcp://10.1.2.3:8786", '
            b'"workers": {' + b", ".join(b'"w%d": {}' % i for i in range(20_000)) + b"}}")
    server = socket.create_server((LOCALHOST, 0))
    port = server.getsockname()[1]

    def serve(reply):
        conn, _ = server.accept()
        with conn:
            conn.recv(4096)
            with contextlib.suppress(OSError):
                conn.sendall(reply)

    try:
        for reply, expected in [
                (b"HTTP/1.1 200 OK\r\n\r\n" + body,
                 "it is the dashboard (HTTP) of the Dask scheduler at tcp://10.1.2.3:8786"),
                (b"HTTP/1.1 200 OK\r\n\r\n" + body.replace(b"Scheduler", b"Worker", 1),
                 "a web server answers there (HTTP/1.1 200 OK), not a Dask scheduler"),
                (b"SSH-2.0-OpenSSH_9.6\r\n", None)]:
            thread = threading.Thread(target=serve, args=(reply,), daemon=True)
            thread.start()
            note = probe.web_server_note(LOCALHOST, port, timeout=5)
            thread.join(10)
            if expected is None:  # not HTTP: nothing to say
                assert note is None, note
            else:
                assert note is not None and note.startswith(expected), note
    finally:
        server.close()


def test_a_real_scheduler_passes_both_probes(dask_scheduler):
    from catdask.cli.runtime import check_scheduler
    from catdask.distributed.cluster import probe_scheduler

    check_scheduler(dask_scheduler)
    probe_scheduler(dask_scheduler, timeout=10)


def test_a_dask_worker_is_not_taken_for_the_scheduler(dask_scheduler):
    from distributed import Client

    from catdask.distributed.cluster import probe_scheduler
    from catdask.errors import SchedulerConnectionError

    with Client(dask_scheduler, set_as_default=False) as client:
        worker = next(iter(client.scheduler_info()["workers"]))
    with pytest.raises(SchedulerConnectionError, match="a Dask worker answers there"):
        probe_scheduler(worker, timeout=10)


@pytest.mark.parametrize("command", [["train", "iris"], ["evaluate", "iris"], ["serve"]],
                         ids=" ".join)
def test_a_prefect_api_url_at_another_web_server_exits_3_in_one_line(iris_store, tmp_path,
                                                                      http_server, command):
    url = f"http://{LOCALHOST}:{http_server}/api"
    r, wall, _ = _timed_script([*command, "--store", iris_store],
                               _clean_env(PREFECT_API_URL=url), tmp_path, tmp_path)
    assert r.returncode == EXIT_INPUT, r.stderr
    assert r.stderr.splitlines() == [
        f"catdask {command[0]}: error: cannot reach the Prefect API at {url}: a web server "
        "answers there, but not a Prefect API (GET /health: HTTP 404) (check PREFECT_API_URL, "
        "or unset it to use a temporary local server)"], r.stderr
    print(f"{' '.join(command)} with PREFECT_API_URL=<http.server>: exit {r.returncode} in "
          f"{wall:.2f} s (load {os.getloadavg()[0]:.1f})")
    assert wall < SCHEDULER_EXIT_SECONDS, f"{wall:.2f} s"


@pytest.mark.usefixtures("prefect_api")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_evaluate_shows_each_data_set_and_method_on_the_console(iris_store, tmp_path):
    """`catdask evaluate --quick` showed nothing for minutes: each data set and method now
    starts and ends with a console note (the CLI's quiet console shows CONSOLE_NOTE records)."""
    import logging

    from catdask.core.progress import CONSOLE_NOTE
    from catdask.evaluation import paper_experiments
    from catdask.orchestration.evaluate import evaluate

    notes = []

    class Notes(logging.Handler):
        def emit(self, record):
            if getattr(record, CONSOLE_NOTE, False):
                notes.append(record.getMessage())

    handler = Notes()
    logging.getLogger().addHandler(handler)
    try:
        evaluate(datasets=["iris"], tables=["table1"], n_splits=2, store=str(iris_store),
                 out_dir=str(tmp_path / "out"))
    finally:
        logging.getLogger().removeHandler(handler)
    methods = paper_experiments()["table1"].methods
    for method in methods:
        started = [n for n in notes if n.startswith(f"[table1] iris") and f" {method} " in n
                   and n.endswith("2 splits ...")]
        ended = [n for n in notes if n.startswith(f"[table1] iris") and f" {method} " in n
                 and " s" in n and not n.endswith("...")]
        assert len(started) == 1 and len(ended) == 1, notes


@pytest.mark.parametrize("content, expect", [
    ("1,2,3,4\n5,6,7,8\n5,x,7,8\n", "bad.csv, line 3"),
    ("1,2,3,4\n5,6,7\n", "bad.csv, line 2"),
])
def test_predict_reports_a_malformed_file_before_the_heavy_imports(tmp_path, two_versions,
                                                                   content, expect):
    """A malformed CSV given to `predict` was reported after 17 s (scikit-learn, zarr and
    matplotlib were imported first): now in under 2 s of CPU, one line, exit 3."""
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    r, wall, cpu = _timed_script(["predict", "iris-cqs", "--file", bad, "--store", two_versions],
                                 _clean_env(), tmp_path, tmp_path)
    assert r.returncode == EXIT_INPUT, r.stderr
    assert len(r.stderr.splitlines()) == 1 and expect in r.stderr, r.stderr
    print(f"predict --file <malformed>: exit 3, CPU {cpu:.2f} s, wall {wall:.2f} s "
          f"(load {os.getloadavg()[0]:.1f})")
    assert cpu < FAST_EXIT_SECONDS, f"CPU {cpu:.2f} s"


def test_json_output_is_strict_json(capsys):
    """`train --json` printed NaN (a CAS model's gap), which is not JSON."""
    import json

    import numpy as np

    from catdask.cli.output import print_json

    print_json({"gap": float("nan"), "objective": np.float64(1.5), "b": [np.float32("inf"), 2],
                "n": np.int64(3), "nested": {"x": -float("inf")}, "name": "iris"})
    out = capsys.readouterr().out
    assert json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in {out}")) == {
        "gap": None, "objective": 1.5, "b": [None, 2], "n": 3, "nested": {"x": None},
        "name": "iris"}


def test_servers_started_by_the_tests_die_with_a_killed_test_run(tmp_path):
    """A test run killed with SIGKILL (a CI time limit) left its served store and a Prefect
    server running for an hour: every process tests/helpers/procs.Managed starts gets
    SIGTERM when the process that started it dies."""
    import signal

    import psutil

    from tests.helpers.paths import REPO

    code = ("import sys, time; from tests.helpers.procs import Managed; "
            f"m = Managed([sys.executable, '-c', 'import time; time.sleep(600)'], "
            f"log={str(tmp_path / 'child.log')!r}); print(m.pid, flush=True); time.sleep(600)")
    child = None
    runner = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        child = psutil.Process(int(runner.stdout.readline()))
        assert child.is_running() and child.status() != psutil.STATUS_ZOMBIE
        start = time.monotonic()
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
        gone, _ = psutil.wait_procs([child], timeout=10)
        print(f"the killed runner's server ended {time.monotonic() - start:.2f} s later")
        assert gone, "the helper's child outlived the killed test process"
    finally:
        runner.kill()
        with contextlib.suppress(Exception):
            child.kill()


def test_connect_scheduler_names_a_refused_port_at_once():
    """A deployment's CATDASK_SCHEDULER naming a port where nothing listens: the run failed
    after 10 s with "no Dask handshake within 10 s" (distributed retries a refused connect
    until its timeout), which reads as a non-Dask server answering (opspass)."""
    import socket

    from catdask.distributed.cluster import connect_scheduler
    from catdask.errors import SchedulerConnectionError

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind((LOCALHOST, 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(SchedulerConnectionError,
                       match=f"at tcp://{LOCALHOST}:{port}: nothing listens there "
                             r"\(Connection refused\)"):
        connect_scheduler(f"tcp://{LOCALHOST}:{port}", timeout=10)
    assert time.monotonic() - start < 3
