"""Train: fit restarts on a stored data set, test the best for global optimality, decide, register."""

from __future__ import annotations

import contextlib
import dataclasses
import time

import numpy as np
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from ..certificate.budget import aiming_at, budget_scope
from ..core.progress import quiet_solvers
from ..core.validation import check_value_range
from ..distributed.store_visibility import check_workers_see_store
from ..methods import METHODS
from ..store import open_dataset_arrays, register_estimator
from .device import HOST, device_placement
from .reports import reported_gap
from .spec import ModelSpec

@dataclasses.dataclass
class FitOutcome:
    """A fitted model with everything the registry and the reports need."""

    dataset: str
    dataset_sha256: str
    spec: ModelSpec
    model: object  # sklearn Pipeline (standardise + estimator) or the bare estimator
    seconds: float
    metrics: dict
    dataset_snapshot: str | None = None
    # Where the Gram products ran with ``spec.device`` (catdask.pipeline.device); None without.
    device_placement: str | None = None
    # The shared lock on the snapshot fitted on, kept until the version that records it is
    # registered (then the version protects it): gc must not remove it in between.
    dataset_hold: object = dataclasses.field(default=None, repr=False, compare=False)

    def release(self):
        """Release the snapshot fitted on (:func:`register_outcome` does it once registered)."""
        if self.dataset_hold is not None:
            self.dataset_hold.close()
            self.dataset_hold = None

    @property
    def estimator(self):
        return self.model[-1] if isinstance(self.model, Pipeline) else self.model

    @property
    def certificate(self):
        return self.estimator.certificate_


def _fitted_scaler(mean, scale, n_samples):
    scaler = StandardScaler()
    scaler.mean_ = mean
    scaler.var_ = scale**2
    scaler.scale_ = scale
    scaler.n_features_in_ = mean.shape[0]
    scaler.n_samples_seen_ = n_samples
    return scaler


def fit_on_dataset(store, dataset, spec, *, client=None):
    """Fit ``spec`` on a stored data set; the estimator tests its best restart for global
    optimality. With a ``client`` the data stay in zarr, read as Dask arrays (docs/design.md
    section 5), unless ``spec.device`` runs on this host (:func:`.device.device_placement`).
    The :class:`FitOutcome` holds its snapshot (gc keeps it) until :func:`register_outcome` or
    :meth:`FitOutcome.release`."""
    t0 = time.perf_counter()
    placement = device_placement(spec.device, client)
    if placement == HOST:
        client = None  # X in memory: the estimator's numpy path, products on this device
    # The name resolves to one immutable snapshot here, once; every later read (Dask passes
    # included) is of that snapshot, whatever a concurrent re-ingest does to the name. The
    # reader's lock keeps gc from removing it until the model that records it is registered
    # (or the outcome released): between the fit and the registration no version refers to it.
    arrays = open_dataset_arrays(store, dataset, dask=client is not None)
    try:
        check_workers_see_store(client, arrays.path)  # a store the workers cannot read: stop now
        outcome = _fit_on_arrays(arrays, dataset, spec, client, t0)
    except BaseException:
        arrays.close()
        raise
    outcome.dataset_hold = arrays.take_hold()
    outcome.device_placement = placement
    return outcome


