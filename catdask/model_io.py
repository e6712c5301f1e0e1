"""Fitted estimators as plain arrays plus JSON metadata (never pickles).

``export_model`` and ``import_model`` are the only way models enter or leave a store
(``catdask.store.registry``): a model is numeric arrays and JSON-safe metadata, so loading a
model never executes code from the store.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from .certificate import Certificate
from .certificate.moment_dual import MomentDual
from .core.solver import RestartResult
from .estimators import ESTIMATOR_CLASSES
from .kernels import make_kernel

__all__ = ["export_model", "import_model"]

_ARRAYS = {
    "CategorySpace": ("components_", "mean_"),
    "KernelCategorySpace": ("dual_coef_", "X_fit_", "projection_offset_"),
}
_SCALER_ARRAYS = ("mean_", "scale_")
# Class statistics of the classification rules (catdask.estimators.classify). Models stored
# before they existed lack them and keep the angle rule they were trained with.
_CLASSIFIER_ARRAYS = ("class_means_", "class_covariances_", "class_counts_")
# The moment certificate's dual data (catdask.certificate.moment_dual), so that the bound can be
# re-verified from the store without re-solving (catdask.certificate.verify_certificate).
_MOMENT_PREFIX = "certificate.moment."


def _json_params(est):
    params = est.get_params()
    if callable(params.get("kernel")):
        raise ValueError(
            "A model with a callable kernel cannot be exported: only named kernels "
            "('rbf', 'linear', 'poly') can be stored without pickling code."
        )
    init = params.get("init")
    if not isinstance(init, str):
        params["init"] = "given"  # the warm start is not part of the model
    return params


def export_model(estimator):
    """Arrays and JSON metadata of a fitted estimator.

    ``estimator`` is a fitted :class:`CategorySpace` / :class:`KernelCategorySpace`, or a
    :class:`~sklearn.pipeline.Pipeline` of a ``StandardScaler`` and one of them (the scaler's
    ``mean_``/``scale_`` are stored as ``standardise.mean_``/``standardise.scale_``).

    Returns
    -------
    arrays : dict of str -> ndarray (numeric dtypes only)
    meta : dict (JSON-serialisable)
    """
    if isinstance(estimator, Pipeline):
        (step, scaler), (_, inner) = estimator.steps
        if not isinstance(scaler, StandardScaler) or len(estimator.steps) != 2:
            raise TypeError("Only Pipeline(StandardScaler, category-space estimator) can be exported.")
        arrays, meta = export_model(inner)
        arrays.update({f"standardise.{a}": np.asarray(getattr(scaler, a), dtype=float)
                       for a in _SCALER_ARRAYS})
        meta["preprocessing"] = "standardise"
        return arrays, meta
    name = type(estimator).__name__
    if name not in ESTIMATOR_CLASSES:
        raise TypeError(f"Cannot export {name}; expected one of {sorted(ESTIMATOR_CLASSES)}.")
    arrays = {a: np.asarray(getattr(estimator, a), dtype=float)
              for a in _ARRAYS[name] + _CLASSIFIER_ARRAYS}
    classes = estimator.classes_
    meta = {
        "class": name,
        "params": _json_params(estimator),
        "classes": classes.tolist(),
        "classes_kind": classes.dtype.kind,
        "n_features_in": int(estimator.n_features_in_),
        "objective": float(estimator.objective_),
        "n_iter": int(estimator.n_iter_),
        "converged": bool(estimator.converged_),
        "stopping_reason": estimator.stopping_reason_,
        "eps": float(estimator.eps_),
        "best_restart": int(estimator.best_restart_),
        "certificate": estimator.certificate_.to_dict(),
        "restarts": [r.to_dict() for r in estimator.restarts_],
    }
    dual = getattr(estimator.certificate_, "moment_dual", None)
    if dual is not None:
        dual_arrays, meta["certificate_moment"] = dual.to_arrays()
        arrays.update({_MOMENT_PREFIX + k: v for k, v in dual_arrays.items()})
    if name == "KernelCategorySpace" and "gamma" in estimator.kernel_.params:
        meta["kernel_gamma"] = float(estimator.kernel_.params["gamma"])  # the value used
    if hasattr(estimator, "feature_names_in_"):
        meta["feature_names_in"] = [str(f) for f in estimator.feature_names_in_]
    return arrays, meta


#: Largest entry of ``|C C^T - I|`` a loaded linear model's axes (``components_``, K x D) may
#: show: fits leave about 1e-12, and axes that are not orthonormal are not a category space.
#: A forged or damaged version whose checksums were recomputed is refused on load (and by
#: ``catdask check``, which loads every version).
ORTHONORMAL_TOLERANCE = 1e-6


def _check_orthonormal_axes(components):
    C = np.asarray(components, dtype=float)
    if C.ndim != 2 or C.shape[0] > C.shape[1]:
        raise ValueError(f"Model axes (components_) have shape {C.shape}; expected K x D, K <= D.")
    error = float(np.max(np.abs(C @ C.T - np.eye(C.shape[0])), initial=0.0))
    if not error <= ORTHONORMAL_TOLERANCE:  # NaN too
        raise ValueError(
            f"Model axes (components_) are not orthonormal: max |W^T W - I| = {error:.1e} > "
            f"{ORTHONORMAL_TOLERANCE:g}; the model was altered or damaged.")


#: A kernel model's axes ``w_k = sum_j A[k, j] phi(x_j)`` are orthonormal when ``A G A^T = I_K``
#: with ``G = k(X_fit_, X_fit_)`` (docs/design.md section 3; the paper's eqs. (10), (31)). For
#: ``origin="global"`` the stored ``A`` is the centred fit's ``A_c H`` (rows summing to zero),
#: so ``A G A^T = A_c G_c A_c^T`` is the same constraint. Checking it costs N^2 kernel entries
#: (a Gram pass of the fit: about 0.5 s at N = 4,000), so it runs up to this many entries: every
#: Nystroem model (at most 2,000 landmarks) and exact fits up to N = 4,000. Larger exact fits
#: get only the checks that cost O(K N): shapes, finite values, zero row sums (global origin)
#: or a zero offset (class origin).
KERNEL_AXES_CHECK_MAX_ENTRIES = 4000**2


def _check_kernel_axes(est):
    A, X, offset = est.dual_coef_, est.X_fit_, est.projection_offset_
    K, N = A.shape if A.ndim == 2 else (0, 0)
    if A.ndim != 2 or not 1 <= K <= N or X.shape[:1] != (N,) or offset.shape != (K,):
        raise ValueError(
            f"Kernel model arrays have shapes dual_coef_ {A.shape}, X_fit_ {X.shape}, "
            f"projection_offset_ {offset.shape}; expected K x N, N x D and K with K <= N.")
    if not (np.isfinite(A).all() and np.isfinite(X).all() and np.isfinite(offset).all()):
        raise ValueError("Kernel model arrays hold NaN or infinite values; the model was "
                         "altered or damaged.")
    # What the fit leaves exactly zero (_chosen_axes; a Nystroem fit's global origin has an
    # offset and coefficients on the landmarks that need not sum to zero).
    if est.origin == "class":
        structure, error = "projection_offset_ (class origin)", np.max(np.abs(offset))
    elif est.approximation is None:
        structure, error = "row sums of dual_coef_ (global origin)", np.max(np.abs(A.sum(1)))
    else:
        structure, error = "", 0.0
    if not error <= ORTHONORMAL_TOLERANCE * max(1.0, float(np.abs(A).sum(axis=1).max())):
        raise ValueError(f"Kernel model's {structure} are {error:.1e}, not zero; the model was "
                         "altered or damaged.")
    if N * N > KERNEL_AXES_CHECK_MAX_ENTRIES:
        return
    gram = np.zeros((K, K))  # A G A^T, G in row blocks (never N x N at once)
    step = max(1, KERNEL_AXES_CHECK_MAX_ENTRIES // 16 // N)
    largest = 0.0
    for a in range(0, N, step):
        block = est.kernel_(X[a : a + step], X)
        largest = max(largest, float(np.max(np.abs(block))))
        gram += A[:, a : a + step] @ (block @ A.T)
    error = float(np.max(np.abs(gram - np.eye(K))))
    # Round-off of a_k^T G a_k is below N eps ||a_k||_1^2 max|G|: legitimate models with large
    # coefficients on an ill-conditioned G are not refused (fits leave about 1e-13).
    roundoff = N * np.finfo(float).eps * float(np.abs(A).sum(axis=1).max()) ** 2 * largest
    if not error <= max(ORTHONORMAL_TOLERANCE, roundoff):  # NaN too
        raise ValueError(
            f"Kernel model axes are not orthonormal: max |A G A^T - I| = {error:.1e} > "
            f"{ORTHONORMAL_TOLERANCE:g} (G the kernel on X_fit_); the model was altered or "
            "damaged.")


def import_model(arrays, meta):
    """Rebuild a fitted estimator from :func:`export_model` output (no code is executed)."""
    if meta.get("preprocessing") == "standardise":
        scaler = StandardScaler()
        for a in _SCALER_ARRAYS:
            key = f"standardise.{a}"
            if key not in arrays:
                raise ValueError(f"Model arrays are missing {key!r}.")
            setattr(scaler, a, np.asarray(arrays[key], dtype=float))
        scaler.var_ = scaler.scale_**2
        scaler.n_features_in_ = scaler.mean_.shape[0]
        inner_meta = {k: v for k, v in meta.items() if k != "preprocessing"}
        return Pipeline([("standardise", scaler), ("model", import_model(arrays, inner_meta))])
    name = meta.get("class")
    if not isinstance(name, str) or name not in ESTIMATOR_CLASSES:
        raise ValueError(f"Unknown model class {name!r} in metadata.")
    params = dict(meta["params"])
    if params.get("init") == "given":
        params["init"] = "auto"
    est = ESTIMATOR_CLASSES[name](**params)
    for a in _ARRAYS[name]:
        if a not in arrays:
            raise ValueError(f"Model arrays are missing {a!r}.")
        arr = np.asarray(arrays[a])
        if arr.dtype.kind not in "fiu":
            raise ValueError(f"Model array {a!r} has non-numeric dtype {arr.dtype}.")
        setattr(est, a, arr.astype(float))
    if name == "CategorySpace":
        _check_orthonormal_axes(est.components_)
    if all(a in arrays for a in _CLASSIFIER_ARRAYS):
        for a in _CLASSIFIER_ARRAYS:
            setattr(est, a, np.asarray(arrays[a], dtype=float))
    else:
        est.classifier = "angle"
    kind = meta.get("classes_kind", "U")
    est.classes_ = np.asarray(meta["classes"], dtype=None if kind in "OU" else kind)
    est.n_features_in_ = int(meta["n_features_in"])
    if "feature_names_in" in meta:
        est.feature_names_in_ = np.asarray(meta["feature_names_in"], dtype=object)
    est.objective_ = float(meta["objective"])
    est.n_iter_ = int(meta["n_iter"])
    est.converged_ = bool(meta["converged"])
    est.stopping_reason_ = meta["stopping_reason"]
    est.eps_ = float(meta["eps"])
    est.best_restart_ = int(meta["best_restart"])
    est.certificate_ = Certificate.from_dict(meta["certificate"])
    if "certificate_moment" in meta:
        dual_arrays = {k[len(_MOMENT_PREFIX):]: np.asarray(v) for k, v in arrays.items()
                       if k.startswith(_MOMENT_PREFIX)}
        for key, a in dual_arrays.items():
            if a.dtype.kind not in "fiu":
                raise ValueError(f"Model array {_MOMENT_PREFIX + key!r} has non-numeric dtype "
                                 f"{a.dtype}.")
        try:
            dual = MomentDual.from_arrays(dual_arrays, meta["certificate_moment"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"Model's moment certificate data are malformed: {exc}") from exc
        est.certificate_ = dataclasses.replace(est.certificate_, moment_dual=dual)
    est.restarts_ = [
        RestartResult(**{
            "index": r["restart"], "start": r["start"], "objective": r["objective"],
            "n_iter": r["n_iter"], "converged": r["converged"],
            "stopping_reason": r["stopping_reason"], "step": r["step"], "seconds": r["seconds"],
        })
        for r in meta["restarts"]
    ]
    if name == "KernelCategorySpace":
        # The gamma the model was fitted with (models stored before it was recorded: gamma,
        # or make_kernel's 1 / n_features when None, the default they were fitted with).
        est.kernel_ = make_kernel(
            est.kernel, n_features=est.n_features_in_, gamma=meta.get("kernel_gamma", est.gamma),
            degree=est.degree, coef0=est.coef0, kernel_params=est.kernel_params,
        )
        _check_kernel_axes(est)
    return est
