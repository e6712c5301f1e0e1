"""Input checks shared by the estimators: every message names the problem and what to do."""

from __future__ import annotations

import math
from numbers import Number

import numpy as np


class CodedLabels:
    """Labels stored as codes into a list of classes (a data set's ``y`` and its attributes)."""

    def __init__(self, classes, codes):
        self.classes = np.asarray(classes)
        self.codes = np.asarray(codes)
        self.shape = self.codes.shape

    def decode(self):
        return self.classes[self.codes]


def _usable_codes(y, n_features, linear, min_samples=2):
    """``(classes, codes)`` of coded labels that pass every check as they are, else None."""
    classes, codes = y.classes, y.codes
    K = classes.shape[0]
    ok = (
        classes.ndim == 1 and K >= 2 and codes.size > 0
        and bool(np.all(classes[1:] > classes[:-1]))
        and int(codes.min()) >= 0 and int(codes.max()) < K
    )
    if ok:
        ok = bool(np.all(np.bincount(codes, minlength=K) >= min_samples)) and not (
            linear and n_features is not None and K > n_features
        )
    return (classes, codes.astype(np.intp)) if ok else None


# Below this ``max |x| * sqrt(N D)`` the sums of squared entries (class matrices, inner
# products, distances) stay below 1e150, so the products of those sums that the polar step's
# SVD and the certificate form stay finite too (float64 max ~1.8e308).
_OVERFLOW_SCALE = 1e75
# Below this ``max |x|`` the squares are < 1e-150 and their products (the polar step's SVD,
# the certificate's matrices) < 1e-300, next to float64's smallest normal number (2.2e-308):
# the linear method's fit failed with "LinAlgError: Singular matrix" from 1e-80 on.
_UNDERFLOW_SCALE = 1e-75


def check_data_scale(X):
    """Refuse data whose squares overflow (or whose products of squares underflow) float64
    before any product is formed (:func:`check_value_range` of ``max |x|``)."""
    X = np.asarray(X)
    if X.size == 0:
        return
    check_value_range(float(np.max(np.abs(X))), *X.shape)


def check_value_range(top, n_samples, n_features, *, squares_only=False):
    """Refuse values up to ``top = max |x|`` that the arithmetic cannot carry, in the estimators'
    own sentence: fits failed with unrelated errors (SVD, overflow) from ``max |x|`` about 1e77 on.
    ``squares_only``: refuse only a sum of ``max(N, D)`` squares that is not finite in float64
    (ingest, and a fit that standardises first). A non-finite ``top`` is left to the NaN checks.
    """
    top = float(top)
    if not math.isfinite(top):
        return
    if squares_only:
        too_large = not math.isfinite(top * top * max(n_samples, n_features, 1))
    else:
        if 0 < top < _UNDERFLOW_SCALE:
            raise ValueError(
                f"X has values only up to {top:.1e} in absolute value, too small for float64 "
                "here: the products of their squares that the solver and the certificate form "
                "underflow to 0 (measured: a singular matrix from about 1e-80 on). Standardise "
                "X first, e.g. make_pipeline(StandardScaler(), ...)."
            )
        too_large = top * math.sqrt(float(n_samples) * n_features) > _OVERFLOW_SCALE
    if too_large:
        raise ValueError(
            f"X has values up to {top:.1e} in absolute value, too large for float64 here: sums of "
            "their squares (class matrices, inner products, distances) and the products the "
            "solver forms from them overflow. Standardise X first, e.g. "
            "make_pipeline(StandardScaler(), ...)."
        )


def _check_label_kinds(y):
    """Labels mixing numbers and strings get a clear error (scikit-learn's says "unknown")."""
    arr = np.asarray(y, dtype=object).ravel()
    if arr.size == 0 or np.asarray(y).dtype != object:
        return
    text = next((v for v in arr if isinstance(v, str)), None)
    number = next((v for v in arr if isinstance(v, Number) and not isinstance(v, bool)), None)
    if text is not None and number is not None:
        raise ValueError(
            f"Class labels mix numbers and strings (e.g. {number!r} and {text!r}); use one kind "
            "for every label, e.g. y.astype(str)."
        )


def check_numeric_columns(X):
    """A DataFrame with non-numeric columns gets a ValueError naming them; was scikit-learn's
    "could not convert string to float: 'red'", which names neither the column nor what to do.
    Called where validating X already failed (no cost otherwise)."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(dtypes, "items"):
        return
    bad = [repr(str(c)) for c, t in dtypes.items() if getattr(t, "kind", "O") not in "biuf"]
    if bad:
        listed = ", ".join(bad[:5]) + (f", ... ({len(bad)} in all)" if len(bad) > 5 else "")
        raise ValueError(
            f"X has non-numeric column(s) {listed}: the category space needs numbers; encode "
            "them (e.g. OneHotEncoder in a ColumnTransformer) or drop them."
        )


def explain_invalid_input(X, y=None):
    """Where validating ``(X, y)`` failed: raise the clearer error of a missing label or a text
    column of X when that is the reason (else return, and the caller re-raises its own)."""
    check_missing_labels(y)
    check_numeric_columns(X)


def check_missing_labels(y):
    """A missing label (None, NaN or pandas' NA) gets a ValueError naming it and its index (called
    only where label validation failed, so the common path pays nothing).
    """
    if y is None:
        return
    arr = np.asarray(y, dtype=object).ravel()
    missing = next((i for i, v in enumerate(arr) if v is None or (isinstance(v, float) and v != v)
                    or type(v).__name__ in ("NAType", "NaTType")), None)
    if missing is not None:
        raise ValueError(
            f"y has a missing label ({arr[missing]!r} at index {missing}); every sample needs "
            "its class: drop the unlabelled samples first."
        )


def encode_class_labels(y, *, n_features=None, linear=False, origin="class"):
    """Validate class labels and code them ``0..K-1``: returns ``(classes, codes)``."""
    min_samples = 1 if origin == "global" else 2
    if isinstance(y, CodedLabels):
        coded = _usable_codes(y, n_features, linear, min_samples)
        if coded is not None:
            return coded
        y = y.decode()  # the checks below explain what is wrong
    _check_label_kinds(y)
    # Imported here: Dask workers import this module (through catdask.distributed) and never
    # validate labels; scikit-learn with SciPy and pandas is ~140 MiB and 2 s per worker.
    from sklearn.utils.multiclass import check_classification_targets

    try:
        check_classification_targets(y)
        classes, codes = np.unique(y, return_inverse=True)
    except TypeError:  # labels that do not sort: looked at only then (no cost otherwise)
        check_missing_labels(y)
        raise
    K = classes.shape[0]
    if K < 2:
        raise ValueError(
            f"Category space needs at least 2 classes (one axis per class); y has {K} class "
            f"({classes.tolist()!r})."
        )
    counts = np.bincount(codes, minlength=K)
    small = [(c, n) for c, n in zip(classes.tolist(), counts.tolist()) if n < min_samples]
    if small:
        listed = ", ".join(f"{c!r} ({n} sample)" for c, n in small)
        raise ValueError(
            "With origin='class' every class needs at least 2 samples (the Z-step centres "
            f"each class; origin='global' fits a class of one); too few samples in class "
            f"{listed}."
        )
    if linear and n_features is not None and K > n_features:
        raise ValueError(
            f"The linear method needs K <= D (K = {K} classes, D = {n_features} features): "
            "K orthonormal axes do not fit in D dimensions. Use KernelCategorySpace instead."
        )
    return classes, codes.astype(np.intp)