def _fit_on_arrays(arrays, dataset, spec, client, t0):
    X = arrays.X
    codes = np.asarray(arrays.y_codes[:])
    y = np.asarray(arrays.classes)[codes]
    if client is None:
        X = np.asarray(X[:], dtype=float)
    steps = []
    # Values the arithmetic cannot carry are refused here, in the estimator's sentence: a Dask
    # fit does not see them before its passes overflow ("no variation", "contains NaN").
    top = abs(X).max()
    if spec.standardise:
        if client is None:
            check_value_range(float(top), *X.shape, squares_only=True)
            mean, std = X.mean(axis=0), X.std(axis=0)
        else:  # one pass over the blocks on the workers for the moments and the range
            top, mean, std = client.compute([top, X.mean(axis=0), X.std(axis=0)], sync=True)
            check_value_range(float(top), *X.shape, squares_only=True)
        mean, std = np.asarray(mean, dtype=float), np.asarray(std, dtype=float)
        scale = np.where(std > 0, std, 1.0)  # constant columns (segmentation) stay as they are
        X = (X - mean) / scale
        if client is not None:
            # Standardised once on the workers: the fit's passes and the metrics then share
            # these blocks (each graph rebuilding them would read the snapshot again, and two
            # graphs submitting the same keys differently fused make the scheduler warn).
            X = client.persist(X)
        steps.append(("standardise", _fitted_scaler(mean, scale, len(codes))))
    else:
        check_value_range(float(top if client is None else client.compute(top, sync=True)),
                          *X.shape)
    est = spec.estimator()
    # The estimator computes with dask's current scheduler: make it the given client even when
    # that client is not the process-wide default (the persisted blocks live on its workers).
    # --max-gap G: the certifiers built by this fit try until they prove G (the budget is kept
    # for a certificate computed later, at the registration decision).
    with (contextlib.nullcontext() if client is None else client.as_current(),
          budget_scope(aiming_at(spec.max_gap))):
        est.fit(X, y)
        with quiet_solvers():  # the progress shown is the model's fit, not the CV folds'
            metrics = training_metrics(est, X, y)
    model = Pipeline(steps + [("model", est)]) if steps else est
    return FitOutcome(
        dataset=dataset,
        dataset_sha256=arrays.attrs.get("content_sha256", ""),
        dataset_snapshot=getattr(arrays, "snapshot", None),
        spec=spec,
        model=model,
        seconds=time.perf_counter() - t0,
        metrics=metrics,
    )


#: Training sets of at most this many samples also get a cross-validated accuracy of the
#: model's own ``predict`` (k more fits, without the certificate); an exact kernel fit costs
#: O(N^2) per iteration, hence its lower limit.
CV_MAX_SAMPLES = {"linear": 20_000, "kernel": 2_000}


def training_metrics(estimator, X, y):
    """Training metrics: in-sample accuracy of ``predict`` and of the paper's angle classifier,
    ``predict``'s accuracy cross-validated on k stratified folds (k = 3, fewer for small classes;
    NaN above :data:`CV_MAX_SAMPLES`), and a linear SVM cross-validated on the category space. The
    paper's held-out protocol is :mod:`catdask.evaluation`.
    """
    from sklearn.model_selection import cross_val_score
    from sklearn.svm import LinearSVC

    if hasattr(X, "compute") and len(y) <= CV_MAX_SAMPLES[_kind(estimator)]:
        # The folds need it here anyway, and predicting here spares the workers importing
        # scikit-learn to unpickle the model: 3-8 s of a 150-row `catdask train` on 2 cores.
        X = np.asarray(X.compute())
    P, predicted = _coordinates_and_predictions(estimator, X)
    angle = estimator.classes_[np.argmax(np.abs(P), axis=1)]
    n_folds = int(min(3, np.unique(y, return_counts=True)[1].min()))
    svm = cross_val_score(LinearSVC(), P, y, cv=n_folds).mean() if n_folds >= 2 else np.nan
    return {
        "train_accuracy_predict": float(np.mean(predicted == y)),
        "train_accuracy_angle": float(np.mean(angle == y)),
        "cv_accuracy_predict": _cv_accuracy_of_predict(estimator, X, y, n_folds),
        "cv_accuracy_linear_svm_on_category_space": float(svm),
        **_missing_figures(estimator, y, n_folds),
    }


def _coordinates_and_predictions(estimator, X):
    """``transform(X)`` and ``predict(X)`` as numpy arrays. A Dask X is worked on the
    cluster with the fitted model scattered to the workers once: in the graph, a kernel
    model (its training rows, 9.6 MB at 30,000 x 40) made Dask warn "Sending large graph"
    once per graph."""
    if not hasattr(X, "map_blocks"):
        return np.asarray(estimator.transform(X)), np.asarray(estimator.predict(X))
    from dask.distributed import get_client

    from ..distributed.execute import BlockRunner, scatter_everywhere
    from ..distributed.inputs import as_row_chunked

    X, client = as_row_chunked(X), get_client()
    (model,) = scatter_everywhere(client, {BlockRunner.new_key("model"): estimator}).values()
    K = len(estimator.classes_)
    both = X.map_blocks(_block_coordinates_and_codes, model, dtype=np.float64,
                        chunks=(X.chunks[0], (K + 1,)), meta=np.empty((0, K + 1)))
    both = np.asarray(client.compute(both, sync=True))
    return both[:, :K], estimator.classes_[both[:, K].astype(int)]


