"""The paper's evaluation protocol: repeated 2/3 - 1/3 splits, reduce, then classify.

For every split (stratified, seeded; default 10 repeats):

1. preprocessing (``"none"``, ``"centre"``, ``"standardise"`` or ``"minmax"``) is fitted on
   the training part only (per table: see :func:`paper_experiments`);
2. hyper-parameters are chosen by an inner stratified K-fold on the training part only
   (preprocessing refitted inside each inner fold): the SVM's ``C`` over ``C_GRID`` and, for
   kernel methods, the RBF ``gamma`` over ``gamma_grid`` (``factor / (D * var)`` with ``var``
   the preprocessed training variance, i.e. scikit-learn's ``gamma="scale"`` times
   ``GAMMA_FACTORS``). The reduction is fitted once per (fold, gamma) and shared by all ``C``;
3. the chosen pipeline is refitted on the whole training part and scored on the test part.

Classifier: ``LinearSVC`` (one-vs-rest, squared hinge, liblinear) on the reduced coordinates
standardised on the training part (so one ``C`` grid suits every reduction's scale). The
angle-classifier methods (``...-A``) use the category-space estimator's own ``predict``
(``argmax_k |p_k|``) instead, with only gamma (kernel) selected.

Nothing here looks at the test part before step 3: ``tests/test_evaluation.py`` checks this
with a spy transformer.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import StratifiedKFold, StratifiedShuffleSplit
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, MinMaxScaler, StandardScaler
from sklearn.svm import LinearSVC

from . import baselines

__all__ = [
    "C_GRID",
    "GAMMA_FACTORS",
    "PROTOCOL_TOL",
    "SELECT_RESTARTS",
    "Method",
    "MethodResult",
    "Experiment",
    "ExperimentResult",
    "paper_methods",
    "paper_experiments",
    "make_preprocessor",
    "make_splits",
    "gamma_grid",
    "evaluate_split",
    "evaluate_method",
    "run_experiment",
]

#: SVM regularisation values tried by the inner cross-validation.
C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
#: RBF gamma = factor / (D * var(X_train)) for these factors (kernel methods).
GAMMA_FACTORS = (0.1, 0.3, 1.0, 3.0, 10.0)
#: Category-space stopping tolerance in the protocol (the paper's is 1e-8; see paper_methods).
PROTOCOL_TOL = 1e-6
#: Category-space restarts per fit inside the inner cross-validation (final refit: 5).
SELECT_RESTARTS = 2
PREPROCESSING = ("none", "centre", "standardise", "minmax")


# ---------------------------------------------------------------------------- methods
@dataclass(frozen=True)
class Method:
    """One dimensionality-reduction method of the comparison.

    Attributes
    ----------
    name : str
        Our name, e.g. ``"K-CQS-global"``.
    build : callable
        ``build(n_classes, params, seed) -> estimator``. ``params`` holds the selected
        hyper-parameters (``{"gamma": ...}`` for kernel methods, else empty); ``seed`` an int.
        The estimator is a transformer, or (``classifier="angle"``) has ``predict``.
    classifier : {"svm", "angle"}
        Linear SVM on the reduced coordinates, or the estimator's own ``predict``.
    kernel : bool
        Select the RBF gamma by inner cross-validation.
    paper_column : str or None
        Column of the paper's table this method is compared with.
    description : str
    select_build : callable or None
        Builder used inside the inner cross-validation only (e.g. fewer restarts); None
        means ``build``. The final refit, which is what the test part scores, always uses
        ``build``.
    """

    name: str
    build: Callable
    classifier: str = "svm"
    kernel: bool = False
    paper_column: str | None = None
    description: str = ""
    select_build: Callable | None = None

    def builder(self, stage):
        """``build`` for the final refit (``stage="final"``); ``select_build`` (if set) for
        the inner cross-validation (``stage="select"``)."""
        if stage == "select" and self.select_build is not None:
            return self.select_build
        return self.build


def paper_methods(*, n_restarts=5, select_restarts=SELECT_RESTARTS, tol=PROTOCOL_TOL,
                  certify=False, kfd_reg=1e-3, max_iter=2000):
    """Every method of the paper's Tables 1-3, plus the variants we add.

    Category-space methods come in both origins (DESIGN.md 3b): ``-class`` is the paper's
    Algorithm 1, ``-global`` its eq. (1) with x0 the training centroid.

    Parameters
    ----------
    n_restarts, max_iter : int
        Passed to :class:`catdask.CategorySpace` / :class:`catdask.KernelCategorySpace` for
        the final refit on the whole training part (the model the test part scores).
    select_restarts : int or None, default=SELECT_RESTARTS
        Restarts per fit inside the inner cross-validation (hyper-parameter selection only;
        the first start is the deterministic "decoupled" one). None: ``n_restarts``.
    tol : float, default=PROTOCOL_TOL
        Stopping tolerance on the step ``||W_new - W_old||`` (kernel: RKHS norm). The paper
        uses 1e-8; 1e-6 moves the reduced coordinates by ~1e-6 (relative), far below what
        changes an SVM decision on these data (measured: docs/reproduction.md), and saves
        the slow tail of the linear convergence.
    certify : bool, default=False
        Certificates are not needed for accuracy and cost time; off by default.
    kfd_reg : float
        Relative regulariser of :class:`~catdask.evaluation.baselines.KernelFisherDiscriminant`.

    Returns
    -------
    dict of str to Method
    """
    methods = {}

    def add(m):
        methods[m.name] = m

    def category(kernel, objective, origin, restarts):
        def build(n_classes, params, seed):
            import catdask

            common = dict(
                objective=objective,
                origin=origin,
                n_restarts=restarts,
                tol=tol,
                max_iter=max_iter,
                certify=certify,
                random_state=seed,
                classifier="angle",  # the paper's angle classifier for the ...-A methods
            )
            if kernel:
                return catdask.KernelCategorySpace(kernel="rbf", gamma=params["gamma"], **common)
            return catdask.CategorySpace(**common)

        return build

    for kernel in (False, True):
        for objective, short in (("quadratic", "CQS"), ("absolute", "CAS")):
            for classifier in ("svm", "angle"):
                for origin in ("global", "class"):
                    angle = "-A" if classifier == "angle" else ""
                    column = ("K-" if kernel else "") + short + angle
                    add(
                        Method(
                            name=f"{column}-{origin}",
                            build=category(kernel, objective, origin, n_restarts),
                            select_build=(
                                None if select_restarts in (None, n_restarts)
                                else category(kernel, objective, origin, select_restarts)
                            ),
                            classifier=classifier,
                            kernel=kernel,
                            paper_column=column,
                            description=(
                                f"{'Kernel (RBF) ' if kernel else ''}category space, "
                                f"{objective} objective, origin={origin!r}, "
                                + ("linear SVM" if classifier == "svm" else "angle classifier")
                            ),
                        )
                    )
    add(Method("PCA", lambda K, p, s: baselines.make_pca(K), paper_column="PCA",
               description="PCA, K components (sklearn PCA)"))
    add(Method("MC-FLD", lambda K, p, s: baselines.make_mcfld(K), paper_column="MC-FLD",
               description="multi-class Fisher, K-1 components (sklearn LDA, solver='svd')"))
    add(Method("LS-LDA", lambda K, p, s: baselines.LeastSquaresLDA(), paper_column="LS-LDA",
               description="least-squares LDA (Ye 2007), K outputs, minimum-norm solution"))
    add(Method("K-PCA", lambda K, p, s: baselines.make_kernel_pca(K, gamma=p["gamma"]),
               kernel=True, paper_column="K-PCA",
               description="kernel PCA (RBF), K components (sklearn KernelPCA)"))
    add(Method("K-MC-FLD",
               lambda K, p, s: baselines.KernelFisherDiscriminant(gamma=p["gamma"], reg=kfd_reg),
               kernel=True, paper_column="K-MC-FLD",
               description=f"multi-class kernel Fisher (RBF), K-1 components, reg={kfd_reg}"))
    return methods


# ---------------------------------------------------------------------------- pieces
def make_preprocessor(preprocessing):
    """Unfitted preprocessing transformer for a name in :data:`PREPROCESSING`.

    A transformer instance is also accepted (it is cloned). Standardising leaves constant
    features at zero (scikit-learn's ``StandardScaler`` uses scale 1 for them); ``"minmax"``
    maps each training feature to [0, 1].
    """
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
    """The outer splits: ``n_splits`` stratified random 2/3 - 1/3 partitions.

    Returns
    -------
    list of (train_idx, test_idx)
    """
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


def _candidates(method, X_train, preprocessing, gamma_factors):
    if not method.kernel:
        return [{}]
    Xp = make_preprocessor(preprocessing).fit_transform(X_train)
    return [{"gamma": g} for g in gamma_grid(Xp, gamma_factors)]


def _select(method, X, y, n_classes, preprocessing, seed, *, inner_folds, C_grid, gamma_factors):
    """Inner stratified CV on the training part: the best (params, C) by mean accuracy."""
    candidates = _candidates(method, X, preprocessing, gamma_factors)
    Cs = list(C_grid) if method.classifier == "svm" else [None]
    if len(candidates) * len(Cs) == 1:
        return candidates[0], Cs[0], {}
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
    table = {
        (tuple(sorted(candidates[a].items())), Cs[b]): float(scores[a, b])
        for a in range(len(candidates))
        for b in range(len(Cs))
    }
    return candidates[i], Cs[j], table


def evaluate_split(method, X, y, train, test, *, preprocessing="standardise", seed=0,
                   inner_folds=3, C_grid=C_GRID, gamma_factors=GAMMA_FACTORS):
    """One outer split: select on ``train``, refit on ``train``, score on ``test``.

    Returns
    -------
    dict
        ``accuracy``, ``params`` (selected), ``C``, ``select_seconds``, ``fit_seconds``,
        ``predict_seconds``, ``warnings`` (messages of ConvergenceWarnings raised).
    """
    n_classes = len(np.unique(y[train]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        t0 = time.perf_counter()
        params, C, _ = _select(
            method, X[train], y[train], n_classes, preprocessing, seed,
            inner_folds=inner_folds, C_grid=C_grid, gamma_factors=gamma_factors,
        )
        t1 = time.perf_counter()
        pre, est, Ztr, Zte = _fit_reduce(
            method, params, seed, n_classes, preprocessing, X[train], y[train], [X[test]]
        )
        clf = None if method.classifier == "angle" else _svm(C, seed).fit(Ztr, y[train])
        t2 = time.perf_counter()
        if clf is None:
            pred = est.predict(pre.transform(X[test]))
        else:
            pred = clf.predict(Zte[0])
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
    """Test accuracies of one method on one data set over the outer splits.

    Attributes
    ----------
    dataset, method : str
    paper_column : str or None
    accuracies : ndarray of shape (n_splits,)
        Fractions in [0, 1]; empty when the method failed (see ``error``).
    splits : list of dict
        Per split: selected ``params`` and ``C``, timings, convergence warnings.
    preprocessing, classifier : str
    n_samples : int
        Rows used (after any subsampling); ``n_samples_total`` rows in the data set.
    note : str
        E.g. subsampling.
    error : str or None
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
    """Run the protocol for one method on one data set.

    Parameters
    ----------
    method : Method
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    n_splits : int, default=10
    test_size : float, default=1/3
    preprocessing : {"none", "centre", "standardise", "minmax"} or transformer, \
            default="standardise"
    random_state : int, default=0
        Seeds the outer splits (:func:`make_splits`), the inner folds and the estimators.
    inner_folds : int, default=3
    C_grid, gamma_factors : sequence of float
    max_samples : int, default=None
        Stratified subsample of the data set (seeded) before splitting, for kernel methods on
        large sets; recorded in ``note``.
    n_jobs : int, default=1
        Outer splits run in parallel with joblib when > 1.

    Returns
    -------
    MethodResult
    """
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


# ---------------------------------------------------------------------------- experiments
@dataclass(frozen=True)
class Experiment:
    """One of the paper's tables: which methods, which preprocessing, which paper numbers.

    Attributes
    ----------
    key : str
        ``"table1"``, ``"table2"``, ``"table3"``.
    title : str
    methods : tuple of str
        Names in :func:`paper_methods`.
    preprocessing : str
    max_samples : int or None
        Subsample larger data sets to this many rows (kernel tables; recorded per result).
    """

    key: str
    title: str
    methods: tuple
    preprocessing: str = "standardise"
    max_samples: int | None = None


def paper_experiments(*, kernel_max_samples=2000):
    """Our protocol for each of the paper's three tables.

    Preprocessing (the paper does not state it):

    - Table 1: ``"none"`` (raw features). Measured, 5 splits: PCA on raw wine gives 78.7%
      (paper 77.19%) against 96.7% standardised; raw vehicle PCA 51.4% (paper 55.36%) against
      43.2%; raw segmentation PCA 89.3% (paper 94.40%) against 81.2%; 10 splits, raw vs
      standardised CQS-global: vehicle 54.5% vs 44.1% (paper 53.91%), segmentation 90.0% vs
      79.7% (paper 93.14%), but wine 87.7% vs 96.3% (paper 96.07%). Raw features match the
      paper in most cells, so Table 1 was most likely run without scaling (wine CQS is the
      exception).
    - Tables 2 and 3: ``"standardise"`` (z-score on the training part): the paper's RBF width
      range ([0.1, 0.8], Figures 1-3) only makes sense on scaled data and Table 3's LaTeX label
      is ``kernel-zscore-angle``. (Table 2's label says ``kernel-norm``; ``"minmax"`` is
      available to test that reading.)

    Kernel tables subsample data sets larger than ``kernel_max_samples`` (satellite,
    N = 6435). Table 3 also carries the linear angle-classifier variants (no paper numbers).
    """
    t1 = ("CQS-global", "CQS-class", "CAS-global", "CAS-class", "LS-LDA", "PCA", "MC-FLD")
    t2 = ("K-CQS-global", "K-CQS-class", "K-CAS-global", "K-CAS-class", "K-PCA", "K-MC-FLD")
    t3 = ("K-CQS-A-global", "K-CQS-A-class", "K-CAS-A-global", "K-CAS-A-class",
          "CQS-A-global", "CQS-A-class", "CAS-A-global", "CAS-A-class")
    return {
        "table1": Experiment("table1", "Linear dimensionality reduction w/ SVM classification", t1,
                             preprocessing="none"),
        "table2": Experiment("table2", "Kernel dimensionality reduction w/ SVM classification", t2,
                             max_samples=kernel_max_samples),
        "table3": Experiment("table3", "Kernel dimensionality reduction w/ angle classification",
                             t3, max_samples=kernel_max_samples),
    }


@dataclass
class ExperimentResult:
    """All results of one experiment (table), plus the data sets it had to skip and why."""

    experiment: Experiment
    results: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)


