"""Lazy, blockwise ``transform`` of Dask / zarr inputs by a fitted estimator."""

from __future__ import annotations

import numpy as np

from .inputs import as_row_chunked


def _transform_block(x, est):
    return est.transform(np.asarray(x, dtype=np.float64))


def transform_blockwise(est, X):
    """Lazy ``est.transform`` of a Dask / zarr input: one task per row block."""
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
