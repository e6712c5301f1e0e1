"""The Prefect flows run for real: a temporary Prefect API, a LocalCluster, tmp_path stores.

Covers the main path (ingest -> train -> certified, reloadable registry version), the artifacts
a train run publishes, failure paths (bad sources, unknown data sets, missing or corrupt
stores: a clear error and nothing half-written), crash-and-rerun, concurrent registrations,
task retries, the certification policy, run_key idempotency and the quick evaluation.

Fixtures ``prefect_api`` (session) and ``dask_scheduler`` (module) live in conftest.py.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("prefect")
pytest.importorskip("distributed")

from catdask.errors import (  # noqa: E402
    ChecksumMismatchError,
    DatasetNotFoundError,
    ParseError,
    StoreCorruptError,
)
from catdask.pipeline import (  # noqa: E402
    ModelSpec,
    fit_on_dataset,
    ingest_dataset,
    register_outcome,
)
from catdask.store import (  # noqa: E402
    list_models,
    load_estimator,
    load_model_version,
    read_dataset,
    write_dataset,
)

from tests.helpers.data import make_blobs  # noqa: E402
from tests.helpers.paths import REPO  # noqa: E402

pytestmark = [
    pytest.mark.usefixtures("prefect_api"),
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

SEEDS_FILE = "seeds_dataset.txt"


# ----------------------------------------------------------------------------- helpers
def _flows():
    from catdask.orchestration import evaluate, ingest, train

    return ingest, train, evaluate


def _wait_for(fetch, ok, timeout=30.0, interval=0.2):
    """Poll ``fetch()`` until ``ok(value)``; task-run states reach the API asynchronously."""
    deadline = time.monotonic() + timeout
    value = fetch()
    while not ok(value) and time.monotonic() < deadline:
        time.sleep(interval)
        value = fetch()
    return value


def _task_runs(flow_run_id, name_prefix, *, min_runs=1, ok=None, timeout=30.0):
    """Task runs of one flow run whose name starts with ``name_prefix``."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    def fetch():
        with get_client(sync_client=True) as client:
            runs = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
            )
        return [r for r in runs if r.name.startswith(name_prefix)]

    return _wait_for(fetch, lambda rs: len(rs) >= min_runs and (ok is None or ok(rs)), timeout)


def _artifacts(flow_run_id, key=None):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )

    flt = ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
    if key is not None:
        flt.key = ArtifactFilterKey(any_=[key])
    with get_client(sync_client=True) as client:
        return client.read_artifacts(artifact_filter=flt)


def _table(artifact):
    data = artifact.data
    return json.loads(data) if isinstance(data, str) else data


def _run_failing_flow(flow, *args, **kwargs):
    """Run a flow expected to fail; returns (exception, flow_run_id)."""
    state = flow(*args, return_state=True, **kwargs)
    assert state.is_failed(), f"expected the flow to fail, got {state}"
    with pytest.raises(Exception) as info:
        state.result()
    return info.value, state.state_details.flow_run_id


def _store_snapshot(root: Path):
    """Every path under the store (to show a failed run wrote nothing) but the training leases'
    records: a released lease stays as a small record (the seam has no conditional delete) and
    holds no data (issue 39)."""
    if not root.exists():
        return set()
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if p.relative_to(root).parts[0] != ".training"}


def _assert_no_temporaries(root: Path):
    leftovers = [p for p in root.rglob(".tmp-*")] if root.exists() else []
    assert leftovers == [], f"temporaries left behind: {leftovers}"


class _Spy:
    """Wraps a function, recording its results (or raising once first, for retries)."""

    def __init__(self, fn, fail_first=0, exc=None):
        self.fn, self.fail_first, self.exc = fn, fail_first, exc
        self.calls, self.results = 0, []
        self.lock = threading.Lock()

    def __call__(self, *args, **kwargs):
        with self.lock:
            self.calls += 1
            fail = self.calls <= self.fail_first
        if fail:
            raise self.exc
        out = self.fn(*args, **kwargs)
        with self.lock:
            self.results.append(out)
        return out


def _train_iris_with_failing_fits(store, scheduler, monkeypatch, *, fail_first, exc):
    """Run the train flow on iris (2 restarts) with ``fit_on_dataset`` raising ``exc`` on its
    first ``fail_first`` calls and no wait between task retries; returns ``(state, spy)``."""
    _, train_mod, _ = _flows()
    spy = _Spy(train_mod.fit_on_dataset, fail_first=fail_first, exc=exc)
    monkeypatch.setattr(train_mod, "fit_on_dataset", spy)
    # Same task, no 5 s wait between attempts.
    monkeypatch.setattr(train_mod, "fit_restarts",
                        train_mod.fit_restarts.with_options(retry_delay_seconds=0))
    state = train_mod.train("iris", n_restarts=2, store=str(store), scheduler=scheduler,
                            return_state=True)
    return state, spy


def _seeds_source(shared_dir):
    src = shared_dir / "data" / "uci" / "seeds" / SEEDS_FILE
    if not src.is_file():
        pytest.skip(f"{src} is not present: the UCI seeds file is needed for this test")
    return src


@pytest.fixture(scope="module")
def trained(tmp_path_factory, dask_scheduler):
    """ingest flow -> train flow on iris, with the in-flow FitOutcome captured."""
    ingest_mod, train_mod, _ = _flows()
    store = tmp_path_factory.mktemp("main") / "store"
    reports = ingest_mod.ingest(["iris"], store=str(store))
    spy = _Spy(train_mod.fit_on_dataset)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(train_mod, "fit_on_dataset", spy)
        state = train_mod.train("iris", method="cqs", n_restarts=3, store=str(store),
                                scheduler=dask_scheduler, return_state=True)
    assert state.is_completed(), state
    assert len(spy.results) == 1
    return {"store": store, "ingest": reports, "state": state, "result": state.result(),
            "outcome": spy.results[0], "flow_run_id": state.state_details.flow_run_id}


