"""Top eigenpairs of every class block of a Gram operator, all classes per Gram pass.

The decoupled kernel start needs the top eigenvector of each class block ``G_kk`` (or its
centred form; docs/design.md §3c). With large classes on a cluster, one Lanczos run per class
costs one round trip and one (non-symmetric) class product per step, class after class. Here
the K Lanczos recurrences run in lockstep: each step is one product with the block-diagonal
``diag(G_11, ..., G_KK)`` (:meth:`BlockGramOperator.class_block_matmul`), which a tiled operator
evaluates in one pass over the class blocks' symmetric tiles. The K problems are independent,
so this is K ordinary Lanczos runs (full reorthogonalisation) that share their passes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["class_block_top_eigenpairs"]


def class_block_top_eigenpairs(matmul, members, *, tol=1e-10, max_steps=200, seed=0):
    """Top eigenpair of every diagonal block of a symmetric PSD block-diagonal operator.

    Parameters
    ----------
    matmul : callable
        ``v (N,) -> M v`` with ``M`` block diagonal, block k on the indices ``members[k]``.
    members : list of int arrays
        The indices of each block (disjoint; blocks may be empty).
    tol : float
        Stop a block when its Ritz residual ``|beta_j s_j|`` is at most ``tol`` times its top
        Ritz value (the eigenvector is then accurate to about ``tol`` over the spectral gap).
    max_steps : int
        Lanczos steps at most (one ``matmul`` each); a block not converged by then returns its
        best Ritz pair.
    seed : int
        Seed of the (deterministic) random start vectors.

    Returns
    -------
    list of (float, ndarray)
        ``(lambda_k, a_k)`` per block, ``a_k`` of unit norm, in the order of ``members``.
    """
    rng = np.random.default_rng(seed)
    N = int(sum(len(m) for m in members))
    n_total = max(int(max((np.max(m) for m in members if len(m)), default=-1)) + 1, N)
    bases: list[list[np.ndarray]] = []
    alphas: list[list[float]] = []
    betas: list[list[float]] = []
    v = np.zeros(n_total)
    for idx in members:
        q = rng.standard_normal(len(idx))
        q /= max(np.linalg.norm(q), np.finfo(float).tiny)
        bases.append([q])
        alphas.append([])
        betas.append([])
        v[idx] = q
    done = [len(idx) == 0 for idx in members]
    ritz = [(0.0, np.zeros(len(idx))) for idx in members]
    for _ in range(max_steps):
        w_all = np.asarray(matmul(v), dtype=float).ravel()
        v = np.zeros(n_total)
        for k, idx in enumerate(members):
            if done[k]:
                continue
            Q = bases[k]
            w = w_all[idx]
            alphas[k].append(float(Q[-1] @ w))
            B = np.asarray(Q)
            for _ in range(2):  # full reorthogonalisation, twice ("twice is enough")
                w -= B.T @ (B @ w)
            beta = float(np.linalg.norm(w))
            T = np.diag(alphas[k]) + np.diag(betas[k], 1) + np.diag(betas[k], -1)
            theta, S = np.linalg.eigh(T)
            lam, s = float(theta[-1]), S[:, -1]
            ritz[k] = (lam, s @ B)
            exhausted = len(Q) >= len(idx) or beta <= np.finfo(float).eps * max(abs(lam), 1.0)
            if exhausted or abs(beta * s[-1]) <= tol * max(abs(lam), np.finfo(float).tiny):
                done[k] = True
                continue
            betas[k].append(beta)
            q = w / beta
            Q.append(q)
            v[idx] = q
        if all(done):
            break
    out = []
    for lam, a in ritz:
        norm = np.linalg.norm(a)
        out.append((lam, a / norm if norm > 0 else a))
    return out
