"""Shared fixtures: small data sets and the location of ../shared (skip cleanly without it)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir():
    """``../shared`` beside the checkout; tests that need it skip (saying why) when absent."""
    if not SHARED.is_dir():
        pytest.skip(f"../shared not present at {SHARED}: UCI files and paper unavailable")
    return SHARED


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def make_blobs(n_per_class=30, n_features=5, n_classes=3, spread=3.0, seed=0):
    """Gaussian classes with distinct means and anisotropic covariances."""
    r = np.random.default_rng(seed)
    X, y = [], []
    for k in range(n_classes):
        A = r.standard_normal((n_features, n_features))
        X.append(r.standard_normal((n_per_class, n_features)) @ A + spread * r.standard_normal(n_features))
        y.append(np.full(n_per_class, k))
    return np.vstack(X), np.concatenate(y)


@pytest.fixture
def blobs():
    return make_blobs()
