"""Top eigenpairs of every class block of a Gram operator, all classes per Gram pass.

K block Lanczos runs in lockstep share each ``diag(G_11, ..., G_KK)`` product (docs/design.md §3c);
a block of vectors per class costs little more than one and converges where the top gap is small.
"""

from __future__ import annotations

import numpy as np

#: Vectors per class and pass (see the module docstring).
BLOCK = 4


def class_block_top_eigenpairs(matmul, members, *, n=None, tol=1e-10, max_dim=200, seed=0,
                               block=BLOCK, start=None):
    """Top eigenpair of every diagonal block of a symmetric PSD block-diagonal operator.
    Returns ``[(lambda_k, a_k)]`` in the order of ``members``, ``a_k`` of unit norm with its
    largest-magnitude entry positive."""
    rng = np.random.default_rng(seed)
    members = [np.asarray(m) for m in members]
    n_total = max(int(max((np.max(m) for m in members if len(m)), default=-1)) + 1,
                  int(n or 0))
    width = max(1, int(block))
    bases: list[list[np.ndarray]] = []  # per block: orthonormal Q_j (n_k, <= width)
    images: list[list[np.ndarray]] = []  # per block: M Q_j
    for k, idx in enumerate(members):
        q = rng.standard_normal((len(idx), min(width, len(idx))))
        if start is not None and len(idx):
            q[:, :1] = start(k, idx)
        bases.append([np.linalg.qr(q)[0] if q.size else q])
        images.append([])
    done = [len(idx) == 0 for idx in members]
    ritz = [(0.0, np.zeros(len(idx))) for idx in members]
    eps = np.finfo(float).eps
    while not all(done):
        V = np.zeros((n_total, width))
        for k, idx in enumerate(members):
            if not done[k]:
                q = bases[k][-1]
                V[idx, : q.shape[1]] = q
        U = np.asarray(matmul(V), dtype=float).reshape(n_total, width)
        for k, idx in enumerate(members):
            if done[k]:
                continue
            cols = bases[k][-1].shape[1]
            images[k].append(U[idx, :cols])
            Q, W = np.hstack(bases[k]), np.hstack(images[k])
            H = Q.T @ W
            theta, S = np.linalg.eigh((H + H.T) / 2)
            lam, s = float(theta[-1]), S[:, -1]
            Ws = W @ s
            residual = float(np.linalg.norm(Ws - Q @ (Q.T @ Ws)))
            ritz[k] = (lam, Q @ s)
            room = min(len(idx), max_dim) - Q.shape[1]
            if room <= 0 or residual <= tol * max(abs(lam), np.finfo(float).tiny):
                done[k] = True
                continue
            # The next block: the new images orthogonalised against the whole basis, twice
            # ("twice is enough"); directions that vanish (an exhausted Krylov space) drop out.
            w = W[:, -cols:]
            for _ in range(2):
                w = w - Q @ (Q.T @ w)
            u, sv, _ = np.linalg.svd(w, full_matrices=False)
            keep = sv > eps * max(abs(lam), 1.0) * np.sqrt(len(idx))
            q = u[:, keep][:, :room]
            if q.shape[1] == 0:
                done[k] = True
                continue
            q = q - Q @ (Q.T @ q)
            bases[k].append(np.linalg.qr(q)[0])
    out = []
    for lam, a in ritz:
        norm = np.linalg.norm(a)
        if norm > 0:
            a = a / norm
            a = a if a[np.argmax(np.abs(a))] >= 0 else -a
        out.append((lam, a))
    return out
