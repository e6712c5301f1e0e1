"""A cluster that shares no disk, with the store on S3 (issue 40, item 5).

Simulated hosts (tests/helpers/hosts.py), each a process tree in its own mount namespace with a
private ``/tmp``, on its own loopback address:

- 127.0.0.2: a Dask scheduler; 127.0.0.3, 127.0.0.4: two Dask worker hosts whose own
  environment holds the AWS credentials and endpoint;
- 127.0.0.5: the S3 server (SeaweedFS, bound to that address, its data in its private /tmp);
- 127.0.0.6: the user's shell, with the same AWS variables;
- 127.0.0.7: a Prefect server; 127.0.0.8: a Prefect process worker (``prefect worker start
  --type process``) with the AWS variables, running the deployments from the installed package.

From the shell a data set is ingested to ``s3://``; ``catdask train --method kcqs --scheduler
... --store s3://...`` trains on the Dask cluster, whose worker hosts read their row blocks
from the S3 server themselves (the scheduler's task stream shows every block read running on a
worker host, both hosts reading; their processes hold connections to the S3 host); ``catdask
predict`` on the shell reads the model back. From the shell, ``prefect deploy --all`` (a copy of
``deploy/prefect.yaml``) and a run of ``catdask-train/train``: the Prefect worker host picks it
up and trains on the Dask cluster from S3, the model is registered. Then, in a fresh store, one
worker host is killed mid-fit: the fit finishes on the other with the same objective (1e-9),
and exactly one version is registered. No host's log, no command's output and nothing the
Prefect server recorded of the run (parameters, logs, artifacts) holds the S3 secret.

Skipped, saying why, where ``unshare
--mount`` is not permitted or SeaweedFS is not installed.
"""

from __future__ import annotations

import json
import signal
import re
import sys
import threading
import time
import urllib.request
import uuid

import pytest

from .helpers.hosts import (Host, dask_cluster_hosts, host_address, host_env, require_hosts,
                            s3_server_host)
from .helpers.paths import REPO
from .helpers.procs import free_port, wait_http
from .helpers.s3_server import BUCKET

pytest.importorskip("distributed")

pytestmark = pytest.mark.slow

WORKERS = [host_address(2), host_address(3)]
S3_HOST, SHELL, PREFECT_SERVER, PREFECT_WORKER = 4, 5, 6, 7
POOL = "catdask-pool"  # deploy/prefect.yaml's work pool
N_PER_CLASS, N_FEATURES, CHUNK_ROWS = 700, 8, 300
MODEL = "blobs-kcqs"
# The workers log every object they read from S3 (catdask/object_store/_zarr_s3.py).
READS_LOGGED = '{"catdask.object_store": "debug"}'

# Run on the shell host: the user's script that writes a labelled table to the S3 store (in
# several row chunks, so that both workers have blocks to read).
INGEST = f"""
import sys
import numpy as np
from catdask.store import write_dataset
r = np.random.default_rng(0)
X, y = [], []
for k in range(3):
    A = r.standard_normal(({N_FEATURES}, {N_FEATURES}))
    X.append(r.standard_normal(({N_PER_CLASS}, {N_FEATURES})) @ A
             + 3.0 * r.standard_normal({N_FEATURES}))
    y += [f"class{{k}}"] * {N_PER_CLASS}
X = np.vstack(X)
write_dataset(sys.argv[1], "blobs", X, np.array(y), chunk_rows={CHUNK_ROWS})
print("ingested", X.shape)
"""


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """``(scheduler address, [worker hosts], shell host, S3 client env, logs folder)``; every
    host stopped (trees and all) at the end of the module."""
    require_hosts()
    logs = tmp_path_factory.mktemp("hosts")
    with s3_server_host(logs, S3_HOST) as (_, aws), \
            dask_cluster_hosts(logs, worker_env=dict(aws, DASK_LOGGING=READS_LOGGED)) as (
                scheduler, hosts), \
            Host("shell", host_address(SHELL), ["sleep", "3600"], log=logs / "shell.log",
                 env=host_env(**aws)) as shell:
        yield scheduler, hosts[1:], shell, aws, logs


