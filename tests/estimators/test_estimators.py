"""The scikit-learn API: fitted attributes, labels, pipelines, search, determinism, export."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

from catdask import CategorySpace, KernelCategorySpace
from catdask.model_io import export_model, import_model

from tests.helpers.data import make_blobs


@pytest.fixture(params=["linear", "kernel"])
def estimator(request):
    if request.param == "linear":
        return CategorySpace(n_restarts=2, random_state=0)
    return KernelCategorySpace(gamma=0.1, n_restarts=2, random_state=0)


def test_string_noncontiguous_unsorted_labels(estimator):
    X, y = make_blobs(seed=1)
    names = np.array(["zebra", "apple", "mango"])[y]
    est = estimator.fit(X, names)
    assert est.classes_.tolist() == ["apple", "mango", "zebra"]
    assert set(est.predict(X)) <= set(est.classes_)
    y_int = np.array([10, -3, 7])[y]
    est2 = type(estimator)(**estimator.get_params()).fit(X, y_int)
    np.testing.assert_array_equal(est2.classes_, [-3, 7, 10])
    # axis k belongs to classes_[k]: relabelling permutes the axes, not the geometry
    np.testing.assert_allclose(np.sort(np.abs(est.transform(X)), axis=1),
                               np.sort(np.abs(est2.transform(X)), axis=1), atol=1e-6)


def test_fitted_attributes_and_restart_records(estimator):
    X, y = make_blobs(seed=2)
    est = estimator.fit(X, y)
    assert est.transform(X).shape == (len(X), 3)
    assert len(est.restarts_) == 2
    rec = est.restarts_[0].to_dict()
    assert {"objective", "n_iter", "converged", "certified", "gap"} <= set(rec)
    assert est.objective_ == max(r.objective for r in est.restarts_)
    assert est.converged_ and est.n_iter_ > 0
    # One name per class axis, as `catdask predict` names them (was "categoryspace0", ...).
    assert est.get_feature_names_out().tolist() == [f"axis_{c}" for c in est.classes_]


def test_sign_convention_each_class_positive_on_its_axis(estimator):
    X, y = make_blobs(seed=3)
    P = estimator.fit(X, y).transform(X)
    P = P - P.mean(axis=0)  # measured from the training centroid
    for k in range(3):
        assert P[y == k, k].mean() >= 0


def test_deterministic_given_random_state(estimator):
    X, y = make_blobs(seed=4)
    a = type(estimator)(**estimator.get_params()).fit(X, y).transform(X)
    b = type(estimator)(**estimator.get_params()).fit(X, y).transform(X)
    np.testing.assert_array_equal(a, b)


def test_pipeline_and_grid_search():
    X, y = load_iris(return_X_y=True)
    pipe = make_pipeline(StandardScaler(), CategorySpace(origin="global", n_restarts=1), LinearSVC())
    search = GridSearchCV(pipe, {"categoryspace__objective": ["quadratic", "absolute"]}, cv=3)
    search.fit(X, y)
    assert search.best_score_ > 0.85
    kpipe = make_pipeline(StandardScaler(), KernelCategorySpace(n_restarts=1, origin="global"))
    ks = GridSearchCV(kpipe, {"kernelcategoryspace__gamma": [0.05, 0.5]}, cv=3).fit(X, y)
    assert ks.best_score_ > 0.6  # the angle classifier is the scorer here


def test_global_origin_beats_class_origin_on_wine():
    """docs/design.md §3b: about 77% (class) vs 96% (global) with a linear SVM on standardised wine."""
    from sklearn.datasets import load_wine
    from sklearn.model_selection import cross_val_score

    X, y = load_wine(return_X_y=True)
    acc = {}
    for origin in ("class", "global"):
        pipe = make_pipeline(StandardScaler(), CategorySpace(origin=origin, n_restarts=3, random_state=0), LinearSVC())
        acc[origin] = cross_val_score(pipe, X, y, cv=3).mean()
    assert acc["global"] > 0.9
    assert acc["global"] > acc["class"] + 0.05


@pytest.mark.parametrize("kind", ["linear", "kernel"])
def test_export_import_round_trip(kind):
    X, y = make_blobs(seed=5)
    est = (CategorySpace(n_restarts=2, random_state=0) if kind == "linear"
           else KernelCategorySpace(gamma=0.1, n_restarts=2, random_state=0)).fit(X, np.array(["a", "b", "c"])[y])
    arrays, meta = export_model(est)
    import json

    meta2 = json.loads(json.dumps(meta))  # must be JSON-serialisable
    assert all(a.dtype.kind == "f" for a in arrays.values())
    back = import_model(arrays, meta2)
    np.testing.assert_allclose(back.transform(X), est.transform(X), rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    assert back.certificate_.certified == est.certificate_.certified


def test_convergence_warning_when_max_iter_is_hit():
    X, y = make_blobs(seed=6)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        est = CategorySpace(max_iter=2, n_restarts=1, init="random", random_state=0).fit(X, y)
    assert not est.converged_ and est.stopping_reason_ == "max_iter"


def test_verbose_reports_the_fit(estimator, caplog):
    """verbose=1 showed nothing: the records were INFO, below Python's default level."""
    X, y = make_blobs(seed=6)
    estimator.set_params(verbose=1, certify_at="fit").fit(X, y)
    summary = [r.getMessage() for r in caplog.records if "best of 2 restarts" in r.getMessage()]
    assert len(summary) == 1
    assert type(estimator).__name__ in summary[0] and "certificate: Certificate(" in summary[0]
    assert logging.getLogger("catdask").level == logging.NOTSET  # restored after the fit
    caplog.clear()
    # The test on first access (issue 26): the fit says so, the access reports it.
    estimator.set_params(certify_at="access").fit(X, y)
    summary = [r.getMessage() for r in caplog.records if "best of 2 restarts" in r.getMessage()]
    assert len(summary) == 1 and "certificate: pending" in summary[0]
    caplog.clear()
    estimator.certificate_
    assert [r.getMessage() for r in caplog.records if "on first access): Certificate(" in
            r.getMessage()]
    assert logging.getLogger("catdask").level == logging.NOTSET
    caplog.clear()
    estimator.set_params(verbose=0).fit(X, y)
    assert not caplog.records


def test_verbose_prints_to_stderr_when_logging_is_not_configured(monkeypatch, capsys):
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # a plain script: no handlers
    X, y = make_blobs(seed=6)
    CategorySpace(n_restarts=1, verbose=1).fit(X, y)
    err = capsys.readouterr().err
    assert "[catdask] CategorySpace: best of 1 restarts" in err
    assert not logging.getLogger("catdask").handlers  # removed after the fit
    CategorySpace(n_restarts=1).fit(X, y)
    assert capsys.readouterr().err == ""


def test_rank_deficient_data_stops_and_warns():
    """rank(X_c) < K: the polar factor is not unique, W rotates on a flat objective."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 10)
    X = rng.standard_normal((40, 2)) @ rng.standard_normal((2, 6))  # rank 2 < K = 4
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = CategorySpace(n_restarts=2, max_iter=5000, random_state=0).fit(X, y)
    assert est.n_iter_ < 5000
    if not est.converged_:
        assert any(issubclass(w.category, ConvergenceWarning) for w in caught)
        assert est.stopping_reason_ in ("rank-deficient", "objective-stalled")


def test_certificate_not_applicable_for_cas():
    X, y = make_blobs(seed=7)
    est = CategorySpace("absolute", n_restarts=1).fit(X, y)
    assert not est.certificate_.certified and not est.certificate_.applicable
