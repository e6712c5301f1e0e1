"""The paper's Figures 1-3: K-CQS beside K-PCA and K-MC-FLD for three-class data sets.

The paper shows, for small, medium and large RBF widths sigma (in [0.1, 0.8] on standardised
data, ``gamma = 1 / (2 sigma^2)``), one row per three-class data set and the columns K-CQS (3-D
category space), K-PCA and K-MC-FLD. :func:`paper_figure` draws one such grid for one sigma;
:func:`paper_figures` draws one grid PNG per (sigma, K-CQS origin). The paper's rows are
vertebral, thyroid, wine, iris, seeds (the first two are not available here). Its Figure 1 is
captioned "medium sigma" but labelled ``fig:category-space-reduced``, its Figure 2 captioned
"small sigma" but labelled ``...-md-sigma``; we name files by the sigma used.

Every data set is standardised on all its rows (a picture of the fitted space, no test split)
and, above ``max_samples`` rows, subsampled (stratified, seeded).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["SIGMAS", "sigma_to_gamma", "category_space_panels", "paper_figure", "paper_figures"]

#: The three RBF widths drawn (the paper's range is [0.1, 0.8]).
SIGMAS = {"small": 0.1, "medium": 0.4, "large": 0.8}


def sigma_to_gamma(sigma):
    """``gamma = 1 / (2 sigma^2)`` for ``k(x, x') = exp(-||x - x'||^2 / (2 sigma^2))``."""
    return 1.0 / (2.0 * sigma**2)


def _prepare(X, y, max_samples, seed):
    from sklearn.model_selection import StratifiedShuffleSplit
    from sklearn.preprocessing import StandardScaler

    X = np.asarray(X, dtype=float)
    y = np.asarray(y)
    if max_samples is not None and len(y) > max_samples:
        sss = StratifiedShuffleSplit(n_splits=1, train_size=max_samples, random_state=seed)
        idx = np.sort(next(sss.split(X, y))[0])
        X, y = X[idx], y[idx]
    return StandardScaler().fit_transform(X), y


def category_space_panels(X, y, sigma, axes, *, origin="class", n_restarts=3, random_state=0,
                          name=""):
    """Fit K-CQS, K-PCA and K-MC-FLD at one sigma and draw them on three Axes.

    ``axes[0]`` may be a 3-D Axes (3-D scatter) or a 2-D one (view along (1, 1, 1)).

    Returns
    -------
    dict
        ``{"K-CQS": estimator, "K-PCA": ..., "K-MC-FLD": ...}`` (fitted).
    """
    from sklearn.decomposition import KernelPCA

    import catdask
    from catdask.plotting import plot_category_space, plot_coordinates

    from .baselines import KernelFisherDiscriminant

    gamma = sigma_to_gamma(sigma)
    K = len(np.unique(y))
    kcqs = catdask.KernelCategorySpace(
        kernel="rbf", gamma=gamma, origin=origin, n_restarts=n_restarts,
        random_state=random_state, certify=False,
    ).fit(X, y)
    kpca = KernelPCA(n_components=K, kernel="rbf", gamma=gamma).fit(X)
    kfd = KernelFisherDiscriminant(gamma=gamma).fit(X, y)
    tag = f"{name}, " if name else ""
    plot_category_space(kcqs, X, y, ax=axes[0], title=f"{tag}K-CQS ({origin}), σ={sigma:g}")
    plot_coordinates(kpca.transform(X), y, ax=axes[1], kind="2d",
                     axis_labels=[f"component {j + 1}" for j in range(K)],
                     title=f"{tag}K-PCA, σ={sigma:g}")
    plot_coordinates(kfd.transform(X), y, ax=axes[2], kind="2d",
                     axis_labels=[f"discriminant {j + 1}" for j in range(K - 1)],
                     title=f"{tag}K-MC-FLD, σ={sigma:g}")
    return {"K-CQS": kcqs, "K-PCA": kpca, "K-MC-FLD": kfd}


def paper_figure(data, sigma, path, *, origin="class", n_restarts=3, random_state=0,
                 max_samples=600, three_d=True):
    """One grid like the paper's figures: rows = data sets, columns = K-CQS, K-PCA, K-MC-FLD.

    Parameters
    ----------
    data : dict of str to (X, y)
        Three-class data sets, in row order.
    sigma : float
        RBF width on standardised data.
    path : str or Path
        PNG file to write.
    origin : {"class", "global"}, default="class"
        K-CQS origin (``"class"`` is the paper's Algorithm 1).
    three_d : bool, default=True
        K-CQS as a 3-D scatter; False draws the view along (1, 1, 1).

    Returns
    -------
    pathlib.Path
    """
    # A bare Figure renders with Agg without touching pyplot's global backend or state.
    from matplotlib.figure import Figure

    names = list(data)
    fig = Figure(figsize=(13, 4.0 * len(names)))
    for r, name in enumerate(names):
        X, y = _prepare(*data[name], max_samples, random_state)
        ax0 = fig.add_subplot(len(names), 3, 3 * r + 1, projection="3d" if three_d else None)
        ax1 = fig.add_subplot(len(names), 3, 3 * r + 2)
        ax2 = fig.add_subplot(len(names), 3, 3 * r + 3)
        category_space_panels(X, y, sigma, [ax0, ax1, ax2], origin=origin,
                              n_restarts=n_restarts, random_state=random_state, name=name)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    return path


def paper_figures(datasets=("wine", "iris", "seeds"), out_dir="docs/results/figures", *,
                  loader=None, sigmas=None, origins=("class", "global"), n_restarts=3,
                  random_state=0, max_samples=600, progress=print):
    """Figures 1-3: one grid PNG per (sigma, origin) over the three-class data sets.

    Data sets that cannot be loaded (:class:`FileNotFoundError`) or do not have three classes
    are skipped with a message through ``progress``.

    Returns
    -------
    list of pathlib.Path
    """
    if loader is None:
        from .data import load_xy as loader
    say = progress or (lambda *_: None)
    sigmas = SIGMAS if sigmas is None else sigmas
    data = {}
    for name in datasets:
        try:
            X, y = loader(name)
        except FileNotFoundError as exc:
            say(f"[figures] skipping {name}: {exc}")
            continue
        if len(np.unique(y)) != 3:
            say(f"[figures] skipping {name}: {len(np.unique(y))} classes (figures need 3)")
            continue
        data[name] = (X, y)
    paths = []
    if not data:
        return paths
    for origin in origins:
        for label, sigma in sigmas.items():
            path = Path(out_dir) / f"category_space_{label}_sigma{sigma:g}_{origin}.png"
            paper_figure(data, sigma, path, origin=origin, n_restarts=n_restarts,
                         random_state=random_state, max_samples=max_samples)
            say(f"[figures] wrote {path}")
            paths.append(path)
    return paths
