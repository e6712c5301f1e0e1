"""The Stiefel manifold St(D, K) = {W : W^T W = I_K}: points, the polar step, distances."""

from __future__ import annotations

import numpy as np


def random_stiefel(n_points, n_rows, n_cols, rng):
    """``n_points`` matrices drawn uniformly (Haar) from St(n_rows, n_cols), ``n_rows >= n_cols >=
    1``, with ``rng``: shape (n_points, n_rows, n_cols).
    """
    if not n_rows >= n_cols >= 1:
        raise ValueError(
            f"Need n_rows >= n_cols >= 1. Values supplied were n_rows = {n_rows} and "
            f"n_cols = {n_cols}"
        )
    G = rng.standard_normal((n_points, n_rows, n_cols))
    Q, R = np.linalg.qr(G)
    # Fix the signs of R's diagonal so the distribution is exactly Haar.
    signs = np.sign(np.diagonal(R, axis1=-2, axis2=-1))
    signs[signs == 0] = 1.0
    return Q * signs[:, None, :]


def polar_factor(Y, *, rank_rtol=1e-10):
    """The W-step: the orthonormal polar factor of ``Y`` (..., D, K) (paper eq. (22))."""
    U, s, Vt = np.linalg.svd(Y, full_matrices=False)
    rank_deficient = s[..., -1] <= rank_rtol * np.maximum(s[..., 0], np.finfo(float).tiny)
    return U @ Vt, rank_deficient


def inv_sqrt_spd(S, *, rank_rtol=1e-12):
    """Inverse square root of symmetric positive-definite (batched, small) matrices."""
    S = 0.5 * (S + np.swapaxes(S, -1, -2))
    lam, V = np.linalg.eigh(S)
    top = np.maximum(lam[..., -1:], np.finfo(float).tiny)
    keep = lam > rank_rtol * top
    inv_sqrt = np.where(keep, 1.0 / np.sqrt(np.where(keep, lam, 1.0)), 0.0)
    out = (V * inv_sqrt[..., None, :]) @ np.swapaxes(V, -1, -2)
    return out, ~np.all(keep, axis=-1)

