"""Small synthetic data sets shared by the tests."""

from __future__ import annotations

import numpy as np


def make_blobs(n_per_class=30, n_features=5, n_classes=3, spread=3.0, seed=0):
    """Gaussian classes with distinct means and anisotropic covariances.

    Returns ``(X, y)``: ``X`` of shape ``(n_per_class * n_classes, n_features)``, ``y`` the
    integer class of each row, sorted by class.
    """
    r = np.random.default_rng(seed)
    X, y = [], []
    for k in range(n_classes):
        A = r.standard_normal((n_features, n_features))
        X.append(r.standard_normal((n_per_class, n_features)) @ A + spread * r.standard_normal(n_features))
        y.append(np.full(n_per_class, k))
    return np.vstack(X), np.concatenate(y)
