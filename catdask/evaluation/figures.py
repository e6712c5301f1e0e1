"""The paper's Figures 1-3: K-CQS beside K-PCA and K-MC-FLD for three-class data sets."""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: The three RBF widths drawn (the paper's range is [0.1, 0.8]).
SIGMAS = {"small": 0.1, "medium": 0.4, "large": 0.8}


def sigma_to_gamma(sigma):
    """``gamma = 1 / (2 sigma^2)`` for ``k(x, x') = exp(-||x - x'||^2 / (2 sigma^2))``."""
    return 1.0 / (2.0 * sigma**2)


def _prepare(X, y, max_samples, seed, scaling="minmax"):
    from sklearn.model_selection import StratifiedShuffleSplit
    from sklearn.preprocessing import MinMaxScaler, StandardScaler

    X = np.asarray(X, dtype=float)
    y = np.asarray(y)
    if max_samples is not None and len(y) > max_samples:
        sss = StratifiedShuffleSplit(n_splits=1, train_size=max_samples, random_state=seed)
        idx = np.sort(next(sss.split(X, y))[0])
        X, y = X[idx], y[idx]
    scaler = {"minmax": MinMaxScaler(), "standardise": StandardScaler()}[scaling]
    return scaler.fit_transform(X), y


def category_space_panels(X, y, sigma, axes, *, origins=("class",), n_restarts=3,
                          random_state=0, name=""):
    """Fit K-CQS (one per origin), K-PCA and K-MC-FLD at one sigma and draw them."""
    from sklearn.decomposition import KernelPCA

    import catdask
    from catdask.plotting import plot_category_space, plot_coordinates

    from .baselines import KernelFisherDiscriminant

    if isinstance(origins, str):
        origins = (origins,)
    gamma = sigma_to_gamma(sigma)
    K = len(np.unique(y))
    tag = f"{name}, " if name else ""
    fitted = {}
    for ax, origin in zip(axes, origins):
        kcqs = catdask.KernelCategorySpace(
            kernel="rbf", gamma=gamma, origin=origin, n_restarts=n_restarts,
            random_state=random_state, certify=False,
        ).fit(X, y)
        plot_category_space(kcqs, X, y, ax=ax, title=f"{tag}K-CQS ({origin}), σ={sigma:g}")
        fitted[f"K-CQS ({origin})"] = kcqs
    kpca = KernelPCA(n_components=K, kernel="rbf", gamma=gamma).fit(X)
    kfd = KernelFisherDiscriminant(gamma=gamma).fit(X, y)
    n = len(origins)
    plot_coordinates(kpca.transform(X), y, ax=axes[n], kind="2d",
                     axis_labels=[f"component {j + 1}" for j in range(K)],
                     title=f"{tag}K-PCA, σ={sigma:g}")
    plot_coordinates(kfd.transform(X), y, ax=axes[n + 1], kind="2d",
                     axis_labels=[f"discriminant {j + 1}" for j in range(K - 1)],
                     title=f"{tag}K-MC-FLD, σ={sigma:g}")
    fitted.update({"K-PCA": kpca, "K-MC-FLD": kfd})
    return fitted


def paper_figure(data, sigma, path, *, origins=("class", "global"), n_restarts=3,
                 random_state=0, max_samples=600, dpi=80, scaling="minmax"):
    """One grid like the paper's figures, written as a PNG to ``path`` (returned): rows = the
    three-class data sets of ``data`` (name -> (X, y)), columns = K-CQS, K-PCA, K-MC-FLD."""
    # A bare Figure renders with Agg without touching pyplot's global backend or state.
    from matplotlib.figure import Figure

    if isinstance(origins, str):
        origins = (origins,)
    names = list(data)
    n_cols = len(origins) + 2
    fig = Figure(figsize=(4.2 * n_cols, 3.9 * len(names)))
    for r, name in enumerate(names):
        X, y = _prepare(*data[name], max_samples, random_state, scaling)
        axes = [fig.add_subplot(len(names), n_cols, n_cols * r + c + 1,
                                projection="3d" if c < len(origins) else None)
                for c in range(n_cols)]
        category_space_panels(X, y, sigma, axes, origins=origins, n_restarts=n_restarts,
                              random_state=random_state, name=name)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _save_small_png(fig, path, dpi)
    return path


def _save_small_png(fig, path, dpi):
    """Save as a 256-colour palette PNG (a third of the RGBA size; scatter plots lose nothing
    visible). Pillow is a dependency of matplotlib."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, dpi=dpi, format="png")
    buf.seek(0)
    with Image.open(buf) as im:
        im.convert("RGB").quantize(colors=256).save(path, format="PNG", optimize=True)


def paper_figures(datasets=("wine", "iris", "seeds"), out_dir="docs/figures", *,
                  loader=None, sigmas=None, origins=("class", "global"), n_restarts=3,
                  random_state=0, max_samples=600, scaling="minmax", progress=print):
    """Figures 1-3: the paths of one grid PNG per sigma (:func:`paper_figure`). Data sets that
    cannot be loaded (FileNotFoundError) or do not have three classes are skipped, said through
    ``progress``."""
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
    for label, sigma in sigmas.items():
        path = Path(out_dir) / f"category_space_{label}_sigma{sigma:g}.png"
        paper_figure(data, sigma, path, origins=origins, n_restarts=n_restarts,
                     random_state=random_state, max_samples=max_samples, scaling=scaling)
        say(f"[figures] wrote {path} ({path.stat().st_size // 1024} KB)")
        paths.append(path)
    return paths
