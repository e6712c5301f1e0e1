"""``deploy/prefect.yaml`` on a process work pool, with only the installed package (issue 40,
item 4): no checkout, no pull step, no working folder the deployments depend on.

The project's wheel is installed into a new venv (tests/helpers/installed.py: nothing points
back at the checkout). From an empty folder holding only a copy of ``prefect.yaml``, that
venv's ``prefect --no-prompt deploy --all`` creates every deployment on Prefect's test server;
then a ``prefect worker start --type process --run-once`` in another empty folder picks up a
run of ``catdask-ingest/nightly-ingest`` (iris, from scikit-learn's copy) and, once that has
landed, one of ``catdask-train/train``; both complete and the store in the worker's
``CATDASK_STORE`` holds the data set and the registered model. Slow (about a minute).
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from .helpers.installed import build_wheel, setuptools_builds_this_project, wheel_venv
from .helpers.paths import REPO

pytest.importorskip("prefect")
pytest.importorskip("distributed")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not setuptools_builds_this_project(),
                       reason="needs setuptools >= 77 to build the wheel (the `test` extra)"),
]

POOL = "catdask-pool"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``(python, env)`` of a venv holding only the wheel of catdask (dependencies shared)."""
    root = tmp_path_factory.mktemp("installed")
    python, _, env = wheel_venv(build_wheel(root), root / "venv")
    return python, env


def _run(python, env, cwd, *argv, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _run_deployment(client, name: str, parameters: dict) -> uuid.UUID:
    deployment = client.read_deployment_by_name(name)
    return client.create_flow_run_from_deployment(deployment.id, parameters=parameters).id


def _worker_runs_once(python, env, cwd) -> str:
    """One polling pass of a process worker on the pool; waits for the runs it started."""
    done = _run(python, env, cwd, "-m", "prefect", "worker", "start", "--pool", POOL,
                "--type", "process", "--run-once", timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    return output


def test_process_worker_runs_the_deployments_from_the_installed_package(installed, prefect_api,
                                                                       tmp_path):
    from prefect.client.orchestration import get_client

    python, base_env = installed
    deployer, worker, store = tmp_path / "deployer", tmp_path / "worker", tmp_path / "store"
    deployer.mkdir()
    worker.mkdir()
    env = dict(base_env, PREFECT_API_URL=prefect_api, PREFECT_HOME=str(tmp_path / "home"),
               MPLBACKEND="Agg")
    where = _run(python, env, deployer, "-c", "import catdask; print(catdask.__file__)")
    assert where.returncode == 0, where.stderr
    assert str(REPO) not in where.stdout and "/venv/" in where.stdout, where.stdout

    shutil.copy(REPO / "deploy" / "prefect.yaml", deployer / "prefect.yaml")
    pool = _run(python, env, deployer, "-m", "prefect", "work-pool", "create", POOL,
                "--type", "process")
    assert pool.returncode == 0 or "already exists" in pool.stdout + pool.stderr, pool.stderr
    deployed = _run(python, env, deployer, "-m", "prefect", "--no-prompt", "deploy", "--all",
                    "--prefect-file", "prefect.yaml")
    assert deployed.returncode == 0, (deployed.stdout + deployed.stderr)[-4000:]

    with get_client(sync_client=True) as client:
        names = ["catdask-retrain/nightly-retrain", "catdask-evaluate/weekly-evaluation",
                 "catdask-retrain/retrain-on-new-snapshot", "catdask-ingest/nightly-ingest",
                 "catdask-train/train"]
        for name in names:
            deployment = client.read_deployment_by_name(name)
            # Nothing that points at a folder: no pull step, a module path as the entry point.
            assert not deployment.pull_steps, (name, deployment.pull_steps)
            assert deployment.entrypoint.startswith("catdask."), deployment.entrypoint
            assert deployment.work_pool_name == POOL

        worker_env = dict(env, CATDASK_STORE=str(store))
        ingest = _run_deployment(client, "catdask-ingest/nightly-ingest", {"names": ["iris"]})
        log = _worker_runs_once(python, worker_env, worker)
        state = client.read_flow_run(ingest).state
        assert state.is_completed(), f"{state}\n{log[-4000:]}"
        assert (store / "datasets" / "iris").is_dir()

        train = _run_deployment(client, "catdask-train/train",
                                {"dataset": "iris", "n_restarts": 1})
        log = _worker_runs_once(python, worker_env, worker)
        state = client.read_flow_run(train).state
        assert state.is_completed(), f"{state}\n{log[-4000:]}"
    assert list(worker.iterdir()) == []  # the runs wrote nothing where the worker started

    from catdask.store import list_models

    assert [(v.name, v.version) for v in list_models(store)] == [("iris-cqs", 1)]