# ----------------------------------------------------------------------------- main path
def test_ingest_then_train_registers_a_certified_reloadable_model(trained):
    store, result, outcome = trained["store"], trained["result"], trained["outcome"]
    (report,) = trained["ingest"]
    assert report["name"] == "iris" and report["written"] is True
    assert (report["n_samples"], report["n_features"], report["n_classes"]) == (150, 4, 3)

    assert result["status"] == "certified" and result["certified"] is True
    assert result["version"] == "iris-cqs:v1"
    assert Path(result["plot"]).is_file() and Path(result["plot"]).stat().st_size > 0

    (mv,) = list_models(store)
    assert (mv.name, mv.version, mv.problem) == ("iris-cqs", 1, None)
    meta = mv.meta
    assert meta["registration_status"] == "certified" and meta["certified"] is True
    assert meta["dataset"] == "iris"
    assert meta["dataset_sha256"] == report["content_sha256"]
    assert meta["spec"]["method"] == "cqs" and meta["spec"]["n_restarts"] == 3
    assert meta["run_key"] == f"flow-run:{trained['flow_run_id']}"

    ds = read_dataset(store, "iris")
    reloaded = load_estimator(store, "iris-cqs")
    np.testing.assert_array_equal(reloaded.predict(ds.X), outcome.model.predict(ds.X))
    np.testing.assert_array_equal(reloaded.transform(ds.X), outcome.model.transform(ds.X))
    assert np.mean(reloaded.predict(ds.X) == ds.y) == pytest.approx(
        outcome.metrics["train_accuracy_predict"])
    _assert_no_temporaries(store)


def _flow_run_name(flow_run_id):
    from prefect import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(flow_run_id).name


def test_train_run_is_named_after_the_model_it_registers(trained, dask_scheduler):
    """The UI's run list shows DATASET-METHOD, or the run's own ``model_name``."""
    _, train_mod, _ = _flows()
    assert _flow_run_name(trained["flow_run_id"]) == "iris-cqs"
    state = train_mod.train("iris", method="cqs", n_restarts=2, store=str(trained["store"]),
                            scheduler=dask_scheduler, model_name="iris-nightly",
                            return_state=True)
    assert state.is_completed(), state
    assert state.result()["version"] == "iris-nightly:v1"
    assert _flow_run_name(state.state_details.flow_run_id) == "iris-nightly"


def test_train_publishes_restart_table_and_summary_artifacts(trained):
    run_id = trained["flow_run_id"]
    outcome = trained["outcome"]
    keys = {a.key for a in _artifacts(run_id)}
    # Keyed by the model (iris-cqs:v1), so the next model's artifacts do not replace them.
    assert {"iris-cqs-v1-restarts", "iris-cqs-v1-summary", "iris-cqs-v1-metrics"} <= keys

    (table,) = _artifacts(run_id, "iris-cqs-v1-restarts")
    assert table.type == "table"
    rows = _table(table)
    assert len(rows) == len(outcome.estimator.restarts_) == 3
    assert [r["restart"] for r in rows] == [r.index for r in outcome.estimator.restarts_]
    for row, restart in zip(rows, outcome.estimator.restarts_):
        assert {"objective", "iterations", "certified", "gap"} <= set(row)
        # Formatted for a browser window: 6 significant digits, gaps as 2.6e-13.
        assert row["objective"] == f"{float(restart.objective):.6g}"
        assert row["iterations"] == restart.n_iter >= 1
        assert row["certified"] in (True, False, None)
        assert row["gap"].count("e-") == 1 and len(row["gap"]) == len("2.60e-13")
        assert len(row["certificate"]) <= 32, row["certificate"]
    assert any(r["certified"] is True for r in rows)
    assert min(float(r["objective"]) for r in rows) == pytest.approx(
        trained["result"]["objective"], rel=1e-5)

    (summary,) = _artifacts(run_id, "iris-cqs-v1-summary")
    assert summary.type == "markdown"
    assert "iris" in summary.data and "iris-cqs:v1" in summary.data
    assert "certified global optimum" in summary.data
    assert "](data:image/png;base64,iVBORw0KGgo" in summary.data  # an inline PNG
    # The metrics as a table with 4 significant digits, not a Python dict.
    accuracy = outcome.metrics["train_accuracy_predict"]
    assert f"| train_accuracy_predict | {accuracy:.4g} |" in summary.data
    assert "{'" not in summary.data

    (metrics,) = _artifacts(run_id, "iris-cqs-v1-metrics")
    assert {r["metric"] for r in _table(metrics)} == set(outcome.metrics)


def test_flow_runs_are_named_after_what_they_do(trained):
    """Not Prefect's generated names (``chocolate-scallop``): the UI's run list says what ran."""
    from prefect.client.orchestration import get_client

    ingest_mod, _, _ = _flows()
    with get_client(sync_client=True) as client:
        train_run = client.read_flow_run(trained["flow_run_id"])
        state = ingest_mod.ingest(["iris", "wine"], store=str(trained["store"]),
                                  return_state=True)
        ingest_run = client.read_flow_run(state.state_details.flow_run_id)
    assert train_run.name == "iris-cqs"
    assert ingest_run.name == "ingest-iris-wine"


def test_ingest_flow_publishes_summary_and_is_idempotent(tmp_path):
    ingest_mod, _, _ = _flows()
    store = tmp_path / "store"
    first = ingest_mod.ingest(["iris", "wine"], store=str(store))
    assert [r["written"] for r in first] == [True, True]
    state = ingest_mod.ingest(["iris"], store=str(store), return_state=True)
    (again,) = state.result()
    assert again["written"] is False and again["content_sha256"] == first[0]["content_sha256"]
    (art,) = _artifacts(state.state_details.flow_run_id, "ingest-summary")
    (row,) = _table(art)
    assert row["name"] == "iris" and row["written"] is False


# ----------------------------------------------------------------------------- run_key
@pytest.mark.slow
def test_same_run_key_gives_the_same_version(iris_store, dask_scheduler):
    _, train_mod, _ = _flows()
    kw = dict(method="cqs", n_restarts=2, store=str(iris_store), scheduler=dask_scheduler,
              run_key="nightly:2024-05-01")
    a = train_mod.train("iris", **kw)
    b = train_mod.train("iris", **kw)
    assert a["version"] == b["version"] == "iris-cqs:v1"
    assert [str(v) for v in list_models(iris_store)] == ["iris-cqs:v1"]
    assert list_models(iris_store)[0].run_key == "nightly:2024-05-01"
    # Without a run_key each flow run is its own key, but the same data, spec and code is a
    # cache hit (the latest version); refit=True fits anyway: a new version.
    cached = train_mod.train("iris", method="cqs", n_restarts=2, store=str(iris_store),
                             scheduler=dask_scheduler)
    assert cached["version"] == "iris-cqs:v1" and cached["cached"] is True
    c = train_mod.train("iris", method="cqs", n_restarts=2, store=str(iris_store),
                        scheduler=dask_scheduler, refit=True)
    assert c["version"] == "iris-cqs:v2" and c["cached"] is False


