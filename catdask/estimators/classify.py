"""Classification rules in category space: what ``predict`` does with the K coordinates ``p``.

- ``"qda"`` (the default): one Gaussian covariance per class. The category space gives each
  class its own axis of large spread, so the class covariances differ by construction (a shared
  one lost accuracy on breast cancer; ``benchmarks/bench_predict.py``). Each class covariance
  is shrunk towards the pooled one with a weight of K pseudo-samples (which keeps a class of
  fewer than K+1 samples usable). Score: the log posterior up to a constant,
  ``-1/2 (p - m_k)^T S_k^-1 (p - m_k) - 1/2 log det S_k + log pi_k``.
- ``"lda"``: the pooled within-class covariance S, ``p^T S^-1 m_k - 1/2 m_k^T S^-1 m_k + log pi_k``.
- ``"nearest-mean"``: ``-||p - m_k||^2 / (2 s^2)``, ``s^2`` the mean within-class variance per
  axis (an isotropic shared covariance, equal priors).
- ``"angle"``: the paper's angle classifier ``argmax_k |p_k|``; score ``|p_k| / ||p||``, the
  cosine of the angle. No class statistics, no probabilities.

The Gaussian rules give probabilities (a softmax of the scores). The statistics of every rule
are fitted together, so ``classifier`` can be changed with ``set_params`` after fitting.
"""

from __future__ import annotations

import logging

import numpy as np
from scipy.special import log_softmax, softmax

logger = logging.getLogger("catdask.estimators")

#: The rules ``predict`` can use; the first is the default.
CLASSIFIERS = ("qda", "lda", "nearest-mean", "angle")
#: Rules with class probabilities (``predict_proba``).
PROBABILISTIC = ("qda", "lda", "nearest-mean")

# Added to a covariance's diagonal, relative to its mean variance, so a category space with a
# (numerically) constant coordinate still gives a finite, well-defined rule.
COVARIANCE_RIDGE = 1e-8


class ClassStatistics:
    """Class means (K, K; row k: class k), covariances (K, K, K;
    ``sum_{i in C_k} (p_i - m_k)(p_i - m_k)^T / n_k``) and sizes ``n_k`` of training coordinates.
    """

    def __init__(self, means, covariances, counts):
        self.means = np.asarray(means, dtype=float)
        self.covariances = np.asarray(covariances, dtype=float)
        self.counts = np.asarray(counts, dtype=float)

    @property
    def priors(self):
        """Class shares of the training set, ``pi_k = n_k / N``."""
        return self.counts / self.counts.sum()

    @property
    def pooled(self):
        """Pooled within-class covariance ``sum_k pi_k S_k`` (as scikit-learn's LDA)."""
        return np.einsum("k,kij->ij", self.priors, self.covariances)

    def shrunk(self):
        """Class covariances shrunk towards the pooled one by K pseudo-samples."""
        K = len(self.counts)
        weight = (self.counts / (self.counts + K))[:, None, None]
        return weight * self.covariances + (1.0 - weight) * self.pooled[None]


def class_statistics(P, codes, n_classes):
    """:class:`ClassStatistics` of the training coordinates ``P`` (n_samples, K), as ``transform``
    gives them, with each row's class index in ``codes``.
    """
    P = np.asarray(P, dtype=float)
    codes = np.asarray(codes)
    counts = np.bincount(codes, minlength=n_classes).astype(float)
    if np.any(counts == 0):
        raise ValueError("every class needs at least one training sample")
    K = P.shape[1]
    means = np.zeros((n_classes, K))
    covariances = np.zeros((n_classes, K, K))
    for k in range(n_classes):
        Pk = P[codes == k]
        means[k] = Pk.mean(axis=0)
        residual = Pk - means[k]
        covariances[k] = residual.T @ residual / len(Pk)
    return ClassStatistics(means, covariances, counts)


#: Copies of N x K arrays (coefficients, coordinates, iterates) a kernel fit holds at once:
#: measured peak RSS at N = 4,000 was 8 K^3 bytes (the class covariances) plus 8 N K x ~8.
_N_BY_K_COPIES = 8


