"""Classification rules in category space: what ``predict`` does with the K coordinates.

Every rule reads the K-dimensional category-space coordinates ``p`` of a pattern (what
``transform`` returns) and scores each class; ``predict`` takes the best score.

- ``"gaussian"`` (the default): a shared-covariance Gaussian rule (linear discriminant analysis)
  in the K-dimensional space, with the class means, class priors and pooled within-class
  covariance of the training coordinates. Score: the log posterior up to a constant,
  ``p^T S^-1 m_k - 1/2 m_k^T S^-1 m_k + log pi_k``.
- ``"nearest-mean"``: the nearest class mean in the K-dimensional space (Euclidean), equal
  priors; the score is ``-||p - m_k||^2 / (2 s^2)`` with ``s^2`` the mean within-class variance
  per axis, i.e. a Gaussian rule with an isotropic shared covariance.
- ``"angle"``: the paper's angle classifier, ``argmax_k |p_k|`` (the class whose axis makes the
  smallest angle with ``p``, whatever the axis's sign); the score is ``|p_k| / ||p||``, the
  cosine of that angle. It uses no class statistics and gives no probabilities.

Both Gaussian rules give class probabilities (a softmax of the scores). The statistics are
fitted once, on the training coordinates, for every rule, so ``classifier`` can be changed
with ``set_params`` after fitting.
"""

from __future__ import annotations

import numpy as np
from scipy.special import softmax

__all__ = ["CLASSIFIERS", "DEFAULT_CLASSIFIER", "ClassStatistics", "class_statistics",
           "class_scores", "class_probabilities"]

#: The rules ``predict`` can use; the first is the default.
CLASSIFIERS = ("gaussian", "nearest-mean", "angle")
DEFAULT_CLASSIFIER = CLASSIFIERS[0]
#: Rules with class probabilities (``predict_proba``).
PROBABILISTIC = ("gaussian", "nearest-mean")

# Added to the pooled covariance's diagonal, relative to its mean variance, so a class space
# with a (numerically) constant coordinate still gives a finite, well-defined rule.
COVARIANCE_RIDGE = 1e-8


class ClassStatistics:
    """Class means, priors and pooled within-class covariance of training coordinates.

    Parameters
    ----------
    means : ndarray of shape (K, K)
        Row k: the mean coordinates of class k.
    covariance : ndarray of shape (K, K)
        Pooled within-class covariance ``sum_k sum_{i in C_k} (p_i - m_k)(p_i - m_k)^T / N``
        (each class weighted by its size, as scikit-learn's LDA does).
    priors : ndarray of shape (K,)
        Class shares of the training set.
    """

    def __init__(self, means, covariance, priors):
        self.means = np.asarray(means, dtype=float)
        self.covariance = np.asarray(covariance, dtype=float)
        self.priors = np.asarray(priors, dtype=float)


def class_statistics(P, codes, n_classes):
    """Statistics of the training coordinates that the Gaussian rules need.

    Parameters
    ----------
    P : ndarray of shape (n_samples, K)
        Training coordinates, as ``transform`` gives them.
    codes : ndarray of shape (n_samples,)
        Class index of each row (0 .. n_classes - 1).
    n_classes : int

    Returns
    -------
    ClassStatistics
    """
    P = np.asarray(P, dtype=float)
    codes = np.asarray(codes)
    counts = np.bincount(codes, minlength=n_classes).astype(float)
    if np.any(counts == 0):
        raise ValueError("every class needs at least one training sample")
    sums = np.zeros((n_classes, P.shape[1]))
    np.add.at(sums, codes, P)
    means = sums / counts[:, None]
    residual = P - means[codes]
    covariance = residual.T @ residual / len(P)
    return ClassStatistics(means, covariance, counts / counts.sum())


def _regularised(covariance):
    K = covariance.shape[0]
    scale = np.trace(covariance) / K
    ridge = COVARIANCE_RIDGE * scale if scale > 0 else 1.0
    return covariance + ridge * np.eye(K)


def class_scores(rule, P, stats):
    """Score of each class for each pattern; the prediction is the argmax.

    Parameters
    ----------
    rule : {"gaussian", "nearest-mean", "angle"}
    P : ndarray of shape (n_samples, K)
        Category-space coordinates.
    stats : ClassStatistics
        Training statistics (unused by ``"angle"``).

    Returns
    -------
    scores : ndarray of shape (n_samples, K)
        ``"gaussian"``/``"nearest-mean"``: log posterior up to a per-row constant;
        ``"angle"``: the cosine ``|p_k| / ||p||`` (0 for the origin itself).
    """
    P = np.asarray(P, dtype=float)
    if rule == "angle":
        norms = np.linalg.norm(P, axis=1, keepdims=True)
        return np.abs(P) / np.where(norms > 0, norms, 1.0)
    means = stats.means
    if rule == "nearest-mean":
        variance = np.trace(stats.covariance) / len(means)
        variance = variance if variance > 0 else 1.0
        sq = ((P[:, None, :] - means[None]) ** 2).sum(axis=-1)
        return -sq / (2.0 * variance)
    if rule == "gaussian":
        coef = np.linalg.solve(_regularised(stats.covariance), means.T)  # S^-1 m_k, (K, K)
        intercept = -0.5 * np.einsum("kj,jk->k", means, coef) + np.log(stats.priors)
        return P @ coef + intercept
    raise ValueError(f"Unknown classifier {rule!r}; expected one of {list(CLASSIFIERS)}.")


def class_probabilities(rule, P, stats):
    """Posterior class probabilities of a Gaussian rule (rows sum to 1)."""
    if rule not in PROBABILISTIC:
        raise ValueError(
            f"classifier={rule!r} gives no probabilities; use one of {list(PROBABILISTIC)}."
        )
    return softmax(class_scores(rule, P, stats), axis=1)