@pytest.mark.slow
def test_retrain_registered_adds_one_version_per_model_and_is_idempotent(iris_store,
                                                                          dask_scheduler):
    """The nightly job retrains each registered model with its recorded spec; a rerun of the
    same (unscheduled) run registers nothing new. On unchanged data it refits nothing (the
    train cache) unless refit=True."""
    _, train_mod, _ = _flows()
    first = train_mod.train("iris", method="cqs", n_restarts=2, store=str(iris_store),
                            scheduler=dask_scheduler, random_state=3)
    assert first["version"] == "iris-cqs:v1"
    cached = train_mod.retrain_registered(store=str(iris_store), scheduler=dask_scheduler)
    assert [(r["version"], r["cached"]) for r in cached] == [("iris-cqs:v1", True)]
    results = train_mod.retrain_registered(store=str(iris_store), scheduler=dask_scheduler,
                                           refit=True)
    assert [r["version"] for r in results] == ["iris-cqs:v2"]
    state = train_mod.retrain_registered(store=str(iris_store), scheduler=dask_scheduler,
                                         refit=True, return_state=True)
    again = state.result()
    assert [r["version"] for r in again] == ["iris-cqs:v2"]
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        run = client.read_flow_run(state.state_details.flow_run_id)
    assert run.name.startswith("retrain-all-20"), run.name  # the night it is for
    versions = list_models(iris_store)
    assert [str(v) for v in versions] == ["iris-cqs:v1", "iris-cqs:v2"]
    assert versions[1].meta["spec"] == versions[0].meta["spec"]
    assert versions[1].run_key.startswith("retrain:iris-cqs:")


@pytest.mark.slow
def test_one_models_failed_retrain_does_not_stop_the_others(iris_store, dask_scheduler,
                                                            monkeypatch):
    """A retrain that raises for one model (e.g. its recorded device missing here) still
    retrains the rest, and the run ends Failed naming the model and the reason."""
    _, train_mod, _ = _flows()
    for method in ("cas", "cqs"):
        train_mod.train("iris", method=method, n_restarts=1, store=str(iris_store),
                        scheduler=dask_scheduler, allow_uncertified=True)
    real = train_mod.run_train

    def run_train(**parameters):
        if parameters["model_name"] == "iris-cas":  # sorted first: the loop must go on
            raise ValueError("device='cuda': PyTorch sees no CUDA GPU here")
        return real(**parameters)

    monkeypatch.setattr(train_mod, "run_train", run_train)
    exc, _ = _run_failing_flow(train_mod.retrain_registered, store=str(iris_store),
                               scheduler=dask_scheduler, refit=True)
    assert isinstance(exc, train_mod.RetrainFailedError), exc
    assert "iris-cas (ValueError: device='cuda': PyTorch sees no CUDA GPU here)" in str(exc)
    assert [(r.get("model"), r["version"]) for r in exc.results] == [
        ("iris-cas", None), (None, "iris-cqs:v2")]
    assert [str(v) for v in list_models(iris_store)] == ["iris-cas:v1", "iris-cqs:v1",
                                                         "iris-cqs:v2"]


@pytest.mark.slow
def test_retrain_keeps_every_setting_of_the_recorded_spec(iris_store, dask_scheduler):
    """A model trained with certify="moment", non-default tolerances and its own
    allow_uncertified is retrained with every one of them (issue 25: the retrain rebuilt the
    call from a few spec fields, so such a model came back at "dual" and the defaults)."""
    _, train_mod, _ = _flows()
    settings = dict(method="cqs", origin="class", n_restarts=2, random_state=5, eps=0.05,
                    tol=1e-5, max_iter=4, certify="moment", allow_uncertified=True)
    first = train_mod.train("iris", store=str(iris_store), scheduler=dask_scheduler, **settings)
    # Four iterations do not reach the optimum: registered only by the model's own policy.
    # (The class origin is in the default name since issue 43.)
    assert first["version"] == "iris-cqs-class:v1" and first["status"] == "uncertified-allowed"
    # The recorded spec comes back whole: the retrain's train run finds v1 under its key.
    cached = train_mod.retrain_registered(store=str(iris_store), scheduler=dask_scheduler)
    assert [(r["version"], r["cached"]) for r in cached] == [("iris-cqs-class:v1", True)]
    # The nightly flag is off: the recorded allow_uncertified alone registers the retrain.
    results = train_mod.retrain_registered(store=str(iris_store), scheduler=dask_scheduler,
                                           refit=True)
    assert [(r["version"], r["status"]) for r in results] == [("iris-cqs-class:v2",
                                                               "uncertified-allowed")]
    v1, v2 = list_models(iris_store)
    assert v1.meta["spec"] == v2.meta["spec"] == ModelSpec(**settings).to_dict()
    for version in (v1, v2):  # what the estimator itself was fitted with
        params = load_estimator(iris_store, version.name, version.version)[-1].get_params()
        assert (params["certify"], params["eps"], params["tol"], params["max_iter"],
                params["origin"], params["n_restarts"], params["random_state"]) == (
            "moment", 0.05, 1e-5, 4, "class", 2, 5)
        assert version.meta["n_iter"] <= 4


def test_a_spec_recorded_before_allow_uncertified_reads_it_from_the_status():
    old = {k: v for k, v in ModelSpec(certify="moment", tol=1e-6).to_dict().items()
           if k != "allow_uncertified"}
    for status, allowed in [("uncertified-allowed", True), ("certified", False),
                            ("certificate-not-applicable", False)]:
        spec = ModelSpec.recorded({"spec": old, "registration_status": status})
        assert spec == ModelSpec(certify="moment", tol=1e-6, allow_uncertified=allowed)
    recorded = ModelSpec(allow_uncertified=True).to_dict()  # recorded: the record decides
    assert ModelSpec.recorded({"spec": recorded, "registration_status": "certified"}
                              ).allow_uncertified is True


