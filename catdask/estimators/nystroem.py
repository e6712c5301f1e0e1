"""Nystroem approximation of the kernel method, for N too large for the exact fit.

With m landmarks L (random training rows) and ``K_LL = U diag(lam) U^T``, the features
``F(x) = k(x, L) U_r diag(lam_r)^{-1/2}`` (r eigenvalues above round-off) reproduce the kernel
on span{phi(l)}: ``F(x)^T F(x') = k(x, L) K_LL^+ k(L, x')`` (Williams & Seeger 2001; the map
of :class:`sklearn.kernel_approximation.Nystroem`, truncated to its numerical rank). Fitting
the *linear* method on F costs O(N m^2) per pass instead of O(N^2).

The result is itself a kernel expansion: axis k is ``w_k = sum_j A[k, j] phi(l_j)`` with
``A = W^T diag(lam_r)^{-1/2} U_r^T``, orthonormal in the RKHS because ``A K_LL A^T = W^T W =
I``. So the fitted :class:`~catdask.KernelCategorySpace` keeps its usual attributes
(``X_fit_`` = the landmarks, ``dual_coef_``, ``projection_offset_``), ``transform`` is
unchanged, and the same A on the training points (zero off the landmarks) is a warm start for
the exact fit: ``KernelCategorySpace(init=approx.training_coef_).fit(X, y)``.
"""

from __future__ import annotations

import numpy as np

from ..distributed.inputs import is_distributed_input
from .linear import CategorySpace

__all__ = ["fit_nystroem", "nystroem_map", "DEFAULT_LANDMARKS"]

DEFAULT_LANDMARKS = 500

# Eigenvalues of K_LL below this fraction of the largest are round-off (dropped).
_RANK_RTOL = 1e-10


def nystroem_map(kernel, L):
    """The Nystroem feature map's right factor M (m, r): ``F(x) = k(x, L) @ M``."""
    lam, U = np.linalg.eigh(kernel(L, L))
    keep = lam > _RANK_RTOL * max(lam[-1], np.finfo(float).tiny)
    return U[:, keep] / np.sqrt(lam[keep])


def _features_block(x, kernel, L, M):
    return kernel(np.asarray(x, dtype=np.float64), L) @ M


def fit_nystroem(X, classes, kernel, *, linear_params, n_landmarks, rng, callback=None):
    """The fitted attributes of ``KernelCategorySpace(approximation="nystroem")``.

    Fits :class:`~catdask.CategorySpace` (``linear_params``: same objective, origin, eps,
    restarts, tolerance) on the Nystroem features of X (numpy, or Dask blockwise for Dask
    inputs) and expresses the solution as kernel coefficients on the landmarks.

    Parameters
    ----------
    X : ndarray or dask.array.Array of shape (N, D)
    classes : ClassIndex
    kernel : catdask.kernels.Kernel
    linear_params : dict
        Parameters of the linear fit (a string ``init``).
    n_landmarks : int or None
    rng : numpy.random.RandomState
    callback : callable, optional
        The solver's progress callback.

    Returns
    -------
    dict
        Attribute name -> value, for the estimator to set.
    """
    if not isinstance(linear_params["init"], str):
        raise ValueError(
            "approximation='nystroem' takes a string init ('auto', 'random', 'decoupled'); "
            "array starts are coefficients of the exact kernel fit."
        )
    N, K = X.shape[0], classes.n_classes
    m = min(n_landmarks or DEFAULT_LANDMARKS, N)
    idx = np.sort(rng.choice(N, size=m, replace=False))
    distributed = is_distributed_input(X)
    L = np.asarray(X[idx].compute() if distributed else X[idx], dtype=np.float64)
    M = nystroem_map(kernel, L)
    r = M.shape[1]
    if r < K:
        raise ValueError(
            f"The {m} landmarks span only {r} Nystroem features, fewer than the K = {K} "
            "classes; increase n_landmarks (or use the exact method)."
        )
    if distributed:  # landmarks and map enter the graph once, not once per block
        import dask

        F = X.map_blocks(_features_block, kernel, dask.delayed(L), dask.delayed(M),
                         dtype=np.float64, chunks=(X.chunks[0], (r,)), meta=np.empty((0, r)))
    else:
        F = _features_block(X, kernel, L, M)
    lin = CategorySpace(**linear_params, random_state=rng)
    if callback is not None:
        lin._progress_callback = callback
    lin.fit(F, classes.codes)  # axis k <-> code k <-> classes_[k]

    # The linear coordinates are W^T (F(x) - x0) = (W^T M^T) k(L, x) - W^T x0, with x0 the
    # feature centroid (global origin) or 0 (class origin); read x0's image off transform(0).
    dual_coef = lin.components_ @ M.T
    training_coef = np.zeros((K, N))
    training_coef[:, idx] = dual_coef
    fitted = {
        "X_fit_": L,
        "dual_coef_": dual_coef,
        "projection_offset_": -lin.transform(np.zeros((1, r)))[0],
        "landmark_indices_": idx,
        "n_nystroem_features_": r,
        "training_coef_": training_coef,
    }
    for name in ("objective_", "n_iter_", "converged_", "stopping_reason_",
                 "certificate_", "restarts_", "best_restart_", "eps_",
                 "class_means_", "class_covariances_", "class_counts_"):
        fitted[name] = getattr(lin, name)
    return fitted
