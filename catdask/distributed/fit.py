"""The estimators' Dask entry points: build a Dask operator, then run the shared fit.

``CategorySpace.fit`` and ``KernelCategorySpace.fit`` call these when X is a Dask array, a zarr
array or a zarr data set (:func:`catdask.distributed.inputs.is_distributed_input`). Nothing
here iterates: the estimators' ``_fit_operator`` runs the one solver on the operator built
here. ``transform`` of such inputs is lazy and blockwise over rows (:func:`transform_blockwise`).

Gram-cache options for the kernel backend are read from Dask's configuration (so they can also
come from ``DASK_CATDASK__GRAM__CACHE`` and friends); :func:`gram_options` sets them for a block
of code.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..classes import ClassIndex
from .cluster import get_client
from .inputs import as_row_chunked, encode_training_labels, load_training_data

__all__ = ["fit_linear", "fit_kernel", "transform_blockwise", "gram_options", "compute_context"]

_LOCAL_SCHEDULERS = {"threads", "threading", "sync", "synchronous", "single-threaded",
                     "processes", "multiprocessing"}


def gram_options(cache=None, store=None, dtype=None, block_rows=None):
    """Context manager setting the kernel backend's Gram cache (see ``DaskGramOperator``).

    Parameters
    ----------
    cache : {"auto", "recompute", "memory", "zarr"}, optional
    store : str, optional
        zarr path of the Gram cache (implies ``cache="zarr"`` under ``"auto"``).
    dtype : {"float64", "float32"}, optional
    block_rows : int, optional

    Examples
    --------
    >>> from catdask.distributed import gram_options
    >>> with gram_options(cache="zarr", store="/scratch/gram.zarr", dtype="float32"):  # doctest: +SKIP
    ...     KernelCategorySpace().fit(X_dask, y)
    """
    import dask

    values = {"cache": cache, "store": store, "dtype": dtype, "block-rows": block_rows}
    return dask.config.set({f"catdask.gram.{k}": v for k, v in values.items() if v is not None})


def _gram_config():
    import dask

    get = dask.config.get
    return {
        "cache": get("catdask.gram.cache", "auto"),
        "store": get("catdask.gram.store", None),
        "cache_dtype": get("catdask.gram.dtype", "float64"),
        "block_rows": get("catdask.gram.block-rows", None),
    }


def compute_context():
    """Where this fit's Dask work runs: the client from :func:`get_client`, unless the user
    chose a local scheduler explicitly (``dask.config.set(scheduler="threads")``)."""
    import dask

    if str(dask.config.get("scheduler", None)).lower() in _LOCAL_SCHEDULERS:
        return contextlib.nullcontext()
    return get_client()


def _reset_input_attrs(est, n_features):
    est.n_features_in_ = int(n_features)
    if hasattr(est, "feature_names_in_"):
        del est.feature_names_in_


def fit_linear(est, X, y):
    """``CategorySpace.fit`` on a Dask array / zarr input (DESIGN.md section 2).

    One pass over X builds the class means and scatter matrices; with CQS and ``K D^2`` within
    the estimator's budget every iteration then runs on the driver. Otherwise (CAS, or too many
    features) the solver streams X twice per iteration, persisted in worker memory when it fits.
    """
    from .operators import DaskDataOperator

    X, y = load_training_data(X, y)
    classes_, codes = encode_training_labels(y, n_features=X.shape[1], linear=True)
    classes = ClassIndex(codes, len(classes_))
    _reset_input_attrs(est, X.shape[1])
    with compute_context():
        return est._fit_operator(DaskDataOperator(X, classes), classes_, codes)


def fit_kernel(est, X, y):
    """``KernelCategorySpace.fit`` on a Dask array / zarr input (DESIGN.md section 3).

    The N x D patterns come to the driver (the fitted model keeps them anyway); G is never
    formed: ``G Z`` is computed by row blocks on the workers, recomputing or streaming cached
    Gram blocks (:func:`gram_options`).
    """
    from sklearn.utils import check_array

    from .operators import DaskGramOperator

    X, y = load_training_data(X, y)
    X = check_array(np.asarray(X.compute()), dtype=np.float64, ensure_min_samples=2)
    classes_, codes = encode_training_labels(y)
    _reset_input_attrs(est, X.shape[1])
    est.kernel_ = est._make_kernel(X.shape[1])
    perm = np.argsort(codes, kind="stable")  # classes contiguous: slices of G, not gathers
    classes = ClassIndex(codes[perm], len(classes_))
    with compute_context():
        base = DaskGramOperator(X[perm], classes, est.kernel_, max_gram_bytes=est.max_gram_bytes,
                                **_gram_config())
        try:
            est._fit_operator(base, classes, classes_, perm)
        finally:
            base.close()
    A = np.empty_like(est.dual_coef_)
    A[:, perm] = est.dual_coef_
    est.dual_coef_ = A
    est.X_fit_ = X
    return est


def _transform_block(x, est):
    return est.transform(np.asarray(x, dtype=np.float64))


def transform_blockwise(est, X):
    """Lazy ``est.transform`` of a Dask / zarr input: one task per row block.

    The fitted estimator goes into the graph once (one key), so each block's task only ships
    its rows. Returns a Dask array of shape (N, K) chunked like X's rows.
    """
    import dask
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(est)
    X = as_row_chunked(X)
    if X.shape[1] != est.n_features_in_:
        raise ValueError(
            f"X has {X.shape[1]} features, but {type(est).__name__} is expecting "
            f"{est.n_features_in_} features as input."
        )
    K = len(est.classes_)
    model = dask.delayed(est, pure=False)
    return X.map_blocks(_transform_block, model, dtype=np.float64, chunks=(X.chunks[0], (K,)),
                        meta=np.empty((0, K)))