def test_train_flow_takes_every_model_spec_field():
    """The retrain passes a recorded spec to the train flow whole: a ModelSpec field the
    flow does not take would fail there (or, spelled out by hand, be dropped)."""
    import dataclasses
    import inspect

    _, train_mod, _ = _flows()
    parameters = inspect.signature(train_mod.train.fn).parameters
    for field in dataclasses.fields(ModelSpec):
        assert field.name in parameters, field.name
        assert parameters[field.name].default == field.default, field.name


# ----------------------------------------------------------------------------- certification
def test_uncertified_model_is_rejected_unless_allowed(iris_store, dask_scheduler):
    _, train_mod, _ = _flows()
    # CQS on standardised wine with the class origin: the SDP dual is not tight (gap 1.6e-3),
    # so the optimum is not certified at the default level.
    ingest_dataset("wine", iris_store)
    kw = dict(method="cqs", origin="class", n_restarts=1, store=str(iris_store),
              scheduler=dask_scheduler)
    state = train_mod.train("wine", return_state=True, **kw)
    # A rejected model is not a green run: Failed, named Rejected, with the reason.
    assert state.is_failed() and state.name == "Rejected", state
    assert state.message.startswith(
        "rejected: wine cqs not certified (optimality gap <= 0.00164); nothing registered"), \
        state.message
    assert "certify=moment tries the level-2 moment relaxation" in state.message
    run_id = state.state_details.flow_run_id
    with pytest.raises(train_mod.ModelRejectedError) as info:
        state.result()
    rejected = info.value.summary
    assert rejected["status"] == "rejected-uncertified"
    assert rejected["version"] is None and rejected["certified"] is False
    assert rejected["gap"] == pytest.approx(1.64e-3, rel=0.01)
    assert list_models(iris_store) == []
    assert not (iris_store / "models" / "wine-cqs-class").exists()  # its name (issue 43)
    # The run still publishes its plot and artifacts, marked as rejected, keyed by the run:
    # the plot is named by the run, so the next rejected run does not overwrite it.
    assert Path(rejected["plot"]).name == f"wine-cqs-rejected-run-{str(run_id)[:8]}.png"
    run_tag = f"wine-cqs-run-{str(run_id)[:8]}"
    assert {f"{run_tag}-{kind}" for kind in ("restarts", "summary", "metrics")} <= {
        a.key for a in _artifacts(run_id)}
    # The API has the same state (what the UI shows and filters on).
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        stored = client.read_flow_run(run_id).state
    assert (stored.type.value, stored.name) == ("FAILED", "Rejected")
    # run_train (what the CLI calls) returns the summary of a rejected model. Issue 43: the
    # rejected fit was kept, so the same policy rejects it again without a refit (it was a
    # second fit, with a plot of its own); it shows the kept fit's plot.
    again = train_mod.run_train(dataset="wine", **kw)
    assert again["version"] is None and again["status"] == "rejected-uncertified"
    assert again["cached"] and again["reused"] == "candidate"
    assert again["plot"] == rejected["plot"] and Path(again["plot"]).is_file()
    assert again["fit_seconds"] == pytest.approx(rejected["fit_seconds"])  # the kept fit's

    allowed = train_mod.train("wine", allow_uncertified=True, **kw)
    assert allowed["status"] == "uncertified-allowed"
    assert allowed["version"] == "wine-cqs-class:v1" and allowed["reused"] == "candidate"
    _, meta = load_model_version(iris_store, "wine-cqs-class")
    assert meta["registration_status"] == "uncertified-allowed"
    assert meta["certified"] is False
    ds = read_dataset(iris_store, "wine")
    assert load_estimator(iris_store, "wine-cqs-class").predict(ds.X).shape == (178,)


def test_cas_has_no_optimality_test_and_is_registered_marked_so(iris_store, dask_scheduler):
    _, train_mod, _ = _flows()
    state = train_mod.train("iris", method="cas", n_restarts=1, store=str(iris_store),
                            scheduler=dask_scheduler, return_state=True)
    assert state.is_completed(), state
    summary = state.result()
    assert summary["status"] == "certificate-not-applicable"
    assert summary["version"] == "iris-cas:v1" and summary["certified"] is False
    assert "not quadratic" in summary["why_not_certified"]
    _, meta = load_model_version(iris_store, "iris-cas")
    assert meta["registration_status"] == "certificate-not-applicable"
    ds = read_dataset(iris_store, "iris")
    assert load_estimator(iris_store, "iris-cas").predict(ds.X).shape == (150,)


# ----------------------------------------------------------------------------- retries
def test_transient_fit_failure_is_retried(iris_store, dask_scheduler, monkeypatch):
    _, train_mod, _ = _flows()
    assert train_mod.fit_restarts.retries >= 1
    state, spy = _train_iris_with_failing_fits(
        iris_store, dask_scheduler, monkeypatch, fail_first=1,
        exc=ConnectionResetError("simulated lost connection to the scheduler"))
    assert state.is_completed(), state
    assert spy.calls == 2 and len(spy.results) == 1
    assert state.result()["version"] == "iris-cqs:v1"
    (run,) = _task_runs(state.state_details.flow_run_id, "fit_restarts",
                        ok=lambda rs: rs[0].state_type.value == "COMPLETED")
    assert run.run_count == 2
    assert [str(v) for v in list_models(iris_store)] == ["iris-cqs:v1"]


def test_permanent_fit_failure_is_not_retried(iris_store, dask_scheduler, monkeypatch):
    """Bad data fails the run at once: a retry cannot fix it (catdask.errors.is_transient)."""
    state, spy = _train_iris_with_failing_fits(
        iris_store, dask_scheduler, monkeypatch, fail_first=5,
        exc=ValueError("Input X contains NaN (simulated bad data)"))
    assert state.is_failed()
    assert spy.calls == 1
    assert list_models(iris_store) == []


