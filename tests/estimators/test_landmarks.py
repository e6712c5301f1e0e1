"""Landmarks chosen by the Gram spectrum (``n_landmarks="auto"``) and the kernel diagonal.

Checked against brute force: the pivoted-Cholesky factor on the chosen pivots is the Nystroem
approximation on those landmarks, and its residual trace is the stated one.
"""

from __future__ import annotations

import numpy as np
import pytest

from catdask import KernelCategorySpace
from catdask.estimators.nystroem import choose_landmarks
from catdask.kernels.gram_factor import pivoted_cholesky
from catdask.kernels import make_kernel

from tests.helpers.data import make_blobs


def _kernels(D):
    def laplacian(x, y, scale=1.0):
        return float(np.exp(-scale * np.abs(x - y).sum()))

    return [make_kernel("rbf", n_features=D, gamma=0.3),
            make_kernel("linear", n_features=D),
            make_kernel("poly", n_features=D, gamma=0.5, degree=2, coef0=1.0),
            make_kernel(laplacian, n_features=D, kernel_params={"scale": 0.5})]


@pytest.mark.parametrize("which", range(4))
def test_kernel_diagonal_is_the_gram_diagonal(which):
    X = np.random.default_rng(which).standard_normal((17, 3))
    kernel = _kernels(3)[which]
    np.testing.assert_allclose(kernel.diagonal(X), np.diag(kernel(X, X)), rtol=1e-12)


def test_pivots_span_the_factor_as_nystroem_on_those_landmarks():
    X = np.random.default_rng(1).standard_normal((60, 4))
    G = make_kernel("rbf", n_features=4, gamma=0.2)(X, X)
    L, residual, ok, P = pivoted_cholesky(np.diag(G), lambda idx: G[:, idx], rtol=1e-4,
                                          max_rank=60, return_pivots=True)
    assert ok and len(set(P)) == len(P) == L.shape[1]
    nystroem = G[:, P] @ np.linalg.solve(G[np.ix_(P, P)], G[P, :])
    np.testing.assert_allclose(L @ L.T, nystroem, atol=1e-10)
    assert residual == pytest.approx(np.trace(G - nystroem), rel=1e-8, abs=1e-12)
    assert residual <= 1e-4 * np.trace(G)


def test_landmarks_follow_the_spectrum():
    X = np.random.default_rng(2).standard_normal((200, 6))
    # A linear kernel has rank D: exactly D landmarks, nothing left out.
    idx, residual = choose_landmarks(X, make_kernel("linear", n_features=6), rtol=1e-10)
    assert idx.size == 6 and residual <= 1e-10
    # A wider RBF kernel decays faster, so it needs fewer landmarks for the same residual.
    narrow, r_narrow = choose_landmarks(X, make_kernel("rbf", n_features=6, gamma=0.5))
    wide, r_wide = choose_landmarks(X, make_kernel("rbf", n_features=6, gamma=0.02))
    assert wide.size < narrow.size and max(r_narrow, r_wide) <= 1e-3
    assert np.all(np.diff(wide) > 0)  # sorted, distinct rows


def test_landmarks_stop_at_the_cap_and_say_what_is_left():
    X = np.random.default_rng(3).standard_normal((120, 6))
    kernel = make_kernel("rbf", n_features=6, gamma=2.0)  # nearly the identity
    idx, residual = choose_landmarks(X, kernel, max_landmarks=30)
    assert idx.size == 30
    G = kernel(X, X)
    nystroem = G[:, idx] @ np.linalg.solve(G[np.ix_(idx, idx)], G[idx, :])
    assert residual == pytest.approx(np.trace(G - nystroem) / np.trace(G), rel=1e-6)
    assert residual > 1e-3


def test_auto_landmarks_fit_and_warm_start_reach_the_exact_optimum():
    X, y = make_blobs(n_per_class=80, n_features=4, n_classes=3, spread=2.0, seed=5)
    kw = dict(gamma=0.05, n_restarts=1, tol=1e-9, random_state=0, certify=False)
    approx = KernelCategorySpace(approximation="nystroem", n_landmarks="auto", **kw).fit(X, y)
    assert approx.landmark_residual_ <= 1e-3
    assert approx.X_fit_.shape[0] == approx.landmark_indices_.size < len(y)
    cold = KernelCategorySpace(init="decoupled", **kw).fit(X, y)
    warm = KernelCategorySpace(init=approx.training_coef_, **kw).fit(X, y)
    assert warm.objective_ == pytest.approx(cold.objective_, rel=1e-9)


def test_n_landmarks_rejects_other_strings():
    X, y = make_blobs(n_per_class=10, n_features=3, n_classes=2, seed=0)
    with pytest.raises(ValueError, match="n_landmarks"):
        KernelCategorySpace(approximation="nystroem", n_landmarks="all").fit(X, y)
