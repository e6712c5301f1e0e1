"""The paper's kernel W-step, implemented literally: a baseline for benchmarks and tests only.

``A = U V^T G^{-1/2}`` with ``U S V^T = svd(Y_ker G^{-1/2})`` and ``Y_ker = Z^T G`` (paper eqs.
(34), (37)). ``G^{-1/2}`` comes from one ``eigh`` of G per fit (O(N^3)); each iteration
then costs a few K x N x N products. catdask's solver uses the equivalent
``A = (Z^T G Z)^{-1/2} Z^T`` (docs/design.md §3) instead; both produce the same iterates from
the same start, which is what the benchmarks check before comparing times.

Not part of the public API.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from catdask.core.problems import CategoryObjective

__all__ = ["PaperKernelResult", "paper_kernel_fit"]


@dataclass
class PaperKernelResult:
    A: np.ndarray
    P: np.ndarray
    objective: float
    n_iter: int
    converged: bool
    history: list = field(default_factory=list)
    seconds_eigh: float = 0.0
    seconds: float = 0.0


def _inv_sqrt_psd(G, rtol=1e-12):
    """``G^{-1/2}`` (pseudo-inverse square root) from one symmetric eigendecomposition."""
    lam, V = np.linalg.eigh(G)
    keep = lam > rtol * lam[-1]
    return (V[:, keep] / np.sqrt(lam[keep])) @ V[:, keep].T


def paper_kernel_fit(G, classes, z0, *, objective="quadratic", origin="class", eps=0.0,
                     tol=1e-8, max_iter=1000):
    """Alternate the Z-step and the paper's W-step from auxiliary variables ``z0`` (N,).

    Parameters
    ----------
    G : ndarray (N, N)
        Gram matrix (already centred, ``H G H``, for ``origin="global"``).
    classes : ClassIndex
    z0 : ndarray (N,)
        Starting auxiliary variables (the first W-step uses them, as catdask's solver does).
    tol : float
        Stop when the RKHS norm of the change of A, ``sqrt(tr(dA G dA^T))``, is at most tol.
    """
    t0 = time.perf_counter()
    G_inv_sqrt = _inv_sqrt_psd(G)
    t_eigh = time.perf_counter() - t0
    obj = CategoryObjective(objective, origin, eps)
    K, N = classes.n_classes, G.shape[0]
    rows = np.arange(N)

    def w_step(z):
        Z = np.zeros((N, K))
        Z[rows, classes.codes] = z
        Y = Z.T @ G  # Y_ker (eq. (34))
        U, _, Vt = np.linalg.svd(Y @ G_inv_sqrt, full_matrices=False)
        A = U @ Vt @ G_inv_sqrt  # eq. (37)
        return A, A @ G

    def z_step(P):
        zs = obj.zstep(P[classes.codes, rows][None], classes)
        return zs.z[0], float(zs.objective[0])

    A, P = w_step(np.asarray(z0, dtype=float))
    z, f = z_step(P)
    history = [f]
    converged = False
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        A_new, P_new = w_step(z)
        z, f = z_step(P_new)
        history.append(f)
        dA, dP = A_new - A, P_new - P
        step = np.sqrt(max(float(np.einsum("kn,kn->", dA, dP)), 0.0))
        A, P = A_new, P_new
        if step <= tol:
            converged = True
            break
    return PaperKernelResult(A=A, P=P, objective=f, n_iter=n_iter, converged=converged,
                             history=history, seconds_eigh=t_eigh,
                             seconds=time.perf_counter() - t0)
