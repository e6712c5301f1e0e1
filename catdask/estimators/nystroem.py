"""Nystroem approximation of the kernel method, for N too large for the exact fit.

The linear method runs on Nystroem features (Williams & Seeger 2001; O(N m^2) a pass) and the
result is a kernel expansion orthonormal in the RKHS, so it also warm-starts the exact fit
(``KernelCategorySpace(init=approx.training_coef_)``). ``n_landmarks="auto"``: pivoted-Cholesky
pivots until the left-out trace is at most ``AUTO_LANDMARK_RTOL`` of ``tr G``.
"""

from __future__ import annotations

import numpy as np

from ..distributed.inputs import is_distributed_input
from ..kernels.gram_factor import pivoted_cholesky
from .linear import CategorySpace

DEFAULT_LANDMARKS = 500

#: ``n_landmarks="auto"`` stops adding landmarks once the Nystroem residual's trace is at most
#: this fraction of tr G (benchmarks/bench_warm_start.py measures what it buys).
AUTO_LANDMARK_RTOL = 1e-3
#: ... and at most this many landmarks, or fewer when the (N, r) factor would pass
#: ``_AUTO_FACTOR_BYTES`` on the driver.
AUTO_MAX_LANDMARKS = 2000
_AUTO_FACTOR_BYTES = 512 * 2**20

# Eigenvalues of K_LL below this fraction of the largest are round-off (dropped).
_RANK_RTOL = 1e-10


def nystroem_map(kernel, L):
    """The Nystroem feature map's right factor M (m, r): ``F(x) = k(x, L) @ M``."""
    lam, U = np.linalg.eigh(kernel(L, L))
    keep = lam > _RANK_RTOL * max(lam[-1], np.finfo(float).tiny)
    return U[:, keep] / np.sqrt(lam[keep])


def choose_landmarks(X, kernel, *, rtol=AUTO_LANDMARK_RTOL, max_landmarks=AUTO_MAX_LANDMARKS):
    """Landmarks chosen by the spectrum: the pivots of a pivoted-Cholesky factor of ``k(X, X)``,
    stopped once the residual trace is at most ``rtol * tr G`` or at ``max_landmarks`` (and the
    driver's factor memory). Returns ``(idx, residual)``: the landmarks' rows of X, sorted, and
    ``tr(G - G_nystroem) / tr G`` on the training set.
    """
    N = X.shape[0]
    cap = int(max(1, min(max_landmarks, N, _AUTO_FACTOR_BYTES // (8 * max(N, 1)))))
    if is_distributed_input(X):  # one small graph per landmark: N kernel entries on the workers
        diagonal = X.map_blocks(kernel.diagonal, drop_axis=1, dtype=np.float64).compute()

        def columns(idx):
            Y = np.asarray(X[idx].compute(), dtype=np.float64)
            return X.map_blocks(kernel, Y, dtype=np.float64,
                                chunks=(X.chunks[0], (len(idx),))).compute()
    else:
        diagonal = kernel.diagonal(X)

        def columns(idx):
            return kernel(X, X[idx])

    _, residual, _, pivots = pivoted_cholesky(diagonal, columns, rtol=rtol, max_rank=cap,
                                              return_pivots=True)
    return np.sort(pivots), residual / max(float(np.sum(diagonal)), np.finfo(float).tiny)


def _features_block(x, kernel, L, M):
    return kernel(np.asarray(x, dtype=np.float64), L) @ M


def fit_nystroem(X, classes, kernel, *, linear_params, n_landmarks, rng):
    """The fit of ``KernelCategorySpace(approximation="nystroem")``: :class:`~catdask.CategorySpace`
    with ``linear_params`` (a string ``init``) on the Nystroem features of X (Dask blockwise for
    Dask inputs), its solution expressed as kernel coefficients on the landmarks (``n_landmarks``:
    None for ``DEFAULT_LANDMARKS`` random rows, or "auto" for :func:`choose_landmarks`).

    Returns ``(result, fitted)``: the linear fit's :class:`~catdask.core.engine.FitResult` (for the
    restart attributes) and the other fitted attributes by name (the kernel expansion on the
    landmarks, ``eps_``, the class statistics).
    """
    if not isinstance(linear_params["init"], str):
        raise ValueError(
            "approximation='nystroem' takes a string init ('auto', 'random', 'decoupled'); "
            "array starts are coefficients of the exact kernel fit."
        )
    N, K = X.shape[0], classes.n_classes
    residual = None
    if n_landmarks == "auto":
        idx, residual = choose_landmarks(X, kernel)
        m = idx.size
    else:
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
    result = lin._fit(F, classes.codes)  # axis k <-> code k <-> classes_[k]

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
    if residual is not None:
        fitted["landmark_residual_"] = residual
    for name in ("eps_", "class_means_", "class_covariances_", "class_counts_"):
        fitted[name] = getattr(lin, name)
    return result, fitted
