"""The paper's comparison methods as scikit-learn transformers."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.linalg
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.base import _fit_context
from sklearn.decomposition import PCA, KernelPCA
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data


def make_pca(n_classes, **params):
    """PCA baseline: ``PCA(n_components=K)`` (as many dimensions as the category space)."""
    return PCA(n_components=n_classes, **params)


def make_mcfld(n_classes, **params):
    """MC-FLD baseline: multi-class Fisher discriminant with K - 1 components (SVD solver)."""
    return LinearDiscriminantAnalysis(solver="svd", n_components=n_classes - 1, **params)


def make_kernel_pca(n_classes, *, gamma=None, **params):
    """K-PCA baseline: ``KernelPCA(kernel="rbf", n_components=K)``."""
    return KernelPCA(n_components=n_classes, kernel="rbf", gamma=gamma, **params)


def ye_indicator_matrix(codes, n_classes):
    """Ye's class-indicator matrix for least-squares LDA."""
    codes = np.asarray(codes)
    n = codes.shape[0]
    counts = np.bincount(codes, minlength=n_classes).astype(float)
    Y = np.tile(-np.sqrt(counts / n), (n, 1))
    Y[np.arange(n), codes] += np.sqrt(n / counts[codes])
    return Y


class _SupervisedProjection:
    """Mixin: needs y in ``fit``; output width from the projection's columns (``_projection``
    names the fitted attribute)."""

    _projection = "coef_"

    @property
    def _n_features_out(self):
        return getattr(self, self._projection).shape[1]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


def _classification_data(estimator, X, y):
    """Validated float X and class codes 0..K-1; sets ``estimator.classes_``."""
    X, y = validate_data(estimator, X, y, dtype=np.float64, ensure_min_samples=2)
    check_classification_targets(y)
    estimator.classes_, codes = np.unique(y, return_inverse=True)
    return X, codes


