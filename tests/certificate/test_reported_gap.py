"""Certified fits report their verified margin, not the rounded ``gap = 0``."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

from catdask import CategorySpace
from catdask.certificate import not_applicable
from catdask.pipeline.reports import certificate_summary, reported_gap


def test_reported_gap_is_the_verified_margin_when_certified():
    X, y = load_iris(return_X_y=True)
    cert = CategorySpace(n_restarts=2, random_state=0).fit(
        StandardScaler().fit_transform(X), y).certificate_
    assert cert.certified and cert.gap == 0.0
    margin = reported_gap(cert)
    assert margin == cert.verified_gap and 0 <= margin < 1e-6
    assert f"verified gap <= {margin:.1e}" in certificate_summary(cert)
    # Not certified: the gap to the upper bound, unchanged.
    loose = dataclasses.replace(cert, certified=False, method=None, gap=3e-3,
                                upper_bound=cert.objective * 1.003)
    assert reported_gap(loose) == 3e-3
    assert reported_gap(not_applicable()) is None and reported_gap(None) is None
    assert math.isnan(not_applicable().gap)
    assert np.isfinite(cert.verified_upper_bound)


def test_registration_policy_max_gap():
    """``max_gap`` admits an uncertified CQS fit whose proved gap is at most it, and says so."""
    from types import SimpleNamespace

    from catdask.pipeline import ModelSpec, registration_decision
    from catdask.pipeline.reports import _registration_line

    X, y = load_iris(return_X_y=True)
    cert = CategorySpace(n_restarts=1, random_state=0).fit(
        StandardScaler().fit_transform(X), y).certificate_
    loose = dataclasses.replace(cert, certified=False, method=None, gap=2e-4)

    def decide(c, method="cqs", **policy):
        outcome = SimpleNamespace(certificate=c, spec=ModelSpec(method=method))
        return registration_decision(outcome, **policy)

    assert decide(cert, max_gap=0.0) == (True, "certified")
    assert decide(loose) == (False, "rejected-uncertified")
    assert decide(loose, max_gap=1e-4) == (False, "rejected-uncertified")
    assert decide(loose, max_gap=2e-4) == (True, "gap-within-tolerance")
    assert decide(loose, max_gap=1e-4, allow_uncertified=True) == (True, "uncertified-allowed")
    # No bound (the test could not run): an infinite or unknown gap is never within a tolerance.
    for gap in (math.inf, math.nan):
        assert decide(dataclasses.replace(loose, gap=gap), max_gap=1e9)[0] is False
    assert _registration_line(loose, "gap-within-tolerance", 1e-3) == (
        "gap-within-tolerance (not certified; proved gap 0.0002 <= max_gap 0.001)")
    assert _registration_line(loose, "rejected-uncertified", 1e-4) == (
        "rejected-uncertified (proved gap 0.0002 > max_gap 0.0001)")
