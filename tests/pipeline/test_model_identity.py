"""Model identity and rejected candidates (issue 43 items 1 and 2), library level, no Prefect.

A model's name and its spec agree (another origin is another default name; another spec under
an existing name is refused, naming both); the registration policy never causes a refit; a
rejected fit is kept as a candidate that a looser policy registers without fitting again, and
that ``gc_candidates`` removes once nothing can use it.
"""

from __future__ import annotations

import time

import pytest

from catdask.pipeline import ModelSpec, fit_on_dataset, register_outcome
from catdask.pipeline import training
from catdask.pipeline.candidates import (
    candidates_root,
    gc_candidates,
    reconsider_candidate,
    save_candidate,
)
from catdask.pipeline.candidates import look_up_fit
from catdask.pipeline.model_cache import current_content_sha256
from catdask.pipeline.model_identity import default_model_name, identity, spec_conflict
from catdask.store import list_models, load_estimator, write_dataset

from tests.helpers.data import make_blobs

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

# One iteration from one start: not converged, so the SDP dual proves only a gap (4e-3 here).
UNCONVERGED = ModelSpec(n_restarts=1, max_iter=1)


@pytest.fixture
def blobs(tmp_path):
    store = tmp_path / "store"
    X, y = make_blobs()
    write_dataset(store, "blobs", X, y)
    return store, (X, y)


@pytest.fixture
def rejected(blobs):
    """A store with one rejected candidate of model ``m`` (and nothing registered)."""
    store, data = blobs
    outcome = fit_on_dataset(store, "blobs", UNCONVERGED)
    ok, status = training.registration_decision(outcome)
    assert (ok, status) == (False, "rejected-uncertified")
    assert 1e-4 < outcome.certificate.gap < 1e-1
    save_candidate(store, "m", outcome, plot=None)
    outcome.release()
    return store, outcome.certificate.gap, data


def test_the_policy_and_device_are_not_the_identity():
    base = ModelSpec(method="kcqs").to_dict()
    policy = ModelSpec(method="kcqs", allow_uncertified=True, max_gap=1e-3,
                       device="cpu").to_dict()
    assert identity(base) == identity(policy)
    for other in (dict(origin="class"), dict(gamma=0.5), dict(n_restarts=2),
                  dict(certify="moment"), dict(random_state=3)):
        assert identity(ModelSpec(method="kcqs", **other).to_dict()) != identity(base), other
    assert default_model_name("wine", "cqs", "global") == "wine-cqs"
    assert default_model_name("wine", "cqs", None) == "wine-cqs"
    assert default_model_name("wine", "cqs", "class") == "wine-cqs-class"


def test_another_spec_under_a_name_is_refused_naming_both(blobs):
    store, _ = blobs
    outcome = fit_on_dataset(store, "blobs", ModelSpec(n_restarts=1))
    register_outcome(store, "m", outcome, status="certified")
    # The policy, and the search settings (restarts, seed, tolerances, certificate level),
    # do not make another model.
    same_model = ModelSpec(n_restarts=3, random_state=4, tol=1e-6, allow_uncertified=True,
                           max_gap=0.1, certify="moment").to_dict()
    assert spec_conflict(store, "m", "blobs", same_model) is None
    assert spec_conflict(store, "new", "blobs", ModelSpec(origin="class").to_dict()) is None
    message = spec_conflict(store, "m", "blobs",
                            ModelSpec(n_restarts=1, origin="class").to_dict())
    assert "origin='global'" in message and "origin='class'" in message
    assert "m:v1" in message and "--name blobs-cqs-class" in message
    assert "--replace-spec" in message and "\n" not in message
    message = spec_conflict(store, "m", "blobs", ModelSpec(standardise=False).to_dict())
    assert "standardise=True" in message and "standardise=False" in message
    message = spec_conflict(store, "m", "other-data", ModelSpec(n_restarts=1).to_dict())
    assert "'blobs'" in message and "'other-data'" in message


def test_a_rejected_fit_is_registered_under_a_looser_policy_without_a_refit(rejected,
                                                                            monkeypatch):
    store, gap, _ = rejected

    def no_fit(*args, **kwargs):
        raise AssertionError("refitted")

    monkeypatch.setattr(training, "fit_on_dataset", no_fit)
    # A stricter or equal policy: rejected again, nothing registered, the candidate kept.
    sha, summary = look_up_fit(store, "m", "blobs", UNCONVERGED.to_dict())
    assert summary["version"] is None and summary["status"] == "rejected-uncertified"
    assert summary["cached"] and summary["reused"] == "candidate"
    sha, summary = look_up_fit(store, "m", "blobs",
                               ModelSpec(n_restarts=1, max_iter=1, max_gap=gap / 2).to_dict())
    assert summary["version"] is None and summary["max_gap"] == gap / 2
    assert list_models(store, "m") == [] and len(list_models(candidates_root(store))) == 1
    # max_gap above the proved gap: registered, in well under a second, from the kept fit.
    asked = ModelSpec(n_restarts=1, max_iter=1, max_gap=gap * 2)
    start = time.perf_counter()
    sha, summary = look_up_fit(store, "m", "blobs", asked.to_dict())
    seconds = time.perf_counter() - start
    assert seconds < 2.0, seconds
    assert (summary["version"], summary["status"]) == ("m:v1", "gap-within-tolerance")
    assert summary["reused"] == "candidate" and summary["gap"] == pytest.approx(gap, rel=1e-2)
    (version,) = list_models(store, "m")
    assert version.meta["spec"] == asked.to_dict()  # the retrain fits it under this policy
    assert version.meta["registration_policy"] == {"max_gap": gap * 2,
                                                   "allow_uncertified": False}
    assert load_estimator(store, "m")[-1].objective_ == pytest.approx(version.meta["objective"])
    assert list_models(candidates_root(store)) == []  # it left the candidates
    # Then any policy finds the registered version: no second version, no refit.
    for spec in (UNCONVERGED, ModelSpec(n_restarts=1, max_iter=1, allow_uncertified=True)):
        assert look_up_fit(store, "m", "blobs", spec.to_dict())[1]["version"] == "m:v1"
    assert len(list_models(store, "m")) == 1


def test_allow_uncertified_registers_the_candidate(rejected):
    store, _, _ = rejected
    spec = ModelSpec(n_restarts=1, max_iter=1, allow_uncertified=True).to_dict()
    summary = reconsider_candidate(store, "m", "blobs", current_content_sha256(store, "blobs"),
                                   spec)
    assert (summary["version"], summary["status"]) == ("m:v1", "uncertified-allowed")
    # Another spec's identity (another seed) or another model name finds no candidate.
    assert look_up_fit(store, "other", "blobs", spec)[1] is None
    assert look_up_fit(store, "m", "blobs", ModelSpec(n_restarts=1, max_iter=1,
                                                      random_state=5).to_dict())[1] is None


def test_gc_removes_candidates_nothing_can_use(rejected):
    store, _, (X, y) = rejected
    assert gc_candidates(store, dry_run=True) == []  # still usable: kept
    write_dataset(store, "blobs", X * 2.0, y, replace=True)  # new content: never asked again
    (doomed,) = gc_candidates(store, dry_run=True)
    assert "new content" in doomed[1] and doomed[0].exists()
    assert gc_candidates(store) == [doomed]
    assert not doomed[0].exists() and list_models(candidates_root(store)) == []