def test_transient_and_permanent_errors_are_told_apart():
    from catdask.errors import (
        ChecksumMismatchError,
        DatasetNotFoundError,
        InvalidNameError,
        ParseError,
        ServiceStartError,
        SourceNotFoundError,
        StoreCorruptError,
        StoreWriteError,
        is_transient,
    )

    for exc in (ConnectionResetError(), TimeoutError(), OSError(28, "No space left"),
                StoreWriteError("disk full"), ServiceStartError("port taken"),
                RuntimeError("worker died")):
        assert is_transient(exc), exc
    for exc in (ValueError("NaN"), InvalidNameError("../x"), DatasetNotFoundError("x"),
                SourceNotFoundError("x"), ParseError("line 3"), ChecksumMismatchError("f.data", "ab" * 32, "cd" * 32),
                StoreCorruptError("store/x", "truncated chunk"), PermissionError("read-only")):
        assert not is_transient(exc), exc


# ----------------------------------------------------------------------------- concurrency
def _train_twice_at_once(train_mod, seen=None, **kwargs):
    """Two ``train(**kwargs)`` flows started together in two threads: their summaries, and
    the run log's messages meanwhile (``seen``, a :class:`_Collect`; get_run_logger's logger
    does not propagate)."""
    results, errors = [None, None], []
    barrier = threading.Barrier(2)

    def run(i):
        try:
            barrier.wait(timeout=30)
            results[i] = train_mod.train(**kwargs)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=contextvars.copy_context().run, args=(run, i))
               for i in range(2)]
    seen = seen or _Collect()
    run_logs = logging.getLogger("prefect.flow_runs")
    run_logs.addHandler(seen)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=400)
    finally:
        run_logs.removeHandler(seen)
    assert not any(t.is_alive() for t in threads), "a train flow hung"
    assert errors == []
    return results, seen.messages


class _Collect(logging.Handler):
    """The run log's messages; ``seen[text]`` is set once a message containing ``text``
    arrives."""

    def __init__(self, *texts):
        super().__init__(logging.INFO)
        self.messages: list = []
        self.seen = {text: threading.Event() for text in texts}

    def emit(self, record):
        message = record.getMessage()
        self.messages.append(message)
        for text, event in self.seen.items():
            if text in message:
                event.set()


@pytest.mark.slow
def test_concurrent_train_runs_register_distinct_versions(iris_store, dask_scheduler):
    _, train_mod, _ = _flows()
    # refit: the second run must not take the first one's version from the train cache
    # (which it does once it has waited for the first's training lease).
    results, _ = _train_twice_at_once(train_mod, dataset="iris", method="cqs", n_restarts=2,
                                      store=str(iris_store), scheduler=dask_scheduler,
                                      model_name="shared", refit=True)
    assert sorted(r["version"] for r in results) == ["shared:v1", "shared:v2"]
    versions = list_models(iris_store, "shared")
    assert [(v.version, v.problem) for v in versions] == [(1, None), (2, None)]
    assert versions[0].run_key != versions[1].run_key
    ds = read_dataset(iris_store, "iris")
    p1 = load_estimator(iris_store, "shared", 1).predict(ds.X)
    p2 = load_estimator(iris_store, "shared", 2).predict(ds.X)
    np.testing.assert_array_equal(p1, p2)  # same data and spec: the same model
    _assert_no_temporaries(iris_store)


@pytest.mark.timeout(600)
@pytest.mark.slow
def test_concurrent_train_runs_of_one_model_fit_it_once(iris_store, dask_scheduler,
                                                        monkeypatch):
    """Two runs of the same model at once (a scheduled retrain overlapping a triggered one):
    the second waits for the first's training lease, then finds its version in the train
    cache. Without the lease both looked the cache up before either registered, and both fit."""
    _, train_mod, _ = _flows()
    fit = train_mod.fit_on_dataset
    waiting_text = "is being trained by flow run"
    seen = _Collect(waiting_text)

    def held_fit(*args, **kwargs):
        # The first run's fit goes on once the second run waits for the lease, or after
        # 180 s: then the assertions below say what happened. (A CI run's Prefect server once
        # started the second flow a minute late, its database locked; with a fixed 3 s fit
        # the second run then found the first's version at its first lookup and never
        # waited.) Without the lease both runs get here, after 180 s both fit and register.
        seen.seen[waiting_text].wait(180)
        return fit(*args, **kwargs)

    monkeypatch.setattr(train_mod, "fit_on_dataset", held_fit)
    results, messages = _train_twice_at_once(train_mod, seen=seen, dataset="iris",
                                             method="cqs", n_restarts=2, store=str(iris_store),
                                             scheduler=dask_scheduler, model_name="once")
    assert sorted((r["version"], r["cached"]) for r in results) == [
        ("once:v1", False), ("once:v1", True)]
    assert [v.version for v in list_models(iris_store, "once")] == [1]
    waiting = [m for m in messages if "is being trained by flow run" in m]
    assert waiting and "model once" in waiting[0], "the waiting run did not say for whom"
    _assert_no_temporaries(iris_store)


