"""KernelCategorySpace: the RKHS method (K-CQS / K-CAS) of Smith & Rangarajan."""

from __future__ import annotations

import time
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_random_state

from ..certificate.certifiers import KernelCertifier
from ..core.engine import Starts, fit_restarts
from ..core.problems import CategoryObjective, KernelProblem
from ..core.progress import report_stage
from ..core.starts import kernel_decoupled_z, kernel_random_z
from ..kernels import make_kernel
from ..operators import CentredGramOperator
from .base import SOLVER_PARAMS, BaseCategorySpace, logs_when_verbose
from .classify import check_class_count_memory
from .linear import _data_scale
from .nystroem import fit_nystroem
from .target import ComputeTarget

# gamma=None for the RBF kernel means RBF_GAMMA_SCALE / n_features: on standardised data
# (squared distances about 2 D) 1 / n_features classified worse on every data set measured.
RBF_GAMMA_SCALE = 0.05

#: Kernel entries ``k(x, x_fit)`` that ``transform`` evaluates at once (64 MiB of float64): the
#: new patterns go in row blocks of about this size.
TRANSFORM_BLOCK_ENTRIES = 8 * 1024**2


class KernelCategorySpace(BaseCategorySpace):
    """Kernel category-space dimensionality reduction (K-CQS / K-CAS).

    Each category axis is ``w_k = sum_j A[k, j] phi(x_j)`` in the RKHS of ``kernel``, with
    ``A G A^T = I`` (paper eq. (31)). The W-step uses the exact identity
    ``A = (Z^T G Z)^{-1/2} Z^T`` (docs/design.md §3): one Gram product ``G Z`` per iteration
    and K x K work, no N x N eigendecomposition. Products exploit the block structure of Z
    (one non-zero per row), so an iteration costs N^2 kernel-matrix entries, not N^2 K.

    Parameters
    ----------
    kernel : {"rbf", "linear", "poly"} or callable, default="rbf"
        As in :func:`sklearn.metrics.pairwise.pairwise_kernels`.
    gamma : float, default=None
        RBF / polynomial gamma. None means ``0.05 / n_features`` for ``"rbf"`` (a wide kernel
        for standardised data, ``RBF_GAMMA_SCALE``) and ``1 / n_features`` for ``"poly"``.
        The value used is in ``kernel_.params``.
    degree : int, default=3
    coef0 : float, default=1
    kernel_params : dict, default=None
        Extra parameters for a callable kernel (refused with a built-in one, whose parameters
        are ``gamma``, ``degree`` and ``coef0``).
    objective, origin, eps, n_restarts, tol, max_iter, random_state, certify, verbose, \
            classifier
        As in :class:`CategorySpace` (``origin="global"`` and ``classifier="qda"`` by
        default). ``origin="global"`` uses the centred Gram ``H G H`` (x0 the feature-space
        centroid). ``tol`` applies to the RKHS norm of the change, ``sqrt(tr(dA G dA^T))``.
    certify_at : {"access", "fit"}, default="access"
        As in :class:`CategorySpace`; until the test runs the model keeps the Gram operator it
        reads (at most ``max_gram_bytes``). A fit on Dask input certifies in :meth:`fit`
        whatever this says (its operator lives on the cluster).
    init : {"auto", "random", "decoupled"} or array-like of shape (K, N), default="auto"
        ``"auto"``: the decoupled start (top kernel-PCA direction of each class), then random
        ones. An array is a single start given by coefficients (e.g. from a Nystroem fit).
    max_gram_bytes : int, default=2 GiB
        Keep the whole Gram matrix when it fits in this many bytes; otherwise recompute blocks
        of it in every product. With Dask inputs: the budget for caching Gram blocks on the
        workers (see :func:`catdask.distributed.gram_options`).
    approximation : {None, "nystroem"}, default=None
        ``"nystroem"``: fit the linear method on ``n_landmarks`` Nystroem features (O(N m^2)
        per pass instead of O(N^2)); the model is a kernel expansion on the landmarks, and
        ``training_coef_`` warm-starts an exact fit (``init=training_coef_``).
    n_landmarks : int or "auto", default=None
        Number of Nystroem landmarks (random training rows); None means 500. ``"auto"``
        lets the Gram spectrum choose them: the pivots of a pivoted-Cholesky factor of the
        training Gram matrix, as many as it takes for the left-out trace to fall to 1e-3 of
        ``tr G`` (at most 2000; see :func:`catdask.estimators.nystroem.choose_landmarks`).
    precision : {"auto", "float64"}, default="auto"
        ``"auto"``: when the Gram products are recomputed (G not stored, a built-in kernel),
        iterate on float32 tiles, then polish to ``tol`` anchored by exact float64 products
        (docs/design.md §3d); the objective, coefficients, stopping test and certificate are
        the float64 ones. ``"float64"``: exact float64 products throughout.
    device : str, optional
        Where the Gram products run (scikit-learn's array API convention): None computes where
        the input is (a PyTorch tensor on its own device); ``"cuda"``, ``"cuda:1"`` or
        ``"cpu"`` runs every product with PyTorch there
        (:class:`catdask.operators.torch_gram.TorchGramOperator`); with Dask inputs, on the
        workers that have a GPU (deploy/gpu-cluster.md). Needs ``pip install 'catdask[gpu]'``.

    Attributes
    ----------
    dual_coef_ : ndarray of shape (K, N)
        A, with ``w_k = sum_j A[k, j] phi(x_j)``; rows sum to zero.
    X_fit_ : ndarray of shape (N, D)
        The training patterns (original order).
    projection_offset_ : ndarray of shape (K,)
        Subtracted in :meth:`transform`: ``A G 1 / N`` (the centroid's coordinates) for
        ``origin="global"``; zero for ``origin="class"`` (the paper's ``A k(X, x)``, measured
        from the feature-space origin).
    classes_, objective_, n_iter_, converged_, stopping_reason_, certificate_, restarts_,
    best_restart_, eps_, class_means_, class_covariances_, class_counts_, n_features_in_
        As in :class:`CategorySpace`.
    fit_seconds_ : dict
        Wall seconds of the fit's phases (exact fits): ``"setup"``, ``"float32"`` and
        ``"polish"`` or ``"iterations"``, ``"certificate"`` (once the test has run),
        ``"finish"`` and ``"total"`` (the wall time of :meth:`fit` itself).
    n_iter_float32_ : int
        Iterations of the best restart on float32 tiles, before the hand-over and anchored
        after it (included in ``n_iter_``; 0 when every product was float64).
    landmark_indices_, training_coef_ : ndarray
        Only with ``approximation="nystroem"``: the training rows used as landmarks
        (``X_fit_``), and the solution as coefficients (K, N) on all training rows.
    landmark_residual_ : float
        Only with ``n_landmarks="auto"``: ``tr(G - G_nystroem) / tr G`` on the training set.

    See Also
    --------
    CategorySpace : the linear method.
    sklearn.decomposition.KernelPCA

    References
    ----------
    .. [1] Smith & Rangarajan, "A Category Space Approach to Supervised Dimensionality
       Reduction", eqs. (8), (31), (34), (37).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from catdask import KernelCategorySpace
    >>> X, y = load_iris(return_X_y=True)
    >>> kcs = KernelCategorySpace(gamma=0.5, n_restarts=2, random_state=0).fit(X, y)
    >>> kcs.transform(X[:5]).shape
    (5, 3)
    """

    _parameter_constraints: dict = {
        **BaseCategorySpace._parameter_constraints,
        "kernel": [StrOptions({"rbf", "linear", "poly"}), callable],
        "gamma": [Interval(Real, 0, None, closed="neither"), None],
        "degree": [Interval(Integral, 1, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "init": [StrOptions({"auto", "random", "decoupled"}), "array-like"],
        "max_gram_bytes": [Interval(Integral, 0, None, closed="left")],
        "approximation": [StrOptions({"nystroem"}), None],
        "n_landmarks": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"}), None],
        "precision": [StrOptions({"auto", "float64"})],
        "device": "no_validation",  # a str or torch.device, checked by torch_device
    }

    def __init__(
        self,
        kernel="rbf",
        *,
        gamma=None,
        degree=3,
        coef0=1,
        kernel_params=None,
        objective="quadratic",
        origin="global",
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
        max_gram_bytes=2 * 1024**3,
        approximation=None,
        n_landmarks=None,
        classifier="qda",
        precision="auto",
        device=None,
    ):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self._set_solver_params(objective, origin, eps, n_restarts, tol, max_iter, init,
                                random_state, certify, certify_at, verbose, acceleration)
        self.max_gram_bytes = max_gram_bytes
        self.approximation = approximation
        self.n_landmarks = n_landmarks
        self.classifier = classifier
        self.precision = precision
        self.device = device

    def _make_kernel(self, n_features):
        if self.kernel_params and not callable(self.kernel):
            own = {"rbf": "gamma", "poly": "gamma, degree and coef0", "linear": "none"}
            raise ValueError(
                f"kernel_params={self.kernel_params!r} is for a callable kernel; "
                f"kernel={self.kernel!r} takes its parameters as the estimator's own "
                f"({own.get(self.kernel, 'none')}), e.g. KernelCategorySpace(gamma=0.5).")
        gamma = self.gamma
        if gamma is None and self.kernel == "rbf":
            gamma = RBF_GAMMA_SCALE / n_features
        return make_kernel(
            self.kernel,
            n_features=n_features,
            gamma=gamma,
            degree=self.degree,
            coef0=self.coef0,
            kernel_params=self.kernel_params,
        )

    @_fit_context(prefer_skip_nested_validation=True)
    @logs_when_verbose
    def fit(self, X, y):
        """Learn the kernel category axes from X (n_samples, n_features) and labels y; returns
        self."""
        t_start = time.perf_counter()
        if self.approximation == "nystroem":
            if self.device is not None:
                raise ValueError(
                    f"device={self.device!r} runs the exact kernel fit's Gram products; "
                    "approximation='nystroem' fits on N x m features on the CPU: leave device "
                    "unset, or drop approximation for an exact fit on the device.")
            return self._fit_nystroem(X, y)
        target, X, classes_, caller_classes = ComputeTarget.for_fit(
            self, X, y, linear=False, device=self.device, in_memory=True)
        check_class_count_memory(X.shape[0], len(classes_))  # before any set-up
        kernel = self._make_kernel(X.shape[1])
        with target:
            # The operator works on the samples sorted by class, so every class is a contiguous
            # block of G; coefficients come back to the caller's order at the end.
            base = target.gram_operator(caller_classes.sort_rows(X), caller_classes.sorted(),
                                        kernel, max_gram_bytes=self.max_gram_bytes)
            classes = base.classes
            centred = CentredGramOperator(base)
            op = centred if self.origin == "global" else base
            # Set-up passes over G before the first iteration: at N = 200,000 about 30 s.
            report_stage(f"kernel fit set-up, N = {classes.n_samples:,}: the Gram matrix's "
                         "scale and the starts")
            self.eps_ = float(self.eps * _data_scale(centred.covariance_moments(), kernel=True))
            problem = KernelProblem(op, CategoryObjective(self.objective, self.origin, self.eps_))
            certifier = self._certifier(KernelCertifier(op, classes, self.origin))
            result = fit_restarts(
                problem, self._starts(problem, op, caller_classes),
                solver_options=self._solver_options(), certifier=certifier,
                # Float32 tiles only where they apply (G recomputed); the polish and the
                # certificate are float64.
                precision_schedule=target.precision_schedule(self.precision, base),
                moment=self.certify == "moment", started_at=t_start,
                **target.certification(self.certify_at, certifier, reads=base),
            )
            A, offset, coordinates = self._chosen_axes(problem, result, centred)
        self.kernel_ = kernel
        self.dual_coef_ = caller_classes.unsort(A)
        self.projection_offset_ = offset
        self.X_fit_ = X
        self.classes_ = classes_
        self.n_iter_float32_ = result.n_iter_float32
        self._fit_classifier(coordinates, classes.codes)
        self._set_fit_result(result)
        self.fit_seconds_ = result.fit_seconds(time.perf_counter())
        return self

    def _fit_nystroem(self, X, y):
        target, X, classes_, classes = ComputeTarget.for_fit(self, X, y, linear=False)
        check_class_count_memory(X.shape[0], len(classes_))
        kernel = self._make_kernel(X.shape[1])
        linear_params = {name: getattr(self, name) for name in (*SOLVER_PARAMS, "classifier")
                         if name != "random_state"}  # the landmarks' generator goes on
        with target:
            result, fitted = fit_nystroem(
                X, classes, kernel, linear_params=linear_params, n_landmarks=self.n_landmarks,
                rng=check_random_state(self.random_state),
            )
        self.kernel_ = kernel
        for name, value in fitted.items():
            setattr(self, name, value)
        self.classes_ = classes_
        # The linear fit on the features has warned already when it did not converge.
        self._set_fit_result(result, warn=False, name=(
            f"{type(self).__name__} (Nystroem, {len(self.landmark_indices_)} landmarks)"))
        return self

    def _starts(self, problem, op, caller_classes):
        """The restarts' starting points (``init``) on the class-sorted operator ``op``:
        auxiliary variables z, or coefficients given in the caller's sample order
        (``caller_classes``). Returns :class:`~catdask.core.engine.Starts`."""
        classes = op.classes
        K, N = classes.n_classes, op.n_samples
        labels, rng, given = self._labels_and_rng(kernel=True)
        if given is not None:
            if given.shape != (K, N):
                raise ValueError(
                    f"init array must have shape (K, N) = {(K, N)}; got {given.shape}.")
            return Starts(tuple(labels), lambda: problem.start_from_coefficients(
                caller_classes.sort(given)[None]))

        def evaluate():
            z0 = kernel_random_z(len(labels), classes, self.origin, rng)
            for r, label in enumerate(labels):
                if label == "decoupled":
                    z0[r] = kernel_decoupled_z(op, classes, self.origin)
            return problem.start_from_z(z0)

        return Starts(tuple(labels), evaluate)

    def _chosen_axes(self, problem, result, centred):
        """The chosen restart's ``(A, offset, coordinates)``: coefficients and the projection
        offset, and the training coordinates (K, N) as transform gives them; sorted samples,
        signs fixed."""
        A, projections = problem.axes(result.state, result.best_index)
        if self.origin == "global":
            # Coefficients on uncentred features (A H) and the centroid's coordinates.
            A = A - A.mean(axis=1, keepdims=True)
            offset = A @ centred.row_sums / centred.n_samples
        else:
            # The paper's coordinates A k(X, x), measured from the feature-space origin.
            offset = np.zeros(A.shape[0])
        P = projections - projections.mean(axis=1, keepdims=True)  # signs from the centroid,
        signs = self._fix_signs(P, centred.classes.codes)  # as in the linear case
        coordinates = projections * signs[:, None]  # what transform gives (sorted)
        return A * signs[:, None], offset * signs, coordinates

    def _transform_array(self, X):
        # A k(X_fit, x), measured from the feature-space centroid for origin="global" and from
        # the origin for origin="class" (paper section "Visualization"); rows of X in blocks.
        step = max(1, TRANSFORM_BLOCK_ENTRIES // max(self.X_fit_.shape[0], 1))
        out = np.empty((X.shape[0], self.dual_coef_.shape[0]))
        for a in range(0, X.shape[0], step):
            out[a : a + step] = self.kernel_(X[a : a + step], self.X_fit_) @ self.dual_coef_.T
        out -= self.projection_offset_
        return out

