"""The certificate test on first access (issue 26): ``certify_at="access"`` (the default).

A fit chooses its restart exactly as before and keeps what the test needs; the test runs on
first access of ``certificate_`` or ``restarts_`` (or when the model is pickled or saved), gives
the certificate the eager test (``certify_at="fit"``) gives, and releases what it kept. A fit
whose certificate nobody reads (a grid search's folds) never runs it.
"""

from __future__ import annotations

import dataclasses
import gc
import pickle
import re
import weakref

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_wine
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import StandardScaler

from catdask import CategorySpace, KernelCategorySpace
from catdask.certificate import certifiers
from catdask.core.engine import RestartCertification, SolverOptions, Starts, fit_restarts
from catdask.core.manifold import random_stiefel
from catdask.core.problems import ClassMatrixProblem
from catdask.core.solver import RestartResult
from catdask.model_io import export_model, import_model

from tests.helpers.data import make_blobs


@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _timeless(cert):
    """A certificate without its wall times (``seconds``, and the ones its reason quotes)."""
    return dataclasses.replace(cert, seconds=0.0,
                               reason=re.sub(r"\d+(\.\d+)? s\b", "# s", cert.reason))


def _assert_same_certificates(lazy, eager):
    assert _timeless(lazy.certificate_) == _timeless(eager.certificate_)
    assert len(lazy.restarts_) == len(eager.restarts_)
    for a, b in zip(lazy.restarts_, eager.restarts_):
        assert (a.index, a.start, a.objective, a.n_iter) == (b.index, b.start, b.objective, b.n_iter)
        assert _timeless(a.certificate) == _timeless(b.certificate)


def _pending(est):
    return "_certification" in vars(est) and "certificate_" not in vars(est)


CASES = [
    (CategorySpace, dict(origin="global")),
    (CategorySpace, dict(origin="class")),  # not certified: a gap, the same one
    (KernelCategorySpace, dict(origin="global")),  # stored G
    (KernelCategorySpace, dict(origin="class")),  # not certified: a gap
    (KernelCategorySpace, dict(origin="global", max_gram_bytes=0)),  # recomputed float32 tiles
    (KernelCategorySpace, dict(approximation="nystroem", n_landmarks=60)),  # a linear fit inside
]


@pytest.mark.parametrize("cls, params", CASES)
def test_lazy_certificate_is_the_eager_one(wine, cls, params):
    X, y = wine
    lazy = cls(n_restarts=3, random_state=0, **params).fit(X, y)
    assert lazy.certify_at == "access" and _pending(lazy)
    assert "restarts_" not in vars(lazy)
    pending = vars(lazy)["_certification"]
    held = weakref.ref(pending._certifier)  # the kernel one holds the Gram operator
    eager = cls(n_restarts=3, random_state=0, certify_at="fit", **params).fit(X, y)
    assert "certificate_" in vars(eager) and "_certification" not in vars(eager)
    # The fit itself is the same: the same choice, the same axes.
    assert lazy.best_restart_ == eager.best_restart_ and lazy.objective_ == eager.objective_
    coef = "components_" if cls is CategorySpace else "dual_coef_"
    np.testing.assert_array_equal(getattr(lazy, coef), getattr(eager, coef))
    _assert_same_certificates(lazy, eager)
    # Ran once, and what it held is gone.
    assert not _pending(lazy) and pending.done
    assert pending._certifier is None and pending._point is None
    gc.collect()
    assert held() is None  # released with what it reads
    assert lazy.certificate_ is lazy.restarts_[lazy.best_restart_].certificate


def test_lazy_kernel_certificate_above_the_dense_limit_is_the_eager_one():
    """N > 300: the low-rank test (landmarks, lifted bound), read from the kept operator."""
    X, y = make_blobs(n_per_class=110, n_features=4, n_classes=3, seed=2)
    params = dict(gamma=0.2, n_restarts=2, random_state=0)
    lazy = KernelCategorySpace(**params).fit(X, y)
    eager = KernelCategorySpace(certify_at="fit", **params).fit(X, y)
    _assert_same_certificates(lazy, eager)