# ----------------------------------------------------------------------------- crash and rerun
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_train_killed_mid_fit_then_rerun_registers_exactly_once(tmp_path, dask_scheduler,
                                                                 prefect_env):
    """SIGKILL a train flow process while its fit runs on the cluster; rerun with its run_key."""
    _, train_mod, _ = _flows()
    store = tmp_path / "store"
    X, y = make_blobs(n_per_class=1000, n_features=8, n_classes=3, seed=3)
    write_dataset(store, "blobs", X, y)
    # An earlier, unrelated version of the same model.
    earlier = fit_on_dataset(store, "blobs", ModelSpec(n_restarts=1))
    v1 = register_outcome(store, "blobs-model", earlier, status="certified", run_key="earlier")
    v1_meta = load_model_version(store, "blobs-model", 1)[1]

    marker = tmp_path / "fit-started"
    run_key = "crash-test:blobs"
    code = textwrap.dedent(f"""
        import pathlib
        import catdask.orchestration.train as ft

        real_fit = ft.fit_on_dataset
        marker = pathlib.Path({str(marker)!r})

        def slow_fit(*args, **kwargs):
            # Real fits on the cluster, over and over: Dask work is in flight when killed.
            n = 0
            while True:
                n += 1
                marker.write_text(str(n))
                real_fit(*args, **kwargs)

        ft.fit_on_dataset = slow_fit
        ft.train(dataset="blobs", method="cqs", n_restarts=2, store={str(store)!r},
                 scheduler={dask_scheduler!r}, model_name="blobs-model", run_key={run_key!r})
    """)
    log = open(tmp_path / "train.log", "wb")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=prefect_env,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and proc.poll() is None:
            if marker.exists() and int(marker.read_text() or 0) >= 2:
                break  # the fit_restarts task is running and has done real work
            time.sleep(0.1)
        assert proc.poll() is None, (
            "train process exited before it could be killed:\n"
            + (tmp_path / "train.log").read_text(errors="replace")[-3000:]
        )
        assert marker.exists(), "fit never started:\n" + (tmp_path / "train.log").read_text()
        time.sleep(0.3)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()

    assert [str(v) for v in list_models(store)] == ["blobs-model:v1"]  # nothing registered
    # A registration killed after writing its temporary leaves a .tmp- directory; it is
    # never listed and never becomes a version.
    stale = store / "models" / "blobs-model" / ".tmp-v-0123456789abcdef"
    (stale / "junk").mkdir(parents=True)

    rerun = train_mod.train("blobs", method="cqs", n_restarts=2, store=str(store),
                            scheduler=dask_scheduler, model_name="blobs-model", run_key=run_key)
    assert rerun["version"] == "blobs-model:v2" and rerun["status"] == "certified"
    again = train_mod.train("blobs", method="cqs", n_restarts=2, store=str(store),
                            scheduler=dask_scheduler, model_name="blobs-model", run_key=run_key)
    assert again["version"] == "blobs-model:v2"

    listed = list_models(store)
    assert [(str(v), v.problem) for v in listed] == [("blobs-model:v1", None),
                                                      ("blobs-model:v2", None)]
    assert listed[1].run_key == run_key
    assert load_model_version(store, "blobs-model", 1)[1] == v1_meta  # untouched
    assert str(v1) == "blobs-model:v1"
    for v in (1, 2):
        assert load_estimator(store, "blobs-model", v).predict(X[:10]).shape == (10,)


