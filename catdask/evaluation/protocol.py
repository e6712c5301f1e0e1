"""The paper's evaluation protocol: repeated 2/3 - 1/3 splits, reduce, then classify."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import StratifiedKFold, StratifiedShuffleSplit
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, MinMaxScaler, StandardScaler
from sklearn.svm import LinearSVC

#: SVM ``C`` values tried by the inner cross-validation.
C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
#: RBF gamma = factor / (D * var(X_train)) for these factors (kernel methods).
GAMMA_FACTORS = (0.1, 0.3, 1.0, 3.0, 10.0)
PREPROCESSING = ("none", "centre", "standardise", "minmax")


# ---------------------------------------------------------------------------- pieces
def make_preprocessor(preprocessing):
    """Unfitted preprocessing transformer for a name in :data:`PREPROCESSING`."""
    if not isinstance(preprocessing, str):
        return clone(preprocessing)
    if preprocessing == "none":
        return FunctionTransformer(None)
    if preprocessing == "centre":
        return StandardScaler(with_std=False)
    if preprocessing == "standardise":
        return StandardScaler()
    if preprocessing == "minmax":
        return MinMaxScaler()
    raise ValueError(
        f"preprocessing must be one of {PREPROCESSING} or a transformer; got {preprocessing!r}."
    )


def make_splits(y, *, n_splits=10, test_size=1 / 3, random_state=0):
    """The outer splits: ``n_splits`` stratified random 2/3 - 1/3 ``(train_idx, test_idx)``."""
    sss = StratifiedShuffleSplit(n_splits=n_splits, test_size=test_size, random_state=random_state)
    return list(sss.split(np.zeros(len(y)), y))


def gamma_grid(X_train, factors=GAMMA_FACTORS):
    """RBF gammas ``factor / (D * var)`` from (preprocessed) training data only."""
    var = float(np.var(X_train))
    base = 1.0 / (X_train.shape[1] * (var if var > 0 else 1.0))
    return [base * f for f in factors]


def _subsample(y, max_samples, seed):
    """Stratified subsample indices (sorted) of at most ``max_samples`` rows."""
    if max_samples is None or len(y) <= max_samples:
        return None
    sss = StratifiedShuffleSplit(n_splits=1, train_size=max_samples, random_state=seed)
    idx, _ = next(sss.split(np.zeros(len(y)), y))
    return np.sort(idx)


def _fit_reduce(method, params, seed, n_classes, preprocessing, X_fit, y_fit, X_others,
                stage="final"):
    """Fit preprocessing + reduction on ``X_fit``; return the estimator and transformed sets."""
    pre = make_preprocessor(preprocessing).fit(X_fit)
    Xf = pre.transform(X_fit)
    est = method.builder(stage)(n_classes, params, seed)
    est.fit(Xf, y_fit)
    if method.classifier == "angle":
        return pre, est, None, None
    return pre, est, est.transform(Xf), [est.transform(pre.transform(Xo)) for Xo in X_others]


def _svm(C, seed):
    return make_pipeline(StandardScaler(), LinearSVC(C=C, max_iter=10000, random_state=seed))


def _select(method, X, y, n_classes, preprocessing, seed, *, inner_folds, C_grid, gamma_factors):
    """Inner stratified CV on the training part: the best (params, C) by mean accuracy."""
    candidates = [{}] if not method.kernel else [
        {"gamma": g} for g in gamma_grid(make_preprocessor(preprocessing).fit_transform(X),
                                         gamma_factors)]
    Cs = list(C_grid) if method.classifier == "svm" else [None]
    if len(candidates) * len(Cs) == 1:
        return candidates[0], Cs[0]
    scores = np.zeros((len(candidates), len(Cs)))
    folds = StratifiedKFold(n_splits=inner_folds, shuffle=True, random_state=seed)
    for tr, va in folds.split(X, y):
        for i, params in enumerate(candidates):
            pre, est, Ztr, Zva = _fit_reduce(
                method, params, seed, n_classes, preprocessing, X[tr], y[tr], [X[va]],
                stage="select",
            )
            if method.classifier == "angle":
                scores[i, 0] += np.mean(est.predict(pre.transform(X[va])) == y[va])
                continue
            for j, C in enumerate(Cs):
                clf = _svm(C, seed).fit(Ztr, y[tr])
                scores[i, j] += np.mean(clf.predict(Zva[0]) == y[va])
    scores /= inner_folds
    # Ties: the first candidate (smallest gamma factor, smallest C) wins, deterministically.
    i, j = np.unravel_index(np.argmax(scores), scores.shape)
    return candidates[i], Cs[j]


def evaluate_split(method, X, y, train, test, *, preprocessing="standardise", seed=0,
                   inner_folds=3, C_grid=C_GRID, gamma_factors=GAMMA_FACTORS):
    """One outer split: select on ``train``, refit on ``train``, score on ``test``. Returns
    ``accuracy``, the selected ``params`` and ``C``, ``select_seconds``, ``fit_seconds``,
    ``predict_seconds`` and ``warnings`` (messages of the ConvergenceWarnings raised)."""
    n_classes = len(np.unique(y[train]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        t0 = time.perf_counter()
        params, C = _select(
            method, X[train], y[train], n_classes, preprocessing, seed,
            inner_folds=inner_folds, C_grid=C_grid, gamma_factors=gamma_factors,
        )
        t1 = time.perf_counter()
        pre, est, Ztr, Zte = _fit_reduce(
            method, params, seed, n_classes, preprocessing, X[train], y[train], [X[test]]
        )
        clf = None if method.classifier == "angle" else _svm(C, seed).fit(Ztr, y[train])
        t2 = time.perf_counter()
        pred = est.predict(pre.transform(X[test])) if clf is None else clf.predict(Zte[0])
        t3 = time.perf_counter()
    return {
        "accuracy": float(np.mean(pred == y[test])),
        "params": params,
        "C": C,
        "select_seconds": t1 - t0,
        "fit_seconds": t2 - t1,
        "predict_seconds": t3 - t2,
        "warnings": sorted({_first_sentence(w.message) for w in caught
                            if issubclass(w.category, ConvergenceWarning)}),
    }


def _first_sentence(message, limit=160):
    text = str(message).split(". ")[0].strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------- results
@dataclass
class MethodResult:
    """Test accuracies of one method on one data set over the outer splits: ``dataset``, ``method``,
    ``paper_column``; ``accuracies`` (fractions, empty when the method failed, see ``error``);
    ``splits`` (per split: the selected ``params`` and ``C``, timings, convergence warnings);
    ``preprocessing``, ``classifier``; ``n_samples`` rows used (after any subsampling) of
    ``n_samples_total``; a ``note`` (e.g. subsampling).
    """

    dataset: str
    method: str
    paper_column: str | None
    accuracies: np.ndarray
    splits: list = field(default_factory=list)
    preprocessing: str = "standardise"
    classifier: str = "svm"
    n_samples: int = 0
    n_samples_total: int = 0
    n_features: int = 0
    n_classes: int = 0
    note: str = ""
    error: str | None = None

    @property
    def mean(self):
        return float(np.mean(self.accuracies)) if len(self.accuracies) else float("nan")

    @property
    def std(self):
        return float(np.std(self.accuracies, ddof=1)) if len(self.accuracies) > 1 else float("nan")

    @property
    def seconds(self):
        """Mean wall time per split (selection + refit + prediction)."""
        if not self.splits:
            return float("nan")
        return float(np.mean([s["select_seconds"] + s["fit_seconds"] + s["predict_seconds"]
                              for s in self.splits]))

    @property
    def n_warnings(self):
        return sum(len(s["warnings"]) for s in self.splits)


def evaluate_method(method, X, y, *, dataset="", n_splits=10, test_size=1 / 3,
                    preprocessing="standardise", random_state=0, inner_folds=3,
                    C_grid=C_GRID, gamma_factors=GAMMA_FACTORS, max_samples=None, n_jobs=1):
    """Run the protocol for one :class:`Method` on one data set: a :class:`MethodResult`."""
    X = np.asarray(X, dtype=float)
    y = np.asarray(y)
    n_total = len(y)
    note = ""
    keep = _subsample(y, max_samples, random_state)
    if keep is not None:
        X, y = X[keep], y[keep]
        note = f"stratified subsample of {len(y)} of {n_total} rows"
    splits = make_splits(y, n_splits=n_splits, test_size=test_size, random_state=random_state)
    kwargs = dict(preprocessing=preprocessing, inner_folds=inner_folds, C_grid=C_grid,
                  gamma_factors=gamma_factors)
    if n_jobs == 1:
        out = [evaluate_split(method, X, y, tr, te, seed=random_state + s, **kwargs)
               for s, (tr, te) in enumerate(splits)]
    else:
        from joblib import Parallel, delayed

        out = Parallel(n_jobs=n_jobs)(
            delayed(evaluate_split)(method, X, y, tr, te, seed=random_state + s, **kwargs)
            for s, (tr, te) in enumerate(splits)
        )
    return MethodResult(
        dataset=dataset,
        method=method.name,
        paper_column=method.paper_column,
        accuracies=np.array([o["accuracy"] for o in out]),
        splits=out,
        preprocessing=(preprocessing if isinstance(preprocessing, str)
                       else type(preprocessing).__name__),
        classifier=("LinearSVC (one-vs-rest)" if method.classifier == "svm"
                    else "angle (argmax |p_k|)"),
        n_samples=len(y),
        n_samples_total=n_total,
        n_features=X.shape[1],
        n_classes=len(np.unique(y)),
        note=note,
    )