@pytest.fixture(scope="module")
def prefect_hosts(layout):
    """``{variables a Prefect client needs}``: a Prefect server host and a Prefect process
    worker host polling ``POOL``, with the store's credentials in its environment."""
    _, _, _, aws, logs = layout
    ip = host_address(PREFECT_SERVER)
    port = free_port(ip)
    prefect = {"PREFECT_HOME": "/tmp/home/.prefect", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
               "PREFECT_API_URL": f"http://{ip}:{port}/api"}
    server_env = host_env(PREFECT_SERVER_API_HOST=ip, PREFECT_SERVER_API_PORT=port,
                          PREFECT_UI_ENABLED="false", **prefect)
    del server_env["PREFECT_API_URL"]
    with Host("prefect-server", ip, [sys.executable, "-m", "prefect", "server", "start",
                                     "--host", ip, "--port", port],
              log=logs / "prefect-server.log", env=server_env,
              death_signal=signal.SIGKILL) as server:
        wait_http(f"{prefect['PREFECT_API_URL']}/health", timeout=240, proc=server.proc)
        with Host("prefect-worker", host_address(PREFECT_WORKER),
                  [sys.executable, "-m", "prefect", "worker", "start", "--pool", POOL, "--type",
                   "process"], log=logs / "prefect-worker.log",
                  env=host_env(**aws, **prefect)) as worker:
            worker.proc.wait_for(r"started", timeout=240)
            yield prefect
            worker.stop(timeout=10)
        server.stop(timeout=5)


def _catdask(shell: Host, *argv, timeout: float = 600):
    started = time.monotonic()
    done = shell.run([sys.executable, "-m", "catdask", *argv], timeout=timeout)
    print(f"shell$ catdask {' '.join(argv)}: exit {done.returncode} after "
          f"{time.monotonic() - started:.1f} s")
    return done


def _ingest(shell: Host, store: str) -> None:
    done = shell.run([sys.executable, "-c", INGEST, store], timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def _train(shell: Host, scheduler: str, store: str):
    return _catdask(shell, "train", "blobs", "--method", "kcqs", "--restarts", "2",
                    "--scheduler", scheduler, "--store", store)


def _versions(shell: Host, store: str) -> tuple[dict, str]:
    """The latest version's metadata (``models show --json``) and ``models list``, on the shell."""
    done = _catdask(shell, "models", "show", MODEL, "--json", "--store", store)
    assert done.returncode == 0, done.stderr[-3000:]
    listed = _catdask(shell, "models", "list", MODEL, "--store", store)
    assert listed.returncode == 0, listed.stderr[-3000:]
    return json.loads(done.stdout), listed.stdout


def _task_stream_cursor(client) -> int:
    """Installs the scheduler's task-stream plugin (on first call); the index of the next
    task it records."""
    return client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.get_task_stream_index())


def _tasks_since(client, cursor: int) -> list[dict]:
    return client.run_on_scheduler(
        lambda start, dask_scheduler: dask_scheduler.get_task_stream(start_index=start), cursor)


def _chunk_reads_logged(host: Host, store: str) -> list[str]:
    """The lines of ``host``'s log that record a read of one of X's chunks in ``store``."""
    return [line for line in host.proc.text().splitlines()
            if f"read {store}/datasets/blobs/s1/X/c/" in line]


def _block_reads(tasks: list[dict]) -> list[dict]:
    """The task-stream entries of reads of a stored X's row blocks (stored_arrays.dask_array
    names them ``stored-X-<token>``)."""
    return [t for t in tasks if str(t["key"]).startswith("('stored-X-")
            or (isinstance(t["key"], tuple) and str(t["key"][0]).startswith("stored-X-"))]