def test_timings_record_the_test_when_it_runs(wine):
    X, y = wine
    eager = KernelCategorySpace(n_restarts=2, random_state=0, certify_at="fit").fit(X, y)
    phases = eager.fit_seconds_
    assert list(phases) == ["setup", "iterations", "certificate", "finish", "total"]
    assert sum(v for k, v in phases.items() if k != "total") == pytest.approx(phases["total"])
    lazy = KernelCategorySpace(n_restarts=2, random_state=0).fit(X, y)
    assert "certificate" not in lazy.fit_seconds_  # not run, not counted
    total = lazy.fit_seconds_["total"]
    assert sum(v for k, v in lazy.fit_seconds_.items() if k != "total") == pytest.approx(total)
    cert = lazy.certificate_
    seconds = lazy.fit_seconds_
    assert seconds["total"] == total  # the fit's own time does not change ...
    assert seconds["certificate"] >= cert.seconds > 0  # ... the test's is added when it ran


def test_certify_false_and_cas_have_nothing_pending(wine):
    X, y = wine
    for est in (CategorySpace(certify=False, n_restarts=2), CategorySpace(objective="absolute",
                                                                           n_restarts=1)):
        est.fit(X, y)
        assert "certificate_" in vars(est) and "_certification" not in vars(est)
        assert not est.certificate_.applicable


@pytest.mark.parametrize("cls", [CategorySpace, KernelCategorySpace])
def test_pickle_runs_the_test_first_and_keeps_no_operator(wine, cls):
    X, y = wine
    est = cls(n_restarts=2, random_state=0).fit(X, y)
    assert _pending(est)
    blob = pickle.dumps(est)
    assert not _pending(est)  # the test ran for the pickle ...
    back = pickle.loads(blob)
    assert "_certification" not in vars(back)  # ... which holds its result only
    assert back.certificate_ == est.certificate_
    assert [r.certificate for r in back.restarts_] == [r.certificate for r in est.restarts_]
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    # After access: the same pickle.
    again = pickle.loads(pickle.dumps(est))
    assert again.certificate_ == est.certificate_
    # A pending certification pickled on its own runs its test too.
    fresh = cls(n_restarts=2, random_state=0).fit(X, y)
    pending = pickle.loads(pickle.dumps(vars(fresh)["_certification"]))
    assert pending.done and pending._certifier is None


def test_clone_and_params_carry_certify_at(wine):
    X, y = wine
    est = KernelCategorySpace(n_restarts=2, random_state=0).fit(X, y)
    assert est.get_params()["certify_at"] == "access"
    copy = clone(est)
    assert copy.get_params() == est.get_params()
    assert "_certification" not in vars(copy) and _pending(est)  # clone ran nothing
    eager = clone(est).set_params(certify_at="fit").fit(X, y)
    assert "certificate_" in vars(eager)
    with pytest.raises(ValueError, match="certify_at"):
        CategorySpace(certify_at="later").fit(X, y)


def test_unfitted_and_unknown_attributes_still_raise(wine):
    est = CategorySpace()
    assert not hasattr(est, "certificate_") and not hasattr(est, "restarts_")
    with pytest.raises(AttributeError, match="no attribute 'nonexistent_'"):
        est.nonexistent_


def test_refit_drops_the_earlier_fits_certificate(wine):
    X, y = wine
    est = CategorySpace(n_restarts=2, random_state=0, certify_at="fit").fit(X, y)
    first = est.certificate_
    est.set_params(certify_at="access", origin="class").fit(X, y)
    assert _pending(est) and "restarts_" not in vars(est)
    assert est.certificate_ != first


@pytest.fixture
def counted_tests(monkeypatch):
    """Counts the certificate tests the certifiers run."""
    calls = []
    for name in ("certify_global_optimum", "certify_kernel_axes"):
        real = getattr(certifiers, name)

        def counting(*args, _real=real, _name=name, **kwargs):
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(certifiers, name, counting)
    return calls


def test_grid_search_runs_no_test_until_the_certificate_is_read(wine, counted_tests):
    X, y = wine
    grid = {"gamma": [0.005, 0.02, 0.05]}
    search = GridSearchCV(KernelCategorySpace(n_restarts=2, random_state=0), grid, cv=3)
    search.fit(X, y)
    assert counted_tests == []  # 9 fold fits and the refit: no test
    assert search.best_estimator_.certificate_.applicable
    assert counted_tests == ["certify_kernel_axes"]  # one, on first access
    search.best_estimator_.restarts_
    assert counted_tests == ["certify_kernel_axes"]
    # The eager setting pays it in every fit: 9 folds and the refit.
    del counted_tests[:]
    GridSearchCV(KernelCategorySpace(n_restarts=2, random_state=0, certify_at="fit"), grid,
                 cv=3).fit(X, y)
    assert counted_tests == ["certify_kernel_axes"] * 10