class LeastSquaresLDA(
    _SupervisedProjection, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    """Least-squares LDA (LS-LDA): linear regression of centred X onto Ye's class indicators.

    ``W = argmin ||Xc W - Y||_F^2 + alpha ||W||_F^2`` with ``Xc`` the centred patterns and ``Y``
    the indicator matrix of :func:`ye_indicator_matrix`; ``alpha = 0`` is the minimum-norm
    solution ``W = pinv(Xc) Y``. ``transform(X) = (X - mean_) W`` has K columns. When
    ``rank(S_b) + rank(S_w) = rank(S_t)`` (e.g. N > D data in general position) these K columns
    span the same space as the K - 1 LDA directions (Ye 2007): the extra column is a
    combination of the others on the training data.

    Parameters
    ----------
    alpha : float, default=0.0
        Ridge penalty (0: minimum-norm least squares via the pseudo-inverse).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features, n_classes)
        W; column k belongs to ``classes_[k]``.
    mean_ : ndarray of shape (n_features,)
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined only when X has feature names that are all strings.

    See Also
    --------
    sklearn.discriminant_analysis.LinearDiscriminantAnalysis

    References
    ----------
    .. [1] J. Ye, "Least squares linear discriminant analysis", ICML 2007 (the indicator
       matrix of Section 4 and Theorem 4.1).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from catdask.evaluation.baselines import LeastSquaresLDA
    >>> X, y = load_iris(return_X_y=True)
    >>> LeastSquaresLDA().fit(X, y).transform(X).shape
    (150, 3)
    """

    _parameter_constraints: dict = {"alpha": [Interval(Real, 0, None, closed="left")]}

    def __init__(self, alpha=0.0):
        self.alpha = alpha

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the regression on X (n_samples, n_features) and labels y (n_samples,); returns
        self."""
        X, codes = _classification_data(self, X, y)
        Y = ye_indicator_matrix(codes, len(self.classes_))
        self.mean_ = X.mean(axis=0)
        Xc = X - self.mean_
        if self.alpha == 0:
            self.coef_ = scipy.linalg.lstsq(Xc, Y, lapack_driver="gelsd")[0]
        else:
            # Ridge through the SVD: W = V diag(s / (s^2 + alpha)) U^T Y.
            U, s, Vt = scipy.linalg.svd(Xc, full_matrices=False)
            self.coef_ = Vt.T @ ((s / (s**2 + self.alpha))[:, None] * (U.T @ Y))
        return self

    def transform(self, X):
        """The K regression outputs ``(X - mean_) W``, shape (n_samples, n_classes)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return (X - self.mean_) @ self.coef_


class KernelFisherDiscriminant(
    _SupervisedProjection, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    """Multi-class kernel Fisher discriminant (K-MC-FLD, generalised discriminant analysis).

    Directions ``w = sum_j a_j phi_c(x_j)`` in the centred feature space maximise the Rayleigh
    quotient ``a^T M a / a^T (N + r I) a`` with, for the centred Gram ``Gc = H G H``,

    - between-class ``M = sum_k n_k m_k m_k^T = F F^T``, ``m_k = Gc 1_k / n_k``,
      ``F[:, k] = Gc 1_k / sqrt(n_k)`` (rank K - 1 since ``Gc 1 = 0``);
    - within-class ``N = Gc Gc - M`` (total minus between);
    - regulariser ``r = reg * tr(N) / n`` (Mika's ``N + mu I``, with ``mu`` relative to the
      mean diagonal of N so that one ``reg`` suits every kernel scale).

    Since M has rank K - 1, the generalised eigenproblem ``M a = lambda (N + r I) a`` is solved
    exactly through a K x K one: with ``B = N + r I`` (Cholesky), ``F^T B^{-1} F v = lambda v``
    (``scipy.linalg.eigh``) and ``a = B^{-1} F v / sqrt(lambda)``, so ``a^T B a = 1``. New
    points are projected through their kernel rows centred the way KernelPCA centres them.

    Parameters
    ----------
    n_components : int, default=None
        Number of directions; None means K - 1 (at most K - 1 are informative).
    kernel : {"rbf", "linear", "poly", "sigmoid", "cosine"}, default="rbf"
    gamma : float, default=None
        Kernel coefficient; None means ``1 / n_features``.
    degree : int, default=3
    coef0 : float, default=1
    reg : float, default=1e-3
        Relative regularisation of the within-class scatter (see above).

    Attributes
    ----------
    dual_coef_ : ndarray of shape (n_samples, n_components)
        The coefficient vectors ``a`` (columns), ordered by decreasing ``eigenvalues_``.
    eigenvalues_ : ndarray of shape (n_components,)
        Regularised Fisher ratios ``a^T M a / a^T (N + r I) a``.
    X_fit_ : ndarray of shape (n_samples, n_features)
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined only when X has feature names that are all strings.

    See Also
    --------
    sklearn.discriminant_analysis.LinearDiscriminantAnalysis : the linear-kernel limit.
    sklearn.decomposition.KernelPCA : same kernel-row centring.

    References
    ----------
    .. [1] S. Mika, G. Raetsch, J. Weston, B. Schoelkopf, K.-R. Mueller, "Fisher discriminant
       analysis with kernels", IEEE NNSP 1999.
    .. [2] G. Baudat, F. Anouar, "Generalized discriminant analysis using a kernel approach",
       Neural Computation 12(10), 2000.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from catdask.evaluation.baselines import KernelFisherDiscriminant
    >>> X, y = load_iris(return_X_y=True)
    >>> KernelFisherDiscriminant(gamma=0.5).fit(X, y).transform(X[:4]).shape
    (4, 2)
    """

    _projection = "dual_coef_"
    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "kernel": [StrOptions({"rbf", "linear", "poly", "sigmoid", "cosine"})],
        "gamma": [Interval(Real, 0, None, closed="neither"), None],
        "degree": [Interval(Integral, 1, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "reg": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, n_components=None, *, kernel="rbf", gamma=None, degree=3, coef0=1, reg=1e-3):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.reg = reg

    def _kernel(self, X, Y):
        params = {}
        if self.kernel in ("rbf", "poly", "sigmoid"):
            params["gamma"] = 1.0 / self.n_features_in_ if self.gamma is None else self.gamma
        if self.kernel in ("poly", "sigmoid"):
            params["coef0"] = self.coef0
        if self.kernel == "poly":
            params["degree"] = self.degree
        return pairwise_kernels(X, Y, metric=self.kernel, filter_params=False, **params)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Solve the regularised multi-class kernel Fisher problem; returns self."""
        X, codes = _classification_data(self, X, y)
        K, n = len(self.classes_), X.shape[0]
        if K < 2:
            raise ValueError(f"KernelFisherDiscriminant needs at least 2 classes; y has {K}.")
        n_comp = K - 1 if self.n_components is None else self.n_components
        if n_comp > K - 1:
            raise ValueError(
                f"n_components={self.n_components} exceeds K - 1 = {K - 1}: the between-class "
                "scatter has rank K - 1, so further directions carry no class information."
            )
        G = self._kernel(X, X)
        self._col_means = G.mean(axis=0)
        self._total_mean = self._col_means.mean()
        Gc = G - self._col_means[None, :] - self._col_means[:, None] + self._total_mean
        onehot = np.zeros((n, K))
        onehot[np.arange(n), codes] = 1.0
        F = Gc @ (onehot / np.sqrt(onehot.sum(axis=0)))
        B = Gc @ Gc - F @ F.T
        r = self.reg * max(np.trace(B), np.finfo(float).tiny) / n
        B[np.diag_indices_from(B)] += r
        chol = scipy.linalg.cho_factor(B, lower=True, check_finite=False)
        BinvF = scipy.linalg.cho_solve(chol, F, check_finite=False)
        S = F.T @ BinvF
        evals, V = scipy.linalg.eigh((S + S.T) / 2)
        order = np.argsort(evals)[::-1][:n_comp]
        evals, V = np.clip(evals[order], np.finfo(float).tiny, None), V[:, order]
        A = BinvF @ V / np.sqrt(evals)
        # Deterministic signs (like svd_flip): largest-magnitude coefficient positive.
        big = np.argmax(np.abs(A), axis=0)
        A *= np.sign(A[big, np.arange(A.shape[1])])
        self.dual_coef_ = A
        self.eigenvalues_ = evals
        self.X_fit_ = X
        return self

    def transform(self, X):
        """Coordinates on the discriminant directions, shape (n_samples, n_components)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        Kx = self._kernel(X, self.X_fit_)
        # Centre in feature space about the training centroid (as KernelCenterer does).
        Kx = Kx - Kx.mean(axis=1, keepdims=True) - self._col_means[None, :] + self._total_mean
        return Kx @ self.dual_coef_