def _block_coordinates_and_codes(x, estimator):
    """One row block's coordinates and predicted class index, side by side."""
    x = np.asarray(x, dtype=np.float64)
    codes = np.searchsorted(estimator.classes_, estimator.predict(x))
    return np.column_stack([estimator.transform(x), codes])


def _missing_figures(estimator, y, n_folds) -> dict:
    """``{"cv_accuracy_predict_missing": why}`` when that figure is not computed (a figure
    that is NaN says why, in the record and the reports); else ``{}``."""
    if n_folds < 2:
        why = "a class has fewer than 2 samples: no stratified folds"
    elif len(y) > CV_MAX_SAMPLES[_kind(estimator)]:
        why = (f"not computed above {CV_MAX_SAMPLES[_kind(estimator)]:,} samples for a "
               f"{_kind(estimator)} method ({len(y):,} here): it refits the model per fold; "
               "`catdask evaluate` measures held-out accuracy")
    else:
        return {}
    return {"cv_accuracy_predict_missing": why}


def _kind(estimator) -> str:
    from ..estimators import KernelCategorySpace

    return "kernel" if isinstance(estimator, KernelCategorySpace) else "linear"


def _cv_accuracy_of_predict(estimator, X, y, n_folds):
    """Mean held-out accuracy of ``predict`` over ``n_folds`` stratified folds (NaN when the
    set is over :data:`CV_MAX_SAMPLES` or ``n_folds < 2``)."""
    from sklearn.base import clone
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    if n_folds < 2 or len(y) > CV_MAX_SAMPLES[_kind(estimator)]:
        return float("nan")
    folds = clone(estimator)
    if "certify" in folds.get_params():
        folds.set_params(certify=False)  # the registered model is certified; a fold's is not used
    if folds.get_params().get("device") is not None:
        # At most CV_MAX_SAMPLES rows: on the CPU. The fit's device may not be in this process
        # (the products ran on the cluster's GPU workers, catdask.pipeline.device).
        folds.set_params(device=None)
    cv = StratifiedKFold(n_folds, shuffle=True, random_state=0)
    return float(cross_val_score(folds, X, y, cv=cv).mean())


def registration_decision(outcome, *, allow_uncertified=False, max_gap=None):
    """``(register, status)``: whether to register ``outcome`` and the status recorded with it:
    ``"certified"``, ``"certificate-not-applicable"`` (CAS, K-CAS), ``"gap-within-tolerance"``
    (rigorous gap at most ``max_gap``), ``"uncertified-allowed"`` (``allow_uncertified``) or
    ``"rejected-uncertified"`` (not registered)."""
    policy = dataclasses.replace(outcome.spec, allow_uncertified=allow_uncertified,
                                 max_gap=max_gap)
    return policy.registration_decision(outcome.certificate)


def outcome_meta(outcome, *, status, extra=None) -> dict:
    """What a fit's record says besides its arrays: data set, spec, status, certificate
    summary, metrics, code version and the train cache's key (a registered version's and a
    rejected candidate's, :mod:`catdask.pipeline.candidates`)."""
    from .model_cache import cache_key, code_version

    cert = outcome.certificate
    code = code_version()
    return {
        "dataset": outcome.dataset,
        "dataset_sha256": outcome.dataset_sha256,
        "dataset_snapshot": outcome.dataset_snapshot,
        "spec": outcome.spec.to_dict(),
        "registration_status": status,
        "certified": bool(cert.certified),
        # Certified: the verified margin (``gap`` itself is rounded to 0); else the bound's gap.
        "gap": reported_gap(cert),
        "metrics": outcome.metrics,
        "fit_seconds": outcome.seconds,
        "code_version": code,
        "cache_key": cache_key(outcome.dataset_sha256, outcome.spec.to_dict(), code),
        "device_placement": outcome.device_placement,
        **(extra or {}),
    }


def register_outcome(store, name, outcome, *, status, run_key=None, extra=None):
    """Register a fitted outcome as a new immutable version (idempotent per ``run_key``)."""
    meta = outcome_meta(outcome, status=status, extra=extra)
    version = register_estimator(store, name, outcome.model, meta, run_key=run_key)
    outcome.release()  # the version refers to the snapshot now
    return version