def test_threads_reading_the_certificate_run_one_test(wine, counted_tests):
    from concurrent.futures import ThreadPoolExecutor

    X, y = wine
    est = CategorySpace(n_restarts=2, random_state=0).fit(X, y)
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: est.certificate_, range(8)))
    assert counted_tests == ["certify_global_optimum"]
    assert all(c is est.certificate_ for c in got)


def test_saving_a_model_runs_the_test_and_stores_it(wine):
    X, y = wine
    est = CategorySpace(n_restarts=2, random_state=0).fit(X, y)
    eager = CategorySpace(n_restarts=2, random_state=0, certify_at="fit").fit(X, y)
    arrays, meta = export_model(est)
    assert meta["params"]["certify_at"] == "access"
    assert _timeless(import_model(arrays, meta).certificate_) == _timeless(eager.certificate_)


def test_plotting_does_not_run_the_test(wine):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from catdask.plotting import plot_category_space

    X, y = wine
    est = CategorySpace(n_restarts=1, random_state=0).fit(X, y)
    plot_category_space(est, X, y)
    plt.close("all")
    assert _pending(est)


# ------------------------------------------------------------------------------ the engine
def _restart(index, objective):
    return RestartResult(index=index, start="random", objective=objective, n_iter=3,
                         converged=True, stopping_reason="tol", step=0.0, seconds=0.0)


class _Counting:
    applies = True

    def __init__(self):
        self.calls = 0

    def certify(self, point, *, full_sdp="auto", moment=False):
        self.calls += 1
        return certifiers.not_applicable(f"stand-in {self.calls}")


def test_restart_certification_runs_once_then_releases():
    released = []
    certifier = _Counting()
    pending = RestartCertification([_restart(0, 2.0), _restart(1, 1.0)], 0, np.eye(2),
                                   certifier, release=lambda: released.append(True))
    assert not pending.done and pending.seconds is None and certifier.calls == 0
    first = pending.restarts()
    assert pending.done and certifier.calls == 1 and released == [True]
    assert pending.restarts() is first and certifier.calls == 1 and released == [True]
    assert first[0].certificate.reason == "stand-in 1"
    assert pending.runs[0].certificate is None  # the solver's records stay as they were


def test_fit_restarts_defers_the_test_until_the_certificates_are_used():
    rng = np.random.default_rng(0)
    B = rng.standard_normal((3, 6, 6))
    problem = ClassMatrixProblem(np.einsum("kij,klj->kil", B, B))
    W0 = random_stiefel(2, 6, 3, np.random.default_rng(1))
    certifier = _Counting()
    result = fit_restarts(problem, Starts(("a", "b"), lambda: problem.start(W0)),
                          solver_options=SolverOptions(tol=1e-10, max_iter=300),
                          certifier=certifier, certify_at="access")
    assert certifier.calls == 0 and "certificate" not in result.phases
    assert result.best_run.certificate is None and result.best_run.objective > 0
    assert result.certificate.reason == "stand-in 1" and certifier.calls == 1
    with pytest.raises(ValueError, match="certify_at"):
        fit_restarts(problem, Starts(("a",), lambda: problem.start(W0[:1])),
                     solver_options=SolverOptions(), certifier=certifier, certify_at="never")


# ------------------------------------------------------------------------------ the pipeline
def test_train_certifies_in_the_fit_before_registering(tmp_path, counted_tests):
    """The pipeline's models are tested inside the fit (one test, before the decision), so a
    certified model is registered with its certificate and an uncertified one refused."""
    from catdask.pipeline import (ModelSpec, fit_on_dataset, ingest_dataset,
                                  register_outcome, registration_decision)
    from catdask.store import load_model_version

    store = tmp_path / "store"
    ingest_dataset("wine", store)
    outcome = fit_on_dataset(store, "wine", ModelSpec(method="cqs", n_restarts=2))
    est = outcome.estimator
    assert est.certify_at == "fit" and "certificate_" in vars(est)
    assert counted_tests == ["certify_global_optimum"]  # the model's; its CV folds run none
    assert registration_decision(outcome) == (True, "certified")
    version = register_outcome(store, "wine-cqs", outcome, status="certified")
    assert version.meta["certified"] is True
    arrays, meta = load_model_version(store, "wine-cqs")
    assert meta["certificate"]["certified"] is True
    assert import_model(arrays, meta)[-1].certificate_ == est.certificate_
    # The class origin on wine is not certified (gap 1.6e-3): refused, as before.
    rejected = fit_on_dataset(store, "wine", ModelSpec(method="cqs", origin="class",
                                                       n_restarts=2))
    rejected.release()
    assert "certificate_" in vars(rejected.estimator)
    assert registration_decision(rejected) == (False, "rejected-uncertified")