# ----------------------------------------------------------------------------- failure paths
@pytest.mark.parametrize("damage", ["truncated", "byte-flipped"])
def test_ingest_refuses_a_damaged_source_file_by_checksum(tmp_path, shared_dir, monkeypatch,
                                                          damage):
    ingest_mod, _, _ = _flows()
    monkeypatch.delenv("CATDASK_SOURCE_DIR", raising=False)
    src = _seeds_source(shared_dir)
    data = bytearray(src.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:
        i = data.index(b"\t") - 1  # a digit of the first value
        data[i] = ord("9") if data[i] != ord("9") else ord("8")
    (tmp_path / SEEDS_FILE).write_bytes(bytes(data))
    store = tmp_path / "store"

    exc, run_id = _run_failing_flow(ingest_mod.ingest, ["seeds"], store=str(store),
                                    source_dir=str(tmp_path))
    assert isinstance(exc, ChecksumMismatchError)
    assert exc.path == str(tmp_path / SEEDS_FILE)
    assert "sha256 mismatch" in str(exc) and SEEDS_FILE in str(exc)
    assert not (store / "datasets" / "seeds").exists()
    _assert_no_temporaries(store)
    # Bad data is not transient: no retries.
    (run,) = _task_runs(run_id, "ingest_one", ok=lambda rs: rs[0].state_type.value == "FAILED")
    assert run.run_count == 1


@pytest.mark.parametrize("damage, expect", [
    ("truncated-mid-row", "line 105"),
    ("non-numeric", "line 3"),
])
def test_ingest_reports_unparseable_source_file(tmp_path, shared_dir, monkeypatch, damage,
                                                expect):
    """With no recorded checksum, a damaged file fails in the parser, naming file and line."""
    ingest_mod, _, _ = _flows()
    from catdask.catalog import DEFAULT_CATALOG

    monkeypatch.delenv("CATDASK_SOURCE_DIR", raising=False)
    catalog = json.loads(DEFAULT_CATALOG.read_text())
    for entry in catalog["datasets"]:
        for f in entry["source"].get("files", []):
            f["sha256"] = None
    (tmp_path / "catalog.json").write_text(json.dumps(catalog))
    monkeypatch.setenv("CATDASK_CATALOG", str(tmp_path / "catalog.json"))

    lines = _seeds_source(shared_dir).read_text().splitlines(keepends=True)
    if damage == "truncated-mid-row":
        text = "".join(lines[:104]) + lines[104][:8]
    else:
        cells = lines[2].split("\t")
        cells[1] = "abc"
        text = "".join(lines[:2]) + "\t".join(cells) + "".join(lines[3:])
    (tmp_path / SEEDS_FILE).write_text(text)
    store = tmp_path / "store"

    exc, _ = _run_failing_flow(ingest_mod.ingest, ["seeds"], store=str(store),
                               source_dir=str(tmp_path))
    assert isinstance(exc, ParseError), repr(exc)
    assert SEEDS_FILE in str(exc) and expect in str(exc), str(exc)
    assert _store_snapshot(store) <= {"datasets"}  # at most the empty parent
    _assert_no_temporaries(store)


def test_ingest_unknown_dataset_names_the_known_ones(tmp_path):
    ingest_mod, _, _ = _flows()
    store = tmp_path / "store"
    exc, _ = _run_failing_flow(ingest_mod.ingest, ["no-such-data"], store=str(store))
    assert isinstance(exc, DatasetNotFoundError)
    assert "'no-such-data'" in str(exc) and "iris" in str(exc) and "wine" in str(exc)
    assert not store.exists()


def test_train_on_missing_store_or_dataset(tmp_path, dask_scheduler):
    _, train_mod, _ = _flows()
    missing = tmp_path / "no-store"
    exc, run_id = _run_failing_flow(train_mod.train, "iris", store=str(missing),
                                    scheduler=dask_scheduler)
    assert isinstance(exc, DatasetNotFoundError)
    assert "No data set 'iris'" in str(exc) and "catdask ingest iris" in str(exc)
    assert not missing.exists()  # a failed run creates nothing
    # The first task fails (the cache lookup, which reads the store first), once: a missing
    # data set is not transient and must not be retried; describe_dataset never runs.
    (run,) = _task_runs(run_id, "find_registered",
                        ok=lambda rs: rs[0].state_type.value == "FAILED")
    assert run.run_count == 1, "a missing data set is not transient and must not be retried"
    assert _task_runs(run_id, "describe_dataset", min_runs=0, timeout=0) == []

    store = tmp_path / "store"
    ingest_dataset("wine", store)
    before = _store_snapshot(store)
    exc, _ = _run_failing_flow(train_mod.train, "iris", store=str(store),
                               scheduler=dask_scheduler)
    assert isinstance(exc, DatasetNotFoundError)
    assert "stored: wine" in str(exc)
    assert _store_snapshot(store) == before


@pytest.mark.parametrize("kwargs, expect", [
    ({"dataset": "../iris"}, "Invalid data set name '../iris'"),
    ({"dataset": "iris", "model_name": "../../evil"}, "Invalid model name '../../evil'"),
    ({"dataset": "iris", "model_name": "a/b"}, "path separator"),
    ({"dataset": "iris", "model_name": "x" * 70}, "at most 64"),
])
def test_train_refuses_unsafe_names_before_fitting(iris_store, dask_scheduler, monkeypatch,
                                                   kwargs, expect):
    from catdask.errors import InvalidNameError

    _, train_mod, _ = _flows()
    spy = _Spy(train_mod.fit_on_dataset)
    monkeypatch.setattr(train_mod, "fit_on_dataset", spy)
    before = _store_snapshot(iris_store)
    exc, _ = _run_failing_flow(train_mod.train, store=str(iris_store), scheduler=dask_scheduler,
                               **kwargs)
    assert isinstance(exc, InvalidNameError) and expect in str(exc), str(exc)
    assert spy.calls == 0  # refused before the cluster is used
    assert _store_snapshot(iris_store) == before
    assert not (iris_store.parent / "evil").exists()


def _corrupt_chunk(entry: Path):
    chunk = next(p for p in sorted((entry / "X").rglob("*")) if p.is_file()
                 and p.name != "zarr.json")
    raw = bytearray(chunk.read_bytes())
    chunk.write_bytes(bytes(raw[: len(raw) // 2]))  # truncated: does not decompress


def _flip_chunk_bytes(entry: Path):
    """Re-encode X's chunk with one value changed (valid zstd, wrong content)."""
    import zarr

    arr = zarr.open_array(str(entry / "X"), mode="r+")
    arr[0, 0] = arr[0, 0] + 1.0


def _remove_chunk(entry: Path):
    chunk = next(p for p in sorted((entry / "y").rglob("*")) if p.is_file()
                 and p.name != "zarr.json")
    chunk.unlink()


def _edit_attributes(entry: Path):
    path = entry / "zarr.json"
    meta = json.loads(path.read_text())
    meta["attributes"]["label_names"][0] = "edited-by-hand"
    path.write_text(json.dumps(meta))


@pytest.mark.parametrize("damage, expect", [
    (_corrupt_chunk, "cannot be read"),
    (_flip_chunk_bytes, "content checksum mismatch"),
    (_remove_chunk, "missing"),
    (_edit_attributes, "attributes were modified"),
], ids=["truncated-chunk", "modified-chunk", "missing-chunk", "edited-attributes"])
def test_train_refuses_a_corrupt_stored_dataset(iris_store, dask_scheduler, damage, expect):
    _, train_mod, _ = _flows()
    damage(iris_store / "datasets" / "iris" / "s1")  # the current snapshot
    before = _store_snapshot(iris_store)
    exc, run_id = _run_failing_flow(train_mod.train, "iris", store=str(iris_store),
                                    scheduler=dask_scheduler)
    assert isinstance(exc, StoreCorruptError), repr(exc)
    assert exc.path == str(iris_store / "datasets" / "iris" / "s1")  # names the snapshot
    assert expect in str(exc), str(exc)
    assert _store_snapshot(iris_store) == before  # no model, no plot, no temporaries
    assert list_models(iris_store) == []
    (run,) = _task_runs(run_id, "describe_dataset",
                        ok=lambda rs: rs[0].state_type.value == "FAILED")
    assert run.run_count == 1, "a corrupt store is not transient and must not be retried"


def test_corrupt_registered_model_is_refused_on_load(trained, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(trained["store"], store)
    version_dir = store / "models" / "iris-cqs" / "v1"
    path = version_dir / "zarr.json"
    meta = json.loads(path.read_text())
    meta["attributes"]["meta"]["registration_status"] = "certified-by-hand"
    path.write_text(json.dumps(meta))
    with pytest.raises(StoreCorruptError, match="modified after registration"):
        load_estimator(store, "iris-cqs")
    with pytest.raises(StoreCorruptError, match="modified after registration"):
        load_model_version(store, "iris-cqs", 1)


# ----------------------------------------------------------------------------- evaluate
@pytest.mark.timeout(240)
@pytest.mark.slow
def test_evaluate_quick_writes_tables_and_artifact(tmp_path):
    ingest_mod, _, evaluate_mod = _flows()
    store, out = tmp_path / "store", tmp_path / "results"
    ingest_mod.ingest(["iris", "wine"], store=str(store))
    # Quick mode (two data sets, two splits); one table keeps it to seconds (the kernel
    # tables take minutes on two cores).
    state = evaluate_mod.evaluate(tables=["table1"], quick=True, store=str(store),
                                  out_dir=str(out), return_state=True)
    assert state.is_completed(), state
    (res,) = state.result()
    assert res["table"] == "table1" and res["skipped"] == {}
    for kind in ("csv", "md", "json"):
        path = Path(res["files"][kind])
        assert path.parent == out and path.is_file() and path.stat().st_size > 0
    table = json.loads(Path(res["files"]["json"]).read_text())
    text = json.dumps(table)
    assert "iris" in text and "wine" in text
    (art,) = _artifacts(state.state_details.flow_run_id, "evaluation-table1")
    assert art.type == "markdown" and "Table 1" in art.data
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        run = client.read_flow_run(state.state_details.flow_run_id)
    assert run.name == "evaluate-table1-stored-quick"


def test_evaluate_without_out_dir_writes_into_the_store_not_the_working_folder(
        tmp_path, monkeypatch):
    """A served weekly evaluation passes no out_dir: its tables go to
    ``<store>/evaluations/<UTC time>`` (as `catdask evaluate`), not ``./docs/results`` of
    whatever folder `catdask serve` was started in."""
    _, _, evaluate_mod = _flows()
    store, cwd = tmp_path / "store", tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    written = []
    monkeypatch.setattr(evaluate_mod, "run_table",
                        lambda key, datasets, n_splits, store, out_dir: written.append(out_dir))
    evaluate_mod.evaluate(datasets=[], tables=["table1"], store=str(store))
    [out_dir] = written
    assert Path(out_dir).parent == store.resolve() / "evaluations", out_dir
    assert list(cwd.iterdir()) == []


# ----------------------------------------------------------------------------- progress, keys
def test_solver_progress_is_in_the_task_log_and_a_progress_artifact(iris_store, dask_scheduler,
                                                                    monkeypatch):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    _, train_mod, _ = _flows()
    # Every fit is "long" here, so the progress artifact is published for iris too.
    monkeypatch.setattr(train_mod, "PROGRESS_ARTIFACT_AFTER_SECONDS", 0.0)
    state = train_mod.train("iris", n_restarts=3, store=str(iris_store),
                            scheduler=dask_scheduler, return_state=True)
    assert state.is_completed(), state
    run_id = state.state_details.flow_run_id

    def logs():
        with get_client(sync_client=True) as client:
            return [log.message for log in client.read_logs(
                LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])))]

    messages = _wait_for(logs, lambda ms: any("0 of 3 restarts active" in m for m in ms))
    solver = [m for m in messages if m.startswith("solver loop 1, iteration ")]
    assert solver and "iteration 1: best objective" in solver[0], messages
    assert "3 of 3 restarts active" in solver[0] and "0 of 3 restarts active" in solver[-1]
    key = f"iris-cqs-run-{str(run_id)[:8]}-progress"
    (progress,) = _wait_for(lambda: _artifacts(run_id, key), lambda a: len(a) == 1)
    assert progress.type == "progress" and float(progress.data) == 100.0
    assert "CQS on iris" in progress.description and "0 of 3 restarts active" in \
        progress.description
    # ... and then the test's outcome, the last stage (not "testing restart ...").
    assert re.search(r"restarts active; global-optimality test: certified global optimum "
                     r"\(sdp-dual; verified gap <= \d\.\de-\d+\)$", progress.description), \
        progress.description
    # The model's fit only: the training metrics' CV folds ran three more solver loops, and the
    # artifact ended on the last fold's objective instead of the model's.
    assert not any(m.startswith("solver loop 2") for m in messages), messages
    assert progress.description.startswith("CQS on iris, 3 restarts: solver loop 1, ")
    objective = state.result()["objective"]
    assert f"best objective {objective:.10g}, 0 of 3" in progress.description


def test_solver_progress_throttles_logs_and_artifact_updates(monkeypatch):
    """Fake clock: one log line per interval (plus first and last), no artifact for a short
    fit, then create once and update; a failing artifact API never fails the fit."""
    import prefect.artifacts as pa

    from catdask.orchestration.artifacts import SolverProgress

    class Log:
        def __init__(self):
            self.lines = []

        def info(self, msg, *args):
            self.lines.append(msg % args if args else msg)

        warning = info

    now = [0.0]
    calls = []
    monkeypatch.setattr(pa, "create_progress_artifact",
                        lambda p, key, description: calls.append(("create", p)) or "id-1")
    monkeypatch.setattr(pa, "update_progress_artifact",
                        lambda i, p, description: calls.append(("update", p)))
    log = Log()
    reporter = SolverProgress(log, key="k", description="d", log_every_seconds=5,
                              artifact_after_seconds=3, update_every_seconds=2,
                              clock=lambda: now[0])
    objective = np.array([1.0, 2.0])
    for it in range(1, 11):  # one iteration per second, the second restart stops at 10
        now[0] = float(it)
        reporter(it, objective, None, np.array([it < 6, it < 10]))
    assert [line.split(":")[0] for line in log.lines] == [
        "solver loop 1, iteration 1", "solver loop 1, iteration 6", "solver loop 1, iteration 10"]
    assert "best objective 2, 0 of 2 restarts active" in log.lines[-1]
    assert calls == [("create", 0.0), ("update", 0.0), ("update", 50.0), ("update", 50.0),
                     ("update", 100.0)]
    reporter(1, objective, None, np.array([True, True]))  # a second solver loop
    assert log.lines[-1].startswith("solver loop 2, iteration 1")
    n_calls = len(calls)
    reporter.stage("testing restart 1 (the best) for global optimality")  # report_stage
    assert log.lines[-1] == "testing restart 1 (the best) for global optimality"
    assert calls[n_calls:] == [("update", 100.0)]

    def broken(*a, **k):
        raise ConnectionError("API gone")

    monkeypatch.setattr(pa, "update_progress_artifact", broken)
    now[0] = 100.0
    reporter(2, objective, None, np.array([False, False]))
    now[0] = 200.0
    reporter(3, objective, None, np.array([False, False]))
    assert sum("not updated" in line for line in log.lines) == 1


@pytest.mark.parametrize("args, kw, expect", [
    (("summary", "iris", "cqs"), {"version": "iris-cqs:v1"}, "iris-cqs-v1-summary"),
    (("restarts", "iris", "kcqs"), {"version": "shared:v12"}, "iris-kcqs-shared-v12-restarts"),
    (("metrics", "Wine_Quality", "cas"), {"run_id": "1A2B3C4D-ffff"}, "wine-quality-cas-run-1a2b3c4d-metrics"),
])
def test_model_artifact_keys_follow_prefect_key_rules(args, kw, expect):
    import re

    from catdask.orchestration.artifacts import artifact_slug, model_artifact_key

    key = model_artifact_key(*args, **kw)
    assert key == expect and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", key)
    with pytest.raises(ValueError, match="version or the flow run id"):
        model_artifact_key("summary", "iris", "cqs")
    with pytest.raises(ValueError, match="no letter or digit"):
        artifact_slug(":::")
