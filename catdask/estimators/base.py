"""Shared scikit-learn machinery of the two category-space estimators.

The subclasses build the problem (linear or kernel), its starts and certifier, run them
through the fit engine (:func:`catdask.core.engine.fit_restarts`) and say how to project new
data; parameter validation, solver options, the fitted restart attributes, the classification
rules and warnings live here once.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import (BaseEstimator, ClassifierMixin, ClassNamePrefixFeaturesOutMixin,
                          TransformerMixin)
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (_check_feature_names_in, check_is_fitted, check_random_state,
                                      validate_data)

from ..certificate.certifiers import NoCertifier
from ..core.engine import CERTIFY_AT, SolverOptions
from ..core.validation import explain_invalid_input
from ..distributed.inputs import is_distributed_input
from ..method_names import MAX_RESTARTS
from .certificate_access import CertificateOnAccess
from .classify import (CLASSIFIERS, PROBABILISTIC, ClassStatistics, class_log_probabilities,
                       class_probabilities, class_scores, class_statistics)

logger = logging.getLogger("catdask")

#: Parameters of both estimators (the solver's): objective, restarts, stopping, starts.
SOLVER_PARAMS = ("objective", "origin", "eps", "n_restarts", "tol", "max_iter", "init",
                 "random_state", "certify", "certify_at", "verbose", "acceleration")

@contextlib.contextmanager
def _shown_logs(verbose):
    """Within the block, with ``verbose``: catdask's INFO records are emitted, on stderr when
    logging is not configured (Python's default shows WARNING and above only)."""
    if not verbose:
        yield
        return
    log = logging.getLogger("catdask")
    level = log.level
    handler = None
    if log.getEffectiveLevel() > logging.INFO:
        log.setLevel(logging.INFO)
    if not log.hasHandlers():
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        log.addHandler(handler)
    try:
        yield
    finally:
        log.setLevel(level)
        if handler is not None:
            log.removeHandler(handler)


def logs_when_verbose(fit):
    """Decorate an estimator's ``fit``: its progress records are shown when ``self.verbose``."""

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        with _shown_logs(self.verbose):
            return fit(self, *args, **kwargs)

    return wrapper


class BaseCategorySpace(
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClassifierMixin, CertificateOnAccess,
    BaseEstimator
):
    """Common parameters, fitting workflow and the classification rules."""

    _parameter_constraints: dict = {
        "objective": [StrOptions({"quadratic", "absolute"})],
        "origin": [StrOptions({"class", "global"})],
        "eps": [Interval(Real, 0, None, closed="neither")],
        "n_restarts": [Interval(Integral, 1, MAX_RESTARTS, closed="both")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"auto", "random", "decoupled", "class-means"}), "array-like"],
        "random_state": ["random_state"],
        "certify": ["boolean", StrOptions({"moment"})],
        "certify_at": [StrOptions(set(CERTIFY_AT))],
        "verbose": ["verbose"],
        "acceleration": [StrOptions({"auto", "anderson", "none"})],
        "classifier": [StrOptions(set(CLASSIFIERS))],
    }

    def _set_solver_params(self, *values):
        """Store the parameters both estimators share, in the order of ``SOLVER_PARAMS``
        (called from ``__init__`` only, as scikit-learn requires)."""
        for name, value in zip(SOLVER_PARAMS, values, strict=True):
            setattr(self, name, value)

    # ------------------------------------------------------------------ fitting workflow
    def _solver_options(self):
        """The solver settings of this estimator's fits (progress: every 50 iterations with
        ``verbose``)."""
        return SolverOptions(tol=self.tol, max_iter=self.max_iter,
                             acceleration=self.acceleration,
                             log_every=50 if self.verbose else 0)

    def _certifier(self, certifier):
        """``certifier`` when this fit is to be certified, else a :class:`NoCertifier` that
        says why not (CAS is not quadratic; ``certify=False``)."""
        if self.objective != "quadratic":
            return NoCertifier(None)  # CAS: not applicable (the objective is not quadratic)
        if not self.certify:
            return NoCertifier("not requested (certify=False)")
        return certifier

    def _set_fit_result(self, result, *, name=None, warn=True):
        """Store a :class:`~catdask.core.engine.FitResult`'s restart records and diagnostics; log
        the summary (``name``: the model's description) and, with ``warn``, warn when the chosen
        restart did not converge. A pending :class:`~catdask.core.engine.RestartCertification` is
        kept and runs on first access of ``certificate_`` or ``restarts_``
        (:mod:`.certificate_access`).
        """
        best = result.best_run
        self.objective_ = best.objective
        self.n_iter_ = best.n_iter
        self.converged_ = best.converged
        self.stopping_reason_ = best.stopping_reason
        self.best_restart_ = best.index
        self._store_certification(result.certification)
        self._log_summary(name or type(self).__name__, result)
        if warn and not best.converged:
            if best.stopping_reason in ("rank-deficient", "objective-stalled"):
                msg = (
                    f"The objective stopped changing while the axes still move "
                    f"({best.stopping_reason}: last step {best.step:.2e} > tol={self.tol}). "
                    "Either tol is below what round-off allows, or the centred data have "
                    "rank < K so the optimal axes are not unique (the objective value is "
                    "reliable; the axes within the degenerate subspace are arbitrary)."
                )
            else:
                msg = (
                    f"{type(self).__name__} did not converge in max_iter={self.max_iter} "
                    f"iterations (last step {best.step:.2e} > tol={self.tol}). Increase "
                    "max_iter, loosen tol, or use init='decoupled'."
                )
            warnings.warn(msg, ConvergenceWarning, stacklevel=3)

    def _log_deferred_certificate(self, seconds):
        with _shown_logs(self.verbose):
            if self.verbose:
                logger.info("%s: certificate (%.2f s, on first access): %s",
                            type(self).__name__, seconds, self.certificate_)

    def _log_summary(self, name, result):
        """With ``verbose``: one INFO line on the fitted model (chosen restart, certificate)."""
        if not self.verbose:
            return
        best = result.best_run
        certificate = (self.certificate_ if "certificate_" in self.__dict__
                       else "pending (runs on first access of certificate_ or restarts_)")
        logger.info(
            "%s: best of %d restarts is restart %d (%s start): objective %.10g, %d iterations, "
            "%s; certificate: %s",
            name, len(result.runs), best.index, best.start, best.objective, best.n_iter,
            "converged" if best.converged else best.stopping_reason, certificate,
        )

    def _labels_and_rng(self, kernel):
        from ..core.starts import start_labels

        rng = check_random_state(self.random_state)
        rng = np.random.default_rng(rng.randint(np.iinfo(np.int32).max))
        if isinstance(self.init, str):
            return start_labels(self.init, self.n_restarts, kernel=kernel), rng, None
        return ["given"], rng, np.asarray(self.init, dtype=float)

    # ------------------------------------------------------------------ projections
    def _fix_signs(self, P, codes):
        """Flip axes so each class has a non-negative mean coordinate on its own axis (``P`` (K, N):
        training coordinates from the training centroid). The objectives are sign-invariant, so this
        only makes the output deterministic, like scikit-learn's ``svd_flip``.
        """
        K = P.shape[0]
        means = np.array([P[k, codes == k].mean() for k in range(K)])
        return np.where(means < 0, -1.0, 1.0)

    def transform(self, X):
        """Category-space coordinates of each pattern.

        Linear: ``W^T (x - x0)`` with x0 the training centroid for ``origin="global"``, and
        ``W^T x`` (the paper's ``y_i = W^T x_i``) for ``origin="class"``, whose model has no
        common origin. Kernel: ``A k(X_fit, x)``, measured from the feature-space centroid or
        origin in the same way. The angle classifier measures angles from this origin.

        ``X`` (n_samples, n_features) gives an ndarray (n_samples, K); a Dask array / zarr input
        chunked by rows gives a lazy Dask array, computed one task per row block.
        """
        if is_distributed_input(X):
            from ..distributed.transform import transform_blockwise

            return transform_blockwise(self, X)
        return self._transform_array(self._check_fitted_X(X))

    def _transform_array(self, X):
        """Coordinates of validated in-memory patterns (each estimator's formula)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ classification
    def _fit_classifier(self, P, codes):
        """Fit the classification rules' class statistics from the training coordinates ``P`` (K,
        N), as :meth:`transform` gives them, and each sample's class index ``codes`` (N,).
        """
        self._set_class_statistics(
            class_statistics(np.asarray(P, dtype=float).T, codes, len(self.classes_)))

    def _set_class_statistics(self, stats):
        """Store the fitted :class:`~catdask.estimators.classify.ClassStatistics`."""
        self.class_means_ = stats.means
        self.class_covariances_ = stats.covariances
        self.class_counts_ = stats.counts

    def _class_statistics(self):
        check_is_fitted(self)
        if self.classifier == "angle":
            return None  # the angle rule uses no class statistics
        if not hasattr(self, "class_means_"):
            raise AttributeError(
                f"classifier={self.classifier!r} needs the class statistics of the training "
                "coordinates, which this model (stored before they existed) lacks; use "
                "classifier='angle' or refit."
            )
        return ClassStatistics(self.class_means_, self.class_covariances_, self.class_counts_)

    def _scores(self, P):
        return class_scores(self.classifier, P, self._class_statistics())

    def _blockwise(self, X, func, n_columns, dtype=np.float64):
        """``func`` of the coordinates of ``X``: at once in memory, lazily per row block of a
        Dask input. ``n_columns`` None: ``func`` returns one value per row."""
        P = self.transform(X)
        if not hasattr(P, "map_blocks"):
            return func(P)
        if n_columns is None:
            return P.map_blocks(func, drop_axis=1, dtype=dtype)
        return P.map_blocks(func, chunks=(P.chunks[0], (n_columns,)), dtype=dtype)

    def predict(self, X):
        """Class of each pattern by the ``classifier`` rule in category space.

        ``"qda"`` (default): a Gaussian rule with one covariance per class on the K
        coordinates; ``"lda"``: the shared-covariance Gaussian rule; ``"nearest-mean"``: the
        nearest class mean; ``"angle"``: the paper's angle classifier ``argmax_k |p_k|``.
        See :mod:`catdask.estimators.classify`. A Dask / zarr ``X`` chunked by rows gives a lazy
        Dask array (likewise in the methods below).
        """
        check_is_fitted(self)
        return self._blockwise(
            X, lambda P: self.classes_[np.argmax(self._scores(P), axis=1)], None,
            dtype=self.classes_.dtype,
        )

    def decision_function(self, X):
        """Class scores of the ``classifier`` rule; ``predict`` is their argmax.

        Gaussian rules: the log posterior up to a per-row constant; ``"angle"``: the cosine
        of the angle between the pattern and each (sign-free) axis. Shape (n_samples, n_classes);
        with two classes, scikit-learn's convention: (n_samples,), the score of ``classes_[1]``
        minus that of ``classes_[0]`` (positive means ``classes_[1]``).
        """
        check_is_fitted(self)
        K = len(self.classes_)

        def scores(P):
            s = self._scores(P)
            return s[:, 1] - s[:, 0] if K == 2 else s

        return self._blockwise(X, scores, None if K == 2 else K)

    def _has_probabilities(self):
        if self.classifier not in PROBABILISTIC:
            raise AttributeError(
                f"classifier={self.classifier!r} gives no probabilities; predict_proba needs "
                f"one of {list(PROBABILISTIC)}."
            )
        return True

    @available_if(_has_probabilities)
    def predict_proba(self, X):
        """Posterior class probabilities of a Gaussian rule (``classifier`` in
        ``{"qda", "lda", "nearest-mean"}``): (n_samples, n_classes), columns in the order of
        ``classes_``, rows summing to 1."""
        return self._per_class(X, class_probabilities)

    @available_if(_has_probabilities)
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, from the class scores (finite where a probability
        underflows to 0)."""
        return self._per_class(X, class_log_probabilities)

    def _per_class(self, X, rule_output):
        """``rule_output(classifier, P, stats)`` on the coordinates of ``X``, block by block:
        one column per class."""
        check_is_fitted(self)
        stats = self._class_statistics()
        return self._blockwise(
            X, lambda P: rule_output(self.classifier, P, stats), len(self.classes_)
        )

    def fit_transform(self, X, y=None, **fit_params):
        """Fit to ``(X, y)`` and return the category-space coordinates of ``X``."""
        return self.fit(X, y, **fit_params).transform(X)

    @property
    def _n_features_out(self):
        return len(self.classes_)

    def get_feature_names_out(self, input_features=None):
        """``axis_<class>`` for each output column: column k of :meth:`transform` is the axis of
        ``classes_[k]``, named as ``catdask predict`` names it. ``input_features`` is only
        checked against ``feature_names_in_``, as scikit-learn does."""
        check_is_fitted(self, "classes_")
        _check_feature_names_in(self, input_features, generate_names=False)
        return np.asarray([f"axis_{c}" for c in self.classes_], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.allow_nan = False
        return tags

    def _expected_failed_checks(self):
        """scikit-learn common checks this estimator fails by design, with the reason (for
        ``tests/estimators/test_sklearn_checks.py``).
        """
        return {}

    def _check_fitted_X(self, X):
        check_is_fitted(self)
        try:
            return validate_data(self, X, reset=False, dtype=np.float64)
        except (TypeError, ValueError):
            explain_invalid_input(X)
            raise
