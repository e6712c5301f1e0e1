"""Rapcsák's sufficient condition (paper, section "Euclidean setting"; docs/design.md section 4).

W is a global maximiser if ``blockdiag(R_k) - Lambda (x) I_D`` is negative semidefinite. Sound but
vacuous in practice: it needs every w_k to be a top eigenvector of its own R_k.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from .eigen import verified_top

__all__ = ["rapcsak_lambda_max"]

# The K D x K D matrix is formed (and its top eigenvalue verified) up to this order; above it,
# and for operators, Lanczos on matvecs.
RAPCSAK_DENSE_MAX = 2000


def rapcsak_lambda_max(point):
    """Upper bound on ``lambda_max(blockdiag(R_k) - Lambda (x) I_D)`` (normalised scale).

    Parameters
    ----------
    point : StationaryPoint

    Returns
    -------
    value : float
    check : str or None
        How the eigenvalue was obtained (see :data:`~catdask.certificate.eigen.EIGEN_CHECKS`);
        ``"lanczos"`` is a trusted estimate, which matters only if the condition passes. None
        when ``value`` is the diagonal-block lower bound ``max_k lambda_max(R_k) - Lambda_kk``
        (returned as soon as it exceeds the tolerance: the condition fails either way).
    """
    K, D, Lam = point.K, point.D, point.Lam
    n = K * D
    # The diagonal blocks of an NSD matrix are NSD, so lambda_max(M) >= lambda_max(R_k) -
    # Lambda_kk for every k (the verified lambda_max(R_k) of the scale, less a rounding
    # allowance). When that lower bound already exceeds the tolerance the condition fails
    # and the K D x K D matrix need not be formed: the usual case (docs/design.md section 4),
    # and on small kernel fits the largest single cost of the test (0.2-1.1 s of 0.5-2.5 s,
    # wine K-CQS, measured).
    lower = float(np.max(point.lam_max_R - np.diag(Lam))) - point.round_guard()
    if lower > point.tau:
        return lower, None
    if point.R_all is not None and n <= RAPCSAK_DENSE_MAX:
        matrix = scipy.linalg.block_diag(*point.R_all) - np.kron(Lam, np.eye(D))
        value, _, check = verified_top(n, matrix=matrix, v0=point.rng.standard_normal(n),
                                       shift=2.0 * (point.scale + point.lam_norm))
        return value, check

    def matvec(v):
        V = v.reshape(K, D)
        out = np.stack([point.apply(k, V[k]) for k in range(K)])
        return (out - Lam @ V).ravel()

    return point.top(matvec, shift=2.0 * (point.scale + point.lam_norm), n=n)[0], "lanczos"
