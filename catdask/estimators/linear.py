"""CategorySpace: the linear method (CQS / CAS) of Smith & Rangarajan."""

from __future__ import annotations

import numpy as np
from sklearn.base import _fit_context

from ..certificate.certifiers import LinearCertifier
from ..core.engine import Starts, fit_restarts
from ..core.problems import CategoryObjective, ClassMatrixProblem, LinearProblem
from ..core.starts import linear_starts
from .base import BaseCategorySpace, logs_when_verbose
from .classify import ClassStatistics
from .target import ComputeTarget

# Keep the K class matrices (K D^2 floats) when they fit in this many bytes; beyond it the
# solver streams the data twice per iteration instead (docs/design.md §2).
CLASS_MATRIX_BUDGET_BYTES = 1024**3


class CategorySpace(BaseCategorySpace):
    """Category-space dimensionality reduction (linear CQS / CAS).

    Learns K orthonormal *category axes* W (D x K), one per class, that maximise the spread of
    each class along its own axis, by alternating an exact Z-step and a polar step on the
    Stiefel manifold (paper Algorithm 1). Patterns are projected to the K-dimensional category
    space; :meth:`predict` classifies them there (``classifier``: a per-class Gaussian rule by
    default, or the paper's angle classifier).

    Parameters
    ----------
    objective : {"quadratic", "absolute"}, default="quadratic"
        ``"quadratic"`` is CQS, ``f(W) = 1/2 sum_k sum_{i in C_k} (w_k^T (x_i - c_k))^2``
        (paper eq. (1)); ``"absolute"`` is CAS, the smoothed absolute value
        ``sum_k sum_{i in C_k} sqrt((w_k^T x_i + mu_k)^2 + eps^2)`` (paper eq. (6)), with
        the per-class multiplier ``mu_k`` found exactly by a bracketed 1-D root.
    origin : {"class", "global"}, default="global"
        ``"global"``: the paper's eq. (1) with x0 the training centroid; each class is measured
        from x0, so where a class sits (between-class information) counts too.
        ``"class"``: the paper's Algorithm 1; each class is measured from its own centre
        (mean for CQS, smoothed median for CAS), so only within-class spread counts.
        ``"global"`` classifies better (docs/user-guide.md, *Defaults, and why*).
    eps : float, default=0.1
        CAS smoothing length, relative to the data scale ``s = sqrt(tr(C^2) / tr(C))`` (C the
        total covariance; s^2 is the eigenvalue-weighted mean variance). The absolute length
        used is ``eps_ = eps * s``. Ignored by CQS.
    n_restarts : int, default=5
        Number of starting points, run as one batch (at most
        ``catdask.method_names.MAX_RESTARTS``); ``certificate_`` says whether the best is global.
    tol : float, default=1e-8
        Stop a restart when ``||W_new - W_old||_F <= tol`` (paper: 1e-8).
    max_iter : int, default=2000
    init : {"auto", "random", "decoupled", "class-means"} or array-like of shape (D, K), \
            default="auto"
        ``"auto"``: the decoupled start (each axis the top eigenvector of its class matrix,
        then the polar step), the class-means start, then random ones. ``"random"``: only
        Haar-random starts. An array is a single given start (warm start).
    random_state : int, RandomState instance or None, default=None
    certify : bool or "moment", default=True
        Test the best restart for global optimality (CQS only; the other restarts are marked
        tied or beaten): Rapcsák's condition, then the SDP-dual test, then an upper bound.
        ``"moment"`` also tries the level-2 moment relaxation when the SDP dual is not tight
        (slower; needs the ``sdp`` extra). See ``certificate_``.
    certify_at : {"access", "fit"}, default="access"
        When the test runs. ``"access"``: on first access of ``certificate_`` or
        ``restarts_`` (or when the model is pickled, saved or registered), so fits whose
        certificate nobody reads do not pay for it; until then the model keeps the K class
        matrices. ``"fit"``: inside :meth:`fit`. The certificate is the same either way.
    verbose : int, default=0
        Report the fit's progress and chosen restart at INFO level (loggers ``catdask.*``;
        on stderr when logging is not configured).
    acceleration : {"auto", "anderson", "none"}, default="auto"
        Safeguarded Anderson mixing of the iteration (:mod:`catdask.core.acceleration`):
        ``"auto"`` uses it for CQS / K-CQS, ``"none"`` is the paper's plain iteration.
    classifier : {"qda", "lda", "nearest-mean", "angle"}, default="qda"
        The rule :meth:`predict`, :meth:`predict_proba` and :meth:`decision_function` apply to
        the category-space coordinates (:mod:`catdask.estimators.classify`); it can be
        changed with ``set_params`` without refitting.

    Attributes
    ----------
    components_ : ndarray of shape (K, D)
        The category axes ``W^T``; row k belongs to ``classes_[k]``.
    mean_ : ndarray of shape (D,)
        The training centroid x0; :meth:`transform` measures from it when
        ``origin="global"``.
    classes_ : ndarray of shape (K,)
    objective_ : float
        ``f(W)`` at the chosen restart (scale: ``1/2 sum_k w_k^T R_k w_k`` for CQS).
    n_iter_ : int
    converged_ : bool
    stopping_reason_ : str
    certificate_ : catdask.certificate.Certificate
        Global-optimality certificate of the chosen restart (see :mod:`catdask.certificate`).
        With ``certify_at="access"`` the test runs on the first access of this attribute or
        of ``restarts_``.
    restarts_ : list of catdask.core.solver.RestartResult
        One record per restart: start, objective, iterations, convergence, certificate.
    best_restart_ : int
    eps_ : float
        Absolute CAS smoothing length used.
    class_means_ : ndarray of shape (K, K)
        Mean category-space coordinates of each class (row k: ``classes_[k]``).
    class_covariances_ : ndarray of shape (K, K, K)
        Covariance of each class's training coordinates.
    class_counts_ : ndarray of shape (K,)
        Training samples per class.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined only when X has feature names that are all strings.

    See Also
    --------
    KernelCategorySpace : the RKHS version (K-CQS / K-CAS).
    sklearn.discriminant_analysis.LinearDiscriminantAnalysis : multi-class Fisher (K-1 dims).

    References
    ----------
    .. [1] Smith & Rangarajan, "A Category Space Approach to Supervised Dimensionality
       Reduction", Algorithm 1 and eqs. (1), (6), (22), (24), (29).
    .. [2] Gilman, Burer & Balzano, "A semidefinite relaxation for sums of heterogeneous
       quadratic forms on the Stiefel manifold", arXiv:2205.13653 (the certificate).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from catdask import CategorySpace
    >>> X, y = load_iris(return_X_y=True)
    >>> cs = CategorySpace(origin="global", n_restarts=3, random_state=0).fit(X, y)
    >>> cs.transform(X).shape
    (150, 3)
    >>> bool(cs.converged_)
    True
    """

    def __init__(
        self,
        objective="quadratic",
        origin="global",
        *,
        eps=0.1,
        n_restarts=5,
        tol=1e-8,
        max_iter=2000,
        init="auto",
        random_state=None,
        certify=True,
        certify_at="access",
        verbose=0,
        acceleration="auto",
        classifier="qda",
    ):
        self._set_solver_params(objective, origin, eps, n_restarts, tol, max_iter, init,
                                random_state, certify, certify_at, verbose, acceleration)
        self.classifier = classifier

    @_fit_context(prefer_skip_nested_validation=True)
    @logs_when_verbose
    def fit(self, X, y):
        """Learn the category axes from patterns X (n_samples, n_features) and their labels y
        (any hashable labels; ``classes_`` maps axes to labels). Returns self."""
        self._fit(X, y)
        return self

    def _fit(self, X, y):
        """The fit; returns its :class:`~catdask.core.engine.FitResult` (the Nystroem fit of
        :class:`~catdask.KernelCategorySpace` reads its restarts from it)."""
        target, X, classes_, classes = ComputeTarget.for_fit(self, X, y, linear=True)
        K, D = len(classes_), X.shape[1]
        with target:
            op = target.data_operator(X, classes)
            self.eps_ = float(self.eps * _data_scale(op.covariance_moments()))
            class_matrices = (op.class_second_moments(self.origin) if _class_matrices_fit(K, D)
                              else None)
            problem: ClassMatrixProblem | LinearProblem
            if self.objective == "quadratic" and class_matrices is not None:
                problem = ClassMatrixProblem(class_matrices)
            else:
                problem = LinearProblem(op, CategoryObjective(self.objective, self.origin,
                                                              self.eps_))
            certifier = self._certifier(LinearCertifier(class_matrices, unavailable=(
                f"not attempted: the {K} class matrices ({D} x {D}) exceed the memory budget")))
            result = fit_restarts(
                problem, self._starts(problem, op, class_matrices),
                solver_options=self._solver_options(), certifier=certifier,
                moment=self.certify == "moment",
                # The test reads only the class matrices (driver memory): it may run later
                # whatever the input, after the operator is closed.
                **target.certification(self.certify_at, certifier),
            )
            W = result.state.W[result.best_index]
            # Class means on their own axes, measured from the centroid, fix the signs (so W
            # is exactly translation invariant).
            signs = np.where(np.einsum("dk,kd->k", W, op.class_means()) < 0, -1.0, 1.0)
            self.components_ = (W * signs).T
            self.mean_ = np.asarray(op.center, dtype=float)
            self.classes_ = classes_
            if _class_matrices_fit(K, D):
                self._set_class_statistics(_coordinate_class_statistics(self, op))
            else:  # the class scatter matrices would not fit: one pass over the data instead
                self._fit_classifier(_training_coordinates(self, op), classes.codes)
        self._set_fit_result(result)
        return result

    def _starts(self, problem, op, class_matrices):
        """The restarts' starting axes (``init``): :class:`~catdask.core.engine.Starts`."""
        K, D = op.classes.n_classes, op.n_features
        labels, rng, given = self._labels_and_rng(kernel=False)
        if given is not None:
            if given.shape != (D, K):
                raise ValueError(
                    f"init array must have shape (D, K) = {(D, K)}; got {given.shape}.")
            W0 = given[None]
        else:
            W0 = linear_starts(labels, class_matrices=class_matrices,
                               class_means=op.class_means(), n_features=D, rng=rng)
        return Starts(tuple(labels), lambda: problem.start(W0))

    def _expected_failed_checks(self):
        reason = (
            "the linear method needs K <= D; these checks fit 3 classes on 1 or 2 features "
            "(the error says to use KernelCategorySpace)"
        )
        return {
            **super()._expected_failed_checks(),
            **dict.fromkeys(
                [
                    "check_estimators_overwrite_params",
                    "check_estimators_fit_returns_self",
                    "check_readonly_memmap_input",
                    "check_classifiers_classes",
                    "check_classifiers_train",
                    "check_fit2d_1feature",
                ],
                reason,
            ),
        }

    def _transform_array(self, X):
        # W^T (x - x0) with x0 the training centroid for origin="global"; W^T x (the paper's
        # y_i = W^T x_i) for origin="class", whose model has no common origin.
        if self.origin == "global":
            X = X - self.mean_
        return X @ self.components_.T


