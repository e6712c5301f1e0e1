"""The previous code of the tile pass and the decoupled start's set-up: the baseline that
``bench_setup.py`` times beside the current code in one run.

Copies of the functions as they were before issue 27's set-up and pass work (catdask's own
modules hold only the current ones). :func:`previous_code` swaps them into catdask for a
``with`` block: the Dask operators then send these functions to the workers (by value:
:func:`previous_code` registers this module with cloudpickle, which the workers cannot import).
"""

from __future__ import annotations

import contextlib
import sys

import numpy as np

from catdask.operators import gram_tiles


@contextlib.contextmanager
def previous_code():
    """catdask with the previous tile functions and Lanczos, for the ``with`` block."""
    import cloudpickle

    from catdask.core import starts

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    saved = (gram_tiles.gram_symmetric_moments, gram_tiles.gram_symmetric_class_product,
             starts.class_block_top_eigenpairs)
    gram_tiles.gram_symmetric_moments = previous_symmetric_moments
    gram_tiles.gram_symmetric_class_product = previous_symmetric_class_product
    starts.class_block_top_eigenpairs = previous_class_block_top_eigenpairs
    try:
        yield
    finally:
        (gram_tiles.gram_symmetric_moments, gram_tiles.gram_symmetric_class_product,
         starts.class_block_top_eigenpairs) = saved


def previous_class_block_top_eigenpairs(matmul, members, n=None, **kw):
    """The current call (``matmul`` on (N, m) blocks) answered by the previous Lanczos."""
    return _lanczos_top_pairs(lambda v: matmul(np.asarray(v)[:, None])[:, 0], members)


def _lanczos_top_pairs(matmul, members, *, tol=1e-10, max_steps=200, seed=0):
    """The lockstep single-vector Lanczos of the decoupled start (main before issue 27's
    set-up work): ``matmul`` takes one vector (N,)."""
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


def previous_symmetric_moments(left, right, pairs, kernel):
    """``gram_tiles.gram_symmetric_moments`` before issue 27's set-up work (numpy reductions and
    einsum)."""
    N = left.shape[0]
    out = np.zeros(2 * N + 1)
    sums, diag = out[:N], out[N : 2 * N]
    pairs = np.asarray(pairs).reshape(-1, 4)
    if pairs.shape[0] == 0:
        return out
    spans = pairs[:, 1::2] - pairs[:, 0::2]
    buf = np.empty((int(spans[:, 0].max()), int(spans[:, 1].max())), dtype=left.dtype)
    fro2 = 0.0
    for a, b, c, d in pairs.tolist():
        T = buf[: b - a, : d - c]
        np.matmul(left[a:b], right[c:d].T, out=T)
        kernel.finish_tile(T, clip=a == c)  # x = y pairs lie on diagonal tiles only
        sums[a:b] += T.sum(axis=1, dtype=np.float64)
        t2 = float(np.einsum("ij,ij->", T, T, dtype=np.float64))
        if c != a:
            sums[c:d] += T.sum(axis=0, dtype=np.float64)
            fro2 += 2.0 * t2
        else:
            diag[a:b] = np.diagonal(T)
            fro2 += t2
    out[2 * N] = fro2
    return out


def previous_symmetric_class_product(left, right, pairs, offsets, zt, kernel):
    """``gram_tiles.gram_symmetric_class_product`` before issue 27's pass work, its ``(lo, band)``
    returned as the current part (``lo, N, band, 0, nothing``) that the driver adds."""
    lo, band = _previous_band(left, right, pairs, offsets, zt, kernel)
    N, R = zt.shape
    return lo, N, band, 0, np.zeros((0, 0, R), dtype=band.dtype)


def _previous_band(left, right, pairs, offsets, zt, kernel):
    N, R = zt.shape
    K = len(offsets) - 1
    pairs = np.asarray(pairs).reshape(-1, 4)
    if pairs.shape[0] == 0:
        return N, np.zeros((K, 0, R), dtype=zt.dtype)
    lo = int(pairs[:, 0].min())
    acc = np.zeros((K, N - lo, R))
    spans = pairs[:, 1::2] - pairs[:, 0::2]
    buf = np.empty((int(spans[:, 0].max()), int(spans[:, 1].max())), dtype=left.dtype)
    for a, b, c, d in pairs.tolist():
        T = buf[: b - a, : d - c]
        np.matmul(left[a:b], right[c:d].T, out=T)
        kernel.finish_tile(T, clip=a == c)  # x = y pairs lie on diagonal tiles only
        for k, s0, s1 in gram_tiles._class_ranges(offsets, c, d):
            acc[k, a - lo : b - lo] += T[:, s0 - c : s1 - c] @ zt[s0:s1]
        if c != a:
            for k, s0, s1 in gram_tiles._class_ranges(offsets, a, b):
                acc[k, c - lo : d - lo] += T[s0 - a : s1 - a].T @ zt[s0:s1]
    return lo, acc.astype(zt.dtype, copy=False)