def run_experiment(experiment, datasets, *, loader=None, methods=None, n_splits=10,
                   random_state=0, inner_folds=3, n_jobs=1, progress=print, settings=None):
    """Run one table's methods on the given data sets.

    Parameters
    ----------
    experiment : Experiment
    datasets : sequence of str
    loader : callable, default=None
        ``loader(name) -> (X, y)``; default :func:`catdask.evaluation.data.load_xy`. A
        :class:`FileNotFoundError` skips the data set, with a message through ``progress``.
    methods : dict of str to Method, default=None
        Default :func:`paper_methods`.
    progress : callable or None
        Called with one line of text per step.
    settings : dict, default=None
        Extra entries for ``ExperimentResult.settings`` (e.g. the estimators' ``tol`` and
        restarts), so the written tables say how they were made.

    Returns
    -------
    ExperimentResult
        ``settings["seconds"]`` is the wall time of the whole experiment.
    """
    if loader is None:
        from .data import load_xy as loader
    methods = paper_methods() if methods is None else methods
    say = progress or (lambda *_: None)
    out = ExperimentResult(experiment, settings=dict(
        n_splits=n_splits, random_state=random_state, inner_folds=inner_folds,
        preprocessing=experiment.preprocessing, max_samples=experiment.max_samples,
        C_grid=list(C_GRID), gamma_factors=list(GAMMA_FACTORS), **(settings or {}),
    ))
    start = time.perf_counter()
    for name in datasets:
        try:
            X, y = loader(name)
        except FileNotFoundError as exc:
            out.skipped[name] = str(exc)
            say(f"[{experiment.key}] skipping {name}: {exc}")
            continue
        for mname in experiment.methods:
            method = methods[mname]
            t0 = time.perf_counter()
            try:
                res = evaluate_method(
                    method, X, y, dataset=name, n_splits=n_splits,
                    preprocessing=experiment.preprocessing, random_state=random_state,
                    inner_folds=inner_folds, max_samples=experiment.max_samples, n_jobs=n_jobs,
                )
            except Exception as exc:  # one failing method must not lose the whole table
                res = MethodResult(name, mname, method.paper_column, np.array([]),
                                   preprocessing=experiment.preprocessing,
                                   n_samples_total=len(y), error=f"{type(exc).__name__}: {exc}")
            out.results.append(res)
            if res.error:
                say(f"[{experiment.key}] {name:<12} {mname:<16} FAILED {res.error}")
            else:
                warn = f"  ({res.n_warnings} convergence warnings)" if res.n_warnings else ""
                say(f"[{experiment.key}] {name:<12} {mname:<16} {100 * res.mean:6.2f} "
                    f"± {100 * res.std:5.2f}  {time.perf_counter() - t0:7.1f} s{warn}")
    out.settings["seconds"] = round(time.perf_counter() - start, 1)
    return out