def _class_matrices_fit(n_classes, n_features):
    """Whether the K class matrices (D x D, float64) fit :data:`CLASS_MATRIX_BUDGET_BYTES`."""
    return 8 * n_classes * n_features**2 <= CLASS_MATRIX_BUDGET_BYTES


def _coordinate_class_statistics(est, op):
    """Class statistics of the training coordinates from the data's class moments: the coordinates
    are affine in x, so class k's mean is ``transform(m_k)`` and its covariance ``C S_k C^T / n_k``
    (``C = components_``, ``S_k`` the scatter the solver already holds): no (N, K) array on the
    driver.
    """
    C = est.components_
    scatter = op.class_second_moments("class")
    counts = np.asarray(op.classes.counts, dtype=float)
    means = est._transform_array(op.class_means() + op.center)
    covariances = (C @ scatter @ C.T) / counts[:, None, None]  # BLAS (einsum: 0.8 s at D = 784)
    return ClassStatistics(means, covariances, counts)


def _training_coordinates(est, op):
    """Training coordinates (K, N) as ``transform`` gives them, in one pass over the data."""
    K = est.components_.shape[0]
    axes = np.repeat(est.components_[:, :, None], K, axis=2)  # axes[r, :, k] = w_r
    offset = est._transform_array(est.mean_[None])[0]
    return op.own_projections(axes) + offset[:, None]


def _data_scale(moments, *, kernel=False):
    """``sqrt(tr(C^2) / tr(C))``: the eigenvalue-weighted mean variance's square root. ``tr(C) = 0``
    (every sample the same point, in feature space with ``kernel=True``) is refused: every axis
    would give every sample the coordinate 0.
    """
    tr, tr2 = moments
    if not tr > 0:
        where = " in the kernel's feature space" if kernel else ""
        why = ("every feature is constant, or the features vary far less than the kernel's "
               "length scale: standardise X" if kernel else "every feature is constant")
        raise ValueError(
            f"X has no variation{where}: all samples are the same point ({why}), so there are "
            "no category axes to find."
        )
    return float(np.sqrt(tr2 / tr))
