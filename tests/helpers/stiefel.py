"""Brute-force companions of the certificate tests: the Stiefel manifold and CQS by hand.

Independent of catdask's solver on purpose (the tests compare the two).
"""

from __future__ import annotations

import numpy as np


def polar(Y):
    U, _, Vt = np.linalg.svd(Y, full_matrices=False)
    return U @ Vt


def objective(R, W):
    """f(W) = 1/2 sum_k w_k^T R_k w_k; W of shape (D, K) or a stack (n, D, K)."""
    return 0.5 * np.einsum("...dk,kde,...ek->...", W, R, W)


def maximise(R, W, tol=1e-11, max_iter=20000):
    """Alternating maximiser: W <- polar([R_1 w_1, ..., R_K w_K]) until ||dW|| <= tol."""
    for _ in range(max_iter):
        W_new = polar(np.stack([R[k] @ W[:, k] for k in range(W.shape[1])], axis=1))
        if np.linalg.norm(W_new - W) <= tol:
            return W_new
        W = W_new
    return W


def random_stiefel(rng, D, K, n=None):
    shape = (D, K) if n is None else (n, D, K)
    Q, _ = np.linalg.qr(rng.standard_normal(shape))
    return Q


def random_problem(rng, D, K):
    """Random PSD R_k of random ranks 1..D+1 (K, D, D)."""
    R = []
    for _ in range(K):
        A = rng.standard_normal((D, int(rng.integers(1, D + 2))))
        R.append(A @ A.T)
    return np.stack(R)


def restarts(R, rng, n):
    """n alternating ascents from Haar-random starts: their points and objectives."""
    D, K = R.shape[1], R.shape[0]
    Ws = [maximise(R, random_stiefel(rng, D, K)) for _ in range(n)]
    return Ws, np.array([objective(R, W) for W in Ws])


def problem_and_best(rng, D, K, *, n_restarts, n_random):
    """A :func:`random_problem` with its :func:`restarts` and the best objective seen among
    them and ``n_random`` Haar-random points (a lower bound on the maximum every certificate
    bound must stay above): ``(R, Ws, f, best)``."""
    R = random_problem(rng, D, K)
    Ws, f = restarts(R, rng, n_restarts)
    best = max(f.max(), objective(R, random_stiefel(rng, D, K, n=n_random)).max())
    return R, Ws, f, best