def check_class_count_memory(n_samples, n_classes, available=None):
    """Log what a fit on ``n_classes`` classes holds, and refuse it before it starts when that
    exceeds ``available`` bytes (default: the host's free memory). The cost grows as K^3: one K x K
    covariance per class, besides N x K coordinates and iterates (``ValueError`` above it)."""
    N, K = int(n_samples), int(n_classes)
    by_class = 8.0 * K**3
    by_sample = 8.0 * _N_BY_K_COPIES * N * K
    if available is None:
        from ..distributed.host import available_memory_bytes

        available = available_memory_bytes()
    logger.info("fit on K = %d classes, N = %d: about %.2g GiB (K x K per class) + %.2g GiB "
                "(N x K)", K, N, by_class / 2**30, by_sample / 2**30)
    if by_class + by_sample > available:
        raise ValueError(
            f"K = {K:,} classes need about {(by_class + by_sample) / 2**30:,.1f} GiB to fit: "
            f"{by_class / 2**30:,.1f} GiB for a K x K covariance per class and "
            f"{by_sample / 2**30:,.1f} GiB for N x K coordinates (N = {N:,}), more than the "
            f"{available / 2**30:,.1f} GiB of memory available; merge classes or fit on a "
            "larger machine.")


def _regularised(covariance):
    """``covariance`` plus a ridge relative to its mean variance (a finite rule when singular)."""
    K = covariance.shape[-1]
    scale = np.trace(covariance, axis1=-2, axis2=-1) / K
    ridge = np.where(scale > 0, COVARIANCE_RIDGE * scale, 1.0)
    return covariance + np.multiply.outer(ridge, np.eye(K))


def class_scores(rule, P, stats):
    """Score of each class (n_samples, K) for each row of the coordinates ``P`` under ``rule``; the
    prediction is the argmax. Gaussian rules: log posterior up to a per-row constant; ``"angle"``:
    the cosine ``|p_k| / ||p||`` (0 for the origin itself; ``stats`` unused).
    """
    P = np.asarray(P, dtype=float)
    if rule == "angle":
        norms = np.linalg.norm(P, axis=1, keepdims=True)
        return np.abs(P) / np.where(norms > 0, norms, 1.0)
    means = stats.means
    if rule == "qda":
        scores = np.empty((len(P), len(means)))
        for k, cov in enumerate(_regularised(stats.shrunk())):
            chol = np.linalg.cholesky(cov)
            white = np.linalg.solve(chol, (P - means[k]).T)  # L^-1 (p - m_k)
            log_det = 2.0 * np.log(np.diag(chol)).sum()
            scores[:, k] = -0.5 * (white**2).sum(axis=0) - 0.5 * log_det + np.log(stats.priors[k])
        return scores
    if rule == "nearest-mean":
        variance = np.trace(stats.pooled) / len(means)
        variance = variance if variance > 0 else 1.0
        sq = ((P[:, None, :] - means[None]) ** 2).sum(axis=-1)
        return -sq / (2.0 * variance)
    if rule == "lda":
        coef = np.linalg.solve(_regularised(stats.pooled), means.T)  # S^-1 m_k, (K, K)
        intercept = -0.5 * np.einsum("kj,jk->k", means, coef) + np.log(stats.priors)
        return P @ coef + intercept
    raise ValueError(f"Unknown classifier {rule!r}; expected one of {list(CLASSIFIERS)}.")


def _check_probabilistic(rule):
    if rule not in PROBABILISTIC:
        raise ValueError(
            f"classifier={rule!r} gives no probabilities; use one of {list(PROBABILISTIC)}."
        )


def class_probabilities(rule, P, stats):
    """Posterior class probabilities of a Gaussian rule (rows sum to 1)."""
    _check_probabilistic(rule)
    return softmax(class_scores(rule, P, stats), axis=1)


def class_log_probabilities(rule, P, stats):
    """Logarithm of :func:`class_probabilities`, from the scores themselves (finite where a
    probability underflows to 0).
    """
    _check_probabilistic(rule)
    return log_softmax(class_scores(rule, P, stats), axis=1)
