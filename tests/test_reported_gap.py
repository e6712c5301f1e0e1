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
