"""Input checks shared by the estimators: every message names the problem and what to do."""

from __future__ import annotations

import numpy as np
from sklearn.utils.multiclass import check_classification_targets

__all__ = ["encode_labels"]


def encode_labels(y, *, n_features=None, linear=False):
    """Validate class labels and code them ``0..K-1``.

    Raises
    ------
    ValueError
        Fewer than two classes, a class with fewer than two samples, or (``linear=True``)
        more classes than features.
    """
    check_classification_targets(y)
    classes, codes = np.unique(y, return_inverse=True)
    K = classes.shape[0]
    if K < 2:
        raise ValueError(
            f"Category space needs at least 2 classes (one axis per class); y has {K} class "
            f"({classes.tolist()!r})."
        )
    counts = np.bincount(codes, minlength=K)
    small = [(c, n) for c, n in zip(classes.tolist(), counts.tolist()) if n < 2]
    if small:
        listed = ", ".join(f"{c!r} ({n} sample)" for c, n in small)
        raise ValueError(
            "Every class needs at least 2 samples (the Z-step centres each class); "
            f"too few samples in class {listed}."
        )
    if linear and n_features is not None and K > n_features:
        raise ValueError(
            f"The linear method needs K <= D (K = {K} classes, D = {n_features} features): "
            "K orthonormal axes do not fit in D dimensions. Use KernelCategorySpace instead."
        )
    return classes, codes.astype(np.intp)
