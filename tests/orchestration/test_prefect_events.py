"""Prefect as users expect it (issue 28 item 4), against the session's real Prefect API:

- a repeated train of the same data set and spec is a ``Cached`` run that fits nothing and
  returns the same version;
- the flows' events (snapshot created, model registered, model rejected) are read back
  through the API, with the resources and payloads automations match on;
- emitting never fails a run, with or without an API;
- the retrain a new snapshot triggers retrains only that data set's models.

The trigger under ``catdask serve`` runs in tests/test_serve_trigger.py (slow).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("prefect")
pytest.importorskip("distributed")

from catdask.store import list_models, resolve_store, write_dataset  # noqa: E402

from tests.helpers.data import make_blobs  # noqa: E402
from tests.helpers.paths import REPO  # noqa: E402

pytestmark = [
    pytest.mark.usefixtures("prefect_api"),
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]


def _train_module():
    from catdask.orchestration import train

    return train


def _events(name, store, *, expect=1, timeout=60.0):
    """The events called ``name`` of ``store`` (label ``catdask.store``), read back from the
    API once ``expect`` arrived (events are sent in the background and persisted in batches)."""
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter
    from prefect.events.schemas.events import ResourceSpecification
    from prefect.events.worker import EventsWorker

    EventsWorker.drain_all(timeout=10)
    flt = EventFilter(event=EventNameFilter(name=[name]), resource=EventResourceFilter(
        labels=ResourceSpecification({"catdask.store": str(resolve_store(store))})))
    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            found = client.read_events(filter=flt, limit=50).events
            if len(found) >= expect or time.monotonic() > deadline:
                return found
            time.sleep(0.5)


@pytest.mark.slow
def test_a_repeated_train_is_a_cached_run_that_fits_nothing(iris_store, dask_scheduler,
                                                           monkeypatch):
    train_mod = _train_module()
    kw = dict(method="cqs", n_restarts=2, store=str(iris_store), scheduler=dask_scheduler)
    first = train_mod.train("iris", **kw)
    assert first["version"] == "iris-cqs:v1" and first["cached"] is False

    def no_fit(*args, **kwargs):
        raise AssertionError("a cached train fitted again")

    monkeypatch.setattr(train_mod, "fit_on_dataset", no_fit)
    state = train_mod.train("iris", return_state=True, **kw)
    assert state.is_completed() and state.name == train_mod.CACHED_STATE_NAME, state
    assert "not refitted" in state.message
    again = state.result()
    assert again["version"] == "iris-cqs:v1" and again["cached"] is True
    for key in ("status", "certified", "objective", "n_iter", "metrics", "plot"):
        assert again[key] == first[key], key
    assert [str(v) for v in list_models(iris_store)] == ["iris-cqs:v1"]

    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        run = client.read_flow_run(state.state_details.flow_run_id)
    assert (run.state.type.value, run.state.name) == ("COMPLETED", "Cached")  # what the UI shows
    print(f"\ncached train run: {run.total_run_time.total_seconds():.2f} s of flow time")
    # Only the registration of v1 emitted a model event: a cached run registers nothing.
    [registered] = _events("catdask.model.registered", iris_store)
    assert registered.resource.id == "catdask.model.iris-cqs"
    assert registered.resource["catdask.version"] == "v1"
    assert registered.payload["version"] == "iris-cqs:v1"
    assert registered.payload["status"] == "certified" and registered.payload["certified"] is True
    meta = list_models(iris_store)[0].meta
    assert registered.payload["dataset_sha256"] == meta["dataset_sha256"]
    assert registered.payload["dataset_snapshot"] == meta["dataset_snapshot"]
    assert registered.payload["spec"] == meta["spec"]
    [dataset] = [r for r in registered.related if r.role == "dataset"]
    assert dataset.id == "catdask.dataset.iris"


@pytest.mark.slow
def test_ingest_emits_snapshot_created_for_a_new_snapshot_only(tmp_path):
    from catdask.orchestration.ingest import ingest

    store = tmp_path / "store"
    [report] = ingest(["iris"], store=str(store))
    assert report["written"] is True
    [again] = ingest(["iris"], store=str(store))
    assert again["written"] is False  # unchanged content: no event
    found = _events("catdask.snapshot.created", store, expect=2, timeout=10)
    assert len(found) == 1, [e.payload for e in found]
    [event] = found
    assert event.resource.id == "catdask.dataset.iris"
    assert event.resource["catdask.dataset"] == "iris"
    assert event.payload["content_sha256"] == report["content_sha256"]
    assert event.payload["snapshot"] == report["snapshot"]
    assert event.payload["n_samples"] == 150


@pytest.mark.slow
def test_a_rejected_model_emits_model_rejected(iris_store, dask_scheduler, monkeypatch):
    train_mod = _train_module()
    monkeypatch.setattr(train_mod, "registration_decision",
                        lambda outcome, allow_uncertified, max_gap=None: (False, "rejected-uncertified"))
    summary = train_mod.run_train(dataset="iris", method="cqs", n_restarts=1,
                                  store=str(iris_store), scheduler=dask_scheduler)
    assert summary["version"] is None
    [event] = _events("catdask.model.rejected", iris_store)
    assert event.resource.id == "catdask.model.iris-cqs"
    assert "catdask.version" not in event.resource
    assert event.payload["status"] == "rejected-uncertified" and event.payload["version"] is None
    assert event.payload["dataset"] == "iris" and len(event.payload["dataset_sha256"]) == 64
    assert _events("catdask.model.registered", iris_store, expect=1, timeout=3) == []


def test_events_never_fail_a_run(tmp_path, monkeypatch):
    """An error while emitting is logged and the run goes on; without an API nothing is sent."""
    import prefect.events

    from catdask.orchestration import events
    from catdask.orchestration.ingest import ingest

    def broken(**kwargs):
        raise RuntimeError("events API down")

    monkeypatch.setattr(prefect.events, "emit_event", broken)
    [report] = ingest(["iris"], store=str(tmp_path / "a"))
    assert report["written"] is True
    monkeypatch.undo()
    # Without an API: nothing sent, and no ephemeral Prefect server started for it (Prefect
    # would start one, 30 s under load, and print a traceback when it timed out).
    home = tmp_path / "prefect-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    code = ("from catdask.orchestration import events; import json, sys; "
            "print(events.emit_snapshot_event(json.loads(sys.argv[1]), sys.argv[2]))")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(report), str(tmp_path / "a")],
                         env={**env, "PREFECT_HOME": str(home)}, cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert (out.returncode, out.stdout.strip(), out.stderr) == (0, "None", "")
    assert not (home / "prefect.db").exists()
    assert events.snapshot_event_name({"written": False, "replaced": True}) == \
        events.SNAPSHOT_REUSED  # a re-ingest that points at a stored snapshot again
    assert events.snapshot_event_name({"written": False, "replaced": False}) is None


@pytest.mark.slow
def test_the_retrain_of_one_data_set_retrains_only_its_models(iris_store, dask_scheduler):
    train_mod = _train_module()
    X, y = make_blobs()
    write_dataset(iris_store, "blobs", X, y)
    kw = dict(method="cqs", n_restarts=1, store=str(iris_store), scheduler=dask_scheduler)
    train_mod.train("iris", **kw)
    train_mod.train("blobs", **kw)
    # New content for blobs: its model is fitted again, iris's is not touched.
    write_dataset(iris_store, "blobs", X * 3.0, y, replace=True)
    state = train_mod.retrain_registered(store=str(iris_store), scheduler=dask_scheduler,
                                         dataset="blobs", return_state=True)
    results = state.result()
    assert [(r["dataset"], r["version"], r["cached"]) for r in results] == [
        ("blobs", "blobs-cqs:v2", False)]
    assert [str(v) for v in list_models(iris_store)] == ["blobs-cqs:v1", "blobs-cqs:v2",
                                                          "iris-cqs:v1"]
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        run = client.read_flow_run(state.state_details.flow_run_id)
    assert run.name.startswith("retrain-blobs-20"), run.name


def test_ingest_into_another_store_is_not_this_store_s_event(tmp_path):
    """Resources carry the store: a trigger of one served store ignores another's snapshots."""
    from catdask.orchestration.events import dataset_resource, retrain_trigger

    a, b = tmp_path / "a", tmp_path / "b"
    trigger = retrain_trigger(a)
    assert trigger.match.matches(_resource(dataset_resource("iris", a)))
    assert not trigger.match.matches(_resource(dataset_resource("iris", b)))
    assert trigger.expect == {"catdask.snapshot.created", "catdask.snapshot.reused"}
    assert trigger.parameters == {"dataset": "{{ event.resource['catdask.dataset'] }}"}


def _resource(labels):
    from prefect.events.schemas.events import Resource

    return Resource(labels)
