"""Rapcsák's sufficient condition (paper, "Euclidean setting"; docs/design.md section 4)."""

from __future__ import annotations

import numpy as np
import scipy.linalg

from .eigen import verified_top


def rapcsak_lambda_max(point):
    """Upper bound on ``lambda_max(blockdiag(R_k) - Lambda (x) I_D)`` at a StationaryPoint
    (normalised scale): ``(value, check)``. ``value`` is an upper bound, or a lower bound that
    already exceeds ``tol * scale`` (a diagonal block proves the condition fails; ``check`` is
    then None). ``check`` says how the eigenvalue was obtained
    (:data:`~catdask.certificate.eigen.EIGEN_CHECKS`); ``"lanczos"``, a trusted estimate,
    matters only if the condition passes.
    """
    K, D, Lam = point.K, point.D, point.Lam
    n = K * D
    # First the diagonal blocks: lambda_max(M) >= v^T R_k v - Lambda_kk (v the top vector of R_k
    # already computed), so one such value above tol * scale proves the condition fails without
    # forming the K D x K D matrix: the usual case, and the largest cost of the test otherwise.
    diagonal = float(np.max(point.lam_low_R - np.diag(Lam)))
    if diagonal > point.tau:
        return diagonal, None
    if point.R_all is not None and n <= point.budget.rapcsak_dense_max:
        matrix = scipy.linalg.block_diag(*point.R_all) - np.kron(Lam, np.eye(D))
        value, _, check = verified_top(n, matrix=matrix, v0=point.rng.standard_normal(n),
                                       shift=2.0 * (point.scale + point.lam_norm),
                                       budget=point.budget)
        return value, check

    def matvec(v):
        V = v.reshape(K, D)
        out = np.stack([point.apply(k, V[k]) for k in range(K)])
        return (out - Lam @ V).ravel()

    return point.top(matvec, shift=2.0 * (point.scale + point.lam_norm), n=n)[0], "lanczos"
