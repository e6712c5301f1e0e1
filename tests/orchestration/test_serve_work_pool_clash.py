"""`catdask serve` on a Prefect server that already has deploy/prefect.yaml's deployments.

Found by following deploy/README.md's two set-ups on one server (opspass): `prefect deploy`
of deploy/prefect.yaml, then `catdask serve` with PREFECT_API_URL set. Serve replaced the
work pool's `catdask-train/train`, `catdask-retrain/nightly-retrain`, `.../retrain-on-new-
snapshot` and `catdask-evaluate/weekly-evaluation` (their pull step gone, serve's store
frozen in) and, when it stopped, left all four paused: the work pool's nightly retrain stopped
without a word. Serve now refuses before serving anything.
"""

import uuid

import pytest


@pytest.fixture
def work_pool_deployment(prefect_api):
    """A work-pool deployment ``<flow>/train`` on the session's server (a flow name of its
    own, so that no other test's deployments are touched); yields ``(flow name, pool)``."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate

    flow_name, pool = f"opspass-{uuid.uuid4().hex[:8]}", f"pool-{uuid.uuid4().hex[:8]}"
    with get_client(sync_client=True) as client:
        client.create_work_pool(WorkPoolCreate(name=pool, type="process"))
        flow_id = client.create_flow_from_name(flow_name)
        client.create_deployment(flow_id=flow_id, name="train", work_pool_name=pool,
                                 entrypoint="flows/train.py:train")
        client.create_deployment(flow_id=flow_id, name="served-before", entrypoint="x.py:f")
    yield flow_name, pool
    with get_client(sync_client=True) as client:
        for name in ("train", "served-before"):
            client.delete_deployment(client.read_deployment_by_name(f"{flow_name}/{name}").id)
        client.delete_work_pool(pool)


def test_work_pool_deployments_of_the_served_names_are_found(work_pool_deployment):
    from catdask.serve import work_pool_deployments

    flow, pool = work_pool_deployment
    names = [f"{flow}/train", f"{flow}/served-before", f"{flow}/absent"]
    assert work_pool_deployments(names) == [f"{flow}/train (work pool {pool})"]


def test_serve_refuses_in_one_line_naming_them(work_pool_deployment, prefect_api):
    from catdask.errors import ServiceStartError
    from catdask.serve import _refuse_work_pool_clash

    flow, pool = work_pool_deployment
    with pytest.raises(ServiceStartError) as info:
        _refuse_work_pool_clash([f"{flow}/train", f"{flow}/served-before"], prefect_api)
    text = str(info.value)
    assert f"already has work-pool deployments of the same names: {flow}/train (work pool " \
           f"{pool}); serving would replace them and pause them" in text
    assert "served-before" not in text and "\n" not in text
    _refuse_work_pool_clash([f"{flow}/served-before", f"{flow}/absent"], prefect_api)  # fine


def test_serve_checks_before_it_serves():
    """The check runs between building the deployments and adding them to the runner."""
    import inspect

    from catdask import serve

    source = inspect.getsource(serve.serve)
    assert source.index("_refuse_work_pool_clash(") < source.index("add_preloaded_deployment(")


def test_serve_refuses_a_cluster_whose_workers_run_other_software(monkeypatch):
    """`catdask serve --scheduler` checks the workers at start (one line, the client closed)
    rather than failing every served run (opspass)."""
    from catdask import serve
    from catdask.distributed import cluster, worker_check
    from catdask.errors import WorkerEnvironmentError

    closed = []

    class Client:
        def close(self):
            closed.append(True)

    def refuse(client, address):
        raise WorkerEnvironmentError(f"1 of the 1 Dask workers of {address} run dask 0.1")

    monkeypatch.setattr(cluster, "connect_scheduler", lambda address: Client())
    monkeypatch.setattr(worker_check, "check_worker_software", refuse)
    with pytest.raises(WorkerEnvironmentError, match="tcp://h:1 run dask 0.1"):
        serve._dask_client("tcp://h:1", 8787)
    assert closed == [True]
