"""scikit-learn's common estimator checks over every estimator catdask exports."""

from __future__ import annotations

import inspect

from sklearn.base import BaseEstimator
from sklearn.utils.estimator_checks import parametrize_with_checks

import catdask


def _exported_estimators():
    """Every estimator class in ``catdask.__all__``: a new one cannot escape the checks."""
    classes = [getattr(catdask, n) for n in catdask.__all__]
    return [c(n_restarts=2) for c in classes if inspect.isclass(c) and issubclass(c, BaseEstimator)]


@parametrize_with_checks(
    _exported_estimators(),
    # Declared and justified on each estimator (``_expected_failed_checks``).
    expected_failed_checks=lambda est: est._expected_failed_checks(),
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
