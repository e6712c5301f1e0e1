"""The comparison methods against reference computations (catdask.evaluation.baselines)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from sklearn.datasets import load_wine
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from catdask.evaluation.baselines import (
    KernelFisherDiscriminant,
    LeastSquaresLDA,
    make_kernel_pca,
    make_mcfld,
    make_pca,
    ye_indicator_matrix,
)

from tests.helpers.data import make_blobs


def max_angle(A, B):
    """Largest principal angle (radians) between the column spaces of A and B."""
    return float(np.max(scipy.linalg.subspace_angles(A, B)))


def scatter_matrices(X, y):
    m = X.mean(axis=0)
    Sb = np.zeros((X.shape[1],) * 2)
    Sw = np.zeros_like(Sb)
    for c in np.unique(y):
        Xc = X[y == c]
        d = Xc.mean(axis=0) - m
        Sb += len(Xc) * np.outer(d, d)
        Sw += (Xc - Xc.mean(axis=0)).T @ (Xc - Xc.mean(axis=0))
    return Sb, Sw


@pytest.fixture(scope="module")
def wine_std():
    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), y


# ---------------------------------------------------------------------------- LS-LDA
def test_ye_indicator_matrix():
    codes = np.array([0, 0, 1, 2, 2, 2])
    Y = ye_indicator_matrix(codes, 3)
    n, nj = 6, np.array([2, 1, 3])
    for i, c in enumerate(codes):
        for j in range(3):
            expected = np.sqrt(n / nj[j]) - np.sqrt(nj[j] / n) if c == j else -np.sqrt(nj[j] / n)
            assert Y[i, j] == pytest.approx(expected)
    np.testing.assert_allclose(Y.sum(axis=0), 0, atol=1e-12)  # already centred
    P = Y.T @ Y / n  # a rank K-1 orthogonal projection (Ye 2007, Section 4)
    np.testing.assert_allclose(P @ P, P, atol=1e-12)
    assert np.linalg.matrix_rank(P) == 2


def test_ls_lda_is_minimum_norm_least_squares(wine_std):
    X, y = wine_std
    ls = LeastSquaresLDA().fit(X, y)
    Y = ye_indicator_matrix(np.unique(y, return_inverse=True)[1], 3)
    np.testing.assert_allclose(ls.coef_, np.linalg.pinv(X - X.mean(axis=0)) @ Y, atol=1e-10)
    assert ls.transform(X).shape == (len(y), 3)


def test_ls_lda_ridge_closed_form(wine_std):
    X, y = wine_std
    alpha = 2.5
    ls = LeastSquaresLDA(alpha=alpha).fit(X, y)
    Xc = X - X.mean(axis=0)
    Y = ye_indicator_matrix(np.unique(y, return_inverse=True)[1], 3)
    W = np.linalg.solve(Xc.T @ Xc + alpha * np.eye(X.shape[1]), Xc.T @ Y)
    np.testing.assert_allclose(ls.coef_, W, atol=1e-10)


@pytest.mark.parametrize("data", ["wine", "blobs"])
def test_ls_lda_spans_lda_subspace_full_rank(data, wine_std):
    # N > D with invertible S_t: W = S_t^{-1} X_c^T Y spans range(S_t^{-1} H_b), the span of
    # the K-1 LDA directions, so the K outputs span exactly the LDA space (rank K-1).
    X, y = wine_std if data == "wine" else make_blobs(n_per_class=40, n_features=6, n_classes=4)
    T_lda = LinearDiscriminantAnalysis(solver="svd").fit(X, y).transform(X)
    T_ls = LeastSquaresLDA().fit(X, y).transform(X)
    assert np.linalg.matrix_rank(T_ls, tol=1e-8 * np.abs(T_ls).max()) == T_lda.shape[1]
    assert max_angle(T_lda, T_ls) < 1e-8


def test_ls_lda_equals_ulda_under_ye_condition():
    # Undersampled data (D > N) in general position satisfy Ye's condition
    # rank(S_b) + rank(S_w) = rank(S_t); then LS-LDA equals uncorrelated LDA (eigenvectors of
    # S_t^+ S_b, all K-1 non-zero eigenvalues equal to 1; Ye 2007, Theorem 4.1).
    rng = np.random.default_rng(7)
    y = np.repeat([0, 1, 2], 6)
    X = rng.standard_normal((18, 40)) + 2.0 * rng.standard_normal((3, 40))[y]
    Sb, Sw = scatter_matrices(X, y)
    Xc = X - X.mean(axis=0)
    St = Xc.T @ Xc
    rank = np.linalg.matrix_rank
    assert rank(Sb) + rank(Sw) == rank(St)
    evals, V = np.linalg.eig(np.linalg.pinv(St) @ Sb)
    top = np.argsort(-evals.real)[:2]
    np.testing.assert_allclose(evals.real[top], 1.0, atol=1e-8)
    G = np.real(V[:, top])
    ls = LeastSquaresLDA().fit(X, y)
    assert rank(ls.coef_, tol=1e-8 * np.abs(ls.coef_).max()) == 2
    assert max_angle(G, ls.coef_) < 1e-6
    assert max_angle(Xc @ G, ls.transform(X)) < 1e-6


# ---------------------------------------------------------------------------- K-MC-FLD
def test_kfd_linear_kernel_matches_lda(wine_std):
    X, y = wine_std
    Xtr, Xte, ytr = X[::2], X[1::2], y[::2]
    lda = LinearDiscriminantAnalysis(solver="svd").fit(Xtr, ytr)
    kfd = KernelFisherDiscriminant(kernel="linear", reg=1e-10).fit(Xtr, ytr)
    assert kfd.transform(Xte).shape == (len(Xte), 2)
    # Same subspace on new points, and the same Fisher ratios as eigh(S_b, S_w).
    assert max_angle(lda.transform(Xte), kfd.transform(Xte)) < 1e-6
    Sb, Sw = scatter_matrices(Xtr, ytr)
    ratios = scipy.linalg.eigh(Sb, Sw, eigvals_only=True)[::-1][:2]
    np.testing.assert_allclose(kfd.eigenvalues_, ratios, rtol=1e-6)


def _poly2_features(X, c):
    """Explicit feature map of k(x, x') = (x.x' + c)^2 for 2-D x."""
    x1, x2 = X[:, 0], X[:, 1]
    r2, rc = np.sqrt(2), np.sqrt(2 * c)
    return np.column_stack([x1**2, x2**2, r2 * x1 * x2, rc * x1, rc * x2, np.full(len(X), c)])


def test_kfd_poly_kernel_matches_explicit_feature_map():
    X, y = make_blobs(n_per_class=25, n_features=2, n_classes=3, seed=3)
    X = StandardScaler().fit_transform(X)
    Xnew = np.random.default_rng(0).standard_normal((20, 2))
    kfd = KernelFisherDiscriminant(kernel="poly", degree=2, gamma=1.0, coef0=1.0, reg=1e-11)
    kfd.fit(X, y)
    # Reference: ordinary Fisher discriminant in the 6-D feature space (5 informative dims;
    # the constant coordinate has no scatter, so drop it to keep S_w invertible).
    F, Fnew = _poly2_features(X, 1.0)[:, :5], _poly2_features(Xnew, 1.0)[:, :5]
    Sb, Sw = scatter_matrices(F, y)
    evals, V = scipy.linalg.eigh(Sb, Sw)
    V, evals = V[:, ::-1][:, :2], evals[::-1][:2]
    ref = (Fnew - F.mean(axis=0)) @ V
    assert max_angle(ref, kfd.transform(Xnew)) < 1e-5
    np.testing.assert_allclose(kfd.eigenvalues_, evals, rtol=1e-5)
    # With a^T (N + rI) a = 1 the projections match up to sign, not only as subspaces.
    got = kfd.transform(Xnew)
    for j in range(2):
        s = np.sign(got[:, j] @ ref[:, j])
        np.testing.assert_allclose(s * got[:, j], ref[:, j], rtol=1e-4,
                                   atol=1e-6 * np.abs(ref).max())


def test_kfd_matches_full_generalised_eigenproblem():
    # The rank-(K-1) reduction must equal scipy.linalg.eigh(M, N + rI) on the full N x N problem.
    X, y = make_blobs(n_per_class=15, n_features=4, n_classes=3, seed=5)
    kfd = KernelFisherDiscriminant(kernel="rbf", gamma=0.2, reg=1e-2).fit(X, y)
    n = len(y)
    H = np.eye(n) - 1.0 / n
    G = np.exp(-0.2 * ((X[:, None] - X[None]) ** 2).sum(-1))
    Gc = H @ G @ H
    M = sum(np.outer(Gc[:, y == c].mean(1), Gc[:, y == c].mean(1)) * (y == c).sum()
            for c in np.unique(y))
    N = Gc @ Gc - M
    B = N + 1e-2 * np.trace(N) / n * np.eye(n)
    evals, A = scipy.linalg.eigh(M, B)
    np.testing.assert_allclose(kfd.eigenvalues_, evals[::-1][:2], rtol=1e-8)
    assert max_angle(Gc @ A[:, ::-1][:, :2], kfd.transform(X)) < 1e-6
    # Normalisation a^T B a = 1 and kernel-row centring of training points (as KernelPCA).
    np.testing.assert_allclose(kfd.dual_coef_.T @ B @ kfd.dual_coef_, np.eye(2), atol=1e-8)
    np.testing.assert_allclose(kfd.transform(X), Gc @ kfd.dual_coef_, atol=1e-10)


def test_kfd_rejects_too_many_components():
    X, y = make_blobs()
    with pytest.raises(ValueError, match="exceeds K - 1 = 2"):
        KernelFisherDiscriminant(n_components=3).fit(X, y)
    with pytest.raises(ValueError, match="'reg' parameter"):
        KernelFisherDiscriminant(reg=0).fit(X, y)


def test_factories_dimensions():
    X, y = make_blobs(n_classes=4, n_features=6)
    assert make_pca(4).fit_transform(X).shape == (len(y), 4)
    assert make_mcfld(4).fit(X, y).transform(X).shape == (len(y), 3)
    assert make_kernel_pca(4, gamma=0.1).fit_transform(X).shape == (len(y), 4)


@parametrize_with_checks([LeastSquaresLDA(), KernelFisherDiscriminant()])
def test_sklearn_compatible_baselines(estimator, check):
    check(estimator)
