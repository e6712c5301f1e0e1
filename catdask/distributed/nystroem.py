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

import contextlib

import numpy as np
from sklearn.utils.validation import check_random_state, validate_data

from .fit import compute_context
from .inputs import encode_training_labels, is_distributed_input

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


def fit_nystroem(est, X, y):
    """``KernelCategorySpace.fit`` with ``approximation="nystroem"``.

    Fits :class:`~catdask.CategorySpace` (same objective, origin, eps, restarts, tolerance) on
    the Nystroem features of X (numpy, or Dask blockwise for Dask / zarr inputs) and stores
    the solution as kernel coefficients on the landmarks.
    """
    if isinstance(est.init, str):
        init = est.init
    else:
        raise ValueError(
            "approximation='nystroem' takes a string init ('auto', 'random', 'decoupled'); "
            "array starts are coefficients of the exact kernel fit."
        )
    rng = check_random_state(est.random_state)
    if is_distributed_input(X):
        from .inputs import load_training_data

        Xd, y = load_training_data(X, y)
        N, D = Xd.shape
        est.n_features_in_ = int(D)
        if hasattr(est, "feature_names_in_"):
            del est.feature_names_in_
    else:
        X, y = validate_data(est, X, y, dtype=np.float64, ensure_min_samples=2)
        Xd = None
        N, D = X.shape
    classes_, codes = encode_training_labels(y)
    with compute_context() if Xd is not None else contextlib.nullcontext():
        _fit_features(est, X, Xd, N, D, classes_, codes, init, rng)
    return est


def _fit_features(est, X, Xd, N, D, classes_, codes, init, rng):
    """Choose landmarks, map X to Nystroem features, fit the linear method, store the model."""
    from ..estimators.linear import CategorySpace

    K = len(classes_)
    m = min(est.n_landmarks or DEFAULT_LANDMARKS, N)
    idx = np.sort(rng.choice(N, size=m, replace=False))
    L = np.asarray(Xd[idx].compute() if Xd is not None else X[idx], dtype=np.float64)
    est.kernel_ = est._make_kernel(D)
    M = nystroem_map(est.kernel_, L)
    r = M.shape[1]
    if r < K:
        raise ValueError(
            f"The {m} landmarks span only {r} Nystroem features, fewer than the K = {K} "
            "classes; increase n_landmarks (or use the exact method)."
        )
    if Xd is not None:  # landmarks and map enter the graph once, not once per block
        import dask

        F = Xd.map_blocks(_features_block, est.kernel_, dask.delayed(L), dask.delayed(M),
                          dtype=np.float64, chunks=(Xd.chunks[0], (r,)), meta=np.empty((0, r)))
    else:
        F = _features_block(X, est.kernel_, L, M)
    lin = CategorySpace(
        objective=est.objective, origin=est.origin, eps=est.eps, n_restarts=est.n_restarts,
        tol=est.tol, max_iter=est.max_iter, init=init, random_state=rng,
        certify=est.certify, verbose=est.verbose, classifier=est.classifier,
    )
    callback = getattr(est, "_progress_callback", None)
    if callback is not None:
        lin._progress_callback = callback
    lin.fit(F, codes)  # axis k <-> code k <-> classes_[k]

    # The linear coordinates are W^T (F(x) - x0) = (W^T M^T) k(L, x) - W^T x0, with x0 the
    # feature centroid (global origin) or 0 (class origin); read x0's image off transform(0).
    est.X_fit_ = L
    est.dual_coef_ = lin.components_ @ M.T
    est.projection_offset_ = -lin.transform(np.zeros((1, r)))[0]
    est.landmark_indices_ = idx
    est.n_nystroem_features_ = r
    coef = np.zeros((K, N))
    coef[:, idx] = est.dual_coef_
    est.training_coef_ = coef
    for name in ("objective_", "n_iter_", "converged_", "stopping_reason_",
                 "certificate_", "restarts_", "best_restart_", "eps_",
                 "class_means_", "class_covariances_", "class_counts_"):
        setattr(est, name, getattr(lin, name))
    est.classes_ = classes_