def _assert_no_secret(aws: dict, logs, *texts: str) -> None:
    """The secret is in the hosts' environments only: in no host's log (the S3 server's own
    aside) and none of ``texts``."""
    secret = aws["AWS_SECRET_ACCESS_KEY"]
    assert texts and all(secret not in text for text in texts)
    for log in logs.glob("*.log"):
        assert log.name == "s3.log" or secret not in log.read_text(errors="replace"), log


def _prefect_api(prefect: dict, path: str, body: dict | None = None) -> str:
    request = urllib.request.Request(f"{prefect['PREFECT_API_URL']}/{path}", method=(
        "GET" if body is None else "POST"), data=None if body is None else json.dumps(
        body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.read().decode()


def test_train_on_worker_hosts_from_s3_and_predict_on_the_shell(layout):
    from distributed import Client

    scheduler, workers, shell, aws, logs = layout
    store = f"s3://{BUCKET}/hosts-{uuid.uuid4().hex[:8]}"
    _ingest(shell, store)
    with Client(scheduler, timeout=60) as client:
        cursor = _task_stream_cursor(client)
        done = _train(shell, scheduler, store)
        assert done.returncode == 0, done.stderr[-4000:]
        reads = _block_reads(_tasks_since(client, cursor))
    by_worker: dict[str, int] = {}
    for task in reads:
        by_worker[task["worker"]] = by_worker.get(task["worker"], 0) + 1
    logged = {h.address: _chunk_reads_logged(h, store) for h in workers}
    print(f"block-read tasks of X by worker (the scheduler's task stream): {by_worker}")
    for address, lines in logged.items():
        print(f"worker host {address} logged {len(lines)} chunk reads, e.g. {lines[:1]}")
    n_chunks = -(-3 * N_PER_CLASS // CHUNK_ROWS)
    assert len(reads) >= n_chunks, reads  # every block read at least once, by a worker
    assert sorted({w.split("//")[1].split(":")[0] for w in by_worker}) == WORKERS, by_worker
    # Each worker host's own log shows it reading X's chunks from the S3 server's address.
    assert all(logged.values()), logged
    assert all(f"from {aws['AWS_ENDPOINT_URL']}" in line and aws["AWS_SECRET_ACCESS_KEY"] not in
               line for lines in logged.values() for line in lines), logged

    meta, listed = _versions(shell, store)
    assert meta["version"] == 1 and meta["certified"], meta
    # On the data set it was trained on, read back from S3 on the shell host.
    predicted = _catdask(shell, "predict", MODEL, "--store", store)
    assert predicted.returncode == 0, predicted.stderr[-3000:]
    rows = predicted.stdout.strip().splitlines()
    assert len(rows) == 1 + 3 * N_PER_CLASS, rows[:3]
    accuracy = re.search(r"rows, accuracy ([\d.]+)", predicted.stderr)
    assert accuracy and float(accuracy.group(1)) > 0.9, predicted.stderr[-2000:]

    _assert_no_secret(aws, logs, done.stdout + done.stderr, predicted.stdout + predicted.stderr)


def test_a_deployment_run_on_the_prefect_worker_host_trains_on_the_cluster(layout,
                                                                           prefect_hosts):
    scheduler, workers, shell, aws, logs = layout
    store = f"s3://{BUCKET}/prefect-{uuid.uuid4().hex[:8]}"
    _ingest(shell, store)
    deployed = shell.run(["sh", "-c", f"mkdir deploy && cp {REPO / 'deploy' / 'prefect.yaml'} "
                          f"deploy/ && cd deploy && exec {sys.executable} -m prefect --no-prompt "
                          "deploy --all --prefect-file prefect.yaml"], timeout=300,
                         **prefect_hosts)
    assert deployed.returncode == 0, (deployed.stdout + deployed.stderr)[-4000:]
    parameters = {"dataset": "blobs", "method": "kcqs", "n_restarts": 2, "store": store,
                  "scheduler": scheduler}
    started = time.monotonic()
    run = shell.run([sys.executable, "-m", "prefect", "deployment", "run", "catdask-train/train",
                     "--params", json.dumps(parameters), "--watch", "--watch-timeout", "600"],
                    timeout=660, **prefect_hosts)
    print(f"deployment run: exit {run.returncode} after {time.monotonic() - started:.1f} s")
    worker_log = (logs / "prefect-worker.log").read_text(errors="replace")
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:] + worker_log[-4000:]
    assert "Completed" in run.stdout + run.stderr, run.stdout[-3000:]
    # The Prefect worker host ran it (its log names the run), the Dask worker hosts read X.
    flow_run = re.search(r"UUID: ([0-9a-f-]{36})", run.stdout)
    assert flow_run and flow_run.group(1) in worker_log, (run.stdout[-2000:], worker_log[-3000:])
    assert all(_chunk_reads_logged(h, store) for h in workers)

    meta, _ = _versions(shell, store)
    assert meta["version"] == 1 and meta["certified"], meta
    predicted = _catdask(shell, "predict", MODEL, "--store", store)
    assert predicted.returncode == 0, predicted.stderr[-3000:]

    # The run's parameters, logs and artifacts on the Prefect server hold no secret.
    run_id = flow_run.group(1)
    recorded = [_prefect_api(prefect_hosts, f"flow_runs/{run_id}")] + [
        _prefect_api(prefect_hosts, f"{kind}/filter", {kind: {"flow_run_id": {"any_": [run_id]}}})
        for kind in ("logs", "artifacts")]
    assert all(json.loads(text) for text in recorded), recorded  # the run, its logs, artifacts
    _assert_no_secret(aws, logs, *recorded, run.stdout + run.stderr, deployed.stdout)


def test_a_worker_host_killed_mid_fit_changes_nothing(layout):
    from distributed import Client

    scheduler, workers, shell, _, _ = layout
    reference = f"s3://{BUCKET}/reference-{uuid.uuid4().hex[:8]}"
    store = f"s3://{BUCKET}/killed-{uuid.uuid4().hex[:8]}"
    _ingest(shell, reference)
    assert _train(shell, scheduler, reference).returncode == 0
    expected, _ = _versions(shell, reference)

    _ingest(shell, store)
    result: list = []
    with Client(scheduler, timeout=60) as client:
        cursor = _task_stream_cursor(client)
        train = threading.Thread(target=lambda: result.append(_train(shell, scheduler, store)))
        train.start()
        # Mid-fit: X's blocks are read and the fit's passes have begun.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and train.is_alive():
            tasks = _tasks_since(client, cursor)
            if _block_reads(tasks) and len(tasks) > len(_block_reads(tasks)) + 10:
                break
            time.sleep(0.2)
        if not train.is_alive():
            train.join()
            raise AssertionError("the fit ended before a worker host could be killed: "
                                 + (result[0].stderr[-3000:] if result else "no result"))
        victim = workers[1]
        victim.proc.kill()  # SIGKILL, the host's whole tree: as a machine that dies
        while any(victim.address in w for w in client.scheduler_info()["workers"]):
            assert time.monotonic() < deadline, "the scheduler never noticed the lost worker"
            time.sleep(0.1)
        lost_at = len(_tasks_since(client, cursor))
        train.join(timeout=660)  # _catdask's 600 s, then its stack dump
        after = _tasks_since(client, cursor)[lost_at:]
    (done,) = result
    assert done.returncode == 0, done.stderr[-8000:]
    survivors = {t["worker"] for t in after}
    print(f"{len(after)} tasks ran after {victim.address} was lost, on {survivors}; "
          f"{len(_block_reads(after))} of them re-read blocks of X from S3")
    # The fit went on without the lost host (a block the survivor lacks it reads from S3
    # again; the Gram passes have usually copied every block of X to both workers already).
    assert after and all(victim.address not in w for w in survivors), survivors

    meta, listed = _versions(shell, store)
    assert meta["version"] == 1, meta
    assert len([line for line in listed.splitlines() if MODEL in line]) == 1, listed
    assert meta["objective"] == pytest.approx(expected["objective"], rel=1e-9, abs=1e-9)
