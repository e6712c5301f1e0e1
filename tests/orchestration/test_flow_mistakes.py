"""Mistakes in a run started from Prefect (the UI's Run form, ``prefect deployment run``): the
flow run fails before the cluster is used, with a message that names the problem in the flow's
own parameter names."""

from __future__ import annotations

import pytest

from .test_flows import _flows, _run_failing_flow, _Spy, _store_snapshot

pytestmark = [pytest.mark.usefixtures("prefect_api")]


def test_a_linear_method_on_more_classes_than_features_fails_before_the_fit(
        tmp_path, dask_scheduler, monkeypatch):
    """Was: "... Use KernelCategorySpace instead." from inside the fit task, after the
    cluster had started."""
    from catdask.pipeline import ingest_file

    table = tmp_path / "k3d2.csv"
    table.write_text("a,b,label\n0,1,x\n1,2,y\n2,0,z\n1,1,x\n2,2,y\n0,2,z\n")
    store = tmp_path / "store"
    ingest_file(table, "k3d2", "label", store)
    _, train_mod, _ = _flows()
    spy = _Spy(train_mod.fit_on_dataset)
    monkeypatch.setattr(train_mod, "fit_on_dataset", spy)
    before = _store_snapshot(store)
    exc, _ = _run_failing_flow(train_mod.train, "k3d2", store=str(store),
                               scheduler=dask_scheduler)
    assert isinstance(exc, ValueError)
    assert str(exc).startswith("method 'cqs' needs at most as many classes as features, and "
                               "data set 'k3d2' has K = 3 classes and D = 2 features"), str(exc)
    assert "use a kernel method ('kcqs' or 'kcas')" in str(exc)
    assert spy.calls == 0 and _store_snapshot(store) == before


def test_a_data_set_not_in_the_store_fails_in_the_cache_lookup(iris_store, monkeypatch):
    """The run fails at its first task with the store's message (stored names, the closest
    one); was: "cache lookup skipped (No data set 'irs' ...): fitting" in the log, then the same
    error from the next task."""
    _, train_mod, _ = _flows()
    spy = _Spy(train_mod.read_dataset)
    monkeypatch.setattr(train_mod, "read_dataset", spy)
    exc, _ = _run_failing_flow(train_mod.train, "irs", store=str(iris_store))
    assert type(exc).__name__ == "DatasetNotFoundError"
    assert str(exc).strip('"') == (f"No data set 'irs' in store {iris_store} (stored: iris); "
                                   "did you mean 'iris'?"), str(exc)
    assert spy.calls == 0  # describe_dataset never ran
