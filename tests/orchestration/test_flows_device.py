"""The ``catdask-train`` flow's ``device`` parameter under Prefect's test harness (conftest's
``prefect_api``) on the module's LocalCluster, whose workers declare no GPU: the fit runs on the
device in the fit task's process (catdask.pipeline.device), on PyTorch's CPU build as the
stand-in for a GPU. The recorded device comes back through the nightly retrain; a bad device
fails the run before anything is read or fitted."""

from __future__ import annotations

import pytest

pytest.importorskip("prefect")
pytest.importorskip("distributed")
torch = pytest.importorskip("torch", reason="the device path needs PyTorch "
                            "(pip install 'catdask[gpu]')")

from catdask.store import list_models  # noqa: E402

from .test_flows import _flows, _run_failing_flow, _Spy, _store_snapshot  # noqa: E402

pytestmark = [pytest.mark.usefixtures("prefect_api")]


def test_train_flow_fits_on_the_device_and_the_retrain_keeps_it(iris_store, dask_scheduler):
    _, train_mod, _ = _flows()
    summary = train_mod.train("iris", method="kcqs", n_restarts=1, device="cpu",
                              store=str(iris_store), scheduler=dask_scheduler)
    assert summary["version"] == "iris-kcqs:v1" and summary["certified"]
    assert (summary["device"], summary["device_placement"]) == ("cpu", "host")
    (version,) = list_models(iris_store)
    assert version.meta["spec"]["device"] == "cpu"
    # The retrain passes the recorded spec, device included: the same key, a cache hit.
    again = train_mod.retrain_registered(store=str(iris_store), scheduler=dask_scheduler)
    assert [(r["version"], r["cached"], r["device"]) for r in again] == [
        ("iris-kcqs:v1", True, "cpu")]


@pytest.mark.parametrize("device, expect", [
    pytest.param("gpu0", "device='gpu0' is not a device PyTorch knows", id="gpu0"),
    pytest.param("cuda", "device='cuda': PyTorch sees no CUDA GPU here",
                 marks=pytest.mark.skipif(torch.cuda.is_available(),
                                          reason="this machine has a CUDA GPU"), id="cuda"),
])
def test_a_bad_device_fails_the_run_before_the_data_are_read(iris_store, dask_scheduler,
                                                             monkeypatch, device, expect):
    """A misspelt device fails the flow before the cache lookup; a device missing here (the
    cluster has no GPU workers, so the fit would run in this process) in the fit task, before
    the data set is opened."""
    from catdask.pipeline import training

    _, train_mod, _ = _flows()
    spy = _Spy(training.open_dataset_arrays)
    monkeypatch.setattr(training, "open_dataset_arrays", spy)
    before = _store_snapshot(iris_store)
    exc, _ = _run_failing_flow(train_mod.train, "iris", method="kcqs", device=device,
                               store=str(iris_store), scheduler=dask_scheduler)
    assert isinstance(exc, ValueError) and expect in str(exc), str(exc)
    # The run's own kind of error (Failed in one line, no traceback), not a bug's.
    from catdask.errors import ParameterError

    assert isinstance(exc, ParameterError), type(exc)
    assert spy.calls == 0
    assert _store_snapshot(iris_store) == before


def test_no_scheduler_and_a_device_starts_no_cluster(iris_store, monkeypatch):
    """Without a scheduler the embedded cluster would hold no GPU worker, so the fit runs in
    the task's process: the flow does not start (or wait for) a Dask cluster."""
    _, train_mod, _ = _flows()

    def no_cluster(scheduler):
        raise AssertionError(f"a Dask cluster was asked for (scheduler={scheduler!r})")

    monkeypatch.setattr(train_mod, "dask_client_context", no_cluster)
    summary = train_mod.train("iris", method="kcqs", n_restarts=1, device="cpu",
                              store=str(iris_store))
    assert (summary["device"], summary["device_placement"]) == ("cpu", "host")
